"""DDL classification: concrete MariaDB/MySQL statements, generated ALTERs against their known
kind and against sqlglot's parser, and no exception on any text."""

from __future__ import annotations

import dataclasses
import logging

import hypothesis.strategies as st
import pytest
import sqlglot
from hypothesis import example, given
from sqlglot import exp

from dblog.core.ddl import KINDS, SEVERITY, DdlChange, KnownTables, classify_ddl
from dblog.core.events import TableId


def T(name: str | TableId) -> TableId:
    if isinstance(name, TableId):
        return name
    db, _, table = name.rpartition(".")
    return TableId(db or "shop", table)


# (statement, kind, tables, added columns); the default database is "shop"
CASES = [
    # add_column
    ("ALTER TABLE t ADD COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t ADD a INT", "add_column", ["t"], ["a"]),
    ("alter table t add column a int not null default 0", "add_column", ["t"], ["a"]),
    ("ALTER TABLE `s`.`t` ADD COLUMN IF NOT EXISTS a INT", "add_column", ["s.t"], ["a"]),
    ("ALTER TABLE t ADD IF NOT EXISTS a INT", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t ADD (a INT, b VARCHAR(10))", "add_column", ["t"], ["a", "b"]),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS (a INT, `b c` INT)", "add_column", ["t"], ["a", "b c"]),
    ("ALTER ONLINE TABLE t ADD COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER IGNORE TABLE t ADD COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER ONLINE IGNORE TABLE IF EXISTS t WAIT 5 ADD COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t NOWAIT ADD COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t ADD COLUMN a INT, ADD INDEX (b)", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t ADD COLUMN a INT FIRST, ADD COLUMN b INT AFTER a", "add_column", ["t"], ["a", "b"]),
    ("ALTER TABLE t ADD COLUMN `select` INT", "add_column", ["t"], ["select"]),
    ("ALTER TABLE t ADD COLUMN `a``b` INT", "add_column", ["t"], ["a`b"]),
    ("ALTER TABLE t ADD COLUMN c INT AS (a + b) STORED", "add_column", ["t"], ["c"]),
    ("ALTER TABLE t ADD COLUMN s SET('KEY', 'PRIMARY KEY') COMMENT 'not a primary key'", "add_column", ["t"], ["s"]),
    ("ALTER TABLE t ADD COLUMN u INT UNIQUE KEY", "add_column", ["t"], ["u"]),
    ("ALTER TABLE t ADD COLUMN a INT, ALGORITHM=INPLACE, LOCK=NONE", "add_column", ["t"], ["a"]),
    ("ALTER TABLE shop.2019_orders ADD COLUMN a INT", "add_column", ["shop.2019_orders"], ["a"]),
    # a dot inside one quoted name
    ("ALTER TABLE `shop.orders` ADD COLUMN a INT", "add_column", [TableId("shop", "shop.orders")], ["a"]),
    ("ALTER /* who */ TABLE t -- why\n ADD # how\n COLUMN a INT", "add_column", ["t"], ["a"]),
    ("ALTER TABLE t /*!50100 ADD COLUMN x INT */", "add_column", ["t"], ["x"]),
    ("ALTER TABLE t /*M!100301 ADD COLUMN x INT */", "add_column", ["t"], ["x"]),
    ("ALTER TABLE t ADD COLUMN a INT;", "add_column", ["t"], ["a"]),
    ('ALTER TABLE "t" ADD COLUMN "a" INT', "add_column", ["t"], ["a"]),  # ANSI_QUOTES sessions
    # primary_key
    ("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b)", "primary_key", ["t"], []),
    ("ALTER TABLE t ADD PRIMARY KEY (a)", "primary_key", ["t"], []),
    ("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (a)", "primary_key", ["t"], []),
    ("ALTER TABLE t ADD CONSTRAINT PRIMARY KEY (a)", "primary_key", ["t"], []),
    ("ALTER TABLE t ADD COLUMN id INT AUTO_INCREMENT PRIMARY KEY", "primary_key", ["t"], ["id"]),
    ("ALTER TABLE t ADD COLUMN id INT KEY", "primary_key", ["t"], ["id"]),
    ("ALTER TABLE t ADD (id INT, PRIMARY KEY (id))", "primary_key", ["t"], ["id"]),
    ("ALTER TABLE t MODIFY id BIGINT PRIMARY KEY", "primary_key", ["t"], []),
    ("ALTER TABLE t DROP INDEX `PRIMARY`", "primary_key", ["t"], []),
    ("ALTER TABLE t DROP PRIMARY KEY, ADD COLUMN a INT, RENAME TO u", "primary_key", ["t"], ["a"]),
    ("DROP INDEX `PRIMARY` ON t", "primary_key", ["t"], []),
    # rename_table
    ("ALTER TABLE t RENAME TO u", "rename_table", ["t"], []),
    ("ALTER TABLE t RENAME AS u", "rename_table", ["t"], []),
    ("ALTER TABLE t RENAME u", "rename_table", ["t"], []),
    ("ALTER TABLE t RENAME TO u, MODIFY a BIGINT", "rename_table", ["t"], []),
    ("RENAME TABLE a TO b", "rename_table", ["a"], []),
    ("RENAME TABLE a TO b, crm.c TO crm.d", "rename_table", ["a", "crm.c"], []),
    ("rename table a to tmp, b to a, tmp to b", "rename_table", ["a", "b", "tmp"], []),
    ("RENAME TABLE IF EXISTS a WAIT 3 TO b", "rename_table", ["a"], []),
    # modify_column
    ("alter table t modify column a bigint", "modify_column", ["t"], []),
    ("ALTER TABLE t MODIFY a VARCHAR(20) CHARACTER SET latin1", "modify_column", ["t"], []),
    ("ALTER TABLE t CHANGE a b INT", "modify_column", ["t"], []),
    ("ALTER TABLE t CHANGE COLUMN IF EXISTS a b INT", "modify_column", ["t"], []),
    ("ALTER TABLE t RENAME COLUMN a TO b", "modify_column", ["t"], []),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "modify_column", ["t"], []),
    ("ALTER TABLE t MODIFY a INT, DROP COLUMN b, ADD COLUMN c INT", "modify_column", ["t"], ["c"]),
    # drop_column
    ("ALTER TABLE t DROP COLUMN a", "drop_column", ["t"], []),
    ("ALTER TABLE t DROP a", "drop_column", ["t"], []),
    ("ALTER TABLE t DROP COLUMN IF EXISTS a, DROP COLUMN b", "drop_column", ["t"], []),
    ("ALTER TABLE t DROP `key`", "drop_column", ["t"], []),
    ("ALTER TABLE t ADD COLUMN b INT, DROP COLUMN a", "drop_column", ["t"], ["b"]),
    # other_alter
    ("ALTER TABLE t ENGINE=InnoDB", "other_alter", ["t"], []),
    ("ALTER TABLE t ENGINE=InnoDB COMMENT='x'", "other_alter", ["t"], []),
    ("ALTER TABLE t COMMENT 'drop column a'", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD INDEX idx (a), ALGORITHM=INPLACE, LOCK=NONE", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD UNIQUE KEY u (a)", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD FULLTEXT INDEX f (body)", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (b)", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD CHECK (a > 0)", "other_alter", ["t"], []),
    ("ALTER TABLE t DROP INDEX i, DROP FOREIGN KEY fk, DROP CONSTRAINT c, DROP CHECK ck", "other_alter", ["t"], []),
    ("ALTER TABLE t RENAME INDEX a TO b", "other_alter", ["t"], []),
    ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 1", "other_alter", ["t"], []),
    ("ALTER TABLE t ALTER a DROP DEFAULT", "other_alter", ["t"], []),
    ("ALTER TABLE t ALTER INDEX i INVISIBLE", "other_alter", ["t"], []),
    ("ALTER TABLE t AUTO_INCREMENT = 10", "other_alter", ["t"], []),
    ("ALTER TABLE t DEFAULT CHARSET=utf8mb4", "other_alter", ["t"], []),
    ("ALTER TABLE t FORCE", "other_alter", ["t"], []),
    ("ALTER TABLE t ORDER BY a", "other_alter", ["t"], []),
    ("ALTER TABLE t", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (2030))", "other_alter", ["t"], []),
    ("ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4", "other_alter", ["t"], []),
    ("ALTER TABLE t REMOVE PARTITIONING", "other_alter", ["t"], []),
    ("ALTER TABLE t ADD PERIOD FOR p(s, e)", "other_alter", ["t"], []),
    ("CREATE INDEX i ON t (a)", "other_alter", ["t"], []),
    ("CREATE UNIQUE INDEX i USING BTREE ON crm.t (a)", "other_alter", ["crm.t"], []),
    ("DROP INDEX i ON t", "other_alter", ["t"], []),
    ("OPTIMIZE TABLE t, crm.u", "other_alter", ["t", "crm.u"], []),
    ("ANALYZE NO_WRITE_TO_BINLOG TABLE t", "other_alter", ["t"], []),
    # other: rows changed without row events, or not understood
    ("ALTER TABLE t DROP PARTITION p0", "other", ["t"], []),
    ("ALTER TABLE t TRUNCATE PARTITION p0, p1", "other", ["t"], []),
    ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE u", "other", ["t"], []),
    ("ALTER TABLE t IMPORT TABLESPACE", "other", ["t"], []),
    ("ALTER TABLE t ADD SYSTEM VERSIONING", "other", ["t"], []),
    ("ALTER TABLE t CONVERT PARTITION p0 TO TABLE u", "other", ["t"], []),
    ("ALTER TABLE t ADD COLUMN a INT, FROBNICATE", "other", ["t"], ["a"]),
    # whole statements
    ("CREATE TABLE t (id INT PRIMARY KEY)", "create_table", ["t"], []),
    ("CREATE TABLE IF NOT EXISTS `crm`.`t` LIKE s", "create_table", ["crm.t"], []),
    ("create table t select * from u", "create_table", ["t"], []),
    ("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "drop_table", ["t"], []),
    ("DROP TABLE t", "drop_table", ["t"], []),
    ("DROP TABLE IF EXISTS a, `b`.`c` /* generated by server */", "drop_table", ["a", "b.c"], []),
    ("drop tables a, b restrict", "drop_table", ["a", "b"], []),
    ("TRUNCATE TABLE t", "truncate", ["t"], []),
    ("truncate `crm`.`t`", "truncate", ["crm.t"], []),
    # temporary tables are never captured: not the real table of the same name
    ("DROP TEMPORARY TABLE IF EXISTS t", "other", [], []),
    ("CREATE TEMPORARY TABLE t (a INT)", "other", [], []),
    ("CREATE OR REPLACE TEMPORARY TABLE t (a INT)", "other", [], []),
    # about no table
    ("GRANT ALL ON *.* TO 'x'@'%'", "other", [], []),
    ("CREATE USER x IDENTIFIED BY 'pw'", "other", [], []),
    ("CREATE DATABASE shop", "other", [], []),
    ("DROP DATABASE", "other", [], []),
    ("DROP DATABASE shop extra", "other", [], []),
    # DROP DATABASE names its database, not its tables (KnownTables knows them)
    ("DROP DATABASE shop", "drop_database", [], []),
    ("drop schema if exists `my shop` -- comment", "drop_database", [], []),
    ("DROP VIEW v", "other", [], []),
    ("ALTER VIEW v AS SELECT 1", "other", [], []),
    ("CREATE DEFINER=`root`@`%` TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1", "other", [], []),
    ("RENAME USER a TO b", "other", [], []),
    ("ALTER TABLE t ADD COLUMN a INT; DROP TABLE u", "other", [], []),  # two statements: not guessed
    ("", "other", [], []),
    ("/* only a comment */", "other", [], []),
    ("DROP TABLE", "other", [], []),
    ("RENAME TABLE a TO", "other", [], []),
    ("ALTER TABLE t ADD COLUMN 'unterminated", "add_column", ["t"], ["unterminated"]),
]


@pytest.mark.parametrize("sql, kind, tables, added", CASES, ids=[case[0][:60] for case in CASES])
def test_statement(sql, kind, tables, added):
    change = classify_ddl(sql, "shop")
    assert dataclasses.replace(change, renamed=(), database=None, replaced=False) == DdlChange(
        kind, tuple(T(name) for name in tables), tuple(added))
    assert (change.database is not None) == (kind == "drop_database")
    assert change.replaced == sql.upper().startswith("CREATE OR REPLACE TABLE")


@pytest.mark.parametrize("sql, renamed", [
    ("RENAME TABLE a TO b, crm.c TO crm.d", [("a", "b"), ("crm.c", "crm.d")]),
    ("RENAME TABLE IF EXISTS a WAIT 3 TO other.b", [("a", "other.b")]),
    ("ALTER TABLE crm.t RENAME TO u", [("crm.t", "shop.u")]),
    ("ALTER TABLE t RENAME AS u, MODIFY a BIGINT", [("t", "u")]),
    ("ALTER TABLE t DROP PRIMARY KEY, ADD COLUMN a INT, RENAME TO u", [("t", "u")]),
    ("ALTER TABLE t RENAME COLUMN a TO b", []),
    ("ALTER TABLE t RENAME INDEX a TO b", []),
])
def test_renames_name_the_new_tables(sql, renamed):
    """The new names, qualified with the default database when bare: sinks move or re-read rows there."""
    assert classify_ddl(sql, "shop").renamed == tuple((T(old), T(new)) for old, new in renamed)


def test_tables_are_named_whatever_the_default_database():
    """`USE other; TRUNCATE shop.orders` names shop.orders, not other.orders."""
    assert classify_ddl("TRUNCATE shop.orders", "other").tables == (T("shop.orders"),)
    assert classify_ddl("DROP TABLE shop.orders, x", "other").tables == (T("shop.orders"), T("other.x"))


@pytest.mark.parametrize("sql, database", [
    ("DROP DATABASE shop", "shop"),
    ("DROP SCHEMA crm", "crm"),
    ("DROP DATABASE IF EXISTS `shop`", "shop"),
    ("drop schema if exists `my ``odd`` db`", "my `odd` db"),
    ("DROP /* why */ DATABASE `2019_sales`", "2019_sales"),
])
def test_drop_database_names_its_database_whatever_the_default_one(sql, database):
    assert classify_ddl(sql, "other") == DdlChange("drop_database", database=database)


def test_drop_database_becomes_a_drop_table_of_each_known_table_of_it():
    """What sinks get: one DROP TABLE per table of the database known from the start listing and
    the DDL read since (created, renamed in; renamed out is gone), other databases untouched."""
    known = KnownTables([T("shop.b"), T("shop.a"), T("crm.c"), T("shopping.x")])
    known.follow(classify_ddl("CREATE TABLE shop.new (id INT PRIMARY KEY)", "crm"))
    known.follow(classify_ddl("RENAME TABLE crm.c TO shop.c, shop.b TO crm.b", "crm"))
    known.follow(classify_ddl("CREATE TABLE shop.gone (id INT PRIMARY KEY)", "crm"))
    known.follow(classify_ddl("DROP TABLE shop.gone", "crm"))  # its DROP record is written already
    changes = known.follow(classify_ddl("DROP SCHEMA IF EXISTS `shop`", "shop"))
    assert changes == [DdlChange("drop_table", (T(name),)) for name in ("shop.a", "shop.c", "shop.new")]
    assert known.tables == {T("crm.b"), T("shopping.x")}
    # Dropped again (its tables are gone), or another database with no known table: as read.
    again = classify_ddl("DROP DATABASE IF EXISTS shop", "shop")
    assert known.follow(again) == [again]
    other = classify_ddl("TRUNCATE crm.b", "crm")
    assert known.follow(other) == [other]


def test_a_replaced_table_stays_known():
    """CREATE OR REPLACE is a drop_table whose table lives on: a later DROP DATABASE drops it."""
    known = KnownTables([T("shop.t")])
    known.follow(classify_ddl("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "shop"))
    assert known.follow(classify_ddl("DROP DATABASE shop", "")) == [DdlChange("drop_table", (T("shop.t"),))]


def test_enough_cases_of_every_kind():
    assert len(CASES) >= 40
    for kind in KINDS:
        assert sum(case[1] == kind for case in CASES) >= 2, kind


def test_bare_names_take_the_default_database():
    assert classify_ddl("TRUNCATE t", "crm").tables == (TableId("crm", "t"),)
    assert classify_ddl("TRUNCATE t").tables == (TableId("", "t"),)  # no default database
    assert classify_ddl("TRUNCATE shop.t", "crm").tables == (TableId("shop", "t"),)


# --- generated ALTER TABLE statements ----------------------------------------------------------

COLUMN_NAMES = st.sampled_from(["a", "b", "price", "status", "x1", "2nd", "ключ", "select", "a b"])
TYPES = st.sampled_from(["INT", "BIGINT UNSIGNED", "VARCHAR(10)", "DECIMAL(10,2)", "DATETIME(6)", "JSON",
                         "ENUM('KEY','PRIMARY KEY')", "TEXT COMMENT 'a key'", "INT NOT NULL DEFAULT 0"])


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@st.composite
def name_text(draw, names=COLUMN_NAMES):
    """A column name and how it is written: bare when that is valid, else backticked."""
    name = draw(names)
    must_quote = name in ("select", "a b")  # a reserved word, a space
    return name, quoted(name) if must_quote or draw(st.booleans()) else name


@st.composite
def add_column(draw):
    name, text = draw(name_text())
    column = draw(st.sampled_from(["COLUMN ", ""]))
    if_not_exists = draw(st.sampled_from(["IF NOT EXISTS ", ""]))
    position = draw(st.sampled_from(["", " FIRST", " AFTER a"]))
    return f"ADD {column}{if_not_exists}{text} {draw(TYPES)}{position}", "add_column", [name]


@st.composite
def add_columns(draw):
    named = draw(st.lists(name_text(), min_size=1, max_size=3))
    body = ", ".join(f"{text} {draw(TYPES)}" for _, text in named)
    return f"ADD COLUMN ({body})", "add_column", [name for name, _ in named]


@st.composite
def fixed_clause(draw):
    return draw(st.sampled_from([
        ("DROP PRIMARY KEY", "primary_key"),
        ("ADD PRIMARY KEY (a, b)", "primary_key"),
        ("ADD CONSTRAINT pk PRIMARY KEY (a)", "primary_key"),
        ("RENAME TO u", "rename_table"),
        ("MODIFY COLUMN a BIGINT", "modify_column"),
        ("MODIFY a VARCHAR(20) NOT NULL", "modify_column"),
        ("CHANGE a b INT", "modify_column"),
        ("RENAME COLUMN a TO b", "modify_column"),
        ("DROP COLUMN a", "drop_column"),
        ("DROP b", "drop_column"),
        ("ADD INDEX i (a)", "other_alter"),
        ("ADD UNIQUE KEY u (a, b)", "other_alter"),
        ("DROP INDEX i", "other_alter"),
        ("DROP FOREIGN KEY fk", "other_alter"),
        ("RENAME INDEX i TO j", "other_alter"),
        ("ALTER COLUMN a SET DEFAULT 1", "other_alter"),
        ("ENGINE=InnoDB", "other_alter"),
        ("COMMENT='drop primary key'", "other_alter"),
        ("ALGORITHM=INPLACE", "other_alter"),
        ("LOCK=NONE", "other_alter"),
        ("DROP PARTITION p0", "other"),
        ("TRUNCATE PARTITION p1", "other"),
    ])) + ([],)


CLAUSES = st.one_of(add_column(), add_columns(), fixed_clause())


def decorate(draw, sql: str) -> str:
    """The same statement as a client might write it: any keyword case, comments anywhere."""
    if draw(st.booleans()):
        sql = sql.lower()
    comment = draw(st.sampled_from(["", " /* c */ ", " -- c\n", " # c\n", "\n\t"]))
    return sql.replace(", ", f",{comment}")


@st.composite
def alter_statements(draw):
    clauses = draw(st.lists(CLAUSES, min_size=1, max_size=4))
    head = draw(st.sampled_from(["ALTER TABLE", "ALTER ONLINE TABLE", "ALTER IGNORE TABLE", "ALTER TABLE IF EXISTS"]))
    table, text = draw(st.sampled_from([(T("t"), "t"), (T("crm.t"), "crm.t"), (T("crm.t"), "`crm`.`t`")]))
    sql = f"{head} {text} " + ", ".join(clause for clause, _, _ in clauses)
    return sql, clauses, table


def expected_kind(clauses) -> str:
    return min((kind for _, kind, _ in clauses), key=SEVERITY.index)


@given(st.data(), alter_statements())
def test_alter_takes_the_most_consequential_clause_and_lists_added_columns(data, statement):
    sql, clauses, table = statement
    sql = decorate(data.draw, sql)
    change = classify_ddl(sql, "shop")
    assert change.kind == expected_kind(clauses), sql
    assert change.tables == (table,)
    assert change.added_columns == tuple(name for _, _, names in clauses for name in names)


def sqlglot_view(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """The kind and added columns sqlglot's parser sees, or None where it does not parse the
    statement into actions it understands (it falls back to an opaque Command there)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(tree, exp.Alter):
        return None
    kinds, added = [], []
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            primary = any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
                          for c in action.args.get("constraints") or [])
            kinds.append("primary_key" if primary else "add_column")
            added.append(action.name)
        elif isinstance(action, exp.Drop):
            kinds.append("drop_column" if action.args.get("kind") == "COLUMN" else "other_alter")
        elif isinstance(action, (exp.DropPrimaryKey,)):
            kinds.append("primary_key")
        elif isinstance(action, exp.AddConstraint):
            kinds.append("primary_key" if action.find(exp.PrimaryKey) else "other_alter")
        elif isinstance(action, (exp.ModifyColumn, exp.RenameColumn)):
            kinds.append("modify_column")
        elif isinstance(action, exp.AlterRename):
            kinds.append("rename_table")
        elif isinstance(action, (exp.AlterColumn, exp.RenameIndex)):
            kinds.append("other_alter")
        else:
            return None
    kinds += ["other_alter"] * len(tree.args.get("options") or [])
    if not kinds:
        return None
    return min(kinds, key=SEVERITY.index), tuple(added)


@given(st.lists(CLAUSES, min_size=1, max_size=3))
@example([("ADD COLUMN a INT", "add_column", ["a"]), ("DROP PRIMARY KEY", "primary_key", [])])
def test_agrees_with_sqlglot_wherever_it_parses(clauses):
    sql = "ALTER TABLE t " + ", ".join(clause for clause, _, _ in clauses)
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to Command" warnings
    oracle = sqlglot_view(sql)
    if oracle is not None:
        change = classify_ddl(sql, "shop")
        assert (change.kind, change.added_columns) == oracle, sql


def test_sqlglot_oracle_is_consulted():
    # The agreement test is only worth something if sqlglot parses most generated clauses.
    assert sqlglot_view("ALTER TABLE t ADD COLUMN a INT, DROP PRIMARY KEY") == ("primary_key", ("a",))
    assert sqlglot_view("ALTER TABLE t ADD INDEX i (a), ENGINE=InnoDB") == ("other_alter", ())
    assert sqlglot_view("ALTER TABLE t DROP PARTITION p0") is None


# --- robustness --------------------------------------------------------------------------------

VOCABULARY = st.sampled_from([
    "ALTER", "TABLE", "ADD", "DROP", "COLUMN", "PRIMARY", "KEY", "INDEX", "CONSTRAINT", "RENAME", "TO",
    "AS", "MODIFY", "CHANGE", "CREATE", "TEMPORARY", "OR", "REPLACE", "TRUNCATE", "IF", "NOT", "EXISTS",
    "ON", "WAIT", "NOWAIT", "ONLINE", "IGNORE", "PARTITION", "SYSTEM", "VERSIONING", "PERIOD", "FOR",
    "CONVERT", "OPTIMIZE", "TABLES", "UNIQUE", "t", "`q`", "'s'", '"d"', "1", ",", ".", "(", ")", ";",
    "/*", "*/", "/*!", "--", "#", "\n", "`", "'", "\\", "=",
])


def assert_well_formed(change: DdlChange) -> None:
    assert change.kind in KINDS
    assert all(isinstance(table, TableId) and isinstance(table.table, str) for table in change.tables)
    assert all(isinstance(column, str) for column in change.added_columns)
    if change.added_columns:
        assert change.kind in SEVERITY and change.kind != "other_alter"


@given(st.text(), st.text(max_size=5))
def test_never_raises_on_arbitrary_text(sql, db):
    assert_well_formed(classify_ddl(sql, db))


@given(st.lists(VOCABULARY, max_size=20), st.sampled_from([" ", ""]))
def test_never_raises_on_ddl_shaped_noise(words, separator):
    assert_well_formed(classify_ddl(separator.join(words), "shop"))
