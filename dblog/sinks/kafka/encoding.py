"""How a table's changes become the keys and values of Kafka records: its column options
(`dblog.sinks.column_options`: filters, masks, the message key), Debezium's value encodings
(`dblog.sinks.kafka.debezium_values`; None: dblog's normal form), the columns' defaults (as the
schema history states them), and the `schema` part Kafka Connect's JSON converter writes
(`dblog.sinks.kafka.connect_schema`). What is made from a table's definition is kept until the
definitions change (`forget`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from dblog.core.events import RowChange, TableId
from dblog.core.table_definition import TableDefinition
from dblog.mysql.schema import TableSchema
from dblog.mysql.table_definitions import SchemaSnapshot
from dblog.mysql.values import EPOCH_TEXT, default_value
from dblog.sinks.base import SinkError
from dblog.sinks.column_options import ColumnSettings, TableColumns
from dblog.sinks.envelope import envelopes
from dblog.sinks.kafka import connect_schema
from dblog.sinks.kafka.debezium_values import RowEncoder, column_encoding
from dblog.sinks.kafka.settings import KafkaSinkSettings
from dblog.sinks.record_bytes import RecordBytes

# Debezium 3.x's context headers (DebeziumHeaderProducer), with extended.headers.enabled
CONTEXT_HEADER = "__debezium.context."


class TableDescriptions(Protocol):
    """Where the sink's table descriptions come from (`dblog.mysql.table_history`)."""

    def definition(self, table: TableId) -> TableDefinition | None:
        """The table's definition as of the stream's position (the schema history's)."""

    def snapshot(self, tables: list[TableId]) -> SchemaSnapshot:
        """What Debezium's snapshot describes the tables by, read now (a first start)."""


@dataclass(slots=True)
class TableRoute:
    """What writing a table's changes takes: its topic, column options, Debezium encoding (None:
    dblog's normal form), whether a column has a mapper, its records' assembly, and the defaults
    written in place of nulls."""

    topic: str
    columns: TableColumns
    encode: RowEncoder | None
    maps: bool
    records: RecordBytes
    null_defaults: dict[str, Any] | None  # written for a null (replace_null_with_default), by column


class RecordEncoding:
    def __init__(self, settings: KafkaSinkSettings, connector: str, schema_of: Callable[[TableId], TableSchema],
                 columns: ColumnSettings | None, definitions: TableDescriptions | None) -> None:
        self.settings = settings
        self._connector = connector
        self._schema_of = schema_of
        # Where the columns' defaults come from (None: no defaults)
        self._definitions = definitions
        self.value_modes = settings.value_modes  # None: dblog's normal form
        self._column_settings = columns  # [columns]: filters and masks (dblog.sinks.column_options)
        self.routes: dict[TableId, TableRoute] = {}  # table -> what writing its changes needs
        self._columns: dict[TableId, TableColumns] = {}  # table -> its column options, message key
        self._column_defaults: dict[TableId, dict[str, Any]] = {}  # table -> its columns' encoded defaults
        self._key_schemas: dict[TableId, bytes] = {}
        self._value_schemas: dict[tuple[TableId, tuple[str, ...]], bytes] = {}
        self._schema_dicts: dict = {}  # the Connect schemas of the transformed path, by table (and row fields)
        self._schema_json: dict[int, tuple[dict, bytes]] = {}  # a schema object -> its JSON

    def forget(self) -> None:
        """Forget the schemas, encoders and column options made from the tables' definitions
        (of every table: rare enough not to sort them out by table)."""
        self._key_schemas.clear()
        self._value_schemas.clear()
        self._schema_dicts.clear()
        self._columns.clear()
        self.routes.clear()
        self._column_defaults.clear()

    # --- a table's route and its changes' records -------------------------------------------

    def route(self, table: TableId, topic: str) -> TableRoute:
        columns = self.table_columns(table)
        encode = key_encode = None
        if self.value_modes is not None:
            table_columns = self._schema_of(table).columns
            encode = RowEncoder(table_columns, self.value_modes, self._zero_date_values(table))
            by_name = {column.name: column for column in table_columns}
            key_encode = RowEncoder([by_name[name] for name in columns.key_columns if name in by_name],
                                    self.value_modes).encode  # the key columns' encodings only
        null_defaults = self._null_defaults(table)
        if null_defaults and key_encode is not None and any(name in null_defaults for name in columns.key_columns):
            # a nullable message key column with a default: the key converter replaces its nulls too
            encode_key = key_encode
            key_encode = lambda key: nulls_replaced(encode_key(key), null_defaults)  # noqa: E731
        records = RecordBytes(table, self._connector, columns.key_columns, key_encode)
        route = self.routes[table] = TableRoute(topic, columns, encode, bool(columns.mappers), records, null_defaults)
        return route

    def _null_defaults(self, table: TableId) -> dict[str, Any] | None:
        """The defaults JsonConverter writes for nulls (replace.null.with.default), by column: of
        the nullable columns whose default is not null, the only ones whose null it changes (a
        row with a null elsewhere then costs nothing)."""
        if not self.settings.replace_null_with_default or self.value_modes is None:
            return None
        defaults = self._defaults(table)
        nullable = {column.name for column in self._schema_of(table).columns if column.nullable}
        return {name: value for name, value in defaults.items() if value is not None and name in nullable} or None

    def encoded(self, change: RowChange, route: TableRoute, now_ns: int):
        """The change's records as (key, value) dicts, with Debezium's value encodings (the
        route's `encode`), the column options' masks and truncations, and nulls' defaults."""
        columns, encode, null_defaults = route.columns, route.encode, route.null_defaults
        for record in envelopes(change, columns.key_columns, self._connector, now_ns // 1_000_000, now_ns):
            value = record["value"]
            if encode is not None:
                record["key"] = encode(record["key"])
                value["before"], value["after"] = encode(value["before"]), encode(value["after"])
            value["before"], value["after"] = columns.map(value["before"]), columns.map(value["after"])
            if null_defaults:
                record["key"] = nulls_replaced(record["key"], null_defaults)
                value["before"] = nulls_replaced(value["before"], null_defaults)
                value["after"] = nulls_replaced(value["after"], null_defaults)
            yield record["key"], value

    def context_headers(self) -> list[tuple[str, bytes]]:
        """Debezium's context headers, as its JSON header converter writes strings: the topic
        prefix, the task (one: 0), the connector plugin (`mysql`, as `source.connector`) and
        this run's id (new at each start, as Debezium's engine makes one per run)."""
        values = {"connectorLogicalName": self._connector, "taskId": "0", "connectorName": "mysql",
                  "runId": str(uuid.uuid4())}
        return [(CONTEXT_HEADER + name, self.header_bytes(connect_schema.STRING_HEADER, value))
                for name, value in values.items()]

    def header_bytes(self, schema: dict, value) -> bytes:
        """A header's value as the JsonConverter writes it, with its `schema` part when
        sink.kafka.header_schemas (the header converter's schemas.enable) says so."""
        data = orjson.dumps(value)
        return _with_schema(orjson.dumps(schema), data) if self.settings.headers_with_schemas else data

    def key_header_bytes(self, table: TableId, topic: str, key: dict) -> bytes:
        """A key as a header's value (Debezium's `__debezium.newkey` / `oldkey`): the key struct
        through the header converter."""
        payload = orjson.dumps(key)
        return self.with_key_schema(table, topic, key, payload) if self.settings.headers_with_schemas else payload

    # --- bytes, with the `schema` part when sink.kafka.schemas -------------------------------

    def payload(self, schema: dict | None, payload) -> bytes:
        data = orjson.dumps(payload)
        if not self.settings.schemas:
            return data
        known = self._schema_json.get(id(schema))
        if known is None or known[0] is not schema:
            if len(self._schema_json) > 4096:
                self._schema_json.clear()
            known = self._schema_json[id(schema)] = (schema, orjson.dumps(schema))
        return _with_schema(known[1], data)

    def key_bytes(self, table: TableId, topic: str, key: dict) -> bytes:
        payload = orjson.dumps(key)
        return self.with_key_schema(table, topic, key, payload) if self.settings.schemas else payload

    def with_key_schema(self, table: TableId, topic: str, names, payload: bytes) -> bytes:
        """A key's `payload` with its `schema` part; `names`: the key's columns."""
        schema = self._key_schemas.get(table)
        if schema is None:
            schema = self._key_schemas[table] = orjson.dumps(self.key_schema(table, topic, names))
        return _with_schema(schema, payload)

    def value_bytes(self, table: TableId, topic: str, value: dict) -> bytes:
        payload = orjson.dumps(value)
        if not self.settings.schemas:
            return payload
        return self.with_value_schema(table, topic, value["after"] if value["after"] is not None else value["before"],
                                      payload)

    def with_value_schema(self, table: TableId, topic: str, row: dict | None, payload: bytes) -> bytes:
        """A change value's `payload` with its `schema` part; `row`: its `after`, else its `before`."""
        names = tuple(row) if row is not None else None
        schema = self._value_schemas.get((table, names))
        if schema is None:
            schema = self._value_schemas[(table, names)] = orjson.dumps(self._row_schema(table, topic, row))
        return _with_schema(schema, payload)

    # --- Connect schemas ---------------------------------------------------------------------

    def key_schema(self, table: TableId, topic: str, key) -> dict:
        schema = self._schema_dicts.get((table, "key"))
        if schema is None:
            table_schema, defaults = self._schema_of(table), self._defaults(table)
            # a column of message.key.columns may be nullable: Debezium's key field is optional then
            fields = [_field(name, self._column_schema(table_schema.column(name)), table_schema.column(name).nullable,
                             defaults) for name in key]
            schema = self._schema_dicts[(table, "key")] = connect_schema.key_schema(topic, fields)
        return schema

    def value_schema(self, table: TableId, topic: str, value: dict) -> dict:
        return self._row_schema(table, topic, value["after"] if value["after"] is not None else value["before"])

    def _row_schema(self, table: TableId, topic: str, row: dict | None) -> dict:
        names = tuple(row) if row is not None else None
        schema = self._schema_dicts.get((table, names))
        if schema is None:
            schema = self._schema_dicts[(table, names)] = connect_schema.envelope_schema(
                topic, self._row_fields(table, row))
        return schema

    def _row_fields(self, table: TableId, row: dict | None) -> list[dict]:
        """The fields of `row` (None: of the table, for a truncate record)."""
        try:
            table_schema = self._schema_of(table)
        except LookupError:  # the table is gone (a change read again after its DROP)
            table_schema = None
        columns = self.table_columns(table) if table_schema is not None else None
        if row is None:
            row = dict.fromkeys(c.name for c in columns.columns) if columns is not None else {}
        defaults = self._defaults(table) if table_schema is not None else {}
        fields = []
        for name, value in row.items():
            if table_schema is not None and table_schema.has_column(name):
                column = table_schema.column(name)
                optional = column.nullable and name not in table_schema.key_columns
                schema = self._column_schema(column)
                parameters = columns.parameters(name)
                if parameters:  # a mapper's (masked, truncateLength), after the type's own
                    schema = {**schema, "parameters": {**schema.get("parameters", {}), **parameters}}
                # a masked or truncated column's default as it is, as Debezium writes it
                fields.append(_field(name, schema, optional, defaults))
            else:
                fields.append(connect_schema.field(name, connect_schema.inferred_schema(value), True))
        return fields

    def _column_schema(self, column) -> dict:
        if self.value_modes is None:
            return connect_schema.column_schema(column)
        return column_encoding(column, self.value_modes).schema

    # --- what a table's definition gives ----------------------------------------------------

    def _defaults(self, table: TableId) -> dict[str, Any]:
        """The table's column defaults as its values are written (Debezium's encodings; the
        schema history's, as of the rows being written): Debezium writes them into the fields'
        schemas."""
        defaults = self._column_defaults.get(table)
        if defaults is None:
            defaults = self._column_defaults[table] = {}
            if self.value_modes is not None and self._definitions is not None:
                definition = self._definitions.definition(table)
                stated = {column.name: column.default for column in definition.columns} if definition else {}
                for column in self._schema_of(table).columns:
                    present, value = default_value(column, stated.get(column.name))
                    if present:
                        encode = column_encoding(column, self.value_modes).encode
                        defaults[column.name] = value if encode is None else encode(value)
        return defaults

    def _zero_date_values(self, table: TableId) -> dict[str, Any]:
        """What Debezium writes for a zero date, by date column: the column's default, else the
        epoch in a NOT NULL column (else null: left out)."""
        dates = [column for column in self._schema_of(table).columns if column.data_type in EPOCH_TEXT]
        if not dates:
            return {}
        defaults, values = self._defaults(table), {}
        for column in dates:
            if column.name in defaults:
                values[column.name] = defaults[column.name]
            elif not column.nullable:
                values[column.name] = column_encoding(column, self.value_modes).encode(EPOCH_TEXT[column.data_type])
        return values

    def table_columns(self, table: TableId) -> TableColumns:
        columns = self._columns.get(table)
        if columns is None:
            schema = self._schema_of(table)
            try:
                columns = TableColumns(schema, self._column_settings, self.settings.message_key, *self._value_kinds())
            except ValueError as error:
                raise SinkError(str(error)) from None
            self._columns[table] = columns
        return columns

    def _value_kinds(self):
        """Which written values a truncation cuts as text and which as bytes: Debezium's String
        and ByteBuffer values (a `string` schema, a plain `bytes` one), or dblog's normal form."""
        if self.value_modes is None:
            return None, None
        modes = self.value_modes
        return (lambda column: column_encoding(column, modes).schema["type"] == "string",
                lambda column: column_encoding(column, modes).schema == {"type": "bytes"})


def _field(name: str, schema: dict, optional: bool, defaults: dict[str, Any]) -> dict:
    """A column's field, with its default when it has one (Debezium writes them in keys and values)."""
    if name in defaults:
        return connect_schema.field(name, schema, optional, defaults[name])
    return connect_schema.field(name, schema, optional)


def nulls_replaced(row: dict | None, defaults: dict[str, Any]) -> dict | None:
    """`row` with its nulls of columns that have a default written as the default, as Kafka
    Connect's JsonConverter writes a null field whose schema has one (replace.null.with.default)."""
    if row is None or None not in row.values():  # most rows: one scan in C
        return row
    nulls = [name for name in defaults if name in row and row[name] is None]
    if not nulls:
        return row
    row = row.copy()
    for name in nulls:
        row[name] = defaults[name]
    return row


def _with_schema(schema: bytes, payload: bytes) -> bytes:
    return b'{"schema":' + schema + b',"payload":' + payload + b"}"
