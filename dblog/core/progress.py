"""Where the incremental snapshot stands: the queue of tables and, for the table being read,
its maximum key (fixed when its snapshot starts) and the last key already emitted.

Pure data with a JSON form: it is part of the committed offsets, so a restart continues from
the last emitted chunk. Keys are normalized values (JSON-safe); tuples become lists in JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dblog.core.events import Key, TableId


@dataclass
class TableSnapshot:
    table: TableId
    condition: str | None = None  # extra predicate ANDed into every chunk query
    surrogate_key: str | None = None  # column to page by instead of the primary key
    # Its place in the startup snapshot (1: the first table) when that is read with
    # `snapshot.initial_markers`: its rows carry Debezium's initial-snapshot markers
    # (`dblog.core.capture.initial_marker`). None: read without them.
    initial_order: int | None = None
    # Read with streaming paused (Debezium's blocking snapshot: an execute-snapshot signal of
    # type "blocking", or snapshot.startup_reads = "blocking"): its chunks are emitted as soon
    # as they are read, and the stream goes on from where it paused once no such read is left.
    blocking: bool = False
    # The SELECT its rows are read from instead of the table (snapshot.select_overrides).
    select: str | None = None
    started: bool = False  # max_key has been captured
    max_key: Key | None = None
    last_key: Key | None = None
    rows_scanned: int = 0
    chunks: int = 0
    rows_emitted: int = 0  # snapshot rows emitted (the window drops some of those scanned)
    # A read made elsewhere (snapshot.distributed): rows its open window has staged so far,
    # not yet in rows_scanned (they count once the window closes; a restart reads them again).
    window_rows: int = 0
    # Stamped by the engine (this module has no clock), for rate and ETA in `dblog status`.
    estimated_rows: int | None = None  # the server's estimate when the table's snapshot started
    started_ms: int | None = None
    updated_ms: int | None = None

    def request_key(self) -> tuple[TableId, str | None, str | None, bool, str | None]:
        """What a read covers: the same table read the same way (condition, paging key, blocking
        or not, source SELECT)."""
        return self.table, self.condition, self.surrogate_key, self.blocking, self.select

    def rate(self) -> float | None:
        """Rows scanned per second so far."""
        if self.started_ms is None or self.updated_ms is None or self.updated_ms <= self.started_ms:
            return None
        return self.rows_read() * 1000 / (self.updated_ms - self.started_ms)

    def rows_read(self) -> int:
        """Rows scanned, and those the open window of a read made elsewhere staged so far."""
        return self.rows_scanned + self.window_rows

    def eta_seconds(self) -> float | None:
        rate = self.rate()
        if not rate or self.estimated_rows is None:
            return None
        return max(self.estimated_rows - self.rows_read(), 0) / rate

    def to_json(self) -> dict[str, Any]:
        """Its fields; a table queued and not started is its name and its request alone (every
        other field at its default is left out, as `from_json` reads it back): the offsets
        document of a snapshot of thousands of tables stays small, and so does each commit."""
        if (not self.started and self.max_key is None and self.last_key is None and self.estimated_rows is None
                and self.started_ms is None and self.updated_ms is None
                and not (self.rows_scanned or self.chunks or self.rows_emitted or self.window_rows)):
            data: dict[str, Any] = {"table": str(self.table)}
            if self.condition is not None:
                data["condition"] = self.condition
            if self.surrogate_key is not None:
                data["surrogate_key"] = self.surrogate_key
            if self.initial_order is not None:
                data["initial_order"] = self.initial_order
            if self.blocking:
                data["blocking"] = True
            if self.select is not None:
                data["select"] = self.select
            return data
        return {
            "table": str(self.table),
            "condition": self.condition,
            "surrogate_key": self.surrogate_key,
            "started": self.started,
            "max_key": list(self.max_key) if self.max_key is not None else None,
            "last_key": list(self.last_key) if self.last_key is not None else None,
            "rows_scanned": self.rows_scanned,
            "chunks": self.chunks,
            "rows_emitted": self.rows_emitted,
            "initial_order": self.initial_order,
            "blocking": self.blocking,
            "select": self.select,
            "window_rows": self.window_rows,
            "estimated_rows": self.estimated_rows,
            "started_ms": self.started_ms,
            "updated_ms": self.updated_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TableSnapshot":
        return cls(
            table=TableId.parse(data["table"]),
            condition=data.get("condition"),
            surrogate_key=data.get("surrogate_key"),
            started=bool(data.get("started")),
            max_key=_key(data.get("max_key")),
            last_key=_key(data.get("last_key")),
            rows_scanned=int(data.get("rows_scanned", 0)),
            chunks=int(data.get("chunks", 0)),
            rows_emitted=int(data.get("rows_emitted", 0)),
            initial_order=data.get("initial_order"),
            blocking=bool(data.get("blocking", False)),
            select=data.get("select"),
            window_rows=int(data.get("window_rows", 0)),
            estimated_rows=data.get("estimated_rows"),
            started_ms=data.get("started_ms"),
            updated_ms=data.get("updated_ms"),
        )


def _key(value: list | None) -> Key | None:
    return tuple(value) if value is not None else None


@dataclass
class SnapshotProgress:
    """The queue of table snapshots; the first entry is the one being read."""

    queue: list[TableSnapshot] = field(default_factory=list)
    paused: bool = False
    snapshot_id: str | None = None  # id of the request that started the current run
    completed_tables: list[str] = field(default_factory=list)
    # Tables read whole in one consistent snapshot ahead of the stream (a table without a key):
    # "db.table" -> the GTID set the read saw, as text. Their changes the stream reads inside
    # that set are already in the rows emitted, and are dropped until the stream has passed it.
    read_ahead: dict[str, str] = field(default_factory=dict)

    @property
    def current(self) -> TableSnapshot | None:
        return self.queue[0] if self.queue else None

    def blocking_first(self) -> None:
        """Move the blocking reads to the front (call with no window open and no read out): they
        run before an incremental read under way, which goes on afterwards from its last key."""
        self.queue.sort(key=lambda entry: not entry.blocking)

    def enqueue(self, tables: list[TableSnapshot]) -> tuple[list[TableSnapshot], list[TableSnapshot]]:
        """Add each request unless a read with the same table, condition and surrogate key is
        queued and not started (it reads everything this one would, later). A table queued
        with another condition, or already being read, is queued again: an unfiltered re-read
        must not be swallowed by a filtered one. Returns (added, already queued)."""
        pending = {queued.request_key() for queued in self.queue if not queued.started}
        added: list[TableSnapshot] = []
        already: list[TableSnapshot] = []
        for entry in tables:
            if entry.request_key() in pending:
                already.append(entry)
            else:
                pending.add(entry.request_key())
                added.append(entry)
        self.queue.extend(added)
        return added, already

    def remove(self, tables: set[TableId]) -> list[TableSnapshot]:
        removed = [entry for entry in self.queue if entry.table in tables]
        self.queue = [entry for entry in self.queue if entry.table not in tables]
        return removed

    def finish_current(self) -> TableSnapshot:
        done = self.queue.pop(0)
        self.completed_tables.append(str(done.table))
        return done

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": [entry.to_json() for entry in self.queue],
            "paused": self.paused,
            "snapshot_id": self.snapshot_id,
            "completed_tables": list(self.completed_tables),
            **({"read_ahead": dict(self.read_ahead)} if self.read_ahead else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "SnapshotProgress":
        if not data:
            return cls()
        return cls(
            queue=[TableSnapshot.from_json(entry) for entry in data.get("queue", [])],
            paused=bool(data.get("paused", False)),
            snapshot_id=data.get("snapshot_id"),
            completed_tables=list(data.get("completed_tables", [])),
            read_ahead=dict(data.get("read_ahead") or {}),
        )
