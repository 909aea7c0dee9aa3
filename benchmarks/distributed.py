"""Backfills read by Spark tasks (`snapshot.distributed = true`) into Iceberg, with 1, 2 and 4
tasks (`--distributed-tasks`): `orders` is snapshotted on a quiet database, from the
`execute-snapshot` signal to the end of the first commit after COMPLETED, as the `iceberg`
section measures the engine's own reads. Each run has a warehouse of its own and a Spark
session with max(tasks, 2) cores: `local[N]`, or N one-core executors of the standalone cluster
with --spark-master=cluster (4 is more cores than this machine has: the tasks then share the
two cores with MariaDB and the JVM's writes)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from benchmarks.dataset import ORDERS, SIGNALS, count_rows, executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, rate
from benchmarks.iceberg import CATALOG, CUSTOMERS, _iceberg_name, _stop_spark, snapshot_orders_into_iceberg
from dblog.sinks.iceberg.session import QUIET_LOG4J2

if TYPE_CHECKING:
    from benchmarks.context import BenchContext


def measure_distributed(ctx: BenchContext) -> None:
    limit = ctx.keyset_scan_limit("orders")
    expected = count_rows(ctx.db, ORDERS)
    for tasks in ctx.options.distributed_tasks:
        _measure(ctx, tasks, limit, expected)


def _measure(ctx: BenchContext, tasks: int, limit: str, expected: int) -> None:
    options = ctx.options
    log4j = ctx.workdir / "spark-log4j2.properties"
    log4j.write_text(QUIET_LOG4J2)
    master, cluster_conf = ctx.spark_master(max(tasks, 2))
    config = ctx.engine_config(
        f"distributed-{tasks}", [ORDERS, CUSTOMERS], {"type": "iceberg"},
        spark={"warehouse": str(ctx.workdir / f"warehouse-{tasks}"), "catalog": CATALOG, "master": master,
               "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}",
                        **cluster_conf}},
        iceberg={"maintenance": {"enabled": False}},
        snapshot={"distributed": True, "distributed_tasks": tasks,
                  "distributed_range_rows": options.distributed_range_rows,
                  "distributed_window_rows": options.distributed_window_rows},
        offsets={"commit_interval_seconds": options.iceberg_commit_seconds},
        signals={"table": str(SIGNALS)},
    )
    run = None
    try:
        run = EngineRun(config)
        run.sink.spark.sparkContext.setLogLevel("ERROR")
        run.start()
        ctx.db.execute(f"UPDATE {CUSTOMERS.db}.{CUSTOMERS.table} SET balance = balance + 1 WHERE id = 1")
        run.wait_for(lambda: run.sink.committed_position(CUSTOMERS) is not None, 600, "the first Iceberg commit")
        cpu_before = time.process_time()
        signalled, committed = snapshot_orders_into_iceberg(run, expected, f"bench-distributed-{tasks}")
        seconds = committed - signalled
        engine_cpu = time.process_time() - cpu_before
        scanned = run.scanned.get(str(ORDERS), 0)
        run.finish(executed_gtids(ctx.db), timeout=900)
        lake = run.sink.spark.sql(f"SELECT COUNT(*) FROM {_iceberg_name(ORDERS)}").first()[0]
    except BaseException:
        if run is not None:
            run.abandon()
        raise
    finally:
        _stop_spark(run)
    ctx.report(Figure(
        f"distributed.snapshot.{tasks}", "distributed",
        f"incremental snapshot into Iceberg read by {tasks} Spark task{'s' if tasks > 1 else ''} at once, "
        "signal → last MERGE committed (orders)",
        rate(scanned, seconds), "rows/s", limit=limit,
        check=f"{scanned:,} scanned of {expected:,}; Iceberg holds {lake:,}",
        check_ok=scanned == expected and lake == expected,
        detail={"rows": scanned, "seconds": round(seconds, 3), "tasks": tasks, "spark_master": master, "spark_cores": max(tasks, 2),
                "range_rows": options.distributed_range_rows, "window_rows": options.distributed_window_rows,
                "engine_process_cpu_seconds": round(engine_cpu, 2)},
    ))
