"""examples/ (issue 27 item 6): every example configuration loads with its secrets from the
environment, the Debezium one is exactly what `dblog convert-debezium` makes of its connector
file, and each example's grants and settings pass `dblog check` against real servers: a private
MariaDB that takes TLS only (its certificate for `localhost`, verified) and a broker that takes
SASL_SSL only, with the example's hosts, CA paths and offsets path swapped for the test's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
import tomli_w

from dblog.runtime.config import load_config

pytestmark = pytest.mark.timeout(300)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = sorted(EXAMPLES.glob("*/dblog.toml"))


def _secret_variables(data: dict) -> list[str]:
    """The environment variables the config's `*_env` settings name."""
    found = []
    for key, value in data.items():
        if isinstance(value, dict):
            found += _secret_variables(value)
        elif key.endswith("_env") and isinstance(value, str):
            found.append(value)
    return found


def test_there_are_examples_and_each_has_its_grants():
    assert {path.parent.name for path in CONFIGS} >= {"mysql-tls-to-kafka", "debezium-connect",
                                                      "mariadb-to-iceberg-jdbc"}
    for config in CONFIGS:
        assert (config.parent / "grants.sql").is_file(), f"{config.parent.name} has no grants.sql"


@pytest.mark.parametrize("path", CONFIGS, ids=[path.parent.name for path in CONFIGS])
def test_every_example_loads_with_its_secrets_from_the_environment(path, monkeypatch):
    variables = _secret_variables(tomllib.loads(path.read_text()))
    assert variables, f"{path}: no secret comes from the environment"
    for name in variables:
        monkeypatch.setenv(name, f"value-of-{name}")
    config = load_config(path)
    assert config.check_secrets() is not None
    monkeypatch.delenv(variables[0])
    with pytest.raises(ValueError, match=variables[0]):
        load_config(path).check_secrets()


def test_the_debezium_example_is_what_convert_debezium_makes_of_the_connector(tmp_path):
    """`cd examples/debezium-connect && dblog convert-debezium connector.json -o dblog.toml`
    makes exactly the file checked in: the example cannot drift from the converter."""
    folder = tmp_path / "debezium-connect"
    shutil.copytree(EXAMPLES / "debezium-connect", folder)
    (folder / "dblog.toml").unlink()
    subprocess.run([sys.executable, "-m", "dblog.cli", "convert-debezium", "connector.json", "-o", "dblog.toml"],
                   cwd=folder, check=True, capture_output=True, text=True)
    assert (folder / "dblog.toml").read_text() == (EXAMPLES / "debezium-connect" / "dblog.toml").read_text()


# --- against real servers ---------------------------------------------------------------------


def _run_grants(server, sql: str, password: str) -> None:
    """The example's grants.sql, statement by statement, with a known password."""
    for statement in (part.strip() for part in re.sub(r"--[^\n]*", "", sql).split(";")):
        if statement:
            server.execute(statement.replace("'change-me'", f"'{password}'"))


@pytest.mark.parametrize("example", ["mysql-tls-to-kafka", "debezium-connect"])
def test_an_example_passes_dblog_check_against_tls_mariadb_and_a_sasl_ssl_broker(
        example, tls_mariadb, secured_broker, kafka_tls, tmp_path):
    data = tomllib.loads((EXAMPLES / example / "dblog.toml").read_text())
    db = tls_mariadb.db
    user = data["source"]["user"]
    for host in ("%", "localhost"):
        db.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
    signal_db = data["signals"]["table"].split(".")[0]
    db.execute(f"DROP DATABASE IF EXISTS `{signal_db}`")
    db.execute(f"CREATE DATABASE `{signal_db}`")
    db.execute(f"CREATE TABLE `{signal_db}`.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    db.execute(f"INSERT INTO `{signal_db}`.orders VALUES (1, 'one')")
    db_password, kafka_password = f"Db-{uuid.uuid4().hex}", f"Kafka-{uuid.uuid4().hex}"
    _run_grants(db, (EXAMPLES / example / "grants.sql").read_text(), db_password)
    secured_broker.create_user(data["kafka"]["sasl_username"], kafka_password, data["kafka"]["sasl_mechanism"])
    # The test's servers instead of the example's hosts; everything else as the example has it.
    data["source"].update(host="localhost", port=db.port)
    data["source"]["tls"]["ca"] = str(tls_mariadb.ca)
    data["kafka"].update(bootstrap_servers=secured_broker.bootstrap, ssl_ca=kafka_tls["ca"])
    data.setdefault("offsets", {})["path"] = str(tmp_path / "offsets.json")
    data.pop("http", None)
    config = tmp_path / "dblog.toml"
    config.write_text(tomli_w.dumps(data))
    env = {**os.environ, data["source"]["password_env"]: db_password, data["kafka"]["sasl_password_env"]: kafka_password}
    result = subprocess.run([sys.executable, "-m", "dblog.cli", "check", "--config", str(config), "--no-spark"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✗" not in result.stdout and "TLS" in result.stdout, result.stdout
    assert db_password not in result.stdout + result.stderr and kafka_password not in result.stdout + result.stderr
