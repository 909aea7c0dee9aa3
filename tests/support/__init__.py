"""The tests' toolkit: waiting on a condition (`eventually`), holding a chunk read
(`hold_chunk_read`). The fixtures that start servers and load data are the plugins in
support/fixtures/; the engine runners are in support/harness.py; the other modules here are
helpers shared by several test modules (tests/README.md lists them)."""

from __future__ import annotations

import itertools
import os
import time
from typing import Callable, TypeVar

T = TypeVar("T")

# The server ends a replica's dump session when another replica registers with the same server
# id, so two tests on different xdist workers must never share one: each worker draws from its
# own million (gw0: 1,000,000..., gw1: 2,000,000...; 0... without xdist).
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", ...
_worker_number = int(_xdist_worker.removeprefix("gw")) + 1 if _xdist_worker else 0
_server_ids = itertools.count(_worker_number * 1_000_000 + 1000)


def next_server_id() -> int:
    """A replica server id no other binlog reader of this test run uses."""
    return next(_server_ids)


def eventually(condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.05,
               message: str | Callable[[], str] = "the condition") -> T:
    """Call `condition()` every `interval` seconds until it returns something truthy, and return
    that. After `timeout` seconds raise AssertionError naming what was awaited (`message`, or
    what the callable `message()` says at that moment) and the last value `condition()` gave.

    `condition` is always called at least once, also after the deadline; an exception it raises
    (say, "the engine stopped") propagates at once. With `interval=0` it is called back to back:
    for a condition that blocks by itself, like reading the next binlog event."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            awaited = message() if callable(message) else message
            raise AssertionError(f"waited {timeout:g} s for {awaited}; last value: {value!r}")
        if interval:
            time.sleep(interval)


def hold_chunk_read(monkeypatch, table, chunk: int, until: Callable[[], object], timeout: float = 120.0,
                    message: str = "the condition the chunk read waits for", reader_class: type | None = None) -> dict:
    """Make the `chunk`-th chunk read of `table` (`read_chunk` of `reader_class`, by default
    `ChunkReader`; before its SELECT: inside the chunk's window) wait until `until()` holds,
    e.g. until writers have written while a snapshot runs, whatever the engine's speed.
    Returns a dict whose "held" is True once the read has waited."""
    if reader_class is None:
        from dblog.mysql.chunk_reader import ChunkReader as reader_class

    original = reader_class.read_chunk
    state = {"reads": 0, "held": False}

    def read_chunk(self, request):
        if request.schema.table == table:
            state["reads"] += 1
            if state["reads"] == chunk:
                eventually(until, timeout, message=message)
                state["held"] = True
        return original(self, request)

    monkeypatch.setattr(reader_class, "read_chunk", read_chunk)
    return state
