"""Debezium's heartbeat records, when the engine's clock says one is due
(`sink.kafka.heartbeat_interval_ms`: `dblog.runtime.heartbeats`)."""

from __future__ import annotations

from dblog.sinks.kafka import connect_schema
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.output import Output
from dblog.sinks.kafka.topics import Topics


class HeartbeatRecords:
    def __init__(self, connector: str, topics: Topics, output: Output, delivery: Delivery) -> None:
        self._connector = connector
        self._topics = topics
        self._output = output
        self._delivery = delivery

    def write(self, ts_ms: int) -> None:
        """Debezium's heartbeat record: key `{serverName}` (the connector's name), value
        `{ts_ms}`, on partition 0 of the heartbeat topic (as Debezium's HeartbeatImpl)."""
        topics = self._topics
        topics.connect()
        topic = topics.ready(topics.named_topic("heartbeat"))
        self._output.record(topic, {"serverName": self._connector}, {"ts_ms": ts_ms}, connect_schema.HEARTBEAT_KEY,
                            connect_schema.HEARTBEAT_VALUE, partition=0)
        self._delivery.poll()
