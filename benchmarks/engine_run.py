"""One dblog Engine against the bench server, run in a thread, with its sink timed.

The engine is built from a config (`dblog.runtime.config.parse_config`) exactly as `dblog run` would
build it, each run with its own offsets file and replica server id. Its sink is wrapped in a
`TimedSink`. `finish(target)` lets the loop end once no snapshot is left, the stream has
consumed every transaction of `target` and a checkpoint can be committed.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.timed_sink import TimedSink
from dblog.core.events import Heartbeat, Notification, TableId
from dblog.core.gtid import GtidSet
from dblog.core.progress import TableSnapshot
from dblog.demo.localstack import LocalMariaDB
from dblog.runtime.config import parse_config
from dblog.runtime.engine import Engine

SERVER_IDS = itertools.count(9101)  # a replica id per binlog reader: never two on one id


def engine_config(
    db: LocalMariaDB, workdir: Path, name: str, tables: list[TableId], sink: dict[str, Any], chunk_size: int,
    **sections: dict[str, Any],
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": f"bench-{name}",
        "source": {
            "port": db.port, "user": db.user, "password": db.password, "server_id": next(SERVER_IDS),
            "include": [f"{t.db}\\.{t.table}" for t in tables],
        },
        "snapshot": {"startup": "never", "chunk_size": chunk_size},
        "sink": sink,
        "offsets": {"path": str(workdir / f"{name}-offsets.json")},
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return data


class EngineRun:
    def __init__(self, config_data: dict[str, Any], probe_table: TableId | None = None,
                 count_heartbeat_waits: bool = False) -> None:
        self.config = parse_config(config_data, origin="benchmark config")
        self.notifications: list[tuple[float, Notification]] = []  # (perf_counter, notification)
        self.completed = threading.Event()
        self.completed_at: float | None = None
        self.completed_cpu: float | None = None
        self.scanned: dict[str, int] = {}  # table -> total_rows_scanned, from TABLE_SCAN_COMPLETED
        self.engine = Engine(self.config, on_notification=self._on_notification)
        self.sink = TimedSink(self.engine.sink, probe_table)
        self.engine.sink = self.sink
        self.capture = self.engine.start()
        self.heartbeat_waits = 0  # heartbeats that arrived while a chunk's window was open
        if count_heartbeat_waits:
            self._count_heartbeat_waits()
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.started_cpu: float | None = None
        self._finishing = False
        self._target: GtidSet | None = None
        self._thread = threading.Thread(target=self._run, name="dblog-bench-engine", daemon=True)

    def _count_heartbeat_waits(self) -> None:
        capture = self.capture
        on_event = capture.on_event

        def counting(event):
            if isinstance(event, Heartbeat) and capture.window is not None:
                self.heartbeat_waits += 1
            return on_event(event)

        capture.on_event = counting  # instance attribute: the engine's loop calls this one

    def _on_notification(self, notification: Notification) -> None:
        now = time.perf_counter()
        self.notifications.append((now, notification))
        if notification.type == "TABLE_SCAN_COMPLETED":
            data = notification.data
            self.scanned[data["data_collection"]] = data["total_rows_scanned"]
            if data.get("status") != "SUCCEEDED":
                self.error = RuntimeError(f"snapshot of {data['data_collection']} ended {data.get('status')}")
        if notification.type == "COMPLETED":
            self.completed_at, self.completed_cpu = now, time.process_time()
            self.completed.set()

    def reader_cpu_seconds(self) -> float | None:
        """CPU seconds of the engine's binlog reader process (source.reader_process) so far, or
        when it was closed; None without one."""
        cpu_seconds = getattr(self.engine.binlog, "cpu_seconds", None)
        return cpu_seconds() if cpu_seconds is not None else None

    def reader_started_seconds(self) -> float | None:
        """From starting the reader process to its first batch of events; None without one."""
        started = getattr(self.engine.binlog, "started_seconds", None)
        return round(started, 3) if started is not None else None

    def request_snapshot(self, tables: list[TableId]) -> None:
        """Queue a snapshot of `tables` (before `start`: the loop's thread owns the capture after)."""
        assert not self._thread.is_alive()
        self.capture.request_snapshot([TableSnapshot(table) for table in tables], "bench")

    def start(self) -> "EngineRun":
        self.started_at, self.started_cpu = time.perf_counter(), time.process_time()
        self._thread.start()
        return self

    @property
    def snapshot_seconds(self) -> float:
        assert self.started_at is not None and self.completed_at is not None
        return self.completed_at - self.started_at

    @property
    def snapshot_cpu_seconds(self) -> float:
        assert self.started_cpu is not None and self.completed_cpu is not None
        return self.completed_cpu - self.started_cpu

    def _run(self) -> None:
        try:
            self.engine.run(until=self._done)
        except BaseException as error:  # reported by finish() / wait_completed()
            self.error = error

    def _done(self) -> bool:
        # Called by the loop before every event: the cheap checks first (checkpoint() is None at
        # once inside a transaction), so that the harness costs the measured loop next to nothing.
        capture = self.capture
        return (
            self._finishing
            and capture.progress.current is None
            and capture.checkpoint() is not None
            and (self._target is None or self._target.issubset(capture.position))
        )

    def wait_completed(self, timeout: float) -> None:
        """Until the snapshot's COMPLETED notification; raises if the engine failed or stalled."""
        deadline = time.monotonic() + timeout
        while not self.completed.wait(0.1):
            self._raise_if_failed()
            if not self._thread.is_alive():
                raise RuntimeError("the engine stopped before its snapshot completed")
            if time.monotonic() > deadline:
                raise TimeoutError(f"snapshot not completed within {timeout:.0f} s")
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"engine failed: {type(self.error).__name__}: {self.error}") from self.error

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            self._raise_if_failed()
            if not self._thread.is_alive():
                raise RuntimeError(f"the engine stopped before {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"not {what} within {timeout:.0f} s")
            time.sleep(0.05)

    def finish(self, target: str | None = None, timeout: float = 600) -> None:
        """Let the loop end once caught up with `target` (a GTID position); wait for it."""
        if target:
            self._target = GtidSet.parse(target, "mariadb")
        self._finishing = True
        if self._thread.is_alive() or self.started_at is None:
            if self.started_at is None:
                self.start()
            self._thread.join(timeout)
        if self._thread.is_alive():
            self.engine.stop()
            self._thread.join(30)
            raise TimeoutError(f"the engine did not catch up with {target} within {timeout:.0f} s")
        self._raise_if_failed()

    def abandon(self) -> None:
        """Stop the loop whatever its state (on an error elsewhere); never raises."""
        self._finishing = True
        self.engine.stop()
        if self._thread.is_alive():
            self._thread.join(30)
        elif self.started_at is None:
            try:  # never started: close what start() opened
                self.engine.sink.close()
                self.engine.source.close()
            except Exception:
                pass
