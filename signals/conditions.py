"""Validation of `additional-conditions` filters: one boolean predicate, nothing more.

The filter is ANDed into every chunk query (`WHERE <keyset> AND (<filter>)`), so a filter that
could close the parenthesis, start a second statement, hide text in a comment (MySQL runs
`/*! ... */`), read another table or call a function with side effects would let whoever can
write a signal run SQL as dblog. The filter is tokenized and parsed on its own with sqlglot
(MySQL dialect); anything outside a small allow-list of node types is rejected, column
references must name columns of the table, and what goes into the query is sqlglot's
re-rendering of the parsed tree with every identifier quoted, never the user's text.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from signals.model import SignalError

MAX_LENGTH = 4000

# Nodes a predicate may be built from: comparisons, boolean logic, arithmetic, literals,
# unqualified columns and a few pure functions.
_BOOLEAN = (
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Is, exp.In, exp.Between, exp.Like,
)
_ALLOWED = _BOOLEAN + (
    exp.Paren, exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.HexString,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Coalesce, exp.Lower, exp.Upper,
)
_ALLOWED_TEXT = (
    "comparisons (= <> != < <= > >= <=>), AND/OR/NOT, IS [NOT] NULL, IN (literal, …), BETWEEN, "
    "LIKE, arithmetic, COALESCE/LOWER/UPPER, literals and the table's own columns"
)


def validate_condition(predicate: str, columns: set[str] | None = None) -> str:
    """Returns the predicate re-rendered (MySQL dialect, identifiers quoted) or raises SignalError."""
    if not isinstance(predicate, str) or not predicate.strip():
        raise SignalError("the filter is empty; write a predicate such as \"amount > 100\"")
    if len(predicate) > MAX_LENGTH:
        raise SignalError(f"the filter is {len(predicate)} characters long; at most {MAX_LENGTH} are accepted")
    try:
        tokens = sqlglot.tokenize(predicate, read="mysql")
    except SqlglotError as error:
        raise SignalError(f"the filter {predicate!r} cannot be read as SQL ({error})") from None
    for token in tokens:
        if token.comments:
            raise SignalError(f"the filter {predicate!r} contains a comment; comments are not allowed")
        if token.token_type == TokenType.SEMICOLON:
            raise SignalError(f"the filter {predicate!r} contains ';'; give a single predicate, not statements")
    try:
        trees = sqlglot.parse(predicate, read="mysql")
    except SqlglotError as error:
        raise SignalError(
            f"the filter {predicate!r} is not a single SQL predicate ({str(error).splitlines()[0]})"
        ) from None
    if len(trees) != 1 or trees[0] is None:
        raise SignalError(f"the filter {predicate!r} must be exactly one predicate")
    tree = trees[0]
    _check(tree, predicate, {name.lower() for name in columns} if columns is not None else None)
    top = tree.unnest() if isinstance(tree, exp.Paren) else tree
    if not isinstance(top, _BOOLEAN):
        raise SignalError(f"the filter {predicate!r} is not a boolean condition; compare something, e.g. \"a > 1\"")
    return tree.sql(dialect="mysql", identify=True)


def _check(tree: exp.Expression, predicate: str, columns: set[str] | None) -> None:
    for node in tree.walk():
        if not isinstance(node, _ALLOWED):
            raise SignalError(
                f"the filter {predicate!r} uses {_describe(node)}, which is not allowed; allowed: {_ALLOWED_TEXT}"
            )
        if isinstance(node, exp.Column):
            if node.table or node.args.get("db") or node.args.get("catalog"):
                raise SignalError(
                    f"the filter {predicate!r} names {node.sql(dialect='mysql')}; refer to the table's columns "
                    "without a table name"
                )
            if columns is not None and node.name.lower() not in columns:
                raise SignalError(f"the filter {predicate!r} names column {node.name!r}, which the table does not have")
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("field")):
            raise SignalError(f"the filter {predicate!r} uses IN with a subquery; list literal values instead")


def _describe(node: exp.Expression) -> str:
    if isinstance(node, (exp.Select, exp.Subquery, exp.Union)):
        return "a subquery"
    if isinstance(node, exp.Anonymous):
        return f"the function {node.name.upper()}"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    if isinstance(node, (exp.Parameter, exp.SessionParameter)):
        return "a variable"
    return type(node).__name__
