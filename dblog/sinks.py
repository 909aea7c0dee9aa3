"""Where change events go. A sink takes batches and makes them durable on `flush()`;
the engine commits offsets only after `flush()` returns, so a sink never loses an event that
the offsets claim was delivered (delivery is at-least-once: after a crash, events since the
last committed offset are written again, in an order whose replay is still correct).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Protocol

import orjson

from dblog.envelope import envelopes
from dblog.events import RowChange, TableId
from dblog.offsets import Offsets


class SinkError(RuntimeError):
    """The sink cannot take a change without corrupting its target: the engine stops, with
    offsets left where they were, and the message says what to do."""


class Sink(Protocol):
    def write(self, changes: list[RowChange]) -> None: ...

    def flush(self, offsets: Offsets | None = None) -> None:
        """Return only once everything written so far survives a crash. `offsets` is the
        checkpoint about to be committed, for sinks that store it with their data."""

    def close(self) -> None: ...


class NullSink:
    """Discards everything (benchmarks: measures the engine without a sink's cost)."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, changes: list[RowChange]) -> None:
        self.count += len(changes)

    def flush(self, offsets: Offsets | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class JsonLinesSink:
    """Appends one Debezium record per line (`{"key": …, "value": envelope}`) to a file."""

    def __init__(self, path: str | os.PathLike, key_columns: Callable[[TableId], tuple[str, ...]], connector: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        self._file = open(self.path, "ab")
        self._key_columns = key_columns
        self._connector = connector

    def write(self, changes: list[RowChange]) -> None:
        now = int(time.time() * 1000)
        lines = []
        for change in changes:
            for record in envelopes(change, self._key_columns(change.table), self._connector, now):
                lines.append(encode_record(record))
        if lines:
            self._file.write(b"\n".join(lines) + b"\n")

    def flush(self, offsets: Offsets | None = None) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()


def encode_record(record: dict) -> bytes:
    """One record as compact UTF-8 JSON (what `json.dumps(record, ensure_ascii=False,
    separators=(",", ":"))` would write, encoded), by orjson: the stdlib encoder took more time
    per record than the rest of the snapshot."""
    return orjson.dumps(record)


def _drop_torn_tail(path: Path) -> None:
    """A crash mid-write can leave a last line without its newline. It was never covered by a
    committed offset (it is written again after the restart), so cut it off before appending."""
    if not path.exists():
        return
    with open(path, "rb+") as data:
        size = data.seek(0, os.SEEK_END)
        if size == 0:
            return
        data.seek(size - 1)
        if data.read(1) == b"\n":
            return
        end = size
        while end > 0:
            step = min(65536, end)
            data.seek(end - step)
            block = data.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                data.truncate(end - step + newline + 1)
                return
            end -= step
        data.truncate(0)


def read_json_lines(path: str | os.PathLike):
    """The records of a JSON-lines sink file (a torn last line, left by a crash, is skipped)."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):
                yield json.loads(line)
