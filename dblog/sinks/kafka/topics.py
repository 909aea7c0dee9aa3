"""The sink's topics: each named once and checked (names Kafka would refuse, two tables or
record kinds sharing one), those sink.kafka.transforms route records to, and the missing ones
created with kafka-python's admin client (as the signal channel and notifications use
kafka-python), open only while it creates them.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException
from kafka import KafkaAdminClient
from kafka.errors import KafkaError, for_code

from dblog.core.events import TableId
from dblog.sinks.base import SinkError, SinkUnavailable
from dblog.sinks.kafka.acls import missing_acl
from dblog.sinks.kafka.delivery import Delivery, describe
from dblog.sinks.kafka.transforms import TransformChain
from dblog.sinks.kafka.security import client_options
from dblog.sinks.kafka.settings import TopicNameError, check_topic

log = logging.getLogger("dblog.kafka")

TOPIC_ALREADY_EXISTS = 36  # Kafka error code
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31  # Kafka error codes


class Topics:
    """Where the sink writes: a table's topic, the schema change topic, the transaction and
    heartbeat topics, and the topics the transforms chose (`transforms`: None when there are none)."""

    def __init__(self, delivery: Delivery, connector: str, transforms: TransformChain | None) -> None:
        self._delivery = delivery
        self.settings = delivery.settings
        self._connector = connector
        self._transforms = transforms
        self._admin = None  # kafka-python's, to create topics: open only while it does
        self._existing: set[str] | None = None  # topics known to exist (create)
        self.of_table: dict[TableId, str] = {}  # table -> its topic, checked (and created)
        self._owners: dict[str, str] = {}  # topic -> what writes to it, to refuse two tables on one
        self._schema_topic: str | None = None
        self._named: dict[str, str] = {}  # "transaction" / "heartbeat" -> its topic
        self._routed: set[str] = set()  # topics the transforms routed records to, checked (and created)

    def connect(self) -> None:
        """The producer connected; when topics are created, the admin client too: a refused
        login stops dblog here, named."""
        self._delivery.connect(self._open_admin if self.settings.create_topics else lambda: None)

    def check(self) -> None:
        """Beside the tables' topics named so far, name those of the record kinds the settings
        ask for; then create the missing ones (where the transforms route them)."""
        wanted = list(self.of_table.values())
        if self.settings.schema_changes:
            wanted.append(self.schema_change_topic())
        if self.settings.transaction_metadata:
            wanted.append(self.named_topic("transaction"))
        if self.settings.heartbeat_interval_ms:
            wanted.append(self.named_topic("heartbeat"))
        if self._transforms is not None:  # the topics the records land on, after the routers
            wanted = [self._routed_topic(topic) for topic in wanted]
            self._routed.update(wanted)
        if self.settings.create_topics:
            self.create(wanted)

    def table_topic(self, table: TableId, create: bool = True) -> str:
        topic = self.of_table.get(table)
        if topic is not None:
            return topic
        try:
            topic = self.settings.table_topic(self._connector, table)
        except TopicNameError as error:
            raise SinkError(f"cannot write {table} to Kafka: {error}") from None
        self._claim(topic, f"table {table}")
        if create and self.settings.create_topics and self._transforms is None:  # else: the routed one (`routed`)
            self.create([topic])
        self.of_table[table] = topic
        return topic

    def schema_change_topic(self) -> str:
        if self._schema_topic is None:
            try:
                topic = self.settings.schema_topic(self._connector)
            except TopicNameError as error:
                raise SinkError(f"cannot write schema changes to Kafka: {error}") from None
            self._claim(topic, "the schema changes")
            self._schema_topic = topic
        return self._schema_topic

    def named_topic(self, kind: str) -> str:
        """The transaction metadata topic or the heartbeat topic: named, checked and claimed once."""
        topic = self._named.get(kind)
        if topic is None:
            settings = self.settings
            try:
                if kind == "transaction":
                    topic = settings.transaction_metadata_topic(self._connector)
                else:
                    topic = settings.heartbeat_records_topic(self._connector)
            except TopicNameError as error:
                raise SinkError(f"cannot write {kind} records to Kafka: {error}") from None
            self._claim(topic, f"the {kind} records")
            self._named[kind] = topic
        return topic

    def ready(self, topic: str) -> str:
        """`topic` (schema changes, transaction or heartbeat records), created before its records
        go to it as named (through the transforms they go where these route them: `routed`)."""
        if self.settings.create_topics and self._transforms is None and topic not in (self._existing or ()):
            self.create([topic])
        return topic

    def routed(self, topic: str) -> None:
        """A topic the transforms sent a record to: checked and created once (a router by the
        record's contents, unwrap's route_by_field, may choose one no check named; several tables
        may share one: Debezium allows it)."""
        if topic in self._routed:
            return
        try:
            check_topic(topic, "a topic chosen by sink.kafka.transforms", "fix the transforms or the routing column")
        except TopicNameError as error:
            raise SinkError(f"cannot write to Kafka: {error}") from None
        if self.settings.create_topics:
            self.create([topic])
        self._routed.add(topic)

    def _routed_topic(self, topic: str) -> str:
        routed = self._transforms.route(topic)
        if routed != topic:
            try:
                check_topic(routed, f"topic {topic!r} routed by sink.kafka.transforms",
                            "fix the transforms' replacement")
            except TopicNameError as error:
                raise SinkError(f"cannot write to Kafka: {error}") from None
        return routed

    def _claim(self, topic: str, owner: str) -> None:
        other = self._owners.setdefault(topic, owner)
        if other != owner:
            raise SinkError(
                f"{other} and {owner} would both write to Kafka topic {topic!r} (names are sanitized to letters, "
                "digits, '.', '_' and '-'); put {db} and {table} in sink.kafka.topic, or exclude one of them"
            )

    def _open_admin(self) -> KafkaAdminClient:
        if self._admin is None:
            delivery = self._delivery
            self._admin = KafkaAdminClient(bootstrap_servers=delivery.bootstrap, client_id=f"dblog-{self._connector}",
                                           request_timeout_ms=delivery.request_ms,
                                           bootstrap_timeout_ms=delivery.wait_ms, **client_options(delivery.security))
        return self._admin

    def close(self) -> None:
        """kafka-python's client keeps an I/O thread that wakes up and takes the GIL from the
        engine's loop: it lives only while topics are made."""
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception as error:  # noqa: BLE001
                log.debug("closing a Kafka client: %s", error)

    def create(self, topics: list[str]) -> None:
        """Create those of `topics` that do not exist, and wait until the producer sees them."""
        self.connect()
        if self._existing is not None and all(topic in self._existing for topic in topics):
            return
        try:
            self._open_admin()
            if self._existing is None:
                self._existing = set(self._admin.list_topics())
            missing = [topic for topic in dict.fromkeys(topics) if topic not in self._existing]
            if missing:
                settings = self.settings
                answer = self._admin.create_topics(
                    {topic: {"num_partitions": settings.partitions, "replication_factor": settings.replication_factor,
                             "configs": dict(settings.topic_properties)} for topic in missing},
                    raise_errors=False,
                )
                for result in answer.get("topics", []):
                    if result["error_code"] not in (0, TOPIC_ALREADY_EXISTS):
                        error = for_code(result["error_code"])
                        why = f"{error.__name__}{': ' + result['error_message'] if result.get('error_message') else ''}"
                        if result["error_code"] in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED):
                            raise SinkError(missing_acl("CREATE", "topic", result["name"], self._delivery.security,
                                                        self._delivery.bootstrap, why)
                                            + " (or create the topic yourself)")
                        if error.retriable:  # e.g. a controller election: try again later
                            raise SinkUnavailable(f"Kafka could not create topic {result['name']!r} now: {why}")
                        raise SinkError(
                            f"Kafka refused to create topic {result['name']!r}: {why}. Create it yourself (existing "
                            "topics are left as they are), or fix sink.kafka.partitions / replication_factor / "
                            "topic_properties, or the name (sink.kafka.topic, `name`)"
                        )
                log.info("created Kafka topics %s", ", ".join(missing))
            for topic in missing:
                self._wait_for_metadata(topic)
            self._existing.update(missing)
        except (KafkaError, KafkaException) as error:
            raise SinkUnavailable(
                f"could not create Kafka topics {', '.join(topics)} at {self._delivery.bootstrap}: {describe(error)}"
            ) from None
        finally:
            self.close()

    def _wait_for_metadata(self, topic: str) -> None:
        """Until the producer's metadata shows `topic` with its partitions (a new topic)."""
        wait = self._delivery.wait_seconds
        deadline = time.monotonic() + wait
        while True:
            known = self._delivery.producer.list_topics(topic, timeout=wait).topics.get(topic)
            if known is not None and known.error is None and known.partitions:
                return
            if time.monotonic() > deadline:
                raise SinkUnavailable(f"Kafka created topic {topic!r} but its metadata does not show it after "
                                      f"{wait:.0f} s")
            time.sleep(0.05)
