"""Debezium's schema-change topic, record for record: what its MySQL connector (3.6) writes there
at a first start and for each DDL statement, with each table described as its `Table` struct.

At a first start Debezium's snapshot writes (whether or not it reads rows): a `SET
character_set_server=…, collation_server=…` record, a `DROP TABLE IF EXISTS` record per table,
then per database `DROP DATABASE IF EXISTS`, `CREATE DATABASE … CHARSET … COLLATE …`, `USE` and a
`CREATE TABLE` record per table whose `ddl` is the server's `SHOW CREATE TABLE` text, all with
`source.snapshot` `"true"` (the last one `"last"` with `snapshot.mode=no_data`; with `initial`
the snapshot's last row says `"last"` instead).
`start_records` builds them from a `SchemaSnapshot`.

In streaming, each table a statement changes is a record of its own, keyed by the table's
database: `CREATE` and `ALTER` (a rename: `ALTER` of the new name) carry the table as it is after
the statement, `DROP` none (`table: null`, and the `ddl` rebuilt per table as Debezium does:
`DROP TABLE \\`db\\`.\\`t\\``). Table ids are `"db"."table"` (Debezium's double-quoted form).

Each `Table` is built from a table's definition: at a first start what the server states
(`dblog.mysql.table_definitions`, as Debezium's parser reads `SHOW CREATE TABLE`), for a streamed
statement the schema history's as of it (`dblog.core.definition_history`: the statement applied,
its columns as it spells them, as Debezium's parser applies it): typeName from the column type (`INT UNSIGNED`),
JDBC type codes as its parser resolves them, `length`/`scale` from the type's dimensions,
`enumValues` as the quoted SQL literals, `defaultValueExpression` unquoted (`CURRENT_TIMESTAMP`
defaults as `1970-01-01 00:00:00`, expressions as null), `autoIncremented` and `generated` for
AUTO_INCREMENT and ON UPDATE columns, comments null (Debezium's `include.schema.comments` is off
by default). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from dblog.core.ddl import DdlChange, classify_ddl
from dblog.core.events import SourceInfo, TableId
from dblog.core.redaction import redact_credentials
from dblog.sinks.envelope import source_block
from dblog.mysql.table_definitions import (NUMBER_LITERAL, ColumnDefinition, SchemaSnapshot, TableDefinition,
                                           quote_identifier)

Record = dict[str, Any]

# java.sql.Types of each base type, as Debezium 3.6's MySQL DDL parser resolves them
JDBC_TYPES = {
    "char": 1, "varchar": 12, "tinytext": 12, "text": 12, "mediumtext": 12, "longtext": 12,
    "tinyint": 5, "smallint": 5, "mediumint": 4, "int": 4, "integer": 4, "bigint": -5,
    "real": 7, "double": 8, "float": 6, "decimal": 3, "numeric": 2, "bit": -7,
    "time": 92, "timestamp": 2014, "datetime": 93, "date": 91, "year": 4,
    "binary": -2, "varbinary": -3, "tinyblob": 2004, "blob": 2004, "mediumblob": 2004, "longblob": 2004,
    "bool": 16, "boolean": 16, "enum": 1, "set": 1,
}
OTHER = 1111  # spatial types, JSON, and what Debezium's parser does not know
_DEFAULT_DIMENSIONS = {"decimal": (10, 0), "numeric": (10, 0), "bit": (1, None)}  # when the type has none
_CURRENT_TIMESTAMP = re.compile(r"(current_timestamp|now|localtime|localtimestamp)\b", re.IGNORECASE)
_LITERAL = re.compile(r"'(?:[^'\\]|''|\\.)*'")
_MAINTENANCE = re.compile(r"\s*(ANALYZE|OPTIMIZE|REPAIR|CHECK)\s", re.IGNORECASE)  # logged, but no table event
_DROP_PREFIX = re.compile(r"\s*(DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?)", re.IGNORECASE)


def quoted_id(table: TableId) -> str:
    """Debezium's id of a table in `tableChanges`: `"db"."table"`."""
    return f'"{table.db}"."{table.table}"'


def _split_type(column_type: str) -> tuple[str, str | None, list[str]]:
    """'int(10) unsigned' -> ('int', '10', ['unsigned']); "enum('a','b)')" keeps its quotes."""
    match = re.match(r"\s*([A-Za-z]+)", column_type)
    base = match.group(1).lower() if match else column_type.lower()
    rest = column_type[match.end():] if match else ""
    arguments = None
    if rest.startswith("("):
        depth, quoted, index = 0, False, 0
        for index, char in enumerate(rest):
            if char == "'":
                quoted = not quoted  # '' inside a literal flips twice
            elif not quoted and char == "(":
                depth += 1
            elif not quoted and char == ")":
                depth -= 1
                if depth == 0:
                    break
        arguments, rest = rest[1:index], rest[index + 1:]
    return base, arguments, rest.lower().split()


def _source_type(column_type: str) -> tuple[str, str, int | None, int | None, list[str] | None]:
    """(base type, Debezium's typeName, length, scale, ENUM/SET literals) of a COLUMN_TYPE, as
    Debezium's DDL parser reads them."""
    base, arguments, options = _split_type(column_type)
    type_name = base.upper()
    if "zerofill" in options:  # ZEROFILL implies UNSIGNED, as Debezium spells it
        type_name += " UNSIGNED ZEROFILL"
    elif "unsigned" in options:
        type_name += " UNSIGNED"
    length = scale = None
    enum_values = None
    if base in ("enum", "set"):
        enum_values = _LITERAL.findall(arguments or "")
        length = max(0, 2 * len(enum_values) - 1) if base == "set" else 1
    elif arguments:
        parts = [part.strip() for part in arguments.split(",")]
        length = int(parts[0])
        if len(parts) == 2:
            scale = int(parts[1])
    elif base in _DEFAULT_DIMENSIONS:
        length, scale = _DEFAULT_DIMENSIONS[base]
    return base, type_name, length, scale, enum_values


def source_type_parameters(name: str, column_type: str) -> dict[str, str]:
    """The schema parameters Debezium's `column.propagate.source.type` adds to a column's field:
    its type name, length and scale as its DDL parser reads them, and its name."""
    _, type_name, length, scale, _ = _source_type(column_type)
    parameters = {"__debezium.source.column.type": type_name}
    if length is not None:
        parameters["__debezium.source.column.length"] = str(length)
    if scale is not None:
        parameters["__debezium.source.column.scale"] = str(scale)
    parameters["__debezium.source.column.name"] = name
    return parameters


def debezium_column(column: ColumnDefinition) -> dict:
    """Debezium's `Column` struct of one column."""
    base, type_name, length, scale, enum_values = _source_type(column.column_type)
    auto = "auto_increment" in column.extra.lower() or "on update" in column.extra.lower()
    return {
        "name": column.name,
        "jdbcType": JDBC_TYPES.get(base, OTHER),
        "nativeType": None,
        "typeName": type_name,
        "typeExpression": type_name,
        "charsetName": column.charset if column.charset != "binary" else None,
        "length": length,
        "scale": scale,
        "position": column.position,
        "optional": column.nullable,
        "autoIncremented": auto,
        "generated": auto,
        "comment": None,
        "defaultValueExpression": default_value_expression(column.default),
        "enumValues": enum_values,
    }


def default_value_expression(default: str | None) -> str | None:
    """Debezium's `defaultValueExpression` of a column whose information_schema COLUMN_DEFAULT is
    `default` (MariaDB's form: string literals quoted, NULL as `NULL`, functions as called)."""
    if default is None or default.upper() == "NULL":
        return None
    if len(default) >= 2 and default[0] == default[-1] == "'":
        return default[1:-1]  # the outer quotes only, as Debezium's parser strips them
    if _CURRENT_TIMESTAMP.match(default):
        return "1970-01-01 00:00:00"
    if default[:2].lower() in ("b'", "x'") and default.endswith("'"):
        return default[2:-1]
    if NUMBER_LITERAL.fullmatch(default):
        return default
    return None  # an expression: Debezium keeps none


def debezium_table(definition: TableDefinition) -> dict:
    """Debezium's `Table` struct (io.debezium.connector.schema.Table) of a table."""
    return {
        "defaultCharsetName": definition.charset,
        "primaryKeyColumnNames": list(definition.primary_key),
        "columns": [debezium_column(column) for column in definition.columns],
        "comment": None,
    }


def _source(connector: str, table: TableId, at: SourceInfo, ts_ns: int, snapshot: str) -> dict:
    """Debezium's `source` of a schema-change record: `table` null for a database's statements."""
    source = source_block(at, table, connector, ts_ns)
    source["snapshot"] = snapshot
    source["table"] = table.table or None
    return source


def _record(database: str, ddl: str, changes: list[dict], source: dict, ts_ms: int) -> Record:
    return {
        "key": {"databaseName": database},
        "value": {"source": source, "ts_ms": ts_ms, "databaseName": database, "schemaName": None, "ddl": ddl,
                  "tableChanges": changes},
    }


def start_records(snapshot: SchemaSnapshot, tables: list[TableId], connector: str, ts_ns: int,
                  last: str = "last") -> list[Record]:
    """The records Debezium's snapshot writes on the schema-change topic for `tables` (those of
    them still there when `snapshot` was read), in its order; the last one's `source.snapshot` is
    `last` ("last" as with `snapshot.mode=no_data`; "true" when the snapshot's rows follow, as
    with `initial`)."""
    tables = [table for table in tables if table in snapshot.create_statements]
    records: list[tuple[str, str | None, str, list[dict]]] = []  # (database, table, ddl, changes)
    if snapshot.server_charset:
        records.append(("", None, "SET " + ", ".join(f"{name}={value}" for name, value in snapshot.server_charset),
                        []))
    for table in tables:
        records.append((table.db, table.table, f"DROP TABLE IF EXISTS {_backquoted(table)}",
                        [{"type": "DROP", "id": quoted_id(table), "table": None}]))
    by_db: dict[str, list[TableId]] = {}
    for table in tables:
        by_db.setdefault(table.db, []).append(table)
    for db, members in by_db.items():
        records.append((db, None, f"DROP DATABASE IF EXISTS {quote_identifier(db)}", []))
        charset, collation = snapshot.databases.get(db, (None, None))
        create = f"CREATE DATABASE {quote_identifier(db)}"
        if charset:
            create += f" CHARSET {charset}"
        if collation:
            create += f" COLLATE {collation}"
        records.append((db, None, create, []))
        records.append((db, None, f"USE {quote_identifier(db)}", []))
        for table in members:
            # SHOW CREATE TABLE shows a FEDERATED/CONNECT table's CONNECTION string, password included
            records.append((db, table.table, redact_credentials(snapshot.create_statements[table]),
                            [{"type": "CREATE", "id": quoted_id(table),
                              "table": debezium_table(snapshot.definitions[table])}]))
    at = SourceInfo(file=snapshot.binlog_file, pos=snapshot.binlog_position)
    written = []
    for index, (db, table, ddl, changes) in enumerate(records):
        marker = last if index == len(records) - 1 else "true"
        source = _source(connector, TableId(db, table or ""), at, ts_ns, marker)
        written.append(_record(db, ddl, changes, source, ts_ns // 1_000_000))
    return written


def _backquoted(table: TableId) -> str:
    return f"{quote_identifier(table.db)}.{quote_identifier(table.table)}"


def streamed_changes(sql: str, ddl: DdlChange, captures: Callable[[TableId], bool]) -> list[tuple[str, TableId]]:
    """(type, table) of each captured table the statement `sql` (`ddl`, as classified) changes, as
    Debezium's parser signals them: CREATE (CREATE OR REPLACE too: Debezium parses a CREATE),
    DROP, and ALTER of the rest; a rename is an ALTER of the new name (when either name is
    captured). TRUNCATE and table maintenance (ANALYZE, OPTIMIZE, …) change no definition."""
    if ddl.kind == "truncate" or _MAINTENANCE.match(sql):
        return []
    renamed = dict(ddl.renamed)
    kind = "CREATE" if ddl.kind == "create_table" or ddl.replaced else "DROP" if ddl.kind == "drop_table" else "ALTER"
    changes = []
    for table in ddl.tables:
        new = renamed.get(table)
        if new is not None:
            if captures(new) or captures(table):
                changes.append(("ALTER", new))
        elif captures(table):
            changes.append((kind, table))
    return changes


def dropped_database(sql: str, db: str) -> str | None:
    """The database a DROP DATABASE statement drops (None for any other statement)."""
    ddl = classify_ddl(sql, db)
    return ddl.database if ddl.kind == "drop_database" else None


def database_record(sql: str, database: str, source: SourceInfo, connector: str, ts_ns: int) -> Record:
    """The record of a statement about a database as a whole (DROP DATABASE): no tableChanges,
    keyed by that database, as Debezium writes it (not one DROP per table)."""
    return _record(database, sql, [], _source(connector, TableId(database, ""), source, ts_ns, "false"),
                   ts_ns // 1_000_000)


def streamed_records(sql: str, changes: list[tuple[str, TableId]], definitions: dict[TableId, TableDefinition],
                     source: SourceInfo, connector: str, ts_ns: int) -> list[Record]:
    """The records of one DDL statement `sql` read from the binlog at `source`: one per
    `(type, table)` of `changes` (CREATE, ALTER with the table after the statement, DROP),
    keyed by the table's database. A table `definitions` lacks (not known) has `table: null`."""
    records = []
    drop_prefix = _DROP_PREFIX.match(sql)
    for kind, table in changes:
        ddl = sql
        block = None
        if kind == "DROP":
            if drop_prefix is not None:  # Debezium writes each dropped table's own statement
                ddl = drop_prefix.group(1) + _backquoted(table)
        elif table in definitions:
            block = debezium_table(definitions[table])
        record_source = _source(connector, table, source, ts_ns, "false")
        records.append(_record(table.db, ddl, [{"type": kind, "id": quoted_id(table), "table": block}],
                               record_source, ts_ns // 1_000_000))
    return records
