"""Signals through a Kafka topic (a real broker: Apache Kafka) and notifications published to one; a
signal's topic offset is saved only together with its effect, also under the Iceberg sink's
deferred commits (a real Spark session)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from support.harness import EngineThread, compare, iceberg_config, make_config, published
from kafka import KafkaProducer
from support import eventually

from dblog.core.events import TableId
from dblog.demo.verify import source_rows
from dblog.demo.workload import tables
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.iceberg.sink import read_target
from dblog.sinks.jsonl.sink import read_json_lines
from dblog.signals.kafka_channel import KafkaSignalChannel, send_signal

pytestmark = pytest.mark.timeout(300)


def kafka_config(mariadb, broker, database, tmp_path, **snapshot):
    topic = f"signals-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    notices = f"notifications-{uuid.uuid4().hex[:8]}"
    broker.create_topic(notices)
    return make_config(
        mariadb, database, tmp_path,
        snapshot={"startup": "never", "chunk_size": 200, **snapshot},
        signals={"kafka_topic": topic, "kafka_poll_interval_seconds": 0.1},
        notifications={"kafka_topic": notices},
        kafka={"bootstrap_servers": broker.bootstrap},
    )


def send(config, signal_type, data, signal_id=None):
    return send_signal(config.kafka.bootstrap_servers, config.signals.kafka_topic, config.name, signal_type, data, signal_id)


def raw_message(config, key, value: bytes):
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers)
    producer.send(config.signals.kafka_topic, key=key, value=value)
    producer.flush(10)
    producer.close()


def raw_messages(config, messages):
    """Several (key, value) messages through one producer, in this order on partition 0."""
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers)
    for key, value in messages:
        producer.send(config.signals.kafka_topic, key=key, value=value, partition=0)
    producer.flush(10)
    producer.close()


def signal_message(signal_type, data, **extra):
    return json.dumps({"type": signal_type, "data": data, **extra}).encode()


def published_notifications(config):
    return published(config.kafka.bootstrap_servers, config.notifications.kafka_topic)


def test_every_signal_type_through_kafka_acts_once_across_restarts(mariadb, broker, database, tmp_path, caplog,
                                                                   loaded):
    loaded(8_000)
    config = kafka_config(mariadb, broker, database, tmp_path)
    engine = EngineThread(config)
    with caplog.at_level("INFO"):
        raw_message(config, b"someone-else", json.dumps({"type": "execute-snapshot", "data": {
            "data-collections": [f"{database}\\.orders"]}}).encode())
        raw_message(config, config.name.encode(), b"{not json")
        send(config, "log", {"message": "hello over kafka"}, "k-log")
        # Paused before it starts, so no chunk may be read until the resume (deterministic on a
        # loaded machine; pausing mid-table is tested through the signal table).
        send(config, "pause-snapshot", {}, "k-pause")
        engine.wait_for("PAUSED")
        send(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "k-exec")
        engine.wait_for("STARTED")
    assert "ignoring Kafka signal" in caplog.text and "someone-else" in caplog.text
    assert "hello over kafka" in caplog.text
    rejected = [n for n in engine.notifications if n.type == "REJECTED"]
    assert len(rejected) == 1 and "must be JSON" in rejected[0].data["reason"]
    engine.until_caught_up()
    assert "IN_PROGRESS" not in engine.types(), "a chunk was read while paused"

    # Restart: the stored topic offsets mean no signal acts twice; the pause is still in force.
    # A log signal sent now is handled after every older message on the topic: once it is
    # logged, any of them that was going to act again has.
    with caplog.at_level("INFO"):
        engine = EngineThread(config)
        send(config, "log", {"message": "barrier after the restart"}, "k-barrier")
        engine.eventually(lambda: "barrier after the restart" in caplog.text, 60,
                          message="the restarted engine to handle the barrier signal")
    assert "STARTED" not in engine.types() and "REJECTED" not in engine.types()
    assert "IN_PROGRESS" not in engine.types(), "a chunk was read while paused"
    send(config, "resume-snapshot", {}, "k-resume")
    engine.wait_for("COMPLETED", timeout=120)
    send(config, "execute-snapshot", {"data-collections": [f"{database}\\.customers"]}, "k-exec2")
    engine.wait_for("STARTED")
    send(config, "stop-snapshot", {}, "k-stop")
    engine.eventually(lambda: "ABORTED" in engine.types() or engine.types().count("COMPLETED") >= 2, 60,
                      message="the second snapshot stopped or completed")
    engine.until_caught_up()

    result = compare(mariadb, config.sink.path, [tables(database)[0]])
    assert result.equal, result.summary()
    snapshot_tables = {r["value"]["source"]["table"] for r in read_json_lines(config.sink.path) if r["value"]["op"] == "r"}
    assert "orders" in snapshot_tables

    published = published_notifications(config)
    types = [n["type"] for n in published]
    for expected in ("STARTED", "IN_PROGRESS", "PAUSED", "RESUMED", "TABLE_SCAN_COMPLETED", "COMPLETED", "REJECTED"):
        assert expected in types, f"{expected} not published: {types}"
    progress = next(n for n in published if n["type"] == "IN_PROGRESS")
    assert progress["aggregate_type"] == "Incremental Snapshot"
    assert set(progress["additional_data"]) >= {
        "current_collection_in_progress", "maximum_key", "last_processed_key", "total_rows_scanned"}
    assert all(isinstance(v, str) for v in progress["additional_data"].values())


def test_a_kafka_signal_is_saved_only_with_its_snapshot_under_the_iceberg_sinks_deferred_commits(
        mariadb, broker, database, tmp_path, spark, monkeypatch):
    """Issue 36, item 8. The Iceberg sink commits each table in the background
    (dblog.runtime.table_commits): a cut's offsets are saved once its commits end, while the
    loop goes on polling the signal topic. A signal read meanwhile is acted upon (STARTED goes
    out) after the cut; if the cut's offsets then held the loop's live channel positions, the
    saved document would put the topic offset past the signal with a snapshot state that lacks
    it, and a crash there would lose the snapshot. Every document saved must hold the signal's
    offset only together with its snapshot."""
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    mariadb.execute(f"INSERT INTO {db}.orders VALUES (1, 'a'), (2, 'b')")
    topic = f"signals-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    config = iceberg_config(mariadb, database, tmp_path, spark, snapshot={"startup": "never"},
                            source={"include": [rf"{database}\.orders"]},
                            signals={"kafka_topic": topic, "kafka_poll_interval_seconds": 0.1},
                            kafka={"bootstrap_servers": broker.bootstrap})
    saved: list[dict] = []
    save = OffsetStore.save

    def recording_save(store, offsets):
        save(store, offsets)
        saved.append(offsets.to_json())

    monkeypatch.setattr(OffsetStore, "save", recording_save)
    engine = EngineThread(config)
    sink = engine.engine.sink
    committing, release = threading.Event(), threading.Event()
    commit = sink.commit

    def held_commit(batch, offsets):  # the real commit, once the test lets it go
        committing.set()
        assert release.wait(300)
        commit(batch, offsets)

    sink.commit = held_commit
    try:
        mariadb.execute(f"INSERT INTO {db}.orders VALUES (3, 'c')")  # the next cut commits it: held
        engine.eventually(committing.is_set, message="a table commit under way")
        send(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "k-exec")
        engine.wait_for("STARTED")  # polled and acted upon after the cut whose commit is held
        release.set()
        engine.until_caught_up()
    finally:
        release.set()
        engine.stop()

    def signal_read(document: dict) -> bool:
        return int(document["channels"].get("kafka_signals", {}).get("0", 0)) > 0

    for document in saved:
        if signal_read(document):
            assert document["snapshot"]["snapshot_id"] == "k-exec", document
    assert signal_read(saved[-1]) and saved[-1]["snapshot"]["completed_tables"] == [f"{database}.orders"]
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        table = TableId(database, "orders")
        assert read_target(spark, sink.target_name(table), reader.schemas.schema(table)) == source_rows(reader, table)
    finally:
        reader.close()


def test_channel_resumes_from_its_offsets_and_waits_for_a_missing_topic(broker):
    topic = f"late-{uuid.uuid4().hex[:8]}"
    channel = KafkaSignalChannel(broker.bootstrap, topic, "conn", None)
    assert channel.poll(100) == []
    broker.create_topic(topic)
    for index in range(3):
        send_signal(broker.bootstrap, topic, "conn", "log", {"message": str(index)}, f"s{index}")
    got = []
    eventually(lambda: got.extend(channel.poll(200)) or len(got) >= 3, 20, interval=0,
               message=lambda: f"three signals; got {got}")
    assert [s[0] for s in got] == ["s0", "s1", "s2"]
    offsets = channel.offsets()
    channel.close()
    send_signal(broker.bootstrap, topic, "conn", "log", {"message": "later"}, "s3")
    again = KafkaSignalChannel(broker.bootstrap, topic, "conn", offsets)
    got = []
    eventually(lambda: got.extend(again.poll(200)) or got, 20, interval=0, message="the signal sent after the restart")
    again.close()
    assert [s[0] for s in got] == ["s3"]


def test_stop_snapshot_through_kafka_aborts_a_queued_and_the_running_table(mariadb, broker, database, tmp_path,
                                                                           loaded):
    rows = 8_000
    loaded(rows)
    config = kafka_config(mariadb, broker, database, tmp_path, chunk_size=10)
    orders, customers = (str(t) for t in tables(database))
    engine = EngineThread(config)
    # Paused first so both requests are queued before any chunk is read: orders, then customers.
    send(config, "pause-snapshot", {}, "s-pause")
    engine.wait_for("PAUSED")
    send(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "s-exec-orders")
    send(config, "execute-snapshot", {"data-collections": [f"{database}\\.customers"]}, "s-exec-customers")
    engine.eventually(lambda: engine.types().count("STARTED") == 2, 60, message="both requests STARTED")
    send(config, "resume-snapshot", {}, "s-resume")
    engine.wait_for("IN_PROGRESS")
    # 800 chunks of 10 rows: orders is still being read when the two stops arrive.
    raw_messages(config, [
        (config.name.encode(), signal_message("stop-snapshot", {"data-collections": [f"{database}\\.customers"]})),
        (config.name.encode(), signal_message("stop-snapshot", {"data-collections": [f"{database}\\.orders"]})),
    ])
    engine.eventually(lambda: engine.types().count("ABORTED") == 2, 60, message="both tables ABORTED")
    engine.until_caught_up()

    aborted = [n.data["data_collections"] for n in engine.notifications if n.type == "ABORTED"]
    assert aborted == [[customers], [orders]]
    assert "TABLE_SCAN_COMPLETED" not in engine.types() and "COMPLETED" not in engine.types()
    assert engine.capture.progress.current is None
    read = {(r["value"]["source"]["table"], r["key"]["order_id"] if "order_id" in r["key"] else r["key"]["id"])
            for r in read_json_lines(config.sink.path) if r["value"]["op"] == "r"}
    orders_read = {key for table, key in read if table == "orders"}
    assert 0 < len(orders_read) < rows, f"orders: {len(orders_read)} of {rows} rows read before the stop"
    assert not [key for table, key in read if table == "customers"], "a stopped queued table was read"

    published = [n for n in published_notifications(config) if n["type"] == "ABORTED"]
    assert [n["additional_data"]["data_collections"] for n in published] == [customers, orders]


MALFORMED = [
    # (value, what the rejection reason must say): {db} and {orders} are filled in per test.
    (b"{not json", "must be JSON"),
    (b"", "must be JSON"),
    (b"null", "must be JSON"),
    (b"[1, 2, 3]", "must be JSON"),
    (b"42", "must be JSON"),
    (b'"execute-snapshot"', "must be JSON"),
    (bytes(range(256)), "must be JSON"),
    (b"\xff\xfe\x00\x00garbage\x00", "must be JSON"),
    (b'{"data": {"data-collections": ["{orders}"]}}', "must be JSON"),  # no type
    (b'{"type": 7, "data": {}}', "must be JSON"),
    (b'{"type": "", "data": {}}', "must be JSON"),
    (b'{"type": "drop-database", "data": {}}', "unknown type"),
    (b'{"type": "execute-snapshot", "data": {}}', "\'data-collections\' is required"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": []}}', "non-empty list"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": 5}}', "non-empty list"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": ["{db}\\\\.(orders"]}}', "not a valid regular expression"),
    (b'{"type": "stop-snapshot", "data": {"data-collections": ["[a-"]}}', "not a valid regular expression"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": ["nosuchdb\\\\.nosuchtable"]}}', "no table matches"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": ["{orders}"], "type": "blocking"}}', "not supported"),
    (b'{"type": "execute-snapshot", "data": "{oops"}', "not valid JSON"),
    (b'{"type": "execute-snapshot", "data": ["{orders}"]}', "must be a JSON object"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": ["{orders}"], "additional-conditions": ["amount > 1"]}}',
     "each \'additional-conditions\' entry"),
    (b'{"type": "execute-snapshot", "data": {"data-collections": ["{orders}"], "surrogate-key": 5}}', "surrogate-key"),
    (b'{"type": "log", "data": {}}', "needs data"),
]
INJECTIONS = [
    "1=1; DROP TABLE orders",
    "amount > 0) OR (1=1",
    "amount > 0 -- everything",
    "amount > 0 /*! OR 1=1 */",
    "amount > 0 # comment",
    "order_id IN (SELECT id FROM customers)",
    "EXISTS (SELECT 1 FROM mysql.user)",
    "SLEEP(5) = 0",
    "LOAD_FILE(\'/etc/passwd\') IS NOT NULL",
    "amount > 0 INTO OUTFILE \'/tmp/x\'",
    "@@version LIKE \'1%\'",
    "no_such_column > 1",
]


def test_malformed_kafka_signals_are_rejected_while_streaming_goes_on(mariadb, broker, database, tmp_path, caplog,
                                                                      loaded, write_load):
    loaded(1_000)
    config = kafka_config(mariadb, broker, database, tmp_path, startup="initial")
    orders = f"{database}\\.orders"
    malformed = [
        (value.replace(b"{db}", database.encode()).replace(b"{orders}", orders.replace("\\", "\\\\").encode()), reason)
        for value, reason in MALFORMED
    ] + [
        (signal_message("execute-snapshot", {"data-collections": [orders], "additional-conditions": [
            {"data-collection": f"{database}.orders", "filter": predicate}]}), "additional condition for")
        for predicate in INJECTIONS
    ]
    assert len(malformed) >= 30
    key = config.name.encode()
    with caplog.at_level("INFO"):
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")  # the initial snapshot: from here on, a STARTED means a signal acted
        workload = write_load(1_000, writers=2, seed=5, rate=100)
        try:
            ignored = [
                (b"other-connector", signal_message("execute-snapshot", {"data-collections": [orders]})),
                (None, signal_message("execute-snapshot", {"data-collections": [orders]})),
                (b"\xff\xfe", signal_message("pause-snapshot", {})),
                (key, None),  # a tombstone
            ]
            raw_messages(config, ignored[:2] + [(key, value) for value, _ in malformed] + ignored[2:] + [
                (key, signal_message("log", {"message": "barrier after the malformed signals"}, id="barrier"))])
            engine.eventually(lambda: "barrier after the malformed signals" in caplog.text, 60,
                              message="the barrier signal handled")
            # The writers keep on until they have made 50 writes: however fast the signals
            # were handled, the stream around them carries writes.
            eventually(lambda: sum(workload.writes) > 50, 60, message="50 writes")
        finally:
            writes = workload.stop()
        engine.until_caught_up()

    rejected = [n for n in engine.notifications if n.type == "REJECTED"]
    assert len(rejected) == len(malformed), [n.data["reason"] for n in rejected]
    for notification, (value, reason) in zip(rejected, malformed):
        assert reason in notification.data["reason"], (value, notification.data["reason"])
    assert caplog.text.count("rejected signal:") == len(malformed)
    assert caplog.text.count("ignoring Kafka signal") == len(ignored)
    assert "'other-connector'" in caplog.text and "a tombstone" in caplog.text
    # Neither the wrong-key requests nor any rejected one acted.
    assert engine.types().count("STARTED") == 1 and "PAUSED" not in engine.types()
    assert writes > 50, "the writers did not run while the signals were handled"
    result = compare(mariadb, config.sink.path, tables(database))
    assert result.equal, result.summary()
    published = [n["type"] for n in published_notifications(config)]
    assert published.count("REJECTED") == len(malformed)
