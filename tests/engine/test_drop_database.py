"""DROP DATABASE: the statement names no table and the server logs no DROP TABLE for them, yet
every captured table of the database is gone. The output gets, per table the engine knew, the
record a DROP TABLE of it gives; a snapshot of one of them ends as DROP TABLE ends it; the
engine streams on. Pure capture checks, then the real engine on MariaDB (JSON lines, Kafka)."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, make_config, published

from dblog.core.capture import ChangeCapture, ChunkRead, ChunkResult, MaxKeyRead
from dblog.core.events import Notification, SchemaChange, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import GtidWatermarks
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)

A, B, OTHER = TableId("shop", "a"), TableId("shop", "b"), TableId("crm", "c")


def ddl(capture: ChangeCapture, seq: int, sql: str, db: str = "") -> list:
    gtid = Gtid.mariadb(0, 1, seq)
    out = capture.on_event(TransactionStart(gtid))
    out += capture.on_event(SchemaChange(gtid, db, sql))
    return out + capture.on_event(TransactionEnd(gtid))


def reading(*tables: TableId) -> ChangeCapture:
    """A capture whose first table's snapshot is under way with a chunk's window open."""
    progress = SnapshotProgress([TableSnapshot(tables[0], started=True, max_key=(100,))]
                                + [TableSnapshot(table) for table in tables[1:]])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    assert isinstance(read, ChunkRead)
    later = GtidSet.parse("0-1-9", "mariadb")  # the window waits for the binlog to reach 0-1-9
    capture.chunk_read(read, ChunkResult([((k,), {"id": k}) for k in (1, 2, 3)],
                                         GtidWatermarks(capture.position, later)))
    assert capture.window is not None
    return capture


def restarted(out: list) -> list[str]:
    return [n.data["data_collection"] for n in out if isinstance(n, Notification) and n.type == "TABLE_SCAN_RESTARTED"]


@pytest.mark.parametrize("sql", ["DROP DATABASE shop", "DROP SCHEMA IF EXISTS `shop`"])
def test_drop_database_ends_the_snapshot_of_its_table_as_drop_table_does(sql):
    """The window's rows are not emitted (the rows are gone) and the table starts again, to end
    at its max-key read (UNKNOWN_SCHEMA from the loop), exactly as after DROP TABLE shop.a."""
    for statement in (sql, "DROP TABLE shop.a"):
        capture = reading(A, B)
        out = ddl(capture, 5, statement, "crm")
        assert capture.window is None, statement
        assert restarted(out) == ["shop.a"], statement
        assert not [c for c in out if getattr(c, "op", None) == "r"], statement
        assert isinstance(capture.next_read(), MaxKeyRead) and capture.next_read().snapshot.table == A
        assert isinstance(out[-1], SchemaChange)  # the event itself goes on to the sink


def test_drop_database_of_another_database_leaves_the_snapshot_alone():
    """Before, a statement naming no table discarded any open window."""
    capture = reading(A, OTHER)
    out = ddl(capture, 5, "DROP DATABASE crm", "crm")
    assert capture.window is not None and restarted(out) == []
    assert [entry.table for entry in capture.progress.queue] == [A, OTHER]


# --- the real engine -------------------------------------------------------------------------


def shop_database(mariadb, database: str, tables=("a", "b", "c"), rows: int = 50) -> str:
    shop = f"{database}_shop"
    mariadb.execute(f"CREATE DATABASE `{shop}`")
    for name in tables:
        mariadb.execute(f"CREATE TABLE `{shop}`.`{name}` (id INT PRIMARY KEY, v VARCHAR(20))")
        mariadb.execute(f"INSERT INTO `{shop}`.`{name}` SELECT seq, CONCAT('v', seq) FROM mysql.seq_1_to_{rows}")
    return shop


def drop_records(records: list[dict]) -> list[dict]:
    return [r for r in records if "tableChanges" in r["value"]]


def comparable(record: dict) -> dict:
    """A schema-change record without what differs between two statements (text, GTID, position,
    times: the source's ts_us and ts_ns as well as ts_ms)."""
    value = dict(record["value"])
    value.pop("ddl"), value.pop("ts_ms")
    differing = ("gtid", "file", "pos", "ts_ms", "ts_us", "ts_ns")
    value["source"] = {k: v for k, v in value["source"].items() if k not in differing}
    return {"key": record["key"], "value": value}


@pytest.mark.parametrize("statement", ["DROP DATABASE `{shop}`", "DROP SCHEMA IF EXISTS {shop}"])
def test_drop_database_writes_one_drop_record_per_captured_table(mariadb, database, tmp_path, statement):
    """Three captured tables, one of them being snapshotted (paused mid-table), one excluded: the
    DROP DATABASE gives one record per captured table, each the one DROP TABLE gives (compared
    with a real DROP TABLE of a fourth table); the snapshot's tables end UNKNOWN_SCHEMA as after
    DROP TABLE; the engine streams on."""
    shop = shop_database(mariadb, database, ("a", "b", "c", "d", "skipped"), rows=20_000)
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    mariadb.execute(f"CREATE TABLE `{database}`.alive (id INT PRIMARY KEY)")
    try:
        config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 10},
                             source={"include": [rf"{database}\..*", rf"{shop}\.[a-d]"]})
        engine = EngineThread(config)
        with mariadb.connect(shop) as connection:  # the reference record, from the same default database
            connection.cursor().execute("DROP TABLE d")
        send_via_table(config, "execute-snapshot", {"data-collections": [rf"{shop}\.[ab]"]}, "s1")
        engine.eventually(lambda: "IN_PROGRESS" in engine.types(), 60, message="a's snapshot under way")
        send_via_table(config, "pause-snapshot", {}, "p1")
        engine.wait_for("PAUSED")
        current = engine.capture.progress.current
        assert current.table == TableId(shop, "a") and current.started, "a's snapshot is not under way"
        mariadb.execute(statement.format(shop=shop))
        send_via_table(config, "resume-snapshot", {}, "r1")
        engine.wait_for("COMPLETED")
        mariadb.execute(f"INSERT INTO `{database}`.alive VALUES (1)")
        engine.eventually(lambda: any(r["value"].get("source", {}).get("table") == "alive"
                                      for r in read_json_lines(config.sink.path)), 60,
                          message="a change after the DROP DATABASE streamed")
        engine.until_caught_up()
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{shop}`")
    records = list(read_json_lines(config.sink.path))
    drops = drop_records(records)
    assert [r["value"]["tableChanges"] for r in drops] == [
        [{"type": "DROP", "id": f"{shop}.{name}"}] for name in ("d", "a", "b", "c")]
    reference = comparable(drops[0])
    for record, name in zip(drops[1:], "abc"):
        assert record["value"]["ddl"] == statement.format(shop=shop)
        expected = {"key": reference["key"], "value": {**reference["value"], "tableChanges": [
            {"type": "DROP", "id": f"{shop}.{name}"}], "source": {**reference["value"]["source"], "table": name}}}
        assert comparable(record) == expected
    statuses = {n.data["data_collection"]: n.data["status"] for n in engine.notifications
                if n.type == "TABLE_SCAN_COMPLETED"}
    assert statuses == {f"{shop}.a": "UNKNOWN_SCHEMA", f"{shop}.b": "UNKNOWN_SCHEMA"}
    assert "TABLE_SCAN_RESTARTED" in engine.types()
    assert not [name for name in materialize(records) if name.startswith(f"{shop}.")], "a dropped table survives"


def test_drop_database_on_the_kafka_schema_change_topic(mariadb, broker, database, tmp_path):
    """The Kafka sink gets the same per-table DROP TABLE, and writes Debezium's one record of
    the dropped database on the schema change topic."""
    shop = shop_database(mariadb, database, rows=5)
    try:
        config = make_config(mariadb, database, tmp_path, name=f"dd{database[-8:]}",
                             source={"include": [rf"{database}\..*", rf"{shop}\..*"]},
                             kafka={"bootstrap_servers": broker.bootstrap}, sink={"type": "kafka"})
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
        mariadb.execute(f"DROP DATABASE `{shop}`")
        engine.until_caught_up()
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{shop}`")
    streamed = [m for m in published(broker.bootstrap, config.name) if m["source"]["snapshot"] == "false"]
    # as Debezium writes it: one record of the database, no tableChanges (its tables are gone with it)
    assert [(m["databaseName"], m["ddl"], m["tableChanges"]) for m in streamed] == [
        (shop, f"DROP DATABASE `{shop}`", [])]
