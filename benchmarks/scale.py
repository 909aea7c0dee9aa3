"""`scale`: dblog at sizes its tests never meet. Part `tables` (issue 29, item 2): many
captured tables.

A database `scale` gets `--scale-tables` small tables `t00000`… (an INT key and three more
columns, `--scale-table-rows` rows each) and one large table `big` with as many rows as all the
small ones together: the baseline of every many-table figure, measured in the same run. They are
written without binlog (`sql_log_bin = 0`): only their number and size matter.

What is measured, every engine with the JSON-lines sink:

- start-up, in a `dblog run` process: from spawning it to `/readyz` answering 200 (the binlog
  reader connected and an event handled: streaming), capturing every table of `scale`, against
  the same process capturing one table on the same server;
- in that process, a snapshot of all the small tables by one `execute-snapshot` signal (a
  regex): its peak RSS (engine process and binlog reader process, VmHWM each), `/metrics` (size,
  series, per-table series, time to serve) while the snapshot runs and after, the offsets file
  and `dblog status` (size, time) once it completed;
- in-process (`EngineRun`, timed by its notifications): the snapshot of all the small tables by
  one signal against the snapshot of `big` by another, rows/s from the signal's commit to
  COMPLETED; the offsets documents written meanwhile (size, time of each save);
- in-process: a backlog of `--scale-transactions` transactions (1–5 single-row UPDATEs each)
  spread over random small tables, streamed first → last change, against the same transactions
  on random rows of `big`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from benchmarks.dataset import executed_gtids
from benchmarks.engine_run import SERVER_IDS, EngineRun
from benchmarks.figures import Figure, process_cpu_seconds, rate
from benchmarks.process_rss import current_kib, peak_kib
from dblog.core.events import TableId
from dblog.core.offsets import Offsets
from dblog.core.sql import quote_identifier as quote
from dblog.demo.localstack import LocalMariaDB
from dblog.runtime.status import describe

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

DATABASE = "scale"
SIGNALS = TableId(DATABASE, "dblog_signal")
PROBE = TableId(DATABASE, "probe")
BIG = TableId(DATABASE, "big")
SMALL_PATTERN = r"scale\.t\d+"
SMALL_COLUMNS = "id INT NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL, amount DECIMAL(10,2), updated DATETIME"
_ROW = "seq, CONCAT('name ', seq), (seq * 7919 % 100000) / 100, TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND"


def small_table(index: int) -> TableId:
    return TableId(DATABASE, f"t{index:05d}")


def measure_scale(ctx: BenchContext) -> None:
    if "tables" in ctx.options.scale_parts:
        measure_many_tables(ctx)
    if "backlog" in ctx.options.scale_parts:
        from benchmarks.backlog import measure_backlog  # it builds on this module's DblogProcess

        measure_backlog(ctx)
    if "iceberg" in ctx.options.scale_parts:
        from benchmarks.scale_iceberg import measure_many_iceberg_tables  # imports Spark's side

        measure_many_iceberg_tables(ctx)


# --- the tables ------------------------------------------------------------------------------


def create_tables(db: LocalMariaDB, count: int, rows: int) -> dict[str, float]:
    """`count` small tables of `rows` rows and `big` of count × rows rows; seconds each took."""
    seconds: dict[str, float] = {}
    with db.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cursor.execute(f"CREATE DATABASE {DATABASE}")
        cursor.execute(f"USE {DATABASE}")
        cursor.execute(f"CREATE TABLE {SIGNALS.table} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                       "data TEXT NULL)")
        cursor.execute(f"CREATE TABLE {PROBE.table} (id BIGINT NOT NULL PRIMARY KEY, written_at DOUBLE NOT NULL)")
        started = time.perf_counter()
        for index in range(count):
            name = quote(small_table(index).table)
            cursor.execute(f"CREATE TABLE {name} ({SMALL_COLUMNS})")
            cursor.execute(f"INSERT INTO {name} SELECT {_ROW} FROM seq_1_to_{rows}")
            if index % 500 == 499:
                connection.commit()
        connection.commit()
        seconds["small_tables"] = time.perf_counter() - started
        started = time.perf_counter()
        cursor.execute(f"CREATE TABLE {BIG.table} ({SMALL_COLUMNS})")
        total, batch = count * rows, 200_000
        for first in range(1, total + 1, batch):
            cursor.execute(f"INSERT INTO {BIG.table} SELECT {_ROW} FROM seq_{first}_to_{min(first + batch - 1, total)}")
            connection.commit()
        seconds["big_table"] = time.perf_counter() - started
    return seconds


def signal_snapshot(db: LocalMariaDB, pattern: str, name: str) -> None:
    """One `execute-snapshot` signal row for the tables `pattern` matches."""
    data = json.dumps({"data-collections": [pattern], "type": "incremental"})
    db.execute(f"INSERT INTO {SIGNALS.db}.{SIGNALS.table} (id, type, data) VALUES (%s, 'execute-snapshot', %s)",
               (name, data))


# --- the whole section ----------------------------------------------------------------------------


def measure_many_tables(ctx: BenchContext) -> None:
    options = ctx.options
    count, rows = options.scale_tables, options.scale_table_rows
    print(f"  creating {count:,} tables of {rows:,} rows and one of {count * rows:,} rows", flush=True)
    created = create_tables(ctx.db, count, rows)
    print(f"  created in {created['small_tables']:.1f} s + {created['big_table']:.1f} s", flush=True)
    common = {"tables": count, "rows_per_table": rows, "create_seconds": {k: round(v, 1) for k, v in created.items()}}
    _process_figures(ctx, count, rows, common)
    _snapshot_figures(ctx, count, rows, common)
    _streaming_figures(ctx, count, rows, common)


# --- `dblog run` in its own process: start-up, RSS, /metrics, status -----------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class DblogProcess:
    """`python -m dblog.cli run` capturing `include`, with the HTTP endpoint on a free port."""

    def __init__(self, ctx: BenchContext, name: str, include: list[str], signals: TableId = SIGNALS,
                 reader_process: bool | None = None, kafka_bootstrap: str | None = None) -> None:
        """The JSON-lines sink, or with `kafka_bootstrap` the Kafka sink to that broker."""
        self.port = _free_port()
        self.workdir = ctx.workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "dblog.toml"
        self.offsets = self.workdir / "offsets.json"
        self.sink_path = self.workdir / "changes.jsonl"
        source: dict[str, Any] = {"port": ctx.db.port, "user": ctx.db.user, "password": ctx.db.password,
                                  "server_id": next(SERVER_IDS), "include": include}
        if reader_process is not None:  # else `--reader-process`
            source["reader_process"] = reader_process
        elif ctx.options.reader_process != "auto":
            source["reader_process"] = ctx.options.reader_process == "on"
        config: dict[str, Any] = {
            "name": f"bench-{name}", "source": source,
            "signals": {"table": str(signals)},
            "snapshot": {"startup": "never", "chunk_size": ctx.options.chunk_size},
            "sink": {"type": "jsonl", "path": str(self.sink_path)},
            "offsets": {"path": str(self.offsets)},
            "http": {"port": self.port},
        }
        if kafka_bootstrap is not None:
            config["sink"] = {"type": "kafka"}
            config["kafka"] = {"bootstrap_servers": kafka_bootstrap}
        self.config_path.write_text(tomli_w.dumps(config))
        self.log = self.workdir / "engine.log"
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0

    def spawn(self) -> None:
        self.started_at = time.perf_counter()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "dblog.cli", "--log-level", "warning", "run",
                                             "--config", str(self.config_path)], stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> float:
        """Spawn it; seconds until /readyz says 200."""
        self.spawn()
        deadline = time.monotonic() + 600
        while _get(f"http://127.0.0.1:{self.port}/readyz", timeout=5)[0] != 200:
            if self.process.poll() is not None:
                raise RuntimeError(f"dblog run exited with {self.process.returncode}: {self.log.read_text()[-800:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("dblog run not ready within 600 s")
            time.sleep(0.02)
        return time.perf_counter() - self.started_at

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def peaks_kib(self) -> dict[str, int]:
        return self._per_process(peak_kib)

    def current_kib(self) -> dict[str, int]:
        """VmRSS now: the engine process and its binlog reader process."""
        return self._per_process(current_kib)

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU seconds so far: the engine process and its binlog reader process."""
        return {name: seconds or 0.0 for name, seconds in self._per_process(process_cpu_seconds).items()}

    def _per_process(self, read) -> dict[str, Any]:
        found = {"engine": read(self.pid)}
        for child in _children(self.pid):
            try:
                found["reader"] = max(found.get("reader", 0), read(child))
            except (OSError, LookupError):
                pass
        return found

    def metrics(self) -> dict[str, Any]:
        started = time.perf_counter()
        status, body = _get(f"http://127.0.0.1:{self.port}/metrics")
        seconds = time.perf_counter() - started
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
        return {"bytes": len(body), "seconds": round(seconds, 3), "series": len(lines),
                "table_series": sum('table="' in line for line in lines),
                "text": body.decode()}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _completed_tables(offsets: Path, snapshot_id: str) -> int:
    """Tables the committed offsets say the snapshot `snapshot_id` completed (0 before it starts)."""
    try:
        progress = json.loads(offsets.read_text()).get("snapshot") or {}
    except (OSError, ValueError):
        return 0
    return len(progress.get("completed_tables") or []) if progress.get("snapshot_id") == snapshot_id else 0


def _process_figures(ctx: BenchContext, count: int, rows: int, common: dict[str, Any]) -> None:
    one = DblogProcess(ctx, "scale-start-one", [rf"{DATABASE}\.{PROBE.table}"])
    try:
        one_seconds = one.start()
        one_rss = current_kib(one.pid)
    finally:
        one.stop()
    baseline = ctx.report(Figure(
        "scale.startup.one", "scale", "start-up to streaming, `dblog run` capturing 1 table (same server)",
        one_seconds * 1000, "ms", detail={**common, "rss_mib_at_ready": round(one_rss / 1024, 1)}))
    engine = DblogProcess(ctx, "scale-process", [rf"{DATABASE}\..*"])
    try:
        seconds = engine.start()
        rss_ready = current_kib(engine.pid)
        ctx.report(Figure(
            "scale.startup", "scale", f"start-up to streaming, `dblog run` capturing {count + 2:,} tables",
            seconds * 1000, "ms", limit=baseline.key,
            detail={**common, "rss_mib_at_ready": round(rss_ready / 1024, 1)}))
        signal_snapshot(ctx.db, SMALL_PATTERN, "scale-process-small")
        signalled = time.perf_counter()
        during: dict[str, Any] | None = None
        deadline = time.monotonic() + 600 + count * rows / 1000
        # Followed in the offsets file (committed every second), not by scraping /metrics
        # meanwhile: a scrape of 10,000 tables' series takes the engine's process most of a
        # second. /metrics is scraped once, half-way.
        while True:
            time.sleep(0.5)
            completed = _completed_tables(engine.offsets, "scale-process-small")
            if during is None and completed >= count // 2:
                during = engine.metrics()
            if completed >= count:
                break
            if engine.process.poll() is not None:
                raise RuntimeError(f"dblog run exited: {engine.log.read_text()[-800:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("the snapshot of the small tables did not complete")
        snapshot_seconds = time.perf_counter() - signalled
        peaks = engine.peaks_kib()
        after = engine.metrics()
        during = during or after
        offsets_bytes = engine.offsets.stat().st_size
        started = time.perf_counter()
        status = subprocess.run([sys.executable, "-m", "dblog.cli", "status", "--config", str(engine.config_path)],
                                capture_output=True, text=True, timeout=300)
        status_seconds = time.perf_counter() - started
    finally:
        engine.stop()
    lines = sum(1 for _ in open(engine.sink_path, "rb"))
    expected = count * rows
    engine.sink_path.unlink(missing_ok=True)
    total_mib = sum(peaks.values()) / 1024
    ctx.report(Figure(
        "scale.rss", "scale",
        f"peak RSS of `dblog run` capturing {count:,} tables, through a snapshot of all of them: engine + reader",
        total_mib, "MiB", check=f"{lines:,} lines written, {expected:,} rows in the small tables",
        check_ok=lines >= expected,
        detail={**common, "engine_peak_mib": round(peaks["engine"] / 1024, 1),
                "reader_peak_mib": round(peaks.get("reader", 0) / 1024, 1),
                "engine_rss_mib_at_ready": round(rss_ready / 1024, 1), "snapshot_seconds": round(snapshot_seconds, 1)}))
    for key, label, metrics in (("during", "half-way through the snapshot", during), ("after", "after it", after)):
        ctx.report(Figure(
            f"scale.metrics.{key}", "scale", f"/metrics with {count:,} tables {label}: series",
            metrics["series"], "series",
            detail={"bytes": metrics["bytes"], "seconds": metrics["seconds"], "table_series": metrics["table_series"],
                    "series": metrics["series"]}))
    ctx.report(Figure(
        "scale.status", "scale", f"`dblog status` after a snapshot of {count:,} tables: time (whole command)",
        status_seconds * 1000, "ms", check=f"exit status {status.returncode}", check_ok=status.returncode == 0,
        detail={"bytes": len(status.stdout), "lines": status.stdout.count("\n") + 1, "offsets_bytes": offsets_bytes}))


# --- in-process: snapshot rates and the offsets written meanwhile ---------------------------------


def _engine_run(ctx: BenchContext, name: str) -> tuple[EngineRun, Path, list[tuple[float, int]]]:
    sink_path = ctx.workdir / f"{name}.jsonl"
    config = ctx.engine_config(name, [], {"type": "jsonl", "path": str(sink_path)},
                               source={"include": [rf"{DATABASE}\..*"]}, signals={"table": str(SIGNALS)})
    run = EngineRun(config)
    saves: list[tuple[float, int]] = []  # (seconds, bytes) of every offsets save
    store = run.engine.store
    save = store.save

    def timed_save(offsets: Offsets) -> None:
        started = time.perf_counter()
        save(offsets)
        saves.append((time.perf_counter() - started, store.path.stat().st_size))

    store.save = timed_save
    return run, sink_path, saves


def _signalled_snapshot(ctx: BenchContext, name: str, pattern: str, expected: int,
                        status_at_start: bool = False) -> tuple[Figure | None, dict[str, Any]]:
    run, sink_path, saves = _engine_run(ctx, name)
    status: dict[str, Any] = {}
    try:
        run.start()
        signal_snapshot(ctx.db, pattern, name)
        signalled = time.perf_counter()
        if status_at_start:  # the committed state with the whole queue in it: `dblog status`'s worst
            run.wait_for(lambda: any(n.type == "STARTED" for _, n in run.notifications), 120, "the snapshot started")
            run.wait_for(lambda: len(saves) >= 2, 60, "an offsets commit")
            offsets = run.engine.store.load()
            started = time.perf_counter()
            text = describe(offsets)
            status = {"seconds": time.perf_counter() - started, "bytes": len(text), "lines": text.count("\n") + 1,
                      "offsets_bytes": run.engine.store.path.stat().st_size}
        run.wait_completed(600 + expected / 1000)
        seconds = run.completed_at - signalled
        run.finish()
    except BaseException:
        run.abandon()
        raise
    emitted = run.sink.ops.get("r", 0)
    with open(sink_path, "rb") as lines:
        written = sum(block.count(b"\n") for block in iter(lambda: lines.read(1 << 20), b""))
    sink_path.unlink()
    detail = {"rows": emitted, "seconds": round(seconds, 3), "tables": len(run.scanned),
              "offsets_saves": len(saves),
              "offsets_bytes_max": max((size for _, size in saves), default=0),
              "offsets_save_ms_mean": round(1000 * sum(s for s, _ in saves) / len(saves), 2) if saves else None,
              "offsets_save_ms_max": round(1000 * max(s for s, _ in saves), 2) if saves else None}
    check_ok = emitted == expected and written == expected
    figure = Figure("", "scale", "", rate(emitted, seconds), "rows/s",
                    check=f"{emitted:,} snapshot events, {written:,} lines, {expected:,} rows", check_ok=check_ok,
                    detail=detail)
    return figure, status


def _snapshot_figures(ctx: BenchContext, count: int, rows: int, common: dict[str, Any]) -> None:
    total = count * rows
    big, _ = _signalled_snapshot(ctx, "scale-snapshot-big", rf"{DATABASE}\.big", total)
    big.key, big.label = "scale.snapshot.one", f"incremental snapshot of one {total:,}-row table by a signal"
    big.detail.update(common)
    baseline = ctx.report(big)
    many, status = _signalled_snapshot(ctx, "scale-snapshot-many", SMALL_PATTERN, total, status_at_start=True)
    many.key, many.label = "scale.snapshot.many", f"incremental snapshot of {count:,} tables × {rows:,} rows by one signal"
    many.limit = baseline.key
    many.detail.update(common)
    ctx.report(many)
    ctx.report(Figure(
        "scale.offsets", "scale", f"offsets document, snapshot of {count:,} tables queued: largest size",
        many.detail["offsets_bytes_max"] / 1024, "KiB",
        detail={key: many.detail[key] for key in ("offsets_saves", "offsets_save_ms_mean", "offsets_save_ms_max")}))
    if status:
        ctx.report(Figure(
            "scale.status.queued", "scale", f"`dblog status` rendering, {count:,} tables queued: time",
            status["seconds"] * 1000, "ms", detail=status))


# --- in-process: streaming transactions spread over random tables --------------------------------


def write_transactions(db: LocalMariaDB, tables: list[TableId], rows: int, transactions: int, seed: int) -> int:
    """`transactions` transactions of 1–5 single-row UPDATEs, each of a random row of a random
    table of `tables` (rows keyed 1..`rows`); returns the rows changed."""
    chooser = random.Random(seed)
    changed = 0
    with db.connect() as connection, connection.cursor() as cursor:
        for number in range(transactions):
            for _ in range(chooser.randint(1, 5)):
                table = tables[chooser.randrange(len(tables))]
                changed += cursor.execute(
                    f"UPDATE {quote(table.db)}.{quote(table.table)} SET amount = amount + 1, name = %s WHERE id = %s",
                    (f"tx {number}", chooser.randint(1, rows)))
            connection.commit()
    return changed


def _streaming_figures(ctx: BenchContext, count: int, rows: int, common: dict[str, Any]) -> None:
    transactions = ctx.options.scale_transactions
    baseline: Figure | None = None
    for key, tables, table_rows in (("one", [BIG], count * rows),
                                     ("many", [small_table(index) for index in range(count)], rows)):
        run, sink_path, _ = _engine_run(ctx, f"scale-streaming-{key}")
        try:
            started = time.perf_counter()
            changed = write_transactions(ctx.db, tables, table_rows, transactions, seed=29)
            written = time.perf_counter() - started
            target = executed_gtids(ctx.db)
            run.start()
            run.finish(target, timeout=600 + changed / 200)
        except BaseException:
            run.abandon()
            raise
        sink = run.sink
        sink_path.unlink(missing_ok=True)
        seconds = (sink.last - sink.first) if sink.first is not None else 0.0
        label = (f"streaming {transactions:,} transactions (1–5 single-row updates) over random rows of "
                 + (f"one {count * rows:,}-row table" if key == "one" else f"{count:,} random tables"))
        figure = ctx.report(Figure(
            f"scale.streaming.{key}", "scale", label, rate(sink.count, seconds), "rows/s",
            limit=baseline.key if baseline is not None else None,
            check=f"{sink.count:,} changes reached the sink, {changed:,} made", check_ok=sink.count == changed,
            detail={**common, "rows": sink.count, "seconds": round(seconds, 3), "transactions": transactions,
                    "write_seconds": round(written, 1)}))
        baseline = baseline or figure
