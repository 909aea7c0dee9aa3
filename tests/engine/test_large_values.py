"""Large values (issue 6 item 5): multi-megabyte LONGBLOB/LONGTEXT rows, rows near the server's
`max_allowed_packet`, a 200-column table, and the engine's memory with rows of several MB.

Each data test writes while the engine snapshots and streams, and ends with the check that
matters: replaying the JSON-lines sink equals `SELECT *`.

What was found about the limits (MariaDB 10.11, PyMySQL 1.2.4, mysql-replication 1.0.17):
- Reading is not limited by `max_allowed_packet`: the chunk SELECT returns a row of two columns
  each `max_allowed_packet - 1 KiB` long (the row is twice the limit), and the binlog dump sends
  the update events of such a row (before and after images: four times the limit). PyMySQL joins
  the 16 MiB wire packets and enforces no limit on what it receives; the server's dump thread
  sends events up to 1 GiB whatever `max_allowed_packet` / `slave_max_allowed_packet` are.
- Writing is: one statement must fit in `max_allowed_packet`, and on MariaDB 10.11 a `_binary'…'`
  literal (what PyMySQL sends for `bytes`) of half the limit is already refused with error 1153.
  Values near the limit are built on the server here (CONCAT in pieces), as applications do.
- Memory: a chunk is at most `chunk_size` rows and ends once its rows took `chunk_bytes` on
  the wire (plus one row). `test_peak_rss_with_rows_of_several_megabytes` measures it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import json
import os
import random
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator

import pymysql
import pytest
from support.harness import EngineThread, compare, config_data, make_config
from support import hold_chunk_read

from dblog.core.events import TableId
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)

MB = 1 << 20


def _create(mariadb, database: str, ddl: str) -> None:
    mariadb.execute(ddl.format(db=f"`{database}`"))
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))


def _text(rng: random.Random, size: int) -> str:
    """About `size` bytes of utf8mb4 text with 1-, 2- and 4-byte characters, different per call."""
    unit = f"{rng.getrandbits(64):016x} héllo wörld 😀 "
    return unit * (size // len(unit.encode()))


WRITES_PER_SECOND = 100


@contextlib.contextmanager
def _writer(mariadb, table: str, rows: int, update: Callable, add: Callable, seed: int,
            writes: list[int]) -> Iterator[None]:
    """A thread writing to `table` (ids 1..rows) while the block runs: `update(cursor, rng, id)`
    60% of the time, a DELETE 20%, `add(cursor, rng, new_id)` 20%. Counts them in `writes[0]`.

    At most WRITES_PER_SECOND: an unpaced writer competes with the engine for the two cores,
    and the slower the snapshot the more it writes, all of which the engine then streams (the
    200-column test: 10 s on a quiet machine, 28–160 s beside other tests). The tests hold a
    chunk read until their writes are made (`hold_chunk_read`): how many writes a snapshot sees
    does not depend on the pace."""
    stop = threading.Event()

    def write() -> None:
        rng, next_id = random.Random(seed), 10_000
        due = time.monotonic()
        with mariadb.connect() as connection, connection.cursor() as cursor:
            while not stop.is_set():
                action, row_id = rng.random(), rng.randint(1, rows)
                if action < 0.6:
                    update(cursor, rng, row_id)
                elif action < 0.8:
                    cursor.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
                else:
                    add(cursor, rng, next_id)
                    next_id += 1
                writes[0] += 1
                due = max(due + 1 / WRITES_PER_SECOND, time.monotonic())  # no burst after a stall
                time.sleep(max(0.0, due - time.monotonic()))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join(30)


def _sink_records(path) -> list[dict]:
    return list(read_json_lines(path))


def _blob_sizes(records, op: str, column: str) -> list[int]:
    return [len(base64.b64decode(r["value"]["after"][column])) for r in records
            if r["value"]["op"] == op and r["value"]["after"] and r["value"]["after"].get(column)]


class _BigRowWriter:
    """Updates, deletes and inserts multi-megabyte rows of `big` until stopped."""

    def __init__(self, mariadb, database: str, first_new_id: int, seed: int) -> None:
        self.mariadb, self.database = mariadb, database
        self.rng = random.Random(seed)
        self.next_id = first_new_id
        self.writes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "_BigRowWriter":
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(120)
        if self.error:
            raise self.error
        return self.writes

    def _run(self) -> None:
        db, rng = f"`{self.database}`", self.rng
        try:
            with self.mariadb.connect() as connection, connection.cursor() as cursor:
                while not self._stop.is_set():
                    cursor.execute(f"SELECT id FROM {db}.big")
                    ids = [row[0] for row in cursor.fetchall()]
                    action = rng.choice(["blob", "blob", "text", "small", "delete", "insert"])
                    target = rng.choice(ids) if ids else None
                    if action == "insert" or target is None:
                        cursor.execute(f"INSERT INTO {db}.big (id, b, n) VALUES (%s, %s, 0)",
                                       (self.next_id, os.urandom(rng.randint(4 * MB, 7 * MB))))
                        cursor.execute(f"UPDATE {db}.big SET t = %s WHERE id = %s",
                                       (_text(rng, rng.randint(2 * MB, 7 * MB)), self.next_id))
                        self.next_id += 1
                    elif action == "blob":
                        cursor.execute(f"UPDATE {db}.big SET b = %s, n = n + 1 WHERE id = %s",
                                       (os.urandom(rng.randint(4 * MB, 7 * MB)), target))
                    elif action == "text":
                        cursor.execute(f"UPDATE {db}.big SET t = %s WHERE id = %s",
                                       (_text(rng, rng.randint(4 * MB, 7 * MB)), target))
                    elif action == "small":
                        cursor.execute(f"UPDATE {db}.big SET n = n + 1 WHERE id = %s", (target,))
                    else:
                        cursor.execute(f"DELETE FROM {db}.big WHERE id = %s", (target,))
                    self.writes += 1
                    time.sleep(0.05)
        except BaseException as error:  # reported by stop()
            self.error = error


def test_multi_megabyte_blobs_and_texts_snapshot_and_stream(mariadb, database, tmp_path, monkeypatch):
    """Rows of 6-14 MB (LONGBLOB 4-7 MB of random bytes + LONGTEXT 2-7 MB of utf8mb4) are
    snapshotted two per chunk while a writer updates, deletes and inserts such rows.

    Six rows: what is tested is megabytes per row (and per chunk: two rows), not the count of
    rows; three chunks put one before and one after the chunk held for the writer's writes.
    (Twelve rows took twice the time: 100 MB more to load, snapshot, stream and compare.)"""
    _create(mariadb, database, "CREATE TABLE {db}.big (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT, n INT) "
                               "CHARACTER SET utf8mb4")
    rng = random.Random(6)
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for row_id in range(1, 7):  # two statements: each must fit in max_allowed_packet
            cursor.execute(f"INSERT INTO `{database}`.big VALUES (%s, %s, NULL, 0)",
                           (row_id, os.urandom(rng.randint(4 * MB, 7 * MB))))
            cursor.execute(f"UPDATE `{database}`.big SET t = %s WHERE id = %s",
                           (_text(rng, rng.randint(2 * MB, 7 * MB)), row_id))
    writer = _BigRowWriter(mariadb, database, first_new_id=100, seed=7)
    # The second chunk waits for the writer's fifth write: the snapshot runs under writes
    # however fast the engine reads.
    state = hold_chunk_read(monkeypatch, TableId(database, "big"), 2, lambda: writer.writes >= 5 or writer.error,
                            message="five writes during the snapshot")
    engine = EngineThread(make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 2}))
    writer.start()
    try:
        engine.wait_for("COMPLETED", timeout=300)
    finally:
        writes = writer.stop()
    engine.until_caught_up()

    assert state["held"] and writes >= 5, "the writer did not really run during the snapshot"
    records = _sink_records(tmp_path / "changes.jsonl")
    ops = {r["value"]["op"] for r in records}
    assert {"r", "u"} <= ops, ops
    assert max(_blob_sizes(records, "r", "b")) >= 4 * MB
    assert max(_blob_sizes(records, "u", "b") + [len((r["value"]["after"]["t"] or "").encode())
                                                 for r in records if r["value"]["op"] == "u"]) >= 4 * MB
    result = compare(mariadb, tmp_path / "changes.jsonl", [TableId(database, "big")])
    assert result.equal, result.summary()


def _grow(mariadb, database: str, column: str, row_id: int, size: int, fill: bytes) -> None:
    """Set `column` of row `row_id` to `size` bytes, built on the server in 4 MiB pieces: one
    statement must fit in max_allowed_packet, the value does not have to."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"UPDATE `{database}`.near SET {column} = '' WHERE id = %s", (row_id,))
        done = 0
        while done < size:
            piece = min(4 * MB, size - done)
            value = (fill * (piece // len(fill) + 1))[:piece]
            cursor.execute(f"UPDATE `{database}`.near SET {column} = CONCAT({column}, %s) WHERE id = %s",
                           (value if column == "b" else value.decode("ascii"), row_id))
            done += piece
        cursor.execute(f"SELECT LENGTH({column}) FROM `{database}`.near WHERE id = %s", (row_id,))
        assert cursor.fetchone()[0] == size, "the server did not build the value (max_allowed_packet?)"


def test_rows_near_max_allowed_packet(mariadb, database, tmp_path):
    """Rows whose two columns are each `max_allowed_packet - 1 KiB` long go through the chunk
    SELECT (a 2x-the-limit row) and the binlog (update events of 4x the limit), both directions."""
    limit = int(mariadb.execute("SELECT @@GLOBAL.max_allowed_packet")[0][0])
    assert 4 * MB <= limit <= 64 * MB, f"max_allowed_packet = {limit}: this test builds rows of twice that"
    size = limit - 1024
    _create(mariadb, database, "CREATE TABLE {db}.near (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT) "
                               "CHARACTER SET utf8mb4")
    # A client cannot send such a value in one statement: the limit is on what is *sent*.
    with pytest.raises(pymysql.err.OperationalError):
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO `{database}`.near (id, b) VALUES (0, %s)", (b"x" * size,))
    mariadb.execute(f"INSERT INTO `{database}`.near (id) VALUES (1), (2), (3)")
    _grow(mariadb, database, "b", 1, size, b"\x00\x01\xfe\xff'\\")
    _grow(mariadb, database, "t", 1, size, b"a'b\\c")
    _grow(mariadb, database, "b", 3, size // 2, b"3")
    # Snapshot path: row 1 (about 2 x max_allowed_packet) is read by the initial snapshot.
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 1})
    engine = EngineThread(config)
    engine.wait_for("COMPLETED")
    # Stream path: row 2 grows to the same size through updates; row 1 is rewritten whole
    # (before and after images of 2 x the limit each in one event); row 3 is deleted.
    _grow(mariadb, database, "b", 2, size, b"\xff\x00")
    _grow(mariadb, database, "t", 2, size, b"xyz")
    mariadb.execute(f"UPDATE `{database}`.near SET b = CONCAT('X', SUBSTRING(b, 2)), "
                    f"t = CONCAT('Y', SUBSTRING(t, 2)) WHERE id = 1")
    mariadb.execute(f"DELETE FROM `{database}`.near WHERE id = 3")
    # Snapshot again (a signal) while row 1 changes during it.
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.near"]}, "again")
    mariadb.execute(f"UPDATE `{database}`.near SET b = CONCAT(SUBSTRING(b, 2), 'Z') WHERE id = 1")
    engine.eventually(lambda: engine.types().count("COMPLETED") >= 2, 300, interval=0.1,
                      message=lambda: f"the second snapshot COMPLETED; got {engine.types()}")
    engine.until_caught_up()

    records = _sink_records(tmp_path / "changes.jsonl")
    # Row 1 by the first snapshot, row 2 by the second (row 1's second read may be superseded by
    # its update inside the window).
    assert _blob_sizes(records, "r", "b").count(size) >= 2
    assert size in _blob_sizes(records, "u", "b")
    assert [r for r in records if r["value"]["op"] == "d" and r["key"] == {"id": 3}]
    result = compare(mariadb, tmp_path / "changes.jsonl", [TableId(database, "near")])
    assert result.equal, result.summary()
    assert result.rows[f"{database}.near"] == 2


# --- a 200-column table ----------------------------------------------------------------------

_WIDE_TYPES: list[tuple[str, object]] = [
    ("INT", lambda r: r.randint(-2**31, 2**31 - 1)),
    ("BIGINT UNSIGNED", lambda r: r.randint(0, 2**64 - 1)),
    ("DECIMAL(14,4)", lambda r: decimal.Decimal(r.randint(-10**13, 10**13)) / 10000),
    ("DOUBLE", lambda r: r.uniform(-1e12, 1e12)),
    ("FLOAT", lambda r: r.uniform(-1e6, 1e6)),
    ("VARCHAR(40)", lambda r: r.choice(["", "plain", "ünïcödé", "emoji 😀", "quote ' and \\"]) + str(r.random())[:8]),
    ("TEXT", lambda r: "text " * r.randint(0, 300)),
    ("DATETIME(6)", lambda r: datetime.datetime(2000, 1, 1) + datetime.timedelta(microseconds=r.randint(0, 10**15))),
    ("TIMESTAMP(3) NULL", lambda r: f"20{r.randint(10, 37)}-0{r.randint(1, 9)}-1{r.randint(0, 9)} "
                                    f"1{r.randint(0, 9)}:2{r.randint(0, 9)}:3{r.randint(0, 9)}.{r.randint(0, 999):03d}"),
    ("DATE", lambda r: datetime.date(1000, 1, 1) + datetime.timedelta(days=r.randint(0, 3_000_000))),
    ("TIME(2)", lambda r: f"{r.randint(-838, 838)}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 99):02d}"),
    ("BLOB", lambda r: r.randbytes(r.randint(0, 2000))),
    ("JSON", lambda r: json.dumps({"k": r.randint(0, 9), "s": "é😀", "l": [1, 2.5, None]})),
    ("ENUM('a','b','c')", lambda r: r.choice("abc")),
    ("SET('x','y','z')", lambda r: ",".join(r.sample(["x", "y", "z"], r.randint(0, 3)))),
    ("BIT(12)", lambda r: r.randint(0, 4095)),
    ("TINYINT", lambda r: r.randint(-128, 127)),
    ("CHAR(8)", lambda r: r.choice(["", "a", "ab  ", "ÿ😀"])),
    ("VARBINARY(16)", lambda r: r.randbytes(r.randint(0, 16))),
    ("YEAR", lambda r: r.randint(1901, 2155)),
]
_WIDE_COLUMNS = [(f"c{index:03d}", *_WIDE_TYPES[index % len(_WIDE_TYPES)]) for index in range(199)]


def _wide_values(rng: random.Random) -> list:
    return [None if rng.random() < 0.1 else make(rng) for _, _, make in _WIDE_COLUMNS]


def test_wide_table_of_200_columns(mariadb, database, tmp_path, monkeypatch):
    """A 200-column table of 20 mixed types is snapshotted in chunks of 37 rows while a writer
    inserts, updates (several columns at a time) and deletes rows."""
    columns = ", ".join(f"{name} {sql_type}" for name, sql_type, _ in _WIDE_COLUMNS)
    _create(mariadb, database, "CREATE TABLE {db}.wide (id INT PRIMARY KEY, " + columns + ") CHARACTER SET utf8mb4")
    names = ", ".join(name for name, _, _ in _WIDE_COLUMNS)
    insert = f"INSERT INTO `{database}`.wide (id, {names}) VALUES ({', '.join(['%s'] * 200)})"
    rng = random.Random(200)
    with mariadb.connect() as connection, connection.cursor() as cursor:
        assert len(_WIDE_COLUMNS) + 1 == 200
        cursor.executemany(insert, [(row_id, *_wide_values(rng)) for row_id in range(1, 601)])

    def update(cursor, wrng: random.Random, row_id: int) -> None:
        picked = wrng.sample(range(len(_WIDE_COLUMNS)), 5)
        values = _wide_values(wrng)
        sets = ", ".join(f"{_WIDE_COLUMNS[i][0]} = %s" for i in picked)
        cursor.execute(f"UPDATE `{database}`.wide SET {sets} WHERE id = %s", [values[i] for i in picked] + [row_id])

    def add(cursor, wrng: random.Random, row_id: int) -> None:
        cursor.execute(insert, (row_id, *_wide_values(wrng)))

    writes = [0]
    state = hold_chunk_read(monkeypatch, TableId(database, "wide"), 2, lambda: writes[0] >= 50,
                            message="50 writes during the snapshot")
    engine = EngineThread(make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 37}))
    with _writer(mariadb, f"`{database}`.wide", 600, update, add, seed=201, writes=writes):
        engine.wait_for("COMPLETED", timeout=300)
    engine.until_caught_up()
    assert state["held"] and writes[0] >= 50, "the writer did not really run during the snapshot"
    records = _sink_records(tmp_path / "changes.jsonl")
    assert all(len(r["value"]["after"]) == 200 for r in records if r["value"]["after"])
    result = compare(mariadb, tmp_path / "changes.jsonl", [TableId(database, "wide")])
    assert result.equal, result.summary()
    assert result.rows[f"{database}.wide"] > 400


def test_chunks_cut_by_their_byte_bound_under_writes_equal_the_source(mariadb, database, tmp_path, monkeypatch):
    """Rows from 100 B to 200 KB, chunks of up to 1024 rows but 256 KiB: the byte bound ends
    most chunks, mid-result, while a writer changes row sizes, inserts and deletes."""
    _create(mariadb, database, "CREATE TABLE {db}.mixed (id INT PRIMARY KEY, body MEDIUMTEXT) CHARACTER SET utf8mb4")
    rng = random.Random(256)
    insert = f"INSERT INTO `{database}`.mixed VALUES (%s, %s)"
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for row_id in range(1, 401):
            cursor.execute(insert, (row_id, _text(rng, rng.choice((100, 2_000, 50_000, 200_000)))))
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 1024, "chunk_bytes": 256 * 1024})

    def update(cursor, wrng: random.Random, row_id: int) -> None:
        cursor.execute(f"UPDATE `{database}`.mixed SET body = %s WHERE id = %s",
                       (_text(wrng, wrng.choice((100, 200_000))), row_id))

    def add(cursor, wrng: random.Random, row_id: int) -> None:
        cursor.execute(insert, (row_id, _text(wrng, 20_000)))

    writes = [0]
    state = hold_chunk_read(monkeypatch, TableId(database, "mixed"), 2, lambda: writes[0] >= 20,
                            message="20 writes during the snapshot")
    with _writer(mariadb, f"`{database}`.mixed", 400, update, add, seed=257, writes=writes):
        engine = EngineThread(config)
        engine.wait_for("COMPLETED", timeout=300)
    engine.until_caught_up()
    result = compare(mariadb, tmp_path / "changes.jsonl", [TableId(database, "mixed")])
    assert result.equal, result.summary()
    chunks = sum(1 for n in engine.notifications if n.type == "IN_PROGRESS")
    assert chunks >= 20, f"{chunks} chunks: the byte bound did not cut them"  # ~40 MB in 256 KiB chunks
    assert state["held"] and writes[0] >= 20, "the writer did not really run during the snapshot"


# --- memory --------------------------------------------------------------------------------------

_RSS_CHILD = """
import json, sys
from dblog.runtime.config import parse_config
from dblog.runtime.engine import Engine
from dblog.core.events import TableId
from dblog.core.progress import TableSnapshot
from benchmarks.process_rss import peak_kib  # VmHWM: this process's own, not a parent's

config, table = json.loads(sys.argv[1]), sys.argv[2]
done = []
engine = Engine(parse_config(config), on_notification=lambda n: n.type == "TABLE_SCAN_COMPLETED" and done.append(n.data))
capture = engine.start()
capture.request_snapshot([TableSnapshot(TableId.parse(table))], "rss")
baseline = peak_kib()
engine.run(until=lambda: bool(done) and capture.checkpoint() is not None)
print(json.dumps({"rows": engine.sink.count, "status": done[0]["status"], "baseline_kib": baseline,
                  "peak_kib": peak_kib()}))
"""


FAT_ROWS = 32


def _peak_rss(mariadb, database: str, tmp_path, label: str, **snapshot) -> dict:
    workdir = tmp_path / f"rss-{label}"
    workdir.mkdir()
    data = config_data(mariadb, database, workdir, snapshot={"startup": "never"}, sink={"type": "null"})
    del data["snapshot"]["chunk_size"]  # the defaults: 1024 rows, 64 MiB
    data["snapshot"].update(snapshot)
    done = subprocess.run([sys.executable, "-c", _RSS_CHILD, json.dumps(data), f"{database}.fat"],
                          capture_output=True, text=True, timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["rows"] == FAT_ROWS and measured["status"] == "SUCCEEDED", measured
    return measured


def test_peak_rss_with_rows_of_several_megabytes(mariadb, database, tmp_path):
    """32 rows of 5 MB (160 MB) snapshotted to the null sink by a fresh engine process, with
    the default chunk_size (1024 rows: the whole table): the byte bound ends each chunk after
    chunk_bytes, so the peak follows chunk_bytes, not the table. A normalized row takes about
    4/3 of its wire size (base64) beside the packet it was parsed from.

    The table only has to be large enough that reading it whole breaks the bounds asserted
    below: about 7.3 MiB of growth a row read at once (24 rows read whole: +176 MiB), so 32
    rows read whole take about 235 MiB, over the default's 192. (It had 40 rows: 200 MB loaded
    and read three times for the same figures.)"""
    _create(mariadb, database, "CREATE TABLE {db}.fat (id INT PRIMARY KEY, b LONGBLOB)")
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for row_id in range(FAT_ROWS):
            cursor.execute(f"INSERT INTO `{database}`.fat VALUES (%s, %s)", (row_id, os.urandom(5 * MB)))
    measured = {label: _peak_rss(mariadb, database, tmp_path, label, **snapshot) for label, snapshot in (
        ("16MiB", {"chunk_bytes": "16MiB"}), ("default", {}), ("2 rows", {"chunk_size": 2, "chunk_bytes": "1GiB"}))}
    growth = {label: (m["peak_kib"] - m["baseline_kib"]) / 1024 for label, m in measured.items()}
    figures = f"peak RSS over the engine's start, {FAT_ROWS} x 5 MB rows: " + ", ".join(
        f"{label}: +{mib:.0f} MiB" for label, mib in growth.items())
    print(figures)
    assert growth["2 rows"] < 100, figures  # the row bound alone
    assert growth["16MiB"] < 100, figures  # 4 rows of 5 MB a chunk, not the table
    assert growth["default"] < 64 * 3, figures  # 64 MiB a chunk
    assert growth["default"] > growth["16MiB"], figures  # the bound is what sizes the chunk


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
