"""Every key of Debezium 3.6's MySQL connector and of Debezium Server has an answer in
`dblog convert-debezium`: mapped, ignored with the reason, or refused with the reason and the
remedy; none is refused at Debezium's default. The keys come from Debezium's own jars and
Debezium Server's sources (dblog.runtime.debezium_key_list, made by tools/debezium_keys.py),
each checked once."""

import pytest

from dblog.runtime.config import ConfigError
from dblog.runtime.debezium_config import convert, validated
from dblog.runtime.debezium_key_answers import ANSWERS, Ignored, Mapped, Refused, answer, example_key
from dblog.runtime.debezium_key_list import CONNECTOR_KEYS, DEBEZIUM_VERSION, SERVER_KEYS

SERVER = {"debezium.sink.type": "kafka", "debezium.source.connector.class": "io.debezium.connector.mysql.MySqlConnector"}


def test_the_list_is_debezium_3_6_and_each_key_appears_once():
    assert DEBEZIUM_VERSION.startswith("3.6.")
    keys = [key for key, _, _ in CONNECTOR_KEYS] + [key for key, _, _ in SERVER_KEYS]
    assert len(keys) == len(set(keys))
    assert len(CONNECTOR_KEYS) > 150  # ALL_FIELDS and the naming, signal, notification, history and Connect keys
    assert {"snapshot.fetch.size", "topic.heartbeat.name", "notification.enabled.channels", "custom.metric.tags",
            "tasks.max", "key.converter"} <= {key for key, _, _ in CONNECTOR_KEYS}


def _answered(found):
    if isinstance(found, Ignored):
        return bool(found.reason.strip())
    if isinstance(found, Refused):
        return bool(found.reason.strip()) and bool(found.remedy.strip())
    return isinstance(found, Mapped) and bool(found.to.strip())


@pytest.mark.parametrize("key, default, source", CONNECTOR_KEYS, ids=[key for key, _, _ in CONNECTOR_KEYS])
def test_every_connector_key_is_answered_and_accepted_at_its_default(key, default, source):
    written = example_key(key)
    assert _answered(answer(written)), f"{key} ({source}) has no answer with a reason (and a remedy if refused)"
    if default is None:
        return
    conversion = convert({written: default}, "connector.properties")  # raises if refused
    shown = [line for line in conversion.notes if line.startswith(written)]
    if isinstance(answer(written), (Ignored, Refused)):  # left to the table: a note says so
        assert shown, conversion.notes
    # Debezium Server: the same key under debezium.source., at its default, converts too
    convert({**SERVER, "debezium.source." + written: default}, "application.properties")


@pytest.mark.parametrize("key, default, source", SERVER_KEYS, ids=[key for key, _, _ in SERVER_KEYS])
def test_every_debezium_server_key_is_answered_and_accepted_at_its_default(key, default, source):
    written = example_key(key)
    found = answer(written)
    assert _answered(found), f"{key} ({source}) has no answer with a reason (and a remedy if refused)"
    if default is not None:
        convert({**SERVER, written: default}, "application.properties")


def test_refused_keys_name_reason_and_remedy_in_the_error():
    with pytest.raises(ConfigError) as raised:
        convert({"gtid.source.includes": "3e11fa47-71ca-11e1-9e33-c80aa9429562", "include.query": "true",
                 "schema.name.adjustment.mode": "avro", "event.deserialization.failure.handling.mode": "warn",
                 "inconsistent.schema.handling.mode": "skip"}, "c.properties")
    lines = {line.strip().split(":")[0]: line for line in str(raised.value).splitlines()[1:]}
    for key in ("gtid.source.includes", "include.query", "schema.name.adjustment.mode",
                "event.deserialization.failure.handling.mode", "inconsistent.schema.handling.mode"):
        reason, remedy = ANSWERS[key].reason, ANSWERS[key].remedy
        assert reason in lines[key] and remedy in lines[key]


def test_the_named_keys_of_issue_39():
    conversion = convert({
        "snapshot.fetch.size": "10000", "connect.timeout.ms": "5000", "include.query": "false",
        "event.deserialization.failure.handling.mode": "fail", "inconsistent.schema.handling.mode": "FAIL",
        "schema.name.adjustment.mode": "none", "custom.metric.tags": "env=prod,team=data",
        "heartbeat.interval.ms": "10000", "topic.heartbeat.name": "heartbeats",
        "notification.enabled.channels": "sink,log", "notification.sink.topic.name": "dbz-notifications",
    }, "c.properties", bootstrap_servers="k:9092")
    config = validated(conversion, "c.properties")
    assert config.notifications.kafka_topic == "dbz-notifications"
    assert config.sink.kafka.heartbeat_records_topic(config.name) == "heartbeats"  # Debezium's topic.heartbeat.name: the whole name
    notes = "\n".join(conversion.notes)
    for key in ("snapshot.fetch.size", "connect.timeout.ms", "custom.metric.tags"):
        assert f"{key} ignored: {ANSWERS[key].reason}" in notes
    for key in ("include.query", "event.deserialization.failure.handling.mode", "schema.name.adjustment.mode"):
        assert f"{key} = " in notes and "Debezium's default" in notes
    with pytest.raises(ConfigError, match="gtid.source.includes: .*; remove it; choose what is captured"):
        convert({"gtid.source.includes": "3e11fa47-71ca-11e1-9e33-c80aa9429562"})
    with pytest.raises(ConfigError, match="notification.enabled.channels: jmx: .*no JMX"):
        convert({"notification.enabled.channels": "jmx"})


def test_an_unknown_key_is_refused_as_unknown_with_the_version():
    with pytest.raises(ConfigError, match=r"snapshot\.fetch\.sise: not a key of Debezium 3\.6.*misspelling"):
        convert({"snapshot.fetch.sise": "1"})


def test_debezium_server_errors_name_keys_as_its_file_writes_them():
    """Debezium Server's keys are the connector's under debezium.source. and the producer's under
    debezium.sink.kafka.producer.: errors and notes name them so, not as a connector's."""
    with pytest.raises(ConfigError) as raised:
        validated(convert({**SERVER, "debezium.source.database.port": "70000",
                           "debezium.sink.kafka.producer.bootstrap.servers": "k:9092"}), "application.properties")
    assert "debezium.source.database.port (dblog's source.port)" in str(raised.value)
    notes = "\n".join(convert({**SERVER, "debezium.sink.kafka.producer.bootstrap.servers": "k:9092"}).notes)
    assert "debezium.source.schema.history.internal.store.only.captured.tables.ddl" in notes
    with pytest.raises(ConfigError, match="debezium.format.key / debezium.format.value = json"):
        convert({**SERVER, "debezium.format.value": "avro"})
