"""`python -m benchmarks.rss_transaction`: one engine process streaming one large transaction into
its sink, reporting its peak RSS as JSON on stdout. Run by `benchmarks.transaction_memory`, once
per sink, so that each peak belongs to that run alone.

Protocol with the parent: once the engine has started (and, for Iceberg, its Spark session and
the target table exist) the child prints `{"ready": …}` and reads one line from stdin: the
server's GTID position after the parent committed the transaction. It streams until its
checkpoint holds that position, commits (the engine's final commit), then prints its figures:
`peak_kib` the engine process's own peak RSS from just before the transaction to the end of its
commit (VmHWM, reset when ready; `benchmarks.process_rss`), `rss_before_kib` its RSS then,
`reader_peak_kib` the binlog reader process's lifetime peak, if there is one, and `rows` the
rows its sink holds afterwards (JSON-lines: lines written; Iceberg: rows of the target table;
Kafka: records acknowledged, which the parent checks against the topic; the null sink: the changes
the engine handed it); `max_fds` / `end_fds` the engine process's open file descriptors at most
(sampled every 0.25 s while it runs) and once it has streamed everything (its connections
still open: the baseline), `reader_max_fds` / `reader_end_fds` the reader process's.
The Spark JVM is a process of its own and is not counted (the sink's Python side is what grew
with the transaction).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from benchmarks.process_rss import current_kib, peak_kib, reset_peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rss_transaction")
    parser.add_argument("--config", required=True, help="the engine's config, as JSON")
    parser.add_argument("--table", required=True, help="db.table the transaction writes")
    args = parser.parse_args(argv)

    from dblog.core.events import TableId
    from dblog.core.gtid import GtidSet
    from dblog.runtime.config import parse_config
    from dblog.runtime.engine import Engine

    config = parse_config(json.loads(args.config))
    table = TableId.parse(args.table)
    engine = Engine(config)
    capture = engine.start()
    iceberg = config.sink.type == "iceberg"
    if iceberg:  # the target table made before the transaction: its creation is not the transaction's cost
        engine.sink._target(engine.sink.router.route(table).target, table, False)
        engine.sink.spark.sparkContext.setLogLevel("ERROR")
    startup_peak, before = peak_kib(), current_kib()
    scope = "transaction" if reset_peak() else "process"
    target: list[GtidSet] = []

    def read_target() -> None:
        target.append(GtidSet.parse(sys.stdin.readline().strip(), engine.flavor))

    threading.Thread(target=read_target, daemon=True).start()
    print(json.dumps({"ready": True, "rss_kib": before}), flush=True)
    reader_peak: list[int] = []
    samples: list[int] = []
    fds: dict[str, list[int]] = {"engine": [], "reader": []}
    next_sample = [0.0, 0.0]

    def sample_fds() -> None:
        fds["engine"].append(_open_fds("self"))
        reader = getattr(engine.binlog, "pid", None)
        if reader is not None:
            fds["reader"].append(_open_fds(reader))

    def finished() -> bool:
        now = time.monotonic()
        if now >= next_sample[0]:
            samples.append(current_kib())
            next_sample[0] = now + 1.0
        if now >= next_sample[1]:
            sample_fds()
            next_sample[1] = now + 0.25
        checkpoint = capture.checkpoint()
        if not target or checkpoint is None or not target[0].issubset(checkpoint.position):
            return False
        reader_pid = getattr(engine.binlog, "pid", None)  # the reader process, before run() closes it
        if reader_pid is not None and not reader_peak:
            reader_peak.append(peak_kib(reader_pid))
        sample_fds()  # the last: every change streamed, the connections open
        return True

    started = time.perf_counter()
    engine.run(until=finished)  # ends with the engine's final commit
    seconds = time.perf_counter() - started
    peak = peak_kib()
    after = current_kib()
    if iceberg:
        qualified = engine.sink.target_name(table)
        rows = engine.sink.spark.sql(f"SELECT COUNT(*) FROM {qualified}").first()[0]
        engine.sink.spark.stop()
    elif config.sink.type == "kafka":
        rows = engine.sink.produced  # acknowledged (the final commit flushed); the parent counts the topic
    elif config.sink.type == "null":
        counts = engine.stats.changes.get(table)
        rows = sum(counts) if counts else 0
    else:
        with open(config.sink.path, "rb") as lines:
            rows = sum(1 for _ in lines)
    print(json.dumps({
        "rows": rows, "seconds": round(seconds, 3), "peak_kib": peak, "peak_scope": scope,
        "reader_peak_kib": reader_peak[0] if reader_peak else None, "total_peak_kib": peak + sum(reader_peak),
        "startup_peak_kib": startup_peak, "rss_before_kib": before, "rss_after_kib": after,
        "rss_samples_mib": [round(kib / 1024) for kib in samples],
        "max_fds": max(fds["engine"]), "end_fds": fds["engine"][-1],
        "reader_max_fds": max(fds["reader"]) if fds["reader"] else None,
        "reader_end_fds": fds["reader"][-1] if fds["reader"] else None,
    }), flush=True)
    return 0


def _open_fds(pid: int | str) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:  # gone (the reader process at the end)
        return 0


if __name__ == "__main__":
    sys.exit(main())
