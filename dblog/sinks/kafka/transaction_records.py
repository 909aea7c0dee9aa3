"""Debezium's transaction metadata on Kafka (`provide.transaction.metadata`): each change's
`transaction` block, and the BEGIN / END records on the transaction topic, counted by
`dblog.sinks.kafka.transaction_metadata`; a transaction's BEGIN goes out before its first change.
"""

from __future__ import annotations

from dblog.core.events import RowChange, TransactionStart
from dblog.core.file_positions import is_file_position_name
from dblog.sinks.kafka.output import Output
from dblog.sinks.kafka.topics import Topics
from dblog.sinks.kafka.transaction_metadata import (TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA,
                                                    TransactionMetadata)


class TransactionRecords:
    def __init__(self, topics: Topics, output: Output) -> None:
        self._topics = topics
        self._output = output
        self._metadata = TransactionMetadata()  # the open transaction's counts

    def started(self, start: TransactionStart) -> None:
        # read by binlog file and position (no GTIDs): the transaction's start names it
        name = f"{start.file}:{start.pos}" if is_file_position_name(start.gtid) else str(start.gtid)
        self._metadata.started(name, start.ts_ms)

    def ended(self) -> None:
        for record in self._metadata.ended():
            self._send(record)

    def schema_changed(self) -> None:
        self._metadata.schema_changed()  # a statement: no BEGIN / END (as Debezium's MySQL connector)

    def stamp(self, change: RowChange, value: dict) -> None:
        """Stamp `value` with its `transaction` block."""
        value["transaction"] = self.block(change)

    def block(self, change: RowChange) -> dict | None:
        """The `transaction` block of the change's next record (writing the transaction's BEGIN first)."""
        begin, block = self._metadata.event(str(change.table), change.source.ts_ms)
        if begin is not None:
            self._send(begin)
        return block

    def _send(self, record: dict) -> None:
        topics = self._topics
        topics.connect()
        topic = topics.ready(topics.named_topic("transaction"))
        self._output.record(topic, record["key"], record["value"], TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA)
