"""The `oltp` section: dblog under a production-shaped OLTP load (benchmarks.oltp_load: eight
mixed tables in the database `oltp`, writers (threads of one client process by default)
committing transactions of 1-5 single-row INSERT/UPDATE/DELETE statements).

1. Backlog: the writers run at full speed (or `--oltp-rate`) for `--oltp-seconds`; the GTID
   range they wrote (`@@gtid_binlog_pos` before and after) is then read four times, the same
   bytes each time, one reader at a time:
   - raw mysql-replication decode (benchmarks.physical_limits.binlog_decode): the baseline;
   - dblog's decoder alone: `dblog.mysql.binlog.BinlogSource` iterated from the range's start until
     its position holds the range's end, counting RowChange events;
   - dblog streaming end to end to the null sink, then to the JSON-lines sink: an engine whose
     position was taken before the writers started streams the whole backlog (rate from the
     first change reaching the sink to the last, as the `streaming` section measures it).
   Each must count exactly the row changes the writers committed. Rates are wall-clock rows/s;
   the details add CPU seconds of this process (the engine and decoders run here, the writers
   and the server do not) because the machine is shared.
2. Highest write rate with lag p99 < 1 s: a live engine (null sink) streams while paced writers
   run at a total rate for `--oltp-phase-seconds`, and a probe process inserts timestamped rows
   (benchmarks.timed_sink: arrival at the sink minus the writer's time.time() before the INSERT).
   Each phase starts with the engine caught up. The rate starts at `--oltp-lag-start` (250
   tx/s) and doubles until p99 >= 1 s (then it bisects `--oltp-bisections` times between the
   last good and the failed rate) or until the writers reach less than 90% of it (they share
   the cores with the server and the engine: the machine's ceiling, nothing to bisect). The
   figure is the highest rate the writers achieved in a phase with p99 < 1 s; its details say
   which of the two ended the search.
3. Incremental snapshot under full-speed writers: `orders_by_id` (the run's single-integer-key
   table, `--rows`) snapshotted by an execute-snapshot signal (a row in `oltp.dblog_signal`, read
   through the binlog as a user's would be) to the null sink while the engine also streams the
   OLTP tables: first quiet (no writers), then with the writers at full speed, who stop as soon
   as the snapshot completes or after `--oltp-snapshot-seconds`. The snapshot's time runs from
   its STARTED notification to COMPLETED; lag comes from the probes written meanwhile. Between
   the two, the baseline: a raw pymysql keyset scan of the same table (as the `limits` section's)
   under the same full-speed writers — what this machine leaves of a table read at all while
   the writers and the server share its cores.

Engines run with `source.reader_process` as `--reader-process` says (default auto, as the
engine's: the binlog read and decoded in a second process, dblog.mysql.binlog.process, where two
cores are usable); with a reader process the details add its CPU seconds
(`reader_process_cpu_seconds`) to the engine's.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from benchmarks.dataset import BinlogRange, count_rows, executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, Stopwatch, latency_summary, process_cpu_seconds, rate
from benchmarks.oltp_load import DATABASE, PROBE_TABLE, SIGNAL_TABLE, TABLES, LoadResult, OltpLoad, create_schema
from benchmarks.physical_limits import DECODER_IDS, binlog_decode, keyset_scan, server_pid
from benchmarks.snapshot import snapshot_timeout
from dblog.core.events import Heartbeat, RowChange, TableId, TransactionEnd
from dblog.core.gtid import GtidSet
from dblog.core.sql import quote_identifier as quote
from dblog.demo.localstack import LocalMariaDB
from dblog.mysql.binlog.process import reader_process_wanted

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

SECTION = "oltp"
OLTP_TABLES = [TableId(DATABASE, spec.name) for spec in TABLES]
PROBES = TableId(DATABASE, PROBE_TABLE)
SIGNALS = TableId(DATABASE, SIGNAL_TABLE)
LAG_LIMIT_SECONDS = 1.0


def _writers(options) -> str:
    """How the writers run, for labels: threads of one client, or processes."""
    processes = max(1, min(options.oltp_writer_processes, options.oltp_writers))
    if processes == 1:
        return f"{options.oltp_writers} writer threads in one client process"
    return f"{options.oltp_writers} writers in {processes} client processes"


def _gtid_count(binlog: BinlogRange) -> int:
    """Transactions in a MariaDB GTID range (per domain: end seq - start seq)."""
    def positions(text: str) -> dict[str, int]:
        out = {}
        for part in filter(None, (piece.strip() for piece in text.split(","))):
            domain, _server, seq = part.split("-")
            out[domain] = int(seq)
        return out

    start, end = positions(binlog.start), positions(binlog.end)
    return sum(seq - start.get(domain, 0) for domain, seq in end.items())


def _with_reader(detail: dict[str, Any], engine_cpu: float, reader_cpu: float | None) -> dict[str, Any]:
    """`detail` plus the reader process's CPU seconds and the engine's total, when it has one."""
    if reader_cpu is None:
        return detail
    return {**detail, "reader_process_cpu_seconds": round(reader_cpu, 3),
            "engine_and_reader_cpu_seconds": round(engine_cpu + reader_cpu, 3)}


def _reader_started(run: EngineRun) -> None:
    """With a reader process, wait for the engine's first batch from its reader process: the
    process's start-up (a Python interpreter importing dblog, about 0.3 s here) is reported with the
    backlog (`reader_process_first_batch_seconds`), not counted as streaming lag."""
    if reader_process_wanted(run.config.source.reader_process):
        run.wait_for(lambda: run.reader_started_seconds() is not None, 120, "its binlog reader process started")


def _ops(counts: dict[str, int]) -> str:
    return " ".join(f"{op} {counts.get(op, 0):,}" for op in ("c", "u", "d"))


def dblog_decode(db: LocalMariaDB, binlog: BinlogRange, tables: list[TableId] = OLTP_TABLES,
                 timeout: float = 3600) -> tuple[dict[str, int], int, int, Stopwatch]:
    """dblog's decoder alone over `binlog`, decoding the rows of `tables`' databases: (RowChange
    events per op, transactions, updates that changed the key, timing from the first event to
    the range's last transaction)."""
    from dblog.mysql.binlog import BinlogSource  # being rewritten: import it only when this runs
    from dblog.mysql.source_connection import SourceConnection

    end = GtidSet.parse(binlog.end, "mariadb")
    last = {source: end.last(source) or 0 for source in end.sources()}
    reader = SourceConnection(db.connect)
    for table in tables:
        reader.schemas.schema(table)  # loaded before the clock starts, as a running engine has them
    databases = {table.db for table in tables}
    source = BinlogSource(
        dict(db.connection_settings), server_id=next(DECODER_IDS), start=GtidSet.parse(binlog.start, "mariadb"),
        schema_of=reader.schemas.schema, table_filter=lambda table: table.db in databases, heartbeat_seconds=1,
    )
    ops: dict[str, int] = {}
    transactions = key_changes = 0
    watch = Stopwatch(server_pid(db))
    deadline = time.monotonic() + timeout
    try:
        if end.issubset(source.position):
            return ops, 0, 0, watch.start().stop()
        started = False
        for event in source:
            if not started:
                watch.start()
                started = True
            if isinstance(event, RowChange):
                ops[event.op] = ops.get(event.op, 0) + 1
                if event.before_key is not None:
                    key_changes += 1
            elif isinstance(event, TransactionEnd):
                transactions += 1
                gtid = event.gtid
                if gtid.seq >= last.get(gtid.source, 0) and end.issubset(source.position):
                    break
                if transactions % 1024 == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"binlog range {binlog} not decoded within {timeout:.0f} s")
            elif isinstance(event, Heartbeat):
                if end.issubset(source.position):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"binlog range {binlog} not decoded within {timeout:.0f} s")
        watch.stop()
    finally:
        source.close()
        reader.close()
    return ops, transactions, key_changes, watch


def measure_oltp(ctx: BenchContext) -> None:
    options = ctx.options
    started = time.perf_counter()
    with ctx.db.connect() as connection:
        create_schema(connection, options.oltp_table_rows)
    print(f"  created {DATABASE}: {len(TABLES)} tables of {options.oltp_table_rows:,} rows in "
          f"{time.perf_counter() - started:.1f} s; {_writers(options)}", flush=True)
    phase = time.perf_counter()
    full = _backlog(ctx)
    print(f"  (backlog and decode figures: {time.perf_counter() - phase:.0f} s)", flush=True)
    phase = time.perf_counter()
    _highest_rate(ctx, full)
    print(f"  (rate search: {time.perf_counter() - phase:.0f} s)", flush=True)
    phase = time.perf_counter()
    _snapshot_under_writers(ctx)
    print(f"  (snapshots: {time.perf_counter() - phase:.0f} s)", flush=True)


# --- 1. the backlog and what reads it ---------------------------------------------------------


def _backlog(ctx: BenchContext) -> LoadResult:
    options, db = ctx.options, ctx.db
    jsonl = ctx.workdir / "oltp-stream.jsonl"
    sinks = {"null": {"type": "null"}, "jsonl": {"type": "jsonl", "path": str(jsonl)}}
    # Built (and so positioned) before the writers start: each streams the whole backlog later.
    runs: dict[str, EngineRun] = {}
    try:
        for sink, sink_config in sinks.items():
            runs[sink] = EngineRun(ctx.engine_config(f"oltp-stream-{sink}", OLTP_TABLES, sink_config))
        load = OltpLoad(db.port, options.oltp_writers, options.oltp_seconds, rate=options.oltp_rate,
                        processes=options.oltp_writer_processes).prepare()
        start = executed_gtids(db)
        load.go()
        written = load.wait()
        binlog = BinlogRange(start, executed_gtids(db))
        gtids = _gtid_count(binlog)
        speed = f"{options.oltp_rate:g} tx/s target" if options.oltp_rate else "full speed"
        full = ctx.report(Figure(
            "oltp.writers", SECTION, f"OLTP writers' commit rate ({_writers(options)}, {speed}, "
                                     "no engine running)",
            written.rate, "tx/s",
            check=f"{gtids:,} GTIDs in the range, {written.changed_transactions:,} transactions changed rows",
            check_ok=gtids == written.changed_transactions and written.rows > 0,
            detail={**written.detail(), "binlog_range": [binlog.start, binlog.end],
                    "changed_transactions": written.changed_transactions, "rows_by_table": written.rows_by_table},
        ))

        decoded, watch = binlog_decode(db, binlog, server_id=next(DECODER_IDS))
        oltp_rows = {table: rows for table, rows in decoded.rows.items() if table.startswith(f"{DATABASE}.")}
        baseline = ctx.report(Figure(
            "oltp.decode.mysql-replication", SECTION, "raw binlog decode, mysql-replication (OLTP backlog)",
            rate(decoded.total, watch.wall), "rows/s",
            check=f"{sum(oltp_rows.values()):,} rows decoded, writers committed {written.rows:,} "
                  f"(per table {'equal' if oltp_rows == written.rows_by_table else 'different'})",
            check_ok=oltp_rows == written.rows_by_table and decoded.total == written.rows,
            detail={**watch.detail(decoded.total), "transactions": decoded.transactions},
        ))

        ops, transactions, key_changes, watch = dblog_decode(db, binlog)
        rows = sum(ops.values())
        decoder = ctx.report(Figure(
            "oltp.decode.dblog", SECTION, "dblog's binlog decoder alone, BinlogSource (OLTP backlog)",
            rate(rows, watch.wall), "rows/s", limit=baseline.key,
            check=f"{rows:,} row changes ({_ops(ops)}, {key_changes:,} key changes), writers committed "
                  f"{written.rows:,} ({_ops(written.ops)}, {written.key_changes:,})",
            check_ok=rows == written.rows and all(ops.get(op, 0) == n for op, n in written.ops.items())
            and key_changes == written.key_changes,
            detail={**watch.detail(rows), "transactions": transactions, "ops": ops, "key_changes": key_changes},
        ))

        for sink, run in runs.items():
            cpu = time.process_time()
            run.start()
            run.finish(binlog.end, timeout=600 + written.rows / 500)
            cpu = time.process_time() - cpu
            reader_cpu = run.reader_cpu_seconds()  # what it had used when the engine closed it
            total_cpu = cpu + (reader_cpu or 0.0)
            timed = run.sink
            seconds = (timed.last - timed.first) if timed.first is not None else 0.0
            sink_ops = {op: timed.ops.get(op, 0) for op in ("c", "u", "d")}
            checks = [timed.count == written.rows, sink_ops == written.ops]
            check = f"{timed.count:,} changes reached the sink ({_ops(sink_ops)}), writers committed {written.rows:,}"
            if sink == "jsonl":
                with open(jsonl, "rb") as lines:
                    count = sum(block.count(b"\n") for block in iter(lambda: lines.read(1 << 20), b""))
                lines_expected = written.rows + written.key_changes  # a key change is a delete + a create
                checks.append(count == lines_expected)
                check += f", {count:,} lines in the file ({written.key_changes:,} key changes: {lines_expected:,} expected)"
                jsonl.unlink()
            value = rate(timed.count, seconds)
            versus = value / decoder.value if decoder.value else None
            figure = ctx.report(Figure(
                f"oltp.stream.{sink}", SECTION,
                f"dblog streaming the OLTP backlog, {'null' if sink == 'null' else 'JSON-lines'} sink, first → last change",
                value, "rows/s", limit=baseline.key, check=check, check_ok=all(checks),
                detail=_with_reader({"rows": timed.count, "seconds": round(seconds, 3),
                                     "cpu_seconds_whole_run": round(cpu, 3),
                                     "rows_per_cpu_second": round(timed.count / total_cpu) if total_cpu else None,
                                     "x_decoder_alone": round(versus, 3) if versus else None,
                                     "reader_process_first_batch_seconds": run.reader_started_seconds()},
                                    cpu, reader_cpu),
            ))
            if versus:
                print(f"    = {versus:.2f}× dblog's decoder alone "
                      f"({figure.detail['rows_per_cpu_second']:,} vs {decoder.detail['rows_per_cpu_second']:,} "
                      "rows per CPU-second)", flush=True)
    except BaseException:
        for run in runs.values():
            run.abandon()
        raise
    return written


# --- 2. the highest rate the engine follows with lag p99 < 1 s --------------------------------


def _caught_up(run: EngineRun, db: LocalMariaDB, timeout: float) -> float:
    """Wait until the engine has consumed everything the server has logged; returns the wait."""
    target = GtidSet.parse(executed_gtids(db), "mariadb")
    started = time.perf_counter()
    run.wait_for(lambda: target.issubset(run.capture.position), timeout, "caught up with the writers")
    return time.perf_counter() - started


def _lag_phase(ctx: BenchContext, run: EngineRun, total_rate: float) -> dict[str, Any]:
    options = ctx.options
    _caught_up(run, ctx.db, 600)
    first_probe = len(run.sink.probes)
    cpu, reader_cpu = time.process_time(), run.reader_cpu_seconds()
    load = OltpLoad(ctx.db.port, options.oltp_writers, options.oltp_phase_seconds, rate=total_rate,
                    processes=options.oltp_writer_processes,
                    probe_rate=options.probe_rate).prepare()
    load.go()
    written = load.wait()
    catch_up = _caught_up(run, ctx.db, 600 + written.rows / 500)
    cpu = time.process_time() - cpu
    reader_cpu = None if reader_cpu is None else run.reader_cpu_seconds() - reader_cpu
    probes = run.sink.probes[first_probe:]
    lag = latency_summary([arrived - stamped for _, stamped, arrived in probes])
    outcome = {
        "target_tx_per_second": total_rate, "tx_per_second": round(written.rate, 1),
        "row_changes_per_second": round(written.rows / written.seconds) if written.seconds else None,
        "lag_p50_ms": lag["p50_ms"], "lag_p99_ms": lag["p99_ms"], "lag_max_ms": lag["max_ms"],
        "probes_written": written.probes, "probes_arrived": len(probes), "catch_up_seconds": round(catch_up, 2),
        "engine_cpu_seconds": round(cpu, 2),
        **({} if reader_cpu is None else {"reader_process_cpu_seconds": round(reader_cpu, 2)}),
        "lag_ok": lag["p99_ms"] < LAG_LIMIT_SECONDS * 1000,
        "writers_reached_rate": written.rate >= 0.9 * total_rate,
    }
    verdict = "lag p99 ≥ 1 s" if not outcome["lag_ok"] else "ok" if outcome["writers_reached_rate"] else \
        "lag ok, but the writers reached < 90% of the rate"
    print(f"    {total_rate:,.0f} tx/s target: writers did {written.rate:,.0f} tx/s "
          f"({outcome['row_changes_per_second']:,} rows/s), lag p50/p99 {lag['p50_ms']:,.0f}/{lag['p99_ms']:,.0f} ms"
          f" → {verdict}", flush=True)
    return outcome


def _highest_rate(ctx: BenchContext, full: LoadResult) -> None:
    """Doubling from --oltp-lag-start while the lag holds and the writers reach the rate; after
    a lag failure, bisect between the last good target and the failed one. The figure is the
    highest rate the writers *achieved* in a phase whose lag p99 stayed under the limit: when
    the writers cannot reach a target (they share the cores with the server and the engine),
    what they did reach is still a rate the engine followed."""
    options, db = ctx.options, ctx.db
    run = EngineRun(ctx.engine_config("oltp-lag", [*OLTP_TABLES, PROBES], {"type": "null"}), probe_table=PROBES)
    phases: list[dict[str, Any]] = []
    try:
        run.start()
        _reader_started(run)

        def attempt(total_rate: float) -> dict[str, Any]:
            phases.append(_lag_phase(ctx, run, round(total_rate)))
            return phases[-1]

        good = lag_failed = None
        candidate = float(options.oltp_lag_start)
        for _ in range(10):  # 250 → 128,000 tx/s at most: the writers give out long before
            phase = attempt(candidate)
            if not phase["lag_ok"]:
                lag_failed = candidate
                break
            good = candidate
            if not phase["writers_reached_rate"]:
                break  # the machine's ceiling for the writers while the engine runs: nothing to bisect
            candidate *= 2
        if good is None:  # even the first rate lagged: look below it
            for _ in range(3):
                candidate /= 2
                if attempt(candidate)["lag_ok"]:
                    good = candidate
                    break
                lag_failed = candidate
        for _ in range(options.oltp_bisections):
            if good is None or lag_failed is None or lag_failed - good < 0.1 * good:
                break
            candidate = (good + lag_failed) / 2
            if attempt(candidate)["lag_ok"]:
                good = candidate
            else:
                lag_failed = candidate
        run.finish(executed_gtids(db), timeout=600)
    except BaseException:
        run.abandon()
        raise
    missing = sum(phase["probes_written"] - phase["probes_arrived"] for phase in phases)
    best = max((phase for phase in phases if phase["lag_ok"]), key=lambda phase: phase["tx_per_second"], default=None)
    lagging = [phase for phase in phases if not phase["lag_ok"]]
    if not lagging:
        bound = ("the writers: no phase reached lag p99 ≥ 1 s; the writers could not go faster while the "
                 "engine and the server shared the cores with them")
    else:
        slowest = min(lagging, key=lambda phase: phase["tx_per_second"])
        bound = f"the engine: lag p99 ≥ 1 s from {slowest['tx_per_second']:,.0f} tx/s achieved"
    print(f"    bounded by {bound}", flush=True)
    ctx.report(Figure(
        "oltp.lag-rate", SECTION,
        f"highest OLTP write rate with streaming lag p99 < {LAG_LIMIT_SECONDS:g} s ({options.oltp_writers} paced writers, "
        f"{options.oltp_phase_seconds:g} s phases, null sink)",
        best["tx_per_second"] if best else 0.0, "tx/s", limit="oltp.writers",
        check=f"{sum(p['probes_arrived'] for p in phases):,} of {sum(p['probes_written'] for p in phases):,} "
              f"probes reached the sink over {len(phases)} phases",
        check_ok=missing == 0 and all(p["probes_written"] > 0 for p in phases),
        detail={"target_tx_per_second": best["target_tx_per_second"] if best else None,
                "row_changes_per_second": best["row_changes_per_second"] if best else None,
                "lag_p50_ms": best["lag_p50_ms"] if best else None, "lag_p99_ms": best["lag_p99_ms"] if best else None,
                "bounded_by": bound, "full_speed_writers_tx_per_second_no_engine": round(full.rate, 1),
                "phases": phases},
    ))


# --- 3. the incremental snapshot under full-speed writers -------------------------------------


def _signal_snapshot(db: LocalMariaDB, table: TableId, signal_id: str) -> None:
    db.execute(f"INSERT INTO {quote(SIGNALS.db)}.{quote(SIGNALS.table)} (id, type, data) VALUES (%s, %s, %s)",
               (signal_id, "execute-snapshot",
                json.dumps({"data-collections": [f"{table.db}\\.{table.table}"], "type": "incremental"})))


def _notified(run: EngineRun, kind: str) -> float | None:
    return next((at for at, notification in run.notifications if notification.type == kind), None)


class _ClockedRun(EngineRun):
    """An EngineRun that also notes this process's and the server's CPU seconds at each
    STARTED and COMPLETED notification (the engine runs in this process, the writers do not)."""

    def __init__(self, *args: Any, server: int | None = None, **kwargs: Any) -> None:
        # type -> (process CPU, server CPU, reader process CPU)
        self.clocks: dict[str, tuple[float, float | None, float | None]] = {}
        self._server = server
        super().__init__(*args, **kwargs)

    def _on_notification(self, notification) -> None:
        if notification.type in ("STARTED", "COMPLETED") and notification.type not in self.clocks:
            self.clocks[notification.type] = (
                time.process_time(), process_cpu_seconds(self._server) if self._server else None,
                self.reader_cpu_seconds())
        super()._on_notification(notification)

    def cpu(self) -> dict[str, float | None]:
        started, completed = self.clocks.get("STARTED"), self.clocks.get("COMPLETED")
        if started is None or completed is None:
            return {}
        server = completed[1] - started[1] if completed[1] is not None and started[1] is not None else None
        engine = completed[0] - started[0]
        reader = completed[2] - started[2] if completed[2] is not None and started[2] is not None else None
        return _with_reader({"engine_cpu_seconds": round(engine, 3),
                             "server_cpu_seconds": round(server, 3) if server is not None else None}, engine, reader)


def _snapshot_run(ctx: BenchContext, table: TableId, name: str, load: OltpLoad | None) -> dict[str, Any]:
    """Stream the OLTP tables, signal a snapshot of `table`; with `load`, under its writers."""
    options, db = ctx.options, ctx.db
    config = ctx.engine_config(name, [*OLTP_TABLES, PROBES, table], {"type": "null"},
                     signals={"table": f"{SIGNALS.db}.{SIGNALS.table}"})
    run = _ClockedRun(config, probe_table=PROBES, count_heartbeat_waits=True, server=server_pid(db))
    wall_offset = time.time() - time.perf_counter()
    out: dict[str, Any] = {}
    try:
        run.start()
        _reader_started(run)
        if load is not None:
            load.prepare().go()
            time.sleep(1.0)  # the writers in full swing before the snapshot starts
        signalled = time.perf_counter()
        _signal_snapshot(db, table, name)
        if load is not None:
            while not run.completed.wait(0.1) and load.running() and run.error is None:
                pass
            out["finished_while_writing"] = run.completed.is_set()
            out["rows_read_while_writing"] = run.sink.ops.get("r", 0)
            out["load"] = load.stop()
            out["writers_stopped"] = time.perf_counter()
        run.wait_completed(snapshot_timeout(count_rows(db, table)) + (options.oltp_snapshot_seconds if load else 0))
        completed = run.completed_at
        catch_up = time.perf_counter()
        run.finish(executed_gtids(db), timeout=600)
        out["catch_up_seconds"] = time.perf_counter() - catch_up
    except BaseException:
        if load is not None:
            load.kill()
        run.abandon()
        raise
    started = _notified(run, "STARTED")
    out.update(run=run, signalled=signalled, started=started, completed=completed, wall_offset=wall_offset,
               scanned=run.scanned.get(str(table), 0), emitted=run.sink.ops.get("r", 0))
    return out


def _raw_scan_under_writers(ctx: BenchContext, bench, quiet_figure: Figure) -> Figure:
    """The baseline of the snapshot under writers: a raw keyset scan of the same table while
    the same writers run at full speed (no engine), against the quiet snapshot's rate."""
    options, db = ctx.options, ctx.db
    load = OltpLoad(db.port, options.oltp_writers, options.oltp_snapshot_seconds,
                    processes=options.oltp_writer_processes)
    try:
        load.prepare().go()
        time.sleep(1.0)  # the writers in full swing, as for the snapshot
        rows, watch = keyset_scan(db, bench, options.chunk_size)
        written = load.stop()
    except BaseException:
        load.kill()
        raise
    expected = count_rows(db, bench.table)
    return ctx.report(Figure(
        "oltp.limit.scan.writers", SECTION,
        f"raw keyset scan, pymysql, under {options.oltp_writers} full-speed OLTP writers (orders_by_id)",
        rate(rows, watch.wall), "rows/s", limit=quiet_figure.key,
        check=f"{rows:,} rows read, table has {expected:,}", check_ok=rows == expected,
        detail={**watch.detail(rows), "chunk_size": options.chunk_size, "writers": written.detail()},
    ))


def _snapshot_under_writers(ctx: BenchContext) -> None:
    options, db = ctx.options, ctx.db
    bench = ctx.tables["orders_by_id"]
    table = bench.table
    expected = count_rows(db, table)

    quiet = _snapshot_run(ctx, table, "oltp-snapshot-quiet", None)
    seconds = quiet["completed"] - quiet["started"]
    limit = "limit.scan.orders_by_id" if ctx.results.get("limit.scan.orders_by_id") else None
    quiet_figure = ctx.report(Figure(
        "oltp.snapshot.quiet", SECTION,
        "incremental snapshot by signal, no writers, null sink, engine streaming the OLTP tables (orders_by_id)",
        rate(quiet["scanned"], seconds), "rows/s", limit=limit,
        check=f"{quiet['emitted']:,} snapshot events, {quiet['scanned']:,} scanned, table has {expected:,}",
        check_ok=quiet["emitted"] == quiet["scanned"] == expected,
        detail={"rows": quiet["scanned"], "seconds": round(seconds, 3), **quiet["run"].cpu(),
                "heartbeat_waits": quiet["run"].heartbeat_waits,
                "signal_to_started_seconds": round(quiet["started"] - quiet["signalled"], 3)},
    ))

    scan_figure = _raw_scan_under_writers(ctx, bench, quiet_figure)
    load = OltpLoad(db.port, options.oltp_writers, options.oltp_snapshot_seconds, probe_rate=options.probe_rate,
                    processes=options.oltp_writer_processes)
    busy = _snapshot_run(ctx, table, "oltp-snapshot-writers", load)
    run, written = busy["run"], busy["load"]
    offset = busy["wall_offset"]
    seconds = busy["completed"] - busy["started"]
    window_end = min(busy["completed"], busy["writers_stopped"]) + offset
    window_start = busy["started"] + offset
    during = [arrived - stamped for _, stamped, arrived in run.sink.probes if window_start <= stamped <= window_end]
    lag = latency_summary(during)
    ok = busy["emitted"] == busy["scanned"] == expected
    detail = {
        "rows": busy["scanned"], "seconds": round(seconds, 3), **run.cpu(), "heartbeat_waits": run.heartbeat_waits,
        "finished_before_writers_stopped": busy["finished_while_writing"],
        "rows_read_while_writing": busy["rows_read_while_writing"],
        "signal_to_started_seconds": round(busy["started"] - busy["signalled"], 3),
        "signal_to_completed_seconds": round(busy["completed"] - busy["signalled"], 3),
        "writers_seconds": round(written.seconds, 3), "writers_max_seconds": options.oltp_snapshot_seconds,
        "engine_catch_up_after_completed_seconds": round(busy["catch_up_seconds"], 3),
        "writers": written.detail(),
        "vs_raw_scan_under_writers": round(rate(busy["scanned"], seconds) / scan_figure.value, 3),
    }
    finished = "before" if busy["finished_while_writing"] else "after"
    print(f"    writers: {written.rate:,.0f} tx/s, {written.rows:,} row changes in {written.seconds:.1f} s; the snapshot "
          f"finished {finished} they stopped ({busy['rows_read_while_writing']:,} rows read while they wrote), "
          f"signal → completed {detail['signal_to_completed_seconds']:.1f} s; engine CPU "
          f"{detail.get('engine_and_reader_cpu_seconds', detail.get('engine_cpu_seconds', float('nan'))):.1f} s, "
          f"server CPU "
          f"{detail.get('server_cpu_seconds') or float('nan'):.1f} s in the snapshot's {seconds:.1f} s; "
          f"{detail['vs_raw_scan_under_writers']:.2f}× the raw keyset scan under the same writers", flush=True)
    ctx.report(Figure(
        "oltp.snapshot.writers", SECTION,
        f"incremental snapshot under {options.oltp_writers} full-speed OLTP writers, null sink (orders_by_id)",
        rate(busy["scanned"], seconds), "rows/s", limit=quiet_figure.key,
        check=f"{busy['emitted']:,} snapshot events, {busy['scanned']:,} scanned, table has {expected:,}",
        check_ok=ok, detail=detail,
    ))
    arrived = len(run.sink.probes)
    check = f"{arrived:,} of {written.probes:,} probes reached the sink, {lag['count']:,} during the snapshot"
    for percent in (50, 99):
        ctx.report(Figure(
            f"oltp.snapshot.lag.p{percent}", SECTION,
            f"streaming lag during that snapshot, commit → sink, p{percent}",
            lag[f"p{percent}_ms"], "ms", check=check, check_ok=arrived == written.probes and lag["count"] > 0,
            detail={**lag, "window": "snapshot STARTED → min(COMPLETED, writers stopped)"},
        ))
