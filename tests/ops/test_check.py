"""`dblog check` (dblog.runtime.preflight) against the private MariaDB and broker: a passing
configuration prints only ✔ and exits 0; each failure mode it covers shows ✗ with a remedy and
exits 1. And `dblog --version`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from importlib.metadata import version
from pathlib import Path

import pytest
import tomli_w
from support import eventually
from support.fixtures.broker import USERS, kafka_section
from support.fixtures.mariadb import purge_binlogs_before_the_newest
from support.harness import config_data

from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.mysql.server_requirements import REQUIRED_VARIABLES, checked_settings, setting_problems
from dblog.runtime.config import parse_config
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.preflight import run_checks
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL
from dblog.sinks.iceberg.session import spark_line

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
ALL_GRANTS = ["REPLICATION SLAVE, REPLICATION CLIENT ON *.*"]


def _dblog(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})


def _write(path: Path, data: dict) -> str:
    path.write_text(tomli_w.dumps(data))
    return str(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _setup(mariadb, database: str) -> None:
    """Two captured tables and the signal table."""
    mariadb.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY, amount INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.customers (id INT PRIMARY KEY, name VARCHAR(20))")
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))


def _user(mariadb, database: str, grants: list[str]) -> tuple[str, str]:
    name, password = f"c{uuid.uuid4().hex[:10]}", f"Pw-{uuid.uuid4().hex}"
    mariadb.create_user(name, password, grants)
    return name, password


def _checks(data: dict, **options) -> dict[str, tuple[str, str, str | None]]:
    """check -> (status, detail, remedy), from run_checks in this process."""
    results = list(run_checks(parse_config(data), **options))
    assert len({result.check for result in results}) == len(results), [result.check for result in results]
    return {result.check: (result.status, result.detail, result.remedy) for result in results}


def _failed(checks: dict) -> dict:
    return {name: value for name, value in checks.items() if value[0] == "fail"}


def _save_offsets(path: str, position: GtidSet) -> None:
    OffsetStore(path).save(Offsets(flavor="mariadb", position=position))


def _executed(mariadb) -> str:
    return mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0]


# --- passing ---------------------------------------------------------------------------------


def test_version():
    result = _dblog("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"dblog {version('dblog')}"


def test_a_passing_configuration_prints_only_ticks_exits_0_and_writes_nothing(mariadb, database, tmp_path):
    """A least-privileged user (the grants of insert_delete watermarks) and committed offsets
    that the binlog still holds: every line ✔. The INSERT and DELETE it tries write nothing."""
    _setup(mariadb, database)
    user, password = _user(mariadb, database, [f"SELECT ON `{database}`.*", *ALL_GRANTS,
                                                f"INSERT, DELETE ON `{database}`.dblog_signal"])
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password_env": "CHECK_PASSWORD"},
                       snapshot={"watermarks": "insert_delete"})
    del data["source"]["password"]
    _save_offsets(data["offsets"]["path"], GtidSet.parse(_executed(mariadb), "mariadb"))
    before = _executed(mariadb)
    result = _dblog("check", "--config", _write(tmp_path / "dblog.toml", data), env={"CHECK_PASSWORD": password})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    checks = lines[:-1]
    assert checks and all(line.startswith("✔ ") for line in checks), result.stdout
    names = [line[2:].partition(":")[0] for line in checks]
    assert names == ["secrets", "source connection", "source TLS", "REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT",
                     "INSERT on the signal table", "DELETE on the signal table", "log_bin", "binlog_format",
                     "binlog_row_image", "binlog_row_metadata", "gtid_strict_mode", "position mode", "replication",
                     "binlog position",
                     "signal table", "offsets path", "sink path"]
    assert f"on all 2 captured tables ({database}.customers, {database}.orders)" in result.stdout
    assert "is still in the binlog" in result.stdout
    assert lines[-1] == f"{len(checks)} passed, 0 failed"
    assert password not in result.stdout + result.stderr
    assert _executed(mariadb) == before  # nothing written to the source


def test_grants_through_a_default_role_and_wildcard_databases_pass(mariadb, database, tmp_path):
    _setup(mariadb, database)
    role, user = f"r{uuid.uuid4().hex[:10]}", f"c{uuid.uuid4().hex[:10]}"
    mariadb.execute(f"CREATE ROLE {role}")
    mariadb.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {role}")
    mariadb.execute(f"GRANT SELECT, INSERT ON `{database[:9]}%`.* TO {role}")  # a wildcard database name
    mariadb.execute(f"CREATE USER {user}@'%' IDENTIFIED BY 'role-pass'")
    mariadb.execute(f"GRANT {role} TO {user}@'%'")
    mariadb.execute(f"SET DEFAULT ROLE {role} FOR {user}@'%'")
    try:
        data = config_data(mariadb, database, tmp_path, source={"user": user, "password": "role-pass"},
                           snapshot={"watermarks": "insert_insert"})
        checks = _checks(data)
    finally:
        mariadb.execute(f"DROP USER {user}@'%'")
        mariadb.execute(f"DROP ROLE {role}")
    assert not _failed(checks), _failed(checks)
    assert checks["REPLICATION SLAVE"][0] == checks["REPLICATION CLIENT"][0] == "ok"
    assert checks["SELECT"][0] == checks["INSERT on the signal table"][0] == "ok"


def test_json_format(mariadb, database, tmp_path):
    _setup(mariadb, database)
    data = config_data(mariadb, database, tmp_path)
    data["signals"]["table"] = f"{database}.no_such_table"
    result = _dblog("check", "--format", "json", "--config", _write(tmp_path / "dblog.toml", data))
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    by_name = {check["check"]: check for check in document["checks"]}
    assert by_name["source connection"]["status"] == "ok"
    assert by_name["signal table"]["status"] == "fail"
    assert "CREATE TABLE IF NOT EXISTS" in by_name["signal table"]["remedy"]


def test_a_configuration_error_is_a_failed_check(tmp_path):
    path = _write(tmp_path / "dblog.toml", {"source": {"prot": 3306}})
    result = _dblog("check", "--config", path)
    assert result.returncode == 1
    assert result.stdout.startswith("✗ configuration:") and "source.prot" in result.stdout, result.stdout


def test_a_debezium_connector_configuration(mariadb, database, broker, tmp_path):
    """`dblog check --debezium-config`, as `dblog run --debezium-config` would read it (its
    signal table missing here, and insert_insert watermarks asked for; the records' Kafka given
    with --bootstrap-servers)."""
    _setup(mariadb, database)
    mariadb.execute(f"DROP TABLE `{database}`.dblog_signal")
    path = tmp_path / "connector.properties"
    path.write_text("\n".join([
        "connector.class=io.debezium.connector.mysql.MySqlConnector",
        "database.hostname=127.0.0.1", f"database.port={mariadb.port}", f"database.user={mariadb.user}",
        f"database.password={mariadb.password}", "database.server.id=4100002", "topic.prefix=shop",
        f"database.include.list={database}", f"signal.data.collection={database}.dblog_signal",
        "incremental.snapshot.watermarking.strategy=insert_insert",
    ]) + "\n")
    result = _dblog("check", "--debezium-config", str(path), "--bootstrap-servers", broker.bootstrap)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "✔ Kafka brokers:" in result.stdout, result.stdout
    assert f"✔ SELECT: on all 2 captured tables ({database}.customers, {database}.orders)" in result.stdout
    assert "✗ signal table:" in result.stdout and "- INSERT on the signal table:" in result.stdout, result.stdout


# --- the source ------------------------------------------------------------------------------


def test_wrong_password_fails_the_connection_and_skips_what_needs_it(mariadb, database, tmp_path):
    _setup(mariadb, database)
    user, _ = _user(mariadb, database, [f"SELECT ON `{database}`.*", *ALL_GRANTS])
    wrong = f"Wrong-{uuid.uuid4().hex}"
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password": wrong})
    result = _dblog("check", "--config", _write(tmp_path / "dblog.toml", data))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "✔ secrets: resolved: source.password", result.stdout
    assert lines[1].startswith("✗ source connection:") and "Access denied" in lines[1], result.stdout
    assert lines[2].startswith("    → check source.user and source.password"), result.stdout
    assert "- REPLICATION SLAVE: needs the source connection" in result.stdout
    assert "- signal table: needs the source connection" in result.stdout
    assert "✔ offsets path" in result.stdout  # the checks that need no source still run
    assert wrong not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_unresolvable_secrets_are_failed_lines_naming_the_setting(mariadb, database, tmp_path):
    """A secret whose variable is unset, whose file is missing or whose properties file lacks the
    key: one ✗ line each, named by the setting, in text and JSON; the connections that need them
    are skipped, naming them; the secret in the properties file (under another key) never shows."""
    _setup(mariadb, database)
    secret = f"Pw-{uuid.uuid4().hex}"
    (tmp_path / "kafka.properties").write_text(f"kafka.password={secret}\n")
    data = config_data(mariadb, database, tmp_path, source={"password_env": "DBLOG_CHECK_UNSET_VARIABLE"},
                       kafka={"bootstrap_servers": f"127.0.0.1:{_free_port()}", "security_protocol": "SASL_SSL",
                              "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "dblog",
                              "sasl_password_file": str(tmp_path / "kafka.properties"),
                              "sasl_password_file_key": "no.such.key",
                              "ssl_key_password_file": str(tmp_path / "missing")},
                       signals={"kafka_topic": "dblog-signals"})
    del data["source"]["password"]
    path = _write(tmp_path / "dblog.toml", data)
    text = _dblog("check", "--config", path)
    assert text.returncode == 1, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("✗ source.password: source.password_env names 'DBLOG_CHECK_UNSET_VARIABLE', "
                               "which is not set"), text.stdout
    assert "→ source.password comes one way" in lines[1]
    assert f"✗ kafka.sasl_password: kafka.sasl_password_file_key: {tmp_path}/kafka.properties has no key " \
           "'no.such.key'" in text.stdout
    assert f"✗ kafka.ssl_key_password: kafka.ssl_key_password_file: cannot read {tmp_path}/missing" in text.stdout
    assert "- source connection: needs source.password (see its line)" in text.stdout
    assert "- Kafka brokers: needs kafka.sasl_password and kafka.ssl_key_password (see their lines)" in text.stdout
    assert "- Kafka signal topic: needs kafka" in text.stdout and "✔ offsets path" in text.stdout
    assert "✔ secrets" not in text.stdout
    document = json.loads(_dblog("check", "--format", "json", "--config", path).stdout)
    by_name = {check["check"]: check for check in document["checks"]}
    assert document["ok"] is False and "secrets" not in by_name
    assert {name for name, check in by_name.items() if check["status"] == "fail"} == {
        "source.password", "kafka.sasl_password", "kafka.ssl_key_password"}
    assert "DBLOG_CHECK_UNSET_VARIABLE" in by_name["source.password"]["detail"]
    assert by_name["source connection"]["status"] == by_name["Kafka brokers"]["status"] == "skip"
    assert secret not in text.stdout + text.stderr + json.dumps(document)
    # With the variable set, the source's line is ✔ and the secrets' line names what resolved.
    data["kafka"] = {"bootstrap_servers": data["kafka"]["bootstrap_servers"]}
    done = _dblog("check", "--timeout", "1", "--config", _write(tmp_path / "ok.toml", data),
                  env={"DBLOG_CHECK_UNSET_VARIABLE": mariadb.password})
    assert "✔ secrets: resolved: source.password" in done.stdout and "✔ source connection" in done.stdout, done.stdout


def test_unreachable_source(mariadb, database, tmp_path):
    data = config_data(mariadb, database, tmp_path, source={"port": _free_port()})
    status, detail, remedy = _checks(data)["source connection"]
    assert status == "fail" and "source.host and source.port" in remedy, detail


def test_the_replication_probe_leaves_a_running_reader_with_its_server_id_alone(mariadb, database, tmp_path):
    """dblog check may run beside `dblog run`: it registers with the same server id but asks
    for no dump, which would make the server end the running reader's."""
    _setup(mariadb, database)
    data = config_data(mariadb, database, tmp_path)
    dump = BinlogConnection(mariadb.connection_settings, data["source"]["server_id"], 0.5, "mariadb")
    dump.open(GtidSet.parse(_executed(mariadb), "mariadb"))
    events: list = []

    def read() -> None:
        try:
            while True:
                events.append(dump.read_event())
        except Exception as error:  # noqa: BLE001 - the test looks at it
            events.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert _checks(data)["REPLICATION SLAVE"][0] == "ok"
        mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (1, 1)")
        wanted = f"{database}".encode()
        eventually(lambda: any(isinstance(e, bytes) and wanted in e for e in events), 10,
                   message="the running reader to read the insert")
        assert not [e for e in events if isinstance(e, Exception)]
    finally:
        dump.close()
        reader.join(5)


@pytest.mark.parametrize("grants, failing", [
    (["REPLICATION CLIENT ON *.*"], "REPLICATION SLAVE"),
    (["REPLICATION SLAVE ON *.*"], "REPLICATION CLIENT"),
])
def test_a_missing_replication_privilege_is_named(mariadb, database, tmp_path, grants, failing):
    _setup(mariadb, database)
    user, password = _user(mariadb, database, [f"SELECT ON `{database}`.*", *grants])
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password": password})
    checks = _checks(data)
    failed = _failed(checks)
    assert failed.keys() == {failing}, failed
    assert f"GRANT {failing} ON *.* TO '{user}'@" in failed[failing][2]


def test_the_committed_position_needs_replication_client(mariadb, database, tmp_path):
    _setup(mariadb, database)
    user, password = _user(mariadb, database, [f"SELECT ON `{database}`.*", "REPLICATION SLAVE ON *.*"])
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password": password})
    _save_offsets(data["offsets"]["path"], GtidSet.parse(_executed(mariadb), "mariadb"))
    status, detail, remedy = _checks(data)["binlog position"]
    assert status == "fail" and "REPLICATION CLIENT" in remedy, detail


def test_a_captured_table_without_select_is_named(mariadb, database, tmp_path):
    """INSERT alone makes the table visible to the user (and so captured), but chunk reads would fail."""
    _setup(mariadb, database)
    user, password = _user(mariadb, database, [f"SELECT ON `{database}`.customers", f"INSERT ON `{database}`.orders",
                                               *ALL_GRANTS])
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password": password})
    status, detail, remedy = _checks(data)["SELECT"]
    assert status == "fail", detail
    assert f"refused on 1 of 2 captured tables: {database}.orders" in detail
    assert f"GRANT SELECT ON `{database}`.* TO '{user}'@" in remedy


@pytest.mark.parametrize("mode, grants, failing", [
    ("insert_insert", [], {"INSERT on the signal table"}),
    ("insert_delete", ["INSERT"], {"DELETE on the signal table"}),
])
def test_watermark_modes_need_their_signal_table_privileges(mariadb, database, tmp_path, mode, grants, failing):
    _setup(mariadb, database)
    extra = [f"{', '.join(grants)} ON `{database}`.dblog_signal"] if grants else []
    user, password = _user(mariadb, database, [f"SELECT ON `{database}`.*", *ALL_GRANTS, *extra])
    data = config_data(mariadb, database, tmp_path, source={"user": user, "password": password},
                       snapshot={"watermarks": mode})
    failed = _failed(_checks(data))
    assert failed.keys() == failing, failed
    [(status, detail, remedy)] = failed.values()
    assert "command denied" in detail and f'snapshot.watermarks = "{mode}"' in remedy


# --- server settings -------------------------------------------------------------------------


def test_binlog_format_not_row_is_refused_with_the_remedy(tmp_path):
    """On a second private MariaDB started with binlog_format=MIXED (the session server's global
    settings stay as they are for every other test)."""
    from dblog.demo.localstack import LocalMariaDB

    with LocalMariaDB(extra_args=("--binlog-format=MIXED",)) as server:
        server.execute("CREATE DATABASE shop")
        _setup(server, "shop")
        checks = _checks(config_data(server, "shop", tmp_path))
    assert _failed(checks).keys() == {"binlog_format"}
    status, detail, remedy = checks["binlog_format"]
    assert detail == "MIXED" and "Set binlog_format=ROW" in remedy


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_every_refused_setting_has_a_line_of_its_own(flavor):
    """`dblog check` prints a line per `checked_settings` variable: every problem the engine would
    refuse must belong to one of them (here: each variable wrong on its own)."""
    good = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL",
            "gtid_mode": "ON", "gtid_strict_mode": "ON"}
    assert set(good) == set(REQUIRED_VARIABLES)
    assert setting_problems(good, flavor) == {}
    bad = {"log_bin": "OFF", "binlog_format": "STATEMENT", "binlog_row_image": "MINIMAL", "binlog_row_metadata": "MINIMAL",
           "gtid_mode": "OFF", "gtid_strict_mode": "OFF"}
    refusable = [name for name in checked_settings(flavor) if name != "binlog_row_metadata"]  # decoded from history
    for name in refusable:
        problems = setting_problems({**good, name: bad[name]}, flavor)
        assert list(problems) == [name], (name, problems)
    assert set(setting_problems(bad, flavor)) == set(refusable)


# --- the committed position ------------------------------------------------------------------


def test_a_purged_position_is_refused_with_the_remedy(own_mariadb, tmp_path):
    own_mariadb.execute("CREATE DATABASE shop")
    _setup(own_mariadb, "shop")
    data = config_data(own_mariadb, "shop", tmp_path)
    stored = GtidSet.parse(_executed(own_mariadb), "mariadb")
    _save_offsets(data["offsets"]["path"], stored)
    own_mariadb.execute("INSERT INTO shop.orders VALUES (1, 1)")  # dblog must resume before this
    purge_binlogs_before_the_newest(own_mariadb)
    status, detail, remedy = _checks(data)["binlog position"]
    assert status == "fail", detail
    assert str(stored) in detail and "purged" in detail
    assert "move the offsets file away" in remedy and "execute-snapshot" in remedy
    # snapshot.startup = "when_needed" snapshots again from the present there: a warning, not a failure
    status, detail, remedy = _checks({**data, "snapshot": {**data["snapshot"], "startup": "when_needed"}})[
        "binlog position"]
    assert status == "warn" and "no longer in the binlog" in detail and "snapshotted again" in detail, detail


def test_a_position_the_server_never_logged_is_refused(mariadb, database, tmp_path):
    data = config_data(mariadb, database, tmp_path)
    executed = GtidSet.parse(_executed(mariadb), "mariadb")
    ahead = GtidSet.parse(",".join(f"{domain}-1-{executed.last(domain) + 1000}" for domain in executed.sources()),
                          "mariadb")
    _save_offsets(data["offsets"]["path"], ahead)
    status, detail, remedy = _checks(data)["binlog position"]
    assert status == "fail" and "lacks transactions dblog already delivered" in detail, detail
    assert "wait for it to catch up" in remedy and 'snapshot.startup = "initial"' in remedy, remedy


def test_unreadable_offsets_are_refused(mariadb, database, tmp_path):
    data = config_data(mariadb, database, tmp_path)
    Path(data["offsets"]["path"]).write_text("{not json")
    status, detail, remedy = _checks(data)["binlog position"]
    assert status == "fail" and "is not valid" in detail and "restore it" in remedy


# --- the signal table ------------------------------------------------------------------------


def test_missing_signal_table(mariadb, database, tmp_path):
    data = config_data(mariadb, database, tmp_path)
    status, detail, remedy = _checks(data)["signal table"]
    assert status == "fail" and "does not exist" in detail
    assert f"CREATE TABLE IF NOT EXISTS `{database}`.`dblog_signal`" in remedy


def test_signal_table_with_the_wrong_columns(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(20) PRIMARY KEY, kind VARCHAR(32), data TEXT)")
    data = config_data(mariadb, database, tmp_path, snapshot={"watermarks": "insert_insert"})
    status, detail, _ = _checks(data)["signal table"]
    assert status == "fail"
    assert "no column type" in detail and "id holds 20 characters, dblog writes up to 38" in detail


# --- Kafka -----------------------------------------------------------------------------------


def test_unreachable_broker(mariadb, database, tmp_path):
    _setup(mariadb, database)
    data = config_data(mariadb, database, tmp_path, kafka={"bootstrap_servers": f"127.0.0.1:{_free_port()}"},
                       signals={"kafka_topic": "dblog-signals"}, notifications={"kafka_topic": "dblog-notes"})
    checks = _checks(data, timeout=1.0)
    assert _failed(checks).keys() == {"Kafka brokers"}
    assert "kafka.bootstrap_servers" in checks["Kafka brokers"][2]
    assert checks["Kafka signal topic"][0] == checks["Kafka notification topic"][0] == "skip"


def test_kafka_login_refused_names_the_setting(mariadb, database, secured_broker, kafka_tls, tmp_path):
    """Over SASL_SSL the check connects as the engine does: the right password passes, a wrong
    one fails naming kafka.sasl_password (never echoing it)."""
    _setup(mariadb, database)
    for password, status in ((USERS["SCRAM-SHA-512"][1], "ok"), ("wrong-password-7", "fail")):
        kafka = kafka_section(secured_broker, kafka_tls, "SCRAM-SHA-512", sasl_password=password)
        data = config_data(mariadb, database, tmp_path, kafka=kafka, signals={"kafka_topic": "dblog-signals"})
        checks = _checks(data, timeout=5.0)
        assert checks["Kafka brokers"][0] == status, checks["Kafka brokers"]
    assert "kafka.sasl_password" in " ".join(checks["Kafka brokers"][1:])
    assert "wrong-password-7" not in repr(checks)


def test_kafka_topics(mariadb, database, broker, tmp_path):
    """Existing control topics pass; the sink's data topics pass when they exist or may be
    created, and warn when they are missing and create_topics is off (the broker's auto-create
    may make them, as for Kafka Connect without topic.creation.*)."""
    _setup(mariadb, database)
    prefix = f"chk{uuid.uuid4().hex[:8]}"
    broker.create_topic(f"{prefix}-signals")
    broker.create_topic(f"{prefix}-notes")
    kafka = {"kafka": {"bootstrap_servers": broker.bootstrap}, "signals": {"kafka_topic": f"{prefix}-signals"},
             "notifications": {"kafka_topic": f"{prefix}-notes"}}
    data = config_data(mariadb, database, tmp_path, name=prefix, **kafka,
                       sink={"type": "kafka", "kafka": {"create_topics": False}})
    checks = _checks(data)
    assert checks["Kafka brokers"][0] == "ok"
    assert checks["Kafka signal topic"][0] == checks["Kafka notification topic"][0] == "ok"
    status, detail, remedy = checks["Kafka data topics"]
    assert status == "warn" and f"{prefix}.{database}.customers" in detail, (status, detail)
    assert "auto.create.topics.enable" in remedy and "create_topics" in remedy
    assert not _failed(checks)

    data["sink"]["kafka"]["create_topics"] = True
    status, detail, _ = _checks(data)["Kafka data topics"]
    assert status == "ok" and "to be created at start" in detail, detail
    for topic in (f"{prefix}.{database}.customers", f"{prefix}.{database}.orders", prefix):
        broker.create_topic(topic)
    assert _checks(data)["Kafka data topics"][:2] == ("ok", "all 3 exist")
    # the topics the routers of sink.kafka.transforms send the records to, not the tables' own
    data["sink"]["kafka"].update(create_topics=False, transforms=[
        {"type": "regex_router", "regex": rf"{prefix}\.{database}\.(customers|orders)", "replacement": f"{prefix}.all"}])
    status, detail, _ = _checks(data)["Kafka data topics"]
    assert status == "warn" and f"{prefix}.all" in detail and "customers" not in detail, detail


# --- local paths -----------------------------------------------------------------------------


def test_unwritable_offsets_path(mariadb, database, tmp_path):
    (tmp_path / "a-file").write_text("x")  # root ignores permissions: a file where a directory must be
    data = config_data(mariadb, database, tmp_path, offsets={"path": str(tmp_path / "a-file" / "offsets.json")})
    status, detail, remedy = _checks(data)["offsets path"]
    assert status == "fail" and "is a file" in detail and "offsets.path" in remedy


def test_offsets_path_that_is_a_directory(mariadb, database, tmp_path):
    data = config_data(mariadb, database, tmp_path)
    Path(data["offsets"]["path"]).mkdir()
    status, detail, _ = _checks(data)["offsets path"]
    assert status == "fail" and "is a directory" in detail


# --- Spark and Iceberg -----------------------------------------------------------------------


@pytest.mark.slow
def test_spark_session_and_iceberg_catalog(mariadb, database, tmp_path):
    """A Spark session of its own (a `dblog check` process): 10 s or more, hence --run-slow."""
    _setup(mariadb, database)
    data = config_data(mariadb, database, tmp_path, sink={"type": "iceberg"},
                       spark={"warehouse": str(tmp_path / "warehouse")})
    result = _dblog("check", "--config", _write(tmp_path / "dblog.toml", data), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert f"✔ Spark and Iceberg catalog: Spark {spark_line()}" in result.stdout
    assert "slow" in result.stderr  # it said why it takes a while
    data["spark"]["conf"] = {"spark.sql.catalog.lake.type": "no-such-catalog-type"}
    result = _dblog("check", "--config", _write(tmp_path / "dblog.toml", data), timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "✗ Spark and Iceberg catalog:" in result.stdout and "no-such-catalog-type" in result.stdout, result.stdout
    assert "    → check [spark]" in result.stdout
