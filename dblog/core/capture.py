"""The engine's state machine: binlog events and chunk reads in, change events out.

`ChangeCapture` is sans-IO. The loop (`dblog.runtime.engine`) asks it what to read next
(`next_read`), performs the read, hands the result back (`max_key_read`, `chunk_read`, with
how long the read took), feeds it every binlog event (`on_event`), says how long a window
waited when an event closed it (`window_waited`: the next chunks grow while windows wait, see
`next_chunk_size`), writes what it returns to the sink, and commits `checkpoint()` once the
sink holds everything returned before it.

A checkpoint exists only between transactions with no window open, so it is always a
consistent cut: every transaction up to `position` fully emitted, every chunk up to
`last_key` emitted. After a crash the engine restarts from it: the binlog is read again from
`position` and the current chunk is read again, which re-emits some events (at-least-once)
but in an order whose replay still ends at the source's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dblog.core.ddl import classify_ddl
from dblog.core.events import (
    BinlogEvent,
    Heartbeat,
    Key,
    Notification,
    Row,
    RowChange,
    SchemaChange,
    SourceInfo,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.visibility import BinlogCoordinate
from dblog.core.window import KeyIdentity, Watermarks, Window, same_key

Emission = RowChange | Notification | SchemaChange


@dataclass(frozen=True)
class MaxKeyRead:
    """Capture the maximum key of a table whose snapshot starts now. Like a chunk's SELECT, it
    must see every commit the loop has consumed (`position`, `must_see`): a new largest key
    committed before it but not yet visible would lie above the maximum key and behind the
    stream, and never be emitted."""

    snapshot: TableSnapshot
    position: GtidSet | None = None
    must_see: BinlogCoordinate | None = None


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

    Bounds: never fewer than `chunk_size` (quiet tables read as before), never more than
    `max_chunk_size` rows nor than `rate x max_chunk_seconds` (how long one read may pause
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
class Checkpoint:
    position: GtidSet
    progress: dict[str, Any]
    # Where a restarted reader starts, when before `position`: the source holds prepared XA
    # transactions it must read again (`TransactionEnd.resume`). None: at `position`.
    resume: GtidSet | None = None


class ChangeCapture:
    """`chunk_size` rows per chunk, growing up to `max_chunk_size` rows (default: no growth)
    and `max_chunk_seconds` of reading while windows wait for a lagging binlog reader
    (`next_chunk_size`); every chunk also ends at `chunk_bytes`. The loop times its reads
    (`chunk_read(read_seconds=…)`) and the waits of windows the binlog closed
    (`window_waited`): no clock in here."""

    def __init__(
        self, position: GtidSet, progress: SnapshotProgress, chunk_size: int, chunk_bytes: int | None = None,
        max_chunk_size: int | None = None, max_chunk_seconds: float = 0.5,
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
        # sets the binlog's end read right after `position` (`ChunkReader.binlog_end`).
        self.must_see: BinlogCoordinate | None = None
        self.progress = progress
        self.chunk_size = chunk_size
        self.chunk_bytes = chunk_bytes
        self.window: Window | None = None
        self._chunk: ChunkRead | None = None  # the read whose window is open
        self._chunk_last_key: Key | None = None
        self._chunk_cut_short = False  # the open chunk ended early, not at the table's end
        self.max_chunk_size = chunk_size if max_chunk_size is None else max_chunk_size
        self.max_chunk_seconds = max_chunk_seconds
        # Per table, from its last chunk: bytes per row, rows per second read, and the rows its
        # next chunk asks for before the byte bound (absent: chunk_size). Not in the offsets: a
        # restarted engine starts again at chunk_size and regrows within a few windows.
        self._bytes_per_row: dict[TableId, float] = {}
        self._rows_per_second: dict[TableId, float] = {}
        self._chunk_rows: dict[TableId, int] = {}
        self._unmeasured: TableId | None = None  # the binlog closed this table's window; wait not known yet
        self._paging_identity: KeyIdentity = same_key
        self._transaction: Gtid | None = None
        # A read the server refused (`read_refused`): no read until the loop has consumed what
        # the server had executed then (the DDL that broke the query, if any) ...
        self._reads_held_until: GtidSet | None = None
        # ... and the refused table with the count of DDL consumed then: refused again with no
        # DDL in between, the refusal is the query's own fault.
        self._refused: tuple[TableId, int] | None = None
        self._schema_changes = 0

    # --- what to read next ------------------------------------------------------------------

    def next_read(self) -> MaxKeyRead | ChunkRead | None:
        current = self.progress.current
        if current is None or self.progress.paused or self.window is not None or self._transaction is not None:
            return None
        if self._reads_held_until is not None:
            if not self._reads_held_until.issubset(self.position):
                return None
            self._reads_held_until = None
        if not current.started:
            return MaxKeyRead(current, self.position, self.must_see)
        rows = self._chunk_rows.get(current.table, self.chunk_size)
        limit = chunk_row_limit(rows, self.chunk_bytes, self._bytes_per_row.get(current.table))
        return ChunkRead(current, current.last_key, current.max_key, limit, self.chunk_bytes, self.position,
                         self.must_see)

    def max_key_read(self, snapshot: TableSnapshot, max_key: Key | None) -> list[Emission]:
        if snapshot is not self.progress.current:
            return []  # stopped meanwhile
        self._refused = None
        if max_key is None:
            return self._finish_table("EMPTY")
        snapshot.started = True
        snapshot.max_key = max_key
        self._chunk_rows.pop(snapshot.table, None)  # a new scan starts at chunk_size
        self._rows_per_second.pop(snapshot.table, None)
        return []

    def table_failed(self, snapshot: TableSnapshot, status: str, reason: str | None = None) -> list[Emission]:
        """The table cannot be snapshotted (no key, unknown schema, SQL error): skip it; `reason`
        goes into its TABLE_SCAN_COMPLETED notification."""
        if snapshot is not self.progress.current:
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
        snapshot = read.snapshot
        if snapshot is not self.progress.current:
            return []
        refused = (snapshot.table, self._schema_changes)
        if self._refused != refused and not executed.issubset(self.position):
            self._refused = refused
            self._reads_held_until = executed
            return []
        self._refused = None
        return self._finish_table("SQL_EXCEPTION", reason)

    def chunk_read(
        self, read: ChunkRead, rows: list[tuple[Key, Row]], watermarks: Watermarks, last_key: Key | None = None,
        identity: KeyIdentity = same_key, paging_identity: KeyIdentity | None = None,
        bytes_read: int = 0, cut_short: bool = False, read_seconds: float | None = None,
    ) -> list[Emission]:
        """The chunk was read between the two watermarks: open its window.

        `rows` are (primary key, row) pairs in paging order; `last_key` is the paging key of the
        last row when the table is paged by a surrogate key (default: its primary key).
        `identity` / `paging_identity` map a primary / paging key to what the server's equality
        sees (`TableSchema.identity_of`: collation-aware; default: the key itself).
        `bytes_read`: what the rows took (sizes the next chunk); `cut_short`: the chunk ended
        before `read.limit` rows for another reason than the table's end (its byte bound, or a
        part of a parallel read that may not have reached the next), so the table goes on.
        `read_seconds`: how long the read paused the binlog (watermarks and SELECTs), which
        with the window's wait sizes the table's next chunks (None: not timed, no change)."""
        if read.snapshot is not self.progress.current or self.window is not None:
            return []
        if cut_short and not rows:
            raise ValueError("a chunk cut short holds at least one row: the next one starts after it")
        if read_seconds is not None and read_seconds < 0:
            raise ValueError("read_seconds cannot be negative")
        table = read.snapshot.table
        self._refused = None
        if rows and bytes_read:
            self._bytes_per_row[table] = bytes_read / len(rows)
        if rows and read_seconds is not None:
            self._rows_per_second[table] = len(rows) / max(read_seconds, MIN_READ_SECONDS)
        self._unmeasured = None
        self.window = Window(read.snapshot.table, rows, watermarks, identity)
        self._chunk = read
        self._paging_identity = paging_identity or identity
        self._chunk_last_key = last_key if last_key is not None else (rows[-1][0] if rows else None)
        self._chunk_cut_short = cut_short
        if self._transaction is None and self.window.reached(self.position):
            out = self._close_window()
            self.window_waited(0.0)  # no wait at all
            return out
        return []

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
        self.window = None
        self._chunk = None
        self._chunk_last_key = None
        self._chunk_cut_short = False

    # --- the binlog ----------------------------------------------------------------------

    def on_event(self, event: BinlogEvent) -> list[Emission]:
        out: list[Emission] = []
        window = self.window
        if isinstance(event, RowChange):
            # Signal-table rows pass through too: the loop routes them to the signal channel.
            if window is not None and window.observe(event):
                out.extend(self._close_window())
            out.append(event)
        elif isinstance(event, TransactionStart):
            if self._transaction is not None:
                # The source resumes a transaction cut by a lost connection where it was cut;
                # a second Start would mean part of it reached the sink twice.
                raise ValueError(f"transaction {event.gtid} started while {self._transaction} is open")
            if window is not None and window.before_transaction(event.gtid):
                out.extend(self._close_window())
            self._transaction = event.gtid
        elif isinstance(event, TransactionEnd):
            self.position = self.position.with_gtid(event.gtid)
            self.resume_position = event.resume
            if event.commit is not None:
                self.must_see = event.commit
            self._transaction = None
            if window is not None and window.reached(self.position):
                out.extend(self._close_window())
        elif isinstance(event, SchemaChange):
            self._schema_changes += 1
            # Never mix schemas in one chunk (its rows were read with the old schema), nor emit
            # rows a TRUNCATE or DROP removed: the DDL wins like a row change. The tables it names,
            # not its default database (`USE other; TRUNCATE shop.orders`); a statement that names
            # none (not understood, DROP DATABASE) may touch any.
            if window is not None:
                touched = classify_ddl(event.sql, event.db).tables
                if not touched or window.table in touched:
                    self.discard_window()
            out.append(event)
        elif not isinstance(event, Heartbeat):
            raise TypeError(f"unexpected binlog event {event!r}")
        return out

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

    def stop_snapshot(self, tables: set[TableId] | None = None) -> list[Emission]:
        current = self.progress.current
        if tables is None:
            tables = {entry.table for entry in self.progress.queue}
        if current is not None and current.table in tables:
            self.discard_window()
        removed = self.progress.remove(tables)
        if not removed:
            return []
        return [Notification("ABORTED", {"data_collections": [str(entry.table) for entry in removed]})]

    def restart_table(self, table: TableId, reason: str) -> list[Emission]:
        """Read `table` again from its first key if it is the table being snapshotted (its
        schema changed: rows already emitted have the old shape, and its key may be another).
        Queued tables need nothing: their max key is captured when they start."""
        current = self.progress.current
        if current is None or current.table != table or not current.started:
            return []
        self.discard_window()
        current.started, current.max_key, current.last_key = False, None, None
        current.rows_scanned = current.chunks = 0
        return [Notification("TABLE_SCAN_RESTARTED", {"data_collection": str(table), "reason": reason})]

    def pause(self) -> list[Emission]:
        if self.progress.paused:
            return []
        self.progress.paused = True
        return [Notification("PAUSED", self._status())]

    def resume(self) -> list[Emission]:
        if not self.progress.paused:
            return []
        self.progress.paused = False
        return [Notification("RESUMED", self._status())]

    def checkpoint(self) -> Checkpoint | None:
        if self.window is not None or self._transaction is not None:
            return None
        return Checkpoint(self.position, self.progress.to_json(), self.resume_position)

    # --- internals ------------------------------------------------------------------------

    def _close_window(self) -> list[Emission]:
        window, read = self.window, self._chunk
        assert window is not None and read is not None
        out: list[Emission] = [
            RowChange(window.table, "r", key, None, row, SourceInfo(snapshot=True))
            for key, row in window.close()
        ]
        snapshot = read.snapshot
        snapshot.rows_scanned += window.rows_read
        snapshot.chunks += 1
        last_key, cut_short = self._chunk_last_key, self._chunk_cut_short
        self.discard_window()
        self._unmeasured = snapshot.table
        at_max = last_key is not None and self._paging_identity(last_key) == self._paging_identity(snapshot.max_key)
        if last_key is None or (window.rows_read < read.limit and not cut_short) or at_max:
            out.extend(self._finish_table("SUCCEEDED"))
        else:
            snapshot.last_key = last_key
            out.append(Notification("IN_PROGRESS", self._status()))
        return out

    def _finish_table(self, status: str, reason: str | None = None) -> list[Emission]:
        done = self.progress.finish_current()
        data: dict[str, Any] = {
            "data_collection": str(done.table),
            "scanned_collection": str(done.table),
            "total_rows_scanned": done.rows_scanned,
            "status": status,
        }
        if reason is not None:
            data["reason"] = reason
        out: list[Emission] = [Notification("TABLE_SCAN_COMPLETED", data)]
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
