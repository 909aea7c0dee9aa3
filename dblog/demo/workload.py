"""A sample shop schema and a concurrent write load, shared by the demo, the tests and the
benchmarks: `orders` has a composite key (a utf8mb4 string, then an unsigned BIGINT) and
mixed column types; `customers` a plain integer key and a TIMESTAMP(3)."""

from __future__ import annotations

import json
import random
import threading

import pymysql

from dblog.core.events import TableId
from dblog.core.sql import quote_identifier as quote
from dblog.mysql.server_errors import LOCK_CONFLICT, error_code, server_unreachable
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL

REGIONS = ["eu", "us", "apac", "latam", "ÉU-nord"]
STATUSES = ["new", "paid", "shipped", "cancelled"]
CUSTOMERS = 1000

def tables(database: str) -> list[TableId]:
    return [TableId(database, "orders"), TableId(database, "customers")]


def schema(database: str) -> list[str]:
    db = quote(database)
    return [
        f"""CREATE TABLE {db}.orders (
            region VARCHAR(16) NOT NULL,
            order_id BIGINT UNSIGNED NOT NULL,
            customer_id INT NOT NULL,
            amount DECIMAL(12,2) NOT NULL,
            placed_at DATETIME(6) NOT NULL,
            status ENUM('new','paid','shipped','cancelled') NOT NULL,
            tags SET('gift','express','fragile') NOT NULL DEFAULT '',
            note VARCHAR(200) NULL,
            weight DOUBLE NULL,
            attrs JSON NULL,
            PRIMARY KEY (region, order_id)
        ) CHARACTER SET utf8mb4""",
        f"""CREATE TABLE {db}.customers (
            id INT NOT NULL PRIMARY KEY,
            name VARCHAR(100) NOT NULL,
            balance BIGINT NOT NULL,
            updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
        ) CHARACTER SET utf8mb4""",
        SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"),
    ]


def order_row(rng: random.Random, region: str, order_id: int) -> tuple:
    return (
        region,
        order_id,
        rng.randint(1, CUSTOMERS),
        f"{rng.randint(0, 10**8) / 100:.2f}",
        f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00.{rng.randint(0, 999999):06d}",
        rng.choice(STATUSES),
        ",".join(rng.sample(["gift", "express", "fragile"], rng.randint(0, 2))),
        rng.choice([None, "ok", "fragile ☕", "emoji 🚚"]),
        rng.choice([None, rng.random() * 100]),
        json.dumps({"n": rng.randint(0, 9)}),
    )


def _insert(database: str, ignore: bool = False) -> str:
    verb = "INSERT IGNORE" if ignore else "INSERT"
    columns = "region, order_id, customer_id, amount, placed_at, status, tags, note, weight, attrs"
    return f"{verb} INTO {quote(database)}.orders ({columns}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"


def load(connection: pymysql.Connection, database: str, rows: int, seed: int = 1) -> None:
    """Create the schema in `database` (which must exist) and load `rows` orders."""
    rng = random.Random(seed)
    with connection.cursor() as cursor:
        for statement in schema(database):
            cursor.execute(statement)
        batch = []
        for order_id in range(1, rows + 1):
            batch.append(order_row(rng, REGIONS[order_id % len(REGIONS)], order_id))
            if len(batch) == 2000:
                cursor.executemany(_insert(database), batch)
                batch = []
        if batch:
            cursor.executemany(_insert(database), batch)
        cursor.executemany(
            f"INSERT INTO {quote(database)}.customers (id, name, balance) VALUES (%s, %s, %s)",
            [(i, f"customer {i}", rng.randint(-1000, 1000)) for i in range(1, CUSTOMERS + 1)],
        )


class WriteLoad:
    """`writers` threads doing random inserts, updates, deletes and delete-then-reinsert
    (in one transaction), each on its own connection, until `stop()` (or `max_writes` writes in
    all): at full speed, or at most `rate` writes per second per writer."""

    def __init__(
        self, connect, database: str, rows: int, writers: int = 4, seed: int = 0, rate: float | None = None,
        reconnect: bool = False, max_writes: int | None = None,
    ) -> None:
        self._connect = connect
        self._reconnect = reconnect
        self._interval = 1.0 / rate if rate else 0.0
        self._max_writes = max_writes
        self.database = database
        self.rows = rows
        self.writes = [0] * writers
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._write, args=(index, seed * 1000 + index), daemon=True)
            for index in range(writers)
        ]

    def start(self) -> "WriteLoad":
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self.errors:
            raise self.errors[0]
        return sum(self.writes)

    def _done(self) -> bool:
        return self._stop.is_set() or (self._max_writes is not None and sum(self.writes) >= self._max_writes)

    def _write(self, index: int, seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not self._done():
                try:
                    self._write_until_stopped(index, rng)
                except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as error:
                    # A restarted server: reconnect, as an application would (with `reconnect`).
                    if not (self._reconnect and server_unreachable(error)):
                        raise
                    self._stop.wait(0.2)
        except BaseException as error:  # surfaced by stop()
            self.errors.append(error)

    def _write_until_stopped(self, index: int, rng: random.Random) -> None:
        with self._connect() as connection, connection.cursor() as cursor:
            while not (self._stop.wait(self._interval) if self._interval else self._stop.is_set()) and not self._done():
                try:
                    self._write_once(rng, connection, cursor)
                except pymysql.err.OperationalError as error:
                    # Writers collide (delete-then-reinsert takes gap locks): retry as an app would.
                    if error_code(error) not in LOCK_CONFLICT:
                        raise
                    connection.rollback()
                    continue
                self.writes[index] += 1

    def _write_once(self, rng: random.Random, connection, cursor) -> None:
        db = quote(self.database)
        where_key = "WHERE region = %s AND order_id = %s"
        region, order_id = rng.choice(REGIONS), rng.randint(1, int(self.rows * 1.1) + 10)
        action = rng.random()
        if action < 0.3:
            cursor.execute(_insert(self.database, ignore=True), order_row(rng, region, order_id))
        elif action < 0.6:
            cursor.execute(
                f"UPDATE {db}.orders SET amount = amount + 1, status = %s, note = %s {where_key}",
                (rng.choice(STATUSES), rng.choice([None, "changed ✓"]), region, order_id),
            )
        elif action < 0.75:
            cursor.execute(f"DELETE FROM {db}.orders {where_key}", (region, order_id))
        elif action < 0.85:
            connection.begin()
            cursor.execute(f"DELETE FROM {db}.orders {where_key}", (region, order_id))
            cursor.execute(_insert(self.database), order_row(rng, region, order_id))
            connection.commit()
        else:
            cursor.execute(
                f"UPDATE {db}.customers SET balance = balance + %s WHERE id = %s",
                (rng.randint(-50, 50), rng.randint(1, CUSTOMERS + 100)),
            )
