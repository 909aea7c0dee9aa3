"""dblog's metrics: what the engine counts while it runs, and the Prometheus collector that reads it.

Two halves, so that the binlog loop never calls into prometheus_client:

* `EngineStats` (`dblog.runtime.engine_stats`): plain ints, lists and fixed-bucket histograms the
  engine's thread updates. A `Supervisor` hands one to each engine it starts, so counts run on
  across restarts.
* `Metrics`: a `CollectorRegistry` of its own (never the global default one: several engines
  in one process, as in the tests, do not collide) whose collector reads `EngineStats` and the
  current engine's state (capture, binlog source, sink) at scrape time, and the readiness rule
  of `/readyz`. The HTTP side is `dblog.runtime.http_endpoint`.

Reads from the scrape thread copy dicts and lists in one C call each (`list(d.items())`), so
they never see a dict change size under them; a scrape may see a histogram one observation
ahead in its buckets or its sum, never buckets that do not add up.

Every metric, its labels and the Debezium metric it corresponds to: docs/operations.md, "Metrics and health".
The series under Debezium's own (JMX exporter) names: `dblog.runtime.debezium_metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dblog.runtime.debezium_metrics import debezium_families
from dblog.runtime.engine_stats import OPS, EngineStats, Histogram

if TYPE_CHECKING:
    from dblog.runtime.engine import Engine
    from dblog.runtime.supervisor import Supervisor

DEFAULT_READY_MAX_LAG_SECONDS = 60.0


class Metrics:
    """dblog's registry and readiness rule over `stats` and the engine `engine()` returns (None
    while there is none). `restarts`, `stopping`, `last_error`: the supervisor's, when one runs
    the engines."""

    def __init__(
        self,
        stats: EngineStats,
        engine: Callable[[], Engine | None],
        *,
        ready_max_lag_seconds: float = DEFAULT_READY_MAX_LAG_SECONDS,
        restarts: Callable[[], int] = lambda: 0,
        stopping: Callable[[], bool] = lambda: False,
        last_error: Callable[[], BaseException | None] = lambda: None,
        waiting_since: Callable[[], float | None] = lambda: None,
        debezium_name: str | None = None,
    ) -> None:
        self.stats = stats
        self.engine = engine
        self.ready_max_lag_seconds = ready_max_lag_seconds
        self.restarts = restarts
        self.stopping = stopping
        self.last_error = last_error
        self.waiting_since = waiting_since  # when the engine began waiting for its source (Unix time)
        self.debezium_name = debezium_name  # the `name` label of the debezium_metrics_* series; None: not served
        self._activity: tuple[int, float | None] | None = None  # (transactions counted, when first seen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_DblogCollector(self))
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...

    @classmethod
    def of_supervisor(cls, supervisor: Supervisor, ready_max_lag_seconds: float = DEFAULT_READY_MAX_LAG_SECONDS
                      ) -> Metrics:
        return cls(supervisor.stats, lambda: supervisor.engine, ready_max_lag_seconds=ready_max_lag_seconds,
                   restarts=lambda: supervisor.restarts, stopping=lambda: supervisor.stopped,
                   last_error=lambda: supervisor.last_error,
                   waiting_since=lambda: supervisor.waiting_for_source_since, debezium_name=_debezium_name(supervisor.config))

    @classmethod
    def of_engine(cls, engine: Engine, ready_max_lag_seconds: float = DEFAULT_READY_MAX_LAG_SECONDS) -> Metrics:
        return cls(engine.stats, lambda: engine, ready_max_lag_seconds=ready_max_lag_seconds,
                   stopping=lambda: engine.stopping, debezium_name=_debezium_name(engine.config))

    # --- health ----------------------------------------------------------------------------------

    def last_event_time(self, now: float) -> float | None:
        """When the loop last handled a transaction's end or a heartbeat: the heartbeat's own
        time, or when a scrape or probe first saw the transaction count it has now (the loop
        reads no clock per transaction), whichever is later. None before either."""
        stats = self.stats
        transactions = stats.transactions
        if self._activity is None or self._activity[0] != transactions:
            self._activity = (transactions, now if self._activity is not None or transactions else None)
        seen = self._activity[1]
        heartbeat = stats.heartbeat_at
        if heartbeat is not None and (seen is None or heartbeat[0] > seen):
            return heartbeat[0]
        return seen

    def connected(self) -> bool:
        engine = self.engine()
        source = engine.binlog if engine is not None else None
        return bool(source is not None and source.connected)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the JSON body of /readyz). Ready: not stopping, the binlog reader connected,
        its lag at most `ready_max_lag_seconds`, and an event (at least a heartbeat) handled
        within that time plus one heartbeat interval."""
        stats, limit, now = self.stats, self.ready_max_lag_seconds, time.time()
        reasons: list[str] = []
        engine = self.engine()
        if self.stopping():
            reasons.append("stopping")
        connected = self.connected()
        if not connected:
            if engine is None or engine.capture is None:
                reason = "the engine has not started yet"
            elif engine.binlog is None:
                reason = "the engine has not started reading the binlog yet"
            else:
                reason = "the binlog reader is not connected to the source database"
            since = self.waiting_since()
            if since is not None:
                reason += (f"; waiting for the source database since {_utc(since)} ({now - since:.0f} s, "
                           "source.reconnect_timeout_seconds)")
            error = self.last_error()
            if error is not None:
                reason += f" (last error: {' '.join(str(error).split()) or type(error).__name__})"
            reasons.append(reason)
        lag, seen = stats.lag_seconds(now), self.last_event_time(now)
        if lag is None or seen is None:
            reasons.append("no binlog event (not even a heartbeat) handled yet")
        else:
            heartbeat = engine.config.source.heartbeat_seconds if engine is not None else 1.0
            if lag > limit:
                reasons.append(f"the stream is {lag:.1f} s behind the source (http.ready_max_lag_seconds = {limit:g})")
            elif now - seen > limit + heartbeat:
                reasons.append(f"no binlog event (not even a heartbeat) handled for {now - seen:.1f} s "
                               f"(http.ready_max_lag_seconds = {limit:g}, heartbeats every {heartbeat:g} s)")
        body: dict[str, Any] = {"ready": not reasons}
        if reasons:
            body["reasons"] = reasons
        body.update({
            "connected": connected,
            "lag_seconds": None if lag is None else round(lag, 3),
            "seconds_since_last_event": None if seen is None else round(now - seen, 3),
            "restarts": self.restarts(),
            "waiting_for_source_since": None if self.waiting_since() is None else _utc(self.waiting_since()),
        })
        return not reasons, body


def _utc(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


class _DblogCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # samples depend on the engine's state; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        families = list(self._dblog())
        yield from families
        if self.metrics.debezium_name is not None:  # http.debezium_metrics
            yield from debezium_families(families, self.metrics.debezium_name)

    def _dblog(self) -> Iterator[Metric]:
        metrics = self.metrics
        stats = metrics.stats
        engine = metrics.engine()
        yield from self._streaming(stats, engine)
        yield from self._snapshot(stats, engine)
        yield from self._sink(stats, engine)
        started = GaugeMetricFamily("dblog_start_time_seconds", "When this dblog process started (Unix time)")
        started.add_metric([], stats.started)
        yield started
        waiting = GaugeMetricFamily("dblog_source_waiting_since_seconds", "When (Unix time) the engine began "
                                    "waiting for its source database to answer again; 0 while it is not waiting")
        waiting.add_metric([], metrics.waiting_since() or 0)
        yield waiting
        yield CounterMetricFamily("dblog_engine_restarts", "Engine restarts by the supervisor after the source "
                                  "database went away", value=metrics.restarts())
        errors = CounterMetricFamily("dblog_engine_errors", "Engine runs ended by an error, by what failed: source "
                                     "(database, binlog), sink, other (configuration, offsets file, ...)",
                                     labels=["kind"])
        for kind, count in list(stats.errors.items()):
            errors.add_metric([kind], count)
        yield errors

    def _streaming(self, stats: EngineStats, engine: Engine | None) -> Iterator[Metric]:
        now = time.time()
        lag = GaugeMetricFamily("dblog_streaming_lag_seconds",
                                "How far the stream is behind the source: wall clock minus the source time of the "
                                "last transaction started (whole seconds in the binlog); 0 when a heartbeat came "
                                "after it")
        lag_seconds = stats.lag_seconds(now)
        if lag_seconds is not None:
            lag.add_metric([], lag_seconds)
        yield lag
        since = GaugeMetricFamily("dblog_streaming_seconds_since_last_event",
                                  "Seconds since the loop last handled a transaction's end or a heartbeat (to the "
                                  "scrape interval: the loop reads no clock per transaction)")
        seen = self.metrics.last_event_time(now)
        if seen is not None:
            since.add_metric([], max(0.0, now - seen))
        yield since
        changes = CounterMetricFamily("dblog_changes", "Row changes handed to the sink, by source table and op "
                                      "(c, u, d from the binlog; r from snapshot chunks)", labels=["table", "op"])
        for table, counts in list(stats.changes.items()):
            if counts:
                for op, count in zip(OPS, list(counts)):
                    if count:
                        changes.add_metric([str(table), op], count)
        yield changes
        yield CounterMetricFamily("dblog_streaming_transactions", "Transactions read from the binlog",
                                  value=stats.transactions)
        reconnects, filtered = stats.binlog_counts()
        yield CounterMetricFamily("dblog_streaming_events_filtered",
                                  "Binlog rows events of tables not captured, skipped without decoding", value=filtered)
        yield CounterMetricFamily("dblog_streaming_reconnects",
                                  "Binlog connections made again after a lost one (within one engine run)",
                                  value=reconnects)
        connected = GaugeMetricFamily("dblog_streaming_connected", "1 while the binlog reader holds a connection "
                                      "to the source")
        connected.add_metric([], 1.0 if self.metrics.connected() else 0.0)
        yield connected
        position = InfoMetricFamily("dblog_streaming_binlog", "Where the stream stands: binlog file and position of "
                                    "the last transaction or heartbeat, and the GTID set emitted")
        at, capture = stats.at(), engine.capture if engine is not None else None
        if at is not None or capture is not None:
            position.add_metric([], {
                "file": (at.file if at is not None else None) or "",
                "pos": str(at.pos) if at is not None and at.pos is not None else "",
                # (file positions: no GTID set, dblog.core.file_positions)
                "gtid_set": str(capture.position) if capture is not None and engine.binlog_identity is None else "",
            })
        yield position

    def _snapshot(self, stats: EngineStats, engine: Engine | None) -> Iterator[Metric]:
        capture = engine.capture if engine is not None else None
        progress = capture.progress if capture is not None else None
        queue = list(progress.queue) if progress is not None else []
        completed = list(progress.completed_tables) if progress is not None else []
        paused = bool(progress is not None and progress.paused)
        running = GaugeMetricFamily("dblog_snapshot_running", "1 while a snapshot has tables to read and is not paused")
        running.add_metric([], 1.0 if queue and not paused else 0.0)
        yield running
        paused_metric = GaugeMetricFamily("dblog_snapshot_paused", "1 while the snapshot is paused (pause-snapshot)")
        paused_metric.add_metric([], 1.0 if paused else 0.0)
        yield paused_metric
        tables = GaugeMetricFamily("dblog_snapshot_tables", "Tables of the current snapshot: completed and to read")
        tables.add_metric([], len(completed) + len(queue))
        yield tables
        outcome = stats.snapshot_outcome if not queue else None  # of the last snapshot, once it ended
        completed_metric = GaugeMetricFamily("dblog_snapshot_completed", "1 once the last snapshot completed "
                                             "(every table read), until another starts")
        completed_metric.add_metric([], 1.0 if outcome == "COMPLETED" else 0.0)
        yield completed_metric
        aborted = GaugeMetricFamily("dblog_snapshot_aborted", "1 once the last snapshot was stopped "
                                    "(stop-snapshot), until another starts")
        aborted.add_metric([], 1.0 if outcome == "ABORTED" else 0.0)
        yield aborted
        duration = GaugeMetricFamily("dblog_snapshot_duration_seconds", "How long the current snapshot has run, or "
                                     "the last one ran (pauses included), since this process saw it start")
        if stats.snapshot_started is not None:
            ended = stats.snapshot_ended if not queue and stats.snapshot_ended is not None else time.time()
            duration.add_metric([], max(0.0, ended - stats.snapshot_started))
        yield duration
        remaining = GaugeMetricFamily("dblog_snapshot_tables_remaining", "Tables of the current snapshot still to read "
                                      "(the one being read included)")
        remaining.add_metric([], len(queue))
        yield remaining
        scanned = GaugeMetricFamily("dblog_snapshot_rows_scanned", "Rows read so far by the table's snapshot",
                                    labels=["table"])
        estimated = GaugeMetricFamily("dblog_snapshot_rows_estimated", "The server's row estimate when the table's "
                                      "snapshot started", labels=["table"])
        chunks = GaugeMetricFamily("dblog_snapshot_chunks", "Chunks (windows) read by the table's snapshot",
                                   labels=["table"])
        seen: set[str] = set()
        for entry in queue:  # the table being read first; a table queued again is shown once
            name = str(entry.table)
            if name in seen:
                continue
            seen.add(name)
            scanned.add_metric([name], entry.rows_read())  # with the rows a read by Spark tasks staged so far
            chunks.add_metric([name], entry.chunks)
            if entry.estimated_rows is not None:
                estimated.add_metric([name], entry.estimated_rows)
        finished = dict(list(stats.scanned.items()))
        for name in completed:
            if name not in seen and name in finished:
                seen.add(name)
                scanned.add_metric([name], finished[name])
        yield scanned
        yield estimated
        yield chunks
        scans = CounterMetricFamily("dblog_snapshot_table_scans", "Table snapshots ended, by status (SUCCEEDED, "
                                    "EMPTY, SKIPPED, NO_PRIMARY_KEY, UNKNOWN_SCHEMA, SQL_EXCEPTION, ...)",
                                    labels=["status"])
        for status, count in list(stats.scans.items()):
            scans.add_metric([status], count)
        yield scans
        yield _histogram("dblog_snapshot_window_seconds", "From a chunk's read (low watermark) to its window's close "
                         "(the binlog reader past the high watermark)", stats.window_seconds)
        yield _histogram("dblog_snapshot_window_rows_dropped", "Rows of a chunk dropped by its window: changed in the "
                         "binlog while the window was open (the change wins)", stats.window_rows_dropped)
        yield CounterMetricFamily("dblog_snapshot_visibility_waits", "Chunk and max-key reads that had to wait for "
                                  "commits the binlog reader had read to become visible to SELECTs",
                                  value=stats.visibility_waits)
        yield CounterMetricFamily("dblog_snapshot_visibility_wait_seconds", "Time spent checking (and waiting) that "
                                  "SELECTs see what the binlog reader has read", value=stats.visibility_wait_seconds)

    def _sink(self, stats: EngineStats, engine: Engine | None) -> Iterator[Metric]:
        yield CounterMetricFamily("dblog_sink_commits", "Commits: the sink flushed, then the offsets saved",
                                  value=stats.commits)
        yield CounterMetricFamily("dblog_sink_commit_failures", "Commits (sink flush or offsets save) that failed: "
                                  "the engine stops with the offsets of the commit before", value=stats.commit_failures)
        yield _histogram("dblog_sink_commit_seconds", "Duration of a commit (sink flush and offsets save)",
                         stats.commit_seconds)
        yield _histogram("dblog_sink_commit_rows", "Row changes handed to the sink since the previous commit, "
                         "per commit", stats.commit_rows)
        pending = GaugeMetricFamily("dblog_sink_pending_rows", "Changes written to the sink and not flushed yet")
        if engine is not None:
            pending.add_metric([], engine.sink.pending_rows)
        yield pending
        merges = HistogramMetricFamily("dblog_iceberg_merge_seconds", "Duration of one Iceberg MERGE (iceberg sink), "
                                       "by target table", labels=["table"])
        for table, histogram in list(stats.merge_seconds.items()):
            buckets, total = histogram.exposed()
            merges.add_metric([table], buckets, total)
        yield merges


def _debezium_name(config: Any) -> str | None:
    """The `name` label of the Debezium-named series (the connector's name, as Debezium's
    `server`), or None when `http.debezium_metrics` is off."""
    return config.name if config.http.debezium_metrics else None


def _histogram(name: str, documentation: str, histogram: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation)
    buckets, total = histogram.exposed()
    family.add_metric([], buckets, total)
    return family
