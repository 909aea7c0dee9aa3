"""`dblog demo`: the whole algorithm on embedded defaults, checked at the end.

A private MariaDB gets a small shop schema (a composite-key table with mixed types and a
plain one), the engine starts streaming into the sink (Iceberg tables through a local Spark
session by default, or a JSON-lines file), writer threads hammer both tables, an
`execute-snapshot` signal is inserted into the signal table, progress is shown while the
snapshot runs under the writes, then the writers stop, the stream catches up, the engine
stops, and the sink (each Iceberg table, or the JSON-lines replay) is compared with `SELECT *`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dblog.core.events import Notification
from dblog.demo.localstack import LocalMariaDB
from dblog.demo.verify import compare_iceberg_with_source, compare_sink_with_source
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.config import parse_config
from dblog.runtime.engine import Engine
from dblog.runtime.signal_client import send_via_table
from dblog.sinks.iceberg.session import QUIET_LOG4J2

SINKS = ("iceberg", "jsonl")
CATALOG = "lake"
# Writes per second per writer. A chunk window closes only once the binlog reader has caught up
# with its high watermark, so writers faster than the reader stall the snapshot: unthrottled,
# 4 writers outrun the reader on a busy 2-core machine. With Iceberg each commit is one MERGE
# per changed table (1-3 s each there), during which the reader waits.
WRITES_PER_SECOND = {"iceberg": 50, "jsonl": 200}
ICEBERG_COMMIT_SECONDS = 2.0


class DemoError(RuntimeError):
    """The demo cannot run here (e.g. Spark does not start); the message says what to do."""


def run_demo(
    rows: int = 20_000, writers: int = 4, chunk_size: int = 1024, keep: str | None = None, sink: str = "iceberg",
    rate: float | None = None,
) -> bool:
    """`rate`: writes per second per writer (default per sink, `WRITES_PER_SECOND`; 0: full speed)."""
    if sink not in SINKS:
        raise ValueError(f"sink must be one of {SINKS}, not {sink!r}")
    rate = WRITES_PER_SECOND[sink] if rate is None else rate
    console = Console(stderr=True)
    workdir = Path(keep).resolve() if keep else Path(tempfile.mkdtemp(prefix="dblog-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    leftovers = [p.name for p in (workdir / "offsets.json", workdir / "changes.jsonl", workdir / "warehouse") if p.exists()]
    if keep and leftovers:
        # A new private MariaDB every run: old offsets or tables would describe another server.
        raise DemoError(f"{workdir} already holds a demo's files ({', '.join(leftovers)}): pass a new or empty directory")
    try:
        with LocalMariaDB() as db:
            console.print(f"[bold]dblog demo[/]: private MariaDB on port {db.port}, loading {rows:,} orders…")
            db.execute("CREATE DATABASE shop")
            with db.connect() as connection:
                load(connection, "shop", rows)
            data = {
                "name": "demo",
                "source": {"port": db.port, "user": db.user, "password": db.password, "include": [r"shop\..*"]},
                "snapshot": {"startup": "never", "chunk_size": chunk_size},
                "signals": {"table": "shop.dblog_signal"},
                "sink": {"type": "jsonl", "path": str(workdir / "changes.jsonl")},
                "offsets": {"path": str(workdir / "offsets.json")},
            }
            if sink == "iceberg":
                # Spark's JVM writes straight to stderr, across rich's progress display: errors only.
                log4j = workdir / "spark-log4j2.properties"
                log4j.write_text(QUIET_LOG4J2)
                data["sink"] = {"type": "iceberg"}
                data["spark"] = {
                    "warehouse": str(workdir / "warehouse"), "catalog": CATALOG,
                    "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}"},
                }
                data["offsets"]["commit_interval_seconds"] = ICEBERG_COMMIT_SECONDS
            with _logging_through(console):
                ok = _run(console, db, parse_config(data), rows, writers, rate or None)
        if keep:
            _print_kept(console, workdir, sink)
        return ok
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _logging_through(console: Console):
    """Log records printed by rich above the live progress display, not through it."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [RichHandler(console=console, show_path=False, log_time_format="%H:%M:%S")]
    try:
        yield
    finally:
        root.handlers = saved


def _start_engine(console: Console, config, on_notification) -> Engine:
    if config.sink.type != "iceberg":
        return Engine(config, on_notification=on_notification)
    with console.status(f"starting Spark ({config.spark.master}) with the Iceberg runtime…"):
        try:
            return Engine(config, on_notification=on_notification)
        except RuntimeError as error:  # pyspark's PySparkRuntimeError (no Java, …), no runtime jar
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise DemoError(
                f"Spark did not start: {first} (Spark needs Java 17: java on PATH or JAVA_HOME); "
                "`dblog demo --sink jsonl` runs without Spark"
            ) from None


def _run(console: Console, db: LocalMariaDB, config, rows: int, writers: int, rate: float | None) -> bool:
    iceberg = config.sink.type == "iceberg"
    done = threading.Event()
    captured = tables("shop")
    counts = {str(t): db.execute(f"SELECT COUNT(*) FROM {t}")[0][0] for t in captured}
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=console,
    )
    tasks: dict[str, int] = {}  # filled once Spark is up, so the elapsed times start with the snapshot

    def on_notification(notification: Notification) -> None:
        data = notification.data
        table = data.get("current_collection_in_progress") or data.get("data_collection")
        if table in tasks and "total_rows_scanned" in data:
            progress.update(tasks[table], completed=data["total_rows_scanned"])
        if notification.type == "TABLE_SCAN_COMPLETED" and table in tasks:
            progress.update(tasks[table], total=data["total_rows_scanned"], completed=data["total_rows_scanned"])
        if notification.type == "COMPLETED":
            done.set()

    engine = _start_engine(console, config, on_notification)
    if iceberg:
        engine.sink.spark.sparkContext.setLogLevel("ERROR")  # the session sets WARN
    capture = engine.start()
    caught_up_to = []

    def caught_up() -> bool:
        return bool(caught_up_to) and caught_up_to[0].issubset(capture.position) and capture.checkpoint() is not None

    failure: list[BaseException] = []

    def drive() -> None:
        try:
            engine.run(until=caught_up)
        except BaseException as error:  # reported below, after the writers stopped
            failure.append(error)

    runner = threading.Thread(target=drive, name="dblog-engine")
    runner.start()
    workload = WriteLoad(db.connect, "shop", rows, writers, rate=rate).start()
    if iceberg:
        # Creating the tables and the first MERGEs are slow (Spark compiles its plans): the
        # snapshot starts once the stream has committed into both tables, not while it lags.
        with console.status("streaming the writers' changes into Iceberg (the first commit creates the tables)…"):
            while not all(engine.sink.committed_position(table) is not None for table in captured):
                if not runner.is_alive():
                    break
                time.sleep(0.2)
    tasks.update({name: progress.add_task(f"snapshot {name}", total=count) for name, count in counts.items()})
    started = time.monotonic()
    send_via_table(config, "execute-snapshot", {"data-collections": [r"shop\.orders", r"shop\.customers"]}, "demo-1")
    with progress:
        while not done.wait(0.2):
            if not runner.is_alive():
                break
    snapshot_seconds = time.monotonic() - started
    writes = workload.stop()
    caught_up_to.append(engine.server.executed_gtids())
    with console.status("writers stopped; the stream catches up" + (" and MERGEs its last batch…" if iceberg else "…")):
        runner.join()
    if failure:
        reason = (str(failure[0]).strip().splitlines() or [""])[0]  # not a JVM stack trace
        console.print(f"[red]the engine stopped with an error:[/] {type(failure[0]).__name__}: {reason}", markup=True,
                      highlight=False)
        return False
    if not done.is_set():
        console.print("[red]the engine stopped before the snapshot completed[/]")
        return False
    source = SourceConnection(lambda: db.connect())
    try:
        if iceberg:
            # The engine thread is done: this thread may use the Spark session now.
            with console.status("reading the Iceberg tables back…"):
                result = compare_iceberg_with_source(engine.sink, source, captured)
        else:
            result = compare_sink_with_source(config.sink.path, source, captured)
    finally:
        source.close()
    scanned = sum(counts.values())
    line = (
        f"demo {'OK' if result.equal else 'FAILED'}: snapshot of {scanned:,} rows in {snapshot_seconds:.1f} s "
        f"under {writes:,} concurrent writes from {writers} writers; {result.summary()}"
    )
    # Plain print, to stdout: exactly one line however narrow the terminal or pipe (rich would
    # wrap it at the console width), so scripts can read the verdict from the last line.
    print(line, flush=True)
    return result.equal


def _print_kept(console: Console, workdir: Path, sink: str) -> None:
    if sink == "jsonl":
        console.print(f"kept: {workdir / 'changes.jsonl'} (Debezium envelopes) and {workdir / 'offsets.json'}",
                      soft_wrap=True, highlight=False)
        return
    from dblog.sinks.iceberg.session import runtime_package

    warehouse = workdir / "warehouse"
    console.print(
        f"kept: Iceberg tables {CATALOG}.shop.orders and {CATALOG}.shop.customers, Hadoop catalog in {warehouse}; "
        "from pyspark:\n"
        f"  pyspark --packages {runtime_package()} --conf spark.sql.catalog.{CATALOG}=org.apache.iceberg.spark.SparkCatalog "
        f"--conf spark.sql.catalog.{CATALOG}.type=hadoop --conf spark.sql.catalog.{CATALOG}.warehouse={warehouse}\n"
        f"  >>> spark.table('{CATALOG}.shop.orders').show()   "
        f"# in Python: dblog.sinks.iceberg.session.iceberg_spark_session('{warehouse}')",
        soft_wrap=True, highlight=False, markup=False,
    )
