"""TABLE_MAP events without column names (binlog_row_metadata below FULL), completed from the
schema history's definition of the table at that binlog position.

What a map carries depends on binlog_row_metadata. MySQL (sql/log_event.cc, mysql-8.4,
`Table_map_log_event::init_metadata_fields`): always the column count, types, per-type metadata
(lengths, precision/scale, fraction digits, pack lengths) and nullability; with MINIMAL (MySQL's
default) also SIGNEDNESS, DEFAULT_CHARSET / COLUMN_CHARSET of character columns and
GEOMETRY_TYPE; only with FULL the COLUMN_NAME, ENUM_AND_SET_*_CHARSET, SET_STR_VALUE /
ENUM_STR_VALUE, SIMPLE_PRIMARY_KEY / PRIMARY_KEY_WITH_PREFIX and COLUMN_VISIBILITY fields.
MariaDB (sql/log_event_server.cc, same function, ported from MySQL) logs the same, and nothing
optional at all with its default NO_LOG.

`map_with_definition(table_map, definition)` takes what the map lacks from `definition` (a
`dblog.core.table_definition.TableDefinition`, the history's as of the rows' position): the
names, signedness and character sets where the map has none, ENUM/SET members, the primary
key. Everything the map does carry is checked against the definition first: column count,
each column's binlog type, its metadata, nullability, and signedness / character set when
logged. A disagreement raises `DefinitionMismatch` naming the table and the column: decoding
with a definition the rows were not written with would corrupt them silently (a dropped and
re-added column of the same type is the one change no check can see; see docs/architecture.md).
Pure: no I/O.
"""

from __future__ import annotations

import re

from dblog.core.table_definition import ColumnDefinition, TableDefinition
from dblog.mysql.binlog import values as bv
from dblog.mysql.binlog.rows import (
    BINARY_COLLATION, BIT, BLOB, DATE, DATETIME, DATETIME2, DOUBLE, ENUM, FLOAT, GEOMETRY, INT24, JSON, LONG,
    LONG_BLOB, LONGLONG, MEDIUM_BLOB, NEWDATE, NEWDECIMAL, SET, SHORT, STRING, TIME, TIME2, TIMESTAMP, TIMESTAMP2,
    TINY, TINY_BLOB, VAR_STRING, VARCHAR, VECTOR, YEAR, BinlogFormatError, MapColumn, TableMap, _collation_charset,
)

__all__ = ["DefinitionMismatch", "map_with_definition", "SIGNEDNESS_FIELD"]

SIGNEDNESS_FIELD = 1  # its optional metadata field type (Table_map_event::Optional_metadata_field_type)

_BLOB_TYPES = (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB)
# The binlog types a declared type is logged as (temporal types: the pre-5.6 formats too).
_LOGGED_AS: dict[str, tuple[int, ...]] = {
    "tinyint": (TINY,), "bool": (TINY,), "boolean": (TINY,), "smallint": (SHORT,), "mediumint": (INT24,),
    "int": (LONG,), "integer": (LONG,), "bigint": (LONGLONG,), "float": (FLOAT,), "double": (DOUBLE,),
    "real": (DOUBLE,), "decimal": (NEWDECIMAL,), "numeric": (NEWDECIMAL,), "year": (YEAR,),
    "date": (DATE, NEWDATE), "time": (TIME2, TIME), "datetime": (DATETIME2, DATETIME),
    "timestamp": (TIMESTAMP2, TIMESTAMP), "bit": (BIT,), "enum": (ENUM,), "set": (SET,),
    "char": (STRING,), "binary": (STRING,), "varchar": (VARCHAR, VAR_STRING), "varbinary": (VARCHAR, VAR_STRING),
    "tinytext": _BLOB_TYPES, "text": _BLOB_TYPES, "mediumtext": _BLOB_TYPES, "longtext": _BLOB_TYPES,
    "tinyblob": _BLOB_TYPES, "blob": _BLOB_TYPES, "mediumblob": _BLOB_TYPES, "longblob": _BLOB_TYPES,
    "json": (JSON, *_BLOB_TYPES),  # MySQL's binary JSON; MariaDB's JSON is a LONGTEXT
    "geometry": (GEOMETRY,), "point": (GEOMETRY,), "linestring": (GEOMETRY,), "polygon": (GEOMETRY,),
    "multipoint": (GEOMETRY,), "multilinestring": (GEOMETRY,), "multipolygon": (GEOMETRY,),
    "geometrycollection": (GEOMETRY,),
    "uuid": (STRING,), "inet6": (STRING,), "inet4": (STRING,),  # MariaDB: fixed binary strings
    "vector": (VECTOR, VARCHAR),  # MySQL 9's VECTOR; MariaDB 11.7's, a binary string
}
# Length bytes of a BLOB/TEXT (the map's metadata), by declared type.
_LENGTH_BYTES = {"tinytext": 1, "tinyblob": 1, "text": 2, "blob": 2, "mediumtext": 3, "mediumblob": 3,
                 "longtext": 4, "longblob": 4, "json": 4}
_BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "uuid", "inet6",
                           "inet4", "vector", "geometry", "point", "linestring", "polygon", "multipoint",
                           "multilinestring", "multipolygon", "geometrycollection", "bit"})
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
_FIXED_BYTES = {"uuid": 16, "inet6": 16, "inet4": 4}
# Bytes per character at most (MySQL's mbmaxlen), for CHAR/VARCHAR byte lengths.
_MAX_BYTES = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4,
              "big5": 2, "gbk": 2, "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "euckr": 2, "ujis": 3,
              "eucjpms": 3}
_DECLARED = re.compile(r"\s*(\w+)\s*(?:\((.*)\))?\s*(.*)", re.DOTALL)
_MEMBER = re.compile(r"'((?:[^']|'')*)'")


class DefinitionMismatch(BinlogFormatError):
    """The schema history's definition of a table does not describe the rows event's table map."""


def map_with_definition(table_map: TableMap, definition: TableDefinition) -> TableMap:
    """`table_map` (without column names) completed from `definition`; DefinitionMismatch when
    what the map logs disagrees with it."""
    table = f"{table_map.db}.{table_map.table}"
    definition = _with_hash_columns(table_map, definition)
    if len(definition.columns) != len(table_map.columns):
        raise DefinitionMismatch(
            f"the binlog's table map of {table} has {len(table_map.columns)} columns, the schema history's "
            f"definition of it {len(definition.columns)} ({', '.join(c.name for c in definition.columns)})")
    signedness = SIGNEDNESS_FIELD in table_map.metadata_fields
    columns = tuple(_named_column(column, known, table, signedness)
                    for column, known in zip(table_map.columns, definition.columns))
    index = {column.name.lower(): column.index for column in columns}
    key = tuple(index[name.lower()] for name in definition.primary_key if name.lower() in index)
    return TableMap(table_map.table_id, table_map.db, table_map.table, columns, key, has_names=True,
                    metadata_fields=table_map.metadata_fields)


def _with_hash_columns(table_map: TableMap, definition: TableDefinition) -> TableDefinition:
    """`definition` with MariaDB's hidden hash columns where the map has them: a UNIQUE key over a
    BLOB/TEXT column (a "long unique", MariaDB 10.4+) is enforced through a hidden BIGINT column,
    `DB_ROW_HASH_<n>`, which information_schema (and so the history) leaves out but the binlog logs
    after the table's columns (seen on MariaDB 10.11; with FULL metadata it is named so)."""
    extra = len(table_map.columns) - len(definition.columns)
    if extra <= 0:
        return definition
    blobs = {column.name.lower() for column in definition.columns
             if _DECLARED.fullmatch(column.column_type.lower()) is not None
             and _DECLARED.fullmatch(column.column_type.lower()).group(1) in _LENGTH_BYTES}
    long_uniques = sum(1 for name, columns in definition.unique_keys
                       if name != "PRIMARY" and any(c is not None and c.lower() in blobs for c in columns))
    trailing = table_map.columns[len(definition.columns):]
    if extra > long_uniques or any(column.type != LONGLONG or not column.nullable for column in trailing):
        return definition  # not hash columns: the count check refuses the map
    hashes = tuple(ColumnDefinition(f"DB_ROW_HASH_{n}", len(definition.columns) + n, "bigint unsigned", None, True,
                                    None, "INVISIBLE", "") for n in range(1, extra + 1))
    return TableDefinition(definition.table, definition.columns + hashes, definition.primary_key, definition.charset,
                           definition.comment, definition.unique_keys)


def _named_column(column: MapColumn, known: ColumnDefinition, table: str, signedness: bool) -> MapColumn:
    match = _DECLARED.fullmatch(known.column_type.lower())
    base, arguments, rest = (match.group(1), match.group(2) or "", match.group(3)) if match else ("", "", "")

    def mismatch(what: str) -> DefinitionMismatch:
        return DefinitionMismatch(
            f"column {column.index + 1} of {table}: the binlog's table map logs {column.type_name} ({what}), the "
            f"schema history's definition says {known.name} {known.column_type}"
            f"{' NULL' if known.nullable else ' NOT NULL'}")

    if column.type not in _LOGGED_AS.get(base, ()):
        raise mismatch("another type")
    if column.nullable != known.nullable:
        raise mismatch("NULL" if column.nullable else "NOT NULL")
    unsigned = "unsigned" in rest.split()
    if signedness and unsigned != column.unsigned and column.type in (TINY, SHORT, INT24, LONG, LONGLONG, FLOAT,
                                                                        DOUBLE, NEWDECIMAL):
        raise mismatch("unsigned" if column.unsigned else "signed")
    charset = _charset(known, base)
    logged = _collation_charset(column.collation)
    if logged is not None and charset is not None and _same_charset(logged, charset) is False:
        raise mismatch(f"character set {logged}")
    problem = _metadata_problem(column, base, arguments, charset or logged)
    if problem is not None:
        raise mismatch(problem)
    collation = column.collation if column.collation is not None else _collation_id(charset)
    members = None
    if column.type in (ENUM, SET):
        names = _members(arguments)
        try:
            if collation is None or column.collation is not None:
                raise LookupError  # the members' character set is not known, or not theirs
            members = tuple(_encode(member, charset) for member in names)
        except (LookupError, UnicodeEncodeError):  # labels only: any character set they round-trip in
            collation, members = _collation_id("utf8mb4"), tuple(member.encode() for member in names)
        pack = (1 if len(members) < 256 else 2) if column.type == ENUM else _set_pack_length(len(members))
        if pack != column.meta:
            raise mismatch(f"{column.meta}-byte values, for {len(members)} members {pack}")
    elif column.collation is None and charset is None and base in _TEXT_TYPES:
        raise mismatch("no character set in the binlog nor in the schema history")
    return MapColumn(column.index, column.type, column.meta, column.nullable, known.name,
                     column.unsigned if signedness else unsigned, collation, members)


def _charset(known: ColumnDefinition, base: str) -> str | None:
    if base in _BINARY_TYPES:
        return "binary"
    if known.charset is None:
        return None
    return "utf8mb3" if known.charset.lower() == "utf8" else known.charset.lower()


def _same_charset(logged: str, charset: str) -> bool:
    aliases = {"utf8": "utf8mb3"}
    return aliases.get(logged, logged) == aliases.get(charset, charset)


def _metadata_problem(column: MapColumn, base: str, arguments: str, charset: str | None) -> str | None:
    """Why the map's metadata does not fit the declared type (None: it does)."""
    t, meta = column.type, column.meta
    numbers = [int(part) for part in arguments.split(",")] if re.fullmatch(r"\d+(,\d+)?", arguments) else []
    if t == NEWDECIMAL:
        precision, scale = (numbers + [10, 0][len(numbers):])[:2] if numbers else (10, 0)
        if (meta >> 8, meta & 0xFF) != (precision, scale):
            return f"decimal({meta >> 8},{meta & 0xFF})"
    elif t in (TIME2, DATETIME2, TIMESTAMP2):
        if meta != (numbers[0] if numbers else 0):
            return f"{meta} fractional digits"
    elif t == BIT:
        bits = numbers[0] if numbers else 1
        if (meta >> 8) * 8 + (meta & 0xFF) != bits:
            return f"bit({(meta >> 8) * 8 + (meta & 0xFF)})"
    elif t in _BLOB_TYPES and base in _LENGTH_BYTES:
        if meta != _LENGTH_BYTES[base]:
            return f"{meta} length bytes"
    elif t in (STRING, VARCHAR, VAR_STRING):
        if base in _FIXED_BYTES:
            expected = _FIXED_BYTES[base]
        elif base == "vector" or not numbers and base in ("varchar", "varbinary"):
            return None
        else:
            length = numbers[0] if numbers else 1
            expected = length if charset == "binary" else (
                length * _MAX_BYTES[charset] if charset in _MAX_BYTES else None if charset is None else length)
            if expected is None:
                return None
        if meta != expected:
            return f"{meta} bytes long"
    return None


def _members(arguments: str) -> list[str]:
    return [member.replace("''", "'") for member in _MEMBER.findall(arguments)]


def _set_pack_length(count: int) -> int:
    """A SET's value width (sql/field.h, get_set_pack_length)."""
    width = (count + 7) // 8
    return 8 if width > 4 else width


def _collation_id(charset: str | None) -> int | None:
    """An id of a collation of `charset` (the readers only take its character set from it)."""
    if charset is None:
        return None
    if charset == "binary":
        return BINARY_COLLATION
    try:
        import pymysql.charset

        return pymysql.charset.charset_by_name("utf8mb3" if charset == "utf8" else charset).id
    except KeyError:
        try:
            return pymysql.charset.charset_by_name("utf8" if charset == "utf8mb3" else charset).id
        except KeyError:
            return None


def _encode(member: str, charset: str | None) -> bytes:
    """An ENUM/SET member as the server logs it: in the column's character set."""
    encoding = "cp1252" if charset == "latin1" else bv._PYTHON_ENCODINGS.get(charset or "", charset)
    if not encoding:
        raise LookupError(charset)
    return member.encode(encoding)
