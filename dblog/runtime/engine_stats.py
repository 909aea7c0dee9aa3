"""What the engine counts while it runs, for the metrics (`dblog.runtime.metrics` reads it).

`EngineStats`: plain ints, lists and fixed-bucket histograms the engine's thread updates: per row
a list increment (`Engine._dispatch`), per transaction an attribute and a counter (no clock: the
lag is computed at scrape time from the last transaction's source time, or is 0 when a heartbeat
came after it), once per heartbeat, window, commit, MERGE, visibility check and notification a
little more. Nothing else writes them. A `Supervisor` hands one to each engine it starts, so
counts run on across restarts.

Its own module so that the engine, the supervisor and the metrics import it, and the metrics
the engine and the supervisor, in one direction only.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from prometheus_client.utils import floatToGoString

from dblog.core.events import Heartbeat, Notification, TableId, TransactionStart

WINDOW_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ROWS_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
COMMIT_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MERGE_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

OPS = ("c", "u", "d", "r")
# TABLE_SCAN_COMPLETED statuses, served at 0 from the start: Prometheus' increase() sees the first one
SCAN_STATUSES = ("SUCCEEDED", "EMPTY", "SKIPPED", "NO_PRIMARY_KEY", "UNKNOWN_SCHEMA", "SQL_EXCEPTION")
ERROR_KINDS = ("source", "sink", "other")  # what ended an engine run with an error (`EngineStats.failed`)
OP_INDEX = {op: index for index, op in enumerate(OPS)}  # a RowChange's op -> its place in a table's counts


class Histogram:
    """Observations counted in fixed buckets (upper bounds, inclusive, as Prometheus' `le`),
    with their sum: what `HistogramMetricFamily` exposes. Observed from one thread."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def exposed(self) -> tuple[list[tuple[str, int]], float]:
        """Cumulative buckets ("le", count) ending with +Inf, and the sum."""
        counts, total = list(self.counts), self.sum
        buckets, running = [], 0
        for bound, count in zip((*(floatToGoString(b) for b in self.bounds), "+Inf"), counts):
            running += count
            buckets.append((bound, running))
        return buckets, total


class EngineStats:
    """What the engine counts for the metrics; see the module docstring. Attributes are read by
    the collector, written only by the engine's thread (the methods below, and
    `transaction`, which the loop sets at every TransactionStart)."""

    def __init__(self) -> None:
        self.started = time.time()
        # streaming
        # Row changes handed to the sink: per table its counts by op (in OPS order), or False for a
        # table not captured. The engine looks a row's table up here instead of calling
        # is_captured (`table_counts`): one lookup serves both, then one list increment.
        self.changes: dict[TableId, list[int] | bool] = {}
        self.transactions = 0  # ended (the loop counts them)
        self.transaction: TransactionStart | None = None  # the last one started (the loop sets it)
        # The last heartbeat: (wall clock, the heartbeat, `transaction` then). A heartbeat says the
        # reader is at the binlog's end: no lag, until a transaction starts after it.
        self.heartbeat_at: tuple[float, Heartbeat, TransactionStart | None] | None = None
        self._binlog: tuple[Any, int, int] = (None, 0, 0)  # (current source, reconnects and filtered before it)
        # sink
        self.commits = 0
        self.commit_seconds = Histogram(COMMIT_SECONDS_BUCKETS)
        self.commit_rows = Histogram(ROWS_BUCKETS)
        self.commit_failures = 0  # commits (flush and offsets save) that raised
        self._rows_at_commit = 0
        self.merge_seconds: dict[str, Histogram] = {}
        # snapshot
        self.window_seconds = Histogram(WINDOW_SECONDS_BUCKETS)
        self.window_rows_dropped = Histogram(ROWS_BUCKETS)
        self.visibility_waits = 0
        self.visibility_checks = 0
        self.visibility_wait_seconds = 0.0
        self.scanned: dict[str, int] = {}  # rows of tables whose scan completed (TABLE_SCAN_COMPLETED)
        self.scans: defaultdict[str, int] = defaultdict(int, dict.fromkeys(SCAN_STATUSES, 0))  # by status
        # The current or last snapshot, from its notifications: wall clock at its STARTED (None
        # before one, e.g. after a restart that resumed one), at its COMPLETED or ABORTED, and
        # which of those came last.
        self.snapshot_started: float | None = None
        self.snapshot_ended: float | None = None
        self.snapshot_outcome: str | None = None
        # engine runs ended by an error, by ERROR_KINDS (the supervisor counts them)
        self.errors: dict[str, int] = dict.fromkeys(ERROR_KINDS, 0)

    # --- streaming ---------------------------------------------------------------------------------

    def heartbeat(self, event: Heartbeat) -> None:
        self.heartbeat_at = (time.time(), event, self.transaction)

    def lag_seconds(self, now: float) -> float | None:
        """How far the stream is behind the source: 0 when no transaction started since the last
        heartbeat, else the clock minus the source time of the last transaction started (whole
        seconds in the binlog); None before either."""
        start, heartbeat = self.transaction, self.heartbeat_at
        if heartbeat is not None and heartbeat[2] is start:
            return 0.0
        if start is None or start.ts_ms is None:
            return None
        return max(0.0, now - start.ts_ms / 1000)

    def at(self) -> TransactionStart | Heartbeat | None:
        """The last event that says where the stream stands in the binlog (file, pos)."""
        start, heartbeat = self.transaction, self.heartbeat_at
        if heartbeat is not None and (heartbeat[2] is start or start is None) and heartbeat[1].file is not None:
            return heartbeat[1]
        return start

    def binlog_opened(self, source: Any) -> None:
        """A new binlog source (a new engine, or a restarted one): the counts of the one before
        are kept as a base."""
        previous, reconnects, filtered = self._binlog
        if previous is not None:
            reconnects += previous.reconnects
            filtered += previous.filtered_events
        self._binlog = (source, reconnects, filtered)

    def binlog_counts(self) -> tuple[int, int]:
        """(reconnects, rows events filtered) of every binlog source so far."""
        source, reconnects, filtered = self._binlog
        if source is not None:
            reconnects += source.reconnects
            filtered += source.filtered_events
        return reconnects, filtered

    # --- sink ------------------------------------------------------------------------------------

    def committed(self, seconds: float, rows: int | None = None) -> None:
        """A commit (sink flush and offsets saved) took `seconds`; `rows`: those it committed,
        by default those handed to the sink since the last commit (`rows_since_last_cut`)."""
        if rows is None:
            rows = self.rows_since_last_cut()
        self.commits += 1
        self.commit_seconds.observe(seconds)
        self.commit_rows.observe(rows)

    def rows_since_last_cut(self) -> int:
        """Row changes handed to the sink since the last commit's batch was cut."""
        total = self.changes_total()
        rows, self._rows_at_commit = total - self._rows_at_commit, total
        return rows

    def table_counts(self, table: TableId, captured: bool) -> list[int] | bool:
        """The counts of a table seen for the first time (False when it is not captured)."""
        counts = self.changes[table] = [0] * len(OPS) if captured else False
        return counts

    def changes_total(self) -> int:
        return sum(sum(counts) for counts in list(self.changes.values()) if counts)

    def merged(self, table: str, seconds: float) -> None:
        histogram = self.merge_seconds.get(table)
        if histogram is None:
            histogram = self.merge_seconds[table] = Histogram(MERGE_SECONDS_BUCKETS)
        histogram.observe(seconds)

    # --- snapshot --------------------------------------------------------------------------------

    def window_closed(self, seconds: float, rows_dropped: int) -> None:
        self.window_seconds.observe(seconds)
        self.window_rows_dropped.observe(rows_dropped)

    def visibility_checked(self, seconds: float, waited: bool) -> None:
        self.visibility_checks += 1
        self.visibility_wait_seconds += seconds
        if waited:
            self.visibility_waits += 1

    def failed(self, kind: str) -> None:
        """An engine run ended by an error of `kind` (one of ERROR_KINDS)."""
        self.errors[kind if kind in self.errors else "other"] += 1

    def commit_failed(self) -> None:
        self.commit_failures += 1

    def notified(self, notification: Notification) -> None:
        kind = notification.type
        if kind == "STARTED" and (self.snapshot_started is None or self.snapshot_ended is not None):
            # a snapshot starts (STARTED also comes for tables added to one under way: same snapshot)
            self.snapshot_started, self.snapshot_ended, self.snapshot_outcome = time.time(), None, None
        elif kind in ("COMPLETED", "ABORTED"):
            self.snapshot_ended, self.snapshot_outcome = time.time(), kind
        if kind == "TABLE_SCAN_COMPLETED":
            data = notification.data
            self.scans[str(data.get("status"))] += 1
            table = data.get("data_collection")
            if table is not None and data.get("status") == "SUCCEEDED":
                self.scanned[str(table)] = int(data.get("total_rows_scanned") or 0)
