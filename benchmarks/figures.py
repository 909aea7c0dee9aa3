"""What a benchmark reports: figures, each optionally measured against a physical limit, and
the clocks that time them (wall, this process's CPU, the database server's CPU)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    """One measured number. `limit` names the figure (by key) it is measured against; `ratio`
    is value / limit's value (filled in by `Results.add`). `check` says what was verified about
    the measurement, `check_ok` whether it held."""

    key: str  # stable id, e.g. "snapshot.null.orders"
    section: str
    label: str
    value: float
    unit: str  # "rows/s", "ms", "MiB"
    limit: str | None = None
    ratio: float | None = None
    check: str | None = None
    check_ok: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Results:
    machine: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # section -> what went wrong
    seconds: float = 0.0

    def get(self, key: str) -> Figure | None:
        return next((figure for figure in self.figures if figure.key == key), None)

    def add(self, figure: Figure) -> Figure:
        if figure.limit is not None:
            limit = self.get(figure.limit)
            if limit is not None and limit.value:
                figure.ratio = figure.value / limit.value
        self.figures.append(figure)
        return figure

    def replace(self, figure: Figure) -> None:
        """`figure` instead of the one of its key; the ratios of figures measured against it follow."""
        self.figures = [figure if known.key == figure.key else known for known in self.figures]
        for known in self.figures:
            if known.limit == figure.key and figure.value:
                known.ratio = known.value / figure.value

    @property
    def failed_checks(self) -> list[Figure]:
        return [figure for figure in self.figures if figure.check_ok is False]

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "settings": self.settings,
            "figures": [figure.to_json() for figure in self.figures],
            "errors": self.errors,
            "seconds": round(self.seconds, 1),
        }


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(seconds: list[float]) -> dict[str, float]:
    """Count, p50, p99 and max of latencies given in seconds, in milliseconds."""
    return {
        "count": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 1),
        "p99_ms": round(percentile(seconds, 99) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1) if seconds else math.nan,
    }


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of another process (Linux /proc), None if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stopwatch:
    """Wall time, this process's CPU time (all threads) and, given its pid, the database
    server's CPU time, between `start()` and `stop()`."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.wall = self.cpu = 0.0
        self.server_cpu: float | None = None

    def start(self) -> "Stopwatch":
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        self._server0 = process_cpu_seconds(self.server_pid) if self.server_pid else None
        return self

    def stop(self) -> "Stopwatch":
        self.wall = time.perf_counter() - self._wall0
        self.cpu = time.process_time() - self._cpu0
        if self._server0 is not None:
            server = process_cpu_seconds(self.server_pid)
            self.server_cpu = None if server is None else server - self._server0
        return self

    def __enter__(self) -> "Stopwatch":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def detail(self, rows: int) -> dict[str, Any]:
        """rows, seconds, client CPU seconds and rows per client CPU-second, server CPU seconds."""
        out: dict[str, Any] = {
            "rows": rows,
            "seconds": round(self.wall, 3),
            "cpu_seconds": round(self.cpu, 3),
            "rows_per_cpu_second": round(rows / self.cpu) if self.cpu > 0 else None,
        }
        if self.server_cpu is not None:
            out["server_cpu_seconds"] = round(self.server_cpu, 3)
        return out


def rate(rows: int, seconds: float) -> float:
    return rows / seconds if seconds > 0 else math.nan
