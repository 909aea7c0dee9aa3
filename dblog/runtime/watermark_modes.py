"""Watermark modes (`snapshot.watermarks`): how a snapshot window's watermarks are taken on the
server, one class per mode behind one small interface, as Debezium's `WatermarkWindowCloser` has
one implementation per strategy.

- `gtid` (`GtidWatermarkMode`): the low watermark is what the loop has consumed; the read waits
  until the server shows all of it, and the high watermark is the server's executed GTID set
  after the read. Writes nothing to the source.
- `insert_insert` (`InsertInsertMode`): an open and a close marker row written to the signal
  table around the read; the window closes when the close row comes back through the binlog.
- `insert_delete` (`InsertDeleteMode`): the open marker row written before the read and deleted
  after it; the window closes when the delete comes back.

A window is opened and closed by whoever reads it: the loop's own chunk reads
(`dblog.runtime.snapshot_reads`) or Spark tasks' reads (`dblog.runtime.distributed_snapshot`),
each through a `WindowServer` of its own. The mode is chosen once from the configuration through
`WATERMARK_MODES`; what the configuration check and the preflight need to know of a mode is
declared on its class.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

from dblog.core.capture import ChunkRead, StagedRead
from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.core.window import GtidWatermarks, SignalWatermarks, Watermarks

__all__ = ["WindowServer", "WatermarkMode", "GtidWatermarkMode", "InsertInsertMode", "InsertDeleteMode",
           "WATERMARK_MODES", "watermark_mode"]

# The marker rows' types, as Debezium writes them.
WINDOW_OPEN, WINDOW_CLOSE = "snapshot-window-open", "snapshot-window-close"


class WindowServer(Protocol):
    """What a mode does on the source server while a window is read."""

    def wait_until_visible(self, read: ChunkRead | StagedRead) -> None:
        """Wait until the server's reads see every transaction the loop consumed before `read`."""

    def executed_gtids(self) -> GtidSet: ...

    def write_signal(self, signal_id: str, signal_type: str) -> None:
        """A marker row in the signal table."""

    def delete_signal(self, signal_id: str) -> None: ...


class WatermarkMode(ABC):
    """One way of opening and closing a snapshot window on the server. `watermarks(read)` names
    the window's watermarks before it opens (the capture may need them first); `open` runs
    before the window's rows are read, `close` after, returning the watermarks in full."""

    name: ClassVar[str]  # its `snapshot.watermarks` value
    # It writes marker rows into the signal table: needs `signals.table`, and these privileges on it.
    writes_signal_rows: ClassVar[bool]
    signal_table_privileges: ClassVar[tuple[str, ...]]
    # The longest id and type it writes into the signal table's columns.
    longest_signal_id: ClassVar[int]
    longest_signal_type: ClassVar[int]
    # Its read waits until the server's reads see its low watermark (docs/algorithm.md,
    # "Visibility"), which dblog cannot tell on MySQL with semi-sync AFTER_SYNC: refused there.
    waits_for_visibility: ClassVar[bool]

    def __init__(self, signal_table: TableId | None) -> None:
        self.signal_table = signal_table

    @abstractmethod
    def watermarks(self, read: ChunkRead | StagedRead) -> Watermarks: ...

    @abstractmethod
    def open(self, watermarks: Watermarks, read: ChunkRead | StagedRead, server: WindowServer) -> None: ...

    @abstractmethod
    def close(self, watermarks: Watermarks, server: WindowServer) -> Watermarks: ...


class GtidWatermarkMode(WatermarkMode):
    name = "gtid"
    writes_signal_rows = False
    signal_table_privileges = ()
    longest_signal_id = 36  # only `dblog signal` writes there: a UUID
    longest_signal_type = len("execute-snapshot")
    waits_for_visibility = True

    def watermarks(self, read: ChunkRead | StagedRead) -> GtidWatermarks:
        return GtidWatermarks(read.position, None)

    def open(self, watermarks: Watermarks, read: ChunkRead | StagedRead, server: WindowServer) -> None:
        # The low watermark is what the loop has consumed: every later transaction is in the
        # window. The read starts once the server shows all of it (docs/algorithm.md,
        # "Visibility"). The reader's own position is always a prefix of the binlog, so a high
        # watermark spanning several server UUIDs needs no re-read.
        server.wait_until_visible(read)

    def close(self, watermarks: GtidWatermarks, server: WindowServer) -> GtidWatermarks:
        return GtidWatermarks(watermarks.low, server.executed_gtids())


class _SignalTableMode(WatermarkMode):
    """Marker rows in the signal table, recognised when they come back through the binlog."""

    writes_signal_rows = True
    longest_signal_id = 38  # a hex UUID and "-close"
    longest_signal_type = len(WINDOW_CLOSE)
    waits_for_visibility = False
    has_close_row: ClassVar[bool]

    def watermarks(self, read: ChunkRead | StagedRead) -> SignalWatermarks:
        window = uuid.uuid4().hex
        return SignalWatermarks(self.signal_table, f"{window}-open", f"{window}-close" if self.has_close_row else None)

    def open(self, watermarks: SignalWatermarks, read: ChunkRead | StagedRead, server: WindowServer) -> None:
        server.write_signal(watermarks.open_id, WINDOW_OPEN)


class InsertInsertMode(_SignalTableMode):
    name = "insert_insert"
    signal_table_privileges = ("INSERT",)
    has_close_row = True

    def close(self, watermarks: SignalWatermarks, server: WindowServer) -> SignalWatermarks:
        server.write_signal(watermarks.close_id, WINDOW_CLOSE)
        return watermarks


class InsertDeleteMode(_SignalTableMode):
    name = "insert_delete"
    signal_table_privileges = ("INSERT", "DELETE")
    has_close_row = False

    def close(self, watermarks: SignalWatermarks, server: WindowServer) -> SignalWatermarks:
        server.delete_signal(watermarks.open_id)
        return watermarks


# `snapshot.watermarks` -> its mode: the one place a mode's name is looked at.
WATERMARK_MODES: dict[str, type[WatermarkMode]] = {
    mode.name: mode for mode in (GtidWatermarkMode, InsertInsertMode, InsertDeleteMode)
}


def watermark_mode(name: str, signal_table: TableId | None = None) -> WatermarkMode:
    """The mode `snapshot.watermarks = name` configures, writing its markers into `signal_table`."""
    return WATERMARK_MODES[name](signal_table)
