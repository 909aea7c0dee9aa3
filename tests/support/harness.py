"""Running the real engine against the private MariaDB in tests: in a thread, or as a
separate `dblog run` process that can be killed with SIGKILL."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import tomli_w
from support import eventually, next_server_id

from dblog.core.events import Notification, TableId
from dblog.core.gtid import GtidSet
from dblog.demo.verify import Comparison, compare_sink_with_source
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.config import Config, parse_config
from dblog.runtime.engine import Engine
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.supervisor import Supervisor



def config_data(mariadb, database: str, workdir: Path, **sections) -> dict:
    data = {
        "name": "test",
        "source": {
            "port": mariadb.port,
            "user": mariadb.user,
            "password": mariadb.password,
            "include": [f"{database}\\..*"],
            "server_id": next_server_id(),
            "heartbeat_seconds": 0.5,
        },
        "snapshot": {"startup": "initial", "chunk_size": 500},
        "signals": {"table": f"{database}.dblog_signal"},
        "sink": {"type": "jsonl", "path": str(workdir / "changes.jsonl")},
        "offsets": {"path": str(workdir / "offsets.json"), "commit_interval_seconds": 0.2},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return data


class SupervisorInThread:
    """`dblog run`'s supervisor (restarts included) in a thread; its error is kept for the test."""

    def __init__(self, data: dict) -> None:
        self.config = parse_config(data)
        self.supervisor = Supervisor(self.config)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.supervisor.run()
        except BaseException as error:  # reported by the test
            self.error = error

    def check_running(self) -> None:
        if self.error is not None or not self.thread.is_alive():
            raise AssertionError(f"supervisor stopped: {self.error!r}")

    def stop(self) -> None:
        self.supervisor.stop()
        self.thread.join(60)
        assert not self.thread.is_alive()


class SupervisedEngine(SupervisorInThread):
    """`dblog run`'s supervisor in a thread, watched through its committed offsets."""

    def __init__(self, data: dict) -> None:
        super().__init__(data)
        self.store = OffsetStore(self.config.offsets.path)
        self.start()

    def wait_until(self, predicate, timeout: float = 300) -> None:
        """Until the committed offsets satisfy `predicate(offsets)`; fails at once if the
        supervisor stopped."""
        def committed() -> bool:
            self.check_running()
            offsets = self.store.load()
            return offsets is not None and predicate(offsets)

        eventually(committed, timeout, message="the committed offsets to satisfy the predicate")


class EngineThread:
    """The engine in a background thread; `until_caught_up()` stops it once the snapshot queue
    is empty (or paused) and the stream has consumed everything the server had executed at
    that call."""

    def __init__(self, config: Config, sink=None) -> None:
        self.notifications: list[Notification] = []
        self.engine = Engine(config, sink=sink, on_notification=self.notifications.append)
        self.capture = self.engine.start()
        self._target: GtidSet | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.engine.run(until=self._done)
        except BaseException as error:  # reported by the test
            self.error = error

    def _done(self) -> bool:
        return (
            self._target is not None
            and (self.capture.progress.current is None or self.capture.progress.paused)
            and self._target.issubset(self.capture.position)
            and self.capture.checkpoint() is not None
        )

    def types(self) -> list[str]:
        return [n.type for n in self.notifications]

    def eventually(self, condition, timeout: float = 120, interval: float = 0.05, message="the condition"):
        """`support.eventually(condition, ...)` that fails at once when the engine has stopped."""
        def holds():
            value = condition()
            if not value and (self.error or not self._thread.is_alive()):
                raise AssertionError(f"engine stopped: {self.error!r}")
            return value

        return eventually(holds, timeout, interval, message)

    def wait_for(self, notification_type: str, timeout: float = 120) -> None:
        self.eventually(lambda: notification_type in self.types(), timeout,
                        message=lambda: f"a {notification_type} notification; got {self.types()}")

    def until_caught_up(self, timeout: float = 180) -> None:
        # On a connection of its own: the engine thread may be using its reader's right now.
        with SourceConnection(self.engine._connect) as reader:
            reader.server.file_positions = self.engine.server.file_positions  # (the engine's position form)
            self._target = reader.server.executed_gtids()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.engine.stop()
            self._thread.join(10)
            raise AssertionError("engine did not catch up in time")
        if self.error:
            raise self.error

    def stop(self) -> None:
        self.engine.stop()
        self._thread.join(30)


def position_taken(config: Config) -> None:
    """Run the engine until it has saved its first offsets (its binlog position), then stop it:
    what the server executes meanwhile is a backlog for its next start."""
    engine = EngineThread(config)
    try:
        engine.eventually(lambda: Path(config.offsets.path).exists(), 60, message="dblog's first offsets")
    finally:
        engine.stop()


class EngineProcess:
    """`dblog run` as a child process, for crash tests."""

    def __init__(self, config: dict, workdir: Path, log_level: str = "warning", log_format: str = "text",
                 env: dict[str, str] | None = None) -> None:
        self.config = config
        self.path = workdir / "dblog.toml"
        self.path.write_text(tomli_w.dumps(config))
        self.log = workdir / "engine.log"
        self.process: subprocess.Popen | None = None
        self.options = ["--log-level", log_level, "--log-format", log_format]
        self.env = env  # added to this process's environment

    def start(self) -> None:
        atexit.register(self.kill)  # never leave an engine behind, also when a test fails
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dblog.cli", *self.options, "run", "--config", str(self.path)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(self.env or {})},
            )

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def terminate(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def offsets(self):
        return OffsetStore(self.config["offsets"]["path"]).load()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def eventually(self, condition, timeout: float = 180, interval: float = 0.05, message="the condition"):
        """`support.eventually(condition, ...)` that fails at once when the process has exited;
        the failure shows the end of its log."""
        def holds():
            if not self.alive():
                raise AssertionError(f"engine exited: {self.log.read_text()[-3000:]}")
            return condition()

        def awaited() -> str:
            return f"{message() if callable(message) else message}; log: {self.log.read_text()[-3000:]}"

        return eventually(holds, timeout, interval, awaited)

    def wait_until(self, predicate, timeout: float = 180) -> None:
        """Until the committed offsets satisfy `predicate(offsets)`."""
        last = []

        def committed() -> bool:
            offsets = self.offsets()
            last[:] = [offsets]
            return offsets is not None and predicate(offsets)

        def message() -> str:
            offsets = last[0] if last else None
            seen = "none" if offsets is None else f"position {offsets.position}, snapshot {offsets.snapshot}"
            return f"the committed offsets to satisfy the predicate (last committed: {seen})"

        self.eventually(committed, timeout, message=message)


def compare(mariadb, sink_path, tables: list[TableId]) -> Comparison:
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        return compare_sink_with_source(str(sink_path), reader, tables)
    finally:
        reader.close()


def make_config(mariadb, database: str, workdir: Path, **sections) -> Config:
    return parse_config(config_data(mariadb, database, workdir, **sections))


def spark_settings(spark) -> dict:
    """The `[spark]` section for an engine sharing the test session's catalog `lake` and its
    master (`local[2]`, or the standalone cluster of --spark-master: a `dblog run` child then
    runs as another application on the same cluster)."""
    return {"warehouse": spark.conf.get("spark.sql.catalog.lake.warehouse"), "catalog": "lake",
            "master": spark.sparkContext.master}


def iceberg_config(mariadb, database: str, workdir: Path, spark, **sections) -> Config:
    """An engine config whose Iceberg sink shares the test session's catalog `lake`."""
    return make_config(mariadb, database, workdir, sink={"type": "iceberg"}, spark=spark_settings(spark), **sections)


def published(bootstrap: str, topic: str, **client_options) -> list[dict]:
    """Every JSON message on partition 0 of `topic`, from the beginning (e.g. notifications);
    `client_options`: TLS and SASL for a secured broker (`LocalBroker.client_options()`)."""
    import json

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **client_options)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = []
    for _ in range(20):
        batch = consumer.poll(500)
        if not batch:
            break
        for items in batch.values():
            records.extend(json.loads(r.value) for r in items)
    consumer.close()
    return records


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until_gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether `pid` is gone within `timeout` seconds."""
    try:
        eventually(lambda: not process_alive(pid), timeout, message=f"process {pid} to end")
    except AssertionError:
        return False
    return True


def run_dblog_until(arguments: list[str], log: Path, until: str, cwd: Path | None = None,
                    timeout: float = 120) -> str:
    """`python -m dblog.cli *arguments` until its stderr (kept in `log`) shows `until`, then
    SIGTERM: it must stop cleanly (exit 0). Returns what it wrote to stderr."""
    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "dblog.cli", *arguments], stdout=subprocess.DEVNULL,
                                   stderr=stderr, cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        def reached() -> bool:
            assert process.poll() is None, log.read_text()[-3000:]
            return until in log.read_text()

        eventually(reached, timeout, interval=0.1, message=lambda: f"{until!r} in dblog's log: {log.read_text()[-3000:]}")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return log.read_text()



def snapshot_under_writes(workload, start_engine, timeout: float = 120,
                          catch_up_timeout: float = 180) -> tuple[EngineThread, object]:
    """The suite's recipe for a snapshot under writes, with the writers already started
    (`workload`: a `write_load(...)`'s WriteLoad, or anything with `stop()`): start the engine
    (`start_engine()`, say `lambda: EngineThread(config)`: its initial snapshot, or one a signal
    asks for), await its COMPLETED within `timeout` while they write, stop the writers (also when
    that fails; `stop()` raises a writer's error), then let the engine catch up with the source.
    Returns (engine, what `workload.stop()` returned: WriteLoad's number of writes). The test
    then compares its sink with the source its own way."""
    try:
        engine = start_engine()
        engine.wait_for("COMPLETED", timeout=timeout)
    finally:
        writes = workload.stop()
    engine.until_caught_up(timeout=catch_up_timeout)
    return engine, writes
