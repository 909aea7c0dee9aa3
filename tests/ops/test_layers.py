"""The layering is checked, not just drawn: import-linter's contracts in pyproject.toml
(core imports nothing of dblog or any I/O library, each layer only those below it, dblog.signals
only the core, sinks no binlog or chunk reading, no other sink importing the Kafka sink's
package, whose parts import downward to the `KafkaSink` that composes them, and nothing of dblog
the test rigs in lab/); and the tests' own: test modules share helpers through tests/support
only."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_imports_follow_the_layers():
    lint = shutil.which("lint-imports")
    assert lint is not None, "lint-imports is missing: pip install -e '.[test]'"
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _test_module_imports(source: str) -> list[str]:
    """The test modules (`test_*`, `conftest`) a module's source imports."""
    tree = ast.parse(source)
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    return [name for name in names if name.rsplit(".", 1)[-1].startswith(("test_", "conftest"))]


def test_test_modules_share_helpers_through_tests_support_only():
    """tests/README.md: test modules import helpers from `support` only, never from one another."""
    found = {str(path.relative_to(ROOT)): set(imported) for path in sorted((ROOT / "tests").rglob("*.py"))
             if (imported := _test_module_imports(path.read_text()))}
    assert not found, f"move these helpers into tests/support: {found}"
