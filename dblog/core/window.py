"""The watermark window: how one chunk of rows is merged into the change stream without locks.

Theory of operation (Netflix DBLog, as Debezium's incremental snapshots run it):

A chunk is `SELECT`ed while the binlog keeps moving. Bracket the SELECT with a *low* and a
*high* watermark, two points in the log. Every binlog change before the low watermark is older
than the chunk; every change after the high watermark is newer. Changes in between may or may
not be reflected in the chunk, so for those the log wins: when one touches a key held in the
buffer, that row is dropped from the buffer (the change itself is emitted as usual). When the
reader reaches the high watermark, whatever is left in the buffer is still the newest known
state of those keys and is emitted as snapshot reads (`op=r`), before anything newer.

Two ways to place the watermarks:

* `GtidWatermarks` (read-only): low is the reader's own position when the chunk is read (the
  SELECT waits until the server shows all of it, see `dblog.core.visibility`: the server's
  `@@gtid_binlog_pos` can name commits a SELECT cannot see yet), high the server's executed GTID
  set read after the SELECT. A transaction whose GTID is outside the low set is inside the
  window. The window closes before the first transaction outside the high set, or as soon as
  the reader has consumed every transaction of the high set (so a quiet database never waits
  for a heartbeat).
* `SignalWatermarks` (needs write access, works without GTIDs): the engine writes an "open"
  row into the signal table before the SELECT and a "close" row (`insert_insert`) or deletes
  the open row (`insert_delete`) after it; the window opens and closes when those changes come
  back through the binlog.

Which rows are "the same key" is the server's call: under a case/accent-insensitive or PAD
SPACE collation 'abc', 'ABC' and 'abc ' are one primary-key value. So the buffer is keyed by the
key's *identity* (`TableSchema.identity_of`: string columns replaced by collation sort keys,
computed from weights loaded with the schema, so still no I/O here), and a change drops the
buffered row whose identity equals its key's or its before-key's. Rows keep their exact stored
key, which is what is emitted. The index by identity is built when the first change of the
chunk's table arrives inside the window: a chunk of a quiet table never computes one.

A read made elsewhere (`snapshot.distributed`: Spark tasks read many chunks' key ranges
straight into staging files) leaves no rows here. Its `StagedWindow` records instead the
identity of every key of its table the log touched inside it; the sink brings the staged rows in
except those keys. Its high watermark is known only once the read has ended: until then every
transaction after the low watermark is inside it, and it cannot close.

Everything here is pure: no I/O, no clock. The loop (`dblog.core.capture`) feeds it events.
The contract it serves, its invariants and their tests: docs/algorithm.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Hashable, Iterable

from dblog.core.events import Key, Row, RowChange, TableId
from dblog.core.gtid import Gtid, GtidSet


@dataclass(frozen=True)
class GtidWatermarks:
    low: GtidSet
    high: GtidSet | None  # None: not known yet (a read elsewhere is still under way)


@dataclass(frozen=True)
class SignalWatermarks:
    signal_table: TableId
    open_id: str
    close_id: str | None  # None: insert_delete mode, the window closes when open_id is deleted
    high: ClassVar[None] = None  # no high GTID set: a marker coming back through the binlog closes the window


Watermarks = GtidWatermarks | SignalWatermarks
KeyIdentity = Callable[[Key], Hashable]  # key -> what the server's key equality sees


def same_key(key: Key) -> Key:
    return key


def identity_token(identity: Hashable) -> str:
    """A key identity as text, equal exactly when the identities are: what a staged row and a
    key the log touched are matched by outside Python (the sink's anti-join). Identities are
    tuples of normalized values or collation weights, one type per column, so their repr is
    canonical but for a float's sign of zero, which the server ignores too."""
    if isinstance(identity, tuple):
        identity = tuple(0.0 if part == 0 and isinstance(part, float) else part for part in identity)
    return repr(identity)


class _Bounds:
    """Where a window lies in the log: its watermarks, and whether the transaction being read
    is inside it."""

    def __init__(self, table: TableId, watermarks: Watermarks, identity: KeyIdentity) -> None:
        self.table = table
        self.watermarks = watermarks
        self.identity = identity
        # GTID mode: whether the transaction being read is newer than the low watermark.
        # Signal mode: whether the open marker has come back through the binlog.
        self._inside = False

    # --- GTID mode ------------------------------------------------------------------------

    def before_transaction(self, gtid: Gtid) -> bool:
        """Called at each transaction start. Returns True if the window must close first."""
        if isinstance(self.watermarks, GtidWatermarks):
            high = self.watermarks.high
            if high is not None and gtid not in high:
                return True
            self._inside = gtid not in self.watermarks.low
        return False

    def reached(self, position: GtidSet) -> bool:
        """True once the reader has consumed the whole high watermark."""
        marks = self.watermarks
        return isinstance(marks, GtidWatermarks) and marks.high is not None and marks.high.issubset(position)

    # --- both modes -----------------------------------------------------------------------

    def observe(self, change: RowChange) -> bool:
        """Apply one binlog row change. Returns True if the window must close after it."""
        marks = self.watermarks
        if isinstance(marks, SignalWatermarks) and change.table == marks.signal_table:
            return self._observe_marker(change, marks)
        if self._inside and change.table == self.table:
            self._touched(change)
        return False

    def _touched(self, change: RowChange) -> None:
        raise NotImplementedError

    def _observe_marker(self, change: RowChange, marks: SignalWatermarks) -> bool:
        row = change.after if change.op != "d" else change.before
        marker = (row or {}).get("id")
        if change.op == "c" and marker == marks.open_id:
            self._inside = True
        elif marks.close_id is not None and change.op == "c" and marker == marks.close_id:
            return True
        elif marks.close_id is None and change.op == "d" and marker == marks.open_id:
            return True
        return False


class Window(_Bounds):
    """The buffer of one chunk, from its read until the reader passes the high watermark."""

    def __init__(
        self,
        table: TableId,
        rows: Iterable[tuple[Key, Row]],
        watermarks: Watermarks,
        identity: KeyIdentity = same_key,
    ) -> None:
        if isinstance(watermarks, GtidWatermarks) and watermarks.high is None:
            raise ValueError("a chunk read here has its high watermark")
        super().__init__(table, watermarks, identity)
        # (the row's stored key, row), in read (key) order, until a change may drop one ...
        self._rows: list[tuple[Key, Row]] | None = list(rows)
        # ... then identity -> (key, row), in the same order
        self._index: dict[Hashable, tuple[Key, Row]] | None = None
        self.rows_read = len(self._rows)

    def _touched(self, change: RowChange) -> None:
        buffer = self.buffer
        if buffer:
            buffer.pop(self.identity(change.key), None)
            if change.before_key is not None:
                buffer.pop(self.identity(change.before_key), None)

    @property
    def buffer(self) -> dict[Hashable, tuple[Key, Row]]:
        """The rows still buffered, by key identity (built on first use)."""
        if self._index is None:
            identity = self.identity
            self._index = {identity(key): (key, row) for key, row in self._rows or ()}
            self._rows = None
        return self._index

    def close(self) -> list[tuple[Key, Row]]:
        """The rows still in the buffer, in key order: to be emitted as snapshot reads."""
        if self._index is None:
            rows, self._rows = self._rows or [], []
            return rows
        rows = list(self._index.values())
        self._index.clear()
        return rows


class StagedWindow(_Bounds):
    """The window of a read made elsewhere: the identities of the keys of its table that the
    log touched inside it, from the low watermark until the reader passes the high one. Its
    rows are staged outside dblog; those of these keys are dropped where they are."""

    def __init__(self, table: TableId, watermarks: Watermarks, identity: KeyIdentity = same_key) -> None:
        super().__init__(table, watermarks, identity)
        self.touched: set[Hashable] = set()

    def read_ended(self, high: GtidSet | None) -> None:
        """The read ended; GTID mode: `high` is the server's executed set read after it."""
        if isinstance(self.watermarks, GtidWatermarks):
            if high is None:
                raise ValueError("a GTID window needs its high watermark")
            self.watermarks = GtidWatermarks(self.watermarks.low, high)

    def _touched(self, change: RowChange) -> None:
        self.touched.add(self.identity(change.key))
        if change.before_key is not None:
            self.touched.add(self.identity(change.before_key))
