"""What the metrics cost the stream: the same binlog backlog streamed, in alternating trials, by
the code without metrics and by this tree with its endpoint served and scraped every second.

    python benchmarks/metrics_overhead.py --base /tmp/dblog-base [--rounds 5] [--burst-rows 200000]

`--base`: a checkout of the code before the metrics (e.g. `git archive <commit> | tar -x -C DIR`).
One private MariaDB; the streaming benchmark's burst (`benchmarks.streaming.write_burst`:
INSERT … SELECT, UPDATE, DELETE on `orders_by_id`, `--txn-rows` rows per transaction) written
once per transaction size (100 rows, as the streaming benchmark, and 1 row: the most
transactions per row, where the per-transaction work weighs most); then each trial is a fresh
`python` process (PYTHONPATH = one of the two trees) whose engine starts from offsets at the
burst's start and streams it to the null sink, with the reader in-process and in its own
process. Reported per variant: the median rate (first → last change at the sink) and the median
(and least) CPU microseconds per row of the engine's process (the scraper thread included) and
of the reader process. Medians over `--rounds` interleaved trials; the machine's other load moves
single trials by more than the effect measured, hence the interleaving.

`--same-process`: the trials in this one process instead, alternating the base tree's
`dblog/runtime/engine.py` (loaded beside this tree's) and this tree's; every other module is
this tree's for both, so it measures the loop's own changes (the engine's hooks and counts; the
binlog source's and reader process's additions run in both). On a shared machine it resolves a
few percent where separate processes do not.

`--callgrind`: instructions of the engine's process per row, counted by valgrind's callgrind
(deterministic where timings on a shared machine are not): each variant streams half the burst,
then all of it, and the difference is divided by the rows; no commits on the clock (the
last one only), no endpoint (scrapes come on the clock too; their cost is per second, not per
row). The reader process, when on, is not counted (callgrind does not follow it).

`--loop-only`: the engine's loop alone, the worst case for a relative cost: the same trials,
but the binlog source replaced by a list of events built in memory before the clock starts
(TransactionStart, `--txn-rows` RowChanges, TransactionEnd, repeated), so nothing is decoded
or unpickled and the loop's own work (capture, dispatch, sink, and the metrics' counting) is
all that is timed.

Results: printed, and kept in `benchmarks/results/metrics_overhead.json` by mode (timed or
callgrind; loop only, or the `--reader-process` settings: a run replaces its mode's entry, the
others stay), with
`metrics_overhead.md` made from it; benchmarks/README.md is rendered again from it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent


def _trial(arguments: argparse.Namespace) -> None:
    """In the child: stream the burst once, print one JSON line."""
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]  # not benchmarks/ modules
    from dblog.runtime.engine import Engine

    print(json.dumps(_stream_once(Engine, arguments, arguments.metrics)))


def _stream_once(engine_class, arguments: argparse.Namespace, metrics: bool) -> dict:
    """Start an `engine_class` at the burst's start (offsets written for it) and stream the burst
    (or the same number of rows built in memory, `loop_only`) to a counting null sink; with
    `metrics`, its endpoint served and scraped every second meanwhile."""
    import threading
    import urllib.request

    from dblog.core.gtid import GtidSet
    from dblog.core.offsets import Offsets
    from dblog.runtime.config import parse_config
    from dblog.runtime.offset_store import OffsetStore
    from dblog.sinks.base import Sink

    offsets_path = Path(arguments.workdir) / f"offsets-{os.getpid()}-{time.monotonic_ns()}.json"
    OffsetStore(str(offsets_path)).save(Offsets("mariadb", GtidSet.parse(arguments.start, "mariadb")))
    config = parse_config({
        "name": "overhead",
        "source": {"port": arguments.port, "user": arguments.user, "password": arguments.password,
                   "server_id": arguments.server_id, "include": [arguments.include],
                   "reader_process": arguments.reader_process == "on"},
        "snapshot": {"startup": "never"},
        "sink": {"type": "null"},
        # Under callgrind no commit on the clock: commits per second of a 50x slower run would
        # weigh on the instructions per row as the run's duration, not its code, decides.
        "offsets": {"path": str(offsets_path),
                    **({"commit_interval_seconds": 1e9} if getattr(arguments, "no_clock_commits", False) else {})},
    })

    class Counting(Sink):
        def __init__(self) -> None:
            self.count, self.first, self.last, self.done = 0, None, None, False

        def write(self, changes) -> None:
            if changes:
                now = time.perf_counter()
                if self.first is None:
                    self.first = now
                self.last = now
                self.count += len(changes)
                if self.count >= arguments.rows:
                    self.done = True

    sink = Counting()
    engine = engine_class(config, sink=sink)
    engine.start()
    if arguments.loop_only:
        events = _events(engine.capture.position, arguments.include, arguments.rows, arguments.txn_rows)

        class InMemory:  # what the loop uses of a binlog source
            reconnects = filtered_events = 0
            connected = True

            def __iter__(self):
                return iter(events)

            def close(self) -> None:
                pass

        engine._open_binlog = lambda *args, **kwargs: InMemory()
    scraping = threading.Event()
    scrapes = 0
    endpoint = None
    if metrics:
        from dblog.runtime.http_endpoint import serve
        from dblog.runtime.metrics import Metrics

        endpoint = serve(Metrics.of_engine(engine), "127.0.0.1", 0)

        def scrape() -> None:
            nonlocal scrapes
            while not scraping.wait(1.0):
                with urllib.request.urlopen(endpoint.url + "/metrics", timeout=10) as response:
                    response.read()
                scrapes += 1

        threading.Thread(target=scrape, daemon=True).start()
    cpu = time.process_time()
    engine.run(until=lambda: sink.done)
    cpu = time.process_time() - cpu
    scraping.set()
    reader_cpu = engine.binlog.cpu_seconds() if hasattr(engine.binlog, "cpu_seconds") else None
    if endpoint is not None:
        endpoint.close()
    offsets_path.unlink(missing_ok=True)
    if sink.count < arguments.rows:
        raise SystemExit(f"stopped early: {sink.count} of {arguments.rows} rows")
    return {"rows": sink.count, "seconds": sink.last - sink.first, "cpu": cpu, "reader_cpu": reader_cpu,
            "scrapes": scrapes}


def _events(position, include: str, rows: int, txn_rows: int) -> list:
    from dblog.core.events import (
        RowChange,
        SourceInfo,
        TableId,
        TransactionEnd,
        TransactionStart,
    )
    from dblog.core.gtid import Gtid

    table = TableId(*include.replace("\\.", ".").split(".", 1))
    seq = (position.last("0") or 0) + 1  # after the server's own transactions (MariaDB domain 0)
    now = int(time.time() * 1000)
    events: list = []
    row = {"order_id": 1, "region": "eu", "customer_id": 7, "amount": "12.50", "status": "paid"}  # shared: memory
    for first in range(0, rows, txn_rows):
        gtid = Gtid("0", seq, 1)
        seq += 1
        events.append(TransactionStart(gtid, 1, now, "binlog.000001", 4 + first))
        for index, order_id in enumerate(range(first, min(first + txn_rows, rows))):
            op = "cud"[order_id % 3]
            events.append(RowChange(table, op, (order_id,), row if op != "c" else None, row if op != "d" else None,
                                    SourceInfo(str(gtid), "binlog.000001", 4 + first, index, 1, now)))
        events.append(TransactionEnd(gtid))
    return events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="tree of the code without metrics")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--burst-rows", type=int, default=200_000)
    parser.add_argument("--table-rows", type=int, default=100_000)
    parser.add_argument("--txn-rows", default="100,1", help="rows per burst transaction, one burst each")
    parser.add_argument("--reader-process", default="off,on")
    parser.add_argument("--loop-only", action="store_true", help="the loop alone on events built in memory")
    parser.add_argument("--same-process", action="store_true",
                        help="every trial in this process, alternating the base tree's engine.py and this tree's "
                             "(the rest of the code is this tree's for both): no process-to-process variance")
    parser.add_argument("--no-endpoint", action="store_true",
                        help="a third variant: this tree, counting, with no endpoint served")
    parser.add_argument("--callgrind", action="store_true",
                        help="count the engine process's instructions per row under valgrind's callgrind instead "
                             "of timing (deterministic: the machine's load does not move it); each variant streams "
                             "half the burst, then all of it, and the difference is divided by the rows")
    parser.add_argument("--repeat", type=int, default=1,
                        help="--callgrind: (half, all) trial pairs per variant, alternating; medians compared")
    parser.add_argument("--base-name", default=None,
                        help="what the base tree is, for the results file (e.g. 'main 46c83f0')")
    parser.add_argument("--trial", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-clock-commits", action="store_true", help=argparse.SUPPRESS)
    for name in ("port", "server_id", "rows", "txn_rows_trial"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=argparse.SUPPRESS)
    for name in ("user", "password", "include", "start", "end", "workdir", "metrics"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.trial:
        arguments.metrics = arguments.metrics == "1"
        arguments.txn_rows = arguments.txn_rows_trial
        _trial(arguments)
        return 0
    if not arguments.base or not (Path(arguments.base) / "dblog").is_dir():
        parser.error("--base DIR: a tree holding the code without metrics (dblog/ in it)")

    sys.path.insert(0, str(TREE))
    from benchmarks.dataset import BenchTable, executed_gtids, load_tables
    from benchmarks.streaming import write_burst
    from dblog.demo.localstack import LocalMariaDB

    variants = {"without metrics": (arguments.base, False), "metrics, scraped every 1 s": (str(TREE), True)}
    if arguments.no_endpoint:
        variants["metrics counted, no endpoint"] = (str(TREE), False)
    engines = {}
    if arguments.same_process:  # the base tree's engine.py, beside this tree's (every other module is this tree's)
        import importlib.util

        from dblog.runtime.engine import Engine

        spec = importlib.util.spec_from_file_location("dblog_base_engine",
                                                      Path(arguments.base) / "dblog" / "runtime" / "engine.py")
        base_engine = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base_engine)
        engines = {arguments.base: base_engine.Engine, str(TREE): Engine}
    server_ids = iter(range(9500, 9999))
    report: dict = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dblog-overhead-") as workdir, LocalMariaDB() as db:
        from benchmarks.machine import machine_info

        machine = machine_info(db.execute("SELECT VERSION()")[0][0], with_java=False)
        table: BenchTable = load_tables(db, arguments.table_rows)["orders_by_id"]
        include = f"{table.table.db}\\.{table.table.table}"
        for txn_rows in (int(size) for size in arguments.txn_rows.split(",")):
            start = executed_gtids(db)
            if arguments.loop_only:
                rows, end = arguments.burst_rows, start
            else:
                counts = write_burst(db, table, arguments.burst_rows, txn_rows)
                rows, end = sum(counts.values()), executed_gtids(db)
            for reader_process in (["-"] if arguments.loop_only else arguments.reader_process.split(",")):
                key = (f"{txn_rows}-row transactions, " +
                       ("loop only (events in memory)" if arguments.loop_only else f"reader process {reader_process}"))
                if arguments.callgrind:
                    report[key] = _count_instructions(arguments, db, include, start, end, rows, txn_rows,
                                                      reader_process, workdir, server_ids)
                    print(json.dumps({key: report[key]}, indent=2), flush=True)
                    continue
                results: dict[str, list[dict]] = {name: [] for name in variants}
                for round_number in range(arguments.rounds):
                    order = list(variants.items())
                    if round_number % 2:  # alternate who goes first
                        order.reverse()
                    for name, (tree, metrics) in order:
                        if arguments.same_process:
                            result = _stream_once(engines[tree], argparse.Namespace(
                                port=db.port, user=db.user, password=db.password, server_id=next(server_ids),
                                include=include, start=start, rows=rows, workdir=workdir, loop_only=arguments.loop_only,
                                txn_rows=txn_rows, reader_process=reader_process), metrics)
                            _report_trial(results, name, result, key, round_number)
                            continue
                        command = [sys.executable, str(Path(__file__).resolve()), "--trial",
                                   "--port", str(db.port), "--user", db.user, "--password", db.password,
                                   "--server-id", str(next(server_ids)), "--include", include, "--start", start,
                                   "--end", end, "--rows", str(rows), "--workdir", workdir,
                                   "--metrics", "1" if metrics else "0", "--reader-process", reader_process,
                                   "--txn-rows-trial", str(txn_rows)]
                        if arguments.loop_only:
                            command.append("--loop-only")
                        output = subprocess.run(command, check=False, capture_output=True, text=True, timeout=1200,
                                                env={**os.environ, "PYTHONPATH": tree}, cwd=workdir)
                        if output.returncode != 0:
                            raise SystemExit(f"trial failed ({name}): {output.stderr[-3000:]}")
                        _report_trial(results, name, json.loads(output.stdout.strip().splitlines()[-1]), key,
                                      round_number)
                report[key] = {name: _summary(trials) for name, trials in results.items()}
                base = report[key]["without metrics"]
                for name in list(variants)[1:]:
                    measured = report[key][name]
                    measured["rate change"] = f"{measured['rows_per_second'] / base['rows_per_second'] - 1:+.1%}"
                    measured["engine CPU change"] = (
                        f"{measured['engine_cpu_us_per_row'] / base['engine_cpu_us_per_row'] - 1:+.1%}")
                    measured["engine CPU change, minima"] = (
                        f"{measured['engine_cpu_min'] / base['engine_cpu_min'] - 1:+.1%}")
                print(json.dumps({key: report[key]}, indent=2), flush=True)
    print(json.dumps(report, indent=2))
    paths = _write_results(arguments, machine, report, time.monotonic() - started)
    print("written: " + ", ".join(str(path) for path in paths))
    _refresh_readme()
    return 0


RESULTS = HERE / "results" / "metrics_overhead"


def _refresh_readme() -> None:
    """benchmarks/README.md rendered again (this file runs as a script: the package is imported by path)."""
    if str(HERE.parent) not in sys.path:
        sys.path.insert(0, str(HERE.parent))
    from benchmarks.report import refresh_readme

    refresh_readme()


def _mode(arguments: argparse.Namespace) -> str:
    mode = "callgrind (instructions per row)" if arguments.callgrind else (
        "timed, trials in one process" if arguments.same_process else "timed, one process per trial")
    return mode + (", loop only" if arguments.loop_only else f", reader process {arguments.reader_process}")


def _write_results(arguments: argparse.Namespace, machine: dict, report: dict, seconds: float) -> tuple[Path, Path]:
    """This run's report as its mode's entry of metrics_overhead.json (other modes' entries kept),
    and metrics_overhead.md from the whole file."""
    json_path, md_path = RESULTS.with_suffix(".json"), RESULTS.with_suffix(".md")
    runs = json.loads(json_path.read_text()) if json_path.exists() else {}
    command = sys.argv[1:]
    runs[_mode(arguments)] = {
        "machine": machine, "seconds": round(seconds), "command": "python benchmarks/metrics_overhead.py "
        + " ".join(command), "base": arguments.base_name or arguments.base, "burst_rows": arguments.burst_rows,
        "report": report,
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(runs, indent=2, ensure_ascii=False) + "\n")
    md_path.write_text(_markdown(runs))
    return json_path, md_path


def _markdown(runs: dict) -> str:
    lines = ["# What the metrics cost the stream (benchmarks/metrics_overhead.py)", "",
             ("The same binlog burst streamed by the code without the metrics (the base) and with them. "
              "Details in metrics_overhead.json."), ""]
    for mode, run in runs.items():
        machine = run["machine"]
        lines += [f"## {mode}", "",
                  (f"Run {machine.get('date')} on {machine.get('cores')} cores ({machine.get('cpu_model')}), load "
                   f"average at start {machine.get('load_average_at_start')}, {round(run['seconds'] / 60)} min; "
                   f"base: {run['base']}; `{run['command']}`."), ""]
        if mode.startswith("callgrind"):
            lines += [("| workload | without metrics (median; each repeat) | with metrics (median; each repeat) | "
                       "change of the medians |"), "|---|---|---|---|"]
            for workload, result in run["report"].items():
                cells = []
                for name in ("without metrics", "metrics counted"):
                    each = ", ".join(f"{value:,}" for value in result[name].get("per_row", []))
                    cells.append(f"{result[name]['instructions_per_row']:,} instructions/row" + (
                        f" ({each})" if each else ""))
                lines.append(f"| {workload} | {cells[0]} | {cells[1]} | {result['change']} |")
        else:
            lines += [("| workload | variant | rows/s (median) | rate change | engine CPU µs/row (median) | "
                       "CPU change |"), "|---|---|---|---|---|---|"]
            for workload, result in run["report"].items():
                for variant, summary in result.items():
                    lines.append(f"| {workload} | {variant} | {summary['rows_per_second']:,} | "
                                 f"{summary.get('rate change', '')} | {summary['engine_cpu_us_per_row']} | "
                                 f"{summary.get('engine CPU change', '')} |")
        lines.append("")
    return "\n".join(lines)


def _count_instructions(arguments, db, include: str, start: str, end: str, rows: int, txn_rows: int,
                        reader_process: str, workdir: str, server_ids) -> dict:
    """Instructions per row of the engine's process (not the reader process's: callgrind does not
    follow it), without and with the metrics counting (no endpoint: scrapes are timed, and under
    callgrind's 50x slowdown a 1 s scrape interval would weigh 50x too). `--repeat` pairs of
    (half, all) trials per variant, the variants alternating; the change is the medians'. A
    trial's warnings (say, a binlog reconnect) are kept with its figure."""
    import re
    import shutil

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
    half = rows // 2
    variants = (("without metrics", arguments.base), ("metrics counted", str(TREE)))
    out: dict = {name: {"per_row": [], "totals": [], "warnings": []} for name, _ in variants}
    for repeat in range(arguments.repeat):
        for name, tree in (variants if repeat % 2 == 0 else variants[::-1]):
            counts = []
            for limit in (half, rows):
                command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                           str(Path(__file__).resolve()), "--trial", "--port", str(db.port), "--user", db.user,
                           "--password", db.password, "--server-id", str(next(server_ids)), "--include", include,
                           "--start", start, "--end", end, "--rows", str(limit), "--workdir", workdir,
                           "--metrics", "0", "--reader-process", reader_process, "--txn-rows-trial", str(txn_rows)]
                command.append("--no-clock-commits")
                if arguments.loop_only:
                    command.append("--loop-only")
                output = subprocess.run(command, check=False, capture_output=True, text=True, timeout=3600,
                                        cwd=workdir, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
                collected = re.search(r"Collected : (\d+)", output.stderr)
                if output.returncode != 0 or collected is None:
                    raise SystemExit(f"callgrind trial failed ({name}): {output.stderr[-3000:]}")
                counts.append(int(collected.group(1)))
                out[name]["warnings"] += [line for line in output.stderr.splitlines()
                                          if "WARNING" in line or "lost" in line]
            per_row = round((counts[1] - counts[0]) / (rows - half))
            out[name]["per_row"].append(per_row)
            out[name]["totals"].append(counts)
            print(f"  {name}, repeat {repeat + 1}: {per_row:,} instructions per row", flush=True)
    for name, _ in variants:
        out[name]["instructions_per_row"] = round(statistics.median(out[name]["per_row"]))
    base, measured = (out[name]["instructions_per_row"] for name, _ in variants)
    out["change"] = f"{measured / base - 1:+.2%}"
    return out


def _report_trial(results: dict[str, list[dict]], name: str, result: dict, key: str, round_number: int) -> None:
    results[name].append(result)
    print(f"{key}, round {round_number + 1}, {name}: {result['rows'] / result['seconds']:,.0f} "
          f"rows/s, engine {result['cpu'] / result['rows'] * 1e6:.2f} µs CPU/row"
          + (f", reader {result['reader_cpu'] / result['rows'] * 1e6:.2f}" if result["reader_cpu"] else ""),
          flush=True)


def _summary(trials: list[dict]) -> dict:
    rates = [t["rows"] / t["seconds"] for t in trials]
    cpu = [t["cpu"] / t["rows"] * 1e6 for t in trials]
    reader = [t["reader_cpu"] / t["rows"] * 1e6 for t in trials if t["reader_cpu"]]
    summary = {"rows_per_second": round(statistics.median(rates)), "rates": [round(r) for r in rates],
               "engine_cpu_us_per_row": round(statistics.median(cpu), 3), "engine_cpu_min": round(min(cpu), 3),
               "engine_cpu": [round(c, 2) for c in cpu]}
    if reader:
        summary["reader_cpu_us_per_row"] = round(statistics.median(reader), 3)
    return summary


if __name__ == "__main__":
    sys.exit(main())
