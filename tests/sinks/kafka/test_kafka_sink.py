"""The Kafka sink (`sink.type = "kafka"`) against the private Apache Kafka broker and MariaDB: the
topics replayed (last value per key, tombstones and deletes removing it) equal `SELECT *` after a
snapshot under writes, after `kill -9` of `dblog run` and after the broker was down; changes of a
key stay in order on one partition; records are Debezium's JSON converter output, with and
without the `schema` part; a topic Kafka would refuse stops `dblog run` before anything is written."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import tomli_w
from support.harness import EngineProcess, EngineThread, config_data, make_config
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.partitioner.default import murmur2
from support import eventually
from support.kafka_topics import decode, topic_records

from dblog.core.events import RowChange, TableId
from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from lab.localbroker import LocalBroker
from dblog.demo.verify import Comparison, compare_with_source
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.base import SinkError, SinkUnavailable
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.sink import KafkaSink
from dblog.sinks.kafka.settings import KafkaSinkSettings

pytestmark = pytest.mark.timeout(300)


# --- reading the topics back ----------------------------------------------------------------


def replay(partitions: dict[int, list], schemas: bool = False) -> dict[tuple, dict]:
    """A topic applied in order, partition by partition (a key lives on one partition): the last
    `after` per key; a delete or a tombstone removes the key, a truncate empties the table."""
    rows: dict[tuple, dict] = {}
    for records in partitions.values():
        for record in records:
            key, value = decode(record, schemas)
            if value is None:
                rows.pop(tuple(key.values()), None)
            elif value["op"] == "t":
                rows.clear()
            elif value["op"] == "d":
                rows.pop(tuple(key.values()), None)
            else:
                rows[tuple(key.values())] = value["after"]
    return rows


def compare_topics(mariadb, bootstrap: str, connector: str, source_tables: list[TableId],
                   **client_options) -> Comparison:
    replayed = {str(table): replay(topic_records(bootstrap, f"{connector}.{table}", **client_options))
                for table in source_tables}
    with SourceConnection(lambda: mariadb.connect()) as reader:
        return compare_with_source(reader, source_tables, lambda table: replayed[str(table)],
                                   Comparison(subject="Kafka topics replayed"))


# The tests that replay topics into rows and compare them with `SELECT *` have the sink write
# dblog's normal form (`values = "dblog"`), the form the comparison reads; Debezium's encodings of
# the same values are checked against Debezium itself (test_connect_differential.py).
NORMAL_FORM = {"values": "dblog"}


def kafka_config_data(mariadb, database: str, workdir: Path, bootstrap: str, name: str, **sink) -> dict:
    return config_data(mariadb, database, workdir, name=name, kafka={"bootstrap_servers": bootstrap},
                       sink={"type": "kafka", "kafka": {**NORMAL_FORM, **sink}})


def executed(mariadb) -> GtidSet:
    return GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")


def snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


class VersionWriter:
    """One thread updating, deleting and re-inserting rows of `db.versions`, each write setting
    `v` to the next value of one counter: a key's changes must reach Kafka with `v` growing."""

    def __init__(self, mariadb, database: str, rows: int = 300, rate: float = 200) -> None:
        self.database, self.rows, self._interval = database, rows, 1 / rate
        mariadb.execute(f"CREATE TABLE `{database}`.versions (id INT PRIMARY KEY, v BIGINT NOT NULL, "
                        "pad VARCHAR(40) NOT NULL)")
        mariadb.execute(f"INSERT INTO `{database}`.versions SELECT seq, seq, 'x' FROM `{database}`.seq_1_to_{rows}")
        self.counter = rows
        self._connection = mariadb.connect(autocommit=True)
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> VersionWriter:
        self._thread.start()
        return self

    def _run(self) -> None:
        rng = random.Random(7)
        db = f"`{self.database}`"
        try:
            with self._connection.cursor() as cursor:
                while not self._stop.wait(self._interval):
                    self.counter += 1
                    key = rng.randint(1, self.rows)
                    action = rng.random()
                    if action < 0.8:
                        cursor.execute(f"UPDATE {db}.versions SET v = %s, pad = %s WHERE id = %s",
                                       (self.counter, f"pad {self.counter}", key))
                    elif action < 0.9:
                        cursor.execute(f"DELETE FROM {db}.versions WHERE id = %s", (key,))
                    else:
                        cursor.execute(f"INSERT INTO {db}.versions VALUES (%s, %s, 'back') "
                                       "ON DUPLICATE KEY UPDATE v = VALUES(v), pad = 'again'", (key, self.counter))
        except BaseException as error:  # noqa: BLE001 - re-raised by stop()
            self.error = error

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._connection.close()
        if self.error:
            raise self.error


# --- the tests ------------------------------------------------------------------------------------


def test_snapshot_and_streaming_under_writes_replay_equals_source_in_key_order(mariadb, broker, database, tmp_path):
    with mariadb.connect() as connection:
        load(connection, database, 3_000)
    versions = VersionWriter(mariadb, database)
    name = f"k{uuid.uuid4().hex[:6]}"
    config = make_config(mariadb, database, tmp_path, name=name, snapshot={"chunk_size": 200},
                         kafka={"bootstrap_servers": broker.bootstrap},
                         sink={"type": "kafka", "kafka": {"partitions": 3, **NORMAL_FORM}})
    writers = WriteLoad(lambda: mariadb.connect(), database, 3_000, writers=2, seed=5, rate=100).start()
    versions.start()
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED", timeout=120)
        time.sleep(1)  # streaming only, for a while
    finally:
        writers.stop()
        versions.stop()
    engine.until_caught_up()

    source_tables = [*tables(database), TableId(database, "versions")]
    result = compare_topics(mariadb, broker.bootstrap, name, source_tables)
    assert result.equal, result.summary()

    partitions = topic_records(broker.bootstrap, f"{name}.{database}.versions")
    assert len(partitions) == 3
    owner: dict[int, int] = {}
    for partition, records in partitions.items():
        last: dict[int, int] = {}
        for index, record in enumerate(records):
            key, value = decode(record)
            assert owner.setdefault(key["id"], partition) == partition, f"key {key} on two partitions"
            # Java's default partitioner (murmur2 of the key bytes), so keys stay where Debezium puts them
            assert partition == (murmur2(record.key) & 0x7FFFFFFF) % 3, f"key {key} not on Java's partition"
            if value is None:  # a tombstone follows its delete
                assert decode(records[index - 1])[1]["op"] == "d" and decode(records[index - 1])[0] == key
                continue
            row = value["after"] or value["before"]
            assert row["v"] >= last.get(key["id"], 0), f"key {key}: v {row['v']} after {last[key['id']]}"
            last[key["id"]] = row["v"]
    assert len(set(owner.values())) == 3, "every partition holds keys"
    ops = [decode(r)[1]["op"] for records in partitions.values() for r in records if r.value is not None]
    assert {"r", "u", "d", "c"} <= set(ops)


TYPES_DDL = """CREATE TABLE `{db}`.types (
    id INT NOT NULL PRIMARY KEY,
    ti TINYINT NULL, su SMALLINT UNSIGNED NULL, bu BIGINT UNSIGNED NULL,
    amount DECIMAL(10,2) NULL, f FLOAT NULL, d DOUBLE NULL,
    day DATE NULL, dt DATETIME(3) NULL, ts TIMESTAMP(6) NULL, t TIME NULL, y YEAR NULL,
    name VARCHAR(20) NOT NULL, doc JSON NULL, raw VARBINARY(8) NULL,
    e ENUM('a','b') NULL, s SET('x','y') NULL, flags BIT(3) NULL
) CHARACTER SET utf8mb4"""

ROW_1 = ("(1, -5, 65535, 18446744073709551615, '12.30', 1.5, 2.25, '2024-02-29', '2024-02-29 10:11:12.123', "
         "'2024-02-29 10:11:12.5', '-01:02:03', 2024, 'one', '{\"a\": 1}', 0x0001ff, 'b', 'x,y', b'101')")

EXPECTED_TYPES = {  # the value schema of each column (Debezium's defaults): (type, semantic name or None)
    "id": ("int32", None), "ti": ("int16", None), "su": ("int32", None), "bu": ("int64", None),
    "amount": ("bytes", "org.apache.kafka.connect.data.Decimal"), "f": ("float", None), "d": ("double", None),
    "day": ("int32", "io.debezium.time.Date"), "dt": ("int64", "io.debezium.time.Timestamp"),
    "ts": ("string", "io.debezium.time.ZonedTimestamp"), "t": ("int64", "io.debezium.time.MicroTime"),
    "y": ("int32", "io.debezium.time.Year"), "name": ("string", None), "doc": ("string", None),  # MariaDB's JSON is a LONGTEXT
    "raw": ("bytes", None), "e": ("string", "io.debezium.data.Enum"), "s": ("string", "io.debezium.data.EnumSet"),
    "flags": ("bytes", "io.debezium.data.Bits"),
}

_RANGES = {"int8": 2**7, "int16": 2**15, "int32": 2**31, "int64": 2**63}


def check_against_schema(schema: dict, value, where: str = "") -> None:
    """What Kafka Connect's JsonConverter checks when it reads `{"schema", "payload"}` back."""
    if value is None:
        assert schema.get("optional"), f"{where}: null in a required {schema['type']}"
        return
    kind = schema["type"]
    if kind == "struct":
        assert isinstance(value, dict), where
        names = [f["field"] for f in schema["fields"]]
        assert set(value) <= set(names), f"{where}: payload fields {set(value) - set(names)} not in the schema"
        for field in schema["fields"]:
            check_against_schema(field, value.get(field["field"]), f"{where}.{field['field']}")
    elif kind == "array":
        assert isinstance(value, list), where
        for index, item in enumerate(value):
            check_against_schema(schema["items"], item, f"{where}[{index}]")
    elif kind in _RANGES:
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r} is not an {kind}"
        assert -_RANGES[kind] <= value < _RANGES[kind], f"{where}: {value} out of {kind}"
    elif kind in ("float", "double"):
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
    elif kind == "string":
        assert isinstance(value, str), f"{where}: {value!r} is not a string"
    elif kind == "bytes":  # base64 text in JSON
        assert isinstance(value, str) and base64.b64decode(value, validate=True) is not None, where
    elif kind == "boolean":
        assert isinstance(value, bool), where
    else:
        raise AssertionError(f"{where}: unexpected type {kind}")


def test_records_are_debezium_json_converter_output_with_and_without_schemas(mariadb, broker, database, tmp_path):
    mariadb.execute(TYPES_DDL.format(db=database))
    mariadb.execute(f"INSERT INTO `{database}`.types VALUES {ROW_1}")
    mariadb.execute(f"INSERT INTO `{database}`.types (id, name) VALUES (2, 'two')")
    with_schemas, plain = f"s{uuid.uuid4().hex[:6]}", f"p{uuid.uuid4().hex[:6]}"
    engines = [
        EngineThread(make_config(mariadb, database, _dir(tmp_path / "a"), name=with_schemas,
                                 kafka={"bootstrap_servers": broker.bootstrap},
                                 sink={"type": "kafka", "kafka": {"schemas": True, "skipped_operations": "none"}})),
        EngineThread(make_config(mariadb, database, _dir(tmp_path / "b"), name=plain,
                                 kafka={"bootstrap_servers": broker.bootstrap},
                                 sink={"type": "kafka", "kafka": {"tombstones": False, "extended_headers": False}})),
    ]
    for engine in engines:
        engine.wait_for("COMPLETED")
    db = f"`{database}`"
    for statement in (
        f"INSERT INTO {db}.types (id, name, e) VALUES (3, 'three', 'a')",
        f"UPDATE {db}.types SET name = 'one!', amount = '-0.50' WHERE id = 1",
        f"UPDATE {db}.types SET id = 30 WHERE id = 3",  # a key change: delete, tombstone, create
        f"DELETE FROM {db}.types WHERE id = 2",
        f"ALTER TABLE {db}.types ADD COLUMN extra INT NULL",
        f"INSERT INTO {db}.types (id, name, extra) VALUES (4, 'four', 44)",
        f"TRUNCATE TABLE {db}.types",
        f"INSERT INTO {db}.types (id, name, extra) VALUES (5, 'five', 55)",
    ):
        mariadb.execute(statement)
    for engine in engines:
        engine.until_caught_up()

    topic = f"{with_schemas}.{database}.types"
    records = topic_records(broker.bootstrap, topic)[0]
    # Debezium's context headers on every record (extended_headers' default), strings with schemas
    context = {name: json.loads(value) for name, value in records[0].headers}
    assert context.pop("__debezium.context.runId")["payload"]
    assert context == {f"__debezium.context.{name}": {"schema": {"type": "string", "optional": False}, "payload": value}
                       for name, value in (("connectorLogicalName", with_schemas), ("taskId", "0"),
                                           ("connectorName", "mysql"))}
    assert all(len(record.headers) >= 4 for record in records)
    for record in records:  # every key and value is what JsonConverter accepts
        for part in (record.key, record.value):
            if part is not None:
                document = json.loads(part)
                assert set(document) == {"schema", "payload"}
                check_against_schema(document["schema"], document["payload"], topic)
    first_key, first_value = (json.loads(part) for part in (records[0].key, records[0].value))
    assert first_key == {"schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}],
                                    "optional": False, "name": f"{topic}.Key"},
                         "payload": {"id": 1}}
    schema = first_value["schema"]
    assert schema["name"] == f"{topic}.Envelope"
    # Debezium 3.x's envelope: version 2, `transaction` before `op`, with `ts_us` and `ts_ns`
    assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "transaction", "op", "ts_ms",
                                                      "ts_us", "ts_ns"]
    assert schema["version"] == 2
    after = {f["field"]: f for f in schema["fields"][1]["fields"]}
    assert {name: (f["type"], f.get("name")) for name, f in after.items()} == EXPECTED_TYPES
    assert after["e"]["parameters"] == {"allowed": "a,b"} and after["s"]["parameters"] == {"allowed": "x,y"}
    assert after["amount"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert after["flags"]["parameters"] == {"length": "3"}
    assert after["id"]["optional"] is False and after["name"]["optional"] is False and after["ti"]["optional"]
    payload = first_value["payload"]
    assert payload["op"] == "r" and payload["transaction"] is None and payload["before"] is None
    # Debezium's defaults: BIGINT UNSIGNED wraps into int64 (bigint.unsigned.handling.mode=long), DECIMAL
    # is the unscaled value's bytes (1230 = 0x04ce), DATE days and DATETIME(3) milliseconds since the
    # epoch, TIME microseconds, BIT(3) little-endian bytes
    after_row = payload["after"]
    assert after_row["bu"] == -1 and after_row["amount"] == base64.b64encode(b"\x04\xce").decode()
    assert after_row["day"] == 19782 and after_row["dt"] == 1709201472123 and after_row["t"] == -3723000000
    assert after_row["ts"] == "2024-02-29T10:11:12.500000Z" and after_row["raw"] == "AAH/"
    assert after_row["flags"] == "BQ==" and after_row["y"] == 2024
    assert payload["source"]["db"] == database and payload["source"]["table"] == "types"
    assert payload["source"]["name"] == with_schemas and payload["source"]["snapshot"] == "incremental"
    assert payload["ts_us"] // 1000 == payload["ts_ms"] and payload["ts_ns"] // 1000 == payload["ts_us"]
    assert payload["source"]["ts_ns"] // 1000 == payload["source"]["ts_us"]
    assert payload["source"]["ts_us"] // 1000 == payload["source"]["ts_ms"]

    def summary(records, schemas):
        out = []
        for record in records:
            key, value = decode(record, schemas)
            out.append((key and key["id"], value and value["op"]))
        return out

    assert summary(records, True) == [
        (1, "r"), (2, "r"), (3, "c"), (1, "u"), (3, "d"), (3, None), (30, "c"), (2, "d"), (2, None),
        (4, "c"), (None, "t"), (5, "c"),
    ]
    after_alter = json.loads(records[9].value)
    assert after_alter["schema"]["fields"][1]["fields"][-1] == {"type": "int32", "optional": True, "field": "extra"}
    assert after_alter["payload"]["after"]["extra"] == 44
    truncate = json.loads(records[10].value)  # null key; the envelope schema of the whole table
    assert records[10].key is None and truncate["payload"]["op"] == "t"
    truncated_at = truncate["payload"]["source"]  # where the TRUNCATE is in the binlog
    assert truncated_at["file"].startswith("binlog.") and truncated_at["pos"] > 0 and truncated_at["server_id"] == 1
    assert truncated_at["gtid"] and truncated_at["table"] == "types"
    assert [f["field"] for f in truncate["schema"]["fields"][0]["fields"]] == [*EXPECTED_TYPES, "extra"]

    # The schema change topic: <name>, keyed by the database name.
    # First the start-up records of Debezium's snapshot (written once, at the first start), then
    # the ALTER with the table as it is after it.
    changes = topic_records(broker.bootstrap, with_schemas)[0]
    decoded = [(json.loads(record.key), json.loads(record.value)) for record in changes]
    for key, value in decoded:
        assert key["schema"]["name"] == "io.debezium.connector.mysql.SchemaChangeKey"
        check_against_schema(value["schema"], value["payload"], "schema change")
    assert [value["payload"]["ddl"].split("(")[0].strip() for key, value in decoded] == [
        decoded[0][1]["payload"]["ddl"], f"DROP TABLE IF EXISTS `{database}`.`types`",
        f"DROP DATABASE IF EXISTS `{database}`", decoded[3][1]["payload"]["ddl"], f"USE `{database}`",
        "CREATE TABLE `types`", decoded[6][1]["payload"]["ddl"].split("(")[0].strip()]
    assert decoded[0][1]["payload"]["ddl"].startswith("SET character_set_server=")
    assert decoded[3][1]["payload"]["ddl"].startswith(f"CREATE DATABASE `{database}` CHARSET ")
    assert [value["payload"]["source"]["snapshot"] for key, value in decoded] == ["true"] * 5 + ["last", "false"]
    key, value = decoded[-1]
    assert key["payload"] == {"databaseName": database}
    assert "ADD COLUMN extra" in value["payload"]["ddl"]
    (altered,) = value["payload"]["tableChanges"]
    assert altered["type"] == "ALTER" and altered["id"] == f'"{database}"."types"'
    assert [column["name"] for column in altered["table"]["columns"]] == [*EXPECTED_TYPES, "extra"]
    assert altered["table"]["primaryKeyColumnNames"] == ["id"]

    # Without schemas: the bare key and envelope; no tombstones (tombstones = false); no truncate
    # (skipped_operations' default, Debezium's skipped.operations=t).
    plain_records = topic_records(broker.bootstrap, f"{plain}.{database}.types")[0]
    assert summary(plain_records, False) == [
        (1, "r"), (2, "r"), (3, "c"), (1, "u"), (3, "d"), (30, "c"), (2, "d"), (4, "c"), (5, "c"),
    ]
    # The key change's headers, Debezium's: the new key on the delete, the old one on the create;
    # no context headers (extended_headers = false).
    assert [list(record.headers) for record in plain_records] == [
        [], [], [], [], [("__debezium.newkey", b'{"id":30}')], [("__debezium.oldkey", b'{"id":3}')], [], [], []]
    key, value = decode(plain_records[3])
    assert key == {"id": 1}
    assert list(value) == ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
    assert value["before"]["name"] == "one" and value["after"]["name"] == "one!"
    assert value["after"]["amount"] == base64.b64encode(b"\xce").decode()  # -50: -0.50 at scale 2
    assert json.loads(topic_records(broker.bootstrap, plain)[0][-1].key) == {"databaseName": database}
    replayed = replay(topic_records(broker.bootstrap, f"{plain}.{database}.types"))
    assert sorted(replayed) == [(1,), (4,), (5,), (30,)]  # the truncate skipped, as Debezium skips it
    assert replayed[(5,)]["extra"] == 55
    assert list(replay(topic_records(broker.bootstrap, f"{with_schemas}.{database}.types"), True)) == [(5,)]


def test_restart_after_kill_9_replays_to_the_source(mariadb, broker, database, tmp_path):
    kill_9_restarts_replay_to_the_source(mariadb, database, tmp_path, {"bootstrap_servers": broker.bootstrap})


def kill_9_restarts_replay_to_the_source(mariadb, database, tmp_path, kafka: dict, **client_options) -> None:
    """`dblog run` killed mid-snapshot and while streaming, under writes, then caught up: the topics
    replayed equal the source. `kafka`: the config's [kafka] section; `client_options`: how the
    test reads the topics back (TLS and SASL for a secured broker)."""
    rows = 4_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    name = f"c{uuid.uuid4().hex[:6]}"
    data = kafka_config_data(mariadb, database, tmp_path, kafka["bootstrap_servers"], name)
    data["kafka"] = dict(kafka)
    data["snapshot"]["chunk_size"] = 200
    # Commits every 50 ms, so that one lands mid-snapshot: at the default 1 s the whole snapshot
    # (about 1.5 s here) can finish between two commits and the wait below would never see it.
    data["offsets"]["commit_interval_seconds"] = 0.05
    engine = EngineProcess(data, tmp_path)
    writers = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=11, rate=100).start()
    try:
        engine.start()
        engine.wait_until(lambda o: snapshot_done(o) or sum(
            e.rows_scanned for e in SnapshotProgress.from_json(o.snapshot).queue) >= 1000)
        engine.kill()  # mid-snapshot
        engine.start()
        engine.wait_until(snapshot_done)
        time.sleep(1)
        engine.kill()  # streaming
        engine.start()
        time.sleep(1)
    finally:
        writers.stop()
    target = executed(mariadb)
    engine.wait_until(lambda o: snapshot_done(o) and target.issubset(o.position))
    engine.terminate()
    result = compare_topics(mariadb, kafka["bootstrap_servers"], name, tables(database), **client_options)
    assert result.equal, result.summary()


def test_offsets_are_not_saved_past_records_kafka_did_not_acknowledge(mariadb, database, tmp_path):
    """At-least-once rests on the commit order: the sink's flush (every record acknowledged)
    before the offsets are saved. With the broker frozen, the commit after an update fails and the
    offsets stay before that update; a restart produces it, and the topic replays to the source."""
    with mariadb.connect() as connection:
        load(connection, database, 100)
    with LocalBroker() as own:
        name = f"o{uuid.uuid4().hex[:6]}"
        config = make_config(mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": own.bootstrap},
                             sink={"type": "kafka", "kafka": {"delivery_timeout_seconds": 2, **NORMAL_FORM}})
        store = OffsetStore(config.offsets.path)
        engine = EngineThread(config)
        try:
            engine.wait_for("COMPLETED")
            before = executed(mariadb)
            engine.eventually(lambda: before.issubset(store.load().position), message="a commit past the snapshot")
            os.kill(own.process.pid, signal.SIGSTOP)
            try:
                mariadb.execute(f"UPDATE `{database}`.customers SET name = 'unacknowledged' WHERE id = 7")
                update = executed(mariadb)
                eventually(lambda: engine.error is not None, timeout=60, message="the commit to fail")
                assert isinstance(engine.error, SinkUnavailable), repr(engine.error)
                position = store.load().position
                assert before.issubset(position) and not update.issubset(position), \
                    f"offsets {position} saved past the update {update} that Kafka never acknowledged"
            finally:
                os.kill(own.process.pid, signal.SIGCONT)
        finally:
            engine.stop()
        EngineThread(config).until_caught_up()
        customers = replay(topic_records(own.bootstrap, f"{name}.{database}.customers"))
        assert customers[(7,)]["name"] == "unacknowledged"
        result = compare_topics(mariadb, own.bootstrap, name, tables(database))
        assert result.equal, result.summary()


def test_broker_down_and_back_the_engine_retries_and_catches_up(mariadb, database, tmp_path):
    rows = 1_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    with LocalBroker() as own:
        name = f"d{uuid.uuid4().hex[:6]}"
        data = kafka_config_data(mariadb, database, tmp_path, own.bootstrap, name, delivery_timeout_seconds=2)
        data["source"]["reconnect_timeout_seconds"] = 120
        engine = EngineProcess(data, tmp_path)
        engine.start()
        try:
            engine.wait_until(snapshot_done)
            # Frozen (SIGSTOP): connections hang, requests time out; what it holds is kept.
            writers = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=13, rate=50).start()
            os.kill(own.process.pid, signal.SIGSTOP)
            try:
                eventually(lambda: "did not acknowledge" in engine.log.read_text(), timeout=60, message="the sink's error")
                time.sleep(2)
            finally:
                os.kill(own.process.pid, signal.SIGCONT)
            writers.stop()
            target = executed(mariadb)
            engine.wait_until(lambda o: target.issubset(o.position), timeout=120)
            result = compare_topics(mariadb, own.bootstrap, name, tables(database))
            assert result.equal, result.summary()

            # Stopped: connections refused. The changes made while it was down must be on it when
            # the engine caught up.
            own.stop()
            for index in range(1, 21):
                mariadb.execute(f"UPDATE `{database}`.customers SET name = 'while down {index}' WHERE id = {index}")
            eventually(lambda: engine.log.read_text().count("did not acknowledge") >= 2
                 or "cannot reach the Kafka brokers" in engine.log.read_text(), timeout=60, message="the sink's error")
            own.restart()
            target = executed(mariadb)
            engine.wait_until(lambda o: target.issubset(o.position), timeout=120)
            assert engine.alive(), "the supervisor gave up"
            customers = replay(topic_records(own.bootstrap, f"{name}.{database}.customers"))
            for index in range(1, 21):
                assert customers[(index,)]["name"] == f"while down {index}"
        finally:
            engine.terminate()
    log = engine.log.read_text()
    assert f"lost the sink (Kafka at {own.bootstrap} did not acknowledge" in log, log[-3000:]
    assert "restarting from the committed offsets" in log
    assert "kafka.net" not in log, "kafka-python's connection errors flood the log"


def _dblog_run(data: dict, workdir: Path) -> subprocess.CompletedProcess:
    path = workdir / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    return subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                          check=False, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name, sink, message", [
    ("bad name", {}, "holding ' '"),
    ("long", {"topic": "{name}.{db}.{table}." + "x" * 240}, "Kafka allows at most 249"),
])
def test_a_topic_kafka_would_refuse_stops_dblog_run_before_writing(mariadb, broker, database, tmp_path, name, sink,
                                                                   message):
    with mariadb.connect() as connection:
        load(connection, database, 100)
    result = _dblog_run(kafka_config_data(mariadb, database, tmp_path, broker.bootstrap, name, **sink), tmp_path)
    assert result.returncode != 0
    assert message in result.stderr and f"{database}.orders" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert not [topic for topic in admin.list_topics() if database in topic]
    finally:
        admin.close()


def test_two_tables_on_one_topic_are_refused_by_name(broker):
    def sink(**settings):
        return KafkaSink(broker.bootstrap, KafkaSinkSettings(**settings), "dup", lambda table: None)

    one = sink(topic="{name}.{table}")
    with pytest.raises(SinkError, match=r"table a\.t and table b\.t would both write to Kafka topic 'dup\.t'"):
        one.check_routes([TableId("a", "t"), TableId("b", "t")])
    one.close()
    two = sink()
    with pytest.raises(SinkError, match="'dup.a.my_t'"):  # sanitized like Debezium: ' ' -> '_'
        two.check_routes([TableId("a", "my t"), TableId("a", "my_t")])
    two.close()


def test_the_topic_reader_reads_to_the_high_watermark(broker):
    """The tests' reader reads every record, also when the last batch is larger than a poll."""
    topic = f"hw-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    # Batches leave at flush() only (linger 60 s): two of them, the last one larger than a poll.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=60_000, batch_size=1024 * 1024)
    for count in (3, 1_000):
        for index in range(count):
            producer.send(topic, key=b"%d" % index, value=b"v" * 100)
        producer.flush()
    producer.close()
    records = topic_records(broker.bootstrap, topic)
    assert [record.offset for record in records[0]] == list(range(1_003))


def test_the_broker_hides_aborted_transactions_from_read_committed_readers(broker):
    """What exactly-once would rest on (docs/kafka.md, "Exactly-once: not offered"): Apache Kafka
    keeps an aborted transaction's records from read_committed consumers. (tansu 0.6, the former
    test broker, did not.)"""
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=topic, max_block_ms=10_000)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, key=b"k", value=b"aborted")
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic, key=b"k", value=b"committed")
    producer.commit_transaction()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False)
    part = TopicPartition(topic, 0)
    consumer.assign([part])
    consumer.seek_to_beginning(part)
    values = []
    deadline = time.monotonic() + 10
    while b"committed" not in values and time.monotonic() < deadline:
        values += [record.value for batch in consumer.poll(300).values() for record in batch]
    consumer.close()
    assert values == [b"committed"]


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_record_larger_than_max_request_size_stops_the_sink_naming_the_setting(broker):
    """Refused by the producer before it is sent: a SinkError (not an outage dblog would retry)
    naming sink.kafka.max_request_size; the records before it were acknowledged."""
    from dblog.mysql.schema import Column, TableSchema

    table = TableId("big", "t")
    schema = TableSchema(table, [Column("id", "int", "int"), Column("note", "text", "text")], ("id",))
    sink = KafkaSink(broker.bootstrap, KafkaSinkSettings(max_request_size=2048), f"b{uuid.uuid4().hex[:6]}",
                     lambda _: schema)
    try:
        sink.check_routes([table])
        sink.write([RowChange(table, "c", (1,), None, {"id": 1, "note": "small"})])
        sink.flush()
        with pytest.raises(SinkError) as refused:
            sink.write([RowChange(table, "c", (2,), None, {"id": 2, "note": "x" * 5000})])
            sink.flush()
        assert not isinstance(refused.value, SinkUnavailable)
        assert "sink.kafka.max_request_size (2,048 bytes)" in str(refused.value), refused.value
    finally:
        sink.close()


@pytest.mark.parametrize("bound", ["bytes", "records"])
def test_the_producer_holds_at_most_its_buffer_and_waits_for_acknowledgements(bound, broker, monkeypatch):
    """`sink.kafka.max_buffer_bytes`: 2 MB of records through a 64 KiB producer buffer, and
    `max_buffer_records`: 2,000 small records through a queue of 64: the producer's queue fills,
    the sink waits for acknowledgements to make room (never holding more than the bound), and
    every record arrives once, in order."""
    from dblog.mysql.schema import Column, TableSchema

    table = TableId("buffered", "t")
    schema = TableSchema(table, [Column("id", "int", "int"), Column("note", "text", "text")], ("id",))
    waits = []
    make_room = Delivery._make_room
    monkeypatch.setattr(Delivery, "_make_room", lambda self, *args: (waits.append(1), make_room(self, *args)))
    name = f"b{uuid.uuid4().hex[:6]}"
    settings, note = ((KafkaSinkSettings(max_request_size=4096, max_buffer_bytes=65536), "x" * 1000)
                      if bound == "bytes" else (KafkaSinkSettings(max_buffer_records=64), "x"))
    sink = KafkaSink(broker.bootstrap, settings, name, lambda _: schema)
    try:
        sink.check_routes([table])
        rows = 2000
        for start in range(0, rows, 100):
            sink.write([RowChange(table, "c", (n,), None, {"id": n, "note": note})
                        for n in range(start, start + 100)])
        sink.flush()
    finally:
        sink.close()
    assert waits, f"the producer's queue never filled: its buffer is not bounded by max_buffer_{bound}"
    records = topic_records(broker.bootstrap, f"{name}.buffered.t")
    assert [decode(record)[0]["id"] for record in sum(records.values(), [])] == list(range(rows))


def test_max_buffer_bytes_must_hold_the_largest_record():
    with pytest.raises(ValueError, match="max_buffer_bytes .* is smaller than max_request_size"):
        KafkaSinkSettings(max_request_size=2_000_000, max_buffer_bytes=1_000_000)


def test_a_table_redefined_without_ddl_is_written_by_its_new_definition(broker):
    """The engine redefines a table whose binlog rows are of an earlier definition than the
    server's (`Sink.table_redefined`): the schemas, encoders and message-key columns the sink
    made from the definition it had at start (check_routes, for `message_key`) are made again:
    here the server's `ref VARCHAR` was `code INT` when the row was logged."""
    from dblog.mysql.schema import Column, TableSchema
    from dblog.sinks.column_options import MessageKeyRule

    table = TableId("shop", "t")
    server = TableSchema(table, [Column("id", "int", "int(11)", nullable=False),
                                 Column("ref", "varchar", "varchar(5)", char_length=5, nullable=False)], ("id",))
    logged = TableSchema(table, [Column("id", "int", "int(11)", nullable=False),
                                 Column("code", "int", "int", nullable=False)], ("id",))
    definitions = {table: server}
    name = f"r{uuid.uuid4().hex[:6]}"
    sink = KafkaSink(broker.bootstrap, KafkaSinkSettings(schemas=True, message_key=[
        MessageKeyRule(table=r"shop\.t", columns=["code|ref"])]), name, lambda t: definitions[t])
    try:
        sink.check_routes([table])
        definitions[table] = logged
        sink.table_redefined(table)
        sink.write([RowChange(table, "c", (1,), None, {"id": 1, "code": 7})])
        sink.flush()
    finally:
        sink.close()
    [record] = topic_records(broker.bootstrap, f"{name}.shop.t")[0]
    key, value = json.loads(record.key), json.loads(record.value)
    assert key["schema"]["fields"] == [{"field": "code", "type": "int32", "optional": False}]
    assert key["payload"] == {"code": 7}
    assert value["schema"]["fields"][1]["fields"][1] == {"field": "code", "type": "int32", "optional": False}
