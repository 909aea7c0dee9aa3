"""Kafka Connect schemas of Debezium's records, as its JSON converter writes them with
`schemas.enable=true`: `{"schema": {...}, "payload": {...}}`.

`column_schema` describes dblog's normal form (`dblog.mysql.values`), what the Kafka sink writes with
`values = "dblog"`: Debezium's for most types under `decimal.handling.mode=string` and
`binary.handling.mode=base64`; for the temporal types and BIT the schema says what is really in
the payload (`string`, `int64`) without Debezium's semantic name. Debezium's own encodings and
their schemas, the sink's default, are `dblog.sinks.kafka.debezium_values`; docs/kafka.md, "Values".
"""

from __future__ import annotations

from typing import Any

from dblog.mysql.schema import Column

Schema = dict[str, Any]

_INTEGERS = {  # (signed, unsigned) Connect types, as Debezium's MySQL connector maps them
    "tinyint": ("int16", "int16"),
    "smallint": ("int16", "int32"),
    "mediumint": ("int32", "int32"),
    "int": ("int32", "int64"),
    "integer": ("int32", "int64"),
    "bigint": ("int64", "int64"),  # bigint.unsigned.handling.mode=long
}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}


def column_schema(column: Column) -> Schema:
    """The Connect schema of one column's normalized values (without `field` and `optional`)."""
    data_type = column.data_type
    if column.is_binary:
        return {"type": "string"}  # base64 text: binary.handling.mode=base64
    if data_type in _INTEGERS:
        signed, unsigned = _INTEGERS[data_type]
        return {"type": unsigned if column.unsigned else signed}
    if data_type == "float":
        return {"type": "float"}
    if data_type in ("double", "real"):
        return {"type": "double"}
    if data_type == "decimal":
        return {"type": "string"}  # exact text: decimal.handling.mode=string
    if data_type == "timestamp":
        return {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
    if data_type == "year":
        return {"type": "int32", "name": "io.debezium.time.Year", "version": 1}
    if data_type == "json":
        return {"type": "string", "name": "io.debezium.data.Json", "version": 1}
    if data_type in ("enum", "set"):
        name = "io.debezium.data.Enum" if data_type == "enum" else "io.debezium.data.EnumSet"
        return {"type": "string", "name": name, "version": 1,
                "parameters": {"allowed": ",".join(column.enum_values or ())}}
    if data_type == "bit":
        return {"type": "int64"}
    if data_type == "vector":
        return dict(FLOAT_VECTOR)
    # date, datetime, time (the server's text), char/varchar/text, uuid, inet4/inet6, and any type
    # dblog does not know: text.
    return {"type": "string"}


# Debezium's float vector (io.debezium.data.vector.FloatVector, SchemaFactory.datatypeFloatVectorSchema:
# an array of float32) for MySQL's VECTOR, as its MySQL connector writes it (BinlogVectorIT).
FLOAT_VECTOR: Schema = {"type": "array", "items": {"type": "float", "optional": False},
                        "name": "io.debezium.data.FloatVector", "version": 1}


def inferred_schema(value: Any) -> Schema:
    """For a column the table's current schema no longer has (a change read before a DDL
    dropped it): the type of the value."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "int64"}
    if isinstance(value, float):
        return {"type": "double"}
    if isinstance(value, list):  # a VECTOR's floats
        return dict(FLOAT_VECTOR)
    return {"type": "string"}


_NO_DEFAULT = object()


def field(name: str, schema: Schema, optional: bool, default: Any = _NO_DEFAULT) -> Schema:
    """A struct's field; `default`: the column's default value, as the field's values are written."""
    if default is _NO_DEFAULT:
        return {**schema, "optional": optional, "field": name}
    return {**schema, "optional": optional, "default": default, "field": name}


def struct(fields: list[Schema], name: str, optional: bool, version: int | None = None) -> Schema:
    schema: Schema = {"type": "struct", "fields": fields, "optional": optional, "name": name}
    if version is not None:
        schema["version"] = version
    return schema


def _string(name: str, optional: bool = False) -> Schema:
    return {"type": "string", "optional": optional, "field": name}


def _int(kind: str, name: str, optional: bool = False) -> Schema:
    return {"type": kind, "optional": optional, "field": name}


# Debezium's initial-snapshot markers, incremental snapshots' and streaming's "false".
SNAPSHOT_MARKERS = ("true", "first", "first_in_data_collection", "last_in_data_collection", "last", "false",
                    "incremental")

# io.debezium.connector.mysql.Source as Debezium 3.x writes it, field by field in its order
# (dblog.sinks.envelope.source_block fills it).
SOURCE_FIELDS: list[Schema] = [
    _string("version"), _string("connector"), _string("name"), _int("int64", "ts_ms"),
    {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
     "parameters": {"allowed": ",".join(SNAPSHOT_MARKERS)}, "default": "false", "field": "snapshot"},
    _string("db"), _string("sequence", optional=True), _int("int64", "ts_us", optional=True),
    _int("int64", "ts_ns", optional=True), _string("table", optional=True), _int("int64", "server_id"),
    _string("gtid", optional=True), _string("file"), _int("int64", "pos"), _int("int32", "row"),
    _int("int64", "thread", optional=True), _string("query", optional=True),
]
SOURCE = struct(SOURCE_FIELDS, "io.debezium.connector.mysql.Source", optional=False, version=1)

TRANSACTION = struct(
    [_string("id"), _int("int64", "total_order"), _int("int64", "data_collection_order")],
    "event.block", optional=True, version=1,
)


def key_schema(topic: str, fields: list[Schema]) -> Schema:
    return struct(fields, f"{topic}.Key", optional=False)


def envelope_schema(topic: str, row_fields: list[Schema]) -> Schema:
    """Debezium 3.x's change-event value schema (version 2): `before`/`after` rows, `source`,
    `transaction`, `op`, `ts_ms`, `ts_us`, `ts_ns`."""
    row = f"{topic}.Value"
    return struct(
        [
            {**struct(row_fields, row, optional=True), "field": "before"},
            {**struct(row_fields, row, optional=True), "field": "after"},
            {**SOURCE, "field": "source"},
            {**TRANSACTION, "field": "transaction"},
            _string("op"),
            _int("int64", "ts_ms", optional=True),
            _int("int64", "ts_us", optional=True),
            _int("int64", "ts_ns", optional=True),
        ],
        f"{topic}.Envelope", optional=False, version=2,
    )


# A string header's value (Debezium's context headers), as Kafka Connect's Schema.STRING_SCHEMA
STRING_HEADER = {"type": "string", "optional": False}

# Debezium's heartbeat records (SchemaFactory.heartbeatKeySchema / heartbeatValueSchema)
HEARTBEAT_KEY = struct([_string("serverName")], "io.debezium.connector.common.ServerNameKey", optional=False,
                       version=1)
HEARTBEAT_VALUE = struct([_int("int64", "ts_ms")], "io.debezium.connector.common.Heartbeat", optional=False, version=1)

SCHEMA_CHANGE_KEY = struct([_string("databaseName")], "io.debezium.connector.mysql.SchemaChangeKey",
                           optional=False, version=1)

def _array(items: Schema, name: str, optional: bool) -> Schema:
    return {"type": "array", "items": items, "optional": optional, "field": name}


# A tableChanges entry as Debezium 3.x writes it (ConnectTableChangeSerializer): the change, the
# table's id and, but for a DROP, the table after it (dblog.sinks.schema_history fills them).
_COLUMN = struct(
    [_string("name"), _int("int32", "jdbcType"), _int("int32", "nativeType", optional=True), _string("typeName"),
     _string("typeExpression", optional=True), _string("charsetName", optional=True),
     _int("int32", "length", optional=True), _int("int32", "scale", optional=True), _int("int32", "position"),
     _int("boolean", "optional", optional=True), _int("boolean", "autoIncremented", optional=True),
     _int("boolean", "generated", optional=True), _string("comment", optional=True),
     _string("defaultValueExpression", optional=True),
     _array({"type": "string", "optional": False}, "enumValues", optional=True)],
    "io.debezium.connector.schema.Column", optional=False, version=1,
)
_TABLE = struct(
    [_string("defaultCharsetName", optional=True),
     _array({"type": "string", "optional": False}, "primaryKeyColumnNames", optional=True),
     _array(_COLUMN, "columns", optional=False), _string("comment", optional=True)],
    "io.debezium.connector.schema.Table", optional=True, version=1,
)
_TABLE_CHANGE = struct([_string("type"), _string("id"), {**_TABLE, "field": "table"}],
                       "io.debezium.connector.schema.Change", optional=False, version=1)

SCHEMA_CHANGE_VALUE = struct(
    [
        {**SOURCE, "field": "source"},
        _int("int64", "ts_ms"),
        _string("databaseName", optional=True),
        _string("schemaName", optional=True),
        _string("ddl", optional=True),
        _array(_TABLE_CHANGE, "tableChanges", optional=False),
    ],
    "io.debezium.connector.mysql.SchemaChangeValue", optional=False, version=1,
)
