"""Row changes as Debezium's records: one per change on its table's topic, a tombstone after
each delete, a key change as Debezium's delete, tombstone and create with its
`__debezium.newkey` / `__debezium.oldkey` headers; with transaction metadata, each record's
`transaction` block; through sink.kafka.transforms when there are.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaException

from dblog.core.events import RowChange
from dblog.sinks.column_options import output_change
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.encoding import RecordEncoding, TableRoute, nulls_replaced
from dblog.sinks.kafka.output import Output
from dblog.sinks.kafka.topics import Topics
from dblog.sinks.kafka.transaction_records import TransactionRecords
from dblog.sinks.record_bytes import NO_TRANSACTION, envelope_times, transaction_piece

# Debezium's headers of a key change's records (RelationalChangeRecordEmitter.PK_UPDATE_*_FIELD)
NEW_KEY_HEADER = "__debezium.newkey"
OLD_KEY_HEADER = "__debezium.oldkey"


class ChangeRecords:
    def __init__(self, encoding: RecordEncoding, topics: Topics, output: Output, delivery: Delivery,
                 transactions: TransactionRecords | None, context: list[tuple[str, bytes]]) -> None:
        self.settings = settings = encoding.settings
        self._encoding = encoding
        self._topics = topics
        self._output = output
        self._delivery = delivery
        self._transactions = transactions  # None: no transaction metadata
        self._context = context  # Debezium's context headers (empty: none)
        self._skipped = frozenset(settings.skipped_operations)  # Debezium's skipped.operations

    def write(self, changes: list[RowChange]) -> None:
        delivery = self._delivery
        if delivery.producer is None:
            self._topics.connect()
        now_ns = time.time_ns()
        times = envelope_times(now_ns)
        skipped, transactions, routes, produce = self._skipped, self._transactions, self._encoding.routes, \
            delivery.produce
        encoding = self._encoding
        tombstones, schemas, plain, context = self.settings.tombstones, self.settings.schemas, \
            self._output.transforms is None, self._context
        # The engine writes a transaction's streamed changes together (up to HELD_CHANGES), a
        # window's rows at once: what is per call or per table stays out of this loop, and
        # `Delivery.send`'s work is inlined for the common case (a record the producer's queue takes at once).
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
            # the bytes of `RecordEncoding.encoded`'s records, assembled (dblog.sinks.record_bytes)
            before, after = change.before, change.after
            if route.encode is not None:
                before, after = route.encode.pair(before, after)
            if route.maps:
                before, after = columns.map(before), columns.map(after)
            if route.null_defaults:
                before, after = nulls_replaced(before, route.null_defaults), nulls_replaced(after, route.null_defaults)
            transaction = NO_TRANSACTION
            if transactions is not None and not change.source.snapshot:
                transaction = transaction_piece(transactions.block(change))
            records = route.records
            value = records.value(change, before, after, transaction, times, now_ns)
            key = records.key(change.key) if columns.key_columns else None
            if schemas:
                value = encoding.with_value_schema(table, route.topic, after if after is not None else before, value)
                if key is not None:
                    key = encoding.with_key_schema(table, route.topic, columns.key_columns, key)
            try:
                produce(route.topic, value, key, headers=context)
                produced += 1
            except (BufferError, KafkaException) as error:
                delivery.send_refused(error, route.topic, key, value, context)
            if tombstones and change.op == "d":  # a keyless table's too (a null key), as Debezium's
                try:
                    produce(route.topic, None, key, headers=context)
                    produced += 1
                except (BufferError, KafkaException) as error:
                    delivery.send_refused(error, route.topic, key, None, context)
        delivery.produced += produced
        # No poll() here: what it serves (reports of failed records, the client's errors, log
        # lines) is only acted upon in `flush`, which serves them itself; a poll per call
        # released the GIL to other threads and took ~18% of the sink's time in a burst (py-spy).

    def _route(self, table) -> TableRoute:
        return self._encoding.route(table, self._topics.table_topic(table))

    def _write_key_change(self, change: RowChange, route: TableRoute, now_ns: int) -> None:
        """An update of the key, as Debezium writes it: a delete of the old key (and its tombstone)
        with header `__debezium.newkey`, then a create of the new key with `__debezium.oldkey`; each
        header's value is the other record's key, as the header converter writes it."""
        table, topic, encoding, send = change.table, route.topic, self._encoding, self._delivery.send
        encoded = list(encoding.encoded(change, route, now_ns))
        (old_key, deleted), (new_key, created) = [(encoding.key_bytes(table, topic, key), value) for key, value in encoded]
        old_header, new_header = [encoding.key_header_bytes(table, topic, key) for key, _ in encoded]
        if self._transactions is not None and not change.source.snapshot:  # two events: Debezium counts both
            self._transactions.stamp(change, deleted)
            self._transactions.stamp(change, created)
        headers = [(NEW_KEY_HEADER, new_header), *self._context]
        send(topic, old_key, encoding.value_bytes(table, topic, deleted), headers)
        if self.settings.tombstones:
            send(topic, old_key, None, headers)
        send(topic, new_key, encoding.value_bytes(table, topic, created), [(OLD_KEY_HEADER, old_header), *self._context])

    def _write_transformed(self, change: RowChange, route: TableRoute, now_ns: int) -> None:
        """The records `write` sends, each through the transforms (a key change's headers hold the
        keys as Debezium wrote them, before any transform, as Debezium's do)."""
        table, topic, key_columns = change.table, route.topic, route.columns.key_columns
        encoding, emit = self._encoding, self._output.emit
        records = [(key if key_columns else None, value) for key, value in encoding.encoded(change, route, now_ns)]
        if self._transactions is not None and not change.source.snapshot:  # before the transforms, as Debezium
            for _, value in records:
                self._transactions.stamp(change, value)
        tombstones = self.settings.tombstones
        if change.before_key is not None and key_columns:
            (old_key, deleted), (new_key, created) = records
            headers = [(NEW_KEY_HEADER, encoding.key_header_bytes(table, topic, new_key)), *self._context]
            emit(table, topic, old_key, deleted, headers)
            if tombstones:
                emit(table, topic, old_key, None, headers)
            emit(table, topic, new_key, created,
                 [(OLD_KEY_HEADER, encoding.key_header_bytes(table, topic, old_key)), *self._context])
            return
        for key, value in records:
            headers = [*self._context]  # a delete's and its tombstone's: one list, as Debezium's one Headers (the unwrap adds to it)
            emit(table, topic, key, value, headers)
            if tombstones and value["op"] == "d":
                emit(table, topic, key, None, headers)
