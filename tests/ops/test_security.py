"""Security (issue 6 item 6): credentials never leak, signals come only from the configured
channel, least privileges per watermark mode.

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
import uuid
from pathlib import Path

import pytest
import tomli_w
from support.harness import EngineThread, compare, config_data, make_config, published
from support import eventually

from dblog.lab.workload import tables
from dblog.runtime.config import ConfigError, parse_config
from dblog.sinks.jsonl import read_json_lines

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
