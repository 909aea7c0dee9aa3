"""`[sink.kafka]`: the Kafka sink's settings and its topic names (no Kafka client imported here,
so loading a configuration does not import one).

Topic names follow Debezium's: `<topic.prefix>.<db>.<table>` for a table's changes and
`<topic.prefix>` for schema changes, where dblog's `name` plays `topic.prefix`. Characters of a
database or table name that Kafka does not allow in topic names are replaced by `_`, as
Debezium's default topic naming strategy does; the pattern's own text and the connector name are
not rewritten: they must be valid as they are (Kafka allows letters, digits, `.`, `_`, `-`, up to
249 characters).
"""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ByteSize, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from dblog.core.events import TableId
from dblog.sinks.column_options import MessageKeyRule
from dblog.sinks.kafka.debezium_values import (
    BigintUnsignedHandlingMode,
    BinaryHandlingMode,
    DecimalHandlingMode,
    TimePrecisionMode,
    ValueModes,
)
from dblog.sinks.kafka.transforms import TransformSettings, normalized_types, static_route

Operation = Literal["c", "u", "d", "t"]
OPERATIONS = ("c", "u", "d", "t")
MAX_TOPIC_LENGTH = 249  # Kafka's limit (InvalidTopicException beyond)
_INVALID = re.compile(r"[^A-Za-z0-9._-]")
TABLE_FIELDS = ("name", "db", "table")
SCHEMA_CHANGE_FIELDS = ("name",)  # also the transaction and heartbeat topics' placeholders


class TopicNameError(ValueError):
    """A topic name Kafka would refuse; the message says which and why."""


def _pattern_fields(pattern: str, allowed: tuple[str, ...]) -> set[str]:
    """The placeholders of `pattern`; ValueError naming anything Kafka or the pattern refuses."""
    fields = set()
    try:
        parts = list(string.Formatter().parse(pattern))
    except ValueError as error:
        raise ValueError(f"{pattern!r} is not a valid pattern ({error}); use {{{'}, {'.join(allowed)}}}") from None
    for literal, field, spec, conversion in parts:
        bad = _INVALID.search(literal)
        if bad:
            raise ValueError(f"{pattern!r} holds {bad.group()!r}: Kafka topic names allow only letters, digits, "
                             "'.', '_' and '-'")
        if field is None:
            continue
        if field not in allowed or spec or conversion:
            wanted = ", ".join(f"{{{name}}}" for name in allowed)
            raise ValueError(f"{pattern!r}: unknown placeholder {{{field}}}; use {wanted}")
        fields.add(field)
    return fields


class KafkaSinkSettings(BaseModel):
    """`[sink.kafka]` (with `sink.type = "kafka"`; the brokers are `kafka.bootstrap_servers`)."""

    model_config = ConfigDict(extra="forbid")

    # One topic per table, Debezium's `<topic.prefix>.<db>.<table>`: {name} is dblog's `name`.
    topic: str = "{name}.{db}.{table}"
    # Debezium's schema change topic, `<topic.prefix>`; `schema_changes = false` writes none.
    schema_change_topic: str = "{name}"
    schema_changes: bool = True  # Debezium's include.schema.changes
    # The JSON converter's `schema` part (Kafka Connect's schemas.enable) in keys and values.
    schemas: bool = False
    # The `schema` part in headers (the header converter's own schemas.enable, which Kafka Connect
    # and Debezium Server read apart from the key's and value's; JsonConverter's default: true).
    # None: as `schemas`.
    header_schemas: bool | None = None
    # JsonConverter's replace.null.with.default (its default: true): a null value of a column that
    # has a default is written as the default (with Debezium's values: dblog's normal form has none)
    replace_null_with_default: bool = True
    # The values' encoding: `debezium` (Debezium's types and Connect schemas, with its switches
    # below and their defaults: a drop-in for Debezium's consumers) or `dblog` (dblog's normal form,
    # the JSON-lines sink's: text dates, exact decimals as text, BIT as an integer). docs/kafka.md, "Values".
    values: Literal["debezium", "dblog"] = "debezium"
    time_precision_mode: TimePrecisionMode = "adaptive_time_microseconds"  # Debezium's time.precision.mode
    decimal_handling_mode: DecimalHandlingMode = "precise"  # decimal.handling.mode
    bigint_unsigned_handling_mode: BigintUnsignedHandlingMode = "long"  # bigint.unsigned.handling.mode
    binary_handling_mode: BinaryHandlingMode = "bytes"  # binary.handling.mode
    tombstones: bool = True  # a tombstone (key, null value) after each delete: tombstones.on.delete
    # Debezium's skipped.operations: changes of these kinds are not written (c create, u update, d
    # delete with its tombstone, t truncate); Debezium's default skips truncates. [] or "none": none.
    skipped_operations: list[Operation] = Field(default_factory=lambda: ["t"])
    # Debezium 3.x's extended.headers.enabled: the `__debezium.context.*` headers (topic prefix,
    # task id, connector, run id) on every change and schema-change record
    extended_headers: bool = True
    # Debezium's message.key.columns: the record key of the tables a rule matches is made of the
    # columns it names (regexes: table over "db.table", columns over the column name), in order;
    # other tables are keyed by their primary key. dblog.sinks.column_options.
    message_key: list[MessageKeyRule] = Field(default_factory=list)
    acks: Literal["all", 1] = "all"  # 1: the leader only (a failover may lose acknowledged records)
    create_topics: bool = True  # create missing topics (else the broker's auto-create or the operator)
    partitions: int = Field(1, ge=1, le=100_000)  # of created topics
    replication_factor: int = Field(1, ge=1, le=32_767)  # of created topics
    topic_properties: dict[str, str] = Field(default_factory=dict)  # of created topics, e.g. cleanup.policy
    # How long a record may wait for its acknowledgement (retries included); then the commit
    # fails and the engine restarts from the last committed offsets (see docs/kafka.md, "Delivery").
    delivery_timeout_seconds: float = Field(120.0, gt=0, le=86_400, allow_inf_nan=False)
    linger_ms: int = Field(5, ge=0, le=60_000)  # the producer waits this long to fill a batch
    # The codec of the producer's record batches (compression.type); consumers decompress them
    # whatever it is. Debezium's JSON compresses several times over, which saves the brokers'
    # and the producer's CPU on bytes more than the codec costs (docs/kafka.md, "The producer").
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "zstd"
    max_request_size: int = Field(1_048_576, ge=1024)  # bytes; a larger record stops the engine, named
    # Debezium's provide.transaction.metadata: each streamed change's `transaction` block, and
    # BEGIN / END records on `transaction_topic` (`<topic.prefix>.<topic.transaction>`).
    # docs/kafka.md, "Transaction metadata" (dblog.sinks.kafka.transaction_metadata).
    transaction_metadata: bool = False
    transaction_topic: str = "{name}.transaction"
    # Debezium's heartbeat.interval.ms (0: none): a `{ts_ms}` record keyed `{serverName}` on
    # `heartbeat_topic` (`<topic.heartbeat.prefix>.<topic.prefix>`) once this much time passed,
    # and `heartbeat_action_query` (heartbeat.action.query) run on the source with each one.
    # docs/kafka.md, "Heartbeats" (dblog.runtime.heartbeats).
    heartbeat_interval_ms: int = Field(0, ge=0, le=86_400_000)
    heartbeat_topic: str = "__debezium-heartbeat.{name}"
    heartbeat_action_query: str | None = None
    # Kafka Connect transforms applied to every record, in order ([[sink.kafka.transforms]]: unwrap,
    # regex_router, logical_table_router; dblog.sinks.kafka.transforms, docs/kafka.md "Transforms")
    transforms: list[TransformSettings] = Field(default_factory=list)

    @property
    def headers_with_schemas(self) -> bool:
        return self.schemas if self.header_schemas is None else self.header_schemas

    @field_validator("transforms", mode="before")
    @classmethod
    def _transform_types(cls, value):
        return normalized_types(value)
    # The producer's memory for records not yet acknowledged (the Java producer's buffer.memory):
    # once full, the engine waits for acknowledgements, so a transaction of any size streams in
    # bounded memory (librdkafka's own default would be 1 GiB); "64MiB", "1GB" or a number
    max_buffer_bytes: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=1024)
    # And at most this many records (librdkafka's queue.buffering.max.messages, whose default is
    # 100,000): librdkafka's own cost of a record (its message and headers, not counted in the
    # bytes) is about 1 KB with Debezium's context headers, so 100,000 of them doubled the
    # engine's memory in a large transaction
    max_buffer_records: int = Field(16_384, ge=1)

    @field_validator("skipped_operations", mode="before")
    @classmethod
    def _operations(cls, value):
        """Also Debezium's form: a comma-separated string, `none` for no operation."""
        if isinstance(value, str):
            parts = [part.strip().lower() for part in value.split(",") if part.strip()]
            value = [] if parts == ["none"] else parts
        if isinstance(value, (list, tuple)) and any(part not in OPERATIONS for part in value):
            unknown = ", ".join(repr(part) for part in value if part not in OPERATIONS)
            raise ValueError(f"unknown operation {unknown}: use c, u, d, t (a list, or \"none\")")
        return value

    @model_validator(mode="after")
    def _buffer_holds_a_record(self) -> KafkaSinkSettings:
        if self.max_buffer_bytes < self.max_request_size:
            raise ValueError(f"max_buffer_bytes ({self.max_buffer_bytes:,}) is smaller than max_request_size "
                             f"({self.max_request_size:,}): the producer could never hold the largest record; "
                             "raise max_buffer_bytes")
        return self

    @field_validator("topic")
    @classmethod
    def _table_pattern(cls, pattern: str) -> str:
        if "table" not in _pattern_fields(pattern, TABLE_FIELDS):
            raise ValueError(f"{pattern!r} has no {{table}}: every table needs a topic of its own")
        return pattern

    @field_validator("schema_change_topic", "transaction_topic", "heartbeat_topic")
    @classmethod
    def _named_topic_pattern(cls, pattern: str, info: ValidationInfo) -> str:
        _pattern_fields(pattern, SCHEMA_CHANGE_FIELDS)
        if not pattern:
            if info.field_name == "schema_change_topic":
                raise ValueError("empty; set schema_changes = false to write no schema changes")
            raise ValueError(f"empty: name a topic, e.g. {cls.model_fields[info.field_name].default!r}")
        return pattern

    @field_validator("heartbeat_action_query")
    @classmethod
    def _action_query(cls, query: str | None) -> str | None:
        if query is not None and not query.strip():
            raise ValueError("empty: give the statement to run on the source with each heartbeat, or remove it")
        return query

    @model_validator(mode="after")
    def _action_needs_heartbeats(self) -> "KafkaSinkSettings":
        if self.heartbeat_action_query is not None and not self.heartbeat_interval_ms:
            raise ValueError("heartbeat_action_query runs with each heartbeat, and heartbeat_interval_ms is 0 (no "
                             "heartbeats): set heartbeat_interval_ms (e.g. 10000), or remove heartbeat_action_query")
        return self

    @property
    def value_modes(self) -> ValueModes | None:
        """Debezium's value switches; None for dblog's normal form (`values = "dblog"`)."""
        if self.values == "dblog":
            return None
        return ValueModes(self.time_precision_mode, self.decimal_handling_mode, self.bigint_unsigned_handling_mode,
                          self.binary_handling_mode)

    def table_topic(self, connector: str, table: TableId) -> str:
        """The topic of `table`'s changes (TopicNameError if Kafka would refuse it)."""
        topic = self.topic.format(name=connector, db=sanitize(table.db), table=sanitize(table.table))
        check_topic(topic, f"the topic of {table}", "change `name` or sink.kafka.topic")
        return topic

    def routed_topic(self, topic: str) -> str:
        """Where the records of `topic` go after the routers of `transforms` (TopicNameError if
        Kafka would refuse the name)."""
        routed = static_route(self.transforms, topic)
        if routed != topic:
            check_topic(routed, f"topic {topic!r} routed by sink.kafka.transforms", "fix the transforms' replacement")
        return routed

    def schema_topic(self, connector: str) -> str:
        topic = self.schema_change_topic.format(name=connector)
        check_topic(topic, "the schema change topic", "change `name` or sink.kafka.schema_change_topic")
        return topic

    def transaction_metadata_topic(self, connector: str) -> str:
        topic = self.transaction_topic.format(name=connector)
        check_topic(topic, "the transaction metadata topic", "change `name` or sink.kafka.transaction_topic")
        return topic

    def heartbeat_records_topic(self, connector: str) -> str:
        topic = self.heartbeat_topic.format(name=connector)
        check_topic(topic, "the heartbeat topic", "change `name` or sink.kafka.heartbeat_topic")
        return topic


def sanitize(part: str) -> str:
    """A database or table name with each character Kafka refuses in topic names replaced by `_`."""
    return _INVALID.sub("_", part)


def check_topic(topic: str, what: str, remedy: str) -> None:
    if topic in ("", ".", ".."):
        raise TopicNameError(f"{what} would be {topic!r}, which Kafka refuses; {remedy}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise TopicNameError(f"{what} would be {topic!r}: {len(topic)} characters, Kafka allows at most "
                             f"{MAX_TOPIC_LENGTH}; {remedy}")
    bad = _INVALID.search(topic)
    if bad:
        raise TopicNameError(f"{what} would be {topic!r}, holding {bad.group()!r}: Kafka topic names allow only "
                             f"letters, digits, '.', '_' and '-'; {remedy}")
