"""Validation of `additional-conditions` filters: one boolean predicate over the table's columns.

Why this module exists: the filter of an `execute-snapshot` signal is ANDed into every chunk
query, `... WHERE <keyset> AND (<filter>) ORDER BY <key> LIMIT n`. Whoever can write a signal
(a row in the signal table, a message on a Kafka topic) would otherwise run SQL with dblog's
privileges: close the parenthesis (`1=1) OR (1=1`), start a second statement (`; DROP …`),
hide SQL in a comment (MySQL *executes* `/*! … */` and MariaDB `/*M! … */`), read other tables
through a subquery, stall the server (`SLEEP`, `BENCHMARK`), read files (`LOAD_FILE`) or write
them (`INTO OUTFILE`).

Theory of operation, four independent gates; a filter must pass all of them:

1. The raw text, scanned the way MySQL's lexer reads it (quotes with backslash escapes and
   doubled quotes, backtick identifiers): outside quoted text no `;`, no comment opener
   (`--`, `#`, `/*`, `*/`), no control or invisible characters, balanced parentheses at
   most `MAX_DEPTH` deep, no unterminated quote. This does not trust sqlglot's tokenizer.
2. sqlglot (MySQL dialect) tokenizes and parses it: exactly one expression, no comment that
   the tokenizer kept, no `INTO`.
3. Every node of the tree is on an allow-list (`ALLOWED`): comparisons, AND/OR/NOT, IS [NOT]
   NULL, IN over literal values, BETWEEN, LIKE [ESCAPE], arithmetic, COALESCE/LOWER/UPPER,
   literals, typed date literals of a constant string, and unqualified columns of the table.
   Nothing that reads the clock or the session (`NOW()`, `@x`, `@@x`), no subquery.
4. What is returned is sqlglot's re-rendering of the tree, every identifier backtick-quoted,
   never the user's text. Strings that sqlglot would spell with a backslash (a backslash,
   newline, NUL …) are re-spelled `_utf8mb4 x'…'`, because a server in NO_BACKSLASH_ESCAPES
   mode reads backslashes literally; quotes are doubled. The rendering is scanned again in
   both backslash modes and parsed again: it must read back as itself.
"""

from __future__ import annotations

import re
import unicodedata

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from dblog.signals.model import SignalError

MAX_LENGTH = 4000
MAX_DEPTH = 64  # parentheses nesting; also keeps sqlglot's recursive parser far from its limit

ALLOWED = (
    "allowed: comparisons (= <> != < <= > >= <=>), AND, OR, NOT, IS [NOT] NULL/TRUE/FALSE, "
    "IN (literal, …), BETWEEN, [NOT] LIKE [ESCAPE], arithmetic (+ - * / DIV % MOD), "
    "COALESCE/IFNULL, LOWER, UPPER, string/number/0x literals, DATE/TIME/DATETIME/TIMESTAMP "
    "'literal', NULL, TRUE, FALSE and the table's own columns without a table name"
)

# Nodes whose value is true/false: the top of a filter must be one of them.
_BOOLEAN = (
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Is, exp.In, exp.Between, exp.Like, exp.Escape,
)
# Nodes a filter may be built from (IN lists, date literals and columns get extra checks).
_ALLOWED_NODES = _BOOLEAN + (
    exp.Paren, exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.HexString,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg,
    exp.Coalesce, exp.Lower, exp.Upper,
)
_TEXT_CHARSET = "_utf8mb4"  # strings with backslashes go out as _utf8mb4 x'…' (see _without_backslashes)
# Typed date literals: DATE '…' and DATETIME/TIME '…' come back as CAST('…' AS …),
# TIMESTAMP '…' as TIMESTAMP('…'), DATE('…') as DATE('…'); all of a constant string.
_DATE_TYPES = {
    exp.DataType.Type.DATE, exp.DataType.Type.DATETIME, exp.DataType.Type.TIME,
    exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
}
_SUBQUERY = (exp.Query, exp.Subquery, exp.Exists, exp.Any, exp.All)
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE_TEXT = re.compile(r"[\w:\-./ +]{1,40}")


def validate_condition(predicate: str, columns: set[str] | None = None) -> str:
    """The filter re-rendered by sqlglot (MySQL dialect, identifiers quoted), safe to put
    inside `AND (…)`, or SignalError naming the problem and what is allowed.

    `columns`: the table's column names (compared case-insensitively, as MySQL does); None
    accepts any unqualified column name.
    """
    if not isinstance(predicate, str):
        raise SignalError(f"the filter must be text, got {type(predicate).__name__}")
    if not predicate.strip():
        raise SignalError('the filter is empty; write one predicate over the table\'s columns, e.g. "amount > 100"')
    if len(predicate) > MAX_LENGTH:
        raise SignalError(
            f"the filter is {len(predicate)} characters long; at most {MAX_LENGTH} are accepted "
            "(for long value lists use IN or BETWEEN)"
        )
    _scan(predicate, _quote(predicate), backslash_escapes=True)
    tree = _parse(predicate)
    _check_tree(tree, predicate, {name.lower() for name in columns} if columns is not None else None)
    try:
        rendered = _without_backslashes(tree).sql(dialect="mysql", identify=True)
    except RecursionError:
        raise _too_deep(predicate) from None
    _check_rendering(rendered, predicate)
    return rendered


def _quote(predicate: str) -> str:
    """The filter as shown in messages: quoted, and cut short when long."""
    return repr(predicate if len(predicate) <= 120 else predicate[:117] + "...")


def _scan(text: str, shown: str, backslash_escapes: bool) -> None:
    """Gate 1: read `text` as MySQL's lexer does and reject what could leave the predicate."""
    opened: list[int] = []  # where each unclosed '(' is
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char in "'\"`":
            i = _end_of_quoted(text, i, shown, backslash_escapes)
            continue
        where = f"at character {i + 1}"
        if char == ";":
            raise SignalError(
                f"the filter {shown} contains ';' ({where}); give a single predicate, not statements "
                "(a ';' inside a quoted string is fine)"
            )
        for opener in ("--", "#", "/*", "*/"):
            if text.startswith(opener, i):
                raise SignalError(
                    f"the filter {shown} contains a comment marker {opener!r} ({where}); comments are not "
                    "allowed, MySQL runs /*! … */ text as SQL (to subtract a negative number write '- -1')"
                )
        if char == "(":
            opened.append(i)
            if len(opened) > MAX_DEPTH:
                raise SignalError(
                    f"the filter {shown} nests parentheses more than {MAX_DEPTH} deep ({where}); "
                    "write a flatter predicate"
                )
        elif char == ")":
            if not opened:
                raise SignalError(
                    f"the filter {shown} is not a single SQL predicate: its parentheses are unbalanced, the "
                    f"')' {where} closes nothing; every '(' must be closed inside the filter"
                )
            opened.pop()
        elif char not in " \t\r\n" and unicodedata.category(char) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}:
            raise SignalError(
                f"the filter {shown} contains the invisible or control character U+{ord(char):04X} ({where}); "
                "outside quoted strings only printable characters, spaces, tabs and newlines are allowed"
            )
        i += 1
    if opened:
        raise SignalError(
            f"the filter {shown} is not a single SQL predicate: its parentheses are unbalanced, the '(' at "
            f"character {opened[-1] + 1} is never closed; every '(' must be closed inside the filter"
        )


def _end_of_quoted(text: str, start: int, shown: str, backslash_escapes: bool) -> int:
    """Index just past the quoted string or identifier that opens at `start`."""
    quote = text[start]
    i, n = start + 1, len(text)
    while i < n:
        char = text[i]
        if char == "\\" and quote != "`" and backslash_escapes:
            i += 2
            continue
        if char == quote:
            if i + 1 < n and text[i + 1] == quote:  # '' inside '…', `` inside `…`
                i += 2
                continue
            return i + 1
        i += 1
    raise SignalError(
        f"the filter {shown} is not a single SQL predicate: the {quote} opened at character {start + 1} is "
        f"never closed; close every quoted string ('…') and quoted name (`…`)"
    )


def _too_deep(predicate: str) -> SignalError:
    return SignalError(
        f"the filter {_quote(predicate)} is nested too deeply (long chains of NOT or unary minus); "
        "write a flatter predicate"
    )


def _parse(predicate: str) -> exp.Expression:
    """Gate 2: one expression, as sqlglot reads it."""
    shown = _quote(predicate)
    try:
        tokens = sqlglot.tokenize(predicate, read="mysql")
    except SqlglotError as error:
        raise SignalError(f"the filter {shown} cannot be read as SQL ({_first_line(error)}); {ALLOWED}") from None
    for token in tokens:
        if token.comments:
            raise SignalError(f"the filter {shown} contains a comment; comments are not allowed")
        if token.token_type == TokenType.SEMICOLON:
            raise SignalError(f"the filter {shown} contains ';'; give a single predicate, not statements")
        if token.token_type == TokenType.INTO:
            raise SignalError(
                f"the filter {shown} is not a single SQL predicate: INTO (OUTFILE, DUMPFILE, @variable) is "
                f"not allowed; {ALLOWED}"
            )
    try:
        trees = sqlglot.parse(predicate, read="mysql")
    except SqlglotError as error:
        raise SignalError(
            f"the filter {shown} is not a single SQL predicate ({_first_line(error)}); {ALLOWED}"
        ) from None
    except RecursionError:
        raise _too_deep(predicate) from None
    trees = [tree for tree in trees if tree is not None]
    if len(trees) != 1:
        raise SignalError(f"the filter {shown} is not a single SQL predicate; give exactly one")
    return trees[0]


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _check_tree(tree: exp.Expression, predicate: str, columns: set[str] | None) -> None:
    """Gate 3: every node on the allow-list, columns of this table only, boolean on top."""
    shown = _quote(predicate)
    if any(isinstance(node, _SUBQUERY) for node in tree.walk()):
        raise SignalError(
            f"the filter {shown} contains a subquery (SELECT, UNION, EXISTS, ANY or ALL); a filter may only "
            f"read the row being scanned; {ALLOWED}"
        )
    stack = [tree]
    while stack:
        node = stack.pop()
        if _is_date_literal(node) or _is_hex_text(node):
            continue  # checked whole: constants of an allowed form
        if not isinstance(node, _ALLOWED_NODES):
            raise SignalError(f"the filter {shown} uses {_describe(node)}, which is not allowed; {ALLOWED}")
        if isinstance(node, exp.Column):
            _check_column(node, shown, columns)
            continue
        if isinstance(node, exp.Literal) and not node.is_string and not _NUMBER.fullmatch(node.this):
            raise SignalError(f"the filter {shown} has the malformed number {node.this!r}; {ALLOWED}")
        if isinstance(node, exp.HexString) and len(node.this) % 2:
            raise SignalError(
                f"the filter {shown} has the hex literal 0x{node.this} with an odd number of digits; "
                f"write an even number (0x0{node.this})"
            )
        if isinstance(node, exp.In):
            _check_in_list(node, shown)
        stack.extend(node.iter_expressions())
    top = tree.unnest()
    if not isinstance(top, _BOOLEAN):
        raise SignalError(
            f"the filter {shown} is not a boolean condition; compare something, e.g. \"amount > 100\" "
            "or \"note IS NOT NULL\""
        )


def _check_column(node: exp.Column, shown: str, columns: set[str] | None) -> None:
    if isinstance(node.this, exp.Star):
        raise SignalError(f"the filter {shown} uses *, which is not allowed; name a column")
    if node.table or node.args.get("db") or node.args.get("catalog"):
        raise SignalError(
            f"the filter {shown} names {node.sql(dialect='mysql')}; refer to the table's columns without a "
            "table name: a filter reads only the row being scanned"
        )
    if columns is not None and node.name.lower() not in columns:
        known = ", ".join(sorted(columns))
        known = known if len(known) <= 300 else known[:297] + "..."
        raise SignalError(
            f"the filter {shown} names column {node.name!r}, which the table does not have; its columns are: {known}"
        )


def _check_in_list(node: exp.In, shown: str) -> None:
    values = node.expressions
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field") or not values:
        raise SignalError(f"the filter {shown} uses IN without a list of values; write IN ('a', 'b', …)")
    for value in values:
        if not _is_constant(value):
            raise SignalError(
                f"the filter {shown} has {value.sql(dialect='mysql')} in an IN list; IN takes literal values "
                "only (strings, numbers, NULL, TRUE/FALSE, date literals)"
            )


def _is_constant(node: exp.Expression) -> bool:
    if isinstance(node, exp.Neg):
        node = node.this
    return (
        isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.HexString))
        or _is_date_literal(node) or _is_hex_text(node)
    )


def _is_date_literal(node: exp.Expression) -> bool:
    """DATE '…', TIME '…', DATETIME '…', TIMESTAMP '…', DATE('…'): a date type of a constant string."""
    def constant_string(value: object) -> bool:
        return isinstance(value, exp.Literal) and value.is_string and bool(_DATE_TEXT.fullmatch(value.this))

    if isinstance(node, exp.Cast):
        to = node.args.get("to")
        extra = set(node.args) - {"this", "to", "_type"}
        return (
            constant_string(node.this) and isinstance(to, exp.DataType) and to.this in _DATE_TYPES
            and not to.expressions and not any(node.args.get(key) for key in extra)
        )
    if isinstance(node, (exp.Timestamp, exp.TsOrDsToDate)):
        return constant_string(node.this) and not any(
            value for key, value in node.args.items() if key not in {"this", "_type"}
        )
    return False


def _is_hex_text(node: exp.Expression) -> bool:
    """_utf8mb4 x'…': text given as the hex of its UTF-8 bytes (how strings with backslashes
    are rendered; accepted back so that a rendering validates again)."""
    if not isinstance(node, exp.Introducer) or str(node.name).lower() != _TEXT_CHARSET:
        return False
    digits = node.expression
    if not isinstance(digits, exp.HexString) or len(digits.this) % 2:
        return False
    try:
        bytes.fromhex(digits.this).decode("utf-8")
    except ValueError:
        return False
    return True


def _without_backslashes(tree: exp.Expression) -> exp.Expression:
    """String literals whose MySQL spelling needs a backslash (a backslash, newline, NUL …),
    rewritten as _utf8mb4 x'…'. sqlglot spells them with backslash escapes, which a server in
    NO_BACKSLASH_ESCAPES mode reads as different text; hex means the same in every mode."""
    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal) and node.is_string and "\\" in node.sql(dialect="mysql"):
            return exp.Introducer(
                this=exp.Var(this=_TEXT_CHARSET), expression=exp.HexString(this=node.this.encode("utf-8").hex())
            )
        return node

    return tree.transform(rewrite)


def _describe(node: exp.Expression) -> str:
    if isinstance(node, (exp.Parameter, exp.SessionParameter)):
        return f"the variable {node.sql(dialect='mysql')} (user @x and system @@x variables)"
    if isinstance(node, exp.Placeholder):
        return "a placeholder"
    if isinstance(node, exp.PropertyEQ):
        return "an assignment (:=)"
    if isinstance(node, exp.Anonymous):
        return f"the function {node.name.upper()}"
    if isinstance(node, exp.Case):
        return "CASE"
    if isinstance(node, exp.Introducer):
        return f"the character set introducer {node.sql(dialect='mysql')} (only {_TEXT_CHARSET} x'…' of UTF-8 text)"
    if isinstance(node, (exp.Cast, exp.Timestamp, exp.TsOrDsToDate)) and isinstance(node.this, exp.Literal):
        return f"the date literal {node.sql(dialect='mysql')} (write DATE 'YYYY-MM-DD' or TIMESTAMP 'YYYY-MM-DD hh:mm:ss')"
    if isinstance(node, exp.Cast):
        return f"CAST/CONVERT ({node.sql(dialect='mysql')})"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    if isinstance(node, exp.Tuple):
        return "a row value (a, b)"
    if isinstance(node, exp.Alias):
        return "an alias (a second expression after the first)"
    return f"{type(node).__name__} ({node.sql(dialect='mysql')[:60]})"


def _check_rendering(rendered: str, predicate: str) -> None:
    """Gate 4: the text we hand out must read back, under either backslash mode, as itself."""
    shown = _quote(predicate)
    for backslash_escapes in (True, False):
        try:
            _scan(rendered, repr(rendered), backslash_escapes)
        except SignalError as error:
            raise SignalError(f"the filter {shown} could not be rendered safely ({error}); {ALLOWED}") from None
    try:
        again = sqlglot.parse(rendered, read="mysql")
        same = len(again) == 1 and again[0] is not None and again[0].sql(dialect="mysql", identify=True) == rendered
    except (SqlglotError, RecursionError):
        same = False
    if not same:
        raise SignalError(f"the filter {shown} could not be rendered so that it reads back the same; {ALLOWED}")
