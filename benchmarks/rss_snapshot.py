"""`python -m benchmarks.rss_snapshot`: one engine process snapshotting one table to the null
sink, reporting its peak RSS as JSON on stdout. Run by `benchmarks.memory`, once per table size,
so that each peak belongs to that snapshot alone.

All figures are this process's own (VmHWM / VmRSS, `benchmarks.process_rss`), never
inherited from the parent that started it. `startup_peak_kib` is the peak after imports and the
engine's start; the peak is then reset, so `peak_kib` is the peak during the snapshot itself
(`peak_scope` "snapshot"), or, where the kernel refuses the reset, the process's lifetime
peak (`peak_scope` "process"); `rss_before_kib` is the RSS just before the first chunk. With a
binlog reader process (`source.reader_process`) `reader_peak_kib` is that child's own lifetime
peak, read as the snapshot completes, and `total_peak_kib` adds it to the engine's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks.process_rss import current_kib, peak_kib, reset_peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rss_snapshot")
    parser.add_argument("--config", required=True, help="the engine's config, as JSON")
    parser.add_argument("--table", required=True, help="db.table to snapshot")
    args = parser.parse_args(argv)

    from dblog.core.events import TableId
    from dblog.core.progress import TableSnapshot
    from dblog.runtime.config import parse_config
    from dblog.runtime.engine import Engine

    done: list[dict] = []

    def on_notification(notification) -> None:
        if notification.type == "TABLE_SCAN_COMPLETED":
            done.append(notification.data)

    engine = Engine(parse_config(json.loads(args.config)), on_notification=on_notification)
    capture = engine.start()
    capture.request_snapshot([TableSnapshot(TableId.parse(args.table))], "bench-rss")
    startup_peak, before = peak_kib(), current_kib()
    scope = "snapshot" if reset_peak() else "process"
    started = time.perf_counter()
    reader_peak: list[int] = []

    def finished() -> bool:
        if not (done and capture.checkpoint() is not None):
            return False
        reader_pid = getattr(engine.binlog, "pid", None)  # the reader process, before run() closes it
        if reader_pid is not None and not reader_peak:
            reader_peak.append(peak_kib(reader_pid))
        return True

    engine.run(until=finished)
    seconds = time.perf_counter() - started
    peak = peak_kib()
    print(json.dumps({
        "rows": engine.sink.count, "scanned": done[0]["total_rows_scanned"], "status": done[0]["status"],
        "seconds": round(seconds, 3), "peak_kib": peak, "peak_scope": scope,
        "reader_peak_kib": reader_peak[0] if reader_peak else None, "total_peak_kib": peak + sum(reader_peak),
        "startup_peak_kib": startup_peak, "rss_before_kib": before, "rss_after_kib": current_kib(),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
