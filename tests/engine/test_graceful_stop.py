"""A clean stop: SIGTERM (or SIGINT, or Engine.stop()) drops the open window, reads the
transaction under way to its end, flushes the sink and commits the offsets, so that what the
sink holds is exactly what the offsets claim; a second signal or the deadline exits at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from support.harness import EngineThread, compare, config_data, make_config
from support import eventually

from dblog.core.capture import ChunkRead
from dblog.core.gtid import Gtid, GtidSet
from dblog.runtime.engine import Engine
from dblog.runtime.graceful_stop import EXIT_UNCLEAN, GracefulStop
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.jsonl.sink import JsonLinesSink, read_json_lines

pytestmark = pytest.mark.timeout(300)


# --- the signal handler -----------------------------------------------------------------------


class Exits:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.done = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.done.set()


def test_first_signal_stops_cleanly_the_second_exits_at_once():
    stops, exits = [], Exits()
    graceful = GracefulStop(lambda: stops.append(1), timeout_seconds=60, exit=exits)
    graceful.handle(signal.SIGTERM)
    assert stops == [1] and exits.codes == []
    graceful.handle(signal.SIGINT)
    assert stops == [1] and exits.codes == [EXIT_UNCLEAN]
    graceful.finished()


def test_the_deadline_exits_at_once_and_a_finished_stop_cancels_it():
    exits = Exits()
    GracefulStop(lambda: None, timeout_seconds=0.2, exit=exits).handle(signal.SIGTERM)  # a stop that never ends
    assert exits.done.wait(10) and exits.codes == [EXIT_UNCLEAN]
    exits = Exits()
    graceful = GracefulStop(lambda: None, timeout_seconds=0.2, exit=exits)
    graceful.handle(signal.SIGTERM)
    graceful.finished()
    assert not exits.done.wait(0.6)


def test_installed_handlers_take_real_signals():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    stopped, exits = threading.Event(), Exits()
    graceful = GracefulStop(stopped.set, timeout_seconds=60, exit=exits)
    try:
        graceful.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.wait(5) and exits.codes == []
        os.kill(os.getpid(), signal.SIGINT)
        assert exits.done.wait(5) and exits.codes == [EXIT_UNCLEAN]
    finally:
        graceful.finished()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --- the engine's clean stop ------------------------------------------------------------------


def sink_gtids(path) -> set[str]:
    return {record["value"]["source"]["gtid"] for record in read_json_lines(path)
            if record.get("value") and record["value"].get("source", {}).get("gtid")}


def run_in_thread(engine: Engine) -> tuple[threading.Thread, list]:
    errors: list = []

    def run():
        try:
            engine.run()
        except BaseException as error:  # reported by the test
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_a_stop_with_a_window_open_drops_it_and_commits_everything_read(mariadb, database, tmp_path, loaded,
                                                                        write_load):
    """Signal-table watermarks keep a window open from the chunk's read until the reader sees the
    close marker: the stop comes exactly then. Without the clean stop no offsets are committed
    at the end (a window is open) while the sink already holds what came after the last commit."""
    tables = loaded(3000)
    workload = write_load(3000, writers=2, seed=5)
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 200, "watermarks": "insert_insert"},
                         offsets={"path": str(tmp_path / "offsets.json"), "commit_interval_seconds": 3600})
    engine = Engine(config)
    engine.start()
    perform, stopped_with = engine.snapshot_reads.perform, []

    def perform_then_stop(capture, read):
        out = perform(capture, read)
        if isinstance(read, ChunkRead) and read.snapshot.chunks >= 2 and capture.window is not None:
            stopped_with.append(capture.position)
            engine.stop()
        return out

    engine.snapshot_reads.perform = perform_then_stop
    try:
        thread, errors = run_in_thread(engine)
        thread.join(120)
    finally:
        workload.stop()
    assert not thread.is_alive() and not errors, errors
    assert stopped_with, "no chunk left its window open"
    offsets = OffsetStore(tmp_path / "offsets.json").load()
    assert offsets.position == engine.capture.position and stopped_with[0].issubset(offsets.position)
    assert all(Gtid.parse(gtid) in offsets.position for gtid in sink_gtids(tmp_path / "changes.jsonl"))
    # The next start goes on from there and ends with the source.
    again = EngineThread(make_config(mariadb, database, tmp_path, snapshot={"watermarks": "insert_insert"}))
    again.until_caught_up()
    result = compare(mariadb, tmp_path / "changes.jsonl", tables)
    assert result.equal, result.summary()


class StopInsideTransaction(JsonLinesSink):
    """Stops the engine when the 3rd row change of a big transaction reaches it."""

    engine: Engine | None = None
    seen = 0

    def write(self, changes):
        super().write(changes)
        self.seen += sum(1 for change in changes if change.table.table == "big")
        if self.seen >= 3 and self.engine is not None:
            self.engine.stop()


def test_a_stop_inside_a_transaction_reads_it_to_its_end_and_commits_it(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.big (id INT PRIMARY KEY, v INT)")
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"},
                         offsets={"path": str(tmp_path / "offsets.json"), "commit_interval_seconds": 3600})
    sink = StopInsideTransaction(config.sink.path, lambda table: ("id",), config.name)
    engine = Engine(config, sink=sink)
    sink.engine = engine
    engine.start()
    thread, errors = run_in_thread(engine)
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{database}`.big VALUES " + ", ".join(f"({i}, {i})" for i in range(2000)))
        connection.commit()
        cursor.execute("SELECT @@gtid_binlog_pos")
        (executed,) = cursor.fetchone()  # the big transaction is the last one (other domains: earlier tests)
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    offsets = OffsetStore(tmp_path / "offsets.json").load()
    # Without the clean stop: not committed, and half of it in the sink.
    assert GtidSet.parse(executed, "mariadb").issubset(offsets.position)
    rows = [record for record in read_json_lines(tmp_path / "changes.jsonl") if record.get("value")]
    assert len(rows) == 2000


def test_dblog_run_stops_cleanly_on_sigterm(mariadb, database, tmp_path, loaded, write_load):
    loaded(20_000)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 300},
                       offsets={"path": str(tmp_path / "offsets.json"), "commit_interval_seconds": 3600})
    data["stop_timeout_seconds"] = 20
    (tmp_path / "dblog.toml").write_text(_toml(data))
    workload = write_load(20_000, writers=2, seed=9)
    process = subprocess.Popen([sys.executable, "-m", "dblog.cli", "run", "--config", str(tmp_path / "dblog.toml")],
                               stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: _rows_in(tmp_path / "changes.jsonl") > 2000, timeout=120, message="rows in the sink")
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        workload.stop()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr[-3000:]
    assert time.monotonic() - started < 20
    assert "stopped cleanly" in stderr
    offsets = OffsetStore(tmp_path / "offsets.json").load()
    assert all(Gtid.parse(gtid) in offsets.position for gtid in sink_gtids(tmp_path / "changes.jsonl"))


def _rows_in(path) -> int:
    try:
        with open(path, "rb") as lines:
            return sum(1 for _ in lines)
    except FileNotFoundError:
        return 0


def _toml(data: dict) -> str:
    import tomli_w

    return tomli_w.dumps(json.loads(json.dumps(data)))
