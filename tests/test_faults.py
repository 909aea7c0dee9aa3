"""Faults against real services: the source database restarted mid-snapshot and mid-stream,
a purged binlog, an unwritable offsets file, a Kafka broker down and back, an Iceberg commit
failing; and (opt-in, `--run-slow`) a soak of 20 kill -9 + restart cycles under writes."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dblog.config import parse_config
from dblog.gtid import GtidSet
from dblog.offsets import OffsetStore
from dblog.progress import SnapshotProgress
from dblog.supervisor import Supervisor
from dblog.workload import WriteLoad, load, tables
from harness import EngineProcess, compare, config_data

pytestmark = pytest.mark.timeout(900)


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def _scanned(offsets) -> int:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return sum(entry.rows_scanned for entry in progress.queue)


class SupervisedEngine:
    """`dblog run`'s supervisor in a thread, watched through its committed offsets."""

    def __init__(self, data: dict) -> None:
        self.config = parse_config(data)
        self.store = OffsetStore(self.config.offsets.path)
        self.supervisor = Supervisor(self.config)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.supervisor.run()
        except BaseException as error:  # reported by the test
            self.error = error

    def wait_until(self, predicate, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.error is not None or not self._thread.is_alive():
                raise AssertionError(f"supervisor stopped: {self.error!r}")
            offsets = self.store.load()
            if offsets is not None and predicate(offsets):
                return
            time.sleep(0.05)
        raise AssertionError(f"condition not reached in {timeout}s")

    def stop(self) -> None:
        self.supervisor.stop()
        self._thread.join(60)
        assert not self._thread.is_alive()


def test_source_restarted_mid_snapshot_and_mid_stream_loses_and_duplicates_nothing(mariadb, database, tmp_path):
    rows = 20_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 500})
    workload = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=3, rate=100, reconnect=True).start()
    engine = SupervisedEngine(data)
    try:
        engine.wait_until(lambda o: _scanned(o) >= rows // 4)
        mariadb.restart(down_seconds=1.0)  # a clean shutdown in the middle of the snapshot
        engine.wait_until(_snapshot_done)
        mariadb.restart(down_seconds=0.5, crash=True)  # a crash while streaming
        time.sleep(2)
    finally:
        workload.stop()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: _snapshot_done(o) and target.issubset(o.position))
    engine.stop()
    assert engine.supervisor.restarts >= 2
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


def _dblog_run(data: dict, workdir: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    import tomli_w

    path = workdir / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    return subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                          capture_output=True, text=True, timeout=timeout)


def test_purged_binlog_stops_with_the_remedy(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    data = config_data(mariadb, database, tmp_path, snapshot={"startup": "never"})
    engine = EngineProcess(data, tmp_path)
    engine.start()
    engine.wait_until(lambda o: True)
    engine.terminate()
    stored = OffsetStore(data["offsets"]["path"]).load().position
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1)")  # dblog must resume before this
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (2)")
    mariadb.execute("FLUSH BINARY LOGS")
    for _ in range(100):  # the server keeps a file until InnoDB's checkpoint has passed it
        newest = mariadb.execute("SHOW BINARY LOGS")[-1][0]
        mariadb.execute(f"PURGE BINARY LOGS TO '{newest}'")
        if len(mariadb.execute("SHOW BINARY LOGS")) == 1:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the server kept its old binlog files")
    result = _dblog_run(data, tmp_path)
    assert result.returncode == 1
    message = result.stderr
    assert "purged" in message and str(stored) in message and "offsets file" in message, message
    assert "Traceback" not in message
    assert OffsetStore(data["offsets"]["path"]).load().position == stored  # nothing moved


def test_unwritable_offsets_file_is_a_clean_stop_with_a_message(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    data = config_data(mariadb, database, tmp_path, snapshot={"startup": "never"})
    offsets = Path(data["offsets"]["path"])
    engine = EngineProcess(data, tmp_path)
    engine.start()
    engine.wait_until(lambda o: True)
    # Where the next offsets must go there is now a directory (root ignores permissions).
    offsets.unlink()
    offsets.mkdir()
    (offsets / "keep").write_text("x")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1)")
    engine.process.wait(60)
    log = engine.log.read_text()
    assert engine.process.returncode == 1
    assert "cannot write offsets file" in log and "Traceback" not in log, log
    # At start, an offsets path that cannot be read is refused the same way.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the offsets directory should be")
    data["offsets"]["path"] = str(blocker / "offsets.json")
    result = _dblog_run(data, tmp_path)
    assert result.returncode == 1
    assert "cannot read offsets file" in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.slow
def test_soak_20_kill_9_cycles_under_writes(mariadb, database, tmp_path):
    rows = 30_000
    rng = random.Random(20)
    with mariadb.connect() as connection:
        load(connection, database, rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 300})
    engine = EngineProcess(data, tmp_path)
    workload = WriteLoad(lambda: mariadb.connect(), database, rows, writers=3, seed=7, rate=150).start()
    try:
        for _ in range(20):
            engine.start()
            engine.wait_until(lambda o: True)
            time.sleep(rng.uniform(0.2, 3.0))
            engine.kill()
    finally:
        workload.stop()
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: _snapshot_done(o) and target.issubset(o.position), timeout=600)
    engine.terminate()
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
