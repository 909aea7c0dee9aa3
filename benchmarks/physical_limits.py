"""What this machine can do at all, without dblog: the limits dblog's figures are divided by.

`keyset_scan`: the table read in primary-key order with pymysql, `LIMIT chunk_size` per query,
each query starting after the last key of the one before (the SQL shape of a dblog chunk,
expanded comparison for composite keys), rows fetched as pymysql's plain tuples.

`binlog_decode`: a binlog range read with mysql-replication's BinLogStreamReader (blocking,
GTID auto-position, as dblog reads it), every row event's rows decoded into the library's dicts,
nothing more. It stops at the range's last transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from benchmarks.dataset import BenchTable, BinlogRange
from benchmarks.figures import Figure, Stopwatch, rate
from dblog.core.sql import quote_identifier as quote
from dblog.demo.localstack import LocalMariaDB

if TYPE_CHECKING:
    from benchmarks.context import BenchContext


DECODER_IDS = iter(range(9001, 9100))  # replica ids of raw decoders (engines use 9101 on)


def server_pid(db: LocalMariaDB) -> int | None:
    try:
        return int((db.datadir / "p.pid").read_text().strip())
    except (OSError, ValueError, TypeError):
        return None


def _after(columns: list[str]) -> str:
    """`key > (%s, …)` in the expanded form dblog's chunks use."""
    terms = []
    for depth in range(len(columns)):
        parts = [f"{quote(columns[i])} = %s" for i in range(depth)] + [f"{quote(columns[depth])} > %s"]
        terms.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(terms)


def _after_params(key: tuple) -> list:
    params: list = []
    for depth in range(len(key)):
        params.extend(key[: depth + 1])
    return params


def keyset_scan(db: LocalMariaDB, table: BenchTable, chunk_size: int) -> tuple[int, Stopwatch]:
    """Read every row of `table`; returns (rows read, timing)."""
    name = f"{quote(table.table.db)}.{quote(table.table.table)}"
    order = ", ".join(quote(column) for column in table.key_columns)
    first_sql = f"SELECT * FROM {name} ORDER BY {order} LIMIT {int(chunk_size)}"
    next_sql = f"SELECT * FROM {name} WHERE {_after(list(table.key_columns))} ORDER BY {order} LIMIT {int(chunk_size)}"
    rows = 0
    with db.connect() as connection, connection.cursor() as cursor:
        with Stopwatch(server_pid(db)) as watch:
            cursor.execute(first_sql)
            chunk = cursor.fetchall()
            names = [column[0] for column in cursor.description]
            positions = [names.index(column) for column in table.key_columns]
            while chunk:
                rows += len(chunk)
                if len(chunk) < chunk_size:
                    break
                last = chunk[-1]
                cursor.execute(next_sql, _after_params(tuple(last[i] for i in positions)))
                chunk = cursor.fetchall()
    return rows, watch


@dataclass
class Decoded:
    rows: dict[str, int] = field(default_factory=dict)  # per "db.table"
    transactions: int = 0

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _positions(text: str) -> dict[int, int]:
    """MariaDB GTID position "d-s-n,…" as {domain: seq}."""
    out: dict[int, int] = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        domain, _server, seq = part.split("-")
        out[int(domain)] = int(seq)
    return out


def binlog_decode(db: LocalMariaDB, binlog: BinlogRange, server_id: int, timeout: float = 3600) -> tuple[Decoded, Stopwatch]:
    """Decode every row of the transactions in `binlog`; returns (rows per table, timing from
    the first event to the last transaction of the range)."""
    end = _positions(binlog.end)
    reached = dict(_positions(binlog.start))
    decoded = Decoded()
    stream = BinLogStreamReader(
        connection_settings=dict(db.connection_settings),
        server_id=server_id,
        resume_stream=True,
        blocking=True,
        auto_position=binlog.start,
        is_mariadb=True,
        only_events=[MariadbGtidEvent, QueryEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent,
                     HeartbeatLogEvent],
        slave_heartbeat=1,
        enable_logging=False,
    )
    watch = Stopwatch(server_pid(db))
    started = False
    deadline = time.monotonic() + timeout
    domain = seq = None

    def done() -> bool:
        return all(reached.get(d, 0) >= s for d, s in end.items())

    try:
        if done():
            return decoded, watch.start().stop()
        for event in stream:
            if not started:
                watch.start()
                started = True
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                table = f"{event.schema}.{event.table}"
                decoded.rows[table] = decoded.rows.get(table, 0) + len(event.rows)
            elif isinstance(event, MariadbGtidEvent):
                domain, seq = event.domain_id, event.gtid_seq_no
                if seq > end.get(domain, -1):
                    break  # past the range
            elif isinstance(event, XidEvent) or (isinstance(event, QueryEvent) and event.query.strip() != "BEGIN"):
                if domain is not None:
                    reached[domain] = max(reached.get(domain, 0), seq)
                    decoded.transactions += 1
                    domain = None
                if done():
                    break
            elif isinstance(event, HeartbeatLogEvent) and done():
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"binlog range {binlog} not decoded within {timeout:.0f} s")
        watch.stop()
    finally:
        stream.close()
    return decoded, watch


def measure_limits(ctx: BenchContext) -> None:
    """The `limits` section: raw keyset scans of both tables, raw decode of the `orders` load."""
    for name in ctx.tables:
        ctx.keyset_scan_limit(name)
    orders = ctx.tables["orders"]
    decoded, watch = binlog_decode(ctx.db, orders.binlog, server_id=next(DECODER_IDS))
    rows = decoded.rows.get(str(orders.table), 0)
    ctx.report(Figure(
        "limit.decode.load", "limits", "raw binlog decode, mysql-replication (orders load, 2,000-row transactions)",
        rate(decoded.total, watch.wall), "rows/s",
        check=f"{rows:,} orders rows decoded, {orders.rows:,} loaded", check_ok=rows == orders.rows,
        detail={**watch.detail(decoded.total), "transactions": decoded.transactions, "rows_by_table": decoded.rows},
    ))
