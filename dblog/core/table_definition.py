"""A table's definition as the server states it: each column's declared type, default,
nullability, AUTO_INCREMENT / ON UPDATE / generation, comment; the table's primary key (or the
unique index standing in for one), its unique indexes, default character set and comment.

What Debezium's schema-change records describe a table by, and where the Kafka sink takes column
defaults from. Read from information_schema at a first start (`dblog.mysql.table_definitions`),
then kept as of each binlog position by applying the binlog's DDL to it
(`dblog.core.definition_ddl`, `dblog.core.definition_history`). Pure.

Values keep information_schema's form on MariaDB: `column_type` is COLUMN_TYPE (`int(10)
unsigned`, `enum('a','b''c')`), `default` is COLUMN_DEFAULT (string literals quoted, `NULL`,
`current_timestamp()`, numbers as written), `extra` is EXTRA (`auto_increment`, `on update
current_timestamp()`, `VIRTUAL GENERATED`). A definition built from a statement keeps the
statement's spelling where the server would rewrite it (`INT` stays `int`, the server says
`int(11)`), as Debezium's parser does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from dblog.core.events import TableId

__all__ = ["ColumnDefinition", "TableDefinition", "PRIMARY", "key_of", "table_to_json", "table_from_json"]


@dataclass(frozen=True)
class ColumnDefinition:
    """One column as information_schema.COLUMNS states it."""

    name: str
    position: int  # ORDINAL_POSITION, from 1
    column_type: str  # COLUMN_TYPE: 'int(10) unsigned', "enum('a','b')", 'varchar(40)'
    charset: str | None  # CHARACTER_SET_NAME (None for non-character columns)
    nullable: bool
    default: str | None  # COLUMN_DEFAULT in MariaDB's form (literals quoted, `NULL`, 'current_timestamp()')
    extra: str  # EXTRA: 'auto_increment', 'on update current_timestamp()', 'VIRTUAL GENERATED', ...
    comment: str


@dataclass(frozen=True)
class TableDefinition:
    table: TableId
    columns: tuple[ColumnDefinition, ...]  # in table order
    primary_key: tuple[str, ...]  # in key order; a unique NOT NULL index's without one (Debezium's), or ()
    charset: str | None  # the table's default character set
    comment: str
    # The unique indexes, (name, columns) in the server's order of them: `PRIMARY` first (a
    # functional key part is None). Which one keys a table without a primary key, and what a
    # later DROP INDEX / DROP COLUMN leaves.
    unique_keys: tuple[tuple[str, tuple[str | None, ...]], ...] = ()

    def column(self, name: str) -> ColumnDefinition | None:
        """The column called `name` (the server compares column names without case)."""
        folded = name.lower()
        return next((column for column in self.columns if column.name.lower() == folded), None)


PRIMARY = "PRIMARY"


def key_of(columns: Iterable[ColumnDefinition], unique_keys: Iterable[tuple[str, tuple[str | None, ...]]]
           ) -> tuple[str, ...]:
    """The primary key; without one, the first unique index of NOT NULL columns (as Debezium's
    parser keys such a table; a functional key part disqualifies an index)."""
    nullable = {column.name.lower() for column in columns if column.nullable}
    for name, parts in unique_keys:
        if name.upper() == PRIMARY:
            return tuple(parts)  # type: ignore[arg-type]
        if parts and all(part is not None and part.lower() not in nullable for part in parts):
            return tuple(parts)  # type: ignore[arg-type]
    return ()


# --- the offsets document's form: compact, since it is saved whenever a definition changes -----


def table_to_json(definition: TableDefinition) -> dict[str, Any]:
    return {
        "columns": [[c.name, c.column_type, c.charset, c.nullable, c.default, c.extra, c.comment]
                    for c in definition.columns],
        "key": list(definition.primary_key),
        "unique": [[name, list(parts)] for name, parts in definition.unique_keys],
        "charset": definition.charset,
        "comment": definition.comment,
    }


def table_from_json(table: TableId, data: dict[str, Any]) -> TableDefinition:
    """The definition `table_to_json` wrote; KeyError, TypeError or ValueError when it is not one."""
    columns = tuple(ColumnDefinition(str(name), position, str(column_type), charset, bool(nullable), default,
                                     str(extra), str(comment))
                    for position, (name, column_type, charset, nullable, default, extra, comment)
                    in enumerate(data["columns"], 1))
    return TableDefinition(table, columns, tuple(data["key"]), data["charset"], str(data["comment"]),
                           tuple((str(name), tuple(parts)) for name, parts in data["unique"]))
