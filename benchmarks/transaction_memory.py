"""Peak RSS of the engine while it streams one large transaction (section `memory`).

One transaction inserts `--txn-rows` rows (~180 bytes each; 300,000 by default, `--txn-rows
3000000` for the size of issue 29) into a captured table while an engine streams, once into
JSON lines (the baseline: it writes as it reads) and once into Iceberg. Each engine runs in a
process of its own (`benchmarks.rss_transaction`); the figure is that process's own peak RSS from
just before the transaction to the end of its commit, plus its binlog reader process's peak
(the Spark JVM is not counted: it is Java's heap, bounded by its own settings). The rows are
generated on the server (MariaDB's SEQUENCE engine) in one `INSERT … SELECT`, so no client
holds them. The Iceberg figure is given as a ratio of the JSON-lines one, and its detail holds
the RSS before the transaction (the target: peak ≤ 2× that). Checks: every row landed once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from benchmarks.figures import Figure, rate
from dblog.core.events import TableId
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


def measure_transaction_memory(ctx: BenchContext) -> None:
    rows = ctx.options.txn_rows
    baseline = None
    for sink in ("jsonl", "iceberg"):
        table = TableId(DATABASE, f"big_txn_{sink}")
        ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
        ctx.db.execute(f"CREATE TABLE {table.db}.{table.table} {_COLUMNS}")
        try:
            measured = _run(ctx, sink, table, rows)
        finally:
            ctx.db.execute(f"DROP TABLE IF EXISTS {table.db}.{table.table}")
        before_mib = measured["rss_before_kib"] / 1024
        peak_mib = measured["total_peak_kib"] / 1024
        figure = ctx.report(Figure(
            f"memory.transaction.{sink}", "memory",
            f"peak RSS of the engine streaming one {rows:,}-row transaction into "
            f"{'JSON lines' if sink == 'jsonl' else 'Iceberg'} (own process + binlog reader; "
            f"{before_mib:.0f} MiB before the transaction)",
            peak_mib, "MiB", limit=baseline,
            check=f"{measured['rows']:,} rows in the sink for {rows:,} written, peak of the {measured['peak_scope']}",
            check_ok=measured["rows"] == rows,
            detail={**measured, "before_mib": round(before_mib, 1), "peak_over_before": round(peak_mib / before_mib, 2),
                    "engine_peak_mib": round(measured["peak_kib"] / 1024, 1),
                    "engine_peak_over_before": round(measured["peak_kib"] / measured["rss_before_kib"], 2),
                    "max_buffer_rows": ctx.options.txn_buffer_rows if sink == "iceberg" else None,
                    "rows_per_second": round(rate(rows, measured["seconds"]))},
        ))
        baseline = baseline or figure.key


def _run(ctx: BenchContext, sink: str, table: TableId, rows: int) -> dict:
    sections: dict = {}
    if sink == "jsonl":
        sink_config = {"type": "jsonl", "path": str(ctx.workdir / f"{table.table}.jsonl")}
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
    config = ctx.engine_config(f"txn-{sink}", [table], sink_config, **sections)
    command = [sys.executable, "-m", "benchmarks.rss_transaction", "--config", json.dumps(config),
               "--table", str(table)]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = child.stdout.readline()
        if not ready:
            raise RuntimeError(f"rss_transaction did not start: {child.stderr.read()[-2000:]}")
        written = time.perf_counter()
        ctx.db.execute(f"INSERT INTO {table.db}.{table.table} SELECT {_ROW} FROM {table.db}.seq_1_to_{rows}")
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
    return json.loads(out.strip().splitlines()[-1])
