"""DDL applied to table definitions (`dblog.core.definition_ddl`), pure: each kind of statement's
result, columns described as the statement spells them (as Debezium's parser describes them),
defaults in information_schema's form, the server's implicit rules (key columns NOT NULL, index
names, the key of a table without a primary key), what is left unresolved instead of guessed, and
no exception on any text. Against the server itself: tests/mysql/test_definitions_against_server.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.core.definition_ddl import apply_ddl
from dblog.core.events import TableId
from dblog.core.table_definition import ColumnDefinition, TableDefinition

DB = "shop"


class Known:
    """Definitions before a statement, as the history answers."""

    def __init__(self, *definitions: TableDefinition, charsets: dict[str, str] | None = None,
                 absent: tuple[TableId, ...] = ()) -> None:
        self.definitions = {definition.table: definition for definition in definitions}
        self.charsets = {DB: "utf8mb4", **(charsets or {})}
        self.absent = set(absent)

    def definition(self, table):
        return self.definitions.get(table)

    def vouches_absent(self, table):
        return table in self.absent

    def tables_in(self, db):
        return [table for table in self.definitions if table.db == db]

    def database_charset(self, db):
        return self.charsets.get(db)

    def server_charset(self):
        return "latin1"

    def apply(self, sql: str, db: str = DB):
        effect = apply_ddl(sql, db, self)
        for table, definition in effect.tables.items():
            if definition is None:
                self.definitions.pop(table, None)
            else:
                self.definitions[table] = definition
        self.charsets.update({db: charset for db, charset in effect.databases.items() if charset is not None})
        return effect


def T(name: str) -> TableId:
    db, _, table = name.rpartition(".")
    return TableId(db or DB, table)


def columns(definition: TableDefinition) -> list[tuple]:
    return [(c.name, c.column_type, c.charset, c.nullable, c.default, c.extra) for c in definition.columns]


def created(sql: str, **known) -> TableDefinition:
    state = Known(**known)
    effect = state.apply(sql)
    assert not effect.unresolved, effect.unresolved
    (definition,) = [d for d in effect.tables.values() if d is not None]
    assert [c.position for c in definition.columns] == list(range(1, len(definition.columns) + 1))
    return definition


def test_a_create_table_as_the_statement_spells_it():
    definition = created(
        "CREATE TABLE t (id INT UNSIGNED NOT NULL AUTO_INCREMENT, name VARCHAR(40) NOT NULL DEFAULT 'x' "
        "COMMENT 'its name', price DECIMAL(10,2) DEFAULT 1.5, kind ENUM('a','b''c') DEFAULT 'a', "
        "at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE NOW(3), big BIGINT(20) ZEROFILL, "
        "txt TEXT CHARACTER SET latin1, j JSON, g INT AS (id + 1) STORED, PRIMARY KEY (id)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb3 COMMENT='the t'")
    assert columns(definition) == [
        ("id", "int unsigned", None, False, None, "auto_increment"),
        ("name", "varchar(40)", "utf8mb3", False, "'x'", ""),
        ("price", "decimal(10,2)", None, True, "1.5", ""),
        ("kind", "enum('a','b''c')", "utf8mb3", True, "'a'", ""),
        ("at", "datetime(3)", None, True, "current_timestamp(3)", "on update current_timestamp(3)"),
        ("big", "bigint(20) unsigned zerofill", None, True, "NULL", ""),
        ("txt", "text", "latin1", True, "NULL", ""),
        ("j", "json", None, True, "NULL", ""),  # Debezium's parser gives JSON no character set
        ("g", "int", None, True, "NULL", "STORED GENERATED"),
    ]
    assert definition.columns[1].comment == "its name"
    assert (definition.primary_key, definition.charset, definition.comment) == (("id",), "utf8mb3", "the t")


@pytest.mark.parametrize("clause, default", [
    ("DEFAULT 'it''s'", "'it''s'"),
    ("DEFAULT 'it\\'s'", "'it''s'"),
    ('DEFAULT "dq"', "'dq'"),
    ("DEFAULT _utf8mb4'x'", "'x'"),
    ("DEFAULT N'x'", "'x'"),
    ("DEFAULT 'a' 'b'", "'ab'"),
    ("DEFAULT -2.5", "-2.5"),
    ("DEFAULT +3", "+3"),
    ("DEFAULT .5", ".5"),
    ("DEFAULT 1e3", "1e3"),
    ("DEFAULT 1.5e-3", "1.5e-3"),
    ("DEFAULT NULL", "NULL"),
    ("DEFAULT CURRENT_TIMESTAMP", "current_timestamp()"),
    ("DEFAULT now()", "current_timestamp()"),
    ("DEFAULT LOCALTIMESTAMP(2)", "current_timestamp(2)"),
    ("DEFAULT (1 + 1)", "(1 + 1)"),  # an expression: no literal default (Debezium's null)
    ("DEFAULT uuid()", "uuid()"),  # MariaDB's unparenthesized function
    ("DEFAULT b'101'", "b'101'"),
    ("DEFAULT x'4142'", "x'4142'"),
    ("", "NULL"),  # nullable without a default: information_schema's `NULL`
])
def test_defaults_in_information_schemas_form(clause, default):
    (column,) = created(f"CREATE TABLE t (c VARCHAR(9) {clause})").columns
    assert column.default == default


def test_not_null_without_default_and_key_columns():
    definition = created("CREATE TABLE t (a INT NOT NULL, b INT DEFAULT NULL, c INT, PRIMARY KEY (b, c))")
    # a primary key column is NOT NULL, and loses a DEFAULT NULL (as the server, and Debezium, have it)
    assert [(c.name, c.nullable, c.default) for c in definition.columns] == [
        ("a", False, None), ("b", False, None), ("c", False, None)]
    assert definition.primary_key == ("b", "c")


def test_a_table_without_primary_key_is_keyed_by_its_first_unique_index_of_not_null_columns():
    definition = created("CREATE TABLE t (a INT, b INT NOT NULL, c INT NOT NULL UNIQUE, d INT NOT NULL, "
                         "UNIQUE KEY ua (a), CONSTRAINT ucb UNIQUE (c, b), UNIQUE (d))")
    # in the order they are written (c's column-level UNIQUE first, named c), the unnamed
    # UNIQUE (d) named d, CONSTRAINT ucb's index ucb
    assert definition.unique_keys == (("c", ("c",)), ("ua", ("a",)), ("ucb", ("c", "b")), ("d", ("d",)))
    assert definition.primary_key == ("c",)
    state = Known(definition)
    state.apply("ALTER TABLE t DROP INDEX c")
    assert state.definitions[T("t")].primary_key == ("c", "b")
    state.apply("ALTER TABLE t MODIFY a INT NOT NULL")  # ua now serves, and comes first
    assert state.definitions[T("t")].primary_key == ("a",)
    state.apply("ALTER TABLE t ADD PRIMARY KEY (d)")
    assert state.definitions[T("t")].primary_key == ("d",)
    state.apply("ALTER TABLE t DROP PRIMARY KEY, DROP COLUMN a")
    assert state.definitions[T("t")].primary_key == ("c", "b")


def test_unnamed_unique_indexes_are_named_as_the_server_names_them():
    definition = created("CREATE TABLE t (a INT NOT NULL, UNIQUE (a), UNIQUE KEY (a), KEY (a))")
    assert [name for name, _ in definition.unique_keys] == ["a", "a_2"]


def test_alters_one_after_the_other():
    state = Known(created("CREATE TABLE t (id int(11) NOT NULL, v varchar(5) DEFAULT NULL, PRIMARY KEY (id))"))
    state.apply("ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 7 FIRST, ADD x INT AFTER id")
    assert [c.name for c in state.definitions[T("t")].columns] == ["w", "id", "x", "v"]
    state.apply("ALTER TABLE t MODIFY COLUMN v varchar(9) CHARACTER SET latin1 DEFAULT 'z' FIRST, "
                "CHANGE COLUMN w w2 BIGINT DEFAULT 8, ALTER COLUMN x SET DEFAULT 3")
    assert columns(state.definitions[T("t")]) == [
        ("v", "varchar(9)", "latin1", True, "'z'", ""), ("w2", "bigint", None, True, "8", ""),
        ("id", "int(11)", None, False, None, ""), ("x", "int", None, True, "3", "")]
    state.apply("ALTER TABLE t ALTER x DROP DEFAULT, RENAME COLUMN id TO key_id, DROP COLUMN w2")
    definition = state.definitions[T("t")]
    assert columns(definition)[2] == ("x", "int", None, True, "NULL", "")
    assert definition.primary_key == ("key_id",) and [c.position for c in definition.columns] == [1, 2, 3]
    state.apply("ALTER TABLE t RENAME TO shop2.u, COMMENT 'moved'")
    assert T("t") not in state.definitions and state.definitions[T("shop2.u")].comment == "moved"


def test_a_clause_naming_a_column_another_clause_adds_or_renames_is_not_applied_in_sequence():
    """ALTER's clauses name the table's columns as they were: a swap by two renames is not two
    renames one after the other; the history reads such a table from the server instead."""
    state = Known(created("CREATE TABLE t (a INT, b INT)"))
    effect = state.apply("ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a")
    assert T("t") in effect.unresolved and not effect.tables


def test_the_table_character_set_option_applies_to_columns_before_it():
    definition = created("CREATE TABLE t (a VARCHAR(3), b VARCHAR(3) COLLATE utf8mb4_bin, c INT) CHARSET latin1")
    assert [c.charset for c in definition.columns] == ["latin1", "utf8mb4", None]
    assert created("CREATE TABLE t (a CHAR(2))", charsets={DB: "ucs2"}).columns[0].charset == "ucs2"
    state = Known(definition)
    state.apply("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4")
    assert [c.charset for c in state.definitions[T("t")].columns] == ["utf8mb4", "utf8mb4", None]
    state.apply("ALTER TABLE t DEFAULT CHARSET=latin1, ADD d TEXT")
    assert [c.charset for c in state.definitions[T("t")].columns] == ["utf8mb4", "utf8mb4", None, "latin1"]
    state.apply("CREATE DATABASE d2 CHARACTER SET = cp1251")
    assert state.apply("CREATE TABLE d2.t (a TEXT)").tables[T("d2.t")].columns[0].charset == "cp1251"
    state.apply("CREATE DATABASE d3")  # the server's default
    assert state.apply("CREATE TABLE d3.t (a TEXT)").tables[T("d3.t")].columns[0].charset == "latin1"


def test_renames_like_drops_and_databases():
    state = Known(created("CREATE TABLE a (x INT)"), created("CREATE TABLE b (y INT)"))
    state.apply("RENAME TABLE a TO tmp, b TO a, tmp TO b")  # a swap
    assert [c.name for c in state.definitions[T("a")].columns] == ["y"]
    assert [c.name for c in state.definitions[T("b")].columns] == ["x"] and T("tmp") not in state.definitions
    state.apply("CREATE TABLE c LIKE a")
    assert state.definitions[T("c")].columns == state.definitions[T("a")].columns
    effect = state.apply("DROP TABLE IF EXISTS a, c")
    assert effect.tables == {T("a"): None, T("c"): None}
    effect = state.apply("DROP DATABASE shop")
    assert effect.tables == {T("b"): None} and effect.databases == {"shop": None}


def test_an_online_schema_change_tools_cut_over():
    """gh-ost / pt-online-schema-change: a copy altered, then swapped in by one RENAME."""
    state = Known(created("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))"))
    state.apply("CREATE TABLE `_t_gho` LIKE `t`")
    state.apply("ALTER TABLE `_t_gho` ADD COLUMN w INT NOT NULL DEFAULT 4")
    state.apply("RENAME TABLE `t` TO `_t_del`, `_t_gho` TO `t`")
    assert [c.name for c in state.definitions[T("t")].columns] == ["id", "v", "w"]


def test_index_statements():
    state = Known(created("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL)"))
    state.apply("CREATE UNIQUE INDEX ub ON t (b)")
    state.apply("CREATE INDEX ia ON t (a)")
    assert state.definitions[T("t")].primary_key == ("b",)
    state.apply("ALTER TABLE t RENAME INDEX ub TO ub2")
    state.apply("DROP INDEX ub2 ON t")
    assert state.definitions[T("t")].primary_key == () and state.definitions[T("t")].unique_keys == ()


@pytest.mark.parametrize("sql", [
    "ALTER TABLE t ADD COLUMN a INT, ADD INDEX (a), ALGORITHM=INPLACE, LOCK=NONE",
    "ALTER TABLE t ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
    "ALTER TABLE t FORCE",
    "ALTER TABLE t ADD FULLTEXT INDEX ft (v), ADD CONSTRAINT fk FOREIGN KEY (id) REFERENCES o (id) ON DELETE CASCADE",
    "ALTER TABLE t ADD CONSTRAINT chk CHECK (id > 0), DROP CHECK chk",
    "ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4",
    "OPTIMIZE TABLE t",
    "TRUNCATE TABLE t",
    "GRANT SELECT ON shop.* TO 'u'@'%'",
    "CREATE VIEW vw AS SELECT * FROM t",
])
def test_statements_that_change_no_column_are_applied_as_no_change(sql):
    state = Known(created("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))"))
    before = state.definitions[T("t")]
    effect = state.apply(sql)
    assert not effect.unresolved
    after = state.definitions[T("t")]
    assert [c for c in after.columns if c.name != "a"] == list(before.columns) and after.primary_key == ("id",)


@pytest.mark.parametrize("sql, why", [
    ("CREATE TABLE n (ts TIMESTAMP)", "explicit_defaults_for_timestamp"),
    ("CREATE TABLE n (ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP)", "explicit_defaults_for_timestamp"),
    ("CREATE TABLE n (ts TIMESTAMP NOT NULL)", "explicit_defaults_for_timestamp"),
    ("CREATE TABLE n SELECT * FROM t", "SELECT"),
    ("CREATE TABLE n (a INT) AS SELECT 1 AS a", "SELECT"),
    ("CREATE TABLE n (a NATIONAL CHAR(3))", "type"),
    ("CREATE TABLE n (a SERIAL)", "type"),
    ("CREATE TABLE n (a VARCHAR(3) CHARACTER SET binary)", "binary"),
    ("CREATE TABLE n (a INT) WITH SYSTEM VERSIONING", "versioning"),
    ("CREATE TABLE n (a INT DEFAULT TRUE)", "TRUE"),
    ("CREATE TABLE n (a DATE DEFAULT DATE '2024-01-01')", "DATE"),
    ("CREATE TABLE IF NOT EXISTS n (a INT)", "may exist"),
    ("ALTER TABLE t ADD SYSTEM VERSIONING", "versioning"),
    ("ALTER TABLE t CONVERT TO CHARACTER SET latin1", "TEXT"),
    ("ALTER TABLE t FROBNICATE", "FROBNICATE"),
    ("ALTER TABLE t ADD COLUMN x INT SOMETHING", "SOMETHING"),
    ("ALTER TABLE unknown_table ADD COLUMN x INT", "not known"),
    ("RENAME TABLE unknown_table TO n", "not known"),
])
def test_what_the_text_does_not_say_is_left_unresolved(sql, why):
    state = Known(created("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"))
    effect = state.apply(sql)
    assert effect.unresolved and all(why in reason for reason in effect.unresolved.values()), effect.unresolved
    assert not any(definition is not None and table in effect.unresolved for table, definition in effect.tables.items())


def test_mariadbs_partition_conversions_make_and_consume_tables():
    state = Known(created("CREATE TABLE t (id INT PRIMARY KEY)"), created("CREATE TABLE old (id INT PRIMARY KEY)"))
    effect = state.apply("ALTER TABLE t CONVERT PARTITION p0 TO TABLE archived")
    assert T("archived") in effect.unresolved and effect.tables[T("t")] is not None
    effect = state.apply("ALTER TABLE t CONVERT TABLE old TO PARTITION p1 VALUES LESS THAN (100)")
    assert effect.tables[T("old")] is None


def test_create_table_if_not_exists_of_a_table_known_absent_or_present():
    state = Known(absent=(T("n"),))
    assert state.apply("CREATE TABLE IF NOT EXISTS n (a INT)").tables[T("n")] is not None
    assert state.apply("CREATE TABLE IF NOT EXISTS n (b INT)").tables == {}  # exists: nothing changes
    assert [c.name for c in state.definitions[T("n")].columns] == ["a"]


SQL_WORDS = st.sampled_from(["CREATE", "ALTER", "TABLE", "DROP", "ADD", "COLUMN", "RENAME", "TO", "t", "a", "INT",
                             "VARCHAR", "(", ")", ",", "'x'", "DEFAULT", "NOT", "NULL", "PRIMARY", "KEY", "UNIQUE",
                             "MODIFY", "CHANGE", "FIRST", "AFTER", "INDEX", "ON", "LIKE", "DATABASE", "`q`", "3",
                             "-", ".", "e", "CHARSET", "COLLATE", "utf8mb4_bin", "IF", "EXISTS", ";", "/*!", "*/"])


@given(st.one_of(st.text(max_size=80), st.lists(SQL_WORDS, max_size=25).map(" ".join)))
def test_any_text_gives_an_effect_and_never_raises(sql):
    state = Known(created("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(3))"))
    effect = apply_ddl(sql, DB, state)
    assert not set(effect.unresolved) & {table for table, d in effect.tables.items() if d is not None}
    for definition in effect.tables.values():
        if definition is None:
            continue
        names = [c.name.lower() for c in definition.columns]
        assert len(set(names)) == len(names) and definition.columns
        assert [c.position for c in definition.columns] == list(range(1, len(names) + 1))
        assert all(part.lower() in names for part in definition.primary_key)
        assert all(isinstance(c, ColumnDefinition) for c in definition.columns)
