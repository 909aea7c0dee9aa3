"""The Kafka sink: Debezium's topics, keys and values, for pipelines that read Debezium's output.

One topic per table (`<name>.<db>.<table>`, `KafkaSinkSettings.topic`), each record's key and
value as Kafka Connect's JSON converter writes Debezium's records (`dblog.sinks.envelope`,
optionally with the `schema` part: `dblog.sinks.kafka.connect_schema`), a tombstone after each delete,
a key change as Debezium's delete, tombstone and create with its `__debezium.newkey` /
`__debezium.oldkey` headers,
TRUNCATE as an `op: "t"` record on the table's topic (when `skipped_operations` lets it, as
Debezium's `skipped.operations`) and other DDL on the schema change topic
(`<name>`) as Debezium writes it, with its start-up records at a first start
(`dblog.sinks.schema_history`). With `transaction_metadata`, Debezium's transaction blocks and
BEGIN / END records (`dblog.sinks.kafka.transaction_metadata`); with heartbeats, Debezium's heartbeat
records (`heartbeat`, when the engine's clock says: `dblog.runtime.heartbeats`). Notifications are not written here: they go to
`notifications.kafka_topic` (`signals.notifications`), Debezium's notification topic.

Delivery is at-least-once, as Debezium's: `write()` hands records to a librdkafka producer
(confluent-kafka: asynchronous, acks=all, idempotent, one request in flight per broker, the
`murmur2_random` partitioner: murmur2 of the key bytes, as Java's and kafka-python's, so all
changes of a key land on one partition in order); `flush()` returns only once every record is
acknowledged and raises otherwise (librdkafka reports each record it could not deliver, and the
first is kept), so the engine saves offsets only behind acknowledged records and a restart
produces again from there. A broker that cannot be reached raises `SinkUnavailable`, which
`dblog run`'s supervisor retries like a lost database. Topics are created with kafka-python's
admin client (as the signal channel and notifications use kafka-python). Why librdkafka for the
data: kafka-python's producer spent about 4× the CPU per record of the rest of the pipeline,
in Python (see docs/kafka.md, "The producer"). Exactly-once is not offered: see docs/kafka.md,
"Exactly-once: not offered" (tansu, the test broker, accepts transactions but does not hide
aborted ones from read_committed consumers).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from confluent_kafka import KafkaError as DeliveryError
from confluent_kafka import KafkaException, Producer
from kafka import KafkaAdminClient
from kafka.errors import KafkaError, for_code

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.schema import TableSchema
from dblog.mysql.values import EPOCH_TEXT, default_value
from dblog.sinks.kafka import connect_schema
from dblog.sinks.base import Sink, SinkError, SinkUnavailable
from dblog.sinks.column_options import ColumnSettings, TableColumns, output_change
from dblog.sinks.kafka.debezium_values import RowEncoder, column_encoding
from dblog.core.table_definition import TableDefinition
from dblog.mysql.table_definitions import SchemaSnapshot
from dblog.sinks.envelope import envelopes, truncate_record
from dblog.sinks.record_bytes import NO_TRANSACTION, RecordBytes, envelope_times, transaction_piece
from dblog.sinks.schema_history import (database_record, dropped_database, start_records, streamed_changes,
                                         streamed_records)
from dblog.sinks.kafka_security import PLAINTEXT, KafkaSecurity, client_options, diagnose, librdkafka_options
from dblog.sinks.kafka_settings import KafkaSinkSettings, TopicNameError, check_topic
from dblog.sinks.kafka.transforms import Record, TransformChain, TransformError
from dblog.sinks.kafka.transaction_metadata import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA, TransactionMetadata

log = logging.getLogger("dblog.kafka")
librdkafka_log = logging.getLogger("librdkafka")  # the producer's own log (quiet: _quiet_client_logs)

TOPIC_ALREADY_EXISTS = 36  # Kafka error code
BATCH_BYTES = 1_000_000  # librdkafka's default batch.size
# Delivery failures worth retrying from the last commit (the brokers, not the records): librdkafka's
# local codes; Kafka's own retriable errors say so themselves (KafkaError.retriable()).
_OUTAGES = {DeliveryError._MSG_TIMED_OUT, DeliveryError._TIMED_OUT, DeliveryError._TRANSPORT,
            DeliveryError._ALL_BROKERS_DOWN, DeliveryError._RESOLVE, DeliveryError._PURGE_QUEUE,
            DeliveryError._PURGE_INFLIGHT, DeliveryError.UNKNOWN_TOPIC_OR_PART, DeliveryError._UNKNOWN_TOPIC,
            DeliveryError._UNKNOWN_PARTITION, DeliveryError.LEADER_NOT_AVAILABLE,
            DeliveryError.NOT_LEADER_FOR_PARTITION, DeliveryError.REQUEST_TIMED_OUT,
            DeliveryError.NOT_ENOUGH_REPLICAS, DeliveryError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
# Debezium 3.x's context headers (DebeziumHeaderProducer), with extended.headers.enabled
CONTEXT_HEADER = "__debezium.context."
# Debezium's headers of a key change's records (RelationalChangeRecordEmitter.PK_UPDATE_*_FIELD)
NEW_KEY_HEADER = "__debezium.newkey"
OLD_KEY_HEADER = "__debezium.oldkey"


@dataclass(slots=True)
class _TableRoute:
    """What writing a table's changes takes: its topic, column options, Debezium encoding (None:
    dblog's normal form), whether a column has a mapper, its records' assembly, and the defaults
    written in place of nulls."""

    topic: str
    columns: TableColumns
    encode: RowEncoder | None
    maps: bool
    records: RecordBytes
    null_defaults: dict[str, Any] | None  # written for a null (replace_null_with_default), by column


class TableDescriptions(Protocol):
    """Where the sink's table descriptions come from (`dblog.runtime.table_history`)."""

    def definition(self, table: TableId) -> TableDefinition | None:
        """The table's definition as of the stream's position (the schema history's)."""

    def snapshot(self, tables: list[TableId]) -> SchemaSnapshot:
        """What Debezium's snapshot describes the tables by, read now (a first start)."""


class KafkaSink(Sink):
    def __init__(
        self,
        bootstrap_servers: str,
        settings: KafkaSinkSettings,
        connector: str,
        schema_of: Callable[[TableId], TableSchema],
        captures: Callable[[TableId], bool] = lambda table: True,
        security: KafkaSecurity | None = None,
        columns: ColumnSettings | None = None,
        definitions: TableDescriptions | None = None,
    ) -> None:
        self.bootstrap = bootstrap_servers
        # Where schema-change records' table definitions and the columns' defaults come from
        # (None: records without them, no defaults)
        self._definitions = definitions
        self.security = security or PLAINTEXT
        self.settings = settings
        self._connector = connector
        self._schema_of = schema_of
        self._captures = captures
        self._producer = None
        self._admin = None  # kafka-python's, to create topics: open only while it does
        self._admin_timeouts: dict = {}
        self._existing: set[str] | None = None  # topics known to exist (create_topics)
        self._topics: dict[TableId, str] = {}  # table -> its topic, checked (and created)
        self._owners: dict[str, str] = {}  # topic -> what writes to it, to refuse two tables on one
        self._schema_topic: str | None = None
        self._dropped_database = None  # the GTID of the last DROP DATABASE written (one record, many calls)
        self._key_schemas: dict[TableId, bytes] = {}
        self._value_schemas: dict[tuple[TableId, tuple[str, ...]], bytes] = {}
        self._value_modes = settings.value_modes  # None: dblog's normal form
        self._skipped = frozenset(settings.skipped_operations)  # Debezium's skipped.operations
        self._routes: dict[TableId, _TableRoute] = {}  # table -> what `write` needs of it
        self._column_defaults: dict[TableId, dict[str, Any]] = {}  # table -> its columns' encoded defaults
        self._column_settings = columns  # [columns]: filters and masks (dblog.sinks.column_options)
        self._columns: dict[TableId, TableColumns] = {}  # table -> its column options, message key
        # sink.kafka.transforms: each record through them (None: none, the records as Debezium writes them)
        self._transforms = TransformChain(settings.transforms, settings.schemas) if settings.transforms else None
        self._routed: set[str] = set()  # topics the transforms routed records to, checked (and created)
        # the transforms see the Connect schemas when they are written, or when route_by_field must
        # check its column's type (Debezium's Struct.getString fails on another type, even on a null)
        self._transform_schemas = settings.schemas or any(
            getattr(item, "route_by_field", "") for item in settings.transforms)
        self._schema_dicts: dict = {}  # the Connect schemas of the transformed path, by table (and row fields)
        self._schema_json: dict[int, tuple[dict, bytes]] = {}  # a schema object -> its JSON
        self._context = self._context_headers() if settings.extended_headers else []  # Debezium's context headers
        # Debezium's provide.transaction.metadata: the open transaction's counts (None: off)
        self._transactions = TransactionMetadata() if settings.transaction_metadata else None
        self._transaction_topic: str | None = None
        self._heartbeat_topic: str | None = None
        self._failure: tuple[str, DeliveryError] | None = None  # the first record Kafka refused
        self._last_client_error: DeliveryError | None = None
        self._wait_seconds = 30.0
        self._failures = 0
        self.pending_rows = 0
        self.produced = 0  # records handed to the producer (tombstones included)

    # --- connections -----------------------------------------------------------------------

    def _connect(self) -> None:
        if self._producer is not None:
            return
        _quiet_client_logs()
        settings = self.settings
        delivery_ms = int(settings.delivery_timeout_seconds * 1000)
        request_ms = max(500, min(30_000, delivery_ms - settings.linger_ms))
        # The first connection, a topic's metadata: under a minute, which `dblog run`'s supervisor
        # would count as a steady run (restarting its give-up clock) while the brokers are down.
        wait_ms = max(1000, min(30_000, delivery_ms))
        if self.security.protocol != "PLAINTEXT":  # a wrong password or CA: say so now, not after a timeout
            problem = diagnose(self.security, self.bootstrap, timeout=wait_ms / 1000)
            if problem is not None:
                raise SinkError(f"cannot connect to the Kafka brokers at {self.bootstrap} "
                                f"({self.security.describe()}): {problem}")
        self._wait_seconds = wait_ms / 1000
        try:
            self._producer = Producer({
                "bootstrap.servers": self.bootstrap,
                **librdkafka_options(self.security),
                "client.id": f"dblog-{self._connector}",
                "acks": "all" if settings.acks == "all" else 1,
                "enable.idempotence": settings.acks == "all",  # no duplicates from the producer's retries
                "max.in.flight.requests.per.connection": 1,  # a retried batch never overtakes the next one
                "partitioner": "murmur2_random",  # Java's (and kafka-python's) partition of a key
                "linger.ms": settings.linger_ms,
                "compression.type": settings.compression,
                "message.timeout.ms": max(delivery_ms, request_ms + settings.linger_ms),
                "request.timeout.ms": request_ms,
                "message.max.bytes": settings.max_request_size,
                "batch.size": min(settings.max_request_size, BATCH_BYTES),
                "queue.buffering.max.kbytes": settings.max_buffer_bytes // 1024,  # full: `_make_room` waits
                "queue.buffering.max.messages": settings.max_buffer_records,
                # Reports of failed records only: a Python call per acknowledged record would cost
                # about as much as encoding it; `flush()` tells that the others were acknowledged.
                "delivery.report.only.error": True,
                "on_delivery": self._failed,
                "error_cb": self._client_error,
                "logger": librdkafka_log,
            })
            self._produce = self._producer.produce
            self._producer.list_topics(timeout=self._wait_seconds)  # connected: the brokers answer
            self._admin_timeouts = {"request_timeout_ms": request_ms, "bootstrap_timeout_ms": wait_ms}
            if settings.create_topics:  # connects now: a refused login stops dblog here, named
                self._open_admin()
        except (KafkaException, KafkaError) as error:
            self.close()
            problem = diagnose(self.security, self.bootstrap)
            if problem is not None:  # retrying cannot help: stop and say which setting is wrong
                raise SinkError(f"cannot connect to the Kafka brokers at {self.bootstrap} ({self.security.describe()}): "
                                f"{problem}") from None
            raise SinkUnavailable(
                f"cannot reach the Kafka brokers at {self.bootstrap} ({_describe(error)}); "
                "check kafka.bootstrap_servers and that the brokers run"
            ) from None

    def check_routes(self, tables: list[TableId]) -> None:
        """Connect, name every captured table's topic (refusing names Kafka would refuse and two
        tables sharing one) and create the missing ones: before anything is written."""
        self._connect()
        for table in tables:
            self._topic_for(table, create=False)
            if self.settings.message_key:  # a message key listing a column twice is refused now
                self._table_columns(table)
        wanted = list(self._topics.values())
        if self.settings.schema_changes:
            wanted.append(self._schema_change_topic())
        if self._transactions is not None:
            wanted.append(self._named_topic("transaction"))
        if self.settings.heartbeat_interval_ms:
            wanted.append(self._named_topic("heartbeat"))
        if self._transforms is not None:  # the topics the records land on, after the routers
            wanted = [self._routed_topic(topic) for topic in wanted]
            self._routed.update(wanted)
        if self.settings.create_topics:
            self._create(wanted)

    def _topic_for(self, table: TableId, create: bool = True) -> str:
        topic = self._topics.get(table)
        if topic is not None:
            return topic
        try:
            topic = self.settings.table_topic(self._connector, table)
        except TopicNameError as error:
            raise SinkError(f"cannot write {table} to Kafka: {error}") from None
        self._claim(topic, f"table {table}")
        if create and self.settings.create_topics and self._transforms is None:  # else: the routed one (_emit)
            self._create([topic])
        self._topics[table] = topic
        return topic

    def _schema_change_topic(self) -> str:
        if self._schema_topic is None:
            try:
                topic = self.settings.schema_topic(self._connector)
            except TopicNameError as error:
                raise SinkError(f"cannot write schema changes to Kafka: {error}") from None
            self._claim(topic, "the schema changes")
            self._schema_topic = topic
        return self._schema_topic

    def _named_topic(self, kind: str) -> str:
        """The transaction metadata topic or the heartbeat topic: named, checked and claimed once."""
        attribute = f"_{kind}_topic"
        topic = getattr(self, attribute)
        if topic is None:
            settings = self.settings
            try:
                if kind == "transaction":
                    topic = settings.transaction_metadata_topic(self._connector)
                else:
                    topic = settings.heartbeat_records_topic(self._connector)
            except TopicNameError as error:
                raise SinkError(f"cannot write {kind} records to Kafka: {error}") from None
            self._claim(topic, f"the {kind} records")
            setattr(self, attribute, topic)
        return topic

    def _claim(self, topic: str, owner: str) -> None:
        other = self._owners.setdefault(topic, owner)
        if other != owner:
            raise SinkError(
                f"{other} and {owner} would both write to Kafka topic {topic!r} (names are sanitized to letters, "
                "digits, '.', '_' and '-'); put {db} and {table} in sink.kafka.topic, or exclude one of them"
            )

    def _open_admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=f"dblog-{self._connector}",
                                           **self._admin_timeouts, **client_options(self.security))
        return self._admin

    def _close_admin(self) -> None:
        """kafka-python's client keeps an I/O thread that wakes up and takes the GIL from the
        engine's loop: it lives only while topics are made."""
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception as error:  # noqa: BLE001
                log.debug("closing a Kafka client: %s", error)

    def _create(self, topics: list[str]) -> None:
        """Create those of `topics` that do not exist, and wait until the producer sees them."""
        self._connect()
        if self._existing is not None and all(topic in self._existing for topic in topics):
            return
        try:
            self._open_admin()
            if self._existing is None:
                self._existing = set(self._admin.list_topics())
            missing = [topic for topic in dict.fromkeys(topics) if topic not in self._existing]
            if missing:
                settings = self.settings
                answer = self._admin.create_topics(
                    {topic: {"num_partitions": settings.partitions, "replication_factor": settings.replication_factor,
                             "configs": dict(settings.topic_properties)} for topic in missing},
                    raise_errors=False,
                )
                for result in answer.get("topics", []):
                    if result["error_code"] not in (0, TOPIC_ALREADY_EXISTS):
                        error = for_code(result["error_code"])
                        why = f"{error.__name__}{': ' + result['error_message'] if result.get('error_message') else ''}"
                        if error.retriable:  # e.g. a controller election: try again later
                            raise SinkUnavailable(f"Kafka could not create topic {result['name']!r} now: {why}")
                        raise SinkError(
                            f"Kafka refused to create topic {result['name']!r}: {why}. Create it yourself (existing "
                            "topics are left as they are), or fix sink.kafka.partitions / replication_factor / "
                            "topic_properties, or the name (sink.kafka.topic, `name`)"
                        )
                log.info("created Kafka topics %s", ", ".join(missing))
            for topic in missing:
                self._wait_for_metadata(topic)
            self._existing.update(missing)
        except (KafkaError, KafkaException) as error:
            raise SinkUnavailable(
                f"could not create Kafka topics {', '.join(topics)} at {self.bootstrap}: {_describe(error)}"
            ) from None
        finally:
            self._close_admin()

    def _wait_for_metadata(self, topic: str) -> None:
        """Until the producer's metadata shows `topic` with its partitions (a new topic)."""
        deadline = time.monotonic() + self._wait_seconds
        while True:
            known = self._producer.list_topics(topic, timeout=self._wait_seconds).topics.get(topic)
            if known is not None and known.error is None and known.partitions:
                return
            if time.monotonic() > deadline:
                raise SinkUnavailable(f"Kafka created topic {topic!r} but its metadata does not show it after "
                                      f"{self._wait_seconds:.0f} s")
            time.sleep(0.05)

    # --- records ---------------------------------------------------------------------------

    def write(self, changes: list[RowChange]) -> None:
        if not changes:
            return
        if self._producer is None:
            self._connect()
        now_ns = time.time_ns()
        times = envelope_times(now_ns)
        skipped, transactions, routes, produce = self._skipped, self._transactions, self._routes, self._produce
        tombstones, schemas, plain, context = self.settings.tombstones, self.settings.schemas, \
            self._transforms is None, self._context
        # The engine writes a transaction's streamed changes together (up to HELD_CHANGES), a
        # window's rows at once: what is per call or per table stays out of this loop, and
        # `_send`'s work is inlined for the common case (a record the producer's queue takes at once).
        produced = 0
        for change in changes:
            if change.op in skipped:  # a key change is an update: skipped whole with "u", as Debezium does
                continue
            table = change.table
            route = routes.get(table) or self._route(table)
            columns = route.columns
            if columns.rewrites:
                change = output_change(change, columns)  # the message key's columns, the filtered rows
            if not plain:
                self._write_transformed(change, route, now_ns)
                continue
            if change.before_key is not None and columns.key_columns:
                self._write_key_change(change, route, now_ns)
                continue
            # the bytes of `_encoded`'s records, assembled (dblog.sinks.record_bytes)
            before, after = change.before, change.after
            if route.encode is not None:
                before, after = route.encode.pair(before, after)
            if route.maps:
                before, after = columns.map(before), columns.map(after)
            if route.null_defaults:
                before, after = _nulls_replaced(before, route.null_defaults), _nulls_replaced(after, route.null_defaults)
            transaction = NO_TRANSACTION
            if transactions is not None and not change.source.snapshot:
                transaction = transaction_piece(self._transaction_block(change))
            records = route.records
            value = records.value(change, before, after, transaction, times, now_ns)
            key = records.key(change.key) if columns.key_columns else None
            if schemas:
                value = self._with_value_schema(table, route.topic, after if after is not None else before, value)
                if key is not None:
                    key = self._with_key_schema(table, route.topic, columns.key_columns, key)
            try:
                produce(route.topic, value, key, headers=context)
                produced += 1
            except (BufferError, KafkaException) as error:
                self._send_refused(error, route.topic, key, value, context)
            if tombstones and key is not None and change.op == "d":
                try:
                    produce(route.topic, None, key, headers=context)
                    produced += 1
                except (BufferError, KafkaException) as error:
                    self._send_refused(error, route.topic, key, None, context)
        self.produced += produced
        # No poll() here: what it serves (reports of failed records, the client's errors, log
        # lines) is only acted upon in `flush`, which serves them itself; a poll per call
        # released the GIL to other threads and took ~18% of the sink's time in a burst (py-spy).
        self.pending_rows += len(changes)

    def _route(self, table: TableId) -> _TableRoute:
        topic = self._topics.get(table) or self._topic_for(table)
        columns = self._table_columns(table)
        encode = key_encode = None
        if self._value_modes is not None:
            table_columns = self._schema_of(table).columns
            encode = RowEncoder(table_columns, self._value_modes, self._zero_date_values(table))
            by_name = {column.name: column for column in table_columns}
            key_encode = RowEncoder([by_name[name] for name in columns.key_columns if name in by_name],
                                    self._value_modes).encode  # the key columns' encodings only
        null_defaults = self._null_defaults(table)
        if null_defaults and key_encode is not None and any(name in null_defaults for name in columns.key_columns):
            # a nullable message key column with a default: the key converter replaces its nulls too
            encode_key = key_encode
            key_encode = lambda key: _nulls_replaced(encode_key(key), null_defaults)  # noqa: E731
        records = RecordBytes(table, self._connector, columns.key_columns, key_encode)
        route = self._routes[table] = _TableRoute(topic, columns, encode, bool(columns.mappers), records,
                                                  null_defaults)
        return route

    def _null_defaults(self, table: TableId) -> dict[str, Any] | None:
        """The defaults JsonConverter writes for nulls (replace.null.with.default), by column: of
        the nullable columns whose default is not null, the only ones whose null it changes (a
        row with a null elsewhere then costs nothing)."""
        if not self.settings.replace_null_with_default or self._value_modes is None:
            return None
        defaults = self._defaults(table)
        nullable = {column.name for column in self._schema_of(table).columns if column.nullable}
        return {name: value for name, value in defaults.items() if value is not None and name in nullable} or None

    def _write_key_change(self, change: RowChange, route: _TableRoute, now_ns: int) -> None:
        """An update of the key, as Debezium writes it: a delete of the old key (and its tombstone)
        with header `__debezium.newkey`, then a create of the new key with `__debezium.oldkey`; each
        header's value is the other record's key, as the key is written."""
        table, topic = change.table, route.topic
        sent = [(self._key_bytes(table, topic, key), value) for key, value in self._encoded(change, route, now_ns)]
        (old_key, deleted), (new_key, created) = sent
        if self._transactions is not None and not change.source.snapshot:  # two events: Debezium counts both
            self._in_transaction(change, deleted)
            self._in_transaction(change, created)
        headers = [(NEW_KEY_HEADER, new_key), *self._context]
        self._send(topic, old_key, self._value_bytes(table, topic, deleted), headers)
        if self.settings.tombstones:
            self._send(topic, old_key, None, headers)
        self._send(topic, new_key, self._value_bytes(table, topic, created), [(OLD_KEY_HEADER, old_key), *self._context])

    def _encoded(self, change: RowChange, route: _TableRoute, now_ns: int):
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
                record["key"] = _nulls_replaced(record["key"], null_defaults)
                value["before"] = _nulls_replaced(value["before"], null_defaults)
                value["after"] = _nulls_replaced(value["after"], null_defaults)
            yield record["key"], value

    # --- through sink.kafka.transforms ------------------------------------------------------

    def _write_transformed(self, change: RowChange, route: _TableRoute, now_ns: int) -> None:
        """The records `write` sends, each through the transforms (a key change's headers hold the
        keys as Debezium wrote them, before any transform, as Debezium's do)."""
        table, topic, key_columns = change.table, route.topic, route.columns.key_columns
        records = [(key if key_columns else None, value) for key, value in self._encoded(change, route, now_ns)]
        if self._transactions is not None and not change.source.snapshot:  # before the transforms, as Debezium
            for _, value in records:
                self._in_transaction(change, value)
        tombstones = self.settings.tombstones
        if change.before_key is not None and key_columns:
            (old_key, deleted), (new_key, created) = records
            headers = [(NEW_KEY_HEADER, self._key_bytes(table, topic, new_key)), *self._context]
            self._emit(table, topic, old_key, deleted, headers)
            if tombstones:
                self._emit(table, topic, old_key, None, headers)
            self._emit(table, topic, new_key, created,
                       [(OLD_KEY_HEADER, self._key_bytes(table, topic, old_key)), *self._context])
            return
        for key, value in records:
            headers = [*self._context]  # a delete's and its tombstone's: one list, as Debezium's one Headers (the unwrap adds to it)
            self._emit(table, topic, key, value, headers)
            if tombstones and key is not None and value["op"] == "d":
                self._emit(table, topic, key, None, headers)

    def _emit(self, table: TableId | None, topic: str, key: dict | None, value: dict | None,
              headers: list | None = None, key_schema: dict | None = None, value_schema: dict | None = None,
              partition: int = -1,
              envelope: bool = True) -> None:
        """One record through the transforms, then to the topic they chose. `table` names the
        change's table (its schemas); None with `key_schema` / `value_schema` for other records."""
        if self._transform_schemas and table is not None:
            key_schema = self._key_schema(table, topic, key) if key is not None else None
            value_schema = self._value_schema(table, topic, value) if value is not None else None
        elif not self._transform_schemas:
            key_schema = value_schema = None
        record = Record(topic, key, key_schema, value, value_schema, [] if headers is None else headers,
                        envelope and value is not None, tombstone=value is None)
        try:
            record = self._transforms.apply(record)
        except TransformError as error:
            raise SinkError(f"cannot write a record of {table or topic} to Kafka: {error}") from None
        if record is None:
            return
        if record.topic not in self._routed:
            self._use_topic(record.topic)
        key_bytes = None if record.key is None else self._payload(record.key_schema, record.key)
        value_bytes = None if record.tombstone else self._payload(record.value_schema, record.value)
        self._send(record.topic, key_bytes, value_bytes, record.headers or None, partition)

    def _routed_topic(self, topic: str) -> str:
        routed = self._transforms.route(topic)
        if routed != topic:
            try:
                check_topic(routed, f"topic {topic!r} routed by sink.kafka.transforms",
                            "fix the transforms' replacement")
            except TopicNameError as error:
                raise SinkError(f"cannot write to Kafka: {error}") from None
        return routed

    def _use_topic(self, topic: str) -> None:
        """A topic a record was routed to by its contents (unwrap's route_by_field): checked, and
        created when missing (several tables may share one: Debezium allows it)."""
        try:
            check_topic(topic, "a topic chosen by sink.kafka.transforms", "fix the transforms or the routing column")
        except TopicNameError as error:
            raise SinkError(f"cannot write to Kafka: {error}") from None
        if self.settings.create_topics:
            self._create([topic])
        self._routed.add(topic)

    def _payload(self, schema: dict | None, payload) -> bytes:
        data = orjson.dumps(payload)
        if not self.settings.schemas:
            return data
        known = self._schema_json.get(id(schema))
        if known is None or known[0] is not schema:
            if len(self._schema_json) > 4096:
                self._schema_json.clear()
            known = self._schema_json[id(schema)] = (schema, orjson.dumps(schema))
        return _with_schema(known[1], data)

    def _key_schema(self, table: TableId, topic: str, key: dict) -> dict:
        schema = self._schema_dicts.get((table, "key"))
        if schema is None:
            table_schema, defaults = self._schema_of(table), self._defaults(table)
            # a column of message.key.columns may be nullable: Debezium's key field is optional then
            fields = [_field(name, self._column_schema(table_schema.column(name)), table_schema.column(name).nullable,
                             defaults) for name in key]
            schema = self._schema_dicts[(table, "key")] = connect_schema.key_schema(topic, fields)
        return schema

    def _value_schema(self, table: TableId, topic: str, value: dict) -> dict:
        return self._row_schema(table, topic, value["after"] if value["after"] is not None else value["before"])

    def _row_schema(self, table: TableId, topic: str, row: dict | None) -> dict:
        names = tuple(row) if row is not None else None
        schema = self._schema_dicts.get((table, names))
        if schema is None:
            schema = self._schema_dicts[(table, names)] = connect_schema.envelope_schema(
                topic, self._row_fields(table, row))
        return schema

    # --- transaction metadata and heartbeats ------------------------------------------------

    def transaction_started(self, start: TransactionStart) -> None:
        if self._transactions is not None:
            self._transactions.started(str(start.gtid), start.ts_ms)

    def transaction_ended(self, end: TransactionEnd) -> None:
        if self._transactions is not None:
            for record in self._transactions.ended():
                self._send_transaction_record(record)

    def _in_transaction(self, change: RowChange, value: dict) -> None:
        """Stamp `value` with its `transaction` block."""
        value["transaction"] = self._transaction_block(change)

    def _transaction_block(self, change: RowChange) -> dict | None:
        """The `transaction` block of the change's next record (writing the transaction's BEGIN first)."""
        begin, block = self._transactions.event(str(change.table), change.source.ts_ms)
        if begin is not None:
            self._send_transaction_record(begin)
        return block

    def _send_transaction_record(self, record: dict) -> None:
        self._send_other("transaction", record["key"], record["value"], TRANSACTION_KEY_SCHEMA,
                         TRANSACTION_VALUE_SCHEMA)

    def heartbeat(self, ts_ms: int) -> None:
        """Debezium's heartbeat record: key `{serverName}` (the connector's name), value
        `{ts_ms}`, on partition 0 of the heartbeat topic (as Debezium's HeartbeatImpl)."""
        if not self.settings.heartbeat_interval_ms:
            return
        self._send_other("heartbeat", {"serverName": self._connector}, {"ts_ms": ts_ms}, connect_schema.HEARTBEAT_KEY,
                         connect_schema.HEARTBEAT_VALUE, partition=0)
        self._producer.poll(0)

    def _send_other(self, kind: str, key: dict, value: dict, key_schema: dict, value_schema: dict,
                    partition: int = -1) -> None:
        """A transaction or heartbeat record on its topic; through sink.kafka.transforms when
        there are (Kafka Connect applies them to every record: a router may rename the topic,
        the unwrap passes records that are not change events as they are)."""
        self._connect()
        topic = self._named_topic(kind)
        if self._transforms is not None:
            self._emit(None, topic, key, value, key_schema=key_schema, value_schema=value_schema, envelope=False,
                       partition=partition)
            return
        if self.settings.create_topics and topic not in (self._existing or ()):
            self._create([topic])
        self._send(topic, self._payload(key_schema, key), self._payload(value_schema, value), partition=partition)

    def table_redefined(self, table: TableId | None) -> None:
        """Forget the schemas, encoders and column options made from the tables' definitions
        (of every table: rare enough not to sort them out by table)."""
        self._key_schemas.clear()
        self._value_schemas.clear()
        self._schema_dicts.clear()
        self._columns.clear()
        self._routes.clear()
        self._column_defaults.clear()

    def schema_changed(self, change: SchemaChange, ddl: DdlChange, position: GtidSet) -> list[TableId]:
        """TRUNCATE: an `op: "t"` record (null key) on each captured table's topic, unless
        `skipped_operations` holds `t` (the default, Debezium's). Other DDL naming
        a captured table: a record on the schema change topic, keyed by the database name."""
        if self._transactions is not None:
            self._transactions.schema_changed()  # a statement: no BEGIN / END (as Debezium's MySQL connector)
        self.table_redefined(None)  # the tables' columns may have changed
        now_ns = time.time_ns()
        now = now_ns // 1_000_000
        if ddl.kind == "truncate":
            if "t" in self._skipped:  # Debezium's default skipped.operations
                return []
            for table in ddl.tables:
                if self._captures(table):
                    self._connect()
                    topic = self._topic_for(table)
                    value = truncate_record(table, str(change.gtid), self._connector, now, now_ns,
                                            change.source)["value"]
                    if self._transforms is not None:
                        self._emit(table, topic, None, value, [*self._context])
                        continue
                    self._send(topic, None, self._value_bytes(table, topic, value), self._context)
            return []
        if not self.settings.schema_changes:
            return []
        source = dataclasses.replace(change.source, gtid=str(change.gtid))
        database = dropped_database(change.sql, change.db)
        if database is not None:  # reaches the sink as a DROP of each known table: one record, Debezium's
            if any(self._captures(table) for table in ddl.tables) and self._dropped_database != change.gtid:
                self._dropped_database = change.gtid
                self._send_schema_records([database_record(change.sql, database, source, self._connector, now_ns)])
            return []
        changes = streamed_changes(change.sql, ddl, self._captures)
        if changes:
            definitions = {}
            if self._definitions is not None:  # as of the statement: the schema history's, it applied
                for kind, table in changes:
                    definition = self._definitions.definition(table) if kind != "DROP" else None
                    if definition is not None:
                        definitions[table] = definition
            self._send_schema_records(streamed_records(change.sql, changes, definitions, source, self._connector,
                                                       now_ns))
        return []

    @property
    def uses_definitions(self) -> bool:
        return self._definitions is not None and (self.settings.schema_changes or self._value_modes is not None)

    def first_start(self, tables: list[TableId], marked_rows_follow: bool = False) -> None:
        """Debezium's snapshot records of the captured tables on the schema change topic (SET,
        DROP TABLE IF EXISTS, DROP/CREATE DATABASE, USE, CREATE TABLE), once: at the first start,
        before anything else, so the first commit covers them."""
        if not self.settings.schema_changes or self._definitions is None or not tables:
            return
        snapshot = self._definitions.snapshot(tables)
        self._send_schema_records(start_records(snapshot, tables, self._connector, time.time_ns(),
                                                last="true" if marked_rows_follow else "last"))

    def _send_schema_records(self, records: list[dict]) -> None:
        if not records:
            return
        self._connect()
        topic = self._schema_change_topic()
        if self.settings.create_topics and topic not in (self._existing or ()) and self._transforms is None:
            self._create([topic])
        for record in records:
            if self._transforms is not None:  # they may drop, change or route it (sink.kafka.transforms)
                self._emit(None, topic, record["key"], record["value"], [*self._context],
                           key_schema=connect_schema.SCHEMA_CHANGE_KEY,
                           value_schema=connect_schema.SCHEMA_CHANGE_VALUE, envelope=False)
                continue
            self._send(topic, self._payload(connect_schema.SCHEMA_CHANGE_KEY, record["key"]),
                       self._payload(connect_schema.SCHEMA_CHANGE_VALUE, record["value"]), self._context)
        self._producer.poll(0)

    def _key_bytes(self, table: TableId, topic: str, key: dict) -> bytes:
        payload = orjson.dumps(key)
        return self._with_key_schema(table, topic, key, payload) if self.settings.schemas else payload

    def _with_key_schema(self, table: TableId, topic: str, names, payload: bytes) -> bytes:
        """A key's `payload` with its `schema` part; `names`: the key's columns."""
        schema = self._key_schemas.get(table)
        if schema is None:
            schema = self._key_schemas[table] = orjson.dumps(self._key_schema(table, topic, names))
        return _with_schema(schema, payload)

    def _value_bytes(self, table: TableId, topic: str, value: dict) -> bytes:
        payload = orjson.dumps(value)
        if not self.settings.schemas:
            return payload
        return self._with_value_schema(table, topic, value["after"] if value["after"] is not None else value["before"],
                                       payload)

    def _with_value_schema(self, table: TableId, topic: str, row: dict | None, payload: bytes) -> bytes:
        """A change value's `payload` with its `schema` part; `row`: its `after`, else its `before`."""
        names = tuple(row) if row is not None else None
        schema = self._value_schemas.get((table, names))
        if schema is None:
            schema = self._value_schemas[(table, names)] = orjson.dumps(self._row_schema(table, topic, row))
        return _with_schema(schema, payload)

    def _row_fields(self, table: TableId, row: dict | None) -> list[dict]:
        """The fields of `row` (None: of the table, for a truncate record)."""
        try:
            table_schema = self._schema_of(table)
        except LookupError:  # the table is gone (a change read again after its DROP)
            table_schema = None
        columns = self._table_columns(table) if table_schema is not None else None
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

    def _defaults(self, table: TableId) -> dict[str, Any]:
        """The table's column defaults as its values are written (Debezium's encodings; the
        schema history's, as of the rows being written): Debezium writes them into the fields'
        schemas."""
        defaults = self._column_defaults.get(table)
        if defaults is None:
            defaults = self._column_defaults[table] = {}
            if self._value_modes is not None and self._definitions is not None:
                definition = self._definitions.definition(table)
                stated = {column.name: column.default for column in definition.columns} if definition else {}
                for column in self._schema_of(table).columns:
                    present, value = default_value(column, stated.get(column.name))
                    if present:
                        encode = column_encoding(column, self._value_modes).encode
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
                values[column.name] = column_encoding(column, self._value_modes).encode(EPOCH_TEXT[column.data_type])
        return values

    def _table_columns(self, table: TableId) -> TableColumns:
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
        if self._value_modes is None:
            return None, None
        modes = self._value_modes
        return (lambda column: column_encoding(column, modes).schema["type"] == "string",
                lambda column: column_encoding(column, modes).schema == {"type": "bytes"})

    def _column_schema(self, column) -> dict:
        if self._value_modes is None:
            return connect_schema.column_schema(column)
        return column_encoding(column, self._value_modes).schema

    def _context_headers(self) -> list[tuple[str, bytes]]:
        """Debezium's context headers, as its JSON header converter writes strings: the topic
        prefix, the task (one: 0), the connector plugin (`mysql`, as `source.connector`) and
        this run's id (new at each start, as Debezium's engine makes one per run)."""
        values = {"connectorLogicalName": self._connector, "taskId": "0", "connectorName": "mysql",
                  "runId": str(uuid.uuid4())}
        return [(CONTEXT_HEADER + name, self._payload(connect_schema.STRING_HEADER, value))
                for name, value in values.items()]

    def _send(self, topic: str, key: bytes | None, value: bytes | None,
              headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        try:
            self._produce(topic, value, key, headers=headers, partition=partition)
        except (BufferError, KafkaException) as error:
            self._send_refused(error, topic, key, value, headers, partition)
            return
        self.produced += 1

    def _send_refused(self, error: BufferError | KafkaException, topic: str, key: bytes | None, value: bytes | None,
                      headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        """`produce()` did not take the record: its queue is full (wait for acknowledgements to
        make room, then send it), or it refused it (raises, named)."""
        if isinstance(error, BufferError):
            self._make_room(topic, key, value, headers, partition)
            self.produced += 1
        else:
            self._refused(topic, error.args[0], len(value or b"") + len(key or b""))

    def _make_room(self, topic: str, key: bytes | None, value: bytes | None,
                   headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        deadline = time.monotonic() + self.settings.delivery_timeout_seconds + 30
        while True:
            self._producer.poll(0.05)
            try:
                self._produce(topic, value, key, headers=headers, partition=partition)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise SinkUnavailable(f"Kafka at {self.bootstrap} did not acknowledge the records in time: "
                                          "the producer's queue stayed full") from None
            except KafkaException as error:
                self._refused(topic, error.args[0], len(value or b"") + len(key or b""))

    def _refused(self, topic: str, error: DeliveryError, size: int) -> None:
        """`produce()` raised: an outage, or a producer librdkafka gave up (a fatal error of the
        idempotent producer: a new one, after the restart from the last commit, starts clean)
        is retried by `dblog run`; a record Kafka cannot take stops dblog, named."""
        if error.fatal() or error.retriable() or error.code() in _OUTAGES:
            raise SinkUnavailable(f"the Kafka producer for {self.bootstrap} cannot go on ({_describe(error)}); the "
                                  "offsets stay at the last commit and dblog produces again from there") from None
        raise SinkError(self._refusal(topic, error, size)) from None

    def _failed(self, error: DeliveryError, message) -> None:  # a record not delivered (from poll/flush)
        self._failures += 1
        if self._failure is None:
            self._failure = (message.topic(), error)

    def _client_error(self, error: DeliveryError) -> None:  # e.g. all brokers down (from poll/flush)
        self._last_client_error = error
        log.debug("Kafka producer: %s", _describe(error))

    def _refusal(self, topic: str, error, size: int | None = None) -> str:
        if isinstance(error, DeliveryError) and error.code() == DeliveryError.MSG_SIZE_TOO_LARGE:
            return (f"a record for Kafka topic {topic!r}{f' ({size:,} bytes)' if size else ''} is larger than "
                    f"sink.kafka.max_request_size ({self.settings.max_request_size:,} bytes) or the broker's "
                    f"max.message.bytes: raise both ({_describe(error)})")
        return f"Kafka refused a record for topic {topic!r}: {_describe(error)}"

    # --- commits ---------------------------------------------------------------------------

    def flush(self, offsets: Offsets | None = None) -> None:
        """Return once Kafka acknowledged every record written so far; raise otherwise (the
        engine then keeps its offsets where they were)."""
        if self._producer is not None:
            left = self._producer.flush(self.settings.delivery_timeout_seconds + 30)
            if left:
                raise SinkUnavailable(f"Kafka at {self.bootstrap} did not acknowledge {left:,} record(s) in time"
                                      + (f" ({_describe(self._last_client_error)})" if self._last_client_error else ""))
        if self._failure is not None:
            topic, error = self._failure
            count = self._failures
            if error.retriable() or error.fatal() or error.code() in _OUTAGES:
                missing = error.code() in (DeliveryError.UNKNOWN_TOPIC_OR_PART, DeliveryError._UNKNOWN_TOPIC)
                raise SinkUnavailable(
                    f"Kafka at {self.bootstrap} did not acknowledge {count:,} record(s) (first on topic {topic!r}: "
                    f"{_describe(error)}); the offsets stay at the last commit and dblog produces "
                    "again from there once the brokers answer"
                    + (" (does the topic exist? create it, or set sink.kafka.create_topics = true)"
                       if missing and not self.settings.create_topics else "")
                )
            raise SinkError(self._refusal(topic, error) + f" ({count:,} record(s) not written); the offsets stay "
                            "at the last commit")
        self.pending_rows = 0

    def close(self) -> None:
        """Drop what is not acknowledged (it was not committed: a restart produces it again)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()  # what is queued or in flight: dropped, not waited for
                producer.flush(1)  # the purge's reports
            except Exception as error:  # noqa: BLE001 - closing must not hide the error that stopped the engine
                log.debug("closing the Kafka producer: %s", error)
        self._close_admin()


def _describe(error) -> str:
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], DeliveryError):
        error = error.args[0]
    if isinstance(error, DeliveryError):
        return f"{error.name()}: {error.str()}"
    text = str(error)
    name = type(error).__name__
    return text if name in text else f"{name}: {text}" if text else name


def _quiet_client_logs() -> None:
    """kafka-python logs each failed connection attempt at ERROR, dozens a second while a broker is
    down, and librdkafka (the data producer) does the same; the sink's errors say what failed.
    Their logs stay as configured when the user set their level, or run at debug level."""
    for client in (logging.getLogger("kafka"), librdkafka_log):
        if client.level == logging.NOTSET and not logging.getLogger().isEnabledFor(logging.DEBUG):
            client.setLevel(logging.CRITICAL)


def _field(name: str, schema: dict, optional: bool, defaults: dict[str, Any]) -> dict:
    """A column's field, with its default when it has one (Debezium writes them in keys and values)."""
    if name in defaults:
        return connect_schema.field(name, schema, optional, defaults[name])
    return connect_schema.field(name, schema, optional)


def _nulls_replaced(row: dict | None, defaults: dict[str, Any]) -> dict | None:
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
