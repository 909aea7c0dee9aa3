"""A transaction larger than `iceberg.max_buffer_rows` lands exactly once: the sink spills its
batch to the staging area in parts while it is read, never holding more than the bound as Python
objects, and commits the parts as one Iceberg commit (the last change of each key wins, across
parts); `dblog run` killed -9 while spilling it and while committing it, then restarted, ends
with exactly the source's rows, and the dead runs' staging files and lock files are removed
(issue 36, item 11: by their free lock, not their pid)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from support.harness import EngineProcess, config_data, spark_settings

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.demo.verify import source_rows
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.iceberg import merge
from dblog.sinks.iceberg.sink import SparkIcebergSink, read_target

pytestmark = pytest.mark.timeout(900)

SPILLED = "t-*/*-s*.parquet"  # a spilled part, in its table's directory of the staging area (staging.py)


def _change(table, op, key, after, gtid, pos, before_key=None):
    source = SourceInfo(gtid=gtid, file="binlog.000001", pos=pos, row=0, server_id=1)
    before = {"id": (before_key or key)[0], "v": "old"} if op in ("u", "d") else None
    return RowChange(table, op, key, before, after, source, before_key)


def _transaction(table: TableId, gtid: str, start_pos: int, seed: int, keys: int, changes: int,
                 live: set) -> list[RowChange]:
    """Random inserts, updates, deletes and key changes over `keys` keys (`live`: those the table
    holds), all in one transaction."""
    rng = random.Random(seed)
    live = set(live)
    out = []
    for index in range(changes):
        pos = start_pos + index
        key = rng.randrange(1, keys)
        roll = rng.random()
        if key not in live:
            out.append(_change(table, "c", (key,), {"id": key, "v": f"c{index}"}, gtid, pos))
            live.add(key)
        elif roll < 0.2:
            out.append(_change(table, "d", (key,), None, gtid, pos))
            live.discard(key)
        elif roll < 0.3:
            new = rng.randrange(keys, 2 * keys)
            if new in live:
                continue
            out.append(_change(table, "u", (new,), {"id": new, "v": f"k{index}"}, gtid, pos, before_key=(key,)))
            live.discard(key)
            live.add(new)
        else:
            out.append(_change(table, "u", (key,), {"id": key, "v": f"u{index}"}, gtid, pos))
    return out


def _apply(model: dict, changes: list[RowChange]) -> None:
    for change in changes:
        if change.before_key is not None:
            model.pop(change.before_key, None)
        if change.op == "d":
            model.pop(change.key, None)
        else:
            model[change.key] = change.after


def test_a_transaction_past_the_buffer_bound_is_spilled_and_committed_once(mariadb, database, spark, monkeypatch):
    monkeypatch.setattr(merge, "SPILL_SLICE_ROWS", 64)  # parts of 150–300 changes: several row groups each
    mariadb.execute(f"CREATE TABLE `{database}`.kv (id INT PRIMARY KEY, v VARCHAR(10))")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "kv")
    bound = 300
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", max_buffer_rows=bound, changelog=True)
    rows = lambda: read_target(spark, sink.target_name(table), reader.schemas.schema(table))  # noqa: E731
    spill_root = Path(sink.staging._root)
    model: dict = {}

    # Ascending inserts: parts with disjoint keys, into a new table: appended, in one commit.
    inserts = [_change(table, "c", (k,), {"id": k, "v": f"i{k}"}, "0-1-1", 100 + k) for k in range(1, 2001)]
    for start in range(0, len(inserts), 50):  # as the engine writes them: an event's rows at a time
        sink.write(inserts[start:start + 50])
        assert sum(len(target.pending) for target in sink._targets.values()) <= bound
        assert sum(len(target.changelog.pending) for target in sink._targets.values()) <= bound
    assert sink._writes.spilled_parts >= 6
    assert sink.pending_rows == 2000
    assert list(spill_root.glob(SPILLED))
    sink.flush(Offsets("mariadb", GtidSet.parse("0-1-1", "mariadb")))
    _apply(model, inserts)
    assert rows() == model
    assert sink.appended_batches == 1
    assert not list(spill_root.glob(SPILLED))  # released after the commit
    snapshots = spark.sql(f"SELECT summary FROM {sink.target_name(table)}.snapshots").collect()
    assert len(snapshots) == 1 and snapshots[0].summary["dblog.position"] == "0-1-1"

    # Updates, deletes and key changes of keys in earlier parts: the last change per key wins.
    changes = _transaction(table, "0-1-2", 10_000, seed=7, keys=2500, changes=4000,
                           live={key for key, in model})
    parts = sink._writes.spilled_parts
    for start in range(0, len(changes), 37):
        sink.write(changes[start:start + 37])
        assert sum(len(target.pending) for target in sink._targets.values()) <= bound
        assert sum(len(target.changelog.pending) for target in sink._targets.values()) <= bound
    assert sink._writes.spilled_parts - parts >= 5
    sink.flush(Offsets("mariadb", GtidSet.parse("0-1-2", "mariadb")))
    _apply(model, changes)
    assert rows() == model
    snapshots = spark.sql(f"SELECT summary FROM {sink.target_name(table)}.snapshots").collect()
    assert len(snapshots) == 2  # one commit for the whole transaction
    # every change once in the changelog, each in binlog order of its transaction
    logged = spark.sql(f"SELECT op, binlog_pos, after FROM {sink.target_name(table)[:-1]}_changelog`").collect()
    assert sorted((row.binlog_pos, row.op) for row in logged) == sorted((c.source.pos, c.op) for c in inserts + changes)

    # A restarted sink drops the replayed transaction: nothing pending, nothing spilled.
    restarted = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", max_buffer_rows=bound,
                                 changelog=True)
    restarted.write(inserts + changes)
    assert restarted.pending_rows == 0 and restarted._writes.spilled_parts == 0
    assert restarted.pending_tables() == []
    restarted.close()
    sink.close()
    reader.close()


def test_rows_of_large_values_spill_on_bytes_before_the_row_bound(mariadb, database, spark):
    """`iceberg.max_buffer_bytes`: 40 rows of 100 kB values (binlog size, `RowChange.size`) fill
    a 1 MB bound long before the 100,000-row one; the sink spills, holds at most the bound, and
    the transaction lands whole in one commit."""
    mariadb.execute(f"CREATE TABLE `{database}`.blobs (id INT PRIMARY KEY, v LONGTEXT)")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "blobs")
    bound = 1_000_000
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", max_buffer_bytes=bound)
    changes = [RowChange(table, "c", (k,), None, {"id": k, "v": f"{k:06d}" + "x" * 99_994},
                         SourceInfo(gtid="0-1-1", file="binlog.000001", pos=100 + k, row=0, server_id=1), size=100_050)
               for k in range(1, 41)]
    for change in changes:
        sink.write([change])
        held = sum(target.pending_bytes for target in sink._targets.values())
        assert held < bound
    assert sink._writes.spilled_parts == 4  # each time 10 rows reached the bound
    sink.flush(Offsets("mariadb", GtidSet.parse("0-1-1", "mariadb")))
    assert rows_of(spark, sink, reader, table) == {(c.key): c.after for c in changes}
    assert len(spark.sql(f"SELECT * FROM {sink.target_name(table)}.snapshots").collect()) == 1
    sink.close()
    reader.close()


def rows_of(spark, sink, reader, table):
    return read_target(spark, sink.target_name(table), reader.schemas.schema(table))


def _spill_files(staging: Path) -> list[Path]:
    return list(staging.glob(SPILLED))


def _files_of_runs(staging: Path) -> set[str]:
    """The staging files of the sinks' runs: Parquet files in the tables' directories, lock files."""
    return ({str(path.relative_to(staging)) for path in staging.glob("t-*/*.parquet")}
            | {path.name for path in staging.glob("run-*.lock")})


def _merge_in_progress(table_dir: Path) -> bool:
    """Data or delete files newer than the table's newest metadata: a commit is writing."""
    metadata = list((table_dir / "metadata").glob("*.metadata.json"))
    if not metadata:
        return False
    newest = max(path.stat().st_mtime for path in metadata)
    return any(path.stat().st_mtime > newest for path in (table_dir / "data").glob("*.parquet"))


def test_kill_9_while_a_large_transaction_is_spilled_and_while_it_commits(mariadb, database, tmp_path, spark):
    mariadb.execute(f"CREATE TABLE `{database}`.big (id INT PRIMARY KEY, grp INT NOT NULL, note VARCHAR(80))")
    mariadb.execute(f"INSERT INTO `{database}`.big SELECT seq, seq % 7, 'before' FROM `{database}`.seq_1_to_500")
    mariadb.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                    "data TEXT NULL)")
    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    staging = Path(warehouse + "-staging")
    data = config_data(mariadb, database, tmp_path, sink={"type": "iceberg"},
                       offsets={"commit_interval_seconds": 0.3}, spark=spark_settings(spark),
                       iceberg={"max_buffer_rows": 2000})
    table_dir = Path(warehouse) / database / "big"
    engine = EngineProcess(data, tmp_path)
    before_runs = _files_of_runs(staging)  # of other tests' sinks in this session
    engine.start()
    # the initial snapshot of the 500 rows is committed: the engine streams
    engine.wait_until(lambda o: not o.snapshot.get("queue") and o.snapshot.get("completed_tables"), timeout=400)
    before = _spill_files(staging)
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute("INSERT INTO big SELECT seq, seq % 7, REPEAT('x', 40) FROM seq_501_to_20000")
        cursor.execute("UPDATE big SET note = CONCAT('u', id) WHERE id % 3 = 0")  # keys of earlier parts
        cursor.execute("DELETE FROM big WHERE id % 10 = 0")
        cursor.execute("UPDATE big SET id = id + 100000 WHERE id % 17 = 1 AND id < 5000")  # key changes
        cursor.execute("INSERT INTO big SELECT seq * 10, 9, 'again' FROM seq_1_to_500")  # deleted keys again
        cursor.execute("COMMIT")
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    killed = []
    try:
        # 1. while the transaction is read and spilled (the offsets still before it)
        engine.eventually(lambda: len(_spill_files(staging)) >= len(before) + 3, 240, interval=0.01,
                          message="spilled parts")
        engine.kill()
        killed.append(("spilling", _files_of_runs(staging) - before_runs))
        assert not target.issubset(engine.offsets().position)
        # 2. while its commit writes the table (spilled again by the restarted engine)
        engine.start()
        engine.eventually(lambda: _merge_in_progress(table_dir) and _spill_files(staging), 300, interval=0.01,
                          message="the transaction's commit")
        time.sleep(0.05)
        engine.kill()
        killed.append(("committing", _files_of_runs(staging) - before_runs))
    finally:
        engine.kill()
    engine.start()
    engine.wait_until(lambda o: target.issubset(o.position), timeout=400)
    engine.terminate()
    # the killed runs' staging files (spilled parts, batch files) and lock files are gone, removed
    # by the next start: no process holds their lock any more
    left = _files_of_runs(staging)
    for when, files in killed:
        assert files and not files & left, (when, files & left)
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "big")
    name = f"`lake`.`{database}`.`big`"
    spark.sql(f"REFRESH TABLE {name}")
    got = read_target(spark, name, reader.schemas.schema(table))  # raises on a key seen twice
    expected = source_rows(reader, table)
    assert len(expected) > 18_000
    assert got == expected
    reader.close()
