"""The tables the benchmarks read, and the binlog ranges their loads wrote.

`orders` is dblog.demo.workload's shop table (composite key: a utf8mb4 string, then an unsigned
BIGINT; DECIMAL, DATETIME(6), ENUM, SET, VARCHAR, DOUBLE and JSON columns), loaded by
`dblog.demo.workload.load` as an application would (2,000-row INSERT transactions, all in the
binlog). `orders_by_id` is the same rows keyed by the single integer `order_id`, copied on the
server without binlog. The RSS tables have the same shape and are generated on the server
(MariaDB's SEQUENCE engine) without binlog, since only their size matters there.
`lag_probe` receives timestamped rows from the load generator: its events measure lag. With
`--beacon` the same transaction also updates the one row of `lag_beacon` to the probe's id and
time: an update of an existing row, which an Iceberg sink must MERGE (benchmarks.iceberg).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pymysql

from dblog.core.events import TableId
from dblog.core.sql import quote_identifier as quote
from dblog.demo.localstack import LocalMariaDB
from dblog.demo.workload import load

DATABASE = "bench"
ORDERS = TableId(DATABASE, "orders")
ORDERS_BY_ID = TableId(DATABASE, "orders_by_id")
PROBES = TableId(DATABASE, "lag_probe")
BEACON = TableId(DATABASE, "lag_beacon")
SIGNALS = TableId(DATABASE, "dblog_signal")  # created by dblog.demo.workload.schema

# One generated row per `seq`, with the spread of dblog.demo.workload.order_row (region by
# order_id modulo 5, as `load` does, so the write load finds the same keys).
_GENERATED_ROW = """
    ELT(1 + seq % 5, 'eu', 'us', 'apac', 'latam', 'ÉU-nord'), seq, 1 + (seq * 7919) % 1000,
    ((seq * 104729) % 100000000) / 100,
    TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq * 37 % 31536000) SECOND + INTERVAL (seq * 7 % 1000000) MICROSECOND,
    ELT(1 + (seq * 13) % 4, 'new', 'paid', 'shipped', 'cancelled'),
    ELT(1 + (seq * 17) % 4, '', 'gift', 'express,fragile', 'gift,express'),
    ELT(1 + (seq * 19) % 4, NULL, 'ok', 'fragile ☕', 'emoji 🚚'),
    IF(seq % 2, (seq * 31 % 10000) / 100.0, NULL), JSON_OBJECT('n', seq % 10)"""


@dataclass(frozen=True)
class BinlogRange:
    """The transactions after `start` up to and including `end` (MariaDB GTID positions)."""

    start: str
    end: str


@dataclass(frozen=True)
class BenchTable:
    table: TableId
    rows: int
    key: str  # how it is keyed, for reports
    key_columns: tuple[str, ...]

    @property
    def key_kind(self) -> str:
        return "composite" if len(self.key_columns) > 1 else "integer"

    binlog: BinlogRange | None = None  # where its load is in the binlog, if it was logged
    load_seconds: float | None = None


def executed_gtids(db: LocalMariaDB) -> str:
    return str(db.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0] or "")


def count_rows(db: LocalMariaDB, table: TableId) -> int:
    return int(db.execute(f"SELECT COUNT(*) FROM {quote(table.db)}.{quote(table.table)}")[0][0])


def _unlogged(db: LocalMariaDB) -> pymysql.Connection:
    connection = db.connect(DATABASE)
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
    return connection


def load_tables(db: LocalMariaDB, rows: int) -> dict[str, BenchTable]:
    """Create the bench database and load `orders`, `orders_by_id` and the empty probe table."""
    db.execute(f"CREATE DATABASE {quote(DATABASE)}")
    start = executed_gtids(db)
    started = time.perf_counter()
    with db.connect() as connection:
        load(connection, DATABASE, rows)
    seconds = time.perf_counter() - started
    orders = BenchTable(ORDERS, rows, "composite (region VARCHAR, order_id BIGINT)", ("region", "order_id"),
                        BinlogRange(start, executed_gtids(db)), seconds)
    with _unlogged(db) as connection, connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {quote(ORDERS_BY_ID.table)} LIKE {quote(ORDERS.table)}")
        cursor.execute(f"ALTER TABLE {quote(ORDERS_BY_ID.table)} DROP PRIMARY KEY, ADD PRIMARY KEY (order_id)")
        cursor.execute(f"INSERT INTO {quote(ORDERS_BY_ID.table)} SELECT * FROM {quote(ORDERS.table)}")
    by_id = BenchTable(ORDERS_BY_ID, rows, "single integer (order_id BIGINT)", ("order_id",))
    db.execute(f"CREATE TABLE {quote(PROBES.db)}.{quote(PROBES.table)} "
               "(id BIGINT NOT NULL PRIMARY KEY, written_at DOUBLE NOT NULL)")
    db.execute(f"CREATE TABLE {quote(BEACON.db)}.{quote(BEACON.table)} "
               "(id INT NOT NULL PRIMARY KEY, probe_id BIGINT NOT NULL, written_at DOUBLE NOT NULL)")
    db.execute(f"INSERT INTO {quote(BEACON.db)}.{quote(BEACON.table)} VALUES (1, 0, 0)")
    return {"orders": orders, "orders_by_id": by_id}


def generated_table(db: LocalMariaDB, rows: int, batch: int = 100_000) -> BenchTable:
    """`orders_rss_<rows>`: `rows` generated orders (shape of `orders`), without binlog."""
    table = TableId(DATABASE, f"orders_rss_{rows}")
    with _unlogged(db) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {quote(table.table)}")
        cursor.execute(f"CREATE TABLE {quote(table.table)} LIKE {quote(ORDERS.table)}")
        for first in range(1, rows + 1, batch):
            last = min(first + batch - 1, rows)
            cursor.execute(f"INSERT INTO {quote(table.table)} SELECT {_GENERATED_ROW} FROM seq_{first}_to_{last}")
    return BenchTable(table, rows, "composite (region VARCHAR, order_id BIGINT)", ("region", "order_id"))


def drop_table(db: LocalMariaDB, table: TableId) -> None:
    with _unlogged(db) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {quote(table.db)}.{quote(table.table)}")
