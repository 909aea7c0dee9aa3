"""Streaming throughput: a burst of row changes read from the binlog as fast as possible.

The engine's position is taken, then the burst is written (on `orders_by_id`: cycles of an
INSERT … SELECT of new rows, an UPDATE of existing rows and a DELETE of the new rows, each
statement one transaction of `--burst-txn-rows` rows), then the very same binlog range is
decoded raw (the limit), and only then does the engine's loop start: it streams the whole
backlog to the null sink. Its rate runs from the first change reaching the sink to the last, so
neither the writers' speed nor connection set-up is in it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from benchmarks.dataset import BinlogRange, count_rows, executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, rate
from benchmarks.physical_limits import DECODER_IDS, binlog_decode
from dblog.core.sql import quote_identifier as quote
from dblog.demo.localstack import LocalMariaDB

if TYPE_CHECKING:
    from benchmarks.context import BenchContext
    from benchmarks.dataset import BenchTable

_COLUMNS = "region, {order_id}, customer_id, amount, placed_at, status, tags, note, weight, attrs"


def write_burst(db: LocalMariaDB, table: BenchTable, changes: int, per_transaction: int) -> dict[str, int]:
    """About `changes` row changes in transactions of `per_transaction` rows; returns the
    affected rows per op ("c", "u", "d"). New rows get ids above the table's, and go again."""
    name = f"{quote(table.table.db)}.{quote(table.table.table)}"
    shift = table.rows + 1
    size = max(1, min(per_transaction, table.rows // 2))
    counts = {"c": 0, "u": 0, "d": 0}
    with db.connect() as connection, connection.cursor() as cursor:
        cycle = 0
        while sum(counts.values()) < changes:
            first = 1 + (cycle * size) % max(1, table.rows - size)
            last = first + size - 1
            counts["c"] += cursor.execute(
                f"INSERT INTO {name} SELECT {_COLUMNS.format(order_id=f'order_id + {shift}')} FROM {name} "
                "WHERE order_id BETWEEN %s AND %s", (first, last))
            counts["u"] += cursor.execute(
                f"UPDATE {name} SET amount = amount + 1, note = 'burst', "
                "status = ELT(1 + MOD(order_id + %s, 4), 'new', 'paid', 'shipped', 'cancelled') "
                "WHERE order_id BETWEEN %s AND %s", (cycle, first, last))
            counts["d"] += cursor.execute(f"DELETE FROM {name} WHERE order_id BETWEEN %s AND %s",
                                          (first + shift, last + shift))
            cycle += 1
    return counts


def measure_streaming(ctx: BenchContext) -> None:
    options = ctx.options
    table = ctx.tables["orders_by_id"]
    run = EngineRun(ctx.engine_config("streaming", [table.table], {"type": "null"}))
    try:
        start = executed_gtids(ctx.db)
        written = time.perf_counter()
        counts = write_burst(ctx.db, table, options.burst_rows, options.burst_txn_rows)
        written = time.perf_counter() - written
        burst = BinlogRange(start, executed_gtids(ctx.db))
        total = sum(counts.values())
        decoded, watch = binlog_decode(ctx.db, burst, server_id=next(DECODER_IDS))
        decoded_rows = decoded.rows.get(str(table.table), 0)
        limit = ctx.report(Figure(
            "limit.decode.burst", "streaming",
            f"raw binlog decode, mysql-replication (the burst, {options.burst_txn_rows}-row transactions)",
            rate(decoded.total, watch.wall), "rows/s",
            check=f"{decoded_rows:,} rows decoded, {total:,} changed", check_ok=decoded_rows == total,
            detail={**watch.detail(decoded.total), "transactions": decoded.transactions},
        ))
        cpu = time.process_time()
        run.start()
        run.finish(burst.end, timeout=600 + total / 500)
        cpu = time.process_time() - cpu
    except BaseException:
        run.abandon()
        raise
    sink = run.sink
    seconds = (sink.last - sink.first) if sink.first is not None else 0.0
    ops = {op: sink.ops.get(op, 0) for op in ("c", "u", "d")}
    ctx.report(Figure(
        "streaming.null", "streaming", "streaming a backlog burst to the null sink, first → last change",
        rate(sink.count, seconds), "rows/s", limit=limit.key,
        check=f"{sink.count:,} changes reached the sink ({_ops(ops)}), the burst made {total:,} ({_ops(counts)})",
        check_ok=ops == counts and sink.count == total,
        detail={"rows": sink.count, "seconds": round(seconds, 3), "cpu_seconds_whole_run": round(cpu, 3),
                "rows_per_cpu_second": round(sink.count / cpu) if cpu else None,
                "transactions": decoded.transactions, "burst_write_seconds": round(written, 3),
                "table_rows_after": count_rows(ctx.db, table.table)},
    ))


def _ops(counts: dict[str, int]) -> str:
    return " ".join(f"{op} {count:,}" for op, count in counts.items())
