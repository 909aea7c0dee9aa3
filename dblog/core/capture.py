"""The engine's state machine: binlog events and chunk reads in, change events out.

`ChangeCapture` is sans-IO. The loop (`dblog.runtime.engine`) asks it what to read next
(`next_read`), performs the read, hands the result back (`max_key_read`, `chunk_read` with a
`ChunkResult`, `read_refused`, `table_failed`), feeds it every binlog event (`on_event`), says
how long a window waited when an event closed it (`window_waited`: the next chunks grow while
windows wait, see `next_chunk_size`), writes what it returns to the sink, and commits
`checkpoint()` once the sink holds everything returned before it.

Every rule of the algorithm lives here or in `window` (docs/algorithm.md): when a read may be
made, what a window drops, which DDL discards a window or restarts a table, which tables a
rename or a stop-snapshot concerns, where a snapshot row says it was read.

Phases (`Phase`): STREAMING (no read out, no window open), READING (`next_read` handed out a
read; its answer is the only legal input: reading the chunk *is* the pause of the binlog) and
WINDOW_OPEN (a chunk's rows wait in the window for the binlog to pass its high watermark). A
call that is illegal in the current phase raises.

A checkpoint exists only between transactions with no window open, so it is always a
consistent cut: every transaction up to `position` fully emitted, every chunk up to
`last_key` emitted. After a crash the engine restarts from it: the binlog is read again from
`position` and the current chunk is read again, which re-emits some events (at-least-once)
but in an order whose replay still ends at the source's state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from dblog.core.ddl import DdlChange, classify_ddl, table_drops
from dblog.core.events import (
    BinlogEvent,
    Heartbeat,
    Key,
    Notification,
    Row,
    RowChange,
    SchemaChange,
    SourceInfo,
    StagedSnapshot,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.visibility import BinlogCoordinate
from dblog.core.window import KeyIdentity, StagedWindow, Watermarks, Window, identity_token, same_key

Emission = RowChange | Notification | SchemaChange | StagedSnapshot


@dataclass(frozen=True)
class MaxKeyRead:
    """Capture the maximum key of a table whose snapshot starts now. Like a chunk's SELECT, it
    must see every commit the loop has consumed (`position`, `must_see`): a new largest key
    committed before it but not yet visible would lie above the maximum key and behind the
    stream, and never be emitted."""

    snapshot: TableSnapshot
    position: GtidSet | None = None
    must_see: BinlogCoordinate | None = None
    # A table of the startup snapshot read with Debezium's markers: the tables queued after it
    # in that snapshot, not started. Whether its last row is the snapshot's `last` depends on
    # whether they have rows, so the loop also says how many of them, from the first, have none
    # (`max_key_read(..., empty_after=)`). Read at the same point as the max key (after the
    # same visibility wait), so any row they get later is streamed: they are done (EMPTY) at once.
    later: tuple[TableSnapshot, ...] = ()


@dataclass(frozen=True)
class ChunkRead:
    """Read up to `limit` rows with `after_key < key <= max_key`, in key order, and stop early
    once the rows read hold `max_bytes` (None: no byte bound); hand back how many bytes the
    rows took and whether the byte bound cut the chunk short."""

    snapshot: TableSnapshot
    after_key: Key | None
    max_key: Key
    limit: int
    max_bytes: int | None = None
    position: GtidSet | None = None  # what the loop has consumed: the GTID low watermark
    must_see: BinlogCoordinate | None = None  # the SELECT must see the binlog up to here


@dataclass(frozen=True)
class StagedRead:
    """Read rows with `after_key < key <= max_key` elsewhere (`snapshot.distributed`: Spark
    tasks), as many key ranges as one window takes, into staging files outside dblog. Unlike a
    chunk, the binlog goes on being read while it runs: the loop opens its window at once
    (`staged_read_started`, low watermark `position`: the read starts once the server shows all
    of it, `must_see`), keeps feeding events, and hands the outcome in when the read has ended
    (`staged_read_ended`)."""

    snapshot: TableSnapshot
    after_key: Key | None
    max_key: Key
    position: GtidSet | None = None
    must_see: BinlogCoordinate | None = None


@dataclass(frozen=True)
class StagedResult:
    """How a `StagedRead` ended. `staged`: where its rows are (the sink's handle); `rows` and
    `ranges`: how many it staged; `last_key`: the upper end of its last range, where the
    table's next read starts; `table_done`: its last range ended at the read's max key;
    `high`: GTID mode, the server's executed set read after every range was read."""

    staged: Any
    rows: int
    ranges: int
    last_key: Key | None
    table_done: bool
    high: GtidSet | None = None

    def __post_init__(self) -> None:
        if not self.table_done and self.last_key is None:
            raise ValueError("a read that did not reach the max key says where the next one starts")


def chunk_row_limit(chunk_size: int, chunk_bytes: int | None, bytes_per_row: float | None) -> int:
    """Rows to ask for so that a chunk of rows the size of the last ones fits `chunk_bytes`.

    The reader's byte bound holds memory regardless; asking for fewer rows only spares it
    reading rows it would then discard (a cut-short result is drained to its end)."""
    if chunk_bytes is None or not bytes_per_row:
        return chunk_size
    return max(1, min(chunk_size, int(chunk_bytes // max(bytes_per_row, 1.0))))  # a row is a byte at least


CHUNK_GROWTH = 4  # a table's next chunk asks for at most 4x the rows of its last one ...
CHUNK_SHRINK = 2  # ... and for at least half of them
MIN_READ_SECONDS = 1e-6  # a read timed at 0 s (a coarse clock) counts as this long


def next_chunk_size(
    last: int, rows_per_second: float, waited_seconds: float,
    chunk_size: int, max_chunk_size: int, max_chunk_seconds: float,
) -> int:
    """Rows a table's next chunk asks for (before its byte bound, `chunk_row_limit`), after a
    window whose chunk asked for `last` rows, was read at `rows_per_second` and then stayed
    open `waited_seconds` until the binlog reader reached its high watermark.

    A window costs its read, size / rate, plus its wait, so the snapshot moves at
    size / (size / rate + wait). A quiet database closes windows at once; a reader W seconds
    behind the server keeps each one open about W seconds, and fixed chunks then crawl at
    chunk_size / W rows/s. Asking for rate x wait rows makes the read last as long as the
    wait was: at least half the quiet rate. More would gain at most the other half, and
    lengthen the pause of streaming that every read is.

    Bounds: never fewer than `chunk_size` (a quiet table's chunks stay at chunk_size), never
    more than `max_chunk_size` rows nor than `rate x max_chunk_seconds` (how long one read may pause
    streaming; both apply at once, so a read that got slower shrinks the next one at once).
    Smoothing: at most `CHUNK_GROWTH` times the last size, and, when waits are short, down by
    at most `CHUNK_SHRINK` per window: under lag one short window (the load paused) would
    otherwise drop to `chunk_size` and cost several long windows to regrow, while a chunk
    larger than needed costs only a pause within the bound.

    Where waits come from: nothing of the binlog is read during a chunk read, so a window
    waits for the backlog it started with plus what the server wrote during the read. If the
    reader consumes the binlog s times as fast as the server writes it, waits settle at
    read / (s - 1) whatever the size: for s >= 2 they stay below the reads and chunks shrink
    back to `chunk_size`; when the reader can barely keep up or falls behind (s <= 1, a
    backlog of seconds: the case this is for), the size alone decides the rate, and chunks
    grow to their cap. In between (1 < s < 2) chunks also grow, and in that model gain no
    rate while the lag becomes about read / (s - 1): `max_chunk_seconds` bounds that cost
    (measured, fewer windows still paid: each one also costs watermark queries and the
    stream's own latency, which the model leaves out)."""
    wanted = min(max(rows_per_second * waited_seconds, last / CHUNK_SHRINK), last * CHUNK_GROWTH)
    ceiling = min(max_chunk_size, rows_per_second * max_chunk_seconds)
    return max(chunk_size, int(min(wanted, ceiling)))


@dataclass(frozen=True)
class ChunkResult:
    """What a chunk read gives back (`ChangeCapture.chunk_read`).

    `rows`: (primary key, row) pairs in paging order, read between the two `watermarks`.
    `last_key`: the paging key of the last row when the table is paged by a surrogate key
    (default: its primary key). `identity` / `paging_identity` map a primary / paging key to
    what the server's equality sees (`TableSchema.identity_of`: collation-aware; default: the
    key itself). `bytes_read`: what the rows took (sizes the next chunk). `cut_short`: the
    chunk ended before the read's limit for another reason than the table's end (its byte
    bound, or a part of a parallel read that may not have reached the next), so the table goes
    on. `read_seconds`: how long the read paused the binlog (watermarks and SELECTs), which
    with the window's wait sizes the table's next chunks (None: not timed, no change)."""

    rows: list[tuple[Key, Row]]
    watermarks: Watermarks
    last_key: Key | None = None
    identity: KeyIdentity = same_key
    paging_identity: KeyIdentity | None = None
    bytes_read: int = 0
    cut_short: bool = False
    read_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.cut_short and not self.rows:
            raise ValueError("a chunk cut short holds at least one row: the next one starts after it")
        if self.read_seconds is not None and self.read_seconds < 0:
            raise ValueError("read_seconds cannot be negative")


@dataclass
class OpenChunk:
    """The chunk whose window is open: its read, the window holding its rows, and where the
    table goes on once the window closes."""

    read: ChunkRead
    window: Window
    last_key: Key | None  # paging key of its last row (None: no rows)
    cut_short: bool
    paging_identity: KeyIdentity


@dataclass
class OpenStagedRead:
    """A read made elsewhere whose window is open: the touched keys, and the read's outcome
    once it is in. `log_closed`: the binlog reached the close marker (signal watermarks)
    before the outcome: no event may be read until it is in (later ones must come after the
    staged rows)."""

    read: StagedRead
    window: StagedWindow
    result: StagedResult | None = None
    log_closed: bool = False


class Phase(Enum):
    STREAMING = "streaming"  # no read out, no window open
    READING = "reading"  # a read handed out by next_read, not answered yet
    WINDOW_OPEN = "window open"  # a chunk's rows wait for the binlog to pass its high watermark


class IllegalCall(RuntimeError):
    """A call the capture's current phase does not allow: a bug in the loop driving it."""


@dataclass(frozen=True)
class Checkpoint:
    position: GtidSet
    progress: dict[str, Any]
    # Where a restarted reader starts, when before `position`: the source holds prepared XA
    # transactions it must read again (`TransactionEnd.resume`). None: at `position`.
    resume: GtidSet | None = None


# DDL after which rows already read from a table no longer have its shape (or its key): the
# table's snapshot starts again. A dropped or renamed table restarts too: its next read finds
# no table (UNKNOWN_SCHEMA), or, after CREATE OR REPLACE, the new one.
RESHAPING_DDL = frozenset({"add_column", "drop_column", "modify_column", "primary_key", "other", "drop_table",
                           "rename_table"})


def initial_marker(first_table: bool, last_table: bool, first_row: bool, last_row: bool) -> str:
    """`source.snapshot` of a row of Debezium's initial snapshot (its `SnapshotRecord`), as
    Debezium 3.6 marks it: the last row of the last table `last`, the first row of the first
    table `first`, a table's last row `last_in_data_collection`, its first row
    `first_in_data_collection`, any other `true` (a table's only row is its last)."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"


def table_scan_completed(table: TableId, status: str, rows_scanned: int = 0, reason: str | None = None) -> Notification:
    """Debezium's TABLE_SCAN_COMPLETED for one table."""
    data: dict[str, Any] = {
        "data_collection": str(table),
        "scanned_collection": str(table),
        "total_rows_scanned": rows_scanned,
        "status": status,
    }
    if reason is not None:
        data["reason"] = reason
    return Notification("TABLE_SCAN_COMPLETED", data)


class ChangeCapture:
    """`chunk_size` rows per chunk, growing up to `max_chunk_size` rows (default: no growth)
    and `max_chunk_seconds` of reading while windows wait for a lagging binlog reader
    (`next_chunk_size`); every chunk also ends at `chunk_bytes`. The loop times its reads
    (`ChunkResult.read_seconds`) and the waits of windows the binlog closed (`window_waited`):
    no clock in here. `captures` says which tables are captured (a table renamed to a captured
    name is snapshotted under it)."""

    def __init__(
        self, position: GtidSet, progress: SnapshotProgress, chunk_size: int, chunk_bytes: int | None = None,
        max_chunk_size: int | None = None, max_chunk_seconds: float = 0.5,
        captures: Callable[[TableId], bool] = lambda table: True, distributed: bool = False,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if chunk_bytes is not None and chunk_bytes < 1:
            raise ValueError("chunk_bytes must be at least 1")
        if max_chunk_size is not None and max_chunk_size < chunk_size:
            raise ValueError("max_chunk_size must be at least chunk_size")
        if not max_chunk_seconds > 0:
            raise ValueError("max_chunk_seconds must be positive")
        self.position = position
        self.resume_position: GtidSet | None = None  # see Checkpoint.resume
        # Where the last storage-engine commit the loop consumed ends; at a start, the engine
        # sets the binlog's end read right after `position` (`ServerSession.binlog_end`).
        self.must_see: BinlogCoordinate | None = None
        self.progress = progress
        for entry in progress.queue:  # restored from a checkpoint: no read elsewhere is under way
            entry.window_rows = 0
        self.chunk_size = chunk_size
        self.chunk_bytes = chunk_bytes
        self.max_chunk_size = chunk_size if max_chunk_size is None else max_chunk_size
        self.max_chunk_seconds = max_chunk_seconds
        self.captures = captures
        self.distributed = distributed  # started tables are read by StagedReads, not chunks
        self._pending: MaxKeyRead | ChunkRead | StagedRead | None = None  # handed out by next_read, not answered
        self._cancelled: MaxKeyRead | ChunkRead | StagedRead | None = None  # a read out when its table stopped
        self._open: OpenChunk | OpenStagedRead | None = None
        self._transaction: Gtid | None = None
        # The binlog position of the last event read, and the server that logged it: a snapshot
        # row is as new as that (Debezium's incremental snapshot rows say the same).
        self._binlog_file: str | None = None
        self._binlog_pos: int | None = None
        self._binlog_server_id: int | None = None
        # Per table, from its last chunk: bytes per row, rows per second read, and the rows its
        # next chunk asks for before the byte bound (absent: chunk_size). Not in the offsets: a
        # restarted engine starts again at chunk_size and regrows within a few windows.
        self._bytes_per_row: dict[TableId, float] = {}
        self._rows_per_second: dict[TableId, float] = {}
        self._chunk_rows: dict[TableId, int] = {}
        self._unmeasured: TableId | None = None  # the binlog closed this table's window; wait not known yet
        # A read the server refused (`read_refused`): no read until the loop has consumed what
        # the server had executed then (the DDL that broke the query, if any) ...
        self._reads_held_until: GtidSet | None = None
        # ... and the refused table with the count of DDL consumed then: refused again with no
        # DDL in between, the refusal is the query's own fault.
        self._refused: tuple[TableId, int] | None = None
        self._schema_changes = 0
        # Tables read whole ahead of the stream (`read_whole`): their changes inside the set the
        # read saw are in its rows already (`SnapshotProgress.read_ahead`, parsed).
        self._read_ahead: dict[TableId, GtidSet] = {
            TableId.parse(name): GtidSet.parse(seen, flavor=position.flavor)
            for name, seen in progress.read_ahead.items()}
        # Told (table, rows the chunk read, rows the window emitted) as each window closes: metrics.
        self.on_window_closed: Callable[[TableId, int, int], None] | None = None

    @property
    def phase(self) -> Phase:
        if self._open is not None:
            return Phase.WINDOW_OPEN
        if self._pending is not None:
            return Phase.READING
        return Phase.STREAMING

    @property
    def window(self) -> Window | StagedWindow | None:
        """The open window (None when none is)."""
        return self._open.window if self._open is not None else None

    @property
    def staged_read(self) -> StagedRead | None:
        """The read made elsewhere whose window is open (None when none is: a read whose
        window was discarded, e.g. by DDL, is no longer wanted)."""
        return self._open.read if isinstance(self._open, OpenStagedRead) else None

    @property
    def awaits_staged_result(self) -> bool:
        """The binlog closed the open window before its read's outcome was handed in: the loop
        waits for it (`staged_read_ended`) before reading another event."""
        return isinstance(self._open, OpenStagedRead) and self._open.log_closed

    # --- what to read next ------------------------------------------------------------------

    def next_read(self) -> MaxKeyRead | ChunkRead | StagedRead | None:
        """The read to make now, if any: only between transactions, with no window open and
        the snapshot not paused. Asked again before it is answered, the same read."""
        if self._pending is not None:
            return self._pending
        if self._open is not None or self._transaction is not None:
            return None
        current = self.progress.current
        if current is not None and not current.blocking and any(entry.blocking for entry in self.progress.queue):
            self.progress.blocking_first()  # a blocking read pauses the stream before the next chunk
            current = self.progress.current
        if current is None or self.progress.paused:
            return None
        if self._reads_held_until is not None:
            if not self._reads_held_until.issubset(self.position):
                return None
            self._reads_held_until = None
        if not current.started:
            later = tuple(entry for entry in self.progress.queue[1:]
                          if entry.initial_order is not None and not entry.started)
            self._pending = MaxKeyRead(current, self.position, self.must_see,
                                       later if current.initial_order is not None else ())
        elif self.distributed and not current.blocking:  # (a blocking read pauses the stream: read here)
            self._pending = StagedRead(current, current.last_key, current.max_key, self.position, self.must_see)
        else:
            rows = self._chunk_rows.get(current.table, self.chunk_size)
            limit = chunk_row_limit(rows, self.chunk_bytes, self._bytes_per_row.get(current.table))
            self._pending = ChunkRead(current, current.last_key, current.max_key, limit, self.chunk_bytes,
                                      self.position, self.must_see)
        return self._pending

    def max_key_read(self, read: MaxKeyRead, max_key: Key | None, empty_after: int = 0) -> list[Emission]:
        """`max_key`: the table's largest key (None: no rows). `empty_after`: how many of
        `read.later`, from the first, have no row either (they are done at once)."""
        if not self._answer(read):
            return []
        snapshot = read.snapshot
        self._refused = None
        out = self._empty_later(read, empty_after)
        if max_key is None:
            return out + self._finish_table("EMPTY")
        snapshot.started = True
        snapshot.max_key = max_key
        self._chunk_rows.pop(snapshot.table, None)  # a new scan starts at chunk_size
        self._rows_per_second.pop(snapshot.table, None)
        return out

    def _empty_later(self, read: MaxKeyRead, empty_after: int) -> list[Emission]:
        """The first `empty_after` tables of `read.later` have no row: done (EMPTY) at once."""
        if not empty_after:
            return []
        empty = read.later[:empty_after]
        self.progress.queue = [entry for entry in self.progress.queue if all(entry is not e for e in empty)]
        self.progress.completed_tables.extend(str(entry.table) for entry in empty)
        return [table_scan_completed(entry.table, "EMPTY") for entry in empty]

    def table_failed(self, read: MaxKeyRead | ChunkRead, status: str, reason: str | None = None) -> list[Emission]:
        """The table cannot be snapshotted (no key, unknown schema, SQL error): skip it; `reason`
        goes into its TABLE_SCAN_COMPLETED notification."""
        if not self._answer(read):
            return []
        return self._finish_table(status, reason)

    def read_refused(self, read: MaxKeyRead | ChunkRead, executed: GtidSet, reason: str) -> list[Emission]:
        """The server refused the read's query (e.g. an unknown column or table). `executed`: the
        server's executed GTID set, read after the refusal.

        The query names the columns of the schema cached when the loop consumed the last DDL;
        DDL run since (DROP/RENAME/CHANGE COLUMN, RENAME/DROP TABLE) breaks it before the loop
        sees that DDL. So if the server executed transactions the loop has not consumed, no
        read is made until it has: their DDL reloads the schema and restarts or ends the table
        (a chunk is never read with another schema than the one its rows are decoded with), and
        the read is made again. Refused again with no DDL in between, the table fails
        (SQL_EXCEPTION, `reason`): the query itself is wrong (e.g. a filter naming a dropped
        column)."""
        if not self._answer(read):
            return []
        return self._refused_read(read.snapshot.table, executed, reason)

    def _refused_read(self, table: TableId, executed: GtidSet, reason: str) -> list[Emission]:
        refused = (table, self._schema_changes)
        if self._refused != refused and not executed.issubset(self.position):
            self._refused = refused
            self._reads_held_until = executed
            return []
        self._refused = None
        return self._finish_table("SQL_EXCEPTION", reason)

    def chunk_read(self, read: ChunkRead, result: ChunkResult) -> list[Emission]:
        """The chunk was read between the two watermarks: open its window (closed at once when
        the loop has already consumed the high watermark)."""
        if not self._answer(read):
            return []
        rows = result.rows
        table = read.snapshot.table
        self._refused = None
        if rows and result.bytes_read:
            self._bytes_per_row[table] = result.bytes_read / len(rows)
        if rows and result.read_seconds is not None:
            self._rows_per_second[table] = len(rows) / max(result.read_seconds, MIN_READ_SECONDS)
        self._unmeasured = None
        window = Window(table, rows, result.watermarks, result.identity)
        last_key = result.last_key if result.last_key is not None else (rows[-1][0] if rows else None)
        self._open = OpenChunk(read, window, last_key, result.cut_short,
                               result.paging_identity or result.identity)
        # A blocking read's rows go out at once: the stream waits at `position` until the read
        # is done, and everything it logged since `position` comes after them.
        if self._transaction is None and (read.snapshot.blocking or window.reached(self.position)):
            out = self._close_window()
            self.window_waited(0.0)  # no wait at all
            return out
        return []

    def read_whole(self, read: MaxKeyRead, rows: list[tuple[Key, Row]], seen: GtidSet,
                   empty_after: int = 0) -> list[Emission]:
        """The table of `read` (one without a key to page by) was read whole in one consistent
        snapshot that saw exactly the GTID set `seen` (at or past `position`): its rows go out
        now as snapshot reads and the table is done. The stream has not read the transactions
        of `seen` past `position` yet: their changes of this table are in these rows, so they
        are dropped when the stream reads them (`read_ahead`, kept in the offsets); changes
        after `seen` are emitted as usual. No window: the read is exact, nothing to reconcile.
        `empty_after`: as for `max_key_read`."""
        if not self._answer(read):
            return []
        snapshot = read.snapshot
        self._refused = None
        empty = self._empty_later(read, empty_after)
        source = self._snapshot_source()
        out: list[Emission] = [RowChange(snapshot.table, "r", key, None, row, source) for key, row in rows]
        if snapshot.initial_order is not None and out:
            self._mark_initial(out, snapshot, True)
        self.read_ahead(snapshot.table, seen)
        snapshot.rows_scanned += len(rows)
        snapshot.rows_emitted += len(out)
        snapshot.chunks += 1
        return empty + out + self._finish_table("SUCCEEDED")

    def read_ahead(self, table: TableId, seen: GtidSet) -> None:
        """`table`'s rows are emitted as of the GTID set `seen`, ahead of the stream: drop the
        stream's changes of `table` inside `seen` (they are in those rows) until it has passed
        it. An earlier set given for the table is kept: rows emitted as of it (before a restart
        read the rest as of a later one) miss the changes after it, which must be streamed."""
        if table not in self._read_ahead and not seen.issubset(self.position):
            self._read_ahead[table] = seen
            self.progress.read_ahead[str(table)] = str(seen)

    def staged_read_started(self, read: StagedRead, watermarks: Watermarks, identity: KeyIdentity = same_key) -> None:
        """The read made elsewhere starts now: its window opens, before any of its ranges is
        read. GTID `watermarks` have no high watermark yet (`staged_read_ended` brings it);
        `identity` maps a key of the table to what the server's equality sees."""
        if self._answer(read):
            self._open = OpenStagedRead(read, StagedWindow(read.snapshot.table, watermarks, identity))
            read.snapshot.window_rows = 0

    def staged_read_progress(self, read: StagedRead, rows: int) -> None:
        """`rows` rows of the open window's ranges are staged so far (`dblog status`)."""
        if self.staged_read is read:
            read.snapshot.window_rows = rows

    def staged_read_ended(self, read: StagedRead, result: StagedResult) -> list[Emission]:
        """The read made elsewhere ended: its window closes once the binlog passes its high
        watermark (at once if it already has). Nothing happens for a read whose window was
        discarded meanwhile (`staged_read` is no longer it): its rows are not wanted."""
        chunk = self._open
        if not isinstance(chunk, OpenStagedRead) or chunk.read is not read:
            return []
        chunk.window.read_ended(result.high)
        chunk.result = result
        self._refused = None
        if chunk.log_closed or (self._transaction is None and chunk.window.reached(self.position)):
            return self._close_window()
        return []

    def staged_read_refused(self, read: StagedRead, executed: GtidSet, reason: str) -> list[Emission]:
        """The server refused a range query of the read made elsewhere: its window is
        discarded, and the table waits for the DDL that broke it or fails, as `read_refused`
        says. Nothing happens for a read whose window was discarded meanwhile."""
        if self.staged_read is not read:
            return []
        self.discard_window()
        return self._refused_read(read.snapshot.table, executed, reason)

    def window_waited(self, seconds: float) -> None:
        """The window the binlog closed last stayed open `seconds` after its chunk was read
        (the loop sees `window` turn None after an `on_event`): size the table's next chunk.
        Ignored when no window closed since the last report (e.g. it was discarded)."""
        if seconds < 0:
            raise ValueError("a window cannot wait a negative time")
        table, self._unmeasured = self._unmeasured, None
        rate = self._rows_per_second.get(table) if table is not None else None
        if rate is None:
            return
        self._chunk_rows[table] = next_chunk_size(
            self._chunk_rows.get(table, self.chunk_size), rate, seconds,
            self.chunk_size, self.max_chunk_size, self.max_chunk_seconds)

    def discard_window(self) -> None:
        """Forget the open window; its chunk is read again (e.g. after DDL on its table)."""
        if isinstance(self._open, OpenStagedRead):
            self._open.read.snapshot.window_rows = 0  # nothing is staged for it any more
        self._open = None

    # --- the binlog ----------------------------------------------------------------------

    def on_event(self, event: BinlogEvent) -> list[Emission]:
        if self._pending is not None:
            raise IllegalCall(f"a binlog event arrived while {type(self._pending).__name__} of "
                              f"{self._pending.snapshot.table} is out: the loop answers a read before reading on")
        if self.awaits_staged_result:
            raise IllegalCall("a binlog event arrived after the close marker of a read made elsewhere, before its "
                              "outcome: the loop hands it in (staged_read_ended) before reading on")
        out: list[Emission] = []
        window = self._open.window if self._open is not None else None
        if isinstance(event, RowChange):
            source = event.source
            self._binlog_file, self._binlog_pos = source.file, source.pos
            if source.server_id is not None:
                self._binlog_server_id = source.server_id
            # Signal-table rows pass through too: the loop routes them to the signal channel.
            if window is not None and window.observe(event):
                out.extend(self._close_window())
            if not (self._read_ahead and event.table in self._read_ahead
                    and self._transaction in self._read_ahead[event.table]):
                out.append(event)
        elif isinstance(event, TransactionStart):
            if self._transaction is not None:
                # The source resumes a transaction cut by a lost connection where it was cut;
                # a second Start would mean part of it reached the sink twice.
                raise ValueError(f"transaction {event.gtid} started while {self._transaction} is open")
            self._note_position(event.file, event.pos)
            if event.server_id is not None:
                self._binlog_server_id = event.server_id
            if window is not None and window.before_transaction(event.gtid):
                out.extend(self._close_window())
            self._transaction = event.gtid
        elif isinstance(event, TransactionEnd):
            self.position = self.position.with_gtid(event.gtid)
            self.resume_position = event.resume
            if event.commit is not None:
                self.must_see = event.commit
            self._transaction = None
            if self._read_ahead:
                self._passed_read_ahead()
            if window is not None and window.reached(self.position):
                out.extend(self._close_window())
        elif isinstance(event, SchemaChange):
            out.extend(self._schema_changed(event))
        elif isinstance(event, Heartbeat):
            self._note_position(event.file, event.pos)
            reached = event.reached
            if reached is not None and self._transaction is None and self.position.issubset(reached):
                self.position = reached
        else:
            raise TypeError(f"unexpected binlog event {event!r}")
        return out

    def _passed_read_ahead(self) -> None:
        """Forget the tables read ahead whose read the stream has now passed."""
        for table, seen in list(self._read_ahead.items()):
            if seen.issubset(self.position):
                del self._read_ahead[table]
                self.progress.read_ahead.pop(str(table), None)

    def _note_position(self, file: str | None, pos: int | None) -> None:
        if file is not None and pos is not None:
            self._binlog_file, self._binlog_pos = file, pos

    def _schema_changed(self, event: SchemaChange) -> list[Emission]:
        """DDL: the window's rows lose to it, the tables it reshapes are read again, a table
        renamed to a captured name is read under it; then the event itself (the loop hands it
        to the sink, whose re-reads queue behind these)."""
        self._schema_changes += 1
        ddl = classify_ddl(event.sql, event.db)
        out: list[Emission] = []
        if ddl.kind == "drop_database":
            # It names no table: its tables being read or queued end as DROP TABLE ends them.
            for drop in table_drops(ddl, [entry.table for entry in self.progress.queue]):
                out.extend(self._table_ddl(drop, event))
        else:
            out.extend(self._table_ddl(ddl, event))
        out.append(event)
        return out

    def _table_ddl(self, ddl: DdlChange, event: SchemaChange) -> list[Emission]:
        """What DDL naming its tables (or not understood) does to the window and the snapshot."""
        # Never mix schemas in one chunk (its rows were read with the old schema), nor emit
        # rows a TRUNCATE or DROP removed: the DDL wins like a row change. The tables it names,
        # not its default database (`USE other; TRUNCATE shop.orders`); a statement that names
        # none (not understood) may touch any.
        if self._open is not None and (not ddl.tables or self._open.window.table in ddl.tables):
            self.discard_window()
        out: list[Emission] = []
        if ddl.kind in RESHAPING_DDL:
            reason = f"{ddl.kind.replace('_', ' ')}: {event.sql[:200]}"
            for table in ddl.tables:
                out.extend(self.restart_table(table, reason))
        if ddl.renamed:
            out.extend(self._snapshot_renamed(ddl, event))
        return out

    def _snapshot_renamed(self, ddl: DdlChange, event: SchemaChange) -> list[Emission]:
        """A table renamed to a captured name keeps its rows without row events: the output moves
        what it emitted under the old name (docs/output.md), so the new name needs a snapshot
        only where that is not all of it: the old name was not captured, or its snapshot was
        under way or queued (restarted above; its old name is now gone)."""
        requests = []
        for old, new in ddl.renamed:
            if not self.captures(new):
                continue
            reads = [entry for entry in self.progress.queue if entry.table == old]
            if not self.captures(old):
                requests.append(TableSnapshot(new))
            requests += [TableSnapshot(new, condition=entry.condition, surrogate_key=entry.surrogate_key)
                         for entry in reads]
        return self.request_snapshot(requests, f"rename-{event.gtid}") if requests else []

    # --- control --------------------------------------------------------------------------

    def request_snapshot(self, tables: list[TableSnapshot], snapshot_id: str | None = None) -> list[Emission]:
        """Queue a read of each table; every request gets a notification of its fate: STARTED
        for the tables queued (also behind a read of the same table already under way: rows it
        read before may be what the request wants read again), ALREADY_QUEUED for a table
        queued and not started with the same condition and surrogate key (that read starts
        later and covers this one)."""
        was_idle = self.progress.current is None
        added, already = self.progress.enqueue(tables)
        out: list[Emission] = []
        if added:
            if was_idle:
                self.progress.snapshot_id = snapshot_id
                self.progress.completed_tables = []
            data: dict[str, Any] = {"data_collections": [str(entry.table) for entry in added]}
            if snapshot_id is not None:
                data["request"] = snapshot_id
            out.append(Notification("STARTED", data))
        for entry in already:
            data = {"data_collection": str(entry.table), "additional_condition": entry.condition,
                    "surrogate_key": entry.surrogate_key,
                    "reason": "a read of this table with the same condition and surrogate key is queued "
                              "and has not started: it covers this request"}
            if snapshot_id is not None:
                data["request"] = snapshot_id
            out.append(Notification("ALREADY_QUEUED", data))
        return out

    @staticmethod
    def skipped(tables: list[TableId]) -> list[Emission]:
        """A snapshot request named existing tables that are not captured: each is reported
        SKIPPED, as Debezium does."""
        return [table_scan_completed(table, "SKIPPED", reason="the table is not captured "
                                                                "(source.include / source.exclude)")
                for table in tables]

    def stop_snapshot(self, patterns: list[str] | tuple[str, ...] | None = None) -> list[Emission]:
        """Stop the reads of the queued tables whose `db.table` a pattern (a regular expression,
        matching the whole name) matches; every read when `patterns` is None. Nothing is emitted
        when none is stopped (the signal handling answers that)."""
        queued = {entry.table for entry in self.progress.queue}
        if patterns is not None:
            compiled = [re.compile(pattern) for pattern in patterns]
            queued = {table for table in queued if any(p.fullmatch(str(table)) for p in compiled)}
        current = self.progress.current
        if current is not None and current.table in queued:
            self._cancel_current_read()
        removed = self.progress.remove(queued)
        if not removed:
            return []
        for entry in removed:
            self._read_ahead_cut_short(entry)
        return [Notification("ABORTED", {"data_collections": [str(entry.table) for entry in removed]})]

    def restart_table(self, table: TableId, reason: str) -> list[Emission]:
        """Read `table` again from its first key if it is the table being snapshotted (its
        schema changed: rows already emitted have the old shape, and its key may be another).
        Queued tables need nothing: their max key is captured when they start."""
        current = self.progress.current
        if current is None or current.table != table or not current.started:
            return []
        self._cancel_current_read()
        current.started, current.max_key, current.last_key = False, None, None
        current.rows_scanned = current.chunks = current.rows_emitted = 0
        return [Notification("TABLE_SCAN_RESTARTED", {"data_collection": str(table), "reason": reason})]

    def surrogate_keys(self) -> list[tuple[TableId, str]]:
        """(table, column) of every read under way that pages by a signal's surrogate key: after
        a restart a keyless table is keyed by it again, for the binlog's changes as well, so
        that its window can drop what the log touched."""
        return [(entry.table, entry.surrogate_key) for entry in self.progress.queue
                if entry.surrogate_key and entry.started]

    def pause(self) -> list[Emission]:
        """PAUSED; nothing when already paused (the signal handling answers that)."""
        if self.progress.paused:
            return []
        self.progress.paused = True
        status = self._status()
        if self.progress.current is None:  # still a change: it holds the next snapshot requested
            status["message"] = "no snapshot is running: the next one requested waits for resume-snapshot"
        return [Notification("PAUSED", status)]

    def resume(self) -> list[Emission]:
        """RESUMED; nothing when not paused (the signal handling answers that)."""
        if not self.progress.paused:
            return []
        self.progress.paused = False
        return [Notification("RESUMED", self._status())]

    def checkpoint(self) -> Checkpoint | None:
        """A consistent cut, or None. A read made elsewhere may run for minutes: with its
        window open a checkpoint still exists (the table's progress stands before the window,
        whose rows are not emitted: a restart reads its ranges again), so streamed changes keep
        being committed."""
        if self._pending is not None or self._transaction is not None:
            return None
        if self._open is not None and not (isinstance(self._open, OpenStagedRead) and not self._open.log_closed):
            return None
        return Checkpoint(self.position, self.progress.to_json(), self.resume_position)

    # --- internals ------------------------------------------------------------------------

    def _answer(self, read: MaxKeyRead | ChunkRead) -> bool:
        """Take the answer to the read out; False for the answer to a read cancelled while it
        was out (its table stopped or restarted): it is dropped."""
        if read is self._pending:
            self._pending = None
            return True
        if read is self._cancelled:
            self._cancelled = None
            return False
        raise IllegalCall(f"an answer to {type(read).__name__} of {read.snapshot.table} in phase "
                          f"{self.phase.value}: answer the read next_read handed out, once")

    def _cancel_current_read(self) -> None:
        """The table being read is stopped or restarted: forget its open window and its read out."""
        self.discard_window()
        if self._pending is not None:
            self._cancelled, self._pending = self._pending, None

    def _close_window(self) -> list[Emission]:
        if isinstance(self._open, OpenStagedRead):
            return self._close_staged_window(self._open)
        chunk = self._open
        assert chunk is not None
        window, read = chunk.window, chunk.read
        snapshot = read.snapshot
        last_key = chunk.last_key
        at_max = last_key is not None and chunk.paging_identity(last_key) == chunk.paging_identity(snapshot.max_key)
        table_done = last_key is None or (window.rows_read < read.limit and not chunk.cut_short) or at_max
        source = self._snapshot_source()
        out: list[Emission] = [RowChange(window.table, "r", key, None, row, source) for key, row in window.close()]
        if snapshot.initial_order is not None and out:
            self._mark_initial(out, snapshot, table_done)
        if self.on_window_closed is not None:
            self.on_window_closed(window.table, window.rows_read, len(out))
        snapshot.rows_scanned += window.rows_read
        snapshot.rows_emitted += len(out)
        snapshot.chunks += 1
        self._open = None
        self._unmeasured = snapshot.table
        if table_done:
            out.extend(self._finish_table("SUCCEEDED"))
        else:
            snapshot.last_key = last_key
            out.append(Notification("IN_PROGRESS", self._status()))
        return out

    def _snapshot_source(self) -> SourceInfo:
        """Where a window's rows say they were read: where the binlog reader was when it closed."""
        return SourceInfo(file=self._binlog_file, pos=self._binlog_pos, server_id=self._binlog_server_id,
                          snapshot=True)

    def _mark_initial(self, rows: list[Emission], snapshot: TableSnapshot, table_done: bool) -> None:
        """Debezium's initial-snapshot markers on a window's rows of a table of the startup
        snapshot: its first table is the first of that snapshot (when empty, no row is `first`,
        as in Debezium), its last table the last one left with rows (the empty ones after it
        are done at its start: `MaxKeyRead.later`); the first row is the table's first emitted,
        the last row the last of the window that ends the table."""
        first_table = snapshot.initial_order == 1
        last_table = not any(entry.initial_order is not None for entry in self.progress.queue[1:])
        last = len(rows) - 1
        # Debezium's initial snapshot is no binlog event: server_id 0 (None here), as it writes
        within = SourceInfo(file=self._binlog_file, pos=self._binlog_pos, snapshot=True, initial_marker="true")
        for index, change in enumerate(rows):
            marker = initial_marker(first_table, last_table, index == 0 and snapshot.rows_emitted == 0,
                                    index == last and table_done)
            assert isinstance(change, RowChange)
            change.source = within if marker == "true" else SourceInfo(
                file=within.file, pos=within.pos, snapshot=True, initial_marker=marker)

    def _close_staged_window(self, staged: OpenStagedRead) -> list[Emission]:
        """The staged rows, less the keys the log touched, as snapshot reads; then the table
        goes on after the window's last range, or is done."""
        result = staged.result
        if result is None:  # the close marker came back before the read's outcome: wait for it
            staged.log_closed = True
            return []
        window, snapshot = staged.window, staged.read.snapshot
        source = self._snapshot_source()
        dropped = frozenset(identity_token(identity) for identity in window.touched)
        out: list[Emission] = [StagedSnapshot(window.table, result.staged, dropped, result.rows, source)]
        snapshot.rows_scanned += result.rows
        snapshot.chunks += result.ranges
        snapshot.window_rows = 0
        self._open = None
        if result.table_done:
            out.extend(self._finish_table("SUCCEEDED"))
        else:
            snapshot.last_key = result.last_key
            out.append(Notification("IN_PROGRESS", self._status()))
        return out

    def _read_ahead_cut_short(self, entry: TableSnapshot) -> None:
        """A blocking read that ends before its last row: the keys it did not read get no row,
        so the stream must not drop their changes (the rows it did emit get some twice)."""
        if entry.blocking and entry.started and str(entry.table) in self.progress.read_ahead:
            self._read_ahead.pop(entry.table, None)
            del self.progress.read_ahead[str(entry.table)]

    def _finish_table(self, status: str, reason: str | None = None) -> list[Emission]:
        if status not in ("SUCCEEDED", "EMPTY"):
            self._read_ahead_cut_short(self.progress.queue[0])
        done = self.progress.finish_current()
        out: list[Emission] = [table_scan_completed(done.table, status, done.rows_scanned, reason)]
        if self.progress.current is None:
            out.append(Notification("COMPLETED", {"data_collections": list(self.progress.completed_tables)}))
        return out

    def _status(self) -> dict[str, Any]:
        current = self.progress.current
        if current is None:
            return {"data_collections": []}
        return {
            "data_collections": [str(entry.table) for entry in self.progress.queue],
            "current_collection_in_progress": str(current.table),
            "maximum_key": _key_text(current.max_key),
            "last_processed_key": _key_text(current.last_key),
            "total_rows_scanned": current.rows_scanned,
        }


def _key_text(key: Key | None) -> str | None:
    return None if key is None else ",".join(str(part) for part in key)
