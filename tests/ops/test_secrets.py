"""The secrets convention (dblog.runtime.secrets): every secret setting `foo` as `foo`, `foo_env`
or `foo_file` (+ `foo_file_key`); errors name the setting and the variable or file, never a value;
every command that connects resolves them all before it starts (through the real CLI).

What dblog's outputs show while it runs with secrets: tests/ops/test_security.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from pydantic import BaseModel, SecretStr

from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.secrets import SecretError, check_secrets, resolve_secret, secret_problems, secret_settings

REPO = Path(__file__).resolve().parents[2]
SECRET = "Pw-7c1e-secret-Z"


def test_the_three_forms_and_a_key_of_a_properties_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DBLOG_TEST_PW", SECRET)
    plain = tmp_path / "password"
    plain.write_text(SECRET + "\n")  # as `echo` writes it: one trailing newline is not part of it
    crlf = tmp_path / "password.crlf"
    crlf.write_text(SECRET + "\r\n")
    properties = tmp_path / "secrets.properties"
    properties.write_text(f"# Kafka Connect FileConfigProvider\nother = x\nmysql.password = {SECRET}\n")
    assert resolve_secret("s.p", SecretStr(SECRET), None, None) == SECRET
    assert resolve_secret("s.p", None, "DBLOG_TEST_PW", None) == SECRET
    assert resolve_secret("s.p", None, None, str(plain)) == SECRET
    assert resolve_secret("s.p", None, None, str(crlf)) == SECRET
    assert resolve_secret("s.p", None, None, str(properties), "mysql.password") == SECRET
    assert resolve_secret("s.p", SecretStr(""), None, None) is None
    plain.write_text("rotated")  # read at every connection: a rotated secret is picked up
    assert resolve_secret("s.p", None, None, str(plain)) == "rotated"


@pytest.mark.parametrize("arguments, named", [
    ((None, "DBLOG_TEST_UNSET", None, None), "s.p_env names 'DBLOG_TEST_UNSET', which is not set"),
    ((None, None, "/nonexistent/pw", None), "s.p_file: cannot read /nonexistent/pw: No such file"),
    ((None, None, "DIR", None), "s.p_file: cannot read"),  # a directory
    ((None, None, "PROPS", "nokey"), "s.p_file_key: PROPS has no key 'nokey'"),
    ((None, None, "BADPROPS", "k"), "s.p_file: BADPROPS is not a valid properties file: line 1, the value of k"),
    ((None, None, None, "k"), "s.p_file_key names a key of a properties file: set s.p_file"),
    ((SecretStr(SECRET), "DBLOG_TEST_PW", None, None), "s.p and s.p_env are set: give the secret one way only"),
    ((None, "DBLOG_TEST_PW", "PROPS", None), "s.p_env and s.p_file are set"),
])
def test_errors_name_the_setting_and_the_source_never_the_value(tmp_path, monkeypatch, arguments, named):
    monkeypatch.setenv("DBLOG_TEST_PW", SECRET)
    monkeypatch.delenv("DBLOG_TEST_UNSET", raising=False)
    props, bad = tmp_path / "s.properties", tmp_path / "bad.properties"
    props.write_text(f"k={SECRET}\n")
    bad.write_text(f"k={SECRET}\\u12\n")  # a malformed escape in the secret's line
    paths = {"PROPS": str(props), "BADPROPS": str(bad), "DIR": str(tmp_path)}
    arguments = [paths.get(a, a) if isinstance(a, str) else a for a in arguments]
    named = named.replace("BADPROPS", str(bad)).replace("PROPS", str(props))
    with pytest.raises(SecretError) as raised:
        resolve_secret("s.p", *arguments)
    assert named in str(raised.value) and SECRET not in str(raised.value), str(raised.value)


class _Sasl(BaseModel):
    mechanism: str = "PLAIN"
    password: SecretStr = SecretStr("")
    password_env: str | None = None
    password_file: str | None = None


class _Catalog(BaseModel):
    token: SecretStr = SecretStr("")
    token_env: str | None = None
    token_file: str | None = None
    token_file_key: str | None = None


class _Tree(BaseModel):
    sasl: _Sasl = _Sasl()
    catalogs: list[_Catalog] = []
    named: dict[str, _Catalog] = {}


def test_every_secret_setting_of_the_tree_is_found_and_checked(tmp_path, monkeypatch):
    """Secret settings added later (SASL, TLS key passphrases, catalog credentials) are checked
    at start without more code: any model field `foo` beside a `foo_env`, at any depth."""
    monkeypatch.delenv("DBLOG_TEST_UNSET", raising=False)
    tree = _Tree(sasl=_Sasl(password_env="DBLOG_TEST_UNSET"),
                 catalogs=[_Catalog(), _Catalog(token_file=str(tmp_path / "missing"))],
                 named={"lake": _Catalog(token=SecretStr(SECRET))})
    assert [where for where, _, _ in secret_settings(tree)] == [
        "sasl.password", "catalogs[0].token", "catalogs[1].token", "named['lake'].token"]
    with pytest.raises(SecretError) as raised:
        check_secrets(tree)
    message = str(raised.value)  # every problem at once
    assert "sasl.password_env names 'DBLOG_TEST_UNSET'" in message and "catalogs[1].token_file" in message
    assert SECRET not in message
    given, problems = secret_problems(tree)  # what `dblog check` prints: one message per setting
    assert given == ["named['lake'].token"] and list(problems) == ["sasl.password", "catalogs[1].token"]
    assert problems["sasl.password"].startswith("sasl.password_env names 'DBLOG_TEST_UNSET'")
    assert problems["catalogs[1].token"].startswith("catalogs[1].token_file: cannot read")
    (tmp_path / "missing").write_text("x")
    monkeypatch.setenv("DBLOG_TEST_UNSET", "y")
    assert check_secrets(tree) == ["sasl.password", "catalogs[1].token", "named['lake'].token"]
    assert [where for where, _, _ in secret_settings(parse_config({}))] >= ["source.password"]
    with pytest.raises(ConfigError, match="source.password_file: cannot read"):
        parse_config({"source": {"password_file": str(tmp_path / "nope")}}).check_secrets()


# --- through the command line ----------------------------------------------------------------


def _dblog(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DBLOG_TEST_")}
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, env={**environment, **env, "PYTHONPATH": str(REPO)})


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("source, named", [
    ({"password_env": "DBLOG_TEST_UNSET"}, "source.password_env names 'DBLOG_TEST_UNSET', which is not set"),
    ({"password_file": "/nonexistent/pw"}, "source.password_file: cannot read /nonexistent/pw"),
    ({"password_file": "PROPS", "password_file_key": "nokey"}, "source.password_file_key: PROPS has no key 'nokey'"),
    ({"password_env": "DBLOG_TEST_PW", "password_file": "PROPS"}, "source.password_env and source.password_file"),
])
def test_commands_stop_before_connecting_naming_the_variable_or_file(tmp_path, source, named):
    """`dblog run` and `dblog signal` against a port where nothing listens (were it tried, the
    error would be "Can't connect", after retries): they stop at once, exit 1, one message
    naming the setting and the variable or file, in text and in JSON log format; never a value
    (DBLOG_TEST_PW holds one)."""
    props = tmp_path / "secrets.properties"
    props.write_text(f"password={SECRET}\n")
    source = {key: value.replace("PROPS", str(props)) for key, value in source.items()}
    named = named.replace("PROPS", str(props))
    config = {"source": {"port": _closed_port(), **source}, "signals": {"table": "db.sig"},
              "offsets": {"path": str(tmp_path / "offsets.json")}, "sink": {"path": str(tmp_path / "out.jsonl")}}
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(config))
    env = {"DBLOG_TEST_PW": SECRET}
    for command in (["run", "--config", str(path)], ["signal", "log", "--config", str(path), "hello"]):
        for log_format in ("text", "json"):
            done = _dblog("--log-format", log_format, *command, env=env, cwd=tmp_path)
            output = done.stdout + done.stderr
            assert done.returncode == 1 and named in done.stderr, (command, output)
            assert "Can't connect" not in output and "Traceback" not in output and SECRET not in output
            if log_format == "json":
                lines = [json.loads(line) for line in done.stderr.splitlines()]
                assert lines[-1]["level"] == "ERROR" and named in lines[-1]["message"]
    assert not (tmp_path / "out.jsonl").exists()
    status = _dblog("status", "--config", str(path), env={}, cwd=tmp_path)  # reads offsets only: no secret needed
    assert status.returncode == 1 and "no offsets" in status.stderr, status.stderr


def test_run_from_a_debezium_file_stops_naming_the_unset_variable(tmp_path):
    """The issue's Debezium Server line, `database.password=${MYSQL_CDC_PASSWORD}`, with the
    variable unset: `dblog run --debezium-config` stops naming it (no literal "${…}" password
    tried against the server); convert-debezium needs no variable and writes the reference."""
    path = tmp_path / "application.properties"
    path.write_text("\n".join([
        "debezium.sink.type=kafka",
        f"debezium.sink.kafka.producer.bootstrap.servers=127.0.0.1:{_closed_port()}",
        "debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector",
        f"debezium.source.database.port={_closed_port()}",
        "debezium.source.database.password=${MYSQL_CDC_PASSWORD}",
        "debezium.source.topic.prefix=tutorial",
    ]) + "\n")
    done = _dblog("run", "--debezium-config", str(path), env={}, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "source.password_env names 'MYSQL_CDC_PASSWORD', which is not set" in done.stderr, done.stderr
    converted = _dblog("--log-level", "warning", "convert-debezium", str(path), env={}, cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    assert 'password_env = "MYSQL_CDC_PASSWORD"' in converted.stdout


def test_only_secret_fields_are_secret_settings():
    """A dict of catalog properties beside a dict of their variables is not a secret setting:
    both given at once must not read as "the secret given two ways"."""
    config = parse_config({"sink": {"type": "iceberg"}, "iceberg": {
        "catalog_type": "jdbc", "catalog_uri": "jdbc:mariadb://catalog/iceberg", "jdbc_user": "u",
        "jdbc_password": "p", "catalog_properties": {"jdbc.useSSL": "true"},
        "catalog_properties_env": {"token": "HOME"}}})
    assert config.check_secrets() == ["iceberg.jdbc_password"]
