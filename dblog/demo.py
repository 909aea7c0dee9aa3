"""`dblog demo`: the whole algorithm on embedded defaults, checked at the end.

A private MariaDB gets a small shop schema (a composite-key table with mixed types and a
plain one), the engine starts streaming, writer threads hammer both tables, an
`execute-snapshot` signal is inserted into the signal table, progress is shown while the
snapshot runs under the writes, then the writers stop, the stream catches up, and the JSON-lines
sink is replayed and compared with `SELECT *`.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dblog.config import parse_config
from dblog.engine import Engine
from dblog.chunk_reader import ChunkReader
from dblog.events import Notification
from dblog.localstack import LocalMariaDB
from dblog.verify import compare_sink_with_source
from dblog.workload import WriteLoad, load, tables
from signals.client import send_via_table

def run_demo(rows: int = 20_000, writers: int = 4, chunk_size: int = 1024, keep: str | None = None) -> bool:
    console = Console(stderr=True)
    workdir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="dblog-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with LocalMariaDB() as db:
            console.print(f"[bold]dblog demo[/]: private MariaDB on port {db.port}, loading {rows:,} orders…")
            db.execute("CREATE DATABASE shop")
            with db.connect() as connection:
                load(connection, "shop", rows)
            config = parse_config({
                "name": "demo",
                "source": {"port": db.port, "user": db.user, "password": db.password, "include": [r"shop\..*"]},
                "snapshot": {"startup": "never", "chunk_size": chunk_size},
                "signals": {"table": "shop.dblog_signal"},
                "sink": {"type": "jsonl", "path": str(workdir / "changes.jsonl")},
                "offsets": {"path": str(workdir / "offsets.json")},
            })
            return _run(console, db, config, rows, writers)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(console: Console, db: LocalMariaDB, config, rows: int, writers: int) -> bool:
    done = threading.Event()
    captured = tables("shop")
    counts = {str(t): db.execute(f"SELECT COUNT(*) FROM {t}")[0][0] for t in captured}
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=console,
    )
    tasks = {name: progress.add_task(f"snapshot {name}", total=count) for name, count in counts.items()}

    def on_notification(notification: Notification) -> None:
        data = notification.data
        table = data.get("current_collection_in_progress") or data.get("data_collection")
        if table in tasks and "total_rows_scanned" in data:
            progress.update(tasks[table], completed=data["total_rows_scanned"])
        if notification.type == "TABLE_SCAN_COMPLETED" and table in tasks:
            progress.update(tasks[table], total=data["total_rows_scanned"], completed=data["total_rows_scanned"])
        if notification.type == "COMPLETED":
            done.set()

    engine = Engine(config, on_notification=on_notification)
    capture = engine.start()
    caught_up_to = []

    def caught_up() -> bool:
        return bool(caught_up_to) and caught_up_to[0].issubset(capture.position) and capture.checkpoint() is not None

    runner = threading.Thread(target=engine.run, kwargs={"until": caught_up}, name="dblog-engine")
    runner.start()
    workload = WriteLoad(db.connect, "shop", rows, writers).start()
    started = time.monotonic()
    send_via_table(config, "execute-snapshot", {"data-collections": [r"shop\.orders", r"shop\.customers"]}, "demo-1")
    with progress:
        while not done.wait(0.2):
            if not runner.is_alive():
                break
    snapshot_seconds = time.monotonic() - started
    writes = workload.stop()
    caught_up_to.append(engine.reader.executed_gtids())
    runner.join()
    if not done.is_set():
        console.print("[red]the engine stopped before the snapshot completed[/]")
        return False
    reader = ChunkReader(lambda: db.connect())
    try:
        result = compare_sink_with_source(config.sink.path, reader, captured)
    finally:
        reader.close()
    scanned = sum(counts.values())
    line = (
        f"demo {'OK' if result.equal else 'FAILED'}: snapshot of {scanned:,} rows in {snapshot_seconds:.1f} s "
        f"under {writes:,} concurrent writes from {writers} writers; {result.summary()}"
    )
    # Plain print, to stdout: exactly one line however narrow the terminal or pipe (rich would
    # wrap it at the console width), so scripts can read the verdict from the last line.
    print(line, flush=True)
    return result.equal
