"""How the runtime meets the Kafka sink (`sink.type = "kafka"`): its settings are `[sink.kafka]`
(dblog.sinks.kafka.settings) and its brokers `[kafka]`'s, which the signal channel and the
notifications share; it writes Debezium's heartbeats; `dblog check` proves its data topics exist
or may be created."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dblog.sinks.base import Sink
from dblog.sinks.checks import CheckResult, PreflightRun, listed
from dblog.sinks.kafka.acls import denied_topics, grant_lines
from dblog.sinks.kafka.settings import KafkaSinkSettings, TopicNameError
from dblog.sinks.registry import HeartbeatSettings, SinkContext, SinkPlugin


class KafkaPlugin(SinkPlugin):
    name = "kafka"
    title = "the Kafka sink"
    settings = KafkaSinkSettings  # [sink.kafka], type = "kafka" only
    uses_kafka_brokers = True
    broker_checks = ("data topics",)

    def build(self, context: SinkContext) -> Sink:
        from dblog.sinks.kafka.sink import KafkaSink

        config = context.config
        return KafkaSink(config.kafka.bootstrap_servers, config.sink.kafka, config.name, context.schema_of,
                         context.captures, config.kafka.security(), config.columns, context.definitions)

    def config_problem(self, config: Any, chosen: bool) -> str | None:
        if config.sink.kafka.message_key and not chosen:
            return (f"sink.kafka.message_key keys the Kafka sink's records, and the sink is {config.sink.type!r}: "
                    'set sink.type = "kafka", or remove sink.kafka.message_key')
        return None

    def heartbeat(self, config: Any) -> HeartbeatSettings | None:
        settings = config.sink.kafka
        if not settings.heartbeat_interval_ms:
            return None
        return HeartbeatSettings(settings.heartbeat_interval_ms, settings.heartbeat_action_query)

    def check_brokers(self, run: PreflightRun, admin: Any, existing: set[str]) -> Iterator[CheckResult]:
        yield _data_topics(run, admin, existing)


def _data_topics(run: PreflightRun, admin: Any, existing: set[str]) -> CheckResult:
    check = "Kafka data topics"
    settings = run.config.sink.kafka
    name = run.config.name
    try:
        wanted = [settings.table_topic(name, table) for table in run.captured or ()]
        if settings.schema_changes:
            wanted.append(settings.schema_topic(name))
        wanted = [settings.routed_topic(topic) for topic in wanted]  # where sink.kafka.transforms route them
    except TopicNameError as error:
        return CheckResult(check, "fail", str(error), "fix sink.kafka.topic or the connector's name")
    wanted = list(dict.fromkeys(wanted))
    missing = [topic for topic in wanted if topic not in existing]
    tables = "" if run.captured is not None else " (captured tables unknown: the source is unreachable)"
    denied = denied_topics(admin, [topic for topic in wanted if topic in existing], "WRITE")
    if denied:
        kafka = run.config.kafka
        return CheckResult(check, "fail", f"Kafka denies WRITE to {listed(denied)} to this user: no ACL allows it",
                           "grant it with " + grant_lines("WRITE", denied, kafka.security(), kafka.bootstrap_servers))
    if not missing:
        return CheckResult(check, "ok", f"all {len(wanted)} exist{tables}")
    if not settings.create_topics:  # as Kafka Connect without topic.creation.*: the broker's auto-create
        return CheckResult(check, "warn", f"missing: {listed(missing)}{tables}",
                           "a broker with auto.create.topics.enable (Kafka's default) creates them when dblog "
                           "first writes to them, with its num.partitions and default.replication.factor; "
                           "else create them, or set sink.kafka.create_topics = true")
    refusal = run.creation_refused(admin, missing, settings.partitions, settings.replication_factor,
                                   dict(settings.topic_properties))
    if refusal:
        return CheckResult(check, "fail", f"Kafka would not create {refusal}",
                           "grant this user CREATE on the cluster or on these topics (ACLs), or create them "
                           "yourself; or fix sink.kafka.partitions / replication_factor / topic_properties")
    return CheckResult(check, "ok", f"{len(wanted) - len(missing)} exist, {len(missing)} to be created at start "
                                    f"(this user may create them): {listed(missing)}{tables}")


PLUGIN = KafkaPlugin()
