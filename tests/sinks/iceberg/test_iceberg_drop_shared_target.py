"""One statement dropping several source tables routed into one shared ("sharded") Iceberg
target: `DROP TABLE a, b`, `DROP DATABASE shop` (one drop per known table, all with the
statement's GTID) and `RENAME TABLE a TO x, b TO y`. Each dropped table's rows leave the target, the
others' stay; a crash between two of the statement's DELETEs is replayed without failing and
without leaving rows behind; a replay of the statement after later writes deletes none of
them. Real MariaDB, real Spark + Iceberg."""

from __future__ import annotations

import random

import pytest
from support.harness import EngineThread, iceberg_config

from dblog.core.events import TableId
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL
from dblog.sinks.iceberg.maintenance import IcebergMaintenance, MaintenancePolicy
from dblog.sinks.iceberg.sink import SparkIcebergSink

pytestmark = pytest.mark.timeout(900)

ROWS = 5


def create_tables(mariadb, db: str, names, rows: int = ROWS, first: int = 1) -> None:
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
    for name in names:
        mariadb.execute(f"CREATE TABLE `{db}`.`{name}` (id INT PRIMARY KEY, v VARCHAR(20))")
        insert_rows(mariadb, db, name, rows, first)


def insert_rows(mariadb, db: str, name: str, rows: int = ROWS, first: int = 1) -> None:
    mariadb.execute(f"INSERT INTO `{db}`.`{name}` SELECT seq, CONCAT('{name}', seq) "
                    f"FROM mysql.seq_{first}_to_{first + rows - 1}")


def target_rows(spark, qualified: str) -> set[tuple[str, str, int]]:
    spark.sql(f"REFRESH TABLE {qualified}")
    return {(r[0], r[1], r[2]) for r in
            spark.sql(f"SELECT _source_db, _source_table, id FROM {qualified}").collect()}


def current_snapshot(spark, qualified: str) -> dict[str, str]:
    """The summary of the table's current snapshot, and its id as `snapshot-id`."""
    jvm = spark.sparkContext._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)
    table.refresh()
    snapshot = table.currentSnapshot()
    return {**{str(k): str(v) for k, v in dict(snapshot.summary()).items()}, "snapshot-id": str(snapshot.snapshotId())}


def rows_of(db: str, name: str, rows: int = ROWS, first: int = 1) -> set[tuple[str, str, int]]:
    return {(db, name, key) for key in range(first, first + rows)}


@pytest.fixture
def shared(mariadb, database, tmp_path, spark):
    """`database` holds a, b, c and the signal table; `<database>_shop` holds p, q; all five
    routed into one Iceberg table. Yields (config, shop, qualified target)."""
    shop = f"{database}_shop"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    create_tables(mariadb, database, "abc")
    create_tables(mariadb, shop, "pq")
    target_db = f"merged_{random.randrange(10**9)}"
    tables = [rf"{database}\.[abcxy]", rf"{shop}\.[pq]"]
    config = iceberg_config(mariadb, database, tmp_path, spark, source={"include": tables},
                            iceberg={"routes": [{"tables": tables, "target": f"{target_db}.everything"}]})
    try:
        yield config, shop, f"`lake`.`{target_db}`.`everything`"
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{shop}`")


def all_rows(database: str, shop: str) -> set:
    return set().union(*(rows_of(database, n) for n in "abc"), *(rows_of(shop, n) for n in "pq"))


def test_drop_table_of_two_and_drop_database_delete_every_dropped_tables_rows(mariadb, database, spark, shared):
    config, shop, qualified = shared
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED")
        insert_rows(mariadb, database, "a", first=100, rows=2)  # streamed rows too, not only read ones
        insert_rows(mariadb, shop, "q", first=100, rows=2)
        engine.until_caught_up()
        assert target_rows(spark, qualified) == (all_rows(database, shop) | rows_of(database, "a", 2, 100)
                                                 | rows_of(shop, "q", 2, 100))
        engine = EngineThread(config)
        mariadb.execute(f"DROP TABLE `{database}`.a, `{database}`.b")
        mariadb.execute(f"DROP DATABASE `{shop}`")
        insert_rows(mariadb, database, "c", first=100, rows=1)
        engine.until_caught_up()
    finally:
        engine.stop()
    got = target_rows(spark, qualified)
    assert {row for row in got if row[:2] != (database, "c")} == set(), "rows of dropped tables stayed"
    assert got == rows_of(database, "c") | rows_of(database, "c", 1, 100)


def test_rename_of_two_tables_moves_both(mariadb, database, spark, shared):
    """RENAME TABLE a TO x, b TO y (one GTID): both old names' rows leave, the new names are read."""
    config, shop, qualified = shared
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED")
        mariadb.execute(f"RENAME TABLE `{database}`.a TO `{database}`.x, `{database}`.b TO `{database}`.y")
        engine.until_caught_up()
    finally:
        engine.stop()
    got = target_rows(spark, qualified)
    assert got == (rows_of(database, "x") | rows_of(database, "y") | rows_of(database, "c")
                   | rows_of(shop, "p") | rows_of(shop, "q"))


class Crash(Exception):
    pass


def test_a_crash_between_two_deletes_of_one_statement_is_replayed(mariadb, database, spark, shared, monkeypatch):
    """The engine dies after the DROP's first DELETE committed and before the second: the
    restarted engine replays the statement from its offsets; the table already holds the GTID,
    yet the second table's rows go, the replay fails nothing, and later writes stay. Then the
    statement replayed once more on the finished table (offsets behind it) deletes nothing."""
    config, shop, qualified = shared
    first = EngineThread(config)
    try:
        first.wait_for("COMPLETED")
        first.until_caught_up()
    finally:
        first.stop()
    # Three more commits (rows of the tables the DROP removes), so that the table has manifests
    # worth rewriting and the maintenance below commits a snapshot of its own.
    extra = set()
    for name, start in (("a", 100), ("b", 100), ("a", 110)):
        insert_rows(mariadb, database, name, first=start, rows=2)
        extra |= rows_of(database, name, 2, start)
        streamer = EngineThread(config)
        try:
            streamer.until_caught_up()
        finally:
            streamer.stop()
    assert target_rows(spark, qualified) == all_rows(database, shop) | extra

    deletes: list[TableId] = []
    real_delete = SparkIcebergSink._delete_rows_of

    def crashing(self, source, event, change, position):
        if deletes:
            raise Crash(f"killed before the DELETE of {source}")
        deletes.append(source)
        return real_delete(self, source, event, change, position)

    monkeypatch.setattr(SparkIcebergSink, "_delete_rows_of", crashing)
    crashed = EngineThread(config)
    mariadb.execute(f"DROP TABLE `{database}`.a, `{database}`.b")
    with pytest.raises(Crash):
        crashed.until_caught_up()
    crashed.stop()
    assert len(deletes) == 1
    survivor = ({"a", "b"} - {deletes[0].table}).pop()
    assert {row[1] for row in target_rows(spark, qualified) if row[0] == database} == {survivor, "c"}
    monkeypatch.setattr(SparkIcebergSink, "_delete_rows_of", real_delete)
    # maintenance in between (checked at the end): its commit repeats the DELETE's properties
    before = current_snapshot(spark, qualified)
    maintenance = IcebergMaintenance(spark, "lake", MaintenancePolicy()).run(qualified, ["compact"])
    after = current_snapshot(spark, qualified)

    calls = []
    real_schema_changed = SparkIcebergSink.schema_changed

    def recording(self, change, ddl, position):
        calls.append((self, change, ddl, position))
        return real_schema_changed(self, change, ddl, position)

    monkeypatch.setattr(SparkIcebergSink, "schema_changed", recording)
    second = EngineThread(config)
    try:
        # a table of the dropped name again, with rows, written after the DROP
        mariadb.execute(f"CREATE TABLE `{database}`.b (id INT PRIMARY KEY, v VARCHAR(20))")
        insert_rows(mariadb, database, "b", first=200, rows=3)
        second.until_caught_up()
    finally:
        second.stop()
    expected = rows_of(database, "c") | rows_of(shop, "p") | rows_of(shop, "q") | rows_of(database, "b", 3, 200)
    assert target_rows(spark, qualified) == expected

    drop = [call for call in calls if call[2].kind == "drop_table"]
    assert len(drop) == 1, "the DROP was replayed by the restarted engine"
    sink, change, ddl, position = drop[0]
    real_schema_changed(sink, change, ddl, position)  # replayed once more: the table is past it
    assert target_rows(spark, qualified) == expected
    # A DELETE of the statement the lineage keeps no record of (its snapshot expired, say) is
    # not redone either once later writes landed: here c, as if the statement had dropped it.
    sink._delete_rows_of(TableId(database, "c"), "drop", change, position)
    assert target_rows(spark, qualified) == expected

    assert maintenance.ok and maintenance.manifests_rewritten, maintenance.summary()
    assert after["snapshot-id"] != before["snapshot-id"], "maintenance committed"
    deleted = {"dblog.delete-gtid": str(change.gtid), "dblog.delete-source": f"`{database}`.`{deletes[0].table}`"}
    assert before.items() >= deleted.items() and before["dblog.position"] == after["dblog.position"]
    assert maintenance.carried.items() >= deleted.items() and after.items() >= deleted.items()
