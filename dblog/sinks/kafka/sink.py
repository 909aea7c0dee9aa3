"""The Kafka sink: Debezium's topics, keys and values, for pipelines that read Debezium's output.

One topic per table (`<name>.<db>.<table>`, `KafkaSinkSettings.topic`), each record's key and
value as Kafka Connect's JSON converter writes Debezium's records (`dblog.sinks.envelope`,
optionally with the `schema` part), a tombstone after each delete, a key change as Debezium's
delete, tombstone and create (`change_records`), encoded by `encoding`; TRUNCATE and other DDL
as Debezium writes them, with the start-up records at a first start (`schema_changes`); with
`transaction_metadata`, Debezium's transaction blocks and BEGIN / END records
(`transaction_records`); with heartbeats, Debezium's heartbeat records (`heartbeats`, when the
engine's clock says: `dblog.runtime.heartbeats`); every record through sink.kafka.transforms
when there are (`output`). Notifications are not written here: they go to
`notifications.kafka_topic` (`dblog.signals.notifications`), Debezium's notification topic.

Delivery is at-least-once, as Debezium's (`delivery`): `write()` hands records to a librdkafka
producer and `flush()` returns only once every record is acknowledged, so the engine saves
offsets only behind acknowledged records and a restart produces again from there. A broker that
cannot be reached raises `SinkUnavailable`, which `dblog run`'s supervisor retries like a lost
database. Topics are named, checked and created by `topics`, with kafka-python's admin client.
Why librdkafka for the data: kafka-python's producer spent about 4× the CPU per record of the
rest of the pipeline, in Python (see docs/kafka.md, "The producer"). Exactly-once is not
offered: see docs/kafka.md, "Exactly-once: not offered".
"""

from __future__ import annotations

from collections.abc import Callable

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.schema import TableSchema
from dblog.sinks.base import Sink
from dblog.sinks.column_options import ColumnSettings
from dblog.sinks.kafka.change_records import ChangeRecords
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.encoding import RecordEncoding, TableDescriptions
from dblog.sinks.kafka.heartbeats import HeartbeatRecords
from dblog.sinks.kafka.output import Output
from dblog.sinks.kafka.schema_changes import SchemaChanges
from dblog.sinks.kafka.topics import Topics
from dblog.sinks.kafka.transaction_records import TransactionRecords
from dblog.sinks.kafka.transforms import TransformChain
from dblog.sinks.kafka.security import PLAINTEXT, KafkaSecurity
from dblog.sinks.kafka.settings import KafkaSinkSettings


class KafkaSink(Sink):
    """The engine's hooks, each handed to the part that does it: `Delivery` (the producer),
    `Topics`, `RecordEncoding`, `Output` (the transforms), and the records of changes, schema
    changes, transactions and heartbeats."""

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
        self.settings = settings
        # Where schema-change records' table definitions and the columns' defaults come from
        # (None: records without them, no defaults)
        self._definitions = definitions
        # sink.kafka.transforms: each record through them (None: none, the records as Debezium writes them)
        transforms = TransformChain(settings.transforms, settings.schemas) if settings.transforms else None
        self._delivery = delivery = Delivery(bootstrap_servers, settings, connector, security or PLAINTEXT)
        self._topics = topics = Topics(delivery, connector, transforms)
        self._encoding = encoding = RecordEncoding(settings, connector, schema_of, columns, definitions)
        output = Output(transforms, encoding, topics, delivery)
        context = encoding.context_headers() if settings.extended_headers else []  # Debezium's context headers
        # Debezium's provide.transaction.metadata (None: off)
        self._transactions = TransactionRecords(topics, output) if settings.transaction_metadata else None
        self._heartbeats = (HeartbeatRecords(connector, topics, output, delivery)
                            if settings.heartbeat_interval_ms else None)
        self._changes = ChangeRecords(encoding, topics, output, delivery, self._transactions, context)
        self._schema_changes = SchemaChanges(connector, captures, definitions, encoding, topics, output, delivery,
                                             context)
        self.pending_rows = 0

    @property
    def produced(self) -> int:
        """Records handed to the producer (tombstones included)."""
        return self._delivery.produced

    def check_routes(self, tables: list[TableId]) -> None:
        """Connect, name every captured table's topic (refusing names Kafka would refuse and two
        tables sharing one) and create the missing ones: before anything is written."""
        self._topics.connect()
        for table in tables:
            self._topics.table_topic(table, create=False)
            if self.settings.message_key:  # a message key listing a column twice is refused now
                self._encoding.table_columns(table)
        self._topics.check()

    def write(self, changes: list[RowChange]) -> None:
        if not changes:
            return
        self._changes.write(changes)
        self.pending_rows += len(changes)

    def transaction_started(self, start: TransactionStart) -> None:
        if self._transactions is not None:
            self._transactions.started(start)

    def transaction_ended(self, end: TransactionEnd) -> None:
        if self._transactions is not None:
            self._transactions.ended()

    def heartbeat(self, ts_ms: int) -> None:
        if self._heartbeats is not None:
            self._heartbeats.write(ts_ms)

    def table_redefined(self, table: TableId | None) -> None:
        self._encoding.forget()

    def schema_changed(self, change: SchemaChange, ddl: DdlChange, position: GtidSet) -> list[TableId]:
        if self._transactions is not None:
            self._transactions.schema_changed()
        self.table_redefined(None)  # the tables' columns may have changed
        self._schema_changes.write(change, ddl)
        return []

    @property
    def uses_definitions(self) -> bool:
        return self._definitions is not None and (self.settings.schema_changes or self.settings.value_modes is not None)

    def first_start(self, tables: list[TableId], marked_rows_follow: bool = False) -> None:
        self._schema_changes.first_start(tables, marked_rows_follow)

    def flush(self, offsets: Offsets | None = None) -> None:
        """Return once Kafka acknowledged every record written so far; raise otherwise (the
        engine then keeps its offsets where they were)."""
        self._delivery.flush()
        self.pending_rows = 0

    def close(self) -> None:
        """Drop what is not acknowledged (it was not committed: a restart produces it again)."""
        self._delivery.close()
        self._topics.close()
