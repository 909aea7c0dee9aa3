"""A sink wrapper that notes when changes reach the sink, for throughput and lag.

`TimedSink(inner)` passes everything to `inner` (the engine's own sink: null, JSON lines or
Iceberg) and records the first and last arrival of a row change, counts per op, and the flushes
(or background commits).
Rows of the probe table carry the wall-clock time their writer stamped (`written_at`, taken just
before the INSERT that commits them): arrival minus stamp is the streaming lag. Every other hook
of `Sink` (`pending_rows`, `after_commit`, `schema_changed`, `report_merges`, `snapshot_staging`,
`transaction_started`, `transaction_ended`, `heartbeat`, …) is the inner's, forwarded explicitly.
"""

from __future__ import annotations

import threading
import time

from dblog.core.events import RowChange, TableId
from dblog.core.offsets import Offsets
from dblog.sinks.base import Sink


class TimedSink(Sink):
    def __init__(self, inner: Sink, probe_table: TableId | None = None) -> None:
        self.inner = inner
        self.probe_table = probe_table
        self.count = 0
        self.ops: dict[str, int] = {}
        self.first: float | None = None  # perf_counter of the first row change written
        self.last: float | None = None
        self.probes: list[tuple[int, float, float]] = []  # (id, written_at, arrived_at), wall clock
        self.flushes: list[tuple[float, float]] = []  # (started, ended), wall clock
        self.table_commits: list[tuple[float, float, set[str]]] = []  # (started, ended, tables committed)
        self.committing = 0  # commits under way (on the engine's commit threads)
        self._committing_lock = threading.Lock()

    def write(self, changes: list[RowChange]) -> None:
        if changes:  # (the loop also writes empty batches: nothing to note then)
            now = time.perf_counter()
            if self.first is None:
                self.first = now
            self.last = now
            self.count += len(changes)
            ops = self.ops
            for change in changes:
                ops[change.op] = ops.get(change.op, 0) + 1
            probe_table = self.probe_table
            if probe_table is not None:
                arrived = time.time()
                self.probes.extend((change.after["id"], change.after["written_at"], arrived) for change in changes
                                   if change.table == probe_table and change.op == "c")
        self.inner.write(changes)

    def write_staged(self, staged) -> None:
        self.inner.write_staged(staged)

    def flush(self, offsets: Offsets | None = None) -> None:
        started = time.time()
        self.inner.flush(offsets)
        self.flushes.append((started, time.time()))

    @property
    def commits_per_table(self) -> bool:
        return self.inner.commits_per_table

    def detach(self, tables=None):
        return self.inner.detach() if tables is None else self.inner.detach(tables)

    def commit(self, batch, offsets: Offsets | None) -> None:
        started = time.time()
        with self._committing_lock:
            self.committing += 1
        try:
            self.inner.commit(batch, offsets)
        finally:
            with self._committing_lock:
                self.committing -= 1
        ended = time.time()
        self.flushes.append((started, ended))
        tables = {str(getattr(item, "table_key", "")) for item in batch} if isinstance(batch, list) else set()
        self.table_commits.append((started, ended, tables))

    def close(self) -> None:
        self.inner.close()

    @property
    def pending_rows(self) -> int:
        return self.inner.pending_rows

    def pending_tables(self) -> list:
        return self.inner.pending_tables()

    def known_tables(self) -> list:
        return self.inner.known_tables()

    def check_routes(self, tables):
        self.inner.check_routes(tables)

    def schema_changed(self, change, ddl, position):
        return self.inner.schema_changed(change, ddl, position)

    def after_commit(self) -> None:
        self.inner.after_commit()

    def transaction_started(self, start) -> None:
        self.inner.transaction_started(start)

    def transaction_ended(self, end) -> None:
        self.inner.transaction_ended(end)

    def heartbeat(self, ts_ms: int) -> None:
        self.inner.heartbeat(ts_ms)

    def report_merges(self, listener) -> None:
        self.inner.report_merges(listener)

    def snapshot_staging(self):
        return self.inner.snapshot_staging()

    def __getattr__(self, name: str):  # the inner's own attributes (e.g. an Iceberg sink's spark)
        if name == "inner":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)
