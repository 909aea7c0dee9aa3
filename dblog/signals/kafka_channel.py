"""Debezium signal messages from a Kafka topic, read exactly once with offsets kept by dblog.

Why: Debezium users send signals as Kafka messages (key = the connector's name, value =
`{"type": …, "data": {…}}`) when they cannot or will not write to the source database. Several
connectors may share one topic, so messages with another key are skipped (logged at INFO).

How it reads, and why this way:
- No consumer group and no "latest" offsets: the consumer `assign()`s every partition of the
  topic and `seek()`s to offsets that dblog itself keeps (`offsets()`), stored in dblog's own
  offsets file and committed together with the binlog position. A signal's effects and the
  fact that it was read are therefore saved at once, so each signal acts exactly once across
  crashes and restarts. Without stored offsets it starts from the beginning of the topic.
- A missing topic is waited for, not created: dblog does not create topics on the user's
  Kafka. Until the topic exists `poll()` returns nothing, and every `discovery_interval`
  seconds asks the broker (a sub-millisecond metadata request through an admin client, so the
  binlog loop that calls `poll(0)` never stalls). Sending a signal with `send_signal` creates
  the topic on brokers that auto-create topics (`auto.create.topics.enable`).
- A stored offset past the end of a partition (the topic was deleted and created again, or a
  memory-only broker restarted) would silently skip every new signal; the channel notices it
  from the partition's high watermark, logs a warning and reads that partition from the
  beginning, as Kafka's `auto_offset_reset="earliest"` does for offsets out of range.

What `poll()` returns: raw `(id, type, data)` triples for `dblog.signals.model.parse_signal`, where
id is the value's `"id"` if it has one, else `kafka-<partition>-<offset>`. A message for this
connector whose value is not a JSON object with a string `"type"` comes back as
`(id, None, raw_text)`: `parse_signal` rejects it ("'type' is missing"), and the engine can
report the rejection with the raw text. Tombstones (null values) are skipped, like other keys.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

log = logging.getLogger("dblog.signals.kafka")

# (id, type, data): type None marks a malformed message, whose data is then the raw value text.
RawSignal = tuple[str, str | None, dict | str | None]


_UNKNOWN_TOPIC = 3  # Kafka's UNKNOWN_TOPIC_OR_PARTITION


class KafkaSignalChannelError(RuntimeError):
    pass


class KafkaSignalChannel:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        connector_name: str,
        start_offsets: dict[int, int] | None = None,
        *,
        discovery_interval: float = 1.0,
        connect_timeout: float = 10.0,
        client_options: dict | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        # TLS and SASL: kafka-python's options from dblog.sinks.kafka.security.client_options
        self._options = dict(client_options or {})
        self.topic = topic
        self.connector_name = connector_name
        self.discovery_interval = discovery_interval
        self._connect_timeout_ms = int(connect_timeout * 1000)
        self._next: dict[int, int] = {int(p): int(o) for p, o in (start_offsets or {}).items()}
        self._assigned: set[int] = set()
        self._next_discovery = 0.0
        self._admin: KafkaAdminClient | None = None
        try:
            self._consumer = KafkaConsumer(
                bootstrap_servers=bootstrap,
                client_id=f"dblog-signals-{connector_name}",
                group_id=None,  # assign() + dblog's offsets: no group coordinator involved
                enable_auto_commit=False,
                auto_offset_reset="earliest",  # never "latest": a signal sent before start must act
                metadata_max_age_ms=30_000,  # new partitions show within half a minute
                bootstrap_timeout_ms=self._connect_timeout_ms,
                **self._options,
            )
        except KafkaError as error:
            raise KafkaSignalChannelError(
                f"cannot reach Kafka at {bootstrap} for the signal topic {topic!r}: {error}"
            ) from error

    # --- reading ----------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> list[RawSignal]:
        """Signals for this connector that arrived since the last poll, at most `timeout_ms`
        waiting for them; in offset order within a partition, partitions in ascending order."""
        if self._consumer is None:
            raise KafkaSignalChannelError(f"the signal channel for topic {self.topic!r} is closed")
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._discover_if_due()
        while not self._assigned:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            time.sleep(min(remaining, max(self._next_discovery - time.monotonic(), 0.05)))
            self._discover_if_due()
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        batches = self._consumer.poll(timeout_ms=remaining_ms)
        signals: list[RawSignal] = []
        for partition in sorted(batches, key=lambda tp: tp.partition):
            for record in batches[partition]:
                stored = self._next.get(partition.partition)
                if stored is not None and record.offset < stored:  # the consumer reset an offset out of range
                    self._warn_past_end(stored, partition.partition, f"the consumer went back to offset {record.offset}")
                self._next[partition.partition] = record.offset + 1
                signal = self._signal(record)
                if signal is not None:
                    signals.append(signal)
        self._restart_partitions_past_their_end()
        return signals

    def offsets(self) -> dict[int, int]:
        """Next offset to read, per partition, counting every message returned or skipped so
        far. Store it with the engine's checkpoint and pass it back as `start_offsets`."""
        return dict(self._next)

    def _signal(self, record) -> RawSignal | None:
        where = f"kafka-{record.partition}-{record.offset}"
        try:
            key = record.key.decode("utf-8") if record.key is not None else None
        except UnicodeDecodeError:
            key = repr(record.key)
        if key != self.connector_name:
            log.info("ignoring Kafka signal %s on %s: its key %r is not this connector's name %r",
                     where, self.topic, key, self.connector_name)
            return None
        if record.value is None:
            log.info("ignoring Kafka signal %s on %s: a tombstone (null value)", where, self.topic)
            return None
        text = record.value.decode("utf-8", "replace")
        try:
            value = json.loads(text)
        except ValueError:
            return (where, None, text)
        if not isinstance(value, dict):
            return (where, None, text)
        given_id = value.get("id")
        signal_id = str(given_id) if isinstance(given_id, (str, int)) and str(given_id) else where
        if not isinstance(value.get("type"), str) or not value["type"]:
            return (signal_id, None, text)
        return (signal_id, value["type"], value.get("data"))

    # --- partitions -------------------------------------------------------------------------

    def _discover_if_due(self) -> None:
        """Assign the topic's partitions once it exists, and new ones when it grows."""
        now = time.monotonic()
        if now < self._next_discovery:
            return
        self._next_discovery = now + self.discovery_interval
        partitions = self._partitions()
        if not partitions or partitions <= self._assigned:
            return
        new = partitions - self._assigned
        self._assigned = partitions
        self._consumer.assign([TopicPartition(self.topic, p) for p in sorted(partitions)])
        for p in sorted(partitions):  # assign() forgets positions: set them all again
            tp = TopicPartition(self.topic, p)
            if p in self._next:
                self._consumer.seek(tp, self._next[p])
            else:
                self._consumer.seek_to_beginning(tp)
        log.info("reading signals from Kafka topic %s, partitions %s (offsets %s)",
                 self.topic, sorted(new), {p: self._next.get(p, "beginning") for p in sorted(new)})
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _partitions(self) -> set[int]:
        if self._assigned:  # the consumer keeps the topic's metadata fresh: ask its cache
            return set(self._consumer.partitions_for_topic(self.topic) or ())
        try:
            if self._admin is None:
                self._admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap,
                    client_id=f"dblog-signals-{self.connector_name}",
                    request_timeout_ms=self._connect_timeout_ms,
                    bootstrap_timeout_ms=self._connect_timeout_ms,
                    **self._options,
                )
            [description] = self._admin.describe_topics([self.topic])
        except KafkaError as error:
            log.warning("cannot look up the Kafka signal topic %s yet: %s", self.topic, error)
            return set()
        error_code = description.get("error_code")
        if error_code == _UNKNOWN_TOPIC:
            log.debug("the Kafka signal topic %s does not exist yet", self.topic)
            return set()
        if error_code:
            log.warning("cannot read the Kafka signal topic %s: the broker answers error code %s",
                        self.topic, error_code)
            return set()
        return {partition["partition_index"] for partition in description.get("partitions", ())}

    def _restart_partitions_past_their_end(self) -> None:
        for p in sorted(self._assigned):
            tp = TopicPartition(self.topic, p)
            end = self._consumer.highwater(tp)
            if end is not None and p in self._next and self._next[p] > end:
                self._warn_past_end(self._next.pop(p), p, f"its end is {end}")
                self._consumer.seek_to_beginning(tp)

    def _warn_past_end(self, stored: int, partition: int, detail: str) -> None:
        log.warning("the stored offset %d of Kafka signal topic %s partition %d is past its end (%s): the topic "
                    "was recreated or the broker lost it; reading that partition from the beginning",
                    stored, self.topic, partition, detail)

    # --- life cycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Idempotent. Commits nothing to Kafka: the offsets live in dblog's offsets file."""
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
            self._consumer = None

    def __enter__(self) -> "KafkaSignalChannel":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def send_signal(
    bootstrap: str,
    topic: str,
    connector_name: str,
    signal_type: str,
    data: dict | str | None,
    signal_id: str | None = None,
    timeout: float = 10.0,
    client_options: dict | None = None,
) -> str:
    """Send one signal as any Kafka client could: key = connector name, value = JSON
    `{"id", "type", "data"}` (Debezium reads `type` and `data`; `id` is ours, optional).
    Returns the id; raises KafkaSignalChannelError when the broker did not take it.
    `client_options`: TLS and SASL (dblog.sinks.kafka.security.client_options)."""
    signal_id = signal_id or str(uuid.uuid4())
    value = {"id": signal_id, "type": signal_type, "data": data}
    timeout_ms = int(timeout * 1000)
    try:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", max_block_ms=timeout_ms,
            request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms, **(client_options or {}),
        )
    except KafkaError as error:
        raise KafkaSignalChannelError(f"cannot reach Kafka at {bootstrap}: {error}") from error
    try:
        producer.send(topic, key=connector_name.encode("utf-8"), value=json.dumps(value).encode("utf-8")).get(timeout)
    except KafkaError as error:
        raise KafkaSignalChannelError(f"Kafka at {bootstrap} did not take the signal for topic {topic!r}: {error}") from error
    finally:
        producer.close(timeout)
    return signal_id
