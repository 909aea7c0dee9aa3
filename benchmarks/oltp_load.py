"""A production-shaped OLTP load for the `oltp` benchmark section.

Schema: eight tables in the database `oltp`, 3 to 10 columns each (BIGINT and INT keys, two
composite keys, one VARCHAR key under utf8mb4_general_ci; DECIMAL(12,2), DATETIME(6), DATE,
DOUBLE, TEXT, VARCHAR, TINYINT, nullable columns that are sometimes NULL), each filled with
`rows` generated rows on the server without binlog (`create_schema`); plus `lag_probe`
(timestamped probe rows, see benchmarks.timed_sink) and `dblog_signal` (the signal table).

Writers: `OltpLoad` runs the writers outside the benchmark process (multiprocessing, spawn), each
with its own pymysql connection, autocommit off: the engine runs in the benchmark process, and
writer threads there would take turns with it on one GIL, slowing the measured engine (and the
writers) in a way no real application's clients would. By default the N writers are N threads of
one client process (`processes=1`: the load the issue measured Debezium and dblog under, about
1,500 transactions/s from 3 threads here); `processes=N` gives each writer its own process, a
heavier load (about twice the rate) that leaves the engine a smaller share of the two cores.
They share the machine's cores with the engine and the server; their CPU is not in the
benchmark process's CPU time.

Each writer commits transactions of 1-5 single-row statements (35% INSERT, 45% UPDATE of 1-3
columns, 20% DELETE; a tenth of the `products` updates respell the case-insensitive key, i.e. a
key change the server considers equal) on tables picked at random, from a deterministic seed,
at full speed or paced (a per-writer schedule of `rate / writers` transactions per second, with
at most 0.1 s of catch-up burst). Writers own disjoint sets of rows (a hash of the key picks the
owner at start; a writer's inserts are its own), so every UPDATE and DELETE hits exactly one
existing row, writers never wait on each other's locks, and the row changes a writer counts are
exactly the row events the binlog gets. Row changes are counted from the server's affected-row
counts, and only for transactions whose COMMIT succeeded.

The optional probe process inserts `(id, written_at)` rows into `lag_probe` at a fixed rate
(autocommit, `written_at` = time.time() just before the INSERT), as benchmarks.load_generator
does for the other sections.
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import time
import traceback
import zlib
from dataclasses import dataclass
from typing import Any

import pymysql

from dblog.mysql.server_errors import LOCK_CONFLICT, error_code

DATABASE = "oltp"
PROBE_TABLE = "lag_probe"
SIGNAL_TABLE = "dblog_signal"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # SQL type; the generators below go by its first word
    nullable: bool = False


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    initial_key: tuple[str, ...]  # SQL over `seq` (1..rows) for each key column
    new_key: str  # how writers make new keys: "int" (each key column below), "sku"
    options: str = ""

    @property
    def values(self) -> tuple[Column, ...]:
        return tuple(column for column in self.columns if column.name not in self.key)


def _c(name: str, type_: str, nullable: bool = False) -> Column:
    return Column(name, type_, nullable)


TABLES: tuple[TableSpec, ...] = (
    TableSpec("accounts", (
        _c("id", "BIGINT NOT NULL"), _c("name", "VARCHAR(64) NOT NULL"), _c("balance", "DECIMAL(12,2) NOT NULL"),
        _c("status", "TINYINT NOT NULL"), _c("created_at", "DATETIME(6) NOT NULL"), _c("note", "TEXT", True),
    ), ("id",), ("seq",), "int"),
    TableSpec("customers", (
        _c("id", "INT NOT NULL"), _c("email", "VARCHAR(120) NOT NULL"), _c("name", "VARCHAR(80) NOT NULL"),
        _c("birth_date", "DATE", True), _c("score", "DOUBLE", True),
    ), ("id",), ("seq",), "int"),
    TableSpec("orders", (
        _c("tenant_id", "INT NOT NULL"), _c("order_no", "BIGINT NOT NULL"), _c("customer_id", "INT NOT NULL"),
        _c("total", "DECIMAL(12,2) NOT NULL"), _c("placed_at", "DATETIME(6) NOT NULL"), _c("ship_date", "DATE", True),
        _c("status", "TINYINT NOT NULL"), _c("note", "VARCHAR(200)", True), _c("weight", "DOUBLE", True),
    ), ("tenant_id", "order_no"), ("1 + seq % 50", "seq"), "int"),
    TableSpec("order_lines", (
        _c("order_no", "BIGINT NOT NULL"), _c("line_no", "INT NOT NULL"), _c("sku", "VARCHAR(40) NOT NULL"),
        _c("qty", "INT NOT NULL"), _c("price", "DECIMAL(12,2) NOT NULL"), _c("discount", "DOUBLE", True),
    ), ("order_no", "line_no"), ("1 + (seq - 1) DIV 4", "1 + (seq - 1) % 4"), "int"),
    TableSpec("products", (
        _c("sku", "VARCHAR(40) NOT NULL"), _c("title", "VARCHAR(200) NOT NULL"), _c("price", "DECIMAL(12,2) NOT NULL"),
        _c("stock", "INT NOT NULL"), _c("active", "TINYINT NOT NULL"), _c("updated_at", "DATETIME(6) NOT NULL"),
        _c("description", "TEXT", True),
    ), ("sku",), ("CONCAT(ELT(1 + seq % 3, 'Sku', 'sku', 'SKU'), '-', LPAD(seq, 7, '0'), '-', "
                  "ELT(1 + seq % 4, 'Red', 'blue', 'GREEN', 'gray'))",), "sku",
        "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),
    TableSpec("payments", (
        _c("id", "BIGINT NOT NULL"), _c("account_id", "BIGINT NOT NULL"), _c("amount", "DECIMAL(12,2) NOT NULL"),
        _c("paid_at", "DATETIME(6) NOT NULL"), _c("method", "VARCHAR(16) NOT NULL"), _c("reference", "VARCHAR(64)", True),
        _c("fee", "DOUBLE", True),
    ), ("id",), ("seq * 10",), "int"),
    TableSpec("events", (
        _c("id", "BIGINT NOT NULL"), _c("kind", "TINYINT NOT NULL"), _c("at", "DATETIME(6) NOT NULL"),
        _c("day", "DATE NOT NULL"), _c("payload", "TEXT", True), _c("value", "DOUBLE", True), _c("ref", "INT", True),
        _c("tag", "VARCHAR(32)", True), _c("amount", "DECIMAL(12,2)", True), _c("flag", "TINYINT NOT NULL"),
    ), ("id",), ("seq",), "int"),
    TableSpec("counters", (
        _c("id", "INT NOT NULL"), _c("value", "BIGINT NOT NULL"), _c("updated_at", "DATETIME(6) NOT NULL"),
    ), ("id",), ("seq",), "int"),
)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _kind(column: Column) -> str:
    return column.type.split("(")[0].split()[0].upper()


def _ddl(spec: TableSpec) -> str:
    columns = ", ".join(f"{quote(c.name)} {c.type}{'' if 'NOT NULL' in c.type else ' NULL'}" for c in spec.columns)
    key = ", ".join(quote(k) for k in spec.key)
    options = spec.options or "CHARACTER SET utf8mb4"
    return f"CREATE TABLE {quote(DATABASE)}.{quote(spec.name)} ({columns}, PRIMARY KEY ({key})) {options}"


def _initial_expression(column: Column, index: int) -> str:
    """A value for row `seq` on the server (deterministic; NULL for about one row in 7)."""
    m = 7 + 2 * index  # a different spread per column
    kind = _kind(column)
    if kind == "BIGINT":
        expr = f"(seq * {7919 + m}) % 1000000007"
    elif kind == "INT":
        expr = f"(seq * {104729 + m}) % 1000000"
    elif kind == "TINYINT":
        expr = f"seq * {m} % 100"
    elif kind == "DECIMAL":
        expr = f"((seq * {104729 + m}) % 100000000) / 100"
    elif kind == "DATETIME":
        expr = (f"TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq * {37 + m} % 31536000) SECOND "
                f"+ INTERVAL (seq * {m} % 1000000) MICROSECOND")
    elif kind == "DATE":
        expr = f"DATE'2020-01-01' + INTERVAL (seq * {m} % 3000) DAY"
    elif kind == "DOUBLE":
        expr = f"(seq * {31 + m} % 100000) / 64.0"
    elif kind == "TEXT":
        expr = f"REPEAT(CONCAT('text ', seq, ' '), 1 + seq % {m + 10})"
    elif kind == "VARCHAR":
        expr = f"CONCAT('{column.name}-', seq, ELT(1 + seq % 3, '', ' ☕', ' é'))"
    else:
        raise ValueError(f"no generator for {column.type}")
    return f"IF(seq % 7 = {index % 7}, NULL, {expr})" if column.nullable else expr


def create_schema(connection: pymysql.Connection, rows: int, batch: int = 50_000) -> None:
    """Create `oltp` with its tables, `rows` rows in each of the eight (without binlog: the
    benchmark's binlog ranges start later), the probe and the signal tables."""
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(DATABASE)}")
        cursor.execute(f"CREATE DATABASE {quote(DATABASE)} CHARACTER SET utf8mb4")
        cursor.execute(f"USE {quote(DATABASE)}")  # the SEQUENCE engine's seq_1_to_n tables are per database
        for spec in TABLES:
            cursor.execute(_ddl(spec))
            expressions = []
            for index, column in enumerate(spec.columns):
                if column.name in spec.key:
                    expressions.append(spec.initial_key[spec.key.index(column.name)])
                else:
                    expressions.append(_initial_expression(column, index))
            names = ", ".join(quote(c.name) for c in spec.columns)
            for first in range(1, rows + 1, batch):
                last = min(first + batch - 1, rows)
                cursor.execute(f"INSERT INTO {quote(DATABASE)}.{quote(spec.name)} ({names}) "
                               f"SELECT {', '.join(expressions)} FROM seq_{first}_to_{last}")
        cursor.execute(f"CREATE TABLE {quote(DATABASE)}.{quote(PROBE_TABLE)} "
                       "(id BIGINT NOT NULL PRIMARY KEY, written_at DOUBLE NOT NULL)")
        cursor.execute(f"CREATE TABLE {quote(DATABASE)}.{quote(SIGNAL_TABLE)} "
                       "(id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL)")
        cursor.execute("SET SESSION sql_log_bin = 1")
    connection.commit()


# --- the writers (each in its own process) ---------------------------------------------------


def _random_value(rng: random.Random, column: Column) -> Any:
    if column.nullable and rng.random() < 0.15:
        return None
    kind = _kind(column)
    if kind == "BIGINT":
        return rng.randint(-2**40, 2**40)
    if kind == "INT":
        return rng.randint(-2**31, 2**31 - 1)
    if kind == "TINYINT":
        return rng.randint(-128, 127)
    if kind == "DECIMAL":
        return f"{rng.randint(-10**11 + 1, 10**11 - 1) / 100:.2f}"
    if kind == "DATETIME":
        return (f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}")
    if kind == "DATE":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "DOUBLE":
        return rng.uniform(-1e6, 1e6)
    if kind == "TEXT":
        return "".join(rng.choices("abcdefghij klmnop ☕é", k=rng.randint(0, 400)))
    if kind == "VARCHAR":
        size = int(column.type.split("(")[1].split(")")[0])
        return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz 0123456789é", k=rng.randint(1, min(size, 40))))
    raise ValueError(f"no generator for {column.type}")


def _owner(key: tuple, writers: int) -> int:
    return zlib.crc32(repr(tuple(str(part).lower() for part in key)).encode()) % writers


def _respell(sku: str) -> str:
    return sku.swapcase()


class _Writer:
    """One writer's tables: the keys it owns, its statements, its counts."""

    def __init__(self, connection: pymysql.Connection, index: int, writers: int, run: int, seed: int) -> None:
        self.index, self.writers, self.run = index, writers, run
        self.rng = random.Random(seed)
        self.connection = connection
        self.owned: dict[str, list[tuple]] = {}
        self.next_int: dict[str, int] = {}  # the next new value of each table's unique integer key column
        self.made = 0
        db = quote(DATABASE)
        self.sql: dict[str, dict[str, str]] = {}
        with connection.cursor() as cursor:
            for spec in TABLES:
                keys = ", ".join(quote(k) for k in spec.key)
                cursor.execute(f"SELECT {keys} FROM {db}.{quote(spec.name)}")
                self.owned[spec.name] = [key for key in cursor.fetchall() if _owner(key, writers) == index]
                if spec.new_key == "int":
                    unique = spec.key[-1] if spec.name == "orders" else spec.key[0]  # orders: order_no alone is unique
                    cursor.execute(f"SELECT COALESCE(MAX({quote(unique)}), 0) FROM {db}.{quote(spec.name)}")
                    self.next_int[spec.name] = int(cursor.fetchone()[0]) + 1 + index
                names = [c.name for c in spec.columns]
                where = " AND ".join(f"{quote(k)} = %s" for k in spec.key)
                self.sql[spec.name] = {
                    "insert": f"INSERT INTO {db}.{quote(spec.name)} ({', '.join(quote(n) for n in names)}) "
                              f"VALUES ({', '.join(['%s'] * len(names))})",
                    "delete": f"DELETE FROM {db}.{quote(spec.name)} WHERE {where}",
                    "where": where,
                }
        connection.commit()  # end the read view the SELECTs opened

    def _new_key(self, spec: TableSpec) -> tuple:
        if spec.new_key == "sku":
            self.made += 1
            return (f"{self.rng.choice(['Sku', 'sKU', 'sku'])}-r{self.run}-w{self.index}-{self.made}",)
        value = self.next_int[spec.name]
        self.next_int[spec.name] = value + self.writers
        if spec.name == "orders":
            return (self.rng.randint(1, 50), value)
        if spec.name == "order_lines":
            return (value, self.rng.randint(1, 4))
        return (value,)

    def statement(self, cursor, undo: list) -> tuple[str, str, int]:
        """Run one random statement; returns (table, op, affected rows), op "k" for an UPDATE
        that respells the key (an update whose key changed, to sinks). The owned keys change at
        once; `undo` gets what reverts that if the transaction rolls back."""
        rng = self.rng
        spec = rng.choice(TABLES)
        owned = self.owned[spec.name]
        action = rng.random()
        if action < 0.35 or len(owned) < 10:
            key = self._new_key(spec)
            values = dict(zip(spec.key, key))
            row = [values[c.name] if c.name in values else _random_value(rng, c) for c in spec.columns]
            affected = cursor.execute(self.sql[spec.name]["insert"], row)
            owned.append(key)
            undo.append((owned, "remove", key, None))
            return spec.name, "c", affected
        position = rng.randrange(len(owned))
        key = owned[position]
        if action < 0.8:
            if spec.new_key == "sku" and rng.random() < 0.1:
                new = (_respell(key[0]),)
                affected = cursor.execute(f"UPDATE {quote(DATABASE)}.{quote(spec.name)} SET {quote('sku')} = %s, "
                                          f"{quote('stock')} = {quote('stock')} + 1 WHERE {self.sql[spec.name]['where']}",
                                          (new[0], *key))
                owned[position] = new
                undo.append((owned, "replace", new, key))
                return spec.name, "k", affected
            columns = rng.sample(spec.values, rng.randint(1, min(3, len(spec.values))))
            sets = ", ".join(f"{quote(c.name)} = %s" for c in columns)
            affected = cursor.execute(
                f"UPDATE {quote(DATABASE)}.{quote(spec.name)} SET {sets} WHERE {self.sql[spec.name]['where']}",
                [*(_random_value(rng, c) for c in columns), *key])
            return spec.name, "u", affected
        affected = cursor.execute(self.sql[spec.name]["delete"], key)
        owned[position] = owned[-1]  # swap-remove: the order of the keys does not matter
        owned.pop()
        undo.append((owned, "add", key, None))
        return spec.name, "d", affected

    @staticmethod
    def undo(undo: list) -> None:
        """Revert the owned keys' changes of a rolled-back transaction."""
        for owned, change, key, new in reversed(undo):
            if change == "add":
                owned.append(key)
            elif change == "remove":
                owned.remove(key)
            else:
                owned[owned.index(key)] = new


def _connect(port: int, autocommit: bool) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="", charset="utf8mb4",
                           autocommit=autocommit)


def _writer_main(port: int, index: int, writers: int, run: int, seed: int, rate: float, seconds: float,
                 ready, go, stop, results) -> None:
    """A writer process: set up, say ready, wait for `go`, write until `stop` or `seconds`."""
    try:
        connection = _connect(port, autocommit=False)
        writer = _Writer(connection, index, writers, run, seed)
        counts: dict[str, dict[str, int]] = {}
        transactions = changed = rolled_back = rows = key_changes = 0
        ready.put(index)
        go.wait()
        started = time.time()
        deadline = started + seconds
        interval = 1.0 / rate if rate > 0 else 0.0
        due = started + (index / writers) * interval  # writers' schedules interleave
        ended = started
        with connection.cursor() as cursor:
            while True:
                now = time.time()
                if interval:
                    if due > now:
                        if stop.wait(due - now):
                            break
                        now = time.time()
                    due = max(due + interval, now - 0.1)  # at most 0.1 s of catching up at once
                if now >= deadline or stop.is_set():
                    break
                undo: list = []
                done: list[tuple[str, str, int]] = []
                try:
                    for _ in range(writer.rng.randint(1, 5)):
                        done.append(writer.statement(cursor, undo))
                    connection.commit()
                except pymysql.err.OperationalError as error:
                    if error_code(error) not in LOCK_CONFLICT:  # lock wait timeout, deadlock: roll back
                        raise
                    connection.rollback()
                    writer.undo(undo)
                    rolled_back += 1
                    continue
                ended = time.time()
                transactions += 1
                affected = 0
                for table, op, count in done:
                    if op == "k":
                        key_changes += count
                        op = "u"
                    per_table = counts.setdefault(table, {})
                    per_table[op] = per_table.get(op, 0) + count
                    affected += count
                rows += affected
                changed += affected > 0
        connection.close()
        results.put({"index": index, "transactions": transactions, "changed_transactions": changed,
                     "rolled_back": rolled_back, "rows": rows, "key_changes": key_changes, "counts": counts,
                     "started": started, "ended": ended})
    except BaseException:
        ready.put(index)  # never leave the parent waiting
        results.put({"index": index, "error": traceback.format_exc()})


def _writer_group_main(port: int, indexes: list[int], writers: int, run: int, seeds: list[int], rate: float,
                       seconds: float, ready, go, stop, results) -> None:
    """Several writers as threads of one client process."""
    import threading

    threads = [threading.Thread(target=_writer_main, name=f"oltp-writer-{index}", daemon=True,
                                args=(port, index, writers, run, seed, rate, seconds, ready, go, stop, results))
               for index, seed in zip(indexes, seeds)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _probe_main(port: int, rate: float, seconds: float, ready, go, stop, results) -> None:
    try:
        connection = _connect(port, autocommit=True)
        sql = f"INSERT INTO {quote(DATABASE)}.{quote(PROBE_TABLE)} (id, written_at) VALUES (%s, %s)"
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {quote(DATABASE)}.{quote(PROBE_TABLE)}")
            next_id = int(cursor.fetchone()[0]) + 1
            ready.put("probe")
            go.wait()
            started = time.time()
            deadline = started + seconds
            interval = 1.0 / rate
            due = time.monotonic()
            written = 0
            while time.time() < deadline and not stop.is_set():
                cursor.execute(sql, (next_id, time.time()))
                next_id += 1
                written += 1
                due += interval
                if stop.wait(max(0.0, due - time.monotonic())):
                    break
        connection.close()
        results.put({"index": "probe", "probes": written})
    except BaseException:
        ready.put("probe")
        results.put({"index": "probe", "error": traceback.format_exc()})


@dataclass
class LoadResult:
    transactions: int
    changed_transactions: int  # transactions with at least one row changed (each is one GTID)
    rolled_back: int
    rows: int
    key_changes: int  # of the updates, those that respelled the key (a delete + a create to sinks)
    ops: dict[str, int]  # "c"/"u"/"d" -> rows
    rows_by_table: dict[str, int]  # "oltp.<table>" -> rows
    seconds: float  # from `go` to the last commit of the last writer
    probes: int
    writers: int
    target_rate: float  # transactions/s in total, 0 = full speed

    @property
    def rate(self) -> float:
        return self.transactions / self.seconds if self.seconds > 0 else 0.0

    def detail(self) -> dict[str, Any]:
        return {
            "writers": self.writers, "target_tx_per_second": self.target_rate or "full speed",
            "transactions": self.transactions, "tx_per_second": round(self.rate, 1),
            "row_changes": self.rows, "row_changes_per_second": round(self.rows / self.seconds) if self.seconds else None,
            "ops": self.ops, "key_changes": self.key_changes, "rolled_back": self.rolled_back, "seconds": round(self.seconds, 3),
        }


_runs = iter(range(1, 10**6))


class OltpLoad:
    """`writers` writers as threads of `processes` client processes (and a probe process if
    `probe_rate`), for at most `seconds`: `prepare()` (processes started and set up), `go()`,
    then `wait()` or `stop()` for the LoadResult. `rate`: transactions per second of all writers
    together, 0 for full speed."""

    def __init__(self, port: int, writers: int, seconds: float, rate: float = 0, probe_rate: float = 0,
                 seed: int = 1, processes: int = 1) -> None:
        self.port, self.writers, self.seconds, self.rate, self.probe_rate = port, writers, seconds, rate, probe_rate
        self.processes = max(1, min(processes, writers))
        self.run = next(_runs)
        self.seed = seed * 100_000 + self.run * 100
        context = multiprocessing.get_context("spawn")
        self._ready, self._results = context.Queue(), context.Queue()
        self._go, self._stop = context.Event(), context.Event()
        self._processes: list = []
        self._context = context
        self.went_at: float | None = None  # wall clock of go()

    def prepare(self, timeout: float = 120) -> "OltpLoad":
        per_writer = self.rate / self.writers if self.rate else 0.0
        for group in range(self.processes):
            indexes = list(range(group, self.writers, self.processes))
            self._processes.append(self._context.Process(
                target=_writer_group_main, name=f"oltp-writers-{group}", daemon=True,
                args=(self.port, indexes, self.writers, self.run, [self.seed + index for index in indexes], per_writer,
                      self.seconds, self._ready, self._go, self._stop, self._results)))
        if self.probe_rate:
            self._processes.append(self._context.Process(
                target=_probe_main, name="oltp-probe", daemon=True,
                args=(self.port, self.probe_rate, self.seconds, self._ready, self._go, self._stop, self._results)))
        for process in self._processes:
            process.start()
        deadline = time.monotonic() + timeout
        for _ in range(self._reporters):
            try:
                self._ready.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise TimeoutError("the OLTP writers did not start") from None
        return self

    @property
    def _reporters(self) -> int:
        """Writers and the probe each say ready and report once."""
        return self.writers + (1 if self.probe_rate else 0)

    def go(self) -> "OltpLoad":
        self.went_at = time.time()
        self._go.set()
        return self

    def running(self) -> bool:
        return any(process.is_alive() for process in self._processes)

    def stop(self) -> LoadResult:
        self._stop.set()
        return self.wait()

    def wait(self, timeout: float | None = None) -> LoadResult:
        timeout = self.seconds + 60 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        reports = []
        try:
            for _ in range(self._reporters):
                reports.append(self._results.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            self.kill()
            raise TimeoutError("the OLTP writers did not report") from None
        for process in self._processes:
            process.join(10)
        failed = [report["error"] for report in reports if "error" in report]
        if failed:
            raise RuntimeError(f"an OLTP writer failed:\n{failed[0]}")
        writers = [report for report in reports if report["index"] != "probe"]
        ops: dict[str, int] = {"c": 0, "u": 0, "d": 0}
        by_table: dict[str, int] = {}
        for report in writers:
            for table, counts in report["counts"].items():
                for op, count in counts.items():
                    ops[op] += count
                    by_table[f"{DATABASE}.{table}"] = by_table.get(f"{DATABASE}.{table}", 0) + count
        ended = max((report["ended"] for report in writers), default=self.went_at)
        return LoadResult(
            transactions=sum(r["transactions"] for r in writers),
            changed_transactions=sum(r["changed_transactions"] for r in writers),
            rolled_back=sum(r["rolled_back"] for r in writers),
            rows=sum(r["rows"] for r in writers), key_changes=sum(r["key_changes"] for r in writers), ops=ops, rows_by_table=by_table,
            seconds=max(0.0, ended - (self.went_at or ended)),
            probes=sum(r.get("probes", 0) for r in reports if r["index"] == "probe"),
            writers=self.writers, target_rate=self.rate,
        )

    def kill(self) -> None:
        self._stop.set()
        for process in self._processes:
            if process.is_alive():
                process.kill()
                process.join(10)
