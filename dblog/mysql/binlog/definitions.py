"""The table definition in force at a rows event, when the server's has moved on since.

dblog loads a table's definition from information_schema (`dblog.mysql.schema`), that is as the
server has it *now*. Rows logged before DDL the server has since applied (a reader lagging
behind an ALTER, a restart replaying a backlog across one) were written under an earlier
definition. Their values decode right anyway (from the TABLE_MAP event), but a sink typing them
by today's definition would give a dropped column no type, a new decimal scale to old values,
an INT a string field. Debezium keeps a schema history for this; dblog reads the history off
the binlog itself: with `binlog_row_metadata=FULL` every TABLE_MAP carries each column's name,
type, precision/scale, fraction digits, signedness, charset and ENUM/SET members, and the
primary key. (A functional index's hidden column, which MySQL 8.0.13-8.0.19 list in the map, is
left out: it is no column of the table.)

`definition_in_force(table_map, schema)` is None when the map agrees with `schema` (the common
case: the source checks once per new map or schema, not per row). Otherwise it is the definition
the map describes: the server's own Column for every column the map agrees with (its lengths
and collation kept), one derived from the map's metadata for the others, and the server's key
(the map's when a column of it is not in the map). Pure: no I/O.
"""

from __future__ import annotations

from dblog.mysql.binlog.rows import (
    BIT, BLOB, DATE, DATETIME, DATETIME2, DOUBLE, ENUM, FLOAT, GEOMETRY, INT24, JSON, LONG, LONG_BLOB,
    LONGLONG, MEDIUM_BLOB, NEWDATE, NEWDECIMAL, SET, SHORT, STRING, TIME, TIME2, TIMESTAMP, TIMESTAMP2, TINY,
    TINY_BLOB, VAR_STRING, VARCHAR, VECTOR, YEAR, MapColumn, TableMap, _collation_charset,
)
from dblog.mysql.binlog import values as bv
from dblog.core.events import TableId
from dblog.mysql.schema import Column, TableSchema

__all__ = ["definition_in_force", "definition_keyed_by", "definition_of_map", "column_agrees"]

_INTEGERS = {TINY: ("tinyint", 3), SHORT: ("smallint", 5), INT24: ("mediumint", 7), LONG: ("int", 10),
             LONGLONG: ("bigint", 19)}  # (DATA_TYPE, NUMERIC_PRECISION) as information_schema says
_SIMPLE = {FLOAT: "float", DOUBLE: "double", YEAR: "year", DATE: "date", NEWDATE: "date", TIME: "time",
           TIME2: "time", DATETIME: "datetime", DATETIME2: "datetime", TIMESTAMP: "timestamp",
           TIMESTAMP2: "timestamp", JSON: "json", ENUM: "enum", SET: "set", BIT: "bit", NEWDECIMAL: "decimal",
           GEOMETRY: "geometry", VECTOR: "vector"}
_FRACTIONS = frozenset({TIME2, DATETIME2, TIMESTAMP2})
_BLOBS = {1: ("tinyblob", "tinytext"), 2: ("blob", "text"), 3: ("mediumblob", "mediumtext"),
          4: ("longblob", "longtext")}  # by length bytes
_GEOMETRIES = frozenset({"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                         "multipolygon", "geometrycollection"})
# MariaDB's types stored as fixed binary strings: the map says BINARY(n), the schema what they hold.
_STORED_AS_BINARY = frozenset({"uuid", "inet6", "inet4"})
# Bytes per character, for a derived CHAR/VARCHAR's length (the map gives bytes).
_MAX_BYTES = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4,
              "big5": 2, "gbk": 2, "gb2312": 2, "sjis": 2, "cp932": 2, "euckr": 2, "ujis": 3, "eucjpms": 3}


def _charset(column: MapColumn) -> str | None:
    charset = _collation_charset(column.collation)
    return "utf8mb3" if charset == "utf8" else charset


def _data_type(column: MapColumn) -> str:
    """information_schema's DATA_TYPE of a map column."""
    t = column.type
    if t in _INTEGERS:
        return _INTEGERS[t][0]
    if t in _SIMPLE:
        return _SIMPLE[t]
    binary = column.collation is not None and _charset(column) == "binary"
    if t in (VARCHAR, VAR_STRING):
        return "varbinary" if binary else "varchar"
    if t == STRING:
        return "binary" if binary else "char"
    if t in (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB):
        blob, text = _BLOBS.get(column.meta, ("blob", "text"))
        return blob if binary else text
    return column.type_name.lower()


def _members(column: MapColumn) -> tuple[str, ...] | None:
    if column.members is None:
        return None
    charset = _charset(column)
    text = bv.text_decoder(charset if charset != "binary" else None)
    return tuple(text(member) for member in column.members)


def column_agrees(column: MapColumn, known: Column) -> bool:
    """Whether the server's `known` column is what the map says the row was written with: name,
    type, signedness, decimal precision and scale, fraction digits, charset, members, NULLs."""
    if column.name != known.name or column.nullable != known.nullable:
        return False
    data_type = _data_type(column)
    if data_type != known.data_type:
        if known.data_type in _STORED_AS_BINARY:
            return data_type == "binary"
        if known.data_type in _GEOMETRIES:
            return data_type == "geometry"
        if known.data_type == "vector":  # MariaDB 11.7's VECTOR is logged as a binary string
            return data_type == "varbinary"
        # MariaDB's JSON is LONGTEXT (information_schema says so; MySQL logs JSON as JSON)
        return False
    t = column.type
    if t in _INTEGERS or t in (FLOAT, DOUBLE, NEWDECIMAL):
        if column.unsigned != known.unsigned:
            return False
    if t == NEWDECIMAL:
        return (column.meta >> 8, column.meta & 0xFF) == (known.numeric_precision, known.numeric_scale)
    if t in _FRACTIONS:
        return column.meta == (known.datetime_precision or 0)
    if column.collation is not None and known.charset is not None:
        if _charset(column) not in (None, "utf8mb3" if known.charset == "utf8" else known.charset):
            return False
    if t in (ENUM, SET):
        return _members(column) == known.enum_values
    return True


def _derived_column(column: MapColumn, known: Column | None) -> Column:
    """A Column from the map's metadata alone (`known`: the server's column of that name, of
    another definition, whose length serves when the type is the same)."""
    t, meta, data_type = column.type, column.meta, _data_type(column)
    charset = _charset(column) if column.collation is not None else None
    unsigned = column.unsigned if t in _INTEGERS or t in (FLOAT, DOUBLE, NEWDECIMAL) else False
    precision = scale = fraction = char_length = None
    members = None
    if t in _INTEGERS:
        precision, scale = _INTEGERS[t][1] + (1 if unsigned and t == LONGLONG else 0), 0
        column_type = data_type
    elif t == NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        column_type = f"decimal({precision},{scale})"
    elif t in _FRACTIONS:
        fraction = meta
        column_type = f"{data_type}({meta})" if meta else data_type
    elif t == BIT:
        precision = (meta >> 8) * 8 + (meta & 0xFF)
        column_type = f"bit({precision})"
    elif t in (ENUM, SET):
        members = _members(column)
        column_type = data_type + "(" + ",".join("'" + member.replace("'", "''") + "'" for member in (members or ())) + ")"
    elif t in (VARCHAR, VAR_STRING, STRING):
        if known is not None and known.data_type == data_type and known.char_length is not None:
            char_length = known.char_length
        else:
            char_length = meta // _MAX_BYTES.get(charset or "", 1) if charset != "binary" else meta
        column_type = f"{data_type}({char_length})"
    else:
        column_type = data_type
    if unsigned:
        column_type += " unsigned"
    collation = known.collation if known is not None and known.charset == charset else None
    return Column(name=column.name or f"@{column.index + 1}", data_type=data_type, column_type=column_type,
                  unsigned=unsigned, char_length=char_length, numeric_precision=precision, numeric_scale=scale,
                  datetime_precision=fraction, charset=charset, collation=collation, enum_values=members,
                  nullable=column.nullable)


def definition_in_force(table_map: TableMap, schema: TableSchema) -> TableSchema | None:
    """None when `table_map` agrees with `schema` column for column; else the definition the
    map describes, for the rows logged under it."""
    known = schema.columns
    # A functional index's hidden column (MySQL 8.0.13-8.0.19 list it in the map) is no column
    # of the table: information_schema leaves it out, and so does the definition.
    columns = tuple(column for column in table_map.columns
                    if not (column.functional and not schema.has_column(column.name)))
    map_key = tuple(table_map.columns[index].name for index in table_map.primary_key)
    if not table_map.has_names:
        return None  # a map the source did not complete from its schema history: nothing to compare
    # Columns only, not the key: MariaDB's map names a NOT NULL UNIQUE key of a table without a
    # primary key as its primary key, which information_schema (and Debezium) do not.
    if len(columns) == len(known) and all(column_agrees(c, k) for c, k in zip(columns, known)):
        return None
    derived = []
    kept = set()
    for column in columns:
        server = schema.column(column.name) if schema.has_column(column.name) else None
        if server is not None and column_agrees(column, server):
            derived.append(server)
            kept.add(server.name)
        else:
            derived.append(_derived_column(column, server))
    names = {column.name for column in derived}
    # The server's key (or the one given for a table without one) while its columns are there;
    # else the map's (a key column renamed or dropped since).
    key = schema.key_columns if _has_columns(names, schema.key_columns) else map_key
    collations = {name: collation for name, collation in schema.collations.items() if name in kept}
    return TableSchema(table=schema.table, columns=derived, key_columns=key, collations=collations)


def definition_keyed_by(definition: TableSchema, schema: TableSchema) -> TableSchema:
    """`definition` (made by `definition_in_force` from an earlier `schema` of its table) keyed
    as `definition_in_force` keys it from `schema` now: by `schema`'s key where the definition
    has its columns (a key given since, `SchemaCatalog.set_key`), else as it was."""
    key = schema.key_columns
    if key == definition.key_columns or not _has_columns({c.name for c in definition.columns}, key):
        return definition
    return TableSchema(table=definition.table, columns=definition.columns, key_columns=key,
                       collations=definition.collations)


def _has_columns(names: set[str], key: tuple[str, ...]) -> bool:
    return all(name in names for name in key)


def definition_of_map(table_map: TableMap, table: TableId) -> TableSchema | None:
    """The definition the map describes, alone: for rows of a table the server no longer has
    under that name (dropped or renamed since they were logged). None without column names."""
    if not table_map.has_names:
        return None
    columns = [_derived_column(column, None) for column in table_map.columns]
    key = tuple(table_map.columns[index].name for index in table_map.primary_key)
    return TableSchema(table=table, columns=columns, key_columns=key)
