"""`scale` part `iceberg` (issue 29, item 2: "Iceberg table creation and commits across that
many targets"; opt-in: `--scale-parts iceberg`, or `tables,iceberg`).

The `scale` database of part `tables` (`benchmarks.scale.create_tables`), at its own size:
`--scale-iceberg-tables` small tables (default 200) of `--scale-table-rows` rows and `big` with as
many rows as all of them. One engine in this process (`EngineRun`) streams every table of `scale`
into Iceberg (a local Spark session, `local[2]`, a scratch Hadoop warehouse, maintenance off,
offsets committed every second as the `iceberg` section does; `--iceberg-write-mode upsert` for
row deltas instead of MERGEs), and in that one run:

- a snapshot of `big` by one signal, signal → the end of the first commit after COMPLETED (its
  Iceberg table created on the way): the baseline;
- a snapshot of all the small tables by one signal (a regex), measured the same way: each small
  table's target is opened at its first rows on the loop's thread (`TargetTables.open`, timed)
  and its Iceberg table created by its first commit on a commit thread (`TargetTables.create`,
  timed: the creation figure), then every commit holds one Iceberg commit per table that changed;
- `--scale-iceberg-transactions` transactions (1–5 single-row UPDATEs each) over random rows of
  `big`, then as many over random small tables, written by one client while the engine streams
  them, from the first write to the end of the commit whose offsets hold the last: rows/s (the
  writing time is in the details: where it is most of it, the writer bounds the figure), and
  Iceberg commits per second (one per changed table per engine commit).

The engine's RSS (this process: the engine, Spark's Python side and the runner; VmHWM reset at
the start, and VmRSS after each phase) is in the details; the Spark JVM is not counted. Checks:
Iceberg holds every small table's rows (one query over all of them) and every change reached
the sink.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from benchmarks.dataset import executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, rate
from benchmarks.process_rss import current_kib, peak_kib, reset_peak
from benchmarks.scale import BIG, DATABASE, SIGNALS, SMALL_PATTERN, create_tables, signal_snapshot, small_table
from benchmarks.scale import write_transactions
from dblog.core.gtid import GtidSet
from dblog.sinks.iceberg.session import QUIET_LOG4J2

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

CATALOG = "lake"


def measure_many_iceberg_tables(ctx: BenchContext) -> None:
    options = ctx.options
    count, rows = options.scale_iceberg_tables, options.scale_table_rows
    print(f"  creating {count:,} tables of {rows:,} rows and one of {count * rows:,} rows", flush=True)
    created = create_tables(ctx.db, count, rows)
    common = {"tables": count, "rows_per_table": rows, "create_seconds": {k: round(v, 1) for k, v in created.items()}}
    log4j = ctx.workdir / "spark-log4j2.properties"
    log4j.write_text(QUIET_LOG4J2)
    master, cluster_conf = ctx.spark_master(2)
    config = ctx.engine_config(
        "scale-iceberg", [], {"type": "iceberg"}, source={"include": [rf"{DATABASE}\..*"]},
        spark={"warehouse": str(ctx.workdir / "scale-warehouse"), "catalog": CATALOG, "master": master,
               "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}",
                        **cluster_conf}},
        iceberg={"maintenance": {"enabled": False}, "write_mode": options.iceberg_write_mode},
        offsets={"commit_interval_seconds": 1.0},
        signals={"table": str(SIGNALS)},
    )
    started = time.perf_counter()
    run = EngineRun(config)
    spark_seconds = time.perf_counter() - started
    run.sink.spark.sparkContext.setLogLevel("ERROR")
    opened, created = _time_table_opens(run)
    reset_peak()
    rss: dict[str, float] = {"at_start": current_kib() / 1024}
    try:
        run.start()
        big = _snapshot(ctx, run, BIG_SIGNAL, rf"{DATABASE}\.big", count * rows)
        rss["after_big_snapshot"] = current_kib() / 1024
        opened.clear()
        created.clear()
        many = _snapshot(ctx, run, MANY_SIGNAL, SMALL_PATTERN, count * rows)
        opening, creation = list(opened), list(created)
        rss["after_many_snapshot"] = current_kib() / 1024
        streaming = {}
        for key, tables, table_rows in (("one", [BIG], count * rows),
                                         ("many", [small_table(index) for index in range(count)], rows)):
            streaming[key] = _stream(ctx, run, tables, table_rows)
            rss[f"after_streaming_{key}"] = current_kib() / 1024
        landed = _rows_in_iceberg(run, count)
        run.finish(executed_gtids(ctx.db))
    except BaseException:
        run.abandon()
        raise
    finally:
        peak_mib = peak_kib() / 1024
        if run.sink.spark is not None:
            run.sink.spark.stop()
    common.update(spark_start_seconds=round(spark_seconds, 1), write_mode=options.iceberg_write_mode)
    rss_detail = {key: round(value, 1) for key, value in rss.items()}
    expected = count * rows
    create_seconds = sum(seconds for _, seconds in creation)
    open_seconds = sum(seconds for _, seconds in opening)
    ctx.report(Figure(
        "scale.iceberg.create", "scale", f"Iceberg tables created by their first commits, {len(creation):,} tables: "
                                        "mean time each (`TargetTables.create`, on the commit threads)",
        1000 * create_seconds / max(1, len(creation)), "ms",
        check=f"{len(creation):,} tables created, {len(opening):,} opened, for {count:,} small tables",
        check_ok=len(creation) == len(opening) == count,
        detail={**common, "seconds_total": round(create_seconds, 1),
                "share_of_snapshot": round(create_seconds / many["seconds"], 2),
                "slowest_ms": round(1000 * max((s for _, s in creation), default=0), 1),
                # what the loop's thread spends on them (`TargetTables.open`: the catalog asked
                # whether the table exists, the target built)
                "open_ms_mean": round(1000 * open_seconds / max(1, len(opening)), 1),
                "open_share_of_snapshot": round(open_seconds / many["seconds"], 2)}))
    baseline = ctx.report(Figure(
        "scale.iceberg.snapshot.one", "scale",
        f"incremental snapshot into Iceberg of one {expected:,}-row table by a signal, signal → committed",
        rate(big["rows"], big["seconds"]), "rows/s", check=f"{big['rows']:,} rows scanned of {expected:,}",
        check_ok=big["rows"] == expected, detail={**common, **big}))
    ctx.report(Figure(
        "scale.iceberg.snapshot.many", "scale",
        f"incremental snapshot into Iceberg of {count:,} tables × {rows:,} rows by one signal, signal → committed",
        rate(many["rows"], many["seconds"]), "rows/s", limit=baseline.key,
        check=f"{many['rows']:,} rows scanned; Iceberg holds {landed:,} rows of the {expected:,} of the small tables",
        check_ok=many["rows"] == expected and landed == expected, detail={**common, **many}))
    line: Figure | None = None
    for key in ("one", "many"):
        result = streaming[key]
        label = (f"streaming {result['transactions']:,} transactions (1–5 single-row updates) into Iceberg over "
                 + (f"one {expected:,}-row table" if key == "one" else f"{count:,} random tables"))
        figure = ctx.report(Figure(
            f"scale.iceberg.streaming.{key}", "scale", label, rate(result["rows"], result["seconds"]), "rows/s",
            limit=line.key if line is not None else None,
            check=f"{result['rows']:,} changes reached the sink, {result['changed']:,} made",
            check_ok=result["rows"] == result["changed"], detail={**common, **result}))
        line = line or figure
    ctx.report(Figure(
        "scale.iceberg.rss", "scale", f"peak RSS of the process running the Iceberg engine over {count + 2:,} tables "
                                      "(engine, Spark's Python side, the runner; not the JVM)",
        peak_mib, "MiB", detail={**common, "rss_mib": rss_detail}))


BIG_SIGNAL, MANY_SIGNAL = "scale-iceberg-big", "scale-iceberg-many"


def _time_table_opens(run: EngineRun) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Every `TargetTables.open` of the sink from now on (on the loop's thread), and every table
    creation (`TargetTables.create` of a target not created yet, on a commit thread): (table,
    seconds) each."""
    tables = run.sink.inner._tables
    open_table, create_table = tables.open, tables.create
    opened: list[tuple[str, float]] = []
    created: list[tuple[str, float]] = []

    def timed_open(name, source, sharded):
        started = time.perf_counter()
        target = open_table(name, source, sharded)
        opened.append((str(name), time.perf_counter() - started))
        return target

    def timed_create(target):
        creates, started = not target.created, time.perf_counter()
        create_table(target)
        if creates:
            created.append((str(target.table), time.perf_counter() - started))

    tables.open, tables.create = timed_open, timed_create
    return opened, created


def _completed(run: EngineRun) -> int:
    return sum(1 for _, notification in run.notifications if notification.type == "COMPLETED")


def _snapshot(ctx: BenchContext, run: EngineRun, name: str, pattern: str, expected: int) -> dict[str, Any]:
    """Signal a snapshot of `pattern`; seconds from the signal to the end of the last commit
    it needed: after its COMPLETED, once a commit has started, the sink holds nothing pending
    and no table is committing (each table commits on its own: the first commit after
    COMPLETED need not hold them all). And what the commits meanwhile held."""
    completed = _completed(run)
    commits_before = len(run.sink.table_commits)
    scanned_before = dict(run.scanned)
    signalled, wall = time.perf_counter(), time.time()
    signal_snapshot(ctx.db, pattern, name)
    run.wait_for(lambda: _completed(run) > completed, 1800 + expected / 200, f"snapshot {name} completed")
    done = time.time()
    sink = run.sink
    run.wait_for(lambda: any(start >= done for start, _, _ in sink.table_commits[commits_before:])
                 and sink.pending_rows == 0 and sink.committing == 0, 600, f"the commits after snapshot {name}")
    commits = sink.table_commits[commits_before:]
    end = max(ended for _, ended, _ in commits)
    scanned = sum(rows for table, rows in run.scanned.items() if scanned_before.get(table) != rows)
    seconds = end - wall
    return {"rows": scanned, "seconds": round(seconds, 3), "iceberg_commits": sum(len(tables) for _, _, tables in commits),
            "commit_seconds_total": round(sum(ended - start for start, ended, _ in commits), 1),
            "commit_share": round(sum(ended - start for start, ended, _ in commits) / seconds, 2)}


def _rows_in_iceberg(run: EngineRun, count: int) -> int:
    """Rows of every small table's Iceberg table, in one query."""
    spark = run.sink.spark
    union = " UNION ALL ".join(f"SELECT COUNT(*) AS n FROM {CATALOG}.{DATABASE}.{small_table(index).table}"
                               for index in range(count))
    return spark.sql(f"SELECT SUM(n) FROM ({union})").first()[0]


def _stream(ctx: BenchContext, run: EngineRun, tables, table_rows: int) -> dict[str, Any]:
    """A backlog of transactions over random rows of `tables`, streamed by the running engine:
    from its first change reaching the sink to the end of the commit whose offsets hold its last."""
    transactions = ctx.options.scale_iceberg_transactions
    count_before, commits_before = run.sink.count, len(run.sink.table_commits)
    started, first = time.perf_counter(), time.time()  # the engine streams them as they are written
    changed = write_transactions(ctx.db, tables, table_rows, transactions, seed=29)
    written = time.perf_counter() - started
    target = GtidSet.parse(executed_gtids(ctx.db), "mariadb")
    store = run.engine.store

    def committed() -> bool:
        offsets = store.load()
        return offsets is not None and target.issubset(offsets.position)

    run.wait_for(committed, 1800 + changed / 20, "the transactions committed into Iceberg")
    commits = run.sink.table_commits[commits_before:]
    end = max((ended for _, ended, _ in commits), default=time.time())
    seconds = end - first
    iceberg_commits = sum(len(tables) for _, _, tables in commits)
    return {"rows": run.sink.count - count_before, "changed": changed, "transactions": transactions,
            "seconds": round(seconds, 3), "write_seconds": round(written, 1), "iceberg_commits": iceberg_commits,
            "iceberg_commits_per_second": round(iceberg_commits / seconds, 2),
            "commit_seconds_mean": round(sum(e - s for s, e, _ in commits) / max(1, len(commits)), 3)}
