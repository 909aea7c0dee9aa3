"""Peak RSS of the engine while it streams one large transaction (section `memory`).

One transaction inserts `--txn-rows` rows (~180 bytes each; 300,000 by default, `--txn-rows
3000000` for the size of issue 29) into a captured table while an engine streams, once into
JSON lines (the baseline: it writes as it reads), once into Kafka (a private Apache Kafka broker
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
the reader process's batches) keep flat. `--txn-rows 0` leaves the one transaction out.

Many prepared XA transactions at once (issue 36; `--xa-transactions`, default 1,000, of
`--xa-rows` rows each, default 1,000; 0 leaves it out): each is prepared on a connection of its
own (`XA START`, one `INSERT … SELECT`, `XA END`, `XA PREPARE`, disconnect: MariaDB keeps it
prepared), then all are committed (`XA COMMIT`), while an engine streams into the null sink (the
held changes are the binlog source's, whatever the sink). The binlog holds every PREPARE before
the first COMMIT, so the engine holds all of them at once before it releases any. Figures: that
engine's peak RSS (own process + reader process, where the held changes live when there is
one) and its open file descriptors at most (engine + reader, sampled every 0.25 s) above those
once it has released them all (its connections still open); `--xa-held-rows N` sets its `source.max_held_xa_rows` (default: the engine's,
100,000 for all prepared transactions together). Check: every row reached the sink.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Callable

from contextlib import nullcontext

from benchmarks.figures import Figure, rate
from benchmarks.kafka import _count_topic
from benchmarks.process_rss import current_kib
from dblog.core.events import TableId
from lab.localbroker import LocalBroker
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
    if ctx.options.txn_rows:
        with LocalBroker() if "kafka" in sinks else nullcontext() as broker:
            _measure(ctx, "transaction", sinks, ctx.options.txn_rows, _COLUMNS, _ROW, broker)
    if ctx.options.txn_blob_rows:
        _measure(ctx, "blob_transaction", [sink for sink in sinks if sink != "kafka"], ctx.options.txn_blob_rows,
                 _BLOB_COLUMNS, _BLOB_ROW, None)
    if ctx.options.xa_transactions:
        _measure_prepared_xa(ctx, ctx.options.xa_transactions, ctx.options.xa_rows)


def _measure_prepared_xa(ctx: BenchContext, transactions: int, rows: int) -> None:
    table = TableId(DATABASE, "prepared_xa")
    total = transactions * rows
    ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
    ctx.db.execute(f"CREATE TABLE {table.db}.{table.table} {_COLUMNS}")

    def write() -> None:
        for index in range(transactions):
            xid = f"bench-xa-{index}"
            connection = ctx.db.connect(table.db)
            try:
                with connection.cursor() as cursor:
                    cursor.execute(f"XA START '{xid}'")
                    cursor.execute(f"INSERT INTO {table.table} SELECT {_ROW.replace('seq,', f'seq + {index * rows},', 1)} "
                                   f"FROM seq_1_to_{rows}")
                    cursor.execute(f"XA END '{xid}'")
                    cursor.execute(f"XA PREPARE '{xid}'")
            finally:
                connection.close()
        prepared = time.perf_counter()
        for index in range(transactions):
            ctx.db.execute(f"XA COMMIT 'bench-xa-{index}'")
        print(f"  {transactions:,} XA transactions committed in {time.perf_counter() - prepared:.1f} s", flush=True)

    held_rows = ctx.options.xa_held_rows
    try:
        measured = _run(ctx, "null", table, write, f"{transactions:,} prepared XA transactions of {rows:,} rows",
                        total, source={"max_held_xa_rows": held_rows} if held_rows else {})
    finally:
        for index in range(transactions):  # left prepared by a failed run: they would hold their locks
            try:
                ctx.db.execute(f"XA ROLLBACK 'bench-xa-{index}'")
            except Exception:  # noqa: BLE001 - committed (or never prepared): nothing to undo
                pass
        ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
    before_mib = measured["rss_before_kib"] / 1024
    peak_mib = measured["total_peak_kib"] / 1024
    extra_fds = (measured["max_fds"] - measured["end_fds"]
                 + (measured["reader_max_fds"] or 0) - (measured["reader_end_fds"] or 0))
    bound = f"source.max_held_xa_rows = {held_rows:,}" if held_rows else "the default bound"
    detail = {**measured, "transactions": transactions, "rows_each": rows, "max_held_xa_rows": held_rows,
              "before_mib": round(before_mib, 1), "peak_over_before": round(peak_mib / before_mib, 2),
              "engine_peak_mib": round(measured["peak_kib"] / 1024, 1), "extra_fds": extra_fds,
              "rows_per_second": round(rate(total, measured["seconds"]))}
    check = f"{measured['rows']:,} rows reached the sink for {total:,} written, peak of the {measured['peak_scope']}"
    ctx.report(Figure(
        "memory.prepared_xa.rss", "memory",
        f"peak RSS of the engine holding {transactions:,} prepared XA transactions of {rows:,} rows at once, then "
        f"releasing them ({bound}; own process + binlog reader; {before_mib:.0f} MiB before)",
        peak_mib, "MiB", check=check, check_ok=measured["rows"] == total, detail=detail,
    ))
    ctx.report(Figure(
        "memory.prepared_xa.fds", "memory",
        f"open file descriptors added while holding {transactions:,} prepared XA transactions ({bound}; "
        f"engine + binlog reader, sampled every 0.25 s, over those once all are released)",
        extra_fds, "fds", check=check, check_ok=measured["rows"] == total, detail=detail,
    ))


def _measure(ctx: BenchContext, kind: str, sinks: list[str], rows: int, columns: str, row: str,
             broker: LocalBroker | None) -> None:
    baseline = None
    what = f"{rows:,}-row transaction" if kind == "transaction" else f"{rows:,}-row transaction of 1 MiB BLOBs"
    for sink in sinks:
        table = TableId(DATABASE, f"big_{'txn' if kind == 'transaction' else 'blob'}_{sink}")
        ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
        ctx.db.execute(f"CREATE TABLE {table.db}.{table.table} {columns}")
        def write() -> None:
            ctx.db.execute(f"INSERT INTO {table.db}.{table.table} SELECT {row} FROM {table.db}.seq_1_to_{rows}")

        try:
            measured = _run(ctx, sink, table, write, f"{rows:,}-row transaction", rows, broker=broker)
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


def _run(ctx: BenchContext, sink: str, table: TableId, write: Callable[[], None], what: str, rows: int,
         broker: LocalBroker | None = None, **sections: dict) -> dict:
    """One engine process (`benchmarks.rss_transaction`) streaming what `write` writes into `sink`."""
    if sink == "null":
        sink_config = {"type": "null"}
    elif sink == "jsonl":
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
        write()
        print(f"  {what} written in {time.perf_counter() - written:.1f} s", flush=True)
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
        measured["broker_rss_mib"] = round(current_kib(broker.process.pid) / 1024)  # the JVM (its page cache is not counted)
    return measured
