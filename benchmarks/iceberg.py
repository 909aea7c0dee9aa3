"""End to end into Apache Iceberg: the engine's own Iceberg sink (`sink.type = "iceberg"`, a
local Spark session, Hadoop catalog in a scratch warehouse), in two phases.

1. Snapshot: `orders` is snapshotted (an `execute-snapshot` signal, as a user would send it)
   into Iceberg through MERGE; the rate runs from the signal to the end of the first commit
   that started after COMPLETED, i.e. until every row is in a committed Iceberg snapshot.
2. Latency: the load generator writes (`--iceberg-write-rate` per writer) and stamps probe rows
   for `--iceberg-seconds`. A probe row is visible once an Iceberg snapshot holding it is
   committed: afterwards each snapshot of the probe table is read back through Spark
   (`VERSION AS OF`), and a probe's latency is the commit time of the first snapshot that holds
   it minus the time its writer stamped just before committing it in MariaDB. (Probes come from
   one writer in id order, and each commit holds a prefix of the binlog, so the snapshot's
   largest id says which probes it holds.) Reading after the fact keeps a polling reader from
   competing with the MERGEs for the two cores. Probes are inserts of ids beyond every other,
   which the sink appends (`dblog.sinks.iceberg.merge.TableWrites._can_append`); the same
   transaction updates the one row of `lag_beacon` to the probe's id, an update the sink must MERGE, so the beacon's
   snapshots time the MERGE path the same way.

Before phase 1 one probe row and one customer change are streamed, so that creating those
Iceberg tables (Spark compiling its first plans) is in neither figure. Maintenance is off: its
compactions would be in the latency figures (it is its own cost, scheduled by the user).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from benchmarks.dataset import (
    BEACON,
    ORDERS,
    PROBES,
    SIGNALS,
    count_rows,
    executed_gtids,
)
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, latency_summary, rate
from benchmarks.load_generator import LoadGenerator
from benchmarks.snapshot import snapshot_timeout
from dblog.core.events import TableId
from dblog.runtime.signal_client import send_via_table
from dblog.sinks.iceberg.session import QUIET_LOG4J2

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

CATALOG = "lake"
CUSTOMERS = TableId(ORDERS.db, "customers")


def _iceberg_name(table: TableId) -> str:
    return f"{CATALOG}.{table.db}.{table.table}"


def measure_iceberg(ctx: BenchContext) -> None:
    options = ctx.options
    db = ctx.db
    orders = ctx.tables["orders"]
    limit = ctx.keyset_scan_limit("orders")
    db.execute(f"TRUNCATE TABLE {PROBES.db}.{PROBES.table}")
    before = count_rows(db, ORDERS)  # nothing writes to it until the snapshot is done
    log4j = ctx.workdir / "spark-log4j2.properties"
    log4j.write_text(QUIET_LOG4J2)
    master, cluster_conf = ctx.spark_master(2)
    config = ctx.engine_config(
        "iceberg", [ORDERS, CUSTOMERS, PROBES, BEACON], {"type": "iceberg"},
        spark={"warehouse": str(ctx.workdir / "warehouse"), "catalog": CATALOG, "master": master,
               "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}",
                        **cluster_conf}},
        iceberg={"maintenance": {"enabled": False}, "write_mode": options.iceberg_write_mode},
        **({"offsets": {"commit_interval_seconds": options.iceberg_commit_seconds}}
           if options.iceberg_commit_seconds is not None else {}),
        signals={"table": str(SIGNALS)},
    )
    spark_started = time.perf_counter()
    run = None
    generator = None
    try:
        run = EngineRun(config, probe_table=PROBES)
        spark_seconds = time.perf_counter() - spark_started
        run.sink.spark.sparkContext.setLogLevel("ERROR")
        run.start()
        db.execute(f"INSERT INTO {PROBES.db}.{PROBES.table} VALUES (0, %s)", (time.time(),))
        db.execute(f"UPDATE {CUSTOMERS.db}.{CUSTOMERS.table} SET balance = balance + 1 WHERE id = 1")
        db.execute(f"UPDATE {BEACON.db}.{BEACON.table} SET probe_id = 0, written_at = %s WHERE id = 1",
                   (time.time(),))
        run.wait_for(lambda: all(run.sink.committed_position(t) is not None for t in (PROBES, CUSTOMERS, BEACON)),
                     600, "the first Iceberg commit")

        # 1. the snapshot, end to end
        flushes_before = len(run.sink.flushes)
        signalled, committed = snapshot_orders_into_iceberg(run, orders.rows, "bench-iceberg")
        snapshot_seconds = committed - signalled
        snapshot_commits = [end - start for start, end in run.sink.flushes[flushes_before:] if end <= committed]
        scanned = run.scanned.get(str(ORDERS), 0)
        ctx.keyset_scan_limit("orders", again=True)  # the scan beside the snapshot, the engine idle

        # 2. streaming latency, commit in MariaDB → visible in Iceberg
        generator = LoadGenerator(db.port, orders.rows, options.writers, options.iceberg_write_rate,
                                  options.probe_rate, beacon=True).start()
        phase_started = time.time()
        flushes_before = len(run.sink.flushes)
        run.wait_for(lambda: time.time() - phase_started >= options.iceberg_seconds, options.iceberg_seconds + 60,
                     "the end of the latency phase")
        load = generator.stop()
        generator = None
        run.finish(executed_gtids(db), timeout=900)
        streaming_commits = [end - start for start, end in run.sink.flushes[flushes_before:]]
        commits_by_table: dict[str, list[float]] = {}
        for start, end, tables in run.sink.table_commits:
            for table in tables if start >= phase_started else ():
                commits_by_table.setdefault(table, []).append(end - start)
        # the loop's own lag (commit in MariaDB → handed to the sink) while commits run
        engine_lags = [arrived - written for _, written, arrived in run.sink.probes if written >= phase_started]

        spark = run.sink.spark
        visible = _visible_latencies(spark, _iceberg_name(PROBES), _iceberg_name(PROBES), "id")
        visible_updates = _visible_latencies(spark, _iceberg_name(PROBES), _iceberg_name(BEACON), "probe_id")
        source_orders, source_probes = count_rows(db, ORDERS), count_rows(db, PROBES)
        lake_orders = spark.sql(f"SELECT COUNT(*) FROM {_iceberg_name(ORDERS)}").first()[0]
        lake_probes = spark.sql(f"SELECT COUNT(*) FROM {_iceberg_name(PROBES)}").first()[0]
    except BaseException:
        if generator is not None:
            generator.kill()
        if run is not None:
            run.abandon()
        raise
    finally:
        _stop_spark(run)

    ctx.report(Figure(
        "iceberg.snapshot", "iceberg", "incremental snapshot into Iceberg, signal → last MERGE committed (orders)",
        rate(scanned, snapshot_seconds), "rows/s", limit=limit,
        check=f"{scanned:,} scanned of {before:,}; after streaming Iceberg holds {lake_orders:,} orders, "
              f"MariaDB {source_orders:,}",
        check_ok=scanned == before and lake_orders == source_orders,
        detail={"rows": scanned, "seconds": round(snapshot_seconds, 3), "spark_start_seconds": round(spark_seconds, 1),
                "commits": len(snapshot_commits), "commit_seconds_mean": _mean(snapshot_commits),
                "rows_per_commit": round(scanned / len(snapshot_commits)) if snapshot_commits else None,
                "commit_interval_seconds": run.config.commit_interval_seconds(),
                "batch_rows": run.config.sink.batch_rows, "spark_master": master},
    ))
    common = {
        "commit_interval_seconds": run.config.commit_interval_seconds(), "writers": options.writers,
        "write_rate_per_writer": options.iceberg_write_rate, "writes": load["writes"], "probes": load["probes"],
        "seconds": options.iceberg_seconds, "commits": len(streaming_commits), "write_mode": options.iceberg_write_mode,
        "commit_seconds_mean": _mean(streaming_commits),
        "commit_seconds_by_table": {
            table: {"commits": len(seconds), "mean": _mean(seconds), "max": round(max(seconds), 3)}
            for table, seconds in sorted(commits_by_table.items())
        },
    }
    probes_ok = lake_probes == source_probes
    for key, what, latencies in (
        ("visible", "streaming insert (appended)", visible),
        ("visible_update", "streaming update (" + ("MERGEd" if options.iceberg_write_mode == "merge"
                                                  else "upserted: equality deletes") + ")", visible_updates),
    ):
        latency = latency_summary(list(latencies.values()))
        _report_percentiles(
            ctx, f"iceberg.{key}", f"{what}, commit in MariaDB → visible in Iceberg (Spark query; commits every "
                                   f"{run.config.commit_interval_seconds():g} s)", latency,
            check=f"{len(latencies):,} probes timed; Iceberg holds {lake_probes:,} probe rows, "
                  f"MariaDB {source_probes:,}",
            check_ok=probes_ok and len(latencies) == source_probes - 1, detail={**latency, **common},
        )
    _report_engine_lag(ctx, engine_lags, streaming_commits, run.config.commit_interval_seconds(),
                       options.iceberg_seconds)


def snapshot_orders_into_iceberg(run: EngineRun, rows: int, request_id: str) -> tuple[float, float]:
    """Signal a snapshot of `orders`; return (when it was signalled, when the first commit
    that started after COMPLETED ended), wall clock: every row is then in a committed snapshot."""
    signalled, signalled_perf = time.time(), time.perf_counter()
    send_via_table(run.config, "execute-snapshot", {"data-collections": [r"bench\.orders"]}, request_id)
    run.wait_completed(snapshot_timeout(rows) * 3)
    completed = signalled + (run.completed_at - signalled_perf)
    orders = str(ORDERS)

    def after() -> list[float]:  # ends of the commits of orders that started after COMPLETED
        return [end for start, end, tables in run.sink.table_commits if start >= completed and orders in tables]

    run.wait_for(lambda: bool(after()), 900, "the commit of orders after the snapshot")
    return signalled, after()[0]


def _report_engine_lag(ctx: BenchContext, lags: list[float], commits: list[float], interval: float,
                       seconds: float) -> None:
    """A commit that held up the binlog loop would show in this lag, as long as the commit."""
    summary = latency_summary(lags)
    busy = min(1.0, sum(commits) / seconds)
    _report_percentiles(
        ctx, "iceberg.engine_lag",
        f"streaming lag commit → sink while Iceberg commits run (every {interval:g} s, "
        f"{_mean(commits) or 0:.2f} s each)",
        summary, check=f"{len(lags):,} probes reached the sink; the committer was busy {busy:.0%} of the phase",
        check_ok=bool(lags), detail={**summary, "commit_seconds_mean": _mean(commits),
                                     "commit_seconds_max": round(max(commits), 3) if commits else None},
    )


def _report_percentiles(ctx: BenchContext, key: str, label: str, summary: dict[str, float], **figure) -> None:
    """The p50 and p99 of a `latency_summary` as two figures, `key`.p50 and `key`.p99."""
    for percent in (50, 99):
        ctx.report(Figure(f"{key}.p{percent}", "iceberg", f"{label}, p{percent}", summary[f"p{percent}_ms"], "ms",
                          **figure))


def _visible_latencies(spark, probes: str, holder: str, column: str) -> dict[int, float]:
    """{probe id: seconds from its MariaDB commit to the first Iceberg commit of `holder`
    whose largest `column` is at least the probe's id}."""
    snapshots = spark.sql(
        f"SELECT snapshot_id, unix_millis(committed_at) AS ms FROM {holder}.snapshots ORDER BY committed_at"
    ).collect()
    holds: list[tuple[float, int]] = []  # (commit time, largest probe id visible)
    for snapshot in snapshots:
        largest = spark.sql(f"SELECT MAX({column}) FROM {holder} VERSION AS OF {snapshot.snapshot_id}").first()[0]
        holds.append((snapshot.ms / 1000, -1 if largest is None else largest))
    latencies: dict[int, float] = {}
    index = 0
    for probe in spark.sql(f"SELECT id, written_at FROM {probes} WHERE id > 0 ORDER BY id").collect():
        while index < len(holds) and holds[index][1] < probe.id:
            index += 1
        if index < len(holds):
            latencies[probe.id] = holds[index][0] - probe.written_at
    return latencies


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _stop_spark(run: EngineRun | None) -> None:
    """Stop the session and its JVM (the bench process goes on, or ends, without them)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    try:
        staging = run.engine.sink.snapshot_staging() if run is not None else None
        if staging is not None:  # the Iceberg sink's own session
            staging.spark.stop()
        elif SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
    finally:
        gateway = SparkContext._gateway
        if gateway is not None:
            process = getattr(gateway, "proc", None)
            gateway.shutdown()
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(30)
            SparkContext._gateway = None
            SparkContext._jvm = None
