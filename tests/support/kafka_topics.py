"""Reading a topic back as a Kafka Connect consumer would: every record up to the high
watermark (`topic_records`) and its (key, value) (`decode`). Shared by
tests/sinks/kafka/test_kafka_sink.py (and support/kafka_sink_runs.py), tests/engine/test_xa_sinks.py
and tests/ops/test_security.py."""

from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, TopicPartition


def topic_records(bootstrap: str, topic: str, timeout: float = 30, **client_options) -> dict[int, list]:
    """Every record of every partition of `topic`, from the beginning up to the high watermark.

    The end is the high watermark each fetch response carries (`highwater()`), not ListOffsets
    "latest" (`end_offsets()`): tansu 0.6, the former test broker, answered that with the base
    offset + 1 of the batch it stored last, short of the end by the rest of that batch. A reader stopping there lost the
    tail of the last batch whenever a poll (at most 500 records) ended inside it: the rows the
    kill -9 test once found missing or stale under load were on the topic (see
    test_the_topic_reader_reads_to_the_high_watermark). `client_options`: TLS and SASL, as
    `LocalBroker.client_options()` gives them for a secured broker."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **client_options)
    try:
        deadline = time.monotonic() + timeout
        while not (partitions := consumer.partitions_for_topic(topic)):
            assert time.monotonic() < deadline, f"topic {topic} does not exist"
            time.sleep(0.1)
        parts = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        records: dict[int, list] = {part.partition: [] for part in parts}
        while True:
            for part, batch in consumer.poll(200).items():
                records[part.partition].extend(batch)
            ends = {part: consumer.highwater(part) for part in parts}  # None until a fetch answered
            if all(end is not None and consumer.position(part) >= end for part, end in ends.items()):
                return records
            assert time.monotonic() < deadline, \
                f"{topic}: read up to {[consumer.position(part) for part in parts]} of {list(ends.values())}"
    finally:
        consumer.close()


def decode(record, schemas: bool = False) -> tuple:
    """(key, value) as a consumer with Kafka Connect's JSON converter gets them (None for null)."""
    key = json.loads(record.key) if record.key is not None else None
    value = json.loads(record.value) if record.value is not None else None
    if schemas:
        key = key["payload"] if key is not None else None
        value = value["payload"] if value is not None else None
    return key, value


def topic_names(bootstrap: str) -> set[str]:
    """The topics the broker at `bootstrap` has."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return set(consumer.topics())
    finally:
        consumer.close()
