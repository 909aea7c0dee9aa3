"""Debezium's transaction metadata and heartbeat keys in the config import (`dblog.runtime.
debezium_config`): Kafka Connect JSON and Debezium Server forms map to `sink.kafka.*` with
Debezium's topic names (topic.delimiter included), a heartbeat.action.query without heartbeats is
ignored with a note as Debezium ignores it, and the settings' own validation names the keys."""

from __future__ import annotations

import json

import pytest

from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.debezium_config import convert, read_connector_config, validated
from dblog.runtime.java_properties import parse_properties
from dblog.sinks.kafka.settings import KafkaSinkSettings

KAFKA = "kafka-1:9092"
CONNECTOR = {"connector.class": "io.debezium.connector.mysql.MySqlConnector", "topic.prefix": "shop"}


def test_connect_json_maps_transaction_metadata_and_heartbeats(tmp_path):
    path = tmp_path / "connector.json"
    path.write_text(json.dumps({"name": "c", "config": {
        **CONNECTOR, "provide.transaction.metadata": "true", "heartbeat.interval.ms": 5000,
        "heartbeat.action.query": "UPDATE ops.heartbeat SET ts = NOW() WHERE id = 1"}}))
    conversion = convert(read_connector_config(path), bootstrap_servers=KAFKA)
    assert not conversion.refused
    kafka = conversion.data["sink"]["kafka"]
    assert {key: kafka[key] for key in kafka if "transaction" in key or "heartbeat" in key} == {
        "transaction_metadata": True, "heartbeat_interval_ms": 5000,
        "heartbeat_action_query": "UPDATE ops.heartbeat SET ts = NOW() WHERE id = 1"}
    config = validated(conversion, "connector.json")
    assert config.sink.kafka.transaction_metadata_topic(config.name) == "shop.transaction"
    assert config.sink.kafka.heartbeat_records_topic(config.name) == "__debezium-heartbeat.shop"


def test_debezium_server_form_and_debeziums_topic_names():
    conversion = convert(parse_properties("\n".join([
        "debezium.sink.type=kafka",
        "debezium.sink.kafka.producer.bootstrap.servers=kafka:9092",
        "debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector",
        "debezium.source.topic.prefix=shop",
        "debezium.source.topic.delimiter=_",
        "debezium.source.provide.transaction.metadata=true",
        "debezium.source.topic.transaction=tx",
        "debezium.source.heartbeat.interval.ms=1000",
        "debezium.source.topic.heartbeat.prefix=beats",
    ])))
    assert not conversion.refused
    config = validated(conversion, "application.properties")
    settings = config.sink.kafka
    assert settings.transaction_metadata and settings.heartbeat_interval_ms == 1000
    # Debezium's naming strategy: <prefix><delimiter><topic.transaction>, <heartbeat prefix><delimiter><prefix>
    assert settings.transaction_metadata_topic("shop") == "shop_tx"
    assert settings.heartbeat_records_topic("shop") == "beats_shop"


def test_defaults_write_no_topic_setting_and_an_action_query_without_heartbeats_is_ignored():
    conversion = convert({**CONNECTOR, "provide.transaction.metadata": "false", "heartbeat.interval.ms": "0",
                          "topic.transaction": "transaction", "heartbeat.action.query": "SELECT 1"},
                         bootstrap_servers=KAFKA)
    assert not conversion.refused
    kafka = conversion.data["sink"]["kafka"]
    assert not [key for key in kafka if "transaction" in key or "heartbeat" in key]
    assert any(note.startswith("heartbeat.action.query ignored: heartbeat.interval.ms is 0")
               for note in conversion.notes)


@pytest.mark.parametrize("settings, message", [
    ({"heartbeat_action_query": "SELECT 1"}, "heartbeat_interval_ms is 0"),
    ({"heartbeat_interval_ms": 1000, "heartbeat_action_query": "  "}, "empty: give the statement"),
    ({"heartbeat_interval_ms": -1}, "greater than or equal to 0"),
    ({"transaction_topic": "{name}.{db}"}, "unknown placeholder {db}"),
    ({"heartbeat_topic": "beats/{name}"}, "Kafka topic names allow only"),
])
def test_bad_settings_are_refused_naming_the_key(settings, message):
    with pytest.raises(ConfigError) as raised:
        parse_config({"sink": {"type": "kafka", "kafka": settings}, "kafka": {"bootstrap_servers": KAFKA}},
                     "dblog.toml")
    assert message in str(raised.value) and "sink.kafka" in str(raised.value)


def test_topic_names_follow_the_connector_name():
    settings = KafkaSinkSettings(transaction_metadata=True, heartbeat_interval_ms=10)
    assert settings.transaction_metadata_topic("inventory") == "inventory.transaction"
    assert settings.heartbeat_records_topic("inventory") == "__debezium-heartbeat.inventory"
