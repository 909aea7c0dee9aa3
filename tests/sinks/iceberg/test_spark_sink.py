"""The Spark sink against a real Spark session with Iceberg and a real MariaDB: every mapped
type round-trips; snapshots under concurrent writes land exactly (composite key, routed shards);
a replayed batch changes nothing; kill -9 before, during and after Iceberg commits loses and
duplicates nothing."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from support.harness import (
    EngineProcess,
    EngineThread,
    config_data,
    iceberg_config,
    position_taken,
    snapshot_under_writes,
    spark_settings,
)

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.demo.verify import source_rows
from dblog.demo.workload import tables
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.iceberg.sink import SinkError, SparkIcebergSink, read_target
from dblog.sinks.iceberg.types import spark_type

pytestmark = pytest.mark.timeout(900)

ALL_TYPES = """
CREATE TABLE {db}.all_types (
  id INT NOT NULL, k2 VARCHAR(20) NOT NULL,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, iu INT UNSIGNED, bi BIGINT,
  bu BIGINT UNSIGNED, de DECIMAL(12,3), dbig DECIMAL(65,10), f FLOAT, d DOUBLE,
  da DATE, dt DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL, tm TIME(2), y YEAR,
  c CHAR(5), vc VARCHAR(50), tx TEXT, lt LONGTEXT, js JSON, en ENUM('a','b'), st SET('x','y','z'),
  bn BINARY(4), vb VARBINARY(10), bl BLOB, mb MEDIUMBLOB, b1 BIT(1), b5 BIT(5), b64 BIT(64),
  u UUID, ip INET6, i4 INET4, g GEOMETRY,
  PRIMARY KEY (id, k2)
) CHARACTER SET utf8mb4
"""

ROWS = [
    "(1, 'a', -128, 255, 65535, -8388608, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, "
    "'-12345.678', '12345678901234567890.0123456789', 1.5, 2.25, '2026-11-22', '2026-11-22 10:11:12.123456', "
    "'2026-01-01 00:00:00', '2026-11-22 10:11:12.123', '-12:34:56.78', 2026, 'abc', 'héllo ☕', 'text 🚚', "
    "REPEAT('long ', 1000), '{\"a\": [1, 2]}', 'b', 'x,z', x'0102', x'00ff', x'deadbeef', x'00010203', b'1', b'10101', "
    "b'1111111111111111111111111111111111111111111111111111111111111111', "
    "'123e4567-e89b-12d3-a456-426614174000', '2001:db8::1', '10.0.0.1', ST_GeomFromText('POINT(1 2)'))",
    "(2, 'b', " + ", ".join(["NULL"] * 36) + ")",
]



def test_type_mapping_round_trips_every_type(mariadb, database, tmp_path, spark):
    mariadb.execute(ALL_TYPES.format(db=f"`{database}`"))
    for row in ROWS:
        mariadb.execute(f"INSERT INTO `{database}`.all_types VALUES {row}")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "all_types")
    schema = reader.schemas.schema(table)
    mapped = {c.name: spark_type(c) for c in schema.columns}
    assert mapped["bu"] == "DECIMAL(20,0)" and mapped["dt"] == "TIMESTAMP_NTZ" and mapped["ts"] == "TIMESTAMP"
    assert mapped["dbig"] == "STRING" and mapped["bl"] == "BINARY" and mapped["b64"] == "DECIMAL(20,0)"
    config = iceberg_config(mariadb, database, tmp_path, spark, source={"include": [f"{database}\\.all_types"]})
    engine = EngineThread(config)
    sink = engine.engine.sink
    engine.wait_for("COMPLETED")
    mariadb.execute(f"UPDATE `{database}`.all_types SET vc = 'changed', bn = x'00' WHERE id = 2")
    mariadb.execute(f"INSERT INTO `{database}`.all_types (id, k2, ts) VALUES (3, 'c', '2030-01-01 00:00:00.5')")
    engine.until_caught_up()
    expected = source_rows(reader, table)
    got = read_target(spark, sink.target_name(table), schema)
    reader.close()
    assert got == expected


def test_snapshot_under_concurrent_writes_lands_exactly_in_iceberg(mariadb, database, tmp_path, spark, loaded,
                                                                   write_load):
    rows = 10_000
    loaded(rows)
    reader = SourceConnection(lambda: mariadb.connect())
    config = iceberg_config(mariadb, database, tmp_path, spark, snapshot={"chunk_size": 1000},
                            offsets={"commit_interval_seconds": 2.0})
    # Throttled, as in the engine's crash test: each Iceberg commit is a MERGE of a second or two
    # on this 2-core machine, and a window closes only once the reader has caught up with it.
    workload = write_load(rows, writers=4, seed=21, rate=100)
    engine, _ = snapshot_under_writes(workload, lambda: EngineThread(config), timeout=600, catch_up_timeout=600)
    sink = engine.engine.sink
    for table in tables(database):
        schema = reader.schemas.schema(table)
        expected = source_rows(reader, table)
        got = read_target(spark, sink.target_name(table), schema)  # raises on a duplicate key
        assert got.keys() == expected.keys()
        assert got == expected
    reader.close()


def test_routed_shards_land_in_one_table_without_key_collisions(mariadb, tmp_path, spark, loaded, write_load):
    shards = [f"shard_{random.randrange(10**9)}_{n}" for n in (1, 2)]
    rows = 3_000
    for number, shard in enumerate(shards, start=1):
        mariadb.execute(f"CREATE DATABASE `{shard}`")
        loaded(rows, seed=number, database=shard)  # same keys in both shards, other values
    reader = SourceConnection(lambda: mariadb.connect())
    target_db = f"merged_{random.randrange(10**9)}"
    routes = [{"tables": [r"shard_\d+_\d+\.orders"], "target": f"{target_db}.orders"}]
    config = iceberg_config(mariadb, shards[0], tmp_path, spark, iceberg={"routes": routes},
                            source={"include": [rf"{s}\.orders" for s in shards]},
                            signals={"table": f"{shards[0]}.dblog_signal"})
    loads = [write_load(rows, database=shard, writers=2, seed=5 + n, rate=100) for n, shard in enumerate(shards)]
    try:
        engine = EngineThread(config)
        sink = engine.engine.sink
        engine.wait_for("COMPLETED", timeout=600)
    finally:
        for workload in loads:
            workload.stop()
    engine.until_caught_up(timeout=600)
    total = 0
    for shard in shards:
        table = TableId(shard, "orders")
        expected = source_rows(reader, table)
        got = read_target(spark, sink.target_name(table), reader.schemas.schema(table), sharded_source=table)
        assert got == expected
        total += len(expected)
    assert sink.target_name(TableId(shards[0], "orders")) == f"`lake`.`{target_db}`.`orders`"
    assert spark.sql(f"SELECT COUNT(*) FROM lake.{target_db}.orders").collect()[0][0] == total
    reader.close()


def _change(table, op, key, after, gtid, pos, before_key=None):
    source = SourceInfo(gtid=gtid, file="binlog.000001", pos=pos, row=0, server_id=1)
    before = {"id": (before_key or key)[0], "v": "old"} if op in ("u", "d") else None
    return RowChange(table, op, key, before, after, source, before_key)


def _offsets(position: str) -> Offsets:
    return Offsets("mariadb", GtidSet.parse(position, "mariadb"))


def test_a_created_table_is_format_3_keyed_by_the_sources_key_in_one_commit(mariadb, database, spark):
    """Created through the catalog's Java API: format v3, merge-on-read, the user's table
    properties, the source's key as required identifier fields (composite, and a routed shard
    table's with its source columns first), created in one metadata commit (no ALTER after), by
    the target's first commit."""
    from dblog.sinks.iceberg.routing import RouteRule, Router
    from dblog.sinks.iceberg.session import iceberg_table

    mariadb.execute(f"CREATE TABLE `{database}`.pair (a INT NOT NULL, b VARCHAR(8) NOT NULL, v TEXT, PRIMARY KEY (b, a))")
    mariadb.execute(f"CREATE TABLE `{database}`.shard_1 (id INT PRIMARY KEY, v INT)")
    reader = SourceConnection(lambda: mariadb.connect())
    router = Router([RouteRule(tables=[rf"{database}\.shard_\d+"], target=f"{database}.shards")])
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", router=router,
                            table_properties={"commit.retry.num-retries": "7"})
    for source, key in ((TableId(database, "pair"), ("b", "a")), (TableId(database, "shard_1"),
                                                                  ("_source_db", "_source_table", "id"))):
        qualified = sink.target_name(source)
        target = sink._target(sink.router.route(source).target, source, sink.router.route(source).sharded)
        assert not sink._tables.exists(target.table)  # created by its first commit, off the loop's thread
        sink._tables.create(target)
        table = iceberg_table(spark, qualified.replace("`", ""))
        metadata = table.operations().current()
        assert metadata.formatVersion() == 3
        assert set(table.schema().identifierFieldNames()) == set(key)
        assert all(table.schema().findField(name).isRequired() for name in key)
        properties = dict(table.properties())
        assert properties["commit.retry.num-retries"] == "7" and properties["write.merge.mode"] == "merge-on-read"
        assert metadata.previousFiles().size() == 0  # one metadata file: created in one commit
    sink.close()
    reader.close()


def test_replays_change_nothing_and_a_restarted_sink_skips_what_a_table_holds(mariadb, database, spark):
    mariadb.execute(f"CREATE TABLE `{database}`.kv (id INT PRIMARY KEY, v VARCHAR(10))")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "kv")
    rows = lambda: read_target(spark, sink.target_name(table), reader.schemas.schema(table))  # noqa: E731
    first = [
        _change(table, "c", (1,), {"id": 1, "v": "a"}, "0-1-1", 100),
        _change(table, "c", (2,), {"id": 2, "v": "b"}, "0-1-2", 200),
        _change(table, "u", (3,), {"id": 3, "v": "b"}, "0-1-3", 300, before_key=(2,)),  # key change
        _change(table, "c", (4,), {"id": 4, "v": "d"}, "0-1-4", 400),
        _change(table, "d", (4,), None, "0-1-5", 500),
    ]
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb")
    sink.write(first)
    sink.flush(_offsets("0-1-5"))
    assert rows() == {(1,): {"id": 1, "v": "a"}, (3,): {"id": 3, "v": "b"}}
    snapshots = spark.sql(f"SELECT summary FROM {sink.target_name(table)}.snapshots").collect()
    assert snapshots[-1].summary["dblog.position"] == "0-1-5"

    # The same batch MERGEd again (sequence guard): nothing changes, no insert of deleted key 4.
    sink._targets[sink.router.route(table).target].committed = None
    sink.write(first)
    sink.flush(None)
    assert rows() == {(1,): {"id": 1, "v": "a"}, (3,): {"id": 3, "v": "b"}}

    # A restarted sink learns the table's committed position: replayed changes are dropped,
    # the first new one applies, and a snapshot read always applies.
    restarted = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb")
    restarted.write(first)
    assert restarted.pending_rows == 0
    assert restarted.committed_position(table) == GtidSet.parse("0-1-5", "mariadb")
    restarted.write([
        _change(table, "c", (4,), {"id": 4, "v": "again"}, "0-1-6", 600),
        RowChange(table, "r", (1,), None, {"id": 1, "v": "read"}, SourceInfo(snapshot=True)),
    ])
    restarted.flush(_offsets("0-1-6"))
    assert rows() == {(1,): {"id": 1, "v": "read"}, (3,): {"id": 3, "v": "b"}, (4,): {"id": 4, "v": "again"}}

    # A change at an older binlog position whose transaction the table does not hold: the binlog
    # was reset or the server changed. Refused loudly instead of being ignored by the guard.
    with pytest.raises(SinkError, match="binlog was reset"):
        restarted.write([_change(table, "u", (1,), {"id": 1, "v": "x"}, "1-1-1", 50)])
    reader.close()


def _metadata_files(table_dir: Path) -> int:
    return len(list((table_dir / "metadata").glob("*.metadata.json")))


def _merge_in_progress(table_dir: Path) -> bool:
    """Data or delete files newer than the table's newest metadata: a MERGE is writing."""
    metadata = list((table_dir / "metadata").glob("*.metadata.json"))
    if not metadata:
        return False
    newest = max(path.stat().st_mtime for path in metadata)
    return any(path.stat().st_mtime > newest for path in (table_dir / "data").glob("*.parquet"))


def _wait(predicate, engine: EngineProcess, timeout: float = 240) -> None:
    engine.eventually(predicate, timeout, interval=0.01, message="the kill point")


KILL_POINTS = ["after_commit", "during_merge", "after_offsets"]


def test_kill_9_before_during_and_after_iceberg_commits(mariadb, database, tmp_path, spark, loaded, write_load):
    """One `kill -9` at each point around an Iceberg commit, each restart recovering the last."""
    _kill_9_around_iceberg_commits(KILL_POINTS, mariadb, database, tmp_path, spark, loaded, write_load)


@pytest.mark.slow
def test_kill_9_twice_at_each_point_around_iceberg_commits(mariadb, database, tmp_path, spark, loaded, write_load):
    """The test above with every point twice (six kills, each restart recovering a killed
    recovery): the scheduled slow tier (tests/README.md)."""
    _kill_9_around_iceberg_commits(KILL_POINTS * 2, mariadb, database, tmp_path, spark, loaded, write_load)


def test_dblog_run_on_a_standalone_cluster_killed_during_a_merge(mariadb, database, tmp_path, spark, loaded,
                                                                  write_load):
    """The test above with one kill, while executors write a MERGE's files, for the default
    run's cluster subset (tests/ops/test_spark_cluster.py; each `dblog run` start costs a Spark
    application, beside the test's session). On local[N] the kill test above covers it."""
    if not spark.sparkContext.master.startswith("spark://"):
        pytest.skip("the cluster variant (--spark-master=cluster); on local[N] the kill test above covers it")
    _kill_9_around_iceberg_commits(["during_merge"], mariadb, database, tmp_path, spark, loaded, write_load)


def _kill_9_around_iceberg_commits(points, mariadb, database, tmp_path, spark, loaded, write_load):
    rows = 8_000
    rng = random.Random(4)
    loaded(rows)
    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 400},
                       sink={"type": "iceberg"}, offsets={"commit_interval_seconds": 0.3},
                       spark=spark_settings(spark))
    orders_dir = Path(warehouse) / database / "orders"
    offsets_file = Path(data["offsets"]["path"])
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=2, seed=9, rate=100)
    kills = []
    try:
        for point in points:
            engine.start()
            _wait(lambda: orders_dir.exists() and _metadata_files(orders_dir) > 0, engine)
            if point == "after_commit":  # an Iceberg commit landed; the offsets file not yet saved
                seen = _metadata_files(orders_dir)
                _wait(lambda: _metadata_files(orders_dir) > seen, engine)
            elif point == "during_merge":
                _wait(lambda: _merge_in_progress(orders_dir), engine)
            else:
                saved = offsets_file.stat().st_mtime_ns if offsets_file.exists() else 0
                _wait(lambda: offsets_file.exists() and offsets_file.stat().st_mtime_ns > saved, engine)
            time.sleep(rng.uniform(0, 0.05))
            engine.kill()
            kills.append(point)
    finally:
        workload.stop()
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: not o.snapshot.get("queue") and target.issubset(o.position), timeout=400)
    engine.terminate()
    assert kills == points
    reader = SourceConnection(lambda: mariadb.connect())
    for table in tables(database):
        name = f"`lake`.`{database}`.`{table.table}`"
        spark.sql(f"REFRESH TABLE {name}")
        got = read_target(spark, name, reader.schemas.schema(table))  # raises on a key seen twice
        assert got == source_rows(reader, table)
    reader.close()


def test_add_column_truncate_and_an_incompatible_type_change_while_streaming(mariadb, database, tmp_path, spark):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(20), qty SMALLINT)")
    mariadb.execute(f"CREATE TABLE {db}.scratch (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE {db}.kept (id INT PRIMARY KEY, v INT)")
    for table in ("items", "scratch", "kept"):
        mariadb.execute(f"INSERT INTO {db}.{table} VALUES " + ", ".join(
            f"({n}, {n if table != 'items' else repr(f'item {n}')}" + (f", {n})" if table == "items" else ")")
            for n in range(1, 201)))
    reader = SourceConnection(lambda: mariadb.connect())
    routes = [{"tables": [rf"{database}\.kept"], "ignore": ["truncate", "delete"]}]
    config = iceberg_config(mariadb, database, tmp_path, spark, iceberg={"routes": routes})
    engine = EngineThread(config)
    sink = engine.engine.sink
    engine.wait_for("COMPLETED")
    mariadb.execute(f"UPDATE {db}.items SET qty = qty + 1 WHERE id <= 50")
    # ADD COLUMN with a default: the server fills every row without a row event, so the table
    # is snapshotted again; then more changes use the new column.
    mariadb.execute(f"ALTER TABLE {db}.items ADD COLUMN price DECIMAL(8,2) NOT NULL DEFAULT 9.99")
    mariadb.execute(f"UPDATE {db}.items SET price = 1.50 WHERE id = 7")
    mariadb.execute(f"INSERT INTO {db}.items VALUES (500, 'new', 1, 2.25)")
    mariadb.execute(f"ALTER TABLE {db}.items MODIFY qty INT")  # widening: the target follows
    mariadb.execute(f"UPDATE {db}.items SET qty = 100000 WHERE id = 8")
    mariadb.execute(f"TRUNCATE TABLE {db}.scratch")
    mariadb.execute(f"INSERT INTO {db}.scratch VALUES (1, 42)")
    mariadb.execute(f"DELETE FROM {db}.kept WHERE id <= 10")  # deletes and TRUNCATE are ignored by its
    mariadb.execute(f"UPDATE {db}.kept SET v = -1 WHERE id = 20")  # route: the lake keeps the rows,
    mariadb.execute(f"TRUNCATE TABLE {db}.kept")  # updates still apply
    _wait_for_count(engine, "COMPLETED", 2)
    engine.until_caught_up()
    for name in ("items", "scratch"):
        table = TableId(database, name)
        reader.schemas.forget_schema()
        assert read_target(spark, sink.target_name(table), reader.schemas.schema(table)) == source_rows(reader, table), name
    kept = read_target(spark, sink.target_name(TableId(database, "kept")), reader.schemas.schema(TableId(database, "kept")))
    assert len(kept) == 200 and kept[(20,)]["v"] == -1
    columns = {f.name: f.dataType.simpleString() for f in spark.table(sink.target_name(TableId(database, "items"))).schema}
    assert columns["price"] == "decimal(8,2)" and columns["qty"] == "int"

    # A change Iceberg cannot follow (text → binary) stops the engine with the remedy.
    engine = EngineThread(config)
    mariadb.execute(f"ALTER TABLE {db}.items MODIFY name VARBINARY(20)")
    mariadb.execute(f"UPDATE {db}.items SET name = 'x' WHERE id = 9")
    with pytest.raises(SinkError, match="re-snapshot"):
        engine.until_caught_up()
    reader.close()


def test_truncate_drop_and_rename_from_another_database(mariadb, database, tmp_path, spark):
    """Statements run from another default database still name their tables: TRUNCATE empties
    the target, DROP TABLE empties it (the Iceberg table stays), RENAME TABLE empties the old
    name's target and snapshots the new name; the lake then equals the source table by table."""
    from dblog.demo.verify import compare_iceberg_with_source

    db = f"`{database}`"
    for name in ("a", "b", "c"):
        mariadb.execute(f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, v INT NOT NULL)")
        mariadb.execute(f"INSERT INTO {db}.{name} SELECT seq, seq FROM {db}.seq_1_to_100")
    other = f"{database}_other"
    mariadb.execute(f"CREATE DATABASE `{other}`")
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        config = iceberg_config(mariadb, database, tmp_path, spark)
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"USE `{other}`")
            for statement in (f"TRUNCATE {db}.a", f"INSERT INTO {db}.a VALUES (7, -7)", f"DROP TABLE {db}.b",
                              f"RENAME TABLE {db}.c TO {db}.c2", f"UPDATE {db}.c2 SET v = -v WHERE id <= 10"):
                cursor.execute(statement)
        _wait_for_count(engine, "COMPLETED", 2)  # the renamed table's snapshot
        engine.until_caught_up()
        names = [TableId(database, name) for name in ("a", "b", "c", "c2")]
        result = compare_iceberg_with_source(engine.engine.sink, reader, names)
        assert result.equal, result.summary()
        assert result.rows == {f"{database}.a": 1, f"{database}.b": 0, f"{database}.c": 0, f"{database}.c2": 100}
        assert spark.catalog.tableExists(f"lake.{database}.b")  # emptied, not dropped
    finally:
        reader.close()
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`")


def _wait_for_count(engine: EngineThread, notification_type: str, count: int, timeout: float = 300) -> None:
    engine.eventually(lambda: engine.types().count(notification_type) >= count, timeout,
                      message=lambda: f"{notification_type} x{count}; got {engine.types()}")


def test_changelog_table_appends_every_change_once(mariadb, database, spark):
    mariadb.execute(f"CREATE TABLE `{database}`.hist (id INT PRIMARY KEY, v VARCHAR(10))")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "hist")
    changes = [
        RowChange(table, "r", (1,), None, {"id": 1, "v": "read"}, SourceInfo(snapshot=True)),
        _change(table, "c", (2,), {"id": 2, "v": "b"}, "0-1-2", 200),
        _change(table, "u", (3,), {"id": 3, "v": "b"}, "0-1-3", 300, before_key=(2,)),
        _change(table, "d", (1,), None, "0-1-4", 400),
    ]
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", changelog=True)
    sink.write(changes)
    sink.flush(_offsets("0-1-4"))
    history = f"`lake`.`{database}`.`hist_changelog`"
    got = spark.sql(f"SELECT op, before, after, gtid, binlog_pos, snapshot FROM {history} ORDER BY binlog_pos NULLS FIRST").collect()
    assert [(r.op, r.gtid, r.snapshot) for r in got] == [
        ("r", None, True), ("c", "0-1-2", False), ("u", "0-1-3", False), ("d", "0-1-4", False)]
    assert got[2].before == '{"id":2,"v":"old"}' and got[2].after == '{"id":3,"v":"b"}'
    assert read_target(spark, sink.target_name(table), reader.schemas.schema(table)) == {(3,): {"id": 3, "v": "b"}}
    # Restarted after a crash that lost the offsets file's last save: nothing appended twice.
    restarted = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", changelog=True)
    restarted.write(changes[1:] + [_change(table, "c", (5,), {"id": 5, "v": "e"}, "0-1-5", 500)])
    restarted.flush(_offsets("0-1-5"))
    ops = [r.op for r in spark.sql(f"SELECT op FROM {history} ORDER BY binlog_pos NULLS FIRST").collect()]
    assert ops == ["r", "c", "u", "d", "c"]
    summary = spark.sql(f"SELECT summary FROM {history}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0][0]
    assert summary["dblog.position"] == "0-1-5"
    reader.close()


def test_routes_that_would_mix_two_tables_keys_stop_the_engine_before_writing(mariadb, database, tmp_path, spark):
    for name in ("a", "b"):
        mariadb.execute(f"CREATE TABLE `{database}`.{name} (id INT PRIMARY KEY)")
    routes = [{"tables": [rf"{database}\.a"], "target": f"{database}.b"}]  # b keeps its own name
    config = iceberg_config(mariadb, database, tmp_path, spark, iceberg={"routes": routes})
    with pytest.raises(SinkError, match=f"{database}.a and {database}.b would both land"):
        EngineThread(config)


def test_maintenance_compacts_after_commits_and_keeps_the_committed_position(mariadb, database, spark):
    from dblog.sinks.iceberg.maintenance import MaintenancePolicy

    mariadb.execute(f"CREATE TABLE `{database}`.m (id INT PRIMARY KEY, v VARCHAR(10))")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "m")
    policy = MaintenancePolicy(compact_every_commits=5, expire_every_seconds=0)
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", maintenance=policy)
    for n in range(1, 7):
        sink.write([_change(table, "c", (n,), {"id": n, "v": str(n)}, f"0-1-{n}", n * 100)])
        sink.flush(_offsets(f"0-1-{n}"))
        sink.after_commit()
    name = sink.target_name(table)
    snapshots = spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at").collect()
    assert "replace" in [s.operation for s in snapshots], [s.operation for s in snapshots]
    data_files = spark.sql(f"SELECT COUNT(*) FROM {name}.files").collect()[0][0]
    assert data_files < 5
    assert len(read_target(spark, name, reader.schemas.schema(table))) == 6
    # A restarted sink still finds the position in the newest snapshot (compaction carried it).
    restarted = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb")
    restarted.write([_change(table, "c", (1,), {"id": 1, "v": "dup"}, "0-1-1", 100)])
    assert restarted.pending_rows == 0 and restarted.committed_position(table) == GtidSet.parse("0-1-6", "mariadb")
    reader.close()


def test_a_backlog_across_alters_lands_by_the_definitions_of_its_time(mariadb, database, tmp_path, spark):
    """Rows logged before a DROP COLUMN, a widening and a decimal precision change, read after
    the server applied them (dblog stopped meanwhile): the target is created by the rows' own
    definition (the dropped column included, with its value), follows each ALTER as the stream
    reaches it, and ends equal to the table."""
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(20), qty SMALLINT, "
                    "amount DECIMAL(8,2), spent TIME(3))")
    config = iceberg_config(mariadb, database, tmp_path, spark, snapshot={"startup": "never"},
                            source={"include": [rf"{database}\.items"]})
    position_taken(config)
    for statement in (f"INSERT INTO {db}.items VALUES (1, 'one', 1, 1.25, '01:02:03.5'), (2, 'two', 2, 2.5, NULL)",
                      f"ALTER TABLE {db}.items DROP COLUMN spent",
                      f"UPDATE {db}.items SET qty = 3 WHERE id = 1",
                      f"ALTER TABLE {db}.items MODIFY qty INT, MODIFY amount DECIMAL(10,2)",
                      f"INSERT INTO {db}.items VALUES (3, 'three', 100000, 12345678.5)"):
        mariadb.execute(statement)
    engine = EngineThread(config)
    engine.until_caught_up()
    sink = engine.engine.sink
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        table = TableId(database, "items")
        assert read_target(spark, sink.target_name(table), reader.schemas.schema(table)) == source_rows(reader, table)
    finally:
        reader.close()
    columns = {f.name: f.dataType.simpleString() for f in spark.table(sink.target_name(table)).schema}
    assert columns["qty"] == "int" and columns["amount"] == "decimal(10,2)"
    # As when dblog streams along: the target got the column the rows had, which a DROP COLUMN
    # leaves in the lake (typed by the server's definition instead, row 1's value was lost).
    assert columns["spent"] == "string"
    spent = {row["id"]: row["spent"] for row in spark.table(sink.target_name(table)).collect()}
    assert spent == {1: "01:02:03.500", 2: None, 3: None}
