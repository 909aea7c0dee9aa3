"""The schema history's DDL application (`dblog.core.definition_ddl`, through
`dblog.core.definition_history`) against the server itself: each statement is run on the private
MariaDB and applied to the history, and after each the history's definition of every table equals
what information_schema states (`dblog.mysql.table_definitions`): columns (type, character set,
NULL, default, AUTO_INCREMENT / ON UPDATE / generation, comment, position), the primary key or the
unique index keying a table without one, the unique indexes, the table's default character set
and comment. The statements are written in the server's own spelling (`int(11)`, a DECIMAL's
default with its scale), where a definition built from the text and the server's agree; the
history keeps other spellings as written, as Debezium's parser does (tests/core/
test_definition_ddl.py). Hypothesis draws ALTER sequences against the server's answers: a
statement the server refuses is not applied, as it would not be in the binlog."""

from __future__ import annotations

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dblog.core.definition_history import DefinitionHistory
from dblog.core.events import TableId
from dblog.core.gtid import Gtid
from dblog.mysql.table_definitions import load_table_definitions

# (COLUMN_TYPE as the server spells it, defaults as information_schema states them on MariaDB)
TYPES = {
    "int(11)": ["5", "-3", "0"],
    "bigint(20) unsigned": ["8"],
    "varchar(12)": ["'abc'", "'it''s'", "''"],
    "decimal(10,2)": ["1.50", "-2.25"],
    "double": ["2.5"],
    "tinyint(1)": ["1"],
    "datetime": ["'2024-01-02 03:04:05'", "current_timestamp()"],
    "date": ["'2024-01-02'"],
    "enum('a','b''c')": ["'a'", "'b''c'"],
    "text": ["'t'"],
    "bit(3)": ["b'101'"],
    "char(3)": ["'x'"],
}
NAMES = ["a", "b", "c", "d", "e", "f", "g", "Mixed"]


def _definitions(mariadb, database: str) -> dict[TableId, object]:
    with mariadb.connect() as connection:
        names = [row[0] for row in mariadb.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,))]
        return load_table_definitions(connection, [TableId(database, name) for name in names])


def _comparable(definition) -> dict:
    return {"columns": definition.columns, "key": definition.primary_key, "unique": dict(definition.unique_keys),
            "charset": definition.charset, "comment": definition.comment}


class Run:
    """The server and the history, statement by statement."""

    def __init__(self, mariadb, database: str) -> None:
        self.mariadb = mariadb
        self.database = database
        self.history = DefinitionHistory(lambda table: table.db == database, "utf8mb4")
        self.history.adopt({}, _gtids(mariadb), _gtids(mariadb), databases={database: "utf8mb4"})
        self.seq = 0
        self.applied: list[str] = []
        self.connection = mariadb.connect(database)
        # which reasons a statement may be left unresolved for (none: every statement is derived)
        self.unresolved_allowed = lambda unresolved: False

    def run(self, sql: str) -> bool:
        """Run `sql` on the server; if it took it, apply it and compare. False if refused."""
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(sql)
        except pymysql.MySQLError:
            return False
        self.applied.append(sql)
        self.seq += 1
        applied = self.history.apply(sql, self.database, Gtid.mariadb(999, 1, self.seq))
        if applied.unresolved:  # read from the server instead, as the engine does
            assert self.unresolved_allowed(applied.unresolved), (sql, applied.unresolved)
            read = _definitions(self.mariadb, self.database)
            self.history.adopt({table: read.get(table) for table in applied.unresolved}, _gtids(self.mariadb),
                               _gtids(self.mariadb))
        self.check()
        return True

    def check(self) -> None:
        server = _definitions(self.mariadb, self.database)
        ours = {table: self.history.definition(table) for table in self.history.tables()}
        assert set(ours) == set(server), (self.applied, set(ours), set(server))
        for table, definition in server.items():
            mine, theirs = _comparable(ours[table]), _comparable(definition)
            differences = [(name, mine[name], theirs[name]) for name in mine if mine[name] != theirs[name]]
            if mine["columns"] != theirs["columns"]:
                differences += [(ours_column, server_column) for ours_column, server_column
                                in zip(mine["columns"], theirs["columns"]) if ours_column != server_column]
            assert not differences, "\n".join(map(str, [*self.applied[-3:], table, *differences]))


def _gtids(mariadb):
    from dblog.core.gtid import GtidSet

    return GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0] or "", "mariadb")


STATEMENTS = [
    "CREATE TABLE t (id int(11) NOT NULL AUTO_INCREMENT, v varchar(5) DEFAULT NULL, PRIMARY KEY (id))",
    "ALTER TABLE t ADD COLUMN w int(11) NOT NULL DEFAULT 7",
    "ALTER TABLE t MODIFY COLUMN v varchar(9) CHARACTER SET latin1 DEFAULT 'z'",
    "ALTER TABLE t CHANGE COLUMN w w2 bigint(20) DEFAULT 8 AFTER id",
    "ALTER TABLE t ALTER COLUMN v SET DEFAULT 'q'",
    "ALTER TABLE t ALTER COLUMN w2 DROP DEFAULT",
    "ALTER TABLE t RENAME COLUMN v TO vv, ADD UNIQUE KEY (vv), ADD COLUMN z datetime(3) DEFAULT current_timestamp(3) "
    "ON UPDATE current_timestamp(3) FIRST",
    "ALTER TABLE t ADD COLUMN g int(11) GENERATED ALWAYS AS (w2 + 1) VIRTUAL, ADD COLUMN s int(11) AS (w2 * 2) STORED",
    "ALTER TABLE t DROP COLUMN w2, DROP COLUMN g, DROP COLUMN s",
    "RENAME TABLE t TO t2",
    "ALTER TABLE t2 COMMENT 'the t', DEFAULT CHARSET=latin1",
    "ALTER TABLE t2 ADD COLUMN n varchar(3) COMMENT 'a note'",
    "CREATE TABLE k (a int(11) DEFAULT NULL, b int(11) NOT NULL, c int(11) NOT NULL, d int(11) NOT NULL, "
    "UNIQUE KEY ua (a), UNIQUE KEY ucb (c,b), UNIQUE KEY ud (d))",
    "ALTER TABLE k DROP INDEX ucb",
    "DROP INDEX ud ON k",
    "ALTER TABLE k MODIFY a int(11) NOT NULL",
    "CREATE UNIQUE INDEX ub ON k (b)",
    "ALTER TABLE k ADD PRIMARY KEY (d)",
    "ALTER TABLE k DROP PRIMARY KEY, RENAME TO k2",
    "CREATE TABLE l LIKE k2",
    "ALTER TABLE l ADD CONSTRAINT uq UNIQUE (c), RENAME INDEX ua TO ua2",
    "RENAME TABLE l TO tmp, k2 TO l, tmp TO k2",
    "ALTER TABLE l CONVERT TO CHARACTER SET latin1",
    "CREATE TABLE m (id int(11) NOT NULL PRIMARY KEY, e enum('x','y') NOT NULL DEFAULT 'y', "
    "dd decimal(8,3) DEFAULT 1.500, bb bit(4) DEFAULT b'1010', tx text COLLATE latin1_bin, "
    "ts timestamp NULL DEFAULT NULL) DEFAULT CHARSET=latin1 COMMENT='mm'",
    "ALTER TABLE m ADD (p int(10) unsigned zerofill DEFAULT NULL, q double DEFAULT -2.5)",
    "DROP TABLE k2, l",
]


def test_statements_give_the_servers_definitions(mariadb, database):
    run = Run(mariadb, database)
    for statement in STATEMENTS:
        assert run.run(statement), statement
    run.connection.close()


@st.composite
def _column(draw, names: list[str]) -> tuple[str, str]:
    """(name, `name type [NOT NULL] [DEFAULT d]`) of a new column."""
    name = draw(st.sampled_from([n for n in NAMES if n.lower() not in {m.lower() for m in names}] or ["zz"]))
    return name, _definition(draw, name)


def _definition(draw, name: str) -> str:
    column_type = draw(st.sampled_from(sorted(TYPES)))
    text = f"`{name}` {column_type}"
    if draw(st.booleans()):
        text += " NOT NULL"
    if draw(st.booleans()):
        text += " DEFAULT " + draw(st.sampled_from(TYPES[column_type]))
    if draw(st.booleans()) and column_type.startswith("varchar"):
        text += " CHARACTER SET " + draw(st.sampled_from(["latin1", "utf8mb4"]))
    return text


def _place(draw, names: list[str]) -> str:
    choice = draw(st.sampled_from(["", "", "FIRST", "AFTER"]))
    if choice == "AFTER" and names:
        return f" AFTER `{draw(st.sampled_from(names))}`"
    return " FIRST" if choice == "FIRST" else ""


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_alters_give_the_servers_definitions(mariadb, database, data):
    mariadb.execute(f"DROP TABLE IF EXISTS `{database}`.r, `{database}`.r2")
    run = Run(mariadb, database)
    # MariaDB lets a clause name a column another clause of the ALTER adds or renames, MySQL does
    # not (its clauses name the columns the table had): not derived from the text, read instead
    run.unresolved_allowed = lambda unresolved: all("another clause" in reason for reason in unresolved.values())
    table = "r"
    assert run.run(f"CREATE TABLE {table} (id int(11) NOT NULL, a varchar(5) DEFAULT 'x', PRIMARY KEY (id))")
    for _ in range(data.draw(st.integers(3, 10))):
        names = [column.name for column in run.history.definition(TableId(database, table)).columns]
        keys = [name for name, _ in run.history.definition(TableId(database, table)).unique_keys]
        kind = data.draw(st.sampled_from(["add", "add", "drop", "modify", "change", "rename", "default",
                                          "drop_default", "unique", "drop_index", "primary", "charset",
                                          "rename_table", "several"]))
        clauses = []
        for clause_kind in ([kind] if kind != "several" else data.draw(
                st.lists(st.sampled_from(["add", "drop", "modify", "default", "rename"]), min_size=2, max_size=3))):
            if clause_kind == "add":
                name, text = data.draw(_column(names))
                names.append(name)
                clauses.append(f"ADD COLUMN {text}{_place(data.draw, names[:-1])}")
            elif clause_kind == "drop" and len(names) > 1:
                name = data.draw(st.sampled_from(names))
                names.remove(name)
                clauses.append(f"DROP COLUMN `{name}`")
            elif clause_kind == "modify" and names:
                name = data.draw(st.sampled_from(names))
                clauses.append(f"MODIFY COLUMN {_definition(data.draw, name)}{_place(data.draw, names)}")
            elif clause_kind == "change" and names:
                old = data.draw(st.sampled_from(names))
                new = data.draw(st.sampled_from(NAMES))
                clauses.append(f"CHANGE COLUMN `{old}` {_definition(data.draw, new)}")
            elif clause_kind == "rename" and names:
                old, new = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(NAMES))
                clauses.append(f"RENAME COLUMN `{old}` TO `{new}`")
            elif clause_kind == "default" and names:
                name = data.draw(st.sampled_from(names))
                column = run.history.definition(TableId(database, table)).column(name)
                if column is not None and column.column_type in TYPES:  # (a column renamed by this ALTER: none)
                    clauses.append(f"ALTER COLUMN `{name}` SET DEFAULT "
                                   + data.draw(st.sampled_from([*TYPES[column.column_type], "NULL"])))
            elif clause_kind == "drop_default" and names:
                clauses.append(f"ALTER COLUMN `{data.draw(st.sampled_from(names))}` DROP DEFAULT")
            elif clause_kind == "unique" and names:
                columns = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
                name = data.draw(st.sampled_from(["", "u1", "u2"]))
                clauses.append(f"ADD UNIQUE {name} ({', '.join(f'`{c}`' for c in columns)})")
            elif clause_kind == "drop_index" and keys:
                key = data.draw(st.sampled_from(keys))
                clauses.append("DROP PRIMARY KEY" if key == "PRIMARY" else f"DROP INDEX `{key}`")
            elif clause_kind == "primary" and names:
                clauses.append(f"ADD PRIMARY KEY (`{data.draw(st.sampled_from(names))}`)")
            elif clause_kind == "charset":
                clauses.append("DEFAULT CHARSET=" + data.draw(st.sampled_from(["latin1", "utf8mb4"])))
            elif clause_kind == "rename_table":
                new_table = "r2" if table == "r" else "r"
                if run.run(f"RENAME TABLE {table} TO {new_table}"):
                    table = new_table
        if clauses:
            run.run(f"ALTER TABLE {table} " + ", ".join(clauses))
    run.connection.close()
    mariadb.execute(f"DROP TABLE IF EXISTS `{database}`.r, `{database}`.r2")


@pytest.mark.parametrize("statement", [
    "CREATE TABLE x (ts timestamp)",  # explicit_defaults_for_timestamp decides its NULL and default
    "CREATE TABLE x SELECT 1 AS one",
    "CREATE TABLE x (a int(11)) WITH SYSTEM VERSIONING",
])
def test_what_is_not_derived_from_the_text_is_left_unresolved(mariadb, database, statement):
    """The server took each statement; the history does not guess its result."""
    history = DefinitionHistory(lambda table: True, "utf8mb4")
    history.adopt({}, _gtids(mariadb), _gtids(mariadb), databases={database: "utf8mb4"})
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute(statement)
    applied = history.apply(statement, database, Gtid.mariadb(999, 1, 1))
    assert list(applied.unresolved) == [TableId(database, "x")] and history.definition(TableId(database, "x")) is None
