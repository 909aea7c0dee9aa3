"""Delivery: the librdkafka producer that takes the sink's records, and what its errors mean.

At-least-once, as Debezium's: `send` hands a record to the producer (confluent-kafka:
asynchronous, acks=all, idempotent, one request in flight per broker, the `murmur2_random`
partitioner: murmur2 of the key bytes, as Java's and kafka-python's, so all changes of a key land
on one partition in order); `flush` returns only once every record is acknowledged and raises
otherwise (librdkafka reports each record it could not deliver, and the first is kept). A broker
that cannot be reached, or a producer librdkafka gave up, raises `SinkUnavailable` (`dblog run`
retries from the last commit); a record Kafka cannot take raises `SinkError`, named.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import KafkaError as DeliveryError
from confluent_kafka import KafkaException, Producer
from kafka.errors import KafkaError

from dblog.sinks.base import SinkError, SinkUnavailable
from dblog.sinks.kafka.acls import missing_acl
from dblog.sinks.kafka.security import KafkaSecurity, diagnose, librdkafka_options, quiet_client_logs
from dblog.sinks.kafka.settings import KafkaSinkSettings

log = logging.getLogger("dblog.kafka")
librdkafka_log = logging.getLogger("librdkafka")  # the producer's own log (quieted by security.quiet_client_logs)

BATCH_BYTES = 1_000_000  # librdkafka's default batch.size
# Delivery failures worth retrying from the last commit (the brokers, not the records): librdkafka's
# local codes; Kafka's own retriable errors say so themselves (KafkaError.retriable()).
_OUTAGES = {DeliveryError._MSG_TIMED_OUT, DeliveryError._TIMED_OUT, DeliveryError._TRANSPORT,
            DeliveryError._ALL_BROKERS_DOWN, DeliveryError._RESOLVE, DeliveryError._PURGE_QUEUE,
            DeliveryError._PURGE_INFLIGHT, DeliveryError.UNKNOWN_TOPIC_OR_PART, DeliveryError._UNKNOWN_TOPIC,
            DeliveryError._UNKNOWN_PARTITION, DeliveryError.LEADER_NOT_AVAILABLE,
            DeliveryError.NOT_LEADER_FOR_PARTITION, DeliveryError.REQUEST_TIMED_OUT,
            DeliveryError.NOT_ENOUGH_REPLICAS, DeliveryError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}


class Delivery:
    """The producer, connected on first use; `produce` is its own method once connected (the
    hot path calls it directly and hands what it raises to `send_refused`)."""

    def __init__(self, bootstrap_servers: str, settings: KafkaSinkSettings, connector: str,
                 security: KafkaSecurity) -> None:
        self.bootstrap = bootstrap_servers
        self.settings = settings
        self.security = security
        self._connector = connector
        self.producer: Producer | None = None
        self.produce: Callable | None = None
        # How long a first connection or a topic's metadata may take, and a request (set at connect)
        self.wait_seconds = 30.0
        self.wait_ms = self.request_ms = 0
        self._failure: tuple[str, DeliveryError] | None = None  # the first record Kafka refused
        self._last_client_error: DeliveryError | None = None
        self._failures = 0
        self.produced = 0  # records handed to the producer (tombstones included)

    def connect(self, then: Callable[[], object] = lambda: None) -> None:
        """Connect unless connected: the brokers answer, then `then()` (the admin client's
        login), under the same errors."""
        if self.producer is not None:
            return
        quiet_client_logs()
        settings = self.settings
        delivery_ms = int(settings.delivery_timeout_seconds * 1000)
        request_ms = max(500, min(30_000, delivery_ms - settings.linger_ms))
        # The first connection, a topic's metadata: under a minute, which `dblog run`'s supervisor
        # would count as a steady run (restarting its give-up clock) while the brokers are down.
        wait_ms = max(1000, min(30_000, delivery_ms))
        if self.security.protocol != "PLAINTEXT":  # a wrong password or CA: say so now, not after a timeout
            problem = diagnose(self.security, self.bootstrap, timeout=wait_ms / 1000)
            if problem is not None:
                raise SinkError(f"cannot connect to the Kafka brokers at {self.bootstrap} "
                                f"({self.security.describe()}): {problem}")
        self.wait_seconds = wait_ms / 1000
        try:
            self.producer = Producer({
                "bootstrap.servers": self.bootstrap,
                **librdkafka_options(self.security),
                "client.id": f"dblog-{self._connector}",
                "acks": "all" if settings.acks == "all" else 1,
                "enable.idempotence": settings.acks == "all",  # no duplicates from the producer's retries
                "max.in.flight.requests.per.connection": 1,  # a retried batch never overtakes the next one
                "partitioner": "murmur2_random",  # Java's (and kafka-python's) partition of a key
                "linger.ms": settings.linger_ms,
                "compression.type": settings.compression,
                "message.timeout.ms": max(delivery_ms, request_ms + settings.linger_ms),
                "request.timeout.ms": request_ms,
                "message.max.bytes": settings.max_request_size,
                "batch.size": min(settings.max_request_size, BATCH_BYTES),
                "queue.buffering.max.kbytes": settings.max_buffer_bytes // 1024,  # full: `_make_room` waits
                "queue.buffering.max.messages": settings.max_buffer_records,
                # Reports of failed records only: a Python call per acknowledged record would cost
                # about as much as encoding it; `flush()` tells that the others were acknowledged.
                "delivery.report.only.error": True,
                "on_delivery": self._failed,
                "error_cb": self._client_error,
                "logger": librdkafka_log,
            })
            self.produce = self.producer.produce
            self.producer.list_topics(timeout=self.wait_seconds)  # connected: the brokers answer
            self.request_ms, self.wait_ms = request_ms, wait_ms
            then()
        except (KafkaException, KafkaError) as error:
            self.close()
            problem = diagnose(self.security, self.bootstrap)
            if problem is not None:  # retrying cannot help: stop and say which setting is wrong
                raise SinkError(f"cannot connect to the Kafka brokers at {self.bootstrap} ({self.security.describe()}): "
                                f"{problem}") from None
            raise SinkUnavailable(
                f"cannot reach the Kafka brokers at {self.bootstrap} ({describe(error)}); "
                "check kafka.bootstrap_servers and that the brokers run"
            ) from None

    def send(self, topic: str, key: bytes | None, value: bytes | None,
             headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        try:
            self.produce(topic, value, key, headers=headers, partition=partition)
        except (BufferError, KafkaException) as error:
            self.send_refused(error, topic, key, value, headers, partition)
            return
        self.produced += 1

    def send_refused(self, error: BufferError | KafkaException, topic: str, key: bytes | None, value: bytes | None,
                     headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        """`produce()` did not take the record: its queue is full (wait for acknowledgements to
        make room, then send it), or it refused it (raises, named)."""
        if isinstance(error, BufferError):
            self._make_room(topic, key, value, headers, partition)
            self.produced += 1
        else:
            self._refused(topic, error.args[0], len(value or b"") + len(key or b""))

    def poll(self) -> None:
        """Serve the producer's callbacks now (a record that should leave at once: a heartbeat)."""
        self.producer.poll(0)

    def _make_room(self, topic: str, key: bytes | None, value: bytes | None,
                   headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        deadline = time.monotonic() + self.settings.delivery_timeout_seconds + 30
        while True:
            self.producer.poll(0.05)
            try:
                self.produce(topic, value, key, headers=headers, partition=partition)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise SinkUnavailable(f"Kafka at {self.bootstrap} did not acknowledge the records in time: "
                                          "the producer's queue stayed full") from None
            except KafkaException as error:
                self._refused(topic, error.args[0], len(value or b"") + len(key or b""))

    def _refused(self, topic: str, error: DeliveryError, size: int) -> None:
        """`produce()` raised: an outage, or a producer librdkafka gave up (a fatal error of the
        idempotent producer: a new one, after the restart from the last commit, starts clean)
        is retried by `dblog run`; a record Kafka cannot take stops dblog, named."""
        if error.fatal() or error.retriable() or error.code() in _OUTAGES:
            raise SinkUnavailable(f"the Kafka producer for {self.bootstrap} cannot go on ({describe(error)}); the "
                                  "offsets stay at the last commit and dblog produces again from there") from None
        raise SinkError(self._refusal(topic, error, size)) from None

    def _failed(self, error: DeliveryError, message) -> None:  # a record not delivered (from poll/flush)
        self._failures += 1
        if self._failure is None:
            self._failure = (message.topic(), error)

    def _client_error(self, error: DeliveryError) -> None:  # e.g. all brokers down (from poll/flush)
        self._last_client_error = error
        log.debug("Kafka producer: %s", describe(error))

    def _refusal(self, topic: str, error, size: int | None = None) -> str:
        if isinstance(error, DeliveryError) and error.code() == DeliveryError.MSG_SIZE_TOO_LARGE:
            return (f"a record for Kafka topic {topic!r}{f' ({size:,} bytes)' if size else ''} is larger than "
                    f"sink.kafka.max_request_size ({self.settings.max_request_size:,} bytes) or the broker's "
                    f"max.message.bytes: raise both ({describe(error)})")
        if isinstance(error, DeliveryError) and error.code() == DeliveryError.TOPIC_AUTHORIZATION_FAILED:
            return missing_acl("WRITE", "topic", topic, self.security, self.bootstrap, describe(error))
        return f"Kafka refused a record for topic {topic!r}: {describe(error)}"

    def flush(self) -> None:
        """Return once Kafka acknowledged every record sent so far; raise otherwise (the engine
        then keeps its offsets where they were)."""
        if self.producer is not None:
            left = self.producer.flush(self.settings.delivery_timeout_seconds + 30)
            if left:
                raise SinkUnavailable(f"Kafka at {self.bootstrap} did not acknowledge {left:,} record(s) in time"
                                      + (f" ({describe(self._last_client_error)})" if self._last_client_error else ""))
        if self._failure is not None:
            topic, error = self._failure
            count = self._failures
            if error.retriable() or error.fatal() or error.code() in _OUTAGES:
                missing = error.code() in (DeliveryError.UNKNOWN_TOPIC_OR_PART, DeliveryError._UNKNOWN_TOPIC)
                raise SinkUnavailable(
                    f"Kafka at {self.bootstrap} did not acknowledge {count:,} record(s) (first on topic {topic!r}: "
                    f"{describe(error)}); the offsets stay at the last commit and dblog produces "
                    "again from there once the brokers answer"
                    + (" (does the topic exist? create it, or set sink.kafka.create_topics = true)"
                       if missing and not self.settings.create_topics else "")
                )
            raise SinkError(self._refusal(topic, error) + f" ({count:,} record(s) not written); the offsets stay "
                            "at the last commit")

    def close(self) -> None:
        """Drop what is not acknowledged (it was not committed: a restart produces it again)."""
        producer, self.producer = self.producer, None
        if producer is not None:
            try:
                producer.purge()  # what is queued or in flight: dropped, not waited for
                producer.flush(1)  # the purge's reports
            except Exception as error:  # noqa: BLE001 - closing must not hide the error that stopped the engine
                log.debug("closing the Kafka producer: %s", error)


def describe(error) -> str:
    """A Kafka client's error as messages name it: its name and its text."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], DeliveryError):
        error = error.args[0]
    if isinstance(error, DeliveryError):
        return f"{error.name()}: {error.str()}"
    text = str(error)
    name = type(error).__name__
    return text if name in text else f"{name}: {text}" if text else name
