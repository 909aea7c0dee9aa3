"""Debezium's change records as JSON bytes, assembled from pieces: the Kafka sink's hot path.

The bytes are `orjson.dumps` of the key and value dicts `dblog.sinks.envelope` builds, exactly
(tests/sinks/test_record_bytes.py holds them equal), without building those dicts, and the
`source` block's, for every change: in a streaming burst they cost more than the encoding. The
changes of one rows event share their whole source block but its row number, so the block is
encoded once per event and the number spliced in.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.sinks.envelope import source_block

NO_TRANSACTION = b',"transaction":null'


def transaction_piece(block: dict | None) -> bytes:
    """The value's `transaction` field (Debezium's block, or null), as it follows `source`."""
    return NO_TRANSACTION if block is None else b',"transaction":' + orjson.dumps(block)


OPS = {op: b',"op":"%s"' % op.encode() for op in ("c", "u", "d", "r", "t")}


def envelope_times(ts_ns: int) -> bytes:
    """What closes a value written at `ts_ns` (now): the envelope's times."""
    return b',"ts_ms":%d,"ts_us":%d,"ts_ns":%d}' % (ts_ns // 1_000_000, ts_ns // 1000, ts_ns)


class RecordBytes:
    """One table's records: `key` and `value` of a change that is not a key change."""

    def __init__(self, table: TableId, connector: str, key_columns: tuple[str, ...],
                 encode_key: Callable[[dict], dict] | None) -> None:
        self._table = table
        self._connector = connector
        self._key_columns = key_columns
        self._encode_key = encode_key
        self._event: tuple | None = None  # the source fields of the last block encoded
        self._head = self._tail = b""  # that block, before and after its row number

    def key(self, key: tuple) -> bytes:
        record_key = dict(zip(self._key_columns, key))
        if self._encode_key is not None:
            record_key = self._encode_key(record_key)
        return orjson.dumps(record_key)

    def value(self, change: RowChange, before: dict | None, after: dict | None, transaction: bytes,
              times: bytes, ts_ns: int) -> bytes:
        """The value of `change` with rows `before` / `after` as written (encoded, masked);
        `transaction` and `times` from `transaction_piece` and `envelope_times(ts_ns)`."""
        source = change.source
        event = (source.gtid, source.file, source.pos, source.server_id, source.ts_ms, source.snapshot,
                 source.initial_marker, ts_ns if source.ts_ms is None else None)
        if event != self._event:
            self._encode_source(source, ts_ns)
            self._event = event
        return b"".join((b'{"before":', orjson.dumps(before), b',"after":', orjson.dumps(after), b',"source":',
                         self._head, b"%d" % source.row, self._tail, transaction, OPS[change.op], times))

    def _encode_source(self, source: SourceInfo, ts_ns: int) -> None:
        block = source_block(source, self._table, self._connector, ts_ns)
        block["row"] = 0
        encoded = orjson.dumps(block)
        # Strings are escaped in JSON ("\"" inside them): this run of quotes is the field itself.
        head, found, tail = encoded.rpartition(b',"row":0,')
        if not found:
            raise AssertionError(f"the source block has no row field: {encoded!r}")
        self._head, self._tail = head + b',"row":', b"," + tail
