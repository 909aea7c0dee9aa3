"""Debezium's transaction metadata and heartbeats from the Kafka sink, on the private MariaDB and
Apache Kafka broker: each streamed change's `transaction` block and the BEGIN / END records of
`<name>.transaction` (snapshot rows and DDL outside any transaction); after `kill -9` of `dblog
run` under writes, every transaction that has a change on a topic has its END, counting exactly
the changes that carry its id; heartbeat records at the interval, with the action query run on
the source each time; an action query the server refuses stops dblog naming the setting;
`sink.kafka.transforms` see the blocks and apply to transaction and heartbeat records too.
What Debezium writes is compared with Debezium itself in test_debezium_transaction_differential.py."""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict

import pytest
from support.harness import EngineProcess, EngineThread, config_data, make_config
from support.kafka_topics import decode, topic_records

from dblog.core.gtid import GtidSet
from dblog.demo.workload import WriteLoad, load
from dblog.runtime.config import ConfigError
from dblog.runtime.heartbeats import Heartbeats
from dblog.sinks.base import Sink
from dblog.sinks.registry import sink_plugin
from dblog.sinks.kafka.transaction_metadata import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA

pytestmark = pytest.mark.timeout(300)


def _records(bootstrap: str, topic: str, schemas: bool = False) -> list[tuple]:
    """(key, value, timestamp) of every record of `topic`, partition by partition (the timestamp:
    the producer's, when dblog handed the record over)."""
    return [(*decode(record, schemas), record.timestamp)
            for records in topic_records(bootstrap, topic).values() for record in records]


def _executed(mariadb) -> GtidSet:
    return GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")


def _last_gtid(mariadb) -> str:
    return mariadb.execute("SELECT @@last_gtid")[0][0]


@pytest.mark.parametrize("reader_process", [True, False], ids=["reader-process", "in-process"])
def test_streamed_changes_carry_transaction_blocks_between_begin_and_end(mariadb, broker, database, tmp_path,
                                                                         reader_process):
    mariadb.execute(f"CREATE TABLE `{database}`.a (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.b (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{database}`.a VALUES (100, 0)")  # read by the snapshot
    name = f"t{uuid.uuid4().hex[:6]}"
    config = make_config(mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": broker.bootstrap},
                         source={"include": [f"{database}\\.(a|b)"], "reader_process": reader_process},
                         sink={"type": "kafka", "kafka": {"schemas": True, "transaction_metadata": True}})
    engine = EngineThread(config)
    gtids = {}
    try:
        engine.wait_for("COMPLETED")
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SET autocommit = 0")
            cursor.execute(f"INSERT INTO `{database}`.b VALUES (1, 1)")
            cursor.execute(f"INSERT INTO `{database}`.a VALUES (1, 1), (2, 2)")
            cursor.execute(f"INSERT INTO `{database}`.b VALUES (2, 1)")
            cursor.execute("COMMIT")
            cursor.execute("SELECT @@last_gtid")
            gtids["multi"] = cursor.fetchone()[0]
            cursor.execute(f"INSERT INTO `{database}`.other VALUES (1)")  # not captured
            cursor.execute("COMMIT")
            cursor.execute("SELECT @@last_gtid")
            gtids["other"] = cursor.fetchone()[0]
            cursor.execute(f"UPDATE `{database}`.a SET id = 10 WHERE id = 1")  # a key change: two events
            cursor.execute(f"DELETE FROM `{database}`.a WHERE id = 2")
            cursor.execute("COMMIT")
            cursor.execute("SELECT @@last_gtid")
            gtids["key change"] = cursor.fetchone()[0]
            cursor.execute(f"ALTER TABLE `{database}`.b ADD COLUMN w INT")
            cursor.execute("SELECT @@last_gtid")
            gtids["ddl"] = cursor.fetchone()[0]
            cursor.execute(f"INSERT INTO `{database}`.b VALUES (3, 1, 1)")
            cursor.execute("COMMIT")
            cursor.execute("SELECT @@last_gtid")
            gtids["after ddl"] = cursor.fetchone()[0]
        engine.until_caught_up()
    finally:
        engine.stop()

    blocks = defaultdict(list)  # id -> (table, op, block) of each change record
    produced = defaultdict(list)  # id -> when each of its change records was produced
    for table in ("a", "b"):
        for key, value, timestamp in _records(broker.bootstrap, f"{name}.{database}.{table}", schemas=True):
            if value is None:
                continue  # a tombstone: no block of its own
            if value["op"] == "r":
                assert value["transaction"] is None  # a snapshot row is no part of a transaction
                continue
            block = value["transaction"]
            assert block["id"] == value["source"]["gtid"]
            blocks[block["id"]].append((table, value["op"], block))
            produced[block["id"]].append(timestamp)
    for changes in blocks.values():
        changes.sort(key=lambda change: change[2]["total_order"])
    assert [(table, op, block["total_order"], block["data_collection_order"])
            for table, op, block in blocks[gtids["multi"]]] == [
        ("b", "c", 1, 1), ("a", "c", 2, 1), ("a", "c", 3, 2), ("b", "c", 4, 2)]
    assert [(table, op, block["total_order"], block["data_collection_order"])
            for table, op, block in blocks[gtids["key change"]]] == [
        ("a", "d", 1, 1), ("a", "c", 2, 2), ("a", "d", 3, 3)]
    assert set(blocks) == {gtids["multi"], gtids["key change"], gtids["after ddl"]}

    records = _records(broker.bootstrap, f"{name}.transaction", schemas=False)
    transactions = defaultdict(list)
    for key, value, timestamp in records:
        assert key["schema"] == TRANSACTION_KEY_SCHEMA and value["schema"] == TRANSACTION_VALUE_SCHEMA
        value = value["payload"]
        assert key["payload"] == {"id": value["id"]}
        transactions[value["id"]].append(value)
        # BEGIN handed over before the transaction's first change, END after its last
        if value["status"] == "BEGIN":
            assert all(timestamp <= change for change in produced[value["id"]])
        else:
            assert all(timestamp >= change for change in produced[value["id"]])
    database_collection = f"{database}."
    multi = transactions[gtids["multi"]]
    assert [value["status"] for value in multi] == ["BEGIN", "END"]
    assert multi[0]["event_count"] is None and multi[0]["data_collections"] is None
    assert multi[1]["event_count"] == 4
    assert sorted((c["data_collection"], c["event_count"]) for c in multi[1]["data_collections"]) == [
        (database_collection + "a", 2), (database_collection + "b", 2)]
    assert [(v["status"], v["event_count"], v["data_collections"]) for v in transactions[gtids["other"]]] == [
        ("BEGIN", None, None), ("END", 0, [])]  # as Debezium: every transaction it reads a BEGIN of
    assert [(v["status"], v["event_count"]) for v in transactions[gtids["key change"]]] == [("BEGIN", None),
                                                                                           ("END", 3)]
    assert gtids["ddl"] not in transactions  # DDL: no BEGIN / END
    assert [(v["status"], v["event_count"]) for v in transactions[gtids["after ddl"]]] == [("BEGIN", None),
                                                                                          ("END", 1)]


def test_after_kill_9_every_transaction_on_the_topics_has_its_end(mariadb, broker, database, tmp_path):
    """At-least-once per transaction: the offsets move only past transactions whose records,
    END included, Kafka acknowledged; a transaction cut by kill -9 is written again from BEGIN."""
    rows = 2_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    name = f"k{uuid.uuid4().hex[:6]}"
    data = config_data(mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": broker.bootstrap},
                       sink={"type": "kafka", "kafka": {"values": "dblog", "transaction_metadata": True}})
    data["offsets"]["commit_interval_seconds"] = 0.05
    engine = EngineProcess(data, tmp_path)
    writers = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=5, rate=150).start()
    try:
        for pause in (0.7, 0.3, 1.1):
            engine.start()
            streamed = _executed(mariadb)  # each run streams past its start before it is killed
            engine.wait_until(lambda offsets: streamed.issubset(offsets.position))
            time.sleep(pause)
            engine.kill()  # mid-stream: writers never stop, a transaction is likely half written
        engine.start()
        time.sleep(1)
    finally:
        writers.stop()
    target = _executed(mariadb)
    engine.wait_until(lambda offsets: target.issubset(offsets.position))
    engine.terminate()

    orders = defaultdict(set)  # transaction id -> total_order of each change record carrying it
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"SHOW TABLES FROM `{database}`")
        tables = [row[0] for row in cursor.fetchall() if row[0] != "dblog_signal"]
    for table in tables:
        for _, value, _ in _records(broker.bootstrap, f"{name}.{database}.{table}"):
            if value is not None and value["transaction"] is not None:
                orders[value["transaction"]["id"]].add(value["transaction"]["total_order"])
    ends = {}
    begins = set()
    for _, value, _ in _records(broker.bootstrap, f"{name}.transaction"):
        if value["status"] == "BEGIN":
            begins.add(value["id"])
        else:
            assert ends.setdefault(value["id"], value["event_count"]) == value["event_count"]  # the same, again
    assert orders, "no streamed change carried a transaction block"
    missing = [gtid for gtid in orders if gtid not in ends]
    assert not missing, f"{len(missing)} transaction(s) with changes and no END, e.g. {missing[:3]}"
    for gtid, seen in orders.items():
        assert seen == set(range(1, ends[gtid] + 1)), (gtid, sorted(seen), ends[gtid])
    assert set(ends) <= begins


class _Recorded(Sink):
    def __init__(self) -> None:
        self.beats: list[int] = []

    def heartbeat(self, ts_ms: int) -> None:
        self.beats.append(ts_ms)


def test_a_heartbeat_is_due_once_the_interval_passed_since_the_last():
    now = [100.0]
    sink = _Recorded()
    heartbeats = Heartbeats(500, sink, clock=lambda: now[0], now_ms=lambda: int(now[0] * 1000))
    assert not heartbeats.tick()  # not at the start: an interval after it, as Debezium's timer
    now[0] = 100.499
    assert not heartbeats.tick()
    now[0] = 100.5
    assert heartbeats.tick() and sink.beats == [100_500]
    now[0] = 100.9
    assert not heartbeats.tick()
    now[0] = 101.7  # late (a long transaction): one beat, and the next an interval after it
    assert heartbeats.tick() and not heartbeats.tick()
    now[0] = 102.2
    assert heartbeats.tick() and sink.beats == [100_500, 101_700, 102_200]


def test_an_action_query_the_server_refuses_stops_dblog_naming_the_setting(mariadb, database):
    now = [0.0]
    setting = sink_plugin("kafka").setting("heartbeat_action_query")  # as the engine names it
    assert setting == "sink.kafka.heartbeat_action_query"
    heartbeats = Heartbeats(1, _Recorded(), f"UPDATE `{database}`.no_such_table SET x = 1",
                            mariadb.connect, clock=lambda: now[0], action_query_setting=setting)
    now[0] = 1.0
    with pytest.raises(ConfigError, match="sink.kafka.heartbeat_action_query: the source refused it"):
        heartbeats.tick()
    heartbeats.close()


def test_heartbeats_at_the_interval_with_the_action_query_on_the_source(mariadb, broker, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.heartbeat (id INT PRIMARY KEY, beats BIGINT NOT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.heartbeat VALUES (1, 0)")
    name = f"h{uuid.uuid4().hex[:6]}"
    config = make_config(
        mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": broker.bootstrap},
        snapshot={"startup": "never"},
        sink={"type": "kafka", "kafka": {
            "schemas": True, "heartbeat_interval_ms": 300,
            "heartbeat_action_query": f"UPDATE `{database}`.heartbeat SET beats = beats + 1 WHERE id = 1"}})
    engine = EngineThread(config)
    started = time.time()
    try:
        engine.eventually(lambda: engine.engine.heartbeats is not None and engine.engine.heartbeats.beats >= 6,
                          timeout=60, message="six heartbeats")
        engine.until_caught_up()
    finally:
        engine.stop()
    elapsed = time.time() - started
    beats = engine.engine.heartbeats.beats
    assert mariadb.execute(f"SELECT beats FROM `{database}`.heartbeat")[0][0] == beats  # the query, each beat
    records = topic_records(broker.bootstrap, f"__debezium-heartbeat.{name}")
    assert set(records) == {0} and len(records[0]) == beats  # partition 0, as Debezium's
    times = []
    for record in records[0]:
        key, value = json.loads(record.key), json.loads(record.value)
        assert key == {"schema": {"type": "struct", "fields": [{"type": "string", "optional": False,
                                                               "field": "serverName"}],
                                  "optional": False, "name": "io.debezium.connector.common.ServerNameKey",
                                  "version": 1},
                       "payload": {"serverName": name}}
        assert value["schema"] == {"type": "struct", "fields": [{"type": "int64", "optional": False,
                                                                "field": "ts_ms"}],
                                   "optional": False, "name": "io.debezium.connector.common.Heartbeat", "version": 1}
        times.append(value["payload"]["ts_ms"])
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert all(gap >= 300 for gap in gaps), gaps  # never before the interval passed
    assert beats <= elapsed / 0.3 + 1
    # The action query's updates are changes of a captured table: on its topic, one per beat (the
    # last may come after the engine caught up and stopped).
    updates = [decode(record, True)[1] for part in topic_records(
        broker.bootstrap, f"{name}.{database}.heartbeat").values() for record in part]
    counted = [value["after"]["beats"] for value in updates if value and value["op"] == "u"]
    assert counted == list(range(1, len(counted) + 1)) and len(counted) >= beats - 1, (counted, beats)


def test_transforms_see_the_blocks_and_apply_to_transaction_and_heartbeat_records(mariadb, broker, database,
                                                                                   tmp_path):
    """As in Kafka Connect, where the transforms run on every record the connector wrote: the
    unwrap's add_fields reads the transaction block (stamped before the transforms), a router
    renames the transaction topic, and records that are not change events pass the unwrap as
    they are."""
    mariadb.execute(f"CREATE TABLE `{database}`.a (id INT PRIMARY KEY, v INT)")
    name = f"r{uuid.uuid4().hex[:6]}"
    config = make_config(
        mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": broker.bootstrap},
        snapshot={"startup": "never"}, source={"include": [f"{database}\\.a"]},
        sink={"type": "kafka", "kafka": {
            "transaction_metadata": True, "heartbeat_interval_ms": 200,
            "transforms": [{"type": "unwrap", "add_fields": ["op", "id", "total_order"]},
                           {"type": "regex_router", "regex": "(.*)\\.transaction", "replacement": "$1.tx"}]}})
    engine = EngineThread(config)
    try:
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SET autocommit = 0")
            cursor.execute(f"INSERT INTO `{database}`.a VALUES (1, 1), (2, 2)")
            cursor.execute("COMMIT")
            cursor.execute("SELECT @@last_gtid")
            gtid = cursor.fetchone()[0]
        engine.eventually(lambda: engine.engine.heartbeats.beats >= 1, timeout=60, message="a heartbeat")
        engine.until_caught_up()
    finally:
        engine.stop()
    rows = [value for _, value, _ in _records(broker.bootstrap, f"{name}.{database}.a")]
    assert rows == [{"id": 1, "v": 1, "__op": "c", "__id": gtid, "__total_order": 1},
                    {"id": 2, "v": 2, "__op": "c", "__id": gtid, "__total_order": 2}]
    statuses = [(value["id"], value["status"], value["event_count"])
                for _, value, _ in _records(broker.bootstrap, f"{name}.tx")]
    assert [(gtid, "BEGIN", None), (gtid, "END", 2)] == [entry for entry in statuses if entry[0] == gtid]
    beats = topic_records(broker.bootstrap, f"__debezium-heartbeat.{name}")
    assert set(beats) == {0} and json.loads(beats[0][0].value).keys() == {"ts_ms"}
