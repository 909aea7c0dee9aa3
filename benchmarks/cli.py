"""`python -m benchmarks`: options, then every selected section against one private MariaDB."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.collation import measure_collation
from benchmarks.context import BenchContext
from benchmarks.dataset import load_tables
from benchmarks.distributed import measure_distributed
from benchmarks.figures import Results
from benchmarks.iceberg import measure_iceberg
from benchmarks.kafka import measure_kafka
from benchmarks.kafka_refusal import measure_kafka_refusal
from benchmarks.machine import machine_info
from benchmarks.memory import measure_rss
from benchmarks.oltp import measure_oltp
from benchmarks.physical_limits import measure_limits
from benchmarks.scale import measure_scale
from benchmarks.report import RESULTS_DIR, markdown, refresh_readme, write_results
from benchmarks.snapshot import measure_parallel_snapshots, measure_quiet_snapshots, measure_snapshot_under_load
from benchmarks.streaming import measure_streaming
from benchmarks.transaction_memory import measure_transaction_memory
from dblog.demo.localstack import LocalMariaDB

SECTIONS = {
    "limits": measure_limits,
    "snapshot": measure_quiet_snapshots,
    "parallel": measure_parallel_snapshots,
    "streaming": measure_streaming,
    "under-load": measure_snapshot_under_load,
    "rss": measure_rss,
    "iceberg": measure_iceberg,
    "distributed": measure_distributed,
    "oltp": measure_oltp,
    "kafka": measure_kafka,
    "kafka-refusal": measure_kafka_refusal,
    "memory": measure_transaction_memory,
    "scale": measure_scale,
    "collation": measure_collation,
}
SCALE_PARTS = ("tables", "backlog", "iceberg")  # iceberg: opt-in (--scale-parts tables,iceberg)
# Sections that need none of the orders tables loaded before every section (--only them: no load).
OWN_DATA = {"scale", "collation", "kafka-refusal"}

FULL = {"rows": 1_000_000, "rss_sizes": [1_000_000, 5_000_000], "burst_rows": 200_000, "iceberg_seconds": 60,
        "oltp_seconds": 30, "oltp_phase_seconds": 10, "oltp_snapshot_seconds": 120, "oltp_bisections": 2,
        "kafka_rows": 300_000, "txn_rows": 300_000, "xa_transactions": 1_000, "xa_rows": 1_000,
        "scale_tables": 1_000, "scale_table_rows": 1_000, "scale_transactions": 10_000,
        "backlog_transactions": 1_000_000, "backlog_accounts": 100_000,
        "scale_iceberg_tables": 200, "scale_iceberg_transactions": 2_000}
QUICK = {"rows": 50_000, "rss_sizes": [50_000, 250_000], "burst_rows": 20_000, "iceberg_seconds": 10,
         "oltp_seconds": 5, "oltp_phase_seconds": 3, "oltp_snapshot_seconds": 20, "oltp_bisections": 1,
         "kafka_rows": 30_000, "txn_rows": 30_000, "xa_transactions": 100, "xa_rows": 100, "scale_tables": 200, "scale_table_rows": 100, "scale_transactions": 1_000,
         "backlog_transactions": 20_000, "backlog_accounts": 10_000,
         "scale_iceberg_tables": 50, "scale_iceberg_transactions": 200}


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 1000000,5000000, got {text!r}") from None
    if len(sizes) != 2 or sizes[0] < 1:
        raise argparse.ArgumentTypeError("give two different positive table sizes, e.g. 1000000,5000000")
    return sizes


def _counts(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected counts like 1,2,4, got {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("give positive counts, e.g. 1,2,4")
    return counts


def _sections(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"sections are {', '.join(SECTIONS)}; got {text!r}")
    return names


def _scale_parts(text: str) -> list[str]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or any(part not in SCALE_PARTS for part in parts):
        raise argparse.ArgumentTypeError(f"scale parts are {', '.join(SCALE_PARTS)}; got {text!r}")
    return parts


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="dblog's throughput, latency and memory against this machine's physical limits "
                    f"(sections: {', '.join(SECTIONS)}).",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test, about a minute: {QUICK['rows']:,} rows, RSS sizes "
                             f"{QUICK['rss_sizes'][0]:,}/{QUICK['rss_sizes'][1]:,}, smaller burst and phases")
    parser.add_argument("--only", type=_sections, help="comma-separated sections to run (default: all)")
    parser.add_argument("--skip", type=_sections, default=[], help="comma-separated sections not to run")
    parser.add_argument("--rows", type=int, help=f"rows per table (default {FULL['rows']:,})")
    parser.add_argument("--rss-sizes", type=_sizes,
                        help=f"two table sizes for peak RSS (default {FULL['rss_sizes'][0]},{FULL['rss_sizes'][1]})")
    parser.add_argument("--chunk-size", type=int, default=1024, help="snapshot chunk size (default: the engine's, 1024)")
    parser.add_argument("--burst-rows", type=int, help=f"row changes in the streaming burst (default {FULL['burst_rows']:,})")
    parser.add_argument("--burst-txn-rows", type=int, default=100, help="rows per burst transaction (default 100)")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writers (default 4)")
    parser.add_argument("--write-rate", type=float, default=200,
                        help="writes per second per writer under the snapshot (default 200; 0: full speed)")
    parser.add_argument("--probe-rate", type=float, default=20, help="timestamped probe rows per second (default 20)")
    parser.add_argument("--iceberg-write-rate", type=float, default=50,
                        help="writes per second per writer in the Iceberg latency phase (default 50)")
    parser.add_argument("--iceberg-seconds", type=float,
                        help=f"length of the Iceberg latency phase (default {FULL['iceberg_seconds']} s)")
    parser.add_argument("--iceberg-commit-seconds", type=float, default=1.0,
                        help="offsets.commit_interval_seconds for Iceberg (default 1 s; the engine's own is 10 s)")
    parser.add_argument("--iceberg-write-mode", choices=["merge", "upsert"], default="merge",
                        help="iceberg.write_mode of the Iceberg section (default merge)")
    parser.add_argument("--distributed-tasks", type=_counts, default=[1, 2, 4],
                        help="Spark tasks reading at once, one run each, for the distributed section (default 1,2,4)")
    parser.add_argument("--distributed-range-rows", type=int, default=50_000,
                        help="snapshot.distributed_range_rows (default 50,000)")
    parser.add_argument("--distributed-window-rows", type=int, default=1_000_000,
                        help="snapshot.distributed_window_rows (default 1,000,000)")
    parser.add_argument("--oltp-writers", type=int, default=3, help="OLTP writers (default 3)")
    parser.add_argument("--oltp-writer-processes", type=int, default=1,
                        help="client processes the OLTP writers run in, as threads (default 1: 3 threads of one "
                             "client; = --oltp-writers for a process each, a heavier load)")
    parser.add_argument("--oltp-seconds", type=float,
                        help=f"how long the OLTP writers write the backlog (default {FULL['oltp_seconds']} s)")
    parser.add_argument("--oltp-rate", type=float, default=0,
                        help="total transactions/s of the OLTP writers for the backlog (default 0: full speed)")
    parser.add_argument("--oltp-table-rows", type=int, default=10_000,
                        help="starting rows in each of the 8 OLTP tables (default 10,000)")
    parser.add_argument("--oltp-phase-seconds", type=float,
                        help=f"length of each phase of the lag-rate search (default {FULL['oltp_phase_seconds']} s)")
    parser.add_argument("--oltp-lag-start", type=float, default=250,
                        help="first total rate (tx/s) of the lag-rate search; it doubles until lag p99 >= 1 s (default 250)")
    parser.add_argument("--oltp-bisections", type=int,
                        help=f"bisection steps after the doubling (default {FULL['oltp_bisections']})")
    parser.add_argument("--oltp-snapshot-seconds", type=float,
                        help="longest the full-speed writers run during the snapshot under writers "
                             f"(default {FULL['oltp_snapshot_seconds']} s)")
    parser.add_argument("--kafka-rows", type=int,
                        help=f"rows of the kafka section's table, generated for it (default {FULL['kafka_rows']:,})")
    parser.add_argument("--scale-parts", type=_scale_parts, default=["tables", "backlog"],
                        help=f"parts of the scale section, of {', '.join(SCALE_PARTS)} (default: tables,backlog; "
                             "iceberg is opt-in, the many-tables figures into the Iceberg sink)")
    parser.add_argument("--scale-tables", type=int,
                        help=f"small tables of the scale section's tables part (default {FULL['scale_tables']:,}; "
                             "10000: the opt-in size of issue 29's start-up and RSS targets)")
    parser.add_argument("--scale-table-rows", type=int,
                        help=f"rows of each of those tables (default {FULL['scale_table_rows']:,}); the one large "
                             "table of the baseline has tables × rows")
    parser.add_argument("--scale-transactions", type=int,
                        help=f"transactions streamed over random tables (default {FULL['scale_transactions']:,})")
    parser.add_argument("--backlog-transactions", type=int,
                        help=f"transactions of the scale section's backlog part, written while dblog is stopped "
                             f"(default {FULL['backlog_transactions']:,}; 5000000: the opt-in size of issue 29's "
                             "catch-up target)")
    parser.add_argument("--backlog-accounts", type=int,
                        help=f"rows of the backlog part's `accounts` table, the one its snapshot reads "
                             f"(default {FULL['backlog_accounts']:,})")
    parser.add_argument("--backlog-kafka", action="store_true",
                        help="the backlog part also catches up into the Kafka sink (a private broker)")
    parser.add_argument("--scale-iceberg-tables", type=int,
                        help=f"small tables of the scale section's iceberg part (opt-in: --scale-parts "
                             f"tables,iceberg; default {FULL['scale_iceberg_tables']:,}), of --scale-table-rows rows")
    parser.add_argument("--scale-iceberg-transactions", type=int,
                        help="transactions streamed into Iceberg over random tables by the iceberg part "
                             f"(default {FULL['scale_iceberg_transactions']:,})")
    parser.add_argument("--reader-process", choices=("auto", "on", "off"), default="auto",
                        help="every engine's source.reader_process (the binlog read and decoded in a second "
                             "process): auto (the engine's default: on with two usable cores), on, off")
    parser.add_argument("--spark-master", choices=("local", "cluster"), default="local",
                        help="where the iceberg and distributed sections run Spark's tasks: local[N] in the "
                             "engine's JVM (default), or a standalone master and two workers started on this "
                             "machine (lab.spark_cluster)")
    parser.add_argument("--txn-rows", type=int,
                        help=f"rows of the one transaction of the memory section (default {FULL['txn_rows']:,}, "
                             "a few minutes here; 3000000 is issue 29's size; 0: none)")
    parser.add_argument("--txn-buffer-rows", type=int,
                        help="iceberg.max_buffer_rows of the memory section's Iceberg engine (default: the engine's)")
    parser.add_argument("--txn-buffer-bytes", type=int,
                        help="iceberg.max_buffer_bytes of the memory section's Iceberg engine (default: the engine's)")
    parser.add_argument("--txn-sinks", type=lambda text: [part.strip() for part in text.split(",") if part.strip()],
                        default=["jsonl", "kafka", "iceberg"],
                        help="sinks the memory section's transaction streams into (default jsonl,kafka,iceberg; "
                             "jsonl is the others' baseline)")
    parser.add_argument("--txn-blob-rows", type=int, default=0,
                        help="memory section, opt-in: also one transaction of this many rows of a 1 MiB LONGBLOB "
                             "each, into JSON lines and Iceberg (2000: 2 GiB; default 0: none)")
    parser.add_argument("--xa-transactions", type=int,
                        help="memory section: XA transactions prepared at once, then committed "
                             f"(default {FULL['xa_transactions']:,}; 0: none)")
    parser.add_argument("--xa-rows", type=int,
                        help=f"rows of each of those XA transactions (default {FULL['xa_rows']:,})")
    parser.add_argument("--xa-held-rows", type=int,
                        help="source.max_held_xa_rows of the engine holding them (default: the engine's)")
    parser.add_argument("--buffer-pool", default="1G", help="MariaDB innodb_buffer_pool_size (default 1G)")
    parser.add_argument("--name", help="results file name under benchmarks/results (default: latest, quick: quick)")
    options = parser.parse_args(argv)
    defaults = QUICK if options.quick else FULL
    for name, value in defaults.items():
        if getattr(options, name) is None:
            setattr(options, name, value)
    options.name = options.name or ("quick" if options.quick else "latest")
    options.sections = [name for name in SECTIONS if name in (options.only or SECTIONS) and name not in options.skip]
    if options.rows < 2 * options.chunk_size:
        parser.error("--rows must be at least twice --chunk-size")
    unknown = [sink for sink in options.txn_sinks if sink not in ("jsonl", "kafka", "iceberg")]
    if unknown or not options.txn_sinks:
        parser.error(f"--txn-sinks: {', '.join(unknown) or 'none given'}: choose among jsonl, kafka, iceberg")
    return options


def _run_sections(context: BenchContext, results: Results) -> None:
    for section in context.options.sections:
        print(f"[{section}]", flush=True)
        section_started = time.perf_counter()
        try:
            SECTIONS[section](context)
        except KeyboardInterrupt:
            raise
        except Exception as error:  # the other sections still run
            traceback.print_exc()
            results.errors[section] = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        print(f"  ({time.perf_counter() - section_started:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options = parse_args(argv)
    results = Results(settings={"arguments": argv, **{k: v for k, v in vars(options).items() if k not in ("only", "skip")}})
    started = time.perf_counter()
    print(f"dblog benchmarks: {', '.join(options.sections)}; {options.rows:,} rows per table", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="dblog-bench-") as scratch, \
                LocalMariaDB(extra_args=(f"--innodb-buffer-pool-size={options.buffer_pool}",)) as db:
            version = db.execute("SELECT VERSION()")[0][0]
            results.machine = machine_info(version, with_java=bool({"iceberg", "distributed"} & set(options.sections)))
            print(f"  {results.machine['cores']} cores, {results.machine['cpu_model']}, "
                  f"load average {results.machine['load_average_at_start']}, MariaDB {version} on port {db.port}",
                  flush=True)
            loading = time.perf_counter()
            tables = {}
            if not set(options.sections) <= OWN_DATA:
                tables = load_tables(db, options.rows)
                print(f"  loaded orders and orders_by_id, {options.rows:,} rows each, in "
                      f"{time.perf_counter() - loading:.1f} s", flush=True)
            context = BenchContext(db, tables, options, Path(scratch), results)
            try:
                _run_sections(context, results)
            finally:
                context.close()
    finally:
        results.seconds = time.perf_counter() - started
        if results.figures or results.errors:
            json_path, md_path = write_results(results, options.name, RESULTS_DIR)
            print()
            print(markdown(results))
            print(f"written: {json_path} and {md_path}", flush=True)
            refresh_readme()
    failed = results.failed_checks
    for figure in failed:
        print(f"check failed: {figure.label}: {figure.check}", file=sys.stderr)
    for section, error in results.errors.items():
        print(f"section failed: {section}: {error}", file=sys.stderr)
    return 1 if failed or results.errors else 0
