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


# --- Debezium Server's environment variables; the Kafka Connect worker's converters ----------

SERVER_FILE = "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector\n"


def test_environment_variables_are_debezium_server_keys_as_it_maps_them(tmp_path):
    from dblog.runtime.debezium_config import read_debezium_settings
    from dblog.runtime.debezium_environment import server_key

    assert server_key("DEBEZIUM_SOURCE_DATABASE_HOSTNAME") == "debezium.source.database.hostname"
    assert server_key("QUARKUS_HTTP_PORT") == "quarkus.http.port"
    assert server_key("HOME") is None and server_key("PATH_INFO") is None and server_key("DEBEZIUM-X_Y") is None
    path = tmp_path / "application.properties"
    path.write_text(SERVER_FILE + "debezium.source.database.hostname=from-file\ndebezium.source.topic.prefix=f\n")
    env_file = tmp_path / "debezium.env"
    env_file.write_text("# the container's\nexport DEBEZIUM_SOURCE_TOPIC_PREFIX='from-env-file'\n"
                        "DEBEZIUM_SOURCE_DATABASE_PORT=3307\n")
    environ = {"DEBEZIUM_SOURCE_DATABASE_HOSTNAME": "from-env", "DEBEZIUM_SOURCE_DATABASE_PASSWORD": "s3cret",
               "DEBEZIUM_SINK_KAFKA_PRODUCER_BOOTSTRAP_SERVERS": "k:9092", "QUARKUS_HTTP_PORT": "8088",
               "HOME": "/root"}
    settings, notes = read_debezium_settings(path, environ, (env_file,))
    config = validated(convert(settings), "application.properties")
    assert (config.source.host, config.source.port, config.name) == ("from-env", 3307, "from-env-file")
    # the password stays in the environment: dblog reads the variable when it connects
    assert config.source.password_env == "DEBEZIUM_SOURCE_DATABASE_PASSWORD" and "s3cret" not in "".join(notes)
    assert config.http.port == 8088 and config.kafka.bootstrap_servers == "k:9092"
    assert "debezium.source.database.hostname from DEBEZIUM_SOURCE_DATABASE_HOSTNAME (the environment)" in notes
    # a Kafka Connect connector's configuration is never read from the environment
    connector = tmp_path / "connector.properties"
    connector.write_text("database.hostname=from-file\n")
    assert read_debezium_settings(connector, environ)[0] == {"database.hostname": "from-file"}


def test_convert_debezium_reads_the_environment_and_env_files(tmp_path):
    import os
    import subprocess
    import sys
    import tomllib

    env_file = tmp_path / "server.env"
    env_file.write_text("DEBEZIUM_SINK_TYPE=kafka\nDEBEZIUM_SOURCE_TOPIC_PREFIX=shop\n"
                        "DEBEZIUM_SINK_KAFKA_PRODUCER_BOOTSTRAP_SERVERS=k:9092\n")
    env = {**os.environ, "DEBEZIUM_SOURCE_DATABASE_HOSTNAME": "db.internal"}
    done = subprocess.run([sys.executable, "-m", "dblog.cli", "convert-debezium", "--env-file", str(env_file)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    converted = tomllib.loads(done.stdout)
    assert converted["name"] == "shop" and converted["source"]["host"] == "db.internal"
    quiet = subprocess.run([sys.executable, "-m", "dblog.cli", "convert-debezium", "--no-environment", "--env-file",
                            str(env_file)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert quiet.returncode == 0 and "db.internal" not in quiet.stdout, quiet.stderr


def test_converters_come_from_the_worker_and_json_assumed_without_it_is_a_warning(tmp_path):
    bare = convert({"topic.prefix": "shop"}, bootstrap_servers="k:9092")
    assert any("JsonConverter with schemas.enable = true assumed" in line and "--worker-config" in line
               for line in bare.warnings)
    worker = {"bootstrap.servers": "worker-kafka:9092", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
              "producer.linger.ms": "25", "group.id": "connect-cluster"}
    conversion = convert({"topic.prefix": "shop"}, worker=worker)
    assert not conversion.warnings
    config = validated(conversion, "c.properties")
    assert config.sink.kafka.schemas is False and config.sink.kafka.linger_ms == 25
    assert config.kafka.bootstrap_servers == "worker-kafka:9092"
    # the connector's own settings win over the worker's
    assert convert({"value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true"},
                   worker=worker, bootstrap_servers="k:9092").data["sink"]["kafka"]["schemas"] is True
    with pytest.raises(ConfigError, match=r"producer.acks \(the worker's\): '0'"):
        convert({}, worker={**worker, "producer.acks": "0"})


@pytest.mark.parametrize("strategy, delimiter, expected", [
    # What Debezium 3.6.3's classes name inventory.orders with topic.prefix=dbserver1 (asked with JPype):
    # a MySQL TableId has a catalog (the database) and no schema, and SchemaTopicNamingStrategy
    # leaves out what is null.
    ("io.debezium.schema.SchemaTopicNamingStrategy", None, "dbserver1.orders"),
    ("io.debezium.schema.SchemaTopicNamingStrategy", "_", "dbserver1_orders"),
    ("io.debezium.schema.DefaultTopicNamingStrategy", None, "dbserver1.inventory.orders"),
    ("io.debezium.schema.DefaultTopicNamingStrategy", "_", "dbserver1_inventory_orders"),
    (None, None, "dbserver1.inventory.orders"),  # the MySQL connector's default: BinlogConnectorConfig's Default…
])
def test_topic_naming_strategies_name_mysql_topics_as_debezium(strategy, delimiter, expected):
    from dblog.core.events import TableId

    settings = {"topic.prefix": "dbserver1"}
    if strategy:
        settings["topic.naming.strategy"] = strategy
    if delimiter:
        settings["topic.delimiter"] = delimiter
    config = validated(convert(settings, bootstrap_servers="k:9092"), "c.properties")
    assert config.sink.kafka.table_topic(config.name, TableId("inventory", "orders")) == expected


def test_a_signal_topic_on_another_cluster_than_the_workers_names_the_worker():
    with pytest.raises(ConfigError, match=r"another cluster than the records' \(the worker's bootstrap.servers\)"):
        convert({"signal.enabled.channels": "kafka", "signal.kafka.bootstrap.servers": "other:9092"},
                worker={"bootstrap.servers": "worker-kafka:9092"})
