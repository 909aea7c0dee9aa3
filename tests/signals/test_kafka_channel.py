"""The Kafka signal channel (dblog/signals/kafka_channel.py) against a real broker (Apache Kafka).

A signal must act exactly once: these tests check that messages for this connector arrive in
order and messages for others are skipped, that unreadable messages come back as items the
engine can reject instead of vanishing, that a channel restarted from `offsets()` neither
re-delivers nor loses anything, that a topic created after the channel started is picked up,
and that offsets left over from a broker that lost its topic do not silence new signals.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
from kafka import KafkaProducer
from support import eventually

from lab.apache_kafka import free_port
from dblog.signals.kafka_channel import KafkaSignalChannel, KafkaSignalChannelError, send_signal
from dblog.signals.model import ExecuteSnapshot, LogSignal, PauseSnapshot, SignalError, parse_signal

pytestmark = pytest.mark.timeout(60)

CONNECTOR = "inventory"


@pytest.fixture(scope="module")
def producer(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        yield producer
    finally:
        producer.close(5)


@pytest.fixture
def topic(broker):
    """A fresh one-partition topic (Debezium's signal topic has a single partition)."""
    name = f"signals-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name)
    return name


@pytest.fixture
def open_channel(broker):
    channels = []

    def open_(topic: str, start_offsets=None, **options) -> KafkaSignalChannel:
        channel = KafkaSignalChannel(broker.bootstrap, topic, CONNECTOR, start_offsets, **options)
        channels.append(channel)
        return channel

    try:
        yield open_
    finally:
        for channel in channels:
            channel.close()


def put(producer, topic, key, value, partition=0) -> int:
    """Produce one message as raw bytes; returns its offset."""
    key = key.encode() if isinstance(key, str) else key
    value = value.encode() if isinstance(value, str) else value
    return producer.send(topic, key=key, value=value, partition=partition).get(timeout=10).offset


def collect(channel, count, timeout=10.0) -> list:
    """Poll until `count` items arrived; fails naming what did at the deadline."""
    items = []
    eventually(lambda: items.extend(channel.poll(100)) or len(items) >= count, timeout, interval=0,
               message=lambda: f"{count} items; got {items}")
    return items


def test_signals_for_this_connector_arrive_in_order_with_their_ids(broker, topic, producer, open_channel):
    channel = open_channel(topic)
    send_signal(broker.bootstrap, topic, CONNECTOR, "pause-snapshot", {}, "pause-1")
    put(producer, topic, CONNECTOR, json.dumps({"type": "log", "data": {"message": "no id given"}}))
    send_signal(broker.bootstrap, topic, CONNECTOR, "execute-snapshot", {"data-collections": ["shop\\.orders"]}, "go")
    items = collect(channel, 3)
    assert items == [
        ("pause-1", "pause-snapshot", {}),
        ("kafka-0-1", "log", {"message": "no id given"}),  # kafka-<partition>-<offset>
        ("go", "execute-snapshot", {"data-collections": ["shop\\.orders"]}),
    ]
    parsed = [parse_signal(*item) for item in items]
    assert parsed == [PauseSnapshot(), LogSignal("no id given"), ExecuteSnapshot(("shop\\.orders",))]
    assert channel.offsets() == {0: 3}


def test_messages_with_other_keys_are_ignored_and_logged(broker, topic, producer, open_channel, caplog):
    caplog.set_level(logging.INFO, logger="dblog.signals.kafka")
    channel = open_channel(topic)
    put(producer, topic, "other-connector", json.dumps({"type": "pause-snapshot"}))
    put(producer, topic, None, json.dumps({"type": "pause-snapshot"}))
    put(producer, topic, b"\xff\xfe", json.dumps({"type": "pause-snapshot"}))
    put(producer, topic, CONNECTOR.upper(), json.dumps({"type": "pause-snapshot"}))  # keys are case-sensitive
    send_signal(broker.bootstrap, topic, CONNECTOR, "resume-snapshot", {}, "mine")
    items = collect(channel, 1)
    assert items == [("mine", "resume-snapshot", {})]
    assert channel.offsets() == {0: 5}  # the skipped messages are consumed too
    skipped = [record.getMessage() for record in caplog.records if "ignoring" in record.getMessage()]
    assert len(skipped) == 4
    assert "'other-connector'" in skipped[0] and "None" in skipped[1] and "INVENTORY" in skipped[3]
    assert all(record.levelno == logging.INFO for record in caplog.records if "ignoring" in record.getMessage())


@pytest.mark.parametrize("value", [
    "not json at all",
    "[1, 2]",
    '"just a string"',
    '{"data": {"message": "no type"}}',
    '{"type": 7, "data": {}}',
    '{"type": "", "data": {}}',
    "\udcff broken utf-8",
])
def test_a_malformed_message_comes_back_as_an_item_the_engine_rejects(topic, producer, open_channel, value):
    channel = open_channel(topic)
    raw = value.encode("utf-8", "surrogateescape")
    offset = put(producer, topic, CONNECTOR, raw)
    [(signal_id, signal_type, data)] = collect(channel, 1)
    assert (signal_id, signal_type) == (f"kafka-0-{offset}", None)
    assert data == raw.decode("utf-8", "replace")  # the raw text, for the rejection notification
    with pytest.raises(SignalError, match="'type' is missing"):
        parse_signal(signal_id, signal_type, data)
    assert channel.offsets() == {0: offset + 1}  # rejected once, not again after a restart


def test_a_malformed_message_keeps_the_id_it_gives(topic, producer, open_channel):
    channel = open_channel(topic)
    put(producer, topic, CONNECTOR, '{"id": "bad-1", "data": {}}')
    assert collect(channel, 1) == [("bad-1", None, '{"id": "bad-1", "data": {}}')]


def test_data_of_the_wrong_shape_is_passed_through_for_parse_signal_to_reject(topic, producer, open_channel):
    channel = open_channel(topic)
    put(producer, topic, CONNECTOR, '{"type": "log", "data": [1]}')
    [item] = collect(channel, 1)
    assert item == ("kafka-0-0", "log", [1])
    with pytest.raises(SignalError, match="must be a JSON object"):
        parse_signal(*item)


def test_tombstones_are_skipped(broker, topic, producer, open_channel):
    channel = open_channel(topic)
    producer.send(topic, key=CONNECTOR.encode(), value=None, partition=0).get(timeout=10)
    send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "after"}, "after")
    assert collect(channel, 1) == [("after", "log", {"message": "after"})]
    assert channel.offsets() == {0: 2}


def test_a_channel_restarted_from_its_offsets_delivers_only_what_is_new(broker, topic, open_channel):
    first = open_channel(topic)
    for index in range(3):
        send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": str(index)}, f"old-{index}")
    assert [item[0] for item in collect(first, 3)] == ["old-0", "old-1", "old-2"]
    stored = first.offsets()
    first.close()
    assert stored == {0: 3}

    send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "new"}, "new")
    second = open_channel(topic, stored)
    assert second.offsets() == stored  # nothing returned yet: still the stored position
    assert collect(second, 1) == [("new", "log", {"message": "new"})]
    assert second.offsets() == {0: 4}
    # And nothing old comes after it: the next item is one sent after it.
    send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "marker"}, "marker")
    assert collect(second, 1) == [("marker", "log", {"message": "marker"})]
    assert second.offsets() == {0: 5}


def test_without_stored_offsets_a_channel_reads_from_the_beginning(broker, topic, open_channel):
    send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "sent before start"}, "early")
    channel = open_channel(topic)  # not "latest": a signal sent before dblog started still acts
    assert collect(channel, 1) == [("early", "log", {"message": "sent before start"})]


def test_a_topic_created_after_the_channel_started_is_picked_up(broker, open_channel):
    topic = f"late-{uuid.uuid4().hex[:8]}"
    channel = open_channel(topic, discovery_interval=0.1)
    started = time.monotonic()
    assert channel.poll(300) == []
    assert time.monotonic() - started < 2  # poll waits at most about its timeout
    assert channel.poll(0) == []
    broker.create_topic(topic)
    send_signal(broker.bootstrap, topic, CONNECTOR, "pause-snapshot", {}, "late")
    assert collect(channel, 1) == [("late", "pause-snapshot", {})]


def test_a_poll_with_no_timeout_returns_at_once_while_the_topic_is_missing(open_channel):
    channel = open_channel(f"missing-{uuid.uuid4().hex[:8]}", discovery_interval=0.0)
    started = time.monotonic()
    for _ in range(20):
        assert channel.poll(0) == []
    assert time.monotonic() - started < 1.0  # a binlog loop calling poll(0) is not held up


def test_offsets_past_the_end_of_a_partition_restart_it_from_the_beginning(broker, topic, open_channel, caplog):
    caplog.set_level(logging.WARNING, logger="dblog.signals.kafka")
    send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "after the broker restarted"}, "fresh")
    channel = open_channel(topic, {0: 1000})  # stored against a broker that has since lost the topic
    assert collect(channel, 1) == [("fresh", "log", {"message": "after the broker restarted"})]
    assert channel.offsets() == {0: 1}
    assert any("past its end" in record.getMessage() for record in caplog.records)


def test_all_partitions_are_read_and_tracked(broker, producer, open_channel):
    topic = f"two-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=2)
    channel = open_channel(topic)
    put(producer, topic, CONNECTOR, json.dumps({"id": "p0", "type": "pause-snapshot"}), partition=0)
    put(producer, topic, CONNECTOR, json.dumps({"id": "p1", "type": "resume-snapshot"}), partition=1)
    items = collect(channel, 2)
    assert sorted(item[0] for item in items) == ["p0", "p1"]
    assert channel.offsets() == {0: 1, 1: 1}


def test_send_signal_makes_an_id_when_none_is_given(broker, topic, open_channel):
    channel = open_channel(topic)
    signal_id = send_signal(broker.bootstrap, topic, CONNECTOR, "log", {"message": "x"})
    assert uuid.UUID(signal_id)
    assert collect(channel, 1) == [(signal_id, "log", {"message": "x"})]


def test_an_unreachable_broker_is_reported_not_waited_for(broker):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(KafkaSignalChannelError, match=address):
        KafkaSignalChannel(address, "signals", CONNECTOR, None, connect_timeout=0.5)
    with pytest.raises(KafkaSignalChannelError, match=address):
        send_signal(address, "signals", CONNECTOR, "log", {"message": "x"}, timeout=0.5)
    assert time.monotonic() - started < 10


def test_close_is_idempotent_and_a_closed_channel_says_so(topic, open_channel):
    channel = open_channel(topic, {0: 7})
    channel.close()
    channel.close()
    assert channel.offsets() == {0: 7}  # still what the engine should store
    with pytest.raises(KafkaSignalChannelError, match="closed"):
        channel.poll(0)
