"""`additional-conditions` filters: accepted predicates, and every way out of the WHERE
clause rejected with a message that names the problem."""

import hypothesis.strategies as st
import pytest
import sqlglot
from hypothesis import given
from sqlglot import exp

from signals.conditions import validate_condition
from signals.model import SignalError

COLUMNS = {"amount", "status", "region", "note", "order_id", "placed_at"}

ACCEPTED = [
    ("amount > 100", "`amount` > 100"),
    ("amount > 100 AND status IN ('new','paid')", "`amount` > 100 AND `status` IN ('new', 'paid')"),
    ("note LIKE 'x%'", "`note` LIKE 'x%'"),
    ("amount BETWEEN 1 AND 2", "`amount` BETWEEN 1 AND 2"),
    ("COALESCE(amount, 0) > 1", "COALESCE(`amount`, 0) > 1"),
    ("NOT note IS NULL", "NOT `note` IS NULL"),
    ("note IS NOT NULL", "NOT `note` IS NULL"),
    ("(amount > 1) OR (region = 'eu')", "(`amount` > 1) OR (`region` = 'eu')"),
    ("LOWER(region) = 'eu'", "LOWER(`region`) = 'eu'"),
    ("note = 'a;b--c /* not a comment */'", "`note` = 'a;b--c /* not a comment */'"),
    ("AMOUNT >= -5", "`AMOUNT` >= -5"),
    ("placed_at < '2026-01-01'", "`placed_at` < '2026-01-01'"),
    ("amount * 2 + 1 <> order_id", "`amount` * 2 + 1 <> `order_id`"),
]

REJECTED = [
    ("", "empty"),
    ("   ", "empty"),
    ("1=1) OR (1=1", "not a single SQL predicate"),
    ("(amount > 1", "not a single SQL predicate"),
    ("amount > 1)", "not a single SQL predicate"),
    ("amount > 0; DROP TABLE orders", "contains ';'"),
    ("amount > 0;", "contains ';'"),
    ("region IN (SELECT region FROM mysql.user)", "subquery"),
    ("amount IN (1, (SELECT 1))", "subquery"),
    ("EXISTS (SELECT 1)", "EXISTS"),
    ("amount > 0 UNION SELECT 1", "subquery"),
    ("SLEEP(5) = 0", "SLEEP"),
    ("BENCHMARK(1000000, MD5(1)) = 0", "BENCHMARK"),
    ("LOAD_FILE('/etc/passwd') IS NULL", "LOAD_FILE"),
    ("USER() = 'root'", "not allowed"),
    ("@@version > 0", "variable"),
    ("@x := 1", "not"),
    ("@x = 1", "variable"),
    ("1=1 /*! UNION SELECT 1 */", "comment"),
    ("1=1 /*!50000 UNION*/", "comment"),
    ("amount > 0 -- trailing", "comment"),
    ("amount > 0 #", "comment"),
    ("amount > 0 /* x */", "comment"),
    ("amount > 1 INTO OUTFILE '/tmp/x'", "not a single SQL predicate"),
    ("orders.amount > 1", "without a table name"),
    ("shop.orders.amount > 1", "without a table name"),
    ("nosuch = 1", "does not have"),
    ("`amount``x` = 1", "does not have"),
    ("amount", "not a boolean"),
    ("1", "not a boolean"),
    ("'text'", "not a boolean"),
    ("CASE WHEN amount > 1 THEN 1 END = 1", "CASE"),
    ("CAST(amount AS CHAR) = '1'", "not allowed"),
    ("amount > 1 OR " * 400 + "amount > 1", "characters long"),
    ("amount = 0x41 OR SLEEP(1)", "SLEEP"),
    ("CHAR(0x27) = note", "not allowed"),
    ("amount > 0 AND (SELECT COUNT(*) FROM orders) > 0", "subquery"),
    ("amount > 0\n; SELECT 1", "contains ';'"),
]


@pytest.mark.parametrize("predicate, rendered", ACCEPTED)
def test_accepted_predicates_are_rendered_with_quoted_identifiers(predicate, rendered):
    assert validate_condition(predicate, COLUMNS) == rendered


@pytest.mark.parametrize("predicate, message", REJECTED)
def test_rejected_predicates_name_the_problem(predicate, message):
    with pytest.raises(SignalError, match=message):
        validate_condition(predicate, COLUMNS)


def test_there_are_enough_cases():
    assert len(ACCEPTED) + len(REJECTED) >= 40


ATOMS = st.sampled_from(sorted(COLUMNS)).flatmap(
    lambda column: st.sampled_from([f"{column} > 1", f"{column} IS NULL", f"{column} IN ('a', 'b')",
                                    f"{column} LIKE '%x'", f"{column} BETWEEN 1 AND 9"])
)
TEXT = st.text(alphabet="()'`;-#/*!@ =<>aeINORSELCT0123", max_size=30)


def predicates():
    return st.recursive(
        ATOMS | TEXT,
        lambda inner: st.tuples(inner, st.sampled_from([" AND ", " OR ", ") OR (", "; ", " -- "]), inner).map(
            lambda parts: "".join(parts)) | inner.map(lambda p: f"NOT ({p})"),
        max_leaves=6,
    )


@given(predicates())
def test_whatever_is_accepted_stays_inside_the_where_clause(predicate):
    try:
        rendered = validate_condition(predicate, COLUMNS)
    except SignalError:
        return
    statements = sqlglot.parse(f"SELECT 1 FROM t WHERE (k > 1) AND ({rendered})", read="mysql")
    assert len(statements) == 1 and isinstance(statements[0], exp.Select)
    where = statements[0].args["where"].this
    assert isinstance(where, exp.And)
    assert where.left.sql() == "(k > 1)"
    assert not list(statements[0].find_all(exp.Subquery, exp.Union))
    assert len(list(statements[0].find_all(exp.Select))) == 1
