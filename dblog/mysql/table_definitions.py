"""Table definitions as the server states them (`dblog.core.table_definition`): each column's
declared type, default, nullability and AUTO_INCREMENT / ON UPDATE, the table's default character
set, comment, primary key and unique indexes (what Debezium's schema-change topic carries, and
the column defaults of the Kafka sink's Connect schemas).

Read where the schema history (`dblog.core.definition_history`) starts or cannot go on from the
binlog's DDL alone: every captured table at a first start, the tables of a statement it cannot
apply. Separate from `dblog.mysql.schema` on purpose: the row path needs only what decodes and
keys a row (and compiles readers per table shape). Loaded in batches (`SCHEMA_BATCH` tables a
query, three queries per batch), as `load_schemas` does, so describing thousands of tables at a
first start costs seconds, not three queries a table. `schema_snapshot` adds what Debezium's
snapshot writes besides: the server's character set variables, each database's default
character set and collation, and each table's `SHOW CREATE TABLE` text (one statement per
table, only at a first start); `database_charsets` every database's default character set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

import pymysql

from dblog.core.events import TableId
from dblog.core.table_definition import PRIMARY, ColumnDefinition, TableDefinition, key_of
from dblog.mysql.schema import fetch_tuples, table_batches, text_of

__all__ = ["ColumnDefinition", "TableDefinition", "SchemaSnapshot", "load_table_definitions", "schema_snapshot",
           "database_charsets", "TableDefinitions"]


@dataclass(frozen=True)
class SchemaSnapshot:
    """What Debezium's snapshot describes the captured tables by (its schema-change records)."""

    server_charset: tuple[tuple[str, str], ...]  # (variable, value): character_set_server, collation_server
    databases: dict[str, tuple[str | None, str | None]]  # database -> (default charset, default collation)
    create_statements: dict[TableId, str]  # SHOW CREATE TABLE text
    definitions: dict[TableId, TableDefinition]
    binlog_file: str | None  # where the binlog ended when the snapshot was read
    binlog_position: int | None


_COLUMNS_SQL = """
SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, CHARACTER_SET_NAME, IS_NULLABLE, COLUMN_DEFAULT,
       EXTRA, COLUMN_COMMENT
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names})
ORDER BY TABLE_NAME, ORDINAL_POSITION
"""

_TABLES_SQL = """
SELECT t.TABLE_NAME, c.CHARACTER_SET_NAME, t.TABLE_COMMENT
FROM information_schema.TABLES t
LEFT JOIN information_schema.COLLATIONS c ON c.COLLATION_NAME = t.TABLE_COLLATION
WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME IN ({names})
"""

# The unique indexes, in the server's order of them (no ORDER BY: SHOW CREATE TABLE lists them
# in that order, and Debezium's parser takes the first that can serve as a key)
_UNIQUE_KEYS_SQL = """
SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names}) AND NON_UNIQUE = 0
"""


def load_table_definitions(conn, tables: Iterable[TableId]) -> dict[TableId, TableDefinition]:
    """The definitions of `tables`, three information_schema queries per database and per
    `SCHEMA_BATCH` tables. Tables that do not exist are left out."""
    definitions: dict[TableId, TableDefinition] = {}
    mariadb = None
    for db, batch, placeholders in table_batches(tables):
        if mariadb is None:
            mariadb = "mariadb" in text_of(fetch_tuples(conn, "SELECT VERSION()")[0][0]).lower()
        params = (db, *batch)
        columns: dict[str, list[ColumnDefinition]] = {}
        for name, column, position, column_type, charset, nullable, default, extra, comment in fetch_tuples(
                conn, _COLUMNS_SQL.format(names=placeholders), params):
            columns.setdefault(text_of(name), []).append(ColumnDefinition(
                name=text_of(column), position=int(position), column_type=text_of(column_type),
                charset=text_of(charset), nullable=text_of(nullable) == "YES",
                default=text_of(default) if mariadb else mariadb_default(text_of(default), text_of(extra) or ""),
                extra=text_of(extra) or "", comment=text_of(comment) or ""))
        indexes: dict[str, dict[str, list[tuple[int, str]]]] = {}  # table -> index -> (seq, column)
        for name, index, seq, column in fetch_tuples(conn, _UNIQUE_KEYS_SQL.format(names=placeholders), params):
            indexes.setdefault(text_of(name), {}).setdefault(text_of(index), []).append((int(seq), text_of(column)))
        for name, charset, comment in fetch_tuples(conn, _TABLES_SQL.format(names=placeholders), params):
            name = text_of(name)
            if name in columns:
                table = TableId(db, name)
                unique = {index: tuple(column for _, column in sorted(parts))
                          for index, parts in indexes.get(name, {}).items()}
                # the primary key first, as the server orders it (and Debezium's parser reads it)
                keys = tuple(sorted(unique.items(), key=lambda item: item[0] != PRIMARY))
                definitions[table] = TableDefinition(table, tuple(columns[name]), key_of(columns[name], keys),
                                                     text_of(charset), text_of(comment) or "", keys)
    return definitions


NUMBER_LITERAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def mariadb_default(default: str | None, extra: str) -> str | None:
    """MySQL's COLUMN_DEFAULT (literals unquoted, expressions marked DEFAULT_GENERATED in EXTRA)
    in MariaDB's form. (Not run here: the tests have MariaDB only.)"""
    if default is None or "default_generated" in extra.lower():
        return default
    if NUMBER_LITERAL.fullmatch(default) or re.fullmatch(r"[bBxX]'[0-9A-Fa-f]*'", default):
        return default
    return "'" + default.replace("'", "''") + "'"


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _binlog_end(conn) -> tuple[str | None, int | None]:
    for statement in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):  # MariaDB and MySQL < 8.4; MySQL 8.4
        try:
            rows = fetch_tuples(conn, statement)
        except pymysql.err.MySQLError:
            continue
        if rows:
            return text_of(rows[0][0]), int(rows[0][1])
    return None, None


def schema_snapshot(conn, tables: list[TableId]) -> SchemaSnapshot:
    """Everything Debezium's snapshot describes `tables` by, read now (tables dropped meanwhile
    are left out)."""
    file, position = _binlog_end(conn)
    variables = {text_of(name).lower(): text_of(value) for name, value in fetch_tuples(
        conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('character_set_server', 'collation_server')")}
    server_charset = tuple((name, variables[name]) for name in ("character_set_server", "collation_server")
                           if name in variables)
    databases: dict[str, tuple[str | None, str | None]] = {}
    wanted = sorted({table.db for table in tables})
    if wanted:
        rows = fetch_tuples(conn, "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                            "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ("
                      + ", ".join(["%s"] * len(wanted)) + ")", tuple(wanted))
        databases = {text_of(name): (text_of(charset), text_of(collation)) for name, charset, collation in rows}
    definitions = load_table_definitions(conn, tables)
    statements = {}
    for table in tables:  # one statement a table: Debezium's text is the server's SHOW CREATE TABLE
        if table not in definitions:
            continue
        try:
            rows = fetch_tuples(conn, f"SHOW CREATE TABLE {quote_identifier(table.db)}.{quote_identifier(table.table)}")
        except pymysql.err.ProgrammingError:  # dropped since
            continue
        statements[table] = text_of(rows[0][1])
    return SchemaSnapshot(server_charset, databases, statements, definitions, file, position)


class TableDefinitions:
    """Reads definitions on a connection runner (`ServerSession.run`: reconnects once)."""

    def __init__(self, run: Callable[[Callable], object]) -> None:
        self._run = run

    def load(self, tables: list[TableId]) -> dict[TableId, TableDefinition]:
        return self._run(lambda conn: load_table_definitions(conn, tables))

    def snapshot(self, tables: list[TableId]) -> SchemaSnapshot:
        return self._run(lambda conn: schema_snapshot(conn, tables))

    def charsets(self) -> tuple[str | None, dict[str, str | None]]:
        """The server's `character_set_server`, and every database's default character set."""
        return self._run(database_charsets)


def database_charsets(conn) -> tuple[str | None, dict[str, str | None]]:
    """The server's `character_set_server`, and every database's default character set (what a
    new database's and a new table's columns take when they name none)."""
    rows = fetch_tuples(conn, "SELECT @@GLOBAL.character_set_server")
    databases = {text_of(name): text_of(charset) for name, charset in fetch_tuples(
        conn, "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA")}
    return text_of(rows[0][0]) if rows else None, databases
