"""Backfills read by the cluster (`snapshot.distributed = true`): Spark tasks read key ranges
from a real MariaDB into staging files while writers change the tables and the engine streams;
the Iceberg tables must equal the source exactly, in every watermark mode; a task that dies is
read again without duplicating or losing rows; progress and `dblog status` follow the read."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
from support import eventually
from support.harness import EngineThread, iceberg_config

from dblog.core.events import TableId
from dblog.demo.verify import source_rows
from dblog.demo.workload import WriteLoad, tables
from dblog.mysql.source_connection import SourceConnection
from dblog.core.window import identity_token
from dblog.runtime.distributed_snapshot import WHOLE_RANGE, DistributedReads, RangeTask
from dblog.sinks.iceberg.staging import IDENTITY_COLUMN
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.status import describe
from dblog.sinks.iceberg.sink import read_target

pytestmark = [pytest.mark.timeout(900), pytest.mark.spark]


def _distributed(**extra) -> dict:
    # One task at a time over many small ranges: a window lasts seconds, and commits every
    # 0.3 s bring the writers' changes inside it into Iceberg before it closes, so a staged row
    # read before such a change would overwrite it if the window did not drop its key.
    return {"chunk_size": 500, "distributed": True, "distributed_tasks": 1, "distributed_range_rows": 250,
            "distributed_window_rows": 6_000, **extra}


def _keys_touched(caplog) -> int:
    """Keys the log touched inside staged windows (the sink's log), left out of their rows."""
    return sum(int(match.group(1)) for record in caplog.records
               if (match := re.search(r"less the keys of (\d+) changes inside the window", record.getMessage())))


def _writes_after_each_windows_reads(monkeypatch, mariadb, database, rows: int, writes: int) -> None:
    """Each staged window, once Spark has read its ranges and before it closes, gets `writes`
    writes of writers of its own (WriteLoad, at full speed), waited for: every window has changes
    to rows already staged, whatever the machine's speed or where the test's other writers are."""
    original = DistributedReads._read_ranges
    windows = []

    def read_ranges(self, *args, **kwargs):
        refused = original(self, *args, **kwargs)
        windows.append(WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=100 + len(windows),
                                 max_writes=writes).start())
        eventually(lambda: sum(windows[-1].writes) >= writes or windows[-1].errors, 120,
                   message=f"{writes} writes inside the window")
        windows[-1].stop()  # raises a writer's error
        return refused

    monkeypatch.setattr(DistributedReads, "_read_ranges", read_ranges)


def _assert_iceberg_equals_source(mariadb, database, spark, sink) -> None:
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            schema = reader.schemas.schema(table)
            expected = source_rows(reader, table)
            got = read_target(spark, sink.target_name(table), schema)  # raises on a duplicate key
            assert got.keys() == expected.keys(), table
            assert got == expected, table
    finally:
        reader.close()


# Each case a Spark session's distributed read under writers (30-50 s). The default run takes the
# GTID mode and insert_delete (the staged reads' marker writer and deleter both); insert_insert
# differs from insert_delete only in writing its close row with that same writer, so it is in the
# scheduled slow tier (tests/README.md). The capture model and tests/engine/test_engine.py check
# both signal-table modes' windows on every run.
@pytest.mark.parametrize("watermarks", ["gtid", pytest.param("insert_insert", marks=pytest.mark.slow),
                                        "insert_delete"])
def test_a_distributed_snapshot_under_writers_lands_exactly(mariadb, database, tmp_path, spark, loaded, write_load,
                                                            watermarks, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="dblog.spark")
    rows = 4_000  # two windows of twelve ranges: what is tested is the writers' changes inside them
    loaded(rows)
    config = iceberg_config(mariadb, database, tmp_path, spark,
                            snapshot=_distributed(watermarks=watermarks, distributed_window_rows=3_000),
                            offsets={"commit_interval_seconds": 0.3})
    # Writers while the snapshot starts and streams (3,000 writes in all, not for as long as the
    # snapshot takes: a loaded machine made them write, and the engine stream and MERGE, several
    # times more), and 200 writes inside each window after its ranges are read.
    workload = write_load(rows, writers=3, seed=7, rate=150, max_writes=3_000)
    _writes_after_each_windows_reads(monkeypatch, mariadb, database, rows, writes=200)
    try:
        engine = EngineThread(config)
        sink = engine.engine.sink
        engine.wait_for("COMPLETED", timeout=600)
    finally:
        workload.stop()
    engine.until_caught_up(timeout=600)
    completed = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert {n.data["status"] for n in completed} == {"SUCCEEDED"}
    orders = next(n for n in completed if n.data["data_collection"].endswith(".orders"))
    assert orders.data["total_rows_scanned"] >= rows
    assert _keys_touched(caplog) > 0  # the writers did change keys inside windows
    _assert_iceberg_equals_source(mariadb, database, spark, sink)


def _spark_python_workers(spark) -> list[int]:
    """The Python workers this test's Spark forked (they run the tasks): children of a
    `pyspark.daemon` process. On local[N], only those below this process (its session's JVM
    starts the daemon): another xdist worker's Spark session runs beside it (tests/conftest.py).
    On a standalone master they are below the cluster's executors, all of them this session's
    (the cluster run has one session: tests/ops/test_spark_cluster.py)."""
    local = spark.sparkContext.master.startswith("local")
    commands: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        commands[int(entry.name)] = (parent, command)

    def below_this_process(pid: int) -> bool:
        while pid > 1:
            pid = commands.get(pid, (0, ""))[0]
            if pid == os.getpid():
                return True
        return False

    return [pid for pid, (parent, command) in commands.items()
            if "pyspark.daemon" in command and "pyspark.daemon" in commands.get(parent, (0, ""))[1]
            and (below_this_process(pid) or not local)]


def _range_query_running(mariadb) -> bool:
    """A range reader's SELECT is on the server (its LIMIT never binds: `WHOLE_RANGE`)."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s",
                       (f"%LIMIT {WHOLE_RANGE}%",))
        return cursor.fetchone()[0] > 0


def test_a_spark_task_killed_while_reading_its_range_is_read_again(mariadb, database, tmp_path, spark, loaded,
                                                                   write_load, caplog):
    """The Python worker running a range's task is killed with SIGKILL while its SELECT runs:
    the task fails, its range is read again, and the table still lands exactly once."""
    caplog.set_level(logging.INFO, logger="dblog")
    rows = 20_000
    loaded(rows)
    config = iceberg_config(mariadb, database, tmp_path, spark,
                            snapshot=_distributed(distributed_tasks=2, distributed_range_rows=4_000,
                                                  distributed_window_rows=40_000),
                            offsets={"commit_interval_seconds": 0.5})
    workload = write_load(rows, writers=2, seed=11, rate=50)
    try:
        engine = EngineThread(config)
        sink = engine.engine.sink
        kills = 0
        deadline = time.monotonic() + 300
        while not _failed_reads(caplog) and time.monotonic() < deadline and not any(
                n.type == "COMPLETED" for n in engine.notifications):
            if _range_query_running(mariadb):
                for pid in _spark_python_workers(spark):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        kills += 1
                time.sleep(0.5)
            time.sleep(0.002)
        assert _failed_reads(caplog), f"no range read failed ({kills} workers killed)"
        engine.wait_for("COMPLETED", timeout=600)
    finally:
        workload.stop()
    engine.until_caught_up(timeout=600)
    completed = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert {n.data["status"] for n in completed} == {"SUCCEEDED"}
    _assert_iceberg_equals_source(mariadb, database, spark, sink)


def _failed_reads(caplog) -> list[str]:
    """dblog's own retries (local[N]: Spark retries no task) and Spark's (a cluster)."""
    return [record.getMessage() for record in caplog.records
            if "reading a key range failed" in record.getMessage() or "Spark's retry" in record.getMessage()]


def test_status_and_progress_show_the_rows_a_distributed_read_has_staged(mariadb, database, tmp_path, spark, loaded,
                                                                        caplog):
    """While Spark tasks read a window, the committed offsets carry the rows staged so far:
    `dblog status` shows them with a rate and an ETA, and the engine logs its progress."""
    caplog.set_level(logging.INFO, logger="dblog")
    loaded(30_000)
    config = iceberg_config(mariadb, database, tmp_path, spark,
                            snapshot=_distributed(distributed_range_rows=1_000, distributed_window_rows=100_000),
                            offsets={"commit_interval_seconds": 0.2})
    engine = EngineThread(config)
    store = OffsetStore(config.offsets.path)
    seen = None
    deadline = time.monotonic() + 300
    while seen is None and time.monotonic() < deadline:
        offsets = store.load()
        text = describe(offsets) if offsets is not None else ""
        if "staged by the read under way" in text and ".orders: reading" in text:
            seen = text
        time.sleep(0.05)
    engine.wait_for("COMPLETED", timeout=600)
    engine.until_caught_up(timeout=600)
    assert seen is not None, "dblog status never showed a distributed read under way"
    line = next(line for line in seen.splitlines() if ".orders: reading" in line)
    staged = int(re.search(r"\+([\d,]+) staged by the read under way", line).group(1).replace(",", ""))
    assert 0 < staged < 30_000 and "rows/s" in line and "ETA" in line, line
    offsets = store.load()
    assert "snapshot: idle" in describe(offsets)


def test_a_key_respelled_under_a_case_insensitive_collation_after_its_range_was_read(mariadb, database, tmp_path,
                                                                                     spark):
    """'key00005' is deleted and 'KEY00005' inserted (one key to the server, `_ci`) after the
    task read its range and while the window is still open: the stale 'key00005' is dropped
    and only the new row lands, once. The staged rows and the window meet on the key identity
    the server's collation gives (checked first: a staged row's identity equals that of every
    spelling of its key, trailing spaces included under PAD SPACE)."""
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.kv (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
    values = ", ".join(f"('key{i:05d}', {i})" for i in range(1, 3001))
    mariadb.execute(f"INSERT INTO {db}.kv VALUES {values}")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "kv")
    schema = reader.schemas.schema(table)
    staged = RangeTask({}, schema, schema, None, str(tmp_path)).staged_table([{"k": "key00005", "v": 5}])
    for spelling in ("key00005", "KEY00005", "Key00005 "):
        assert staged.column(IDENTITY_COLUMN)[0].as_py() == identity_token(schema.identity_of((spelling,)))
    assert staged.column(IDENTITY_COLUMN)[0].as_py() != identity_token(schema.identity_of(("key00006",)))
    staging = tmp_path / "staging"
    config = iceberg_config(mariadb, database, tmp_path, spark,
                            source={"include": [f"{database}\\.kv"]},
                            snapshot=_distributed(distributed_range_rows=100, distributed_window_rows=3_000),
                            iceberg={"staging_dir": str(staging)}, offsets={"commit_interval_seconds": 0.3})
    engine = EngineThread(config)
    sink = engine.engine.sink
    deadline = time.monotonic() + 300
    while not list(staging.glob("read-*/range-000000.parquet")) and time.monotonic() < deadline:
        time.sleep(0.01)
    with mariadb.connect() as connection, connection.cursor() as cursor:
        connection.begin()
        cursor.execute(f"DELETE FROM {db}.kv WHERE k = 'key00005'")
        cursor.execute(f"INSERT INTO {db}.kv VALUES ('KEY00005', -5)")
        connection.commit()
        cursor.execute(f"UPDATE {db}.kv SET v = -10 WHERE k = 'key00010'")
    last_range_read = bool(list(staging.glob("read-*/range-000029.parquet")))
    engine.wait_for("COMPLETED", timeout=600)
    engine.until_caught_up(timeout=600)
    assert not last_range_read, "the window closed before the change: the test proves nothing"
    expected = source_rows(reader, table)
    reader.close()
    got = read_target(spark, sink.target_name(table), schema)
    assert ("KEY00005",) in got and ("key00005",) not in got
    assert got == expected


def test_shards_read_by_spark_tasks_land_in_one_routed_table_with_their_changelog(mariadb, tmp_path, spark, loaded,
                                                                                   write_load):
    """Two shards with the same keys, routed into one Iceberg table (the staged rows get their
    `_source_db` / `_source_table`), with `iceberg.changelog`: the staged rows the tables took
    are in the changelog as `r` rows, once, with the row as JSON."""
    shards = [f"shard_{random.randrange(10**9)}_{n}" for n in (1, 2)]
    rows = 2_000
    for number, shard in enumerate(shards, start=1):
        mariadb.execute(f"CREATE DATABASE `{shard}`")
        loaded(rows, seed=number, database=shard)
    target_db = f"merged_{random.randrange(10**9)}"
    routes = [{"tables": [r"shard_\d+_\d+\.orders"], "target": f"{target_db}.orders"}]
    config = iceberg_config(mariadb, shards[0], tmp_path, spark, iceberg={"routes": routes, "changelog": True},
                            source={"include": [rf"{s}\.orders" for s in shards]},
                            signals={"table": f"{shards[0]}.dblog_signal"},
                            snapshot=_distributed(distributed_range_rows=400, distributed_window_rows=1_200))
    loads = [write_load(rows, database=shard, writers=1, seed=5 + n, rate=50) for n, shard in enumerate(shards)]
    try:
        engine = EngineThread(config)
        sink = engine.engine.sink
        engine.wait_for("COMPLETED", timeout=600)
    finally:
        for workload in loads:
            workload.stop()
    engine.until_caught_up(timeout=600)
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for shard in shards:
            table = TableId(shard, "orders")
            expected = source_rows(reader, table)
            got = read_target(spark, sink.target_name(table), reader.schemas.schema(table), sharded_source=table)
            assert got == expected
    finally:
        reader.close()
    history = f"lake.{target_db}.orders_changelog"
    reads = spark.sql(f"SELECT source_db, after FROM {history} WHERE op = 'r'").collect()
    per_shard = {shard: [json.loads(r.after) for r in reads if r.source_db == shard] for shard in shards}
    for shard in shards:
        keys = [(row["region"], row["order_id"]) for row in per_shard[shard]]
        assert len(keys) == len(set(keys)), "a staged row appended twice to the changelog"
        assert rows * 0.8 < len(keys) <= rows * 1.2  # every row read once, less the keys changed inside windows
