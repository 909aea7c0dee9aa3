"""`python -m benchmarks.rss_snapshot`: one engine process snapshotting one table to the null
sink, reporting its peak RSS as JSON on stdout. Run by `benchmarks.memory`, once per table size,
so that each peak belongs to that snapshot alone.

peak_kib is the process's peak RSS at the end (getrusage ru_maxrss, KiB on Linux), the figure;
baseline_kib that peak before the first chunk (after imports and the engine's start). Since
imports can peak above what the snapshot needs, the current RSS is also sampled every 50 ms:
rss_before_kib just before the snapshot, sampled_max_kib its largest value during it.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
from pathlib import Path


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def current_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class RssSampler:
    def __init__(self, interval: float = 0.05) -> None:
        self.max_kib = current_kib()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self.max_kib = max(self.max_kib, current_kib())

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.max_kib = max(self.max_kib, current_kib())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rss_snapshot")
    parser.add_argument("--config", required=True, help="the engine's config, as JSON")
    parser.add_argument("--table", required=True, help="db.table to snapshot")
    args = parser.parse_args(argv)

    from dblog.config import parse_config
    from dblog.engine import Engine
    from dblog.events import TableId
    from dblog.progress import TableSnapshot

    done: list[dict] = []

    def on_notification(notification) -> None:
        if notification.type == "TABLE_SCAN_COMPLETED":
            done.append(notification.data)

    engine = Engine(parse_config(json.loads(args.config)), on_notification=on_notification)
    capture = engine.start()
    capture.request_snapshot([TableSnapshot(TableId.parse(args.table))], "bench-rss")
    baseline, before = peak_kib(), current_kib()
    started = time.perf_counter()
    with RssSampler() as sampler:
        engine.run(until=lambda: bool(done) and capture.checkpoint() is not None)
    seconds = time.perf_counter() - started
    print(json.dumps({
        "rows": engine.sink.count, "scanned": done[0]["total_rows_scanned"], "status": done[0]["status"],
        "seconds": round(seconds, 3), "baseline_kib": baseline, "peak_kib": peak_kib(),
        "rss_before_kib": before, "sampled_max_kib": sampler.max_kib,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
