"""The private Apache Kafka broker (lab/localbroker.py) that the Kafka tests run on.

Everything Kafka-related is tested against it, so it must speak Kafka (produce, then consume
with `assign()` + `seek()`, the way dblog reads), and it must never outlive whoever started it: not after
`stop()`, not after an interpreter exit without `stop()`, not after the starting process is
SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from support.harness import process_alive, wait_until_gone
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from support import eventually

from lab.localbroker import BrokerUnavailable, LocalBroker

pytestmark = pytest.mark.timeout(240)  # a JVM start on a loaded machine

ROOT = Path(__file__).resolve().parents[2]


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_bootstrap_is_a_loopback_address_the_broker_listens_on(broker):
    host, port = broker.bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) == broker.port
    assert broker.running and accepts_connections(broker.port)


def test_create_topic_makes_the_partitions_visible_and_tolerates_repeats(broker):
    topic = f"created-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=3)
    broker.create_topic(topic, partitions=3)  # already there: no error
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.partitions_for_topic(topic) == {0, 1, 2}
    finally:
        consumer.close()


def test_a_message_produced_is_consumed_with_assign_and_seek(broker):
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for index in range(3):
            producer.send(topic, key=b"conn", value=f"message {index}".encode(), partition=0).get(timeout=10)
    finally:
        producer.close(5)

    partition = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([partition])
        consumer.seek(partition, 1)  # an offset kept by the reader itself, not by a group
        received = []

        def two_received() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                received.extend((record.offset, record.key, record.value) for record in records)
            return len(received) >= 2

        eventually(two_received, 10, interval=0, message=lambda: f"two messages; got {received}")
        assert received == [(1, b"conn", b"message 1"), (2, b"conn", b"message 2")]
        assert consumer.highwater(partition) == 3
    finally:
        consumer.close()


def test_two_brokers_run_side_by_side_as_separate_clusters(broker):
    with LocalBroker() as second:
        assert second.port != broker.port
        assert second.cluster_id != broker.cluster_id
        topic = f"only-on-second-{uuid.uuid4().hex[:8]}"
        second.create_topic(topic)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        try:
            assert topic not in consumer.topics()
        finally:
            consumer.close()


@pytest.mark.server  # starts a broker of its own
def test_stop_ends_the_process_and_frees_the_port():
    running = LocalBroker().start()
    pid, port = running.process.pid, running.port
    assert process_alive(pid)
    running.stop()
    assert not process_alive(pid)
    assert not accepts_connections(port)
    assert not running.running
    running.stop()  # idempotent


@pytest.mark.server  # starts a broker of its own
def test_leaving_the_with_block_stops_the_broker_even_on_error():
    with pytest.raises(RuntimeError, match="boom"):
        with LocalBroker() as running:
            pid = running.process.pid
            raise RuntimeError("boom")
    assert not process_alive(pid)


def _child(code: str) -> subprocess.Popen:
    """A Python process that starts a LocalBroker, prints its pid, then runs `code`."""
    script = textwrap.dedent(
        """
        import sys, time
        from lab.localbroker import LocalBroker
        broker = LocalBroker().start()
        print(broker.process.pid, flush=True)
        """
    ) + textwrap.dedent(code)
    return subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.server  # starts a broker of its own
def test_a_process_that_exits_without_stop_leaves_no_broker_behind():
    child = _child("sys.exit(0)  # no stop(): atexit must do it")
    try:
        pid = int(child.stdout.readline())
        assert child.wait(30) == 0
        assert wait_until_gone(pid), f"the broker {pid} outlived the interpreter that started it"
    finally:
        child.kill()
        child.wait()


@pytest.mark.server  # starts a broker of its own
def test_a_killed_process_leaves_no_broker_behind():
    child = _child("time.sleep(60)")
    try:
        pid = int(child.stdout.readline())
        assert process_alive(pid)
        os.kill(child.pid, signal.SIGKILL)  # atexit cannot run: the kernel must end the broker
        child.wait(10)
        assert wait_until_gone(pid), f"the broker {pid} outlived the SIGKILLed process that started it"
    finally:
        child.kill()
        child.wait()


def test_a_missing_java_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # holds no bin/java
    with pytest.raises(BrokerUnavailable, match="JDK or set JAVA_HOME"):
        LocalBroker().start()


def test_bootstrap_of_a_broker_never_started_says_how_to_start_it():
    with pytest.raises(BrokerUnavailable, match="start"):
        LocalBroker().bootstrap
