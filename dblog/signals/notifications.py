"""Notifications in Debezium's format, to the log and optionally to a Kafka topic.

Debezium sends `{"id", "aggregate_type", "type", "additional_data", "timestamp"}` with every
`additional_data` value as a string (lists comma-joined), so tooling written for Debezium's
notification channel reads ours unchanged.
"""

from __future__ import annotations

import json
import logging
import uuid

from dblog.core.events import Notification

log = logging.getLogger("dblog.notifications")


def debezium_notification(notification: Notification, ts_ms: int) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "aggregate_type": notification.aggregate_type,
        "type": notification.type,
        "additional_data": {key: _text(value) for key, value in notification.data.items()},
        "timestamp": str(ts_ms),
    }


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(_text(item) for item in value)
    return str(value)


class KafkaNotifier:
    """Publishes each notification to `topic`, keyed by the connector's name."""

    def __init__(self, bootstrap: str, topic: str, connector_name: str, client_options: dict | None = None) -> None:
        """`client_options`: TLS and SASL (dblog.sinks.kafka.security.client_options)."""
        from kafka import KafkaProducer

        self.topic = topic
        self._key = connector_name.encode()
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            value_serializer=lambda value: json.dumps(value).encode(),
            acks=1,
            linger_ms=5,
            # A broker that is down must not stall the data path: give up on a notification
            # after a second (it is logged) instead of blocking the loop for a minute.
            max_block_ms=1000,
            **(client_options or {}),
        )

    def send(self, notification: Notification, ts_ms: int) -> None:
        try:
            self._producer.send(self.topic, key=self._key, value=debezium_notification(notification, ts_ms))
        except Exception as error:  # notifications must never stop the data path
            log.warning("could not publish %s notification to Kafka topic %s: %s", notification.type, self.topic, error)

    def close(self) -> None:
        try:
            self._producer.flush(5)
        finally:
            self._producer.close(5)
