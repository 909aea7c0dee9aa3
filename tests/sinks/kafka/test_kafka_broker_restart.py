"""A broker restart in mid-flush, under a writer: the sink's idempotent producer (librdkafka,
`acks = all`) survives it. Every record is on the topic once (docs/kafka.md: "the producer's own
retries write no duplicate"), and each key's records are in the order they were sent."""

from __future__ import annotations

import threading
import time
import uuid

from support import eventually
from support.kafka_topics import topic_records

from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.security import KafkaSecurity
from dblog.sinks.kafka.settings import KafkaSinkSettings

KEYS, RECORDS = 60, 40_000


def test_a_broker_restart_in_mid_flush_loses_nothing_duplicates_nothing_and_keeps_the_order(broker):
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=3)
    delivery = Delivery(broker.bootstrap, KafkaSinkSettings(delivery_timeout_seconds=180), "restart", KafkaSecurity())
    delivery.connect()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for index in range(RECORDS):
                delivery.send(topic, b"k%d" % (index % KEYS), b"%d" % index)
                delivery.poll()
                if index % 1_000 == 999:
                    time.sleep(0.1)  # a writer's pace: the restart falls among the sends and the flush
            delivery.flush()  # raises unless every record was acknowledged
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        eventually(lambda: delivery.produced >= RECORDS // 4, 60, message="a quarter of the records sent")
        # From this (the main) thread: the broker's JVM dies with the thread that starts it.
        at_restart = delivery.produced
        broker.restart()
        writer.join(240)
        assert not writer.is_alive(), "the flush did not return"
    finally:
        writer.join(240)
        delivery.close()
    assert at_restart < RECORDS, "the writer was done before the restart"
    assert not failures, repr(failures)
    assert delivery.produced == RECORDS
    sent_per_key: dict[bytes, list[int]] = {}
    for records in topic_records(broker.bootstrap, topic).values():
        for record in records:
            sent_per_key.setdefault(record.key, []).append(int(record.value))
    values = sorted(value for per_key in sent_per_key.values() for value in per_key)
    assert values == list(range(RECORDS)), "records lost or written twice"
    for key, per_key in sent_per_key.items():
        assert per_key == sorted(per_key), f"key {key!r}: out of order"
