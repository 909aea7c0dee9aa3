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

from dblog.runtime.config import parse_config

pytestmark = pytest.mark.timeout(300)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = sorted(EXAMPLES.glob("*/dblog.toml"))


def _secrets(data: dict, prefix: str = "") -> list[tuple[str, str, str]]:
    """(setting, form, variable or file) of every secret the config gives by reference."""
    found = []
    for key, value in data.items():
        if isinstance(value, dict):
            found += _secrets(value, f"{prefix}{key}.")
        elif key.endswith(("_env", "_file")) and isinstance(value, str):
            form = key.rpartition("_")[2]
            found.append((prefix + key.removesuffix(f"_{form}"), form, value))
    return found


def _with_secrets(data: dict, workdir: Path, monkeypatch) -> dict:
    """`data` with each secret given: its variable set, its file written under `workdir` (the
    example's path swapped for it)."""
    for where, form, reference in _secrets(data):
        if form == "env":
            monkeypatch.setenv(reference, f"value-of-{reference}")
        else:
            section = data
            *parents, name = where.split(".")
            for part in parents:
                section = section[part]
            section[f"{name}_file"] = str(workdir / Path(reference).name)
            (workdir / Path(reference).name).write_text(f"value-of-{name}\n")
    return data


def test_there_are_examples_and_each_has_its_grants():
    assert {path.parent.name for path in CONFIGS} >= {"mysql-tls-to-kafka", "debezium-connect",
                                                      "mariadb-to-iceberg-jdbc"}
    for config in CONFIGS:
        assert (config.parent / "grants.sql").is_file(), f"{config.parent.name} has no grants.sql"


@pytest.mark.parametrize("path", CONFIGS, ids=[path.parent.name for path in CONFIGS])
def test_every_example_loads_with_its_secrets_from_the_environment_or_files(path, tmp_path, monkeypatch):
    data = tomllib.loads(path.read_text())
    secrets = _secrets(data)
    assert secrets, f"{path}: no secret is given by reference"
    config = parse_config(_with_secrets(data, tmp_path, monkeypatch), origin=str(path))
    assert len(config.check_secrets()) == len(secrets)
    for where, form, reference in _secrets(data):  # each one missing stops dblog, naming it
        if form == "env":
            monkeypatch.delenv(reference)
        else:
            Path(reference).rename(f"{reference}.gone")
        with pytest.raises(ValueError, match=re.escape(where)):
            config.check_secrets()
        if form == "env":
            monkeypatch.setenv(reference, "back")
        else:
            Path(f"{reference}.gone").rename(reference)


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


def test_the_iceberg_example_passes_dblog_check_with_its_jdbc_catalog(tls_mariadb, mariadb, tmp_path):
    """The source part of its grants.sql on the TLS-only MariaDB, the catalog part on another
    server (the session's MariaDB, a database of its own), then `dblog check` with Spark: the
    example's driver jar, catalog type and credentials (from a file) open the catalog."""
    from dblog.lab.jdbc_driver import mariadb_jdbc_jar

    example = EXAMPLES / "mariadb-to-iceberg-jdbc"
    data = tomllib.loads((example / "dblog.toml").read_text())
    assert Path(data["spark"]["jars"][0]) == mariadb_jdbc_jar()  # installed by apt-get when missing
    source_sql, catalog_sql = re.split(r"\n(?=-- On the catalog database)", (example / "grants.sql").read_text())
    db = tls_mariadb.db
    for host in ("%", "localhost"):
        db.execute(f"DROP USER IF EXISTS 'dblog'@'{host}'")
    db.execute("DROP DATABASE IF EXISTS shop")
    db.execute("CREATE DATABASE shop")
    db.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    db_password, catalog_password = f"Db-{uuid.uuid4().hex}", f"Cat-{uuid.uuid4().hex}"
    _run_grants(db, source_sql, db_password)
    # On the shared server, a catalog database and account of this test's own.
    suffix = uuid.uuid4().hex[:8]
    catalog_db, catalog_user = f"iceberg_catalog_{suffix}", f"iceberg_{suffix}"
    _run_grants(mariadb, catalog_sql.replace("iceberg_catalog", catalog_db).replace("'iceberg'", f"'{catalog_user}'"),
                catalog_password)
    try:
        data["source"].update(host="localhost", port=db.port)
        data["spark"]["warehouse"] = str(tmp_path / "lake")
        password_file = tmp_path / "iceberg-catalog-password"
        password_file.write_text(catalog_password + "\n")
        data["iceberg"].update(catalog_uri=f"jdbc:mariadb://127.0.0.1:{mariadb.port}/{catalog_db}",
                               jdbc_user=catalog_user, jdbc_password_file=str(password_file))
        data["offsets"]["path"] = str(tmp_path / "offsets.json")
        config = tmp_path / "dblog.toml"
        config.write_text(tomli_w.dumps(data))
        env = {**os.environ, data["source"]["password_env"]: db_password}
        result = subprocess.run([sys.executable, "-m", "dblog.cli", "check", "--config", str(config)],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and "✗" not in result.stdout, output
        assert re.search(r"✔ .*(Spark|catalog)", result.stdout), result.stdout
        assert db_password not in output and catalog_password not in output
        tables = {row[0] for row in mariadb.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (catalog_db,))}
        assert "iceberg_tables" in tables, tables  # the catalog was opened in that database
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{catalog_db}`")
        mariadb.execute(f"DROP USER IF EXISTS '{catalog_user}'@'%'")
