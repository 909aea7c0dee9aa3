"""Debezium signal messages from a Kafka topic.

A message is a signal for this engine when its key equals the connector's name; its value is
`{"type": …, "data": {…}}` (an `"id"` may be given, otherwise it is `kafka-<partition>-<offset>`).
Other keys are skipped with a log line: several connectors may share one topic.

The consumer never joins a group and never asks for "latest" offsets: it `assign()`s every
partition and `seek()`s to offsets kept by dblog itself, committed in dblog's offsets file
together with the binlog position, so each signal acts exactly once across restarts (and the
broker's group coordinator, slow or missing in some Kafka-compatible brokers, is not needed).
"""

from __future__ import annotations

import json
import logging
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

log = logging.getLogger("dblog.signals")

RawSignal = tuple[str, str | None, object]  # (id, type or None when unreadable, data or raw text)


class KafkaSignalChannel:
    def __init__(self, bootstrap: str, topic: str, connector_name: str, start_offsets: dict[int, int] | None) -> None:
        self.topic = topic
        self.connector_name = connector_name
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
        self._next: dict[int, int] = dict(start_offsets or {})
        self._assigned: set[int] = set()

    def _assign(self) -> None:
        """(Re)assign when partitions appear: the topic may not exist yet when dblog starts."""
        partitions = self._consumer.partitions_for_topic(self.topic) or set()
        if partitions <= self._assigned:
            return
        self._assigned = set(partitions)
        assignment = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self._consumer.assign(assignment)
        for tp in assignment:
            if tp.partition in self._next:
                self._consumer.seek(tp, self._next[tp.partition])
            else:
                self._consumer.seek_to_beginning(tp)

    def poll(self, timeout_ms: int = 0) -> list[RawSignal]:
        """Signals for this connector, in partition order. Unreadable messages come back as
        `(id, None, raw_text)` so the engine can reject them with a notification."""
        self._assign()
        if not self._assigned:
            return []
        batches = self._consumer.poll(timeout_ms=timeout_ms)
        signals: list[RawSignal] = []
        for tp in sorted(batches, key=lambda tp: tp.partition):
            for record in batches[tp]:
                self._next[tp.partition] = record.offset + 1
                signal = self._signal(record)
                if signal is not None:
                    signals.append(signal)
        return signals

    def _signal(self, record) -> RawSignal | None:
        default_id = f"kafka-{record.partition}-{record.offset}"
        key = record.key.decode("utf-8", "replace") if record.key is not None else None
        if key != self.connector_name:
            log.info("ignoring Kafka signal %s with key %r: this connector is %r", default_id, key,
                     self.connector_name)
            return None
        text = record.value.decode("utf-8", "replace") if record.value is not None else ""
        try:
            value = json.loads(text)
        except ValueError:
            return (default_id, None, text)
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            return (default_id, None, text)
        signal_id = value.get("id") if isinstance(value.get("id"), str) and value.get("id") else default_id
        return (signal_id, value["type"], value.get("data"))

    def offsets(self) -> dict[int, int]:
        """Next offset to read per partition, for the signals returned so far."""
        return dict(self._next)

    def close(self) -> None:
        self._consumer.close()


def send_signal(bootstrap: str, topic: str, connector_name: str, signal_type: str, data: dict,
                signal_id: str | None = None) -> str:
    """Send one signal message, as any Kafka client could."""
    signal_id = signal_id or str(uuid.uuid4())
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        value = {"id": signal_id, "type": signal_type, "data": data}
        producer.send(topic, key=connector_name.encode(), value=json.dumps(value).encode())
        producer.flush(10)
    finally:
        producer.close(5)
    return signal_id
