"""Commits per table, each at its own pace, so that a slow table does not hold the others back.

An Iceberg commit is a Spark job of a second or more; made on the loop's thread it would stop
the binlog and the snapshot reads for that long, every commit interval. And with one committer
every cut would wait for the slowest table of the last one: a MERGE into a large table whose
changes hit keys all over it takes seconds, and a change to a small table would wait for it
too. Here each table of a sink that commits tables separately (`Sink.commits_per_table`:
Iceberg, each table its own commit carrying its own position) is committed by a pool thread on
its own, while the loop reads on (pyspark's calls into the JVM release the GIL): at every cut
the loop detaches the tables whose last commit is done, with the checkpoint of that moment; a
table still committing keeps its changes, which join its next batch (the last change per key
wins, as within one batch). The loop waits for the commits only when what waits reaches twice
`sink.batch_rows` (memory stays bounded) or for a commit that must be complete when it returns
(stop, DDL); a failed commit is raised on the loop's thread at its next cut.

The offsets file still only names what every table holds: a table is durable up to the last
cut at which its commit ended or it had nothing pending, and the offsets saved are those of the
latest cut every table is durable up to. A table may be ahead of them, as after a crash between
two tables' commits today; on a restart it drops what it already holds (the sink's exactly-once
rule). Each table's batches commit one at a time, in order. Housekeeping (`Sink.after_commit`,
Iceberg maintenance) runs only when no table is committing, and no commit starts while it runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from dblog.core.offsets import Offsets
from dblog.sinks.base import Sink

log = logging.getLogger("dblog.engine")

Committed = Callable[[float], None]


class TableCommits:
    def __init__(self, sink: Sink, save_offsets: Callable[[Offsets], None], threads: int = 4) -> None:
        self._sink = sink
        self._save_offsets = save_offsets
        self._lock = threading.Condition()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dblog-table-commit")
        self._cuts: dict[int, tuple[Offsets, Committed | None, float]] = {}  # cut -> offsets, callback, when cut
        self._next_cut = 0
        self._saved = -1  # the last cut whose offsets are saved
        self._committing: dict[Hashable, int] = {}  # table -> the cut it is committing
        self._durable: dict[Hashable, int] = {}  # table -> the cut it holds everything up to
        self._maintaining = False
        self._failure: BaseException | None = None

    @property
    def busy(self) -> bool:
        """A cut now would start nothing: tables have changes waiting, and every one of them is
        committing (or housekeeping runs). With nothing waiting a cut still moves the offsets."""
        with self._lock:
            if self._maintaining:
                return True
            pending = self._sink.pending_tables()
            return bool(pending) and all(table in self._committing for table in pending)

    def submit(self, offsets: Offsets, on_committed: Committed | None = None) -> None:
        """A cut at `offsets`: every table with changes and no commit under way starts one;
        `on_committed` is told, once these offsets are saved, how long it took since the cut."""
        with self._lock:
            self.raise_failure()
            cut = self._next_cut
            self._next_cut += 1
            self._cuts[cut] = (offsets, on_committed, time.monotonic())
            pending, known = set(self._sink.pending_tables()), set(self._sink.known_tables())
            for table in [table for table in self._durable if table not in known and table not in self._committing]:
                del self._durable[table]  # the sink let it go (DDL, after committing what it held)
            for table in known:
                if table in pending or table in self._committing:
                    self._durable.setdefault(table, cut - 1)  # a new table: nothing of it before this cut
                else:
                    self._durable[table] = cut  # nothing waiting: it holds everything up to this cut
            ready = [] if self._maintaining else [table for table in pending if table not in self._committing]
            for batch in self._sink.detach(ready) if ready else []:
                self._committing[batch.table_key] = cut
                self._pool.submit(self._commit, batch, cut, offsets)
            self._save_durable()

    def wait(self) -> None:
        """Return once no table is committing; raise a commit's failure, if any."""
        with self._lock:
            while (self._committing or self._maintaining) and self._failure is None:
                self._lock.wait()
            self.raise_failure()

    def raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def close(self) -> None:
        """Let the commits under way finish (offsets then saved as far as they allow)."""
        self._pool.shutdown(wait=True)

    # --- the pool's threads ----------------------------------------------------------------------

    def _commit(self, batch, cut: int, offsets: Offsets) -> None:
        try:
            self._sink.commit([batch], offsets)
        except BaseException as error:  # noqa: BLE001 - handed to the loop's thread
            log.debug("table commit failed", exc_info=True)
            with self._lock:
                self._failure = error
                del self._committing[batch.table_key]
                self._lock.notify_all()
            return
        with self._lock:
            del self._committing[batch.table_key]
            self._durable[batch.table_key] = cut
            self._save_durable()
            housekeeping = not self._committing and self._failure is None
            self._maintaining = housekeeping
            self._lock.notify_all()
        if housekeeping:
            try:
                self._sink.after_commit()
            except BaseException as error:  # noqa: BLE001 - handed to the loop's thread
                with self._lock:
                    self._failure = error
            with self._lock:
                self._maintaining = False
                self._lock.notify_all()

    def _save_durable(self) -> None:
        """Save the offsets of the latest cut every table holds (under the lock)."""
        cut = min(self._durable.values(), default=self._next_cut - 1)
        if cut <= self._saved:
            return
        offsets, _, _ = self._cuts[cut]
        try:
            self._save_offsets(offsets)
        except BaseException as error:  # noqa: BLE001 - handed to the loop's thread
            self._failure = error
            return
        now = time.monotonic()
        for index in range(self._saved + 1, cut + 1):
            _, on_committed, cut_at = self._cuts.pop(index)
            if on_committed is not None:
                on_committed(now - cut_at)
        self._saved = cut
