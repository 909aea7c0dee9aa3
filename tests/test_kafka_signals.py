"""Signals through a Kafka topic (a real broker: tansu) and notifications published to one."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from dblog.sinks import read_json_lines
from dblog.workload import load, tables
from harness import EngineThread, compare, make_config
from signals.kafka_channel import KafkaSignalChannel, send_signal

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


def wait(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def raw_message(config, key, value: bytes):
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers)
    producer.send(config.signals.kafka_topic, key=key, value=value)
    producer.flush(10)
    producer.close()


def published_notifications(config):
    consumer = KafkaConsumer(bootstrap_servers=config.kafka.bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(config.notifications.kafka_topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = []
    for _ in range(20):
        batch = consumer.poll(500)
        if not batch:
            break
        for items in batch.values():
            records.extend(json.loads(r.value) for r in items)
    consumer.close()
    return records


def test_every_signal_type_through_kafka_acts_once_across_restarts(mariadb, broker, database, tmp_path, caplog):
    with mariadb.connect() as connection:
        load(connection, database, 8_000)
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
    engine = EngineThread(config)
    time.sleep(1)
    assert "STARTED" not in engine.types() and "REJECTED" not in engine.types()
    assert "IN_PROGRESS" not in engine.types(), "a chunk was read while paused"
    send(config, "resume-snapshot", {}, "k-resume")
    engine.wait_for("COMPLETED", timeout=120)
    send(config, "execute-snapshot", {"data-collections": [f"{database}\\.customers"]}, "k-exec2")
    wait(lambda: "STARTED" in engine.types())
    send(config, "stop-snapshot", {}, "k-stop")
    wait(lambda: "ABORTED" in engine.types() or engine.types().count("COMPLETED") >= 2)
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


def test_channel_resumes_from_its_offsets_and_waits_for_a_missing_topic(broker):
    topic = f"late-{uuid.uuid4().hex[:8]}"
    channel = KafkaSignalChannel(broker.bootstrap, topic, "conn", None)
    assert channel.poll(100) == []
    broker.create_topic(topic)
    for index in range(3):
        send_signal(broker.bootstrap, topic, "conn", "log", {"message": str(index)}, f"s{index}")
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 3 and time.monotonic() < deadline:
        got += channel.poll(200)
    assert [s[0] for s in got] == ["s0", "s1", "s2"]
    offsets = channel.offsets()
    channel.close()
    send_signal(broker.bootstrap, topic, "conn", "log", {"message": "later"}, "s3")
    again = KafkaSignalChannel(broker.bootstrap, topic, "conn", offsets)
    got = []
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        got += again.poll(200)
    again.close()
    assert [s[0] for s in got] == ["s3"]
