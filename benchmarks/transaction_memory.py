"""Peak RSS of the engine while it streams one large transaction (section `memory`).

One transaction inserts `--txn-rows` rows (~180 bytes each; 300,000 by default, `--txn-rows
3000000` for the size of issue 29) into a captured table while an engine streams, once into
JSON lines (the baseline: it writes as it reads), once into Kafka (a private tansu broker
started for the section, as the `kafka` section does; the producer holds at most
`sink.kafka.max_buffer_bytes`) and once into Iceberg (`--txn-sinks` picks some). Each engine
runs in a process of its own (`benchmarks.rss_transaction`); the figure is that process's own
peak RSS from just before the transaction to the end of its commit, plus its binlog reader
process's peak (neither the Spark JVM nor the broker is counted: Java's heap is bounded by its
own settings, the broker is Kafka's). The rows are generated on the server (MariaDB's SEQUENCE
engine) in one `INSERT … SELECT`, so no client holds them. The Kafka and Iceberg figures are
given as ratios of the JSON-lines one, and their detail holds the RSS before the transaction
(the target: peak ≤ 2× that). Checks: every row landed once (Kafka: the records on the topic,
read back to its high watermark).

`--txn-blob-rows N` (opt-in) adds a transaction of N rows of one 1 MiB `LONGBLOB` each, into JSON
lines and Iceberg: few rows, many bytes, which only the byte bounds (`iceberg.max_buffer_bytes`,
the reader process's batches) keep flat.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from contextlib import nullcontext

from benchmarks.figures import Figure, rate
from benchmarks.kafka import _count_topic
from benchmarks.process_rss import current_kib
from dblog.core.events import TableId
from dblog.lab.localbroker import LocalBroker
from dblog.sinks.iceberg.session import QUIET_LOG4J2

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

DATABASE = "bench"
_COLUMNS = """(id BIGINT NOT NULL PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16) NOT NULL,
    amount DECIMAL(12,2) NOT NULL, created_at DATETIME(6) NOT NULL, note VARCHAR(200) NULL)"""
# ~180 bytes a row as the binlog carries it (a 120-character note)
_ROW = """seq, 1 + (seq * 7919) % 100000, ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'),
    ((seq * 104729) % 10000000) / 100, TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq % 31536000) SECOND,
    CONCAT('order ', seq, ' ', REPEAT(SUBSTR('abcdefghijklmnopqrstuvwxyz', 1 + seq % 20, 6), 19))"""
_BLOB_COLUMNS = "(id BIGINT NOT NULL PRIMARY KEY, b LONGBLOB NOT NULL)"
BLOB_BYTES = 1 << 20
_BLOB_ROW = f"seq, REPEAT(LPAD(HEX(seq), 16, '0'), {BLOB_BYTES // 16})"  # 1 MiB, distinct per row
_SINK_NAMES = {"jsonl": "JSON lines", "kafka": "Kafka", "iceberg": "Iceberg"}


def measure_transaction_memory(ctx: BenchContext) -> None:
    sinks = [sink for sink in ("jsonl", "kafka", "iceberg") if sink in ctx.options.txn_sinks]
    with LocalBroker() if "kafka" in sinks else nullcontext() as broker:
        _measure(ctx, "transaction", sinks, ctx.options.txn_rows, _COLUMNS, _ROW, broker)
    if ctx.options.txn_blob_rows:
        _measure(ctx, "blob_transaction", [sink for sink in sinks if sink != "kafka"], ctx.options.txn_blob_rows,
                 _BLOB_COLUMNS, _BLOB_ROW, None)


def _measure(ctx: BenchContext, kind: str, sinks: list[str], rows: int, columns: str, row: str,
             broker: LocalBroker | None) -> None:
    baseline = None
    what = f"{rows:,}-row transaction" if kind == "transaction" else f"{rows:,}-row transaction of 1 MiB BLOBs"
    for sink in sinks:
        table = TableId(DATABASE, f"big_{'txn' if kind == 'transaction' else 'blob'}_{sink}")
        ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
        ctx.db.execute(f"CREATE TABLE {table.db}.{table.table} {columns}")
        try:
            measured = _run(ctx, sink, table, rows, row, broker)
        finally:
            ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
        before_mib = measured["rss_before_kib"] / 1024
        peak_mib = measured["total_peak_kib"] / 1024
        figure = ctx.report(Figure(
            f"memory.{kind}.{sink}", "memory",
            f"peak RSS of the engine streaming one {what} into {_SINK_NAMES[sink]} (own process + binlog reader; "
            f"{before_mib:.0f} MiB before the transaction)",
            peak_mib, "MiB", limit=baseline,
            check=f"{measured['rows']:,} rows in the sink for {rows:,} written, peak of the {measured['peak_scope']}",
            check_ok=measured["rows"] == rows,
            detail={**measured, "before_mib": round(before_mib, 1), "peak_over_before": round(peak_mib / before_mib, 2),
                    "engine_peak_mib": round(measured["peak_kib"] / 1024, 1),
                    "engine_peak_over_before": round(measured["peak_kib"] / measured["rss_before_kib"], 2),
                    "max_buffer_rows": ctx.options.txn_buffer_rows if sink == "iceberg" else None,
                    "max_buffer_bytes": ctx.options.txn_buffer_bytes if sink == "iceberg" else None,
                    "rows_per_second": round(rate(rows, measured["seconds"]))},
        ))
        baseline = baseline or figure.key


def _run(ctx: BenchContext, sink: str, table: TableId, rows: int, row: str, broker: LocalBroker | None) -> dict:
    sections: dict = {}
    if sink == "jsonl":
        sink_config = {"type": "jsonl", "path": str(ctx.workdir / f"{table.table}.jsonl")}
    elif sink == "kafka":
        sink_config = {"type": "kafka"}
        sections["kafka"] = {"bootstrap_servers": broker.bootstrap}
    else:
        sink_config = {"type": "iceberg"}
        log4j = ctx.workdir / "spark-log4j2.properties"
        log4j.write_text(QUIET_LOG4J2)
        master, cluster_conf = ctx.spark_master(2)
        sections["spark"] = {"warehouse": str(ctx.workdir / f"warehouse-{table.table}"), "catalog": "lake",
                             "master": master,
                             "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}",
                                      **cluster_conf}}
        sections["iceberg"] = {"maintenance": {"enabled": False}}
        if ctx.options.txn_buffer_rows:
            sections["iceberg"]["max_buffer_rows"] = ctx.options.txn_buffer_rows
        if ctx.options.txn_buffer_bytes:
            sections["iceberg"]["max_buffer_bytes"] = ctx.options.txn_buffer_bytes
    config = ctx.engine_config(f"txn-{table.table}", [table], sink_config, **sections)
    command = [sys.executable, "-m", "benchmarks.rss_transaction", "--config", json.dumps(config),
               "--table", str(table)]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = child.stdout.readline()
        if not ready:
            raise RuntimeError(f"rss_transaction did not start: {child.stderr.read()[-2000:]}")
        written = time.perf_counter()
        ctx.db.execute(f"INSERT INTO {table.db}.{table.table} SELECT {row} FROM {table.db}.seq_1_to_{rows}")
        print(f"  {rows:,}-row transaction written in {time.perf_counter() - written:.1f} s", flush=True)
        child.stdin.write(ctx.db.execute("SELECT @@gtid_binlog_pos")[0][0] + "\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=max(600, rows / 500))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode != 0:
        raise RuntimeError(f"rss_transaction failed (exit {child.returncode}): {err.strip()[-2000:]}")
    measured = json.loads(out.strip().splitlines()[-1])
    if sink == "kafka":  # what reached the topic, not what was handed to the producer
        measured["produced"] = measured["rows"]
        measured["rows"] = _count_topic(broker, f"{config['name']}.{table.db}.{table.table}", timeout=120 + rows / 2000)
        measured["broker_rss_mib"] = round(current_kib(broker.process.pid) / 1024)  # tansu keeps topics in memory
    return measured
