"""Server error codes come only from dblog/mysql/server_errors.py (issue 37, item 5): outside it,
no MySQL/MariaDB error number is written by hand where an error's code is read or made.

Scanned: every Python file of the repository but the tests (which assert what a server answered,
or feed the code a given error). Flagged, when the number lies in the servers' and clients' error
ranges (1000-5999: server 1000-1999 and 3000+, client 2000-2999):
- a comparison of an error's code with a number, or a tuple/set of them: `error_code(e) == 1146`,
  `e.args[0] not in (1205, 1213)`, `e.errno != 2013`, `code in (2002, 2003)` after
  `code = error_code(e)`; also through a module's own name for the number (`_ER_X = 1146`,
  `_CODES = SERVER_UNREACHABLE | {1317}`);
- an error made with such a number as its code: `OperationalError(2013, …)`, directly or through
  such a name.
Named codes imported from server_errors are what the rest of the code uses instead.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOME = pathlib.Path("dblog/mysql/server_errors.py")
ERROR_NUMBERS = range(1000, 6000)
_SKIPPED_DIRS = {"tests", ".git", "build", "dist", ".venv", "site"}


def _is_code_read(node: ast.AST, code_names: set[str]) -> bool:
    """An expression that reads an error's code."""
    if isinstance(node, ast.Call):
        func = node.func
        return (isinstance(func, ast.Name) and func.id == "error_code") or (
            isinstance(func, ast.Attribute) and func.attr == "error_code")
    if isinstance(node, ast.Subscript):  # error.args[0]
        return (isinstance(node.value, ast.Attribute) and node.value.attr == "args"
                and isinstance(node.slice, ast.Constant) and node.slice.value == 0)
    if isinstance(node, ast.Attribute):
        return node.attr == "errno"
    if isinstance(node, ast.IfExp):  # error.args[0] if error.args else None
        return _is_code_read(node.body, code_names) or _is_code_read(node.orelse, code_names)
    return isinstance(node, ast.Name) and node.id in code_names


def _numbers(node: ast.AST, constants: dict[str, ast.AST], seen: frozenset[str] = frozenset()) -> list[int]:
    """The error numbers an expression spells by hand: a literal, a tuple/list/set of them,
    frozenset(...) or set(...) of one, a union with one, or a module name bound to any of these."""
    if isinstance(node, ast.Constant):
        value = node.value
        return [value] if type(value) is int and value in ERROR_NUMBERS else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for element in node.elts for n in _numbers(element, constants, seen)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return [n for arg in node.args for n in _numbers(arg, constants, seen)]
    if isinstance(node, ast.BinOp):
        return _numbers(node.left, constants, seen) + _numbers(node.right, constants, seen)
    if isinstance(node, ast.Name) and node.id in constants and node.id not in seen:
        return _numbers(constants[node.id], constants, seen | {node.id})
    return []


def _is_error_class(func: ast.AST) -> bool:
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name.endswith(("Error", "Exception"))


def hand_written_codes(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` writes an error number by hand, as "line N: code" lines."""
    tree = ast.parse(source, filename)
    constants: dict[str, ast.AST] = {}  # names bound once, anywhere in the module
    code_names: set[str] = set()  # names bound to an error's code
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value
                    if _is_code_read(node.value, set()):
                        code_names.add(target.id)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        numbers: list[int] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_code_read(side, code_names) for side in sides):
                numbers = [n for side in sides for n in _numbers(side, constants)]
        elif isinstance(node, ast.Call) and _is_error_class(node.func) and node.args:
            numbers = _numbers(node.args[0], constants)
        if numbers:
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node)[:120]} (error numbers {sorted(set(numbers))})"))
    return [line for _, line in sorted(found)]


def _sources(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(path for path in root.rglob("*.py")
                  if not _SKIPPED_DIRS & set(path.relative_to(root).parts[:-1])
                  and path.relative_to(root) != HOME)


def scan(root: pathlib.Path) -> dict[str, list[str]]:
    """Every file under `root` that writes an error number by hand, with where."""
    return {str(path.relative_to(root)): found for path in _sources(root)
            if (found := hand_written_codes(path.read_text(encoding="utf-8"), str(path)))}


def test_error_codes_are_named_only_in_server_errors():
    assert len(_sources(ROOT)) > 100  # the scan reaches the code (dblog, its signals, benchmarks, rigs)
    found = scan(ROOT)
    assert not found, ("error numbers written by hand (name them in dblog/mysql/server_errors.py and import "
                       "the name):\n" + "\n".join(f"{path}: {line}" for path, lines in found.items() for line in lines))


@pytest.mark.parametrize("source", [
    "if error_code(error) == 1146: pass",
    "if code in (2002, 2003, 2005):\n    pass\ncode = error_code(error)",
    "if error.args[0] not in (1205, 1213): raise",
    "ok = error.errno != 2013",
    "_ER_NO_SUCH_TABLE = 1146\nif error_code(error) == _ER_NO_SUCH_TABLE: pass",
    "_CODES = SERVER_UNREACHABLE | {1317}\nif code not in _CODES: raise\ncode = server_errors.error_code(e)",
    "_LOST = 2013\nraise pymysql.err.OperationalError(_LOST, 'gone')",
    "raise TlsError(2026, 'no TLS')",
    "_REFUSED = {1044, 1045}\ncode = e.args[0] if e.args else None\nif code in _REFUSED: raise",
])
def test_hand_written_codes_are_found(source):
    assert hand_written_codes(source)


@pytest.mark.parametrize("source", [
    "if error_code(error) == ER_NO_SUCH_TABLE: pass",
    "if error_code(error) not in LOCK_CONFLICT: raise",
    "raise OperationalError(CR_SERVER_LOST, 'gone')",
    "if len(batch) == 2000: flush()",  # a number, but not an error's code
    "raise OSError(error.errno, 'cannot listen')",
    "if error.args[0] is not None and count > 1000: pass",
])
def test_named_codes_and_other_numbers_pass(source):
    assert not hand_written_codes(source)
