"""Security (issue 6 item 6, issue 27 item 3): credentials never leak, signals come only from the
configured channel, least privileges per watermark mode. `test_secrets_never_in_any_output`
runs the engine with every secret setting of SECRET_SETTINGS in each form and greps every
output (`test_tls_key_passphrase_never_in_any_output` does so for source.tls.key_password,
against the TLS-only MariaDB); the secrets convention itself and the placeholders: tests/ops/test_secrets.py and
tests/ops/test_debezium_config.py.

Covered elsewhere and not repeated here:
- `additional-conditions` cannot escape the WHERE clause: tests/signals/test_conditions.py (a grammar
  whitelist, hypothesis over arbitrary text, and MariaDB running every accepted rendering as
  one predicate), and injections through both channels in tests/signals/test_signals.py and
  tests/signals/test_kafka_signals.py::test_malformed_kafka_signals_are_rejected_while_streaming_goes_on.
- A Kafka signal with another key (another connector's name, no key, an undecodable key) does
  nothing: the same Kafka test.
- GTID mode needs only SELECT, REPLICATION SLAVE and REPLICATION CLIENT, and takes no lock:
  tests/engine/test_engine.py::test_no_locks_and_least_privilege.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import tomli_w
from support.harness import EngineProcess, EngineThread, compare, config_data, make_config, published
from support import eventually
from support.kafka_topics import topic_records

from dblog.demo.workload import tables
from dblog.runtime.config import ConfigError, parse_config
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
GTID_GRANTS = ["REPLICATION SLAVE, REPLICATION CLIENT ON *.*"]


def _secret() -> str:
    return f"Pw-{uuid.uuid4().hex}-Z"


def _user(mariadb, database: str, password: str, extra: list[str] = ()) -> str:
    name = f"u{uuid.uuid4().hex[:10]}"
    mariadb.create_user(name, password, [f"SELECT ON `{database}`.*", *GTID_GRANTS, *extra])
    return name


def _dblog(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})


def _write_config(path: Path, data: dict) -> str:
    path.write_text(tomli_w.dumps(data))
    return str(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    {"nested": "SECRET"}, ["SECRET"], {"password": "SECRET", "x": 1},
])
def test_config_errors_never_echo_a_password(tmp_path, value):
    """pydantic puts the input value into its errors; dblog's messages use only the location and
    the reason. A password of the wrong type (a TOML table, an array), a misspelt key and a bad
    neighbouring value leave no trace of the secret, in the exception and in `dblog run`/`status`."""
    secret = _secret()
    value = json.loads(json.dumps(value).replace("SECRET", secret))
    cases = [
        ({"source": {"password": value}}, "source.password"),
        ({"source": {"passwrod": secret}}, "source.passwrod"),  # a typo: an unknown key
        ({"source": {"password_env": value}}, "source.password_env"),
        ({"source": {"password": secret, "port": "not a port"}}, "source.port"),
        ({"source": {"password": secret, "nonsense": value}}, "source.nonsense"),
    ]
    for data, where in cases:
        with pytest.raises(ConfigError) as raised:
            parse_config(data)
        assert where in str(raised.value) and secret not in str(raised.value), str(raised.value)
        if where != "source.password":
            continue  # the command line prints the same message: checked once, it takes a second
        path = _write_config(tmp_path / "bad.toml", data)
        for command in (["run", "--config", path], ["status", "--config", path]):
            done = _dblog("--log-level", "debug", *command)
            assert done.returncode != 0 and where in done.stderr, done.stderr
            assert secret not in done.stdout + done.stderr
    config = parse_config({"source": {"password": secret}})
    assert secret not in repr(config) and secret not in str(config) and secret not in repr(config.source)


@pytest.mark.parametrize("case", ["wrong password in config", "wrong password in env", "unreachable port"])
def test_connection_errors_do_not_print_the_password(mariadb, database, tmp_path, case):
    """`dblog --log-level debug run` against a refused login or a closed port: it stops with the
    server's or the socket's error, and neither the password nor the environment's value shows."""
    secret = _secret()
    user = _user(mariadb, database, _secret())  # exists, with another password than `secret`
    source: dict = {"user": user, "reconnect_timeout_seconds": 1}
    env = {}
    if case == "wrong password in env":
        source["password_env"] = "DBLOG_TEST_SECRET"
        env["DBLOG_TEST_SECRET"] = secret
    else:
        source["password"] = secret
    if case == "unreachable port":
        source["port"] = _free_port()
    data = config_data(mariadb, database, tmp_path, source=source)
    done = _dblog("--log-level", "debug", "run", "--config", _write_config(tmp_path / "c.toml", data), env=env)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-2000:]
    assert ("Access denied" in output) if case.startswith("wrong") else ("Can't connect" in output), output[-2000:]
    assert secret not in output


def _wait_for(path: Path, text: str, process: subprocess.Popen, count: int = 1, timeout: float = 120) -> None:
    def logged() -> bool:
        if path.read_text(errors="replace").count(text) >= count:
            return True
        assert process.poll() is None, f"dblog exited: {path.read_text(errors='replace')[-3000:]}"
        return False

    eventually(logged, timeout, interval=0.1,
               message=lambda: f"{text!r} x{count} in the log: {path.read_text(errors='replace')[-3000:]}")


def test_password_never_in_logs_notifications_offsets_or_status(mariadb, broker, database, tmp_path, loaded,
                                                               write_load):
    """A debug-level `dblog run` (password from the environment) goes through a snapshot, bad
    signals, killed connections and an ALTER USER re-setting its own password on the source
    (the statement, password included, is in the binlog): the secret is in none of its output,
    its Kafka notifications, its offsets, its sink or `dblog status`."""
    secret = _secret()
    loaded(2_000)
    user = _user(mariadb, database, secret)
    notices = f"notifications-{uuid.uuid4().hex[:8]}"
    broker.create_topic(notices)
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password_env": "DBLOG_TEST_SECRET"},
                       snapshot={"chunk_size": 300}, notifications={"kafka_topic": notices},
                       kafka={"bootstrap_servers": broker.bootstrap})
    path = _write_config(tmp_path / "dblog.toml", data)
    log = tmp_path / "dblog.log"
    signal_table = f"`{database}`.dblog_signal"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "dblog.cli", "--log-level", "debug", "run", "--config", path],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "DBLOG_TEST_SECRET": secret})
    try:
        _wait_for(log, "COMPLETED", process)
        workload = write_load(2_000, writers=2, seed=9, rate=100)
        try:
            for signal_id, kind, payload in [
                ("bad-json", "execute-snapshot", "{not json"),
                ("bad-type", "launch-rockets", "{}"),
                ("bad-filter", "execute-snapshot", json.dumps({"data-collections": [f"{database}\\.orders"],
                    "additional-conditions": [{"data-collection": f"{database}.orders", "filter": "1=1) OR (1=1"}]})),
                ("bad-table", "execute-snapshot", json.dumps({"data-collections": ["nosuch\\.table"]})),
            ]:
                mariadb.execute(f"INSERT INTO {signal_table} VALUES (%s, %s, %s)", (signal_id, kind, payload))
            _wait_for(log, "rejected signal", process, count=4)
            # Lost connections: every connection of the engine's user is killed (binlog dump,
            # chunk reader, the library's control connection).
            killed = [row[0] for row in mariadb.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (user,))]
            for connection_id in killed:
                mariadb.execute(f"KILL CONNECTION {int(connection_id)}")
            for host in ("%", "localhost"):
                mariadb.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, secret))
            mariadb.execute(f"INSERT INTO {signal_table} VALUES ('again', 'execute-snapshot', %s)",
                            (json.dumps({"data-collections": [f"{database}\\.customers"]}),))
            _wait_for(log, "COMPLETED", process, count=2)
        finally:
            workload.stop()
        mariadb.execute(f"INSERT INTO {signal_table} VALUES ('barrier', 'log', '{{\"message\": \"barrier-1\"}}')")
        _wait_for(log, "barrier-1", process)
        statuses = [_dblog("status", "--config", path), _dblog("status", "--json", "--config", path)]
    finally:
        process.terminate()
        process.wait(30)
    output = log.read_text(errors="replace")
    assert output.count("rejected signal") >= 4 and "DEBUG" in output
    assert killed and ("binlog connection lost" in output or "lost the source database" in output)
    assert all(status.returncode == 0 for status in statuses), [s.stderr for s in statuses]
    notifications = published(broker.bootstrap, notices)
    assert {"STARTED", "COMPLETED", "REJECTED"} <= {n["type"] for n in notifications}
    for where, text in [
        ("the engine's log", output),
        ("the Kafka notifications", json.dumps(notifications)),
        ("dblog status", "".join(s.stdout + s.stderr for s in statuses)),
        ("the offsets file", Path(data["offsets"]["path"]).read_text()),
        ("the sink", Path(data["sink"]["path"]).read_text()),
    ]:
        # MariaDB writes the ALTER USER statement, password in clear, to the binlog (SHOW BINLOG
        # EVENTS shows it): dblog must not log the SQL of the schema changes it reads.
        assert secret not in text, f"the password is in {where}"
    result = compare(mariadb, data["sink"]["path"], tables(database))
    assert result.equal, result.summary()


# --- every secret setting, every form, every output -------------------------------------------


@dataclass
class SecretSetting:
    """A secret setting of dblog's config (dblog.runtime.secrets) the leak test runs with.
    `provision(context, secret)` creates what the secret opens (a database account, a broker
    user, a key file) and returns the config sections that use it, without the secret itself;
    the test then gives the secret as `<where>`'s `_env`, `_file` or `_file_key` form."""

    where: str  # "source.password"
    provision: Callable[["LeakRun", str], dict]


@dataclass
class LeakRun:
    mariadb: object
    database: str
    broker: object  # this test's own LocalBroker (SASL_SSL, client certificates required): stopped, started again
    kafka_ca: object  # the trustme CA of the broker's certificate and of the client certificates it takes
    workdir: Path
    users: list  # database accounts
    kafka_users: list  # SCRAM-SHA-512 users of the broker


def _database_account(run: LeakRun, secret: str) -> dict:
    user = _user(run.mariadb, run.database, secret, [f"INSERT, DELETE ON `{run.database}`.dblog_signal"])
    run.users.append(user)
    return {"source": {"user": user}}


def _kafka_user(run: LeakRun, secret: str) -> dict:
    name = f"k{uuid.uuid4().hex[:10]}"
    run.broker.create_user(name, secret, "SCRAM-SHA-512")
    run.broker.allow_everything(name)  # ACLs are on
    run.kafka_users.append(name)
    return {"kafka": {"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": name}}


def _encrypted_key(pem: bytes, passphrase: str) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(passphrase.encode()))


def _kafka_client_key(run: LeakRun, secret: str) -> dict:
    """The client certificate the broker requires, its key encrypted with the secret."""
    issued = run.kafka_ca.issue_cert("dblog-client")
    cert, key = run.workdir / "kafka-client.pem", run.workdir / "kafka-client.key"
    issued.cert_chain_pems[0].write_to_path(cert)
    key.write_bytes(_encrypted_key(issued.private_key_pem.bytes(), secret))
    return {"kafka": {"ssl_cert": str(cert), "ssl_key": str(key)}}


# Add catalog credentials and other secrets here as they come: each is then given in every form
# and looked for in every output below. (source.tls.key_password needs a TLS server of its own:
# test_tls_key_passphrase_never_in_any_output.)
SECRET_SETTINGS = [
    SecretSetting("source.password", _database_account),
    SecretSetting("kafka.sasl_password", _kafka_user),
    SecretSetting("kafka.ssl_key_password", _kafka_client_key),
]


def test_the_leak_tests_cover_every_secret_setting():
    """A secret setting added to the configuration must be added to SECRET_SETTINGS (or get a
    leak test of its own, as source.tls.key_password has)."""
    from dblog.runtime.secrets import secret_settings

    # Leak tests of their own: source.tls.key_password below; iceberg.jdbc_password in
    # tests/sinks/iceberg/test_jdbc_catalog.py (the log and every JVM's command line through a kill
    # -9, the catalog's errors) and tests/ops/test_examples.py (`dblog check` with Spark);
    # iceberg.rest_credential in tests/sinks/iceberg/test_rest_catalog.py (`dblog run`'s log
    # through a kill -9, the refused client's error).
    covered = {setting.where for setting in SECRET_SETTINGS} | {"source.tls.key_password", "iceberg.jdbc_password",
                                                                 "iceberg.rest_credential"}
    assert {where for where, _, _ in secret_settings(parse_config({}))} <= covered


def _secured_broker(folder: Path):
    """A LocalBroker (Apache Kafka) whose `bootstrap` takes only SASL_SSL with a client certificate
    signed by its CA, and that CA (trustme): (broker, ca, PEM path of the CA)."""
    import trustme

    from lab.localbroker import LocalBroker

    folder.mkdir()
    ca = trustme.CA()
    server, admin = ca.issue_cert("127.0.0.1", "localhost"), ca.issue_cert("dblog-lab-admin")
    paths = {name: folder / f"{name}.pem" for name in ("ca", "cert", "key", "admin_cert", "admin_key")}
    ca.cert_pem.write_to_path(paths["ca"])
    for issued, cert, key in ((server, "cert", "key"), (admin, "admin_cert", "admin_key")):
        for pem in issued.cert_chain_pems:
            pem.write_to_path(paths[cert], append=True)
        issued.private_key_pem.write_to_path(paths[key])
    paths = {name: str(path) for name, path in paths.items()}
    broker = LocalBroker(cert=paths["cert"], key=paths["key"], ca=paths["ca"], client_ca=paths["ca"],
                         client_cert=paths["admin_cert"], client_key=paths["admin_key"], authentication=True,
                         mechanisms=("SCRAM-SHA-512",))
    return broker, ca, paths["ca"]


def _give(where: str, form: str, secret: str, workdir: Path, env: dict) -> dict:
    """The config section giving `where`'s secret in `form`; the secret goes to `env` or a file."""
    section, _, name = where.rpartition(".")
    tag = where.replace(".", "_").upper()
    if form == "env":
        env[f"DBLOG_LEAK_{tag}"] = secret
        settings = {f"{name}_env": f"DBLOG_LEAK_{tag}"}
    elif form == "file":  # as Kubernetes mounts a secret: a file of its own (with `echo`'s newline)
        path = workdir / f"{tag}.secret"
        path.write_text(secret + "\n")
        settings = {f"{name}_file": str(path)}
    else:  # a key of a properties file, as Kafka Connect's ${file:PATH:KEY}
        path = workdir / f"{tag}.properties"
        path.write_text(f"unrelated=1\n{tag.lower()}={secret}\n")
        settings = {f"{name}_file": str(path), f"{name}_file_key": tag.lower()}
    return {section: settings}


def _merge(data: dict, sections: dict) -> None:
    for section, values in sections.items():
        target = data
        for part in section.split("."):
            target = target.setdefault(part, {})
        target.update(values)


def _http(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as error:  # /readyz answers 503 while not ready: its body counts too
        return error.read().decode()


def _topics(broker) -> dict[str, bytes]:
    """Every record (key and value bytes) of every topic of the broker (as its admin user), each
    read up to its high watermark (`topic_records`), not until polls come back empty (two idle
    seconds a topic)."""
    from kafka import KafkaConsumer

    lister = KafkaConsumer(bootstrap_servers=broker.bootstrap, **broker.client_options())
    try:
        names = sorted(lister.topics())
    finally:
        lister.close()
    return {topic: b"\n".join((r.key or b"") + b"\n" + (r.value or b"")
                               for _, records in sorted(topic_records(broker.bootstrap, topic,
                                                                      **broker.client_options()).items())
                               for r in records)
            for topic in names}


# Each case is a full scenario (~50 s). The default run takes JSON logs (the richer format:
# every field of a record) with secrets from the environment (how containers get them); the
# scheduled slow tier (tests/README.md) the other two. tests/ops/test_secrets.py checks every form.
@pytest.mark.parametrize("log_format, form", [pytest.param("json", "file", marks=pytest.mark.slow),
                                              pytest.param("text", "file_key", marks=pytest.mark.slow), ("json", "env")])
def test_secrets_never_in_any_output(mariadb, database, tmp_path, loaded, log_format, form):
    """`dblog --log-level debug run` (EngineProcess, binlog reader process on) with known random
    secrets in every secret setting (the database password, the Kafka SASL password, the
    passphrase of the Kafka client certificate's key), in one form (env, file, key of a
    properties file), a log format each run, writing to Kafka over SASL_SSL with a client
    certificate (sink, notifications, signals) and serving /metrics: it snapshots, then its
    broker goes down and comes back, then the database refuses its password (dblog stops), the
    broker refuses its login too (`dblog check` and `dblog signal --via kafka` meanwhile), and
    both take them again. No secret is in its log, /metrics, /healthz, /readyz (also while
    failing), the Kafka topics (data, schema changes, notifications), its offsets, `dblog
    status`, `dblog signal`, `dblog check` (text and JSON; also with every secret unresolvable),
    or `dblog convert-debezium` of a Debezium file using the same secret by placeholder."""
    loaded(800)
    broker, kafka_ca, kafka_ca_path = _secured_broker(tmp_path / "kafka-tls")
    with broker:
        run = LeakRun(mariadb, database, broker, kafka_ca, tmp_path, [], [])
        secrets, env = {}, {}
        data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 200},
                           source={"reconnect_timeout_seconds": 600, "reader_process": True},
                           kafka={"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_SSL",
                                  "ssl_ca": kafka_ca_path},
                           sink={"type": "kafka", "kafka": {"delivery_timeout_seconds": 3}},
                           notifications={"kafka_topic": "notices"}, signals={"kafka_topic": "signals"},
                           http={"port": _free_port()})
        del data["source"]["password"], data["sink"]["path"]
        for setting in SECRET_SETTINGS:
            secret = secrets[setting.where] = _secret()
            _merge(data, setting.provision(run, secret))
            _merge(data, _give(setting.where, form, secret, tmp_path, env))
        for topic in ("notices", "signals"):
            broker.create_topic(topic)
        engine = EngineProcess(data, tmp_path, log_level="debug", log_format=log_format, env=env)
        endpoint = f"http://127.0.0.1:{data['http']['port']}"
        pages: list[str] = []
        signal_table = f"`{database}`.dblog_signal"
        outputs: list[tuple[str, str]] = []
        path = str(engine.path)

        def dblog(*command: str, status: int = 0, config: str = path, environment: dict = env):
            """`dblog --log-level debug COMMAND` (this run's log format), its output kept."""
            command = [part.replace("CONFIG", config) for part in command]
            done = _dblog("--log-level", "debug", "--log-format", log_format, *command, env=environment)
            assert done.returncode == status, (command, done.stdout[-3000:], done.stderr[-3000:])
            outputs.append((f"dblog {' '.join(command[:3])}", done.stdout + done.stderr))
            return done

        def barrier(name: str) -> None:
            mariadb.execute(f"INSERT INTO {signal_table} VALUES (%s, 'log', %s)",
                            (name, json.dumps({"message": name})))
            engine.eventually(lambda: engine.log.read_text().count(name) >= 2, 120,  # the INSERT, then the log line
                              message=f"the engine to log {name}")

        def serve_pages() -> None:
            pages.extend(_http(f"{endpoint}{path}") for path in ("/metrics", "/healthz", "/readyz"))

        def set_passwords(database_password: str, kafka_password: str) -> None:
            for user in run.users:
                for host in ("%", "localhost"):  # the statement, password in clear, is in the binlog
                    mariadb.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, database_password))
            for user in run.kafka_users:
                broker.create_user(user, kafka_password, "SCRAM-SHA-512")

        engine.start()
        try:
            engine.eventually(lambda: "COMPLETED" in engine.log.read_text(), 120, message="COMPLETED")
            serve_pages()
            # The notifications go out beside the loop: read the topics once COMPLETED is there too.
            def with_completed() -> dict[str, bytes] | None:
                read = _topics(broker)
                return read if b"COMPLETED" in read.get("notices", b"") else None

            topics = eventually(with_completed, 60, interval=0.2, message="COMPLETED on the notifications topic")
            outputs.append(("the topics before the broker went down", repr(topics)))
            # The broker goes away: the sink's delivery times out, notifications and the signal
            # channel fail, the supervisor restarts the engine, /readyz shows the error.
            broker.stop()
            mariadb.execute(f"UPDATE `{database}`.customers SET balance = balance + 1 WHERE id <= 5")
            engine.eventually(lambda: "lost the sink" in engine.log.read_text(), 120, message="the sink lost")
            serve_pages()
            broker.restart()  # its users, ACLs and topics are still there
            barrier("after-the-broker")
            # The database refuses the password: every connection of the account is killed while
            # it has another one. A refused login is not waited out: dblog stops with the server's
            # error (exit 1).
            set_passwords(_secret(), secrets["kafka.sasl_password"])
            for user in run.users:
                for (connection_id,) in mariadb.execute(
                        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)):
                    mariadb.execute(f"KILL CONNECTION {int(connection_id)}")
            eventually(lambda: not engine.alive(), 120, message=lambda: f"dblog to stop: {engine.log.read_text()[-2000:]}")
            assert engine.process.returncode == 1 and "Access denied" in engine.log.read_text()
            # The broker refuses the Kafka password too: what the commands say then (`dblog
            # signal` beside the checks).
            set_passwords(_secret(), _secret())
            with ThreadPoolExecutor(1) as beside:
                signal = beside.submit(dblog, "signal", "log", "--via", "kafka", "--config", "CONFIG", "refused",
                                       status=1)
                refused = [dblog("check", "--timeout", "1", "--config", "CONFIG", status=1).stdout,
                           dblog("check", "--timeout", "1", "--format", "json", "--config", "CONFIG", status=1).stdout]
                assert "✗ source connection:" in refused[0] and "Access denied" in refused[0], refused[0]
                assert "✗ Kafka brokers:" in refused[0] and "kafka.sasl_password" in refused[0], refused[0]
                checks = {check["check"]: check["status"] for check in json.loads(refused[1])["checks"]}
                assert checks["source connection"] == checks["Kafka brokers"] == "fail", checks
                # Every secret unresolvable (the variable unset; the file read for a key it lacks).
                broken, broken_env = json.loads(json.dumps(data)), {}
                for where in secrets:
                    section, _, name = where.rpartition(".")
                    if form != "env":
                        _merge(broken, {section: {f"{name}_file_key": "no.such.key"}})
                broken_path = _write_config(tmp_path / "broken.toml", broken)
                text = dblog("check", "--config", "CONFIG", status=1, config=broken_path, environment=broken_env).stdout
                document = json.loads(dblog("check", "--format", "json", "--config", "CONFIG", status=1,
                                            config=broken_path, environment=broken_env).stdout)
                assert all(f"✗ {where}: " in text for where in secrets), text
                assert {c["check"] for c in document["checks"] if c["status"] == "fail"} == set(secrets), document
                assert "kafka.sasl_password" in signal.result().stderr, signal.result().stderr[-2000:]
            # With the passwords back, it starts again from its offsets.
            set_passwords(secrets["source.password"], secrets["kafka.sasl_password"])
            engine.start()
            barrier("after-the-password")
            serve_pages()
            debezium = tmp_path / "connector.properties"
            debezium.write_text("\n".join([
                "connector.class=io.debezium.connector.mysql.MySqlConnector",
                f"database.port={mariadb.port}", f"database.user={run.users[0]}", "topic.prefix=leak",
                f"database.password=${{file:{tmp_path}/db.properties:pw}}",
            ]) + "\n")
            (tmp_path / "db.properties").write_text(f"pw={secrets['source.password']}\n")
            for command in [["status", "--config", "CONFIG"], ["status", "--json", "--config", "CONFIG"],
                            ["signal", "log", "--config", "CONFIG", "from the command line"],
                            ["signal", "log", "--via", "kafka", "--config", "CONFIG", "from the command line"],
                            ["convert-debezium", str(debezium), "--bootstrap-servers", broker.bootstrap],
                            ["convert-debezium", str(debezium), "--bootstrap-servers", broker.bootstrap, "-o",
                             str(tmp_path / "converted.toml")]]:
                dblog(*command)
            checked = [dblog("check", "--config", "CONFIG").stdout,
                       dblog("check", "--format", "json", "--config", "CONFIG").stdout]
            assert f"✔ secrets: resolved: {', '.join(secrets)}" in checked[0], checked[0]
            assert "✔ Kafka brokers" in checked[0] and json.loads(checked[1])["ok"], checked
            outputs.append(("the converted TOML", (tmp_path / "converted.toml").read_text()))
            barrier("after-the-commands")
        finally:
            engine.terminate()
        log = engine.log.read_text(errors="replace")
        outputs += [("the engine's log", log), ("/metrics, /healthz and /readyz", "\n".join(pages)),
                    ("the topics at the end", repr(_topics(broker))),
                    ("the offsets file", Path(data["offsets"]["path"]).read_text())]
    # Each provocation happened, and left its trace where an operator looks.
    assert "lost the sink" in log and "Access denied" in log and "from the command line" in log and "DEBUG" in log
    assert "binlog reader: binlog connection lost" in log  # the reader process's own lines are there too
    if log_format == "json":  # all of them JSON, the reader process's included
        assert all(json.loads(line) for line in log.splitlines() if line.strip())
    assert any("dblog_engine_restarts_total" in page for page in pages)
    assert any("last error" in page for page in pages), pages  # /readyz while failing: the error's text
    assert "COMPLETED" in dict(outputs)["the topics before the broker went down"]  # notifications read back
    for where, secret in secrets.items():
        for name, text in outputs:
            assert secret not in text, f"the secret of {where} ({form}) is in {name}"


def test_tls_key_passphrase_never_in_any_output(tls_mariadb, tmp_path):
    """`source.tls.key_password`, against the TLS-only MariaDB as the account that REQUIREs X509:
    its client key encrypted with a random passphrase. With the right passphrase `dblog run`
    streams and takes a `dblog signal`, `dblog check` passes; with a wrong one (an encrypted key
    it cannot open) `dblog run`, `dblog check` and `dblog signal` stop naming the setting. Each
    pass gives the passphrase in another form, every command at debug level; neither passphrase
    is in any output (text, JSON, log)."""
    from support import next_server_id
    from support.fixtures.tls import SERVER_NAME

    from dblog.runtime.signal_client import SIGNAL_TABLE_DDL

    secret, wrong = _secret(), _secret()
    key = tmp_path / "client.key"
    key.write_bytes(_encrypted_key(tls_mariadb.client_key.read_bytes(), secret))
    db, database = tls_mariadb.db, f"leak_{uuid.uuid4().hex[:8]}"
    db.execute(f"CREATE DATABASE `{database}`")
    outputs: list[tuple[str, str]] = []
    try:
        db.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY)")
        db.execute(f"INSERT INTO `{database}`.items VALUES (1), (2), (3)")
        db.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
        for passphrase, form, log_format in ((secret, "env", "text"), (wrong, "file", "json"),
                                             (secret, "file_key", "text")):
            workdir = tmp_path / form
            workdir.mkdir()
            env: dict = {}
            data = {
                "name": "tlsleak",
                "source": {"host": SERVER_NAME, "port": db.port, "user": tls_mariadb.x509_user,
                           "password": tls_mariadb.password, "include": [f"{database}\\..*"],
                           "server_id": next_server_id(), "heartbeat_seconds": 0.5, "reconnect_timeout_seconds": 5,
                           "tls": tls_mariadb.tls("verify_identity", key=str(key))},
                "signals": {"table": f"{database}.dblog_signal"},
                "sink": {"type": "jsonl", "path": str(workdir / "changes.jsonl")},
                "offsets": {"path": str(workdir / "offsets.json"), "commit_interval_seconds": 0.2},
            }
            _merge(data, _give("source.tls.key_password", form, passphrase, workdir, env))
            path = _write_config(workdir / "dblog.toml", data)
            options = ["--log-level", "debug", "--log-format", log_format]
            right = passphrase == secret
            if form != "file_key":  # run and signal: once with each passphrase
                log = workdir / "dblog.log"
                with open(log, "w") as out:
                    process = subprocess.Popen([sys.executable, "-m", "dblog.cli", *options, "run", "--config", path],
                                               stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                               env={**os.environ, **env})
                try:
                    if right:
                        _wait_for(log, "COMPLETED", process)  # the snapshot, over TLS with the decrypted key
                    signal = _dblog(*options, "signal", "log", "--config", path, f"signal-{form}", env=env)
                    outputs.append((f"dblog signal ({form})", signal.stdout + signal.stderr))
                    assert (signal.returncode == 0) == right, signal.stderr[-2000:]
                    if right:
                        _wait_for(log, f"signal-{form}", process)
                    else:
                        assert "source.tls.key_password" in signal.stderr, signal.stderr[-2000:]
                        process.wait(60)
                        assert process.returncode == 1
                finally:
                    process.terminate()
                    process.wait(30)
                text = log.read_text(errors="replace")
                outputs.append((f"the engine's log ({form})", text))
                assert ("COMPLETED" in text) if right else ("source.tls.key_password" in text), text[-2000:]
            for output_format in ("text", "json"):
                check = _dblog(*options, "check", "--format", output_format, "--config", path, env=env)
                outputs.append((f"dblog check --format {output_format} ({form})", check.stdout + check.stderr))
                assert (check.returncode == 0) == right, check.stdout + check.stderr[-2000:]
                if output_format == "text":
                    assert ("✔ source TLS: encrypted" in check.stdout) if right else (
                        "✗ source connection:" in check.stdout and "source.tls.key_password" in check.stdout), \
                        check.stdout
    finally:
        db.execute(f"DROP DATABASE IF EXISTS `{database}`")
    for name, text in outputs:
        assert secret not in text and wrong not in text, f"a passphrase of source.tls.key_password is in {name}"


# --- signals only from the configured channel --------------------------------------------------


def test_signals_only_from_the_configured_signal_table(mariadb, database, tmp_path, loaded):
    """execute-snapshot and pause-snapshot rows inserted into tables with the signal table's
    schema but another name, or its name in another database, do nothing (they are ordinary
    data); the same request in the configured table acts."""
    loaded(500)
    other_db = f"{database}_other"
    mariadb.execute(f"CREATE DATABASE `{other_db}`")
    try:
        lookalikes = [f"`{database}`.dblog_signal_copy", f"`{database}`.DBLOG_SIGNAL", f"`{other_db}`.dblog_signal"]
        for table in lookalikes:
            mariadb.execute(f"CREATE TABLE {table} LIKE `{database}`.dblog_signal")
        config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 100})
        engine = EngineThread(config)
        orders = json.dumps({"data-collections": [f"{database}\\.orders"]})
        for index, table in enumerate(lookalikes):
            mariadb.execute(f"INSERT INTO {table} VALUES (%s, 'execute-snapshot', %s)", (f"fake-{index}", orders))
            mariadb.execute(f"INSERT INTO {table} VALUES (%s, 'pause-snapshot', '{{}}')", (f"fake-pause-{index}",))
        mariadb.execute(f"INSERT INTO `{database}`.dblog_signal VALUES ('real', 'execute-snapshot', %s)",
                        (json.dumps({"data-collections": [f"{database}\\.customers"]}),))
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other_db}`")
    started = [n.data["data_collections"] for n in engine.notifications if n.type == "STARTED"]
    assert started == [[f"{database}.customers"]], engine.types()
    assert "PAUSED" not in engine.types() and "REJECTED" not in engine.types()
    records = list(read_json_lines(config.sink.path))
    snapshotted = {r["value"]["source"]["table"] for r in records if r["value"]["op"] == "r"}
    assert snapshotted == {"customers"}
    copies = [r for r in records if r["value"]["source"]["table"] in ("dblog_signal_copy", "DBLOG_SIGNAL")]
    assert len(copies) == 4 and all(r["value"]["op"] == "c" for r in copies)  # streamed as data
    result = compare(mariadb, config.sink.path, tables(database)[1:])
    assert result.equal, result.summary()


# --- least privileges of the signal-table watermark modes ---------------------------------------


@pytest.mark.parametrize("mode, grants, works", [
    ("insert_insert", ["INSERT"], True),
    ("insert_delete", ["INSERT", "DELETE"], True),
    ("insert_insert", [], False),
    ("insert_delete", ["INSERT"], False),
])
def test_signal_table_watermark_privileges(mariadb, database, tmp_path, loaded, mode, grants, works):
    """The signal-table watermark modes need, beyond GTID mode's SELECT + REPLICATION SLAVE +
    REPLICATION CLIENT, only INSERT (insert_insert) or INSERT and DELETE (insert_delete) on the
    signal table itself. Without them every table's snapshot ends SQL_EXCEPTION (the server's
    "command denied" in the log) while streaming goes on."""
    loaded(1_500)
    extra = [f"{', '.join(grants)} ON `{database}`.dblog_signal"] if grants else []
    user = _user(mariadb, database, "wm-pass", extra)
    config = make_config(mariadb, database, tmp_path, source={"user": user, "password": "wm-pass"},
                         snapshot={"chunk_size": 400, "watermarks": mode})
    engine = EngineThread(config)
    engine.wait_for("COMPLETED")
    mariadb.execute(f"UPDATE `{database}`.customers SET balance = balance + 1 WHERE id <= 20")
    engine.until_caught_up()
    statuses = {n.data["data_collection"]: n.data["status"] for n in engine.notifications
                if n.type == "TABLE_SCAN_COMPLETED"}
    expected = "SUCCEEDED" if works else "SQL_EXCEPTION"
    assert statuses == {str(t): expected for t in tables(database)}
    records = list(read_json_lines(config.sink.path))
    assert sum(r["value"]["op"] == "u" for r in records) >= 20  # streaming went on either way
    if works:
        result = compare(mariadb, config.sink.path, tables(database))
        assert result.equal, result.summary()
