"""Table metadata read from information_schema: what every column is, and what the key is.

Both readers need it: a chunk SELECT lists the columns and pages by the primary key, and the
binlog decoder needs each column's declared type to normalize a value the same way the SELECT
path does (the binlog alone says "16 bytes", not "this is a UUID"). Keys travel through dblog in
normalized form (JSON-safe); `TableSchema.key_params` turns one back into values pymysql can bind
so that `WHERE key = key_params(key_of(row))` finds that row again.

Keys are compared the server's way through `TableSchema.identity_of`: a key's string columns
replaced by their collation sort keys (dblog.mysql.collation), so 'abc', 'ABC' and 'abc ' have one
identity under utf8mb4_general_ci, as they are one primary-key value for the server. The
weights behind it are read by `load_schema`, on the same connection, so computing an identity
needs no I/O.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import operator
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import pymysql.cursors

from dblog.core.events import Key, Row, TableId
from dblog.mysql.collation import Collation, load_collation

__all__ = ["Column", "TableSchema", "TableNotFound", "load_schema", "load_schemas", "list_tables", "SYSTEM_SCHEMAS", "is_collated"]

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")

# information_schema DATA_TYPE values, grouped by how their values are handled.
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry",
                          "point", "linestring", "polygon", "multipoint", "multilinestring",
                          "multipolygon", "geometrycollection"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"})
DATETIME_TYPES = frozenset({"datetime", "timestamp"})
# String types that can be (part of) a key and compare by their collation (not ENUM/SET: by index)
COLLATED_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})


class TableNotFound(LookupError):
    """The table does not exist (or this user cannot see it)."""


@dataclass(frozen=True)
class Column:
    """One column as information_schema.COLUMNS describes it (frozen: usable as a cache key)."""

    name: str
    data_type: str  # lowercase DATA_TYPE: 'int', 'varchar', 'uuid', ...
    column_type: str  # full COLUMN_TYPE: 'int(10) unsigned', "enum('a','b')", ...
    unsigned: bool = False
    char_length: int | None = None  # CHARACTER_MAXIMUM_LENGTH (bytes for BINARY/VARBINARY)
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None  # fractional digits of TIME/DATETIME/TIMESTAMP
    charset: str | None = None
    collation: str | None = None
    enum_values: tuple[str, ...] | None = None  # ENUM and SET members, in definition order
    nullable: bool = True

    @property
    def is_binary(self) -> bool:
        """Values are bytes (normalized to base64 text)."""
        return self.data_type in BINARY_TYPES or (self.data_type in TEXT_TYPES and self.charset == "binary")


@dataclass
class TableSchema:
    table: TableId
    columns: list[Column]
    key_columns: tuple[str, ...]  # primary key, in key order; () when the table has none
    # string columns' collations, as loaded by load_schema (a column without one compares by value)
    collations: dict[str, Collation] = field(default_factory=dict, repr=False, compare=False)
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)
    _key_sort_keys: tuple[Callable[[str], Any] | None, ...] = field(init=False, repr=False, compare=False)
    _key_collated: bool = field(init=False, repr=False, compare=False)
    _key_getter: Callable[[Row], Key] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name = {column.name: column for column in self.columns}
        missing = [name for name in self.key_columns if name not in self._by_name]
        if missing:
            raise ValueError(f"key columns {missing} are not columns of {self.table}")
        self._key_sort_keys = tuple(
            self.collations[name].sort_key if name in self.collations and is_collated(self._by_name[name]) else None
            for name in self.key_columns
        )
        self._key_collated = any(self._key_sort_keys)
        if len(self.key_columns) == 1:
            only = self.key_columns[0]
            self._key_getter = lambda row: (row[only],)
        else:
            self._key_getter = operator.itemgetter(*self.key_columns) if self.key_columns else lambda row: ()

    def __getstate__(self) -> dict:  # pickled for Spark tasks: the derived fields are rebuilt
        return {"table": self.table, "columns": self.columns, "key_columns": self.key_columns,
                "collations": self.collations}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.table} has no column {name!r}") from None

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def key_of(self, row: Row) -> Key:
        """The normalized key of a normalized row."""
        return self._key_getter(row)

    def identity_of(self, key: Key) -> Key:
        """The key as the server compares it: equal identities exactly when the server says the
        keys are equal (its string columns replaced by their collation sort keys). Pure: the
        collation weights were loaded with the schema."""
        if not self._key_collated:  # no string key column: the value is the identity
            return key
        return tuple(
            value if sort_key is None or value is None else sort_key(value)
            for sort_key, value in zip(self._key_sort_keys, key)
        )

    @property
    def key_sort_keys(self) -> tuple[Callable[[str], Any] | None, ...]:
        """Per key column, the sort key `identity_of` replaces its values by (None: the value)."""
        return self._key_sort_keys

    def key_params(self, key: Key) -> tuple:
        """Bindable values for a normalized key, column by column (see `bind_value`)."""
        if len(key) != len(self.key_columns):
            raise ValueError(f"key {key!r} has {len(key)} values; {self.table} has key {self.key_columns}")
        return tuple(bind_value(self._by_name[name], value) for name, value in zip(self.key_columns, key))


def is_collated(column: Column) -> bool:
    """A character column: its values compare by collation, not by value."""
    return column.data_type in COLLATED_TYPES and not column.is_binary and column.collation is not None


def bind_value(column: Column, value: Any) -> Any:
    """A normalized value back into something pymysql binds so that SQL compares it equal
    (and orders it the same way as ORDER BY does) to the stored value.

    Assumes the session time_zone is '+00:00' (TIMESTAMP values are normalized in UTC).
    """
    if value is None:
        return None
    data_type = column.data_type
    if column.is_binary:
        return base64.b64decode(value)
    if data_type in DATETIME_TYPES:
        if value.startswith("0000-00-00"):
            return value  # zero dates: the server's own text
        return datetime.datetime.fromisoformat(value.removesuffix("Z"))
    if data_type == "date":
        return value  # 'YYYY-MM-DD' is what the server reads
    if data_type == "decimal":
        return decimal.Decimal(value)
    if data_type == "float":
        # Compare as the float32 the column holds, widened: pymysql sends a double literal.
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if data_type == "enum":
        # ORDER BY sorts an ENUM by member index, so compare by index too (a string would
        # compare alphabetically and keyset paging would skip rows).
        return 0 if value == "" else column.enum_values.index(value) + 1
    if data_type == "set":
        # Likewise a SET sorts by its bitmask.
        members = [] if value == "" else value.split(",")
        return sum(1 << column.enum_values.index(member) for member in members)
    return value  # ints, double, text, TIME text, uuid/inet text, year, bit (int)


# --- loading ---------------------------------------------------------------------------------


_MEMBER = re.compile(r"'((?:[^']|'')*)'")


def parse_members(column_type: str) -> tuple[str, ...]:
    """"enum('a','it''s')" -> ('a', "it's")."""
    inside = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(match.group(1).replace("''", "'") for match in _MEMBER.finditer(inside))


_COLUMNS_SQL = """
SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION,
       NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, IS_NULLABLE
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s
ORDER BY ORDINAL_POSITION
"""

_PRIMARY_KEY_SQL = """
SELECT COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY'
ORDER BY SEQ_IN_INDEX
"""


_UNIQUE_COLUMNS_SQL = """
SELECT DISTINCT COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0
"""


def text_of(value: Any) -> str | None:
    """A server value as str (information_schema and SHOW answers may come as bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return value.decode()
    return value


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def fetch_tuples(conn, sql: str, params: tuple = ()) -> tuple:
    # A tuple cursor whatever the connection's default cursor class is.
    with conn.cursor(pymysql.cursors.Cursor) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def load_schema(conn, table: TableId, collations: bool = True) -> TableSchema:
    """Columns (in table order) and primary key (in key order) of `table`; with `collations`,
    the collations of its string key columns (else `identity_of` compares stored values)."""
    column_rows = fetch_tuples(conn, _COLUMNS_SQL, (table.db, table.table))
    if not column_rows:
        raise TableNotFound(f"table {table} does not exist or is not visible to this user")
    key_rows = fetch_tuples(conn, _PRIMARY_KEY_SQL, (table.db, table.table))
    unique: set[str] = set()
    if collations:
        unique = {text_of(row[0]) for row in fetch_tuples(conn, _UNIQUE_COLUMNS_SQL, (table.db, table.table))}
    return _schema(conn, table, column_rows, tuple(text_of(row[0]) for row in key_rows), unique, collations)


def _schema(conn, table: TableId, column_rows, key_columns: tuple[str, ...], unique: set[str],
            collations: bool) -> TableSchema:
    """A TableSchema from its COLUMNS rows (`_COLUMNS_SQL`'s columns, in table order), its
    primary key and the columns of its unique indexes (primary included)."""
    columns = []
    for name, data_type, column_type, char_length, precision, scale, dt_precision, charset, collation, nullable in (
        column_rows
    ):
        data_type = text_of(data_type).lower()
        column_type = text_of(column_type)
        columns.append(
            Column(
                name=text_of(name),
                data_type=data_type,
                column_type=column_type,
                unsigned="unsigned" in column_type.lower(),
                char_length=_int(char_length),
                numeric_precision=_int(precision),
                numeric_scale=_int(scale),
                datetime_precision=_int(dt_precision),
                charset=text_of(charset),
                collation=text_of(collation),
                enum_values=parse_members(column_type) if data_type in ("enum", "set") else None,
                nullable=text_of(nullable) == "YES",
            )
        )
    key_collations = {}
    if collations:
        # Collations of every column that can be a key (primary or unique: a table without a
        # primary key may be keyed by a unique one), for identity_of.
        key_collations = {
            column.name: load_collation(conn, column.collation, column.charset, table.db)
            for column in columns
            if (column.name in unique or column.name in key_columns) and is_collated(column)
        }
    return TableSchema(table=table, columns=columns, key_columns=key_columns, collations=key_collations)


# Tables per query of `load_schemas`: information_schema opens only the tables named in the
# IN list (MariaDB and MySQL 8 both push TABLE_SCHEMA/TABLE_NAME down), and a statement stays short.
SCHEMA_BATCH = 500


def load_schemas(conn, tables: list[TableId], collations: bool = True) -> dict[TableId, TableSchema]:
    """`load_schema` of many tables at once: two information_schema queries per database and
    per `SCHEMA_BATCH` tables instead of three per table (10,000 tables: about 0.5 ms a table
    instead of 3 here). Tables that do not exist are left out (`load_schema` says why)."""
    schemas: dict[TableId, TableSchema] = {}
    for db, batch, placeholders in table_batches(tables):
        columns: dict[str, list[tuple]] = {}
        for row in fetch_tuples(conn, _BATCH_COLUMNS_SQL.format(names=placeholders), (db, *batch)):
            columns.setdefault(text_of(row[0]), []).append(row[1:])
        keys: dict[str, list[str]] = {}
        unique: dict[str, set[str]] = {}
        for name, index, column in fetch_tuples(conn, _BATCH_UNIQUE_SQL.format(names=placeholders), (db, *batch)):
            name, column = text_of(name), text_of(column)
            unique.setdefault(name, set()).add(column)
            if text_of(index) == "PRIMARY":
                keys.setdefault(name, []).append(column)
        for name in batch:
            if name in columns:  # (a name the server spells otherwise: load_schema's, later)
                table = TableId(db, name)
                schemas[table] = _schema(conn, table, columns[name], tuple(keys.get(name, ())),
                                         unique.get(name, set()), collations)
    return schemas


def table_batches(tables: Iterable[TableId]) -> Iterator[tuple[str, list[str], str]]:
    """`tables` (duplicates dropped) as (database, up to SCHEMA_BATCH of its table names, the
    `%s, %s, …` placeholders of an IN list of them): one information_schema query each."""
    by_db: dict[str, list[str]] = {}
    for table in dict.fromkeys(tables):
        by_db.setdefault(table.db, []).append(table.table)
    for db, names in by_db.items():
        for first in range(0, len(names), SCHEMA_BATCH):
            batch = names[first:first + SCHEMA_BATCH]
            yield db, batch, ", ".join(["%s"] * len(batch))


_BATCH_COLUMNS_SQL = """
SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION,
       NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, IS_NULLABLE
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names})
ORDER BY TABLE_NAME, ORDINAL_POSITION
"""

_BATCH_UNIQUE_SQL = """
SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names}) AND NON_UNIQUE = 0
ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX
"""


def list_tables(conn, db: str | None = None) -> list[TableId]:
    """Every base table outside the system schemas (of database `db` when given), sorted."""
    placeholders = ", ".join(["%s"] * len(SYSTEM_SCHEMAS))
    rows = fetch_tuples(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({placeholders}) "
        + ("AND TABLE_SCHEMA = %s " if db is not None else "")
        + "ORDER BY TABLE_SCHEMA, TABLE_NAME",
        (*SYSTEM_SCHEMAS, *((db,) if db is not None else ())),
    )
    return [TableId(text_of(db), text_of(name)) for db, name in rows]
