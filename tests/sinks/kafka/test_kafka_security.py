"""Kafka over TLS and SASL (`[kafka] security_protocol`, `sasl_*`, `ssl_*`): the config's checks,
the one function that makes kafka-python's options (`dblog.sinks.kafka.security.client_options`),
and, against a private broker that takes only SASL_SSL (`secured_broker`: Apache Kafka with ACLs
on, a test CA from trustme), every mechanism dblog offers for the data sink, the
notifications, the signal channel and `dblog signal --via kafka`; a wrong password, an unknown
CA and a host name the certificate does not hold stop dblog with the setting named; and the
kill -9 restart test over SASL_SSL."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import tomli_w
from support.fixtures.broker import USERS, kafka_section
from support.harness import EngineThread, config_data, make_config, published
from support.kafka_sink_runs import NORMAL_FORM, compare_topics, kill_9_restarts_replay_to_the_source
from support.kafka_topics import topic_records

from dblog.runtime.config import ConfigError, parse_config
from dblog.sinks.base import SinkError
from dblog.sinks.kafka.security import KafkaSecurity, client_options, diagnose, librdkafka_options

pytestmark = pytest.mark.timeout(300)
MECHANISMS = list(USERS)


# --- the settings (no server) -------------------------------------------------------------------


@pytest.mark.parametrize("kafka, named", [
    ({"security_protocol": "SASL_SSL"}, ["kafka.sasl_mechanism", "kafka.sasl_username", "kafka.sasl_password"]),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_password": "x"},
     ["kafka.sasl_username"]),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "u"},
     ["kafka.sasl_password (or sasl_password_env / sasl_password_file)"]),
    ({"sasl_username": "u", "sasl_password": "p"}, ["kafka.sasl_username", "kafka.sasl_password", "SASL_SSL"]),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p",
      "ssl_ca": "/ca.pem"}, ["kafka.ssl_ca", "does not use TLS"]),
    ({"security_protocol": "SSL", "ssl_cert": "/c.pem"}, ["kafka.ssl_cert and kafka.ssl_key"]),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "sasl_username": "u", "sasl_password": "p"},
     ["kafka.sasl_mechanism", "SCRAM-SHA-512"]),
    ({"security_protocol": "TLS"}, ["kafka.security_protocol", "SASL_SSL"]),
])
def test_inconsistent_security_settings_are_refused_naming_the_keys(kafka, named):
    with pytest.raises(ConfigError) as refused:
        parse_config({"kafka": {"bootstrap_servers": "k:9092", **kafka}})
    for name in named:
        assert name in str(refused.value)


def test_one_function_makes_the_client_options_and_hides_the_secrets(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KAFKA_PW", "env-secret-1")
    (tmp_path / "key-pw").write_text("file-secret-2\n")
    config = parse_config({"kafka": {
        "bootstrap_servers": "k:9093", "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "dblog", "sasl_password_env": "KAFKA_PW", "ssl_ca": None,
        "ssl_key_password_file": str(tmp_path / "key-pw"), "ssl_check_hostname": False}})
    security = config.kafka.security()
    options = client_options(security)
    assert options == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "dblog",
        "sasl_plain_password": "env-secret-1", "ssl_cafile": None, "ssl_certfile": None, "ssl_keyfile": None,
        "ssl_check_hostname": False, "ssl_password": "file-secret-2"}
    # kafka-python logs its whole configuration at debug level: the reprs show no secret
    for shown in (repr(options), str(options), repr(security), repr(config.kafka)):
        assert "env-secret-1" not in shown and "file-secret-2" not in shown
    assert client_options(KafkaSecurity()) == {"security_protocol": "PLAINTEXT"}
    monkeypatch.delenv("KAFKA_PW")
    with pytest.raises(ConfigError, match="kafka.sasl_password_env names 'KAFKA_PW'"):
        config.kafka.security()


def test_the_sinks_librdkafka_producer_gets_the_same_settings_under_its_names():
    security = KafkaSecurity("SASL_SSL", "SCRAM-SHA-256", "dblog", "pw-secret-3", ssl_ca="/ca.pem",
                             ssl_cert="/c.pem", ssl_key="/k.pem", ssl_key_password="key-secret-4",
                             ssl_check_hostname=False)
    options = librdkafka_options(security)
    assert options == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "dblog",
        "sasl.password": "pw-secret-3", "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/k.pem", "ssl.key.password": "key-secret-4",
        "ssl.endpoint.identification.algorithm": "none"}
    assert "pw-secret-3" not in repr(options) and "key-secret-4" not in repr(options)
    assert librdkafka_options(KafkaSecurity("SSL"))["ssl.ca.location"] == "probe"  # the system's trust store
    assert librdkafka_options(KafkaSecurity("SSL"))["ssl.endpoint.identification.algorithm"] == "https"
    assert librdkafka_options(None) == {"security.protocol": "PLAINTEXT"}
    from confluent_kafka import Producer  # librdkafka takes them (it refuses unknown names and values)

    Producer({"bootstrap.servers": "127.0.0.1:1", **librdkafka_options(KafkaSecurity(
        "SASL_PLAINTEXT", "PLAIN", "u", "p"))})


def test_an_unreadable_ca_file_is_refused_naming_the_setting(tmp_path):
    (tmp_path / "ca.pem").write_text("not a certificate")
    config = parse_config({"kafka": {"bootstrap_servers": "k:9093", "security_protocol": "SSL",
                                     "ssl_ca": str(tmp_path / "ca.pem")}})
    with pytest.raises(ConfigError, match="kafka.ssl_ca: cannot load"):
        config.kafka.security()


def test_a_connection_closed_midway_is_diagnosed_but_is_no_refusal():
    """A listener that closes every connection at once (a broker restarting, say): `diagnose`
    names what to check, but `refusal` (what the runtime's clients stop on before they connect)
    does not give up on it, as a retry may succeed; an unreachable broker is neither."""
    import socket
    import threading

    from dblog.sinks.kafka.security import refusal

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def close_each() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connection.close()

    threading.Thread(target=close_each, daemon=True).start()
    security = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "u", "p")
    try:
        assert "closed the connection during the login" in diagnose(security, f"127.0.0.1:{port}", timeout=5)
        assert refusal(security, f"127.0.0.1:{port}", timeout=5) is None
    finally:
        listener.close()
    unused = socket.socket()
    unused.bind(("127.0.0.1", 0))  # a port nothing listens on
    try:
        assert diagnose(security, f"127.0.0.1:{unused.getsockname()[1]}", timeout=5) is None
    finally:
        unused.close()


# --- against the secured broker ------------------------------------------------------------------


def _config_file(data: dict, path: Path) -> Path:
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_kafka_client_works_over_sasl_ssl(mechanism, mariadb, secured_broker, kafka_tls, database, loaded,
                                                tmp_path):
    """The sink writes the snapshot, the notifications are published, and a signal sent by
    `dblog signal --via kafka` reaches the engine's signal channel: all as `mechanism`'s user."""
    loaded(300)
    signals, notices = f"signals-{uuid.uuid4().hex[:8]}", f"notices-{uuid.uuid4().hex[:8]}"
    for topic in (signals, notices):
        secured_broker.create_topic(topic)
    name = f"c{uuid.uuid4().hex[:6]}"
    data = config_data(mariadb, database, tmp_path, name=name, kafka=kafka_section(secured_broker, kafka_tls, mechanism),
                       sink={"type": "kafka"}, snapshot={"startup": "never", "chunk_size": 100},
                       signals={"kafka_topic": signals, "kafka_poll_interval_seconds": 0.1},
                       notifications={"kafka_topic": notices})
    engine = EngineThread(parse_config(data))
    try:
        sent = subprocess.run(
            [sys.executable, "-m", "dblog.cli", "signal", "execute-snapshot", "--config",
             str(_config_file(data, tmp_path / "dblog.toml")), "--via", "kafka", "--tables", f"{database}\\.orders"],
            capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    finally:
        engine.stop()
    reader = secured_broker.client_options(*USERS[mechanism], mechanism)
    records = [r for batch in topic_records(secured_broker.bootstrap, f"{name}.{database}.orders",
                                            **reader).values() for r in batch]
    assert len(records) == 300
    types = [n["type"] for n in published(secured_broker.bootstrap, notices, **reader)]
    assert "STARTED" in types and "COMPLETED" in types


def _refused(mariadb, database, tmp_path, kafka: dict, **sections):
    """The error `dblog run` stops with, before streaming, for this [kafka] section."""
    data = config_data(mariadb, database, tmp_path, kafka=kafka, **sections)
    return subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config",
                           str(_config_file(data, tmp_path / "dblog.toml"))],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_stops_dblog_run_naming_the_setting(mechanism, mariadb, secured_broker, kafka_tls, database,
                                                            tmp_path):
    kafka = kafka_section(secured_broker, kafka_tls, mechanism, sasl_password="wrong-password-9")
    run = _refused(mariadb, database, tmp_path, kafka, sink={"type": "kafka"})
    assert run.returncode != 0
    assert "refused the login" in run.stderr and "kafka.sasl_password" in run.stderr, run.stderr
    assert "wrong-password-9" not in run.stderr + run.stdout


@pytest.mark.parametrize("via", ["signals", "notifications", "cli"])
def test_a_wrong_password_is_named_for_the_signal_channel_notifications_and_cli(via, mariadb, secured_broker,
                                                                                kafka_tls, database, tmp_path):
    kafka = kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-256", sasl_password="wrong-password-8")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    if via == "cli":
        data = config_data(mariadb, database, tmp_path, kafka=kafka, signals={"kafka_topic": topic})
        run = subprocess.run([sys.executable, "-m", "dblog.cli", "signal", "log", "--config",
                              str(_config_file(data, tmp_path / "dblog.toml")), "--via", "kafka", "hello"],
                             capture_output=True, text=True, timeout=120)
        message = run.stderr
        assert run.returncode != 0
    else:
        section = {"kafka_topic": topic}
        config = make_config(mariadb, database, tmp_path, kafka=kafka, snapshot={"startup": "never"},
                             **{via: section})
        with pytest.raises(ConfigError) as refused:
            EngineThread(config)
        message = str(refused.value)
    assert "refused the login" in message and "kafka.sasl_password" in message, message
    assert "wrong-password-8" not in message


def test_a_broker_certificate_from_an_unknown_ca_is_refused_naming_kafka_ssl_ca(mariadb, secured_broker, kafka_tls,
                                                                               database, tmp_path):
    kafka = kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-512", ssl_ca=kafka_tls["other_ca"])
    run = _refused(mariadb, database, tmp_path, kafka, sink={"type": "kafka"})
    assert run.returncode != 0
    assert "not signed by a CA dblog trusts" in run.stderr and "kafka.ssl_ca" in run.stderr, run.stderr


def test_the_sink_refuses_a_wrong_password_as_a_sink_error_not_an_outage(secured_broker, kafka_tls):
    """An outage (SinkUnavailable) is retried by `dblog run`'s supervisor; a refused login is not."""
    from dblog.sinks.kafka.settings import KafkaSinkSettings
    from dblog.sinks.kafka.sink import KafkaSink
    from dblog.sinks.base import SinkUnavailable

    user, _ = USERS["SCRAM-SHA-512"]
    sink = KafkaSink(secured_broker.bootstrap, KafkaSinkSettings(), "c", lambda table: None,
                     security=KafkaSecurity("SASL_SSL", "SCRAM-SHA-512", user, "nope", ssl_ca=kafka_tls["ca"]))
    with pytest.raises(SinkError) as refused:
        sink.check_routes([])
    assert not isinstance(refused.value, SinkUnavailable)
    assert "kafka.sasl_password" in str(refused.value)


def test_restart_after_kill_9_replays_to_the_source_over_sasl_ssl(mariadb, secured_broker, kafka_tls, database,
                                                                 tmp_path):
    kill_9_restarts_replay_to_the_source(mariadb, database, tmp_path,
                                         kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-512"),
                                         **secured_broker.client_options(*USERS["SCRAM-SHA-512"], "SCRAM-SHA-512"))


@pytest.mark.parametrize("missing", ["WRITE", "CREATE"])
def test_a_user_without_an_acl_stops_dblog_naming_it_and_nothing_is_lost(missing, mariadb, secured_broker, kafka_tls,
                                                                         database, loaded, tmp_path):
    """ACLs are on: a user allowed all the sink needs but `missing` on its topics makes `dblog run`
    stop (not retry) with the operation, the topic, the principal and the kafka-acls line that
    grants it; once granted, a rerun delivers everything (the topics equal the source)."""
    from dblog.demo.workload import tables

    loaded(200)
    user, password = f"acl-{missing.lower()}-{uuid.uuid4().hex[:6]}", "acl-secret-4"
    secured_broker.create_user(user, password, "SCRAM-SHA-512")
    for operation in {"DESCRIBE", "CREATE", "WRITE"} - {missing}:
        secured_broker.allow(user, operation, "TOPIC", "*")
    secured_broker.allow(user, "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster")
    name = f"a{uuid.uuid4().hex[:6]}"
    kafka = {**kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-512"), "sasl_username": user,
             "sasl_password": password}
    run = _refused(mariadb, database, tmp_path, kafka, name=name, sink={"type": "kafka", "kafka": NORMAL_FORM})
    assert run.returncode != 0
    for named in (f"denied {missing} on topic '{name}", f"User:{user}", "kafka-acls",
                  f"--operation {missing.title()} --topic {name}"):
        assert named in run.stderr, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    secured_broker.allow(user, missing, "TOPIC", "*")
    EngineThread(parse_config(config_data(mariadb, database, tmp_path, name=name, kafka=kafka,
                                          sink={"type": "kafka", "kafka": NORMAL_FORM}))).until_caught_up()
    result = compare_topics(mariadb, secured_broker.bootstrap, name, tables(database),
                            **secured_broker.client_options())  # the admin reads: the user may not
    assert result.equal, result.summary()


def test_dblog_check_names_the_acl_a_user_lacks_on_each_topic_it_uses(mariadb, secured_broker, kafka_tls, database,
                                                                      loaded, tmp_path):
    """`dblog check` asks the broker what this user may do on the topics that exist: a missing
    WRITE on a data or notification topic and a missing READ on the signal topic each fail their
    line with the kafka-acls command that grants it; once granted, the same lines pass."""
    import json

    from dblog.demo.workload import tables

    loaded(20)
    user, password = f"acl-check-{uuid.uuid4().hex[:6]}", "acl-secret-5"
    secured_broker.create_user(user, password, "SCRAM-SHA-512")
    secured_broker.allow(user, "DESCRIBE", "TOPIC", "*")
    name, signals, notifications = (f"{prefix}{uuid.uuid4().hex[:6]}" for prefix in ("c", "signals-", "notes-"))
    kafka = {**kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-512"), "sasl_username": user,
             "sasl_password": password}
    data = config_data(mariadb, database, tmp_path, name=name, kafka=kafka, sink={"type": "kafka"},
                       signals={"kafka_topic": signals}, notifications={"kafka_topic": notifications})
    settings = parse_config(data).sink.kafka
    data_topics = [settings.table_topic(name, table) for table in tables(database)]
    data_topics += [settings.schema_topic(name)] if settings.schema_changes else []
    for topic in (*data_topics, signals, notifications):
        secured_broker.create_topic(topic)
    config = _config_file(data, tmp_path / "dblog.toml")

    def check_lines() -> dict[str, dict]:
        run = subprocess.run([sys.executable, "-m", "dblog.cli", "check", "--format", "json", "--config", str(config)],
                             capture_output=True, text=True, timeout=180)
        return {line["check"]: line for line in json.loads(run.stdout)["checks"]}

    lines = check_lines()
    wanted = {"Kafka data topics": ("WRITE", data_topics), "Kafka signal topic": ("READ", [signals]),
              "Kafka notification topic": ("WRITE", [notifications])}
    for check, (operation, topics) in wanted.items():
        line = lines[check]
        assert line["status"] == "fail", line
        text = json.dumps(line)
        assert f"denies {operation}" in text and f"User:{user}" in text, line
        for topic in topics:
            assert f"--operation {operation.title()} --topic {topic}" in text, line
    secured_broker.allow(user, "WRITE", "TOPIC", "*")
    secured_broker.allow(user, "READ", "TOPIC", signals)
    lines = check_lines()
    assert {check: lines[check]["status"] for check in wanted} == dict.fromkeys(wanted, "ok"), lines
    assert "Kafka data topics" in lines and f"all {len(data_topics)} exist" in lines["Kafka data topics"]["detail"]
