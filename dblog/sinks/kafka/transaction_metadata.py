"""Debezium's transaction metadata (`provide.transaction.metadata`): the `transaction` block of
each streamed change and the BEGIN / END records of the transaction topic, as Debezium's
binlog connectors write them (its `TransactionMonitor` and `TransactionStructMaker`).

What is a transaction here: one binlog transaction, named by its GTID as Debezium names it
(MySQL `uuid:seq`, MariaDB `domain-server-seq`: `str(Gtid)`). Its BEGIN record is written before
its first change record, its END record after its last one, with `event_count` (the change
records written: a key change counts its delete and its create, a tombstone nothing, a
skipped operation nothing) and `data_collections` (per `db.table`, in the order Java's HashMap
iterates them, which is the order Debezium writes: `java_hash_map_order`). A transaction of
tables dblog does not capture gets its BEGIN and END with `event_count` 0, as Debezium writes
for every BEGIN it reads. DDL (and TRUNCATE, logged as a statement) opens no transaction:
Debezium's MySQL connector sees no BEGIN for it and writes none; its records carry
`transaction: null`. Rows read by a snapshot are no part of a transaction: `transaction: null`
(Debezium's incremental snapshots pass no row through its transaction monitor either).

Delivery: the engine saves offsets only between transactions, and only once Kafka acknowledged
every record written before (END included), so a restart goes on from a transaction boundary.
A transaction cut by a crash is written again whole from its BEGIN: a consumer may see a BEGIN
(and some changes) twice, never an END without its changes nor changes whose END is lost;
`(id, total_order)` identifies a change for deduplication. See docs/kafka.md, "Transaction metadata".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dblog.sinks.kafka import connect_schema

Record = dict[str, Any]

BEGIN, END = "BEGIN", "END"

TRANSACTION_KEY_SCHEMA = connect_schema.struct(
    [connect_schema.field("id", {"type": "string"}, False)],
    "io.debezium.connector.common.TransactionMetadataKey", optional=False, version=1,
)
_DATA_COLLECTION = connect_schema.struct(
    [connect_schema.field("data_collection", {"type": "string"}, False),
     connect_schema.field("event_count", {"type": "int64"}, False)],
    "event.collection", optional=True, version=1,
)
TRANSACTION_VALUE_SCHEMA = connect_schema.struct(
    [
        connect_schema.field("status", {"type": "string"}, False),
        connect_schema.field("id", {"type": "string"}, False),
        connect_schema.field("event_count", {"type": "int64"}, True),
        {"type": "array", "items": _DATA_COLLECTION, "optional": True, "field": "data_collections"},
        connect_schema.field("ts_ms", {"type": "int64"}, False),
    ],
    "io.debezium.connector.common.TransactionMetadataValue", optional=False, version=1,
)


@dataclass
class _Transaction:
    id: str
    ts_ms: int
    begun: bool = False  # its BEGIN record is written
    schema_change: bool = False  # a DDL statement: no BEGIN / END
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)  # insertion order


class TransactionMetadata:
    """One sink's transaction state: `started`, then `event` per change record (which may
    return the BEGIN record to write first), then `ended` (the records to write at the end)."""

    def __init__(self) -> None:
        self._open: _Transaction | None = None

    def started(self, transaction_id: str, ts_ms: int | None) -> None:
        self._open = _Transaction(transaction_id, ts_ms or 0)

    def schema_changed(self) -> None:
        """The open transaction is a statement (DDL, TRUNCATE): it gets no BEGIN / END."""
        if self._open is not None and not self._open.begun:
            self._open.schema_change = True

    def event(self, table: str, ts_ms: int | None) -> tuple[Record | None, dict | None]:
        """A change record of `table` in the open transaction: (the BEGIN record to write before
        it, or None; its `transaction` block, or None outside a transaction)."""
        transaction = self._open
        if transaction is None or transaction.schema_change:
            return None, None
        begin = None
        if not transaction.begun:
            transaction.begun = True
            begin = _begin(transaction)
        if ts_ms is not None and ts_ms > transaction.ts_ms:
            # END's time: the commit's, which MariaDB gives the GTID event (Debezium takes the XID's),
            # or a later statement's where a GTID event carries an earlier time
            transaction.ts_ms = ts_ms
        transaction.total += 1
        order = transaction.per_table[table] = transaction.per_table.get(table, 0) + 1
        return begin, {"id": transaction.id, "total_order": transaction.total, "data_collection_order": order}

    def ended(self) -> list[Record]:
        """The records that close the open transaction: its BEGIN if no change wrote it, and END."""
        transaction, self._open = self._open, None
        if transaction is None or transaction.schema_change:
            return []
        records = [] if transaction.begun else [_begin(transaction)]
        collections = [{"data_collection": name, "event_count": transaction.per_table[name]}
                       for name in java_hash_map_order(list(transaction.per_table))]
        records.append(_record(transaction, END, transaction.total, collections))
        return records


def _begin(transaction: _Transaction) -> Record:
    return _record(transaction, BEGIN, None, None)


def _record(transaction: _Transaction, status: str, count: int | None, collections: list | None) -> Record:
    return {"key": {"id": transaction.id},
            "value": {"status": status, "id": transaction.id, "event_count": count,
                      "data_collections": collections, "ts_ms": transaction.ts_ms}}


# --- the order of Debezium's data_collections ------------------------------------------------
# Debezium counts a transaction's events per table in a java.util.HashMap and writes END's
# data_collections in its iteration order: by bucket (the key's String.hashCode, spread, masked
# by the table's capacity), and in insertion order inside a bucket (kept by resizes). A bucket
# of 8 or more keys (a tree bin) is not modelled: it needs 8 tables whose hashes collide.

_INITIAL_CAPACITY = 16
_LOAD_FACTOR = 0.75


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` (over UTF-16 code units), as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _spread(hash_code: int) -> int:
    """HashMap.hash(): the high half folded into the low half."""
    unsigned = hash_code & 0xFFFFFFFF
    return unsigned ^ (unsigned >> 16)


def java_hash_map_order(keys: list[str]) -> list[str]:
    """`keys` (distinct, in insertion order) in the iteration order of a java.util.HashMap
    they were put into one by one."""
    capacity = _INITIAL_CAPACITY
    while len(keys) > capacity * _LOAD_FACTOR:
        capacity *= 2
    positions = {key: index for index, key in enumerate(keys)}
    return sorted(keys, key=lambda key: (_spread(java_string_hash(key)) & (capacity - 1), positions[key]))
