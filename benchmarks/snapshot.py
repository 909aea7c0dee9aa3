"""dblog's incremental snapshot: of a quiet table (null and JSON-lines sinks), and of a table
under a concurrent write load (snapshot rate, and the streaming lag of probe rows meanwhile).

The snapshot is queued before the loop starts, as `snapshot.startup = "initial"` would; its time
runs from the loop's start to the COMPLETED notification. On a quiet table every chunk's window
closes as soon as it is read (nothing happened between the watermarks), so this is the chunk
pipeline alone: SELECT, normalize, window, envelope, sink.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from benchmarks.dataset import ORDERS, PROBES, count_rows, executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, latency_summary, process_cpu_seconds, rate
from benchmarks.load_generator import LoadGenerator
from benchmarks.physical_limits import server_pid
from dblog.core.events import TableId

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

SINK_NAMES = {"null": "null sink", "jsonl": "JSON-lines sink"}


def snapshot_timeout(rows: int) -> float:
    return 600 + rows / 1000  # 1,000 rows/s would be pathological: stop rather than hang


def measure_quiet_snapshots(ctx: BenchContext) -> None:
    for sink in ("null", "jsonl"):
        for name in ctx.tables:
            quiet_snapshot(ctx, name, sink)


def measure_parallel_snapshots(ctx: BenchContext) -> None:
    """The quiet snapshot to the null sink with 1, 2 and 4 connections reading each window's
    chunks at once; each parallel figure is measured against the one-connection run."""
    for name in ctx.tables:
        for parallel_reads in (1, 2, 4):
            quiet_snapshot(ctx, name, "null", parallel_reads)


def quiet_snapshot(ctx: BenchContext, name: str, sink: str, parallel_reads: int | None = None) -> Figure:
    """`parallel_reads` None: the default engine; a number: the parallel-reads series."""
    table = ctx.tables[name]
    limit = ctx.keyset_scan_limit(name)
    key, label = f"snapshot.{sink}.{name}", f"incremental snapshot, quiet table, {SINK_NAMES[sink]} ({name})"
    if parallel_reads is not None:
        if parallel_reads > 1:
            limit = f"snapshot.parallel1.{name}"
        key = f"snapshot.parallel{parallel_reads}.{name}"
        label = (f"incremental snapshot, quiet table, {SINK_NAMES[sink]}, {parallel_reads} "
                 f"connection{'s' if parallel_reads > 1 else ''} per window ({name})")
    expected = count_rows(ctx.db, table.table)
    path = ctx.workdir / f"snapshot-{name}.jsonl"
    sink_config = {"type": sink} if sink == "null" else {"type": "jsonl", "path": str(path)}
    run = EngineRun(ctx.engine_config(key, [table.table], sink_config,
                                      snapshot={"parallel_reads": parallel_reads or 1}), count_heartbeat_waits=True)
    pid = server_pid(ctx.db)
    try:
        run.request_snapshot([table.table])
        server_cpu = process_cpu_seconds(pid) if pid else None
        run.start()
        run.wait_completed(snapshot_timeout(table.rows))
        server_cpu = process_cpu_seconds(pid) - server_cpu if server_cpu is not None else None
        run.finish()
    except BaseException:
        run.abandon()
        raise
    emitted = run.sink.ops.get("r", 0)
    scanned = run.scanned.get(str(table.table))
    checks = [emitted == expected, scanned == expected]
    check = f"{emitted:,} snapshot events, {scanned:,} scanned, table has {expected:,}"
    if sink == "jsonl":
        with open(path, "rb") as lines:
            written = sum(block.count(b"\n") for block in iter(lambda: lines.read(1 << 20), b""))
        checks.append(written == expected)
        check += f", {written:,} lines in the file"
        path.unlink()
    seconds = run.snapshot_seconds
    detail = {
        "rows": emitted, "seconds": round(seconds, 3), "cpu_seconds": round(run.snapshot_cpu_seconds, 3),
        "rows_per_cpu_second": round(emitted / run.snapshot_cpu_seconds) if run.snapshot_cpu_seconds else None,
        "heartbeat_waits": run.heartbeat_waits,
    }
    if server_cpu is not None:
        detail["server_cpu_seconds"] = round(server_cpu, 3)
    return ctx.report(Figure(
        key, "snapshot" if parallel_reads is None else "parallel", label,
        rate(emitted, seconds), "rows/s", limit=limit, check=check, check_ok=all(checks), detail=detail,
    ))


def measure_snapshot_under_load(ctx: BenchContext) -> None:
    """`orders` snapshotted while the load generator writes to it (and to `customers` and the
    probe table); the engine streams all three to the null sink meanwhile."""
    options = ctx.options
    table = ctx.tables["orders"]
    limit = ctx.keyset_scan_limit("orders")
    ctx.db.execute(f"TRUNCATE TABLE {PROBES.db}.{PROBES.table}")
    before = count_rows(ctx.db, ORDERS)
    generator = LoadGenerator(ctx.db.port, table.rows, options.writers, options.write_rate, options.probe_rate)
    # The engine takes its binlog position first, so that it streams every probe the writers make.
    captured = [ORDERS, TableId(ORDERS.db, "customers"), PROBES]
    run = EngineRun(ctx.engine_config("under-load", captured, {"type": "null"}), probe_table=PROBES,
                    count_heartbeat_waits=True)
    try:
        run.request_snapshot([ORDERS])
        generator.start()
        snapshot_started = time.time()
        run.start()
        run.wait_completed(snapshot_timeout(table.rows))
        snapshot_ended = time.time()
        load = generator.stop()
        run.finish(executed_gtids(ctx.db), timeout=600)
    except BaseException:
        generator.kill()
        run.abandon()
        raise
    seconds = run.snapshot_seconds
    scanned = run.scanned.get(str(ORDERS), 0)
    emitted = run.sink.ops.get("r", 0)
    writes = load["writes"]
    source_probes = {row[0] for row in ctx.db.execute(f"SELECT id FROM {PROBES.db}.{PROBES.table}")}
    arrived = {probe_id for probe_id, _, _ in run.sink.probes}
    missing = sorted(source_probes - arrived)
    during = [arrived_at - written for _, written, arrived_at in run.sink.probes
              if snapshot_started <= written <= snapshot_ended]
    lag = latency_summary(during)
    writes_per_second = writes / (time.time() - generator.started_at) if generator.started_at else None
    common = {
        "writers": options.writers, "write_rate_per_writer": options.write_rate,
        "writes": writes, "writes_per_second": round(writes_per_second or 0), "probes": load["probes"],
    }
    ctx.report(Figure(
        "under-load.snapshot", "under-load", f"incremental snapshot under {options.writers} writers (orders)",
        rate(scanned, seconds), "rows/s", limit=limit,
        check=f"{scanned:,} scanned (table had {before:,}, {writes:,} writes meanwhile), {emitted:,} emitted",
        check_ok=abs(scanned - before) <= writes and emitted <= scanned,
        detail={**common, "rows": scanned, "emitted": emitted, "seconds": round(seconds, 3),
                "cpu_seconds": round(run.snapshot_cpu_seconds, 3), "heartbeat_waits": run.heartbeat_waits,
                "events_streamed": run.sink.count - emitted},
    ))
    check = f"{len(arrived & source_probes):,} of {len(source_probes):,} probe rows reached the sink"
    if missing:
        check += f" (missing ids {missing[:5]})"
    for percent in (50, 99):
        ctx.report(Figure(
            f"under-load.lag.p{percent}", "under-load",
            f"streaming lag during that snapshot, commit → sink, p{percent}",
            lag[f"p{percent}_ms"], "ms", check=check, check_ok=not missing and bool(source_probes),
            detail={**common, **lag},
        ))
