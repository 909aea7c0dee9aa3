"""examples/ (issue 27 item 6): every example configuration loads with its secrets from the
environment, the Debezium one is exactly what `dblog convert-debezium` makes of its connector
file, and each example's grants and settings pass `dblog check` against real servers: a private
MariaDB that takes TLS only (its certificate for `localhost`, verified) and a broker that takes
SASL_SSL only, with the example's hosts, CA paths and offsets path swapped for the test's."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
import tomli_w
from support import eventually

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
    assert {path.parent.name for path in CONFIGS} >= {"mysql-tls-to-kafka", "debezium-connect", "debezium-server",
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


# The Debezium examples: the file Debezium reads, and the variables its placeholders name (unset
# while converting: the checked-in TOML holds their defaults, and no secret).
DEBEZIUM_EXAMPLES = {"debezium-connect": "connector.json", "debezium-server": "application.properties"}
PLACEHOLDER_VARIABLES = ("KAFKA_BOOTSTRAP_SERVERS", "MYSQL_HOST", "MYSQL_PORT", "MYSQL_CDC_PASSWORD",
                         "KAFKA_CDC_PASSWORD")


def _dblog_env(**more) -> dict:
    """The environment of a `python -m dblog.cli` child: this checkout's dblog (also from another
    cwd), none of the examples' placeholder variables."""
    env = {key: value for key, value in os.environ.items() if key not in PLACEHOLDER_VARIABLES}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path), **more}


def _convert(example: str, folder: Path) -> Path:
    """`cd examples/EXAMPLE && dblog convert-debezium FILE -o dblog.toml`, in a copy at `folder`."""
    shutil.copytree(EXAMPLES / example, folder)
    (folder / "dblog.toml").unlink()
    result = subprocess.run([sys.executable, "-m", "dblog.cli", "convert-debezium", DEBEZIUM_EXAMPLES[example], "-o",
                             "dblog.toml"], cwd=folder, capture_output=True, text=True, env=_dblog_env())
    assert result.returncode == 0, result.stderr
    return folder / "dblog.toml"


@pytest.mark.parametrize("example", sorted(DEBEZIUM_EXAMPLES))
def test_the_debezium_example_is_what_convert_debezium_makes_of_the_connector(example, tmp_path):
    """`cd examples/debezium-connect && dblog convert-debezium connector.json -o dblog.toml` (and
    debezium-server's application.properties) makes exactly the file checked in: the example
    cannot drift from the converter."""
    converted = _convert(example, tmp_path / example)
    assert converted.read_text() == (EXAMPLES / example / "dblog.toml").read_text()
    assert tomllib.loads(converted.read_text())["sink"]["type"] == "kafka"


# --- against real servers ---------------------------------------------------------------------


def _run_grants(server, sql: str, password: str) -> None:
    """The example's grants.sql, statement by statement, with a known password."""
    for statement in (part.strip() for part in re.sub(r"--[^\n]*", "", sql).split(";")):
        if statement:
            server.execute(statement.replace("'change-me'", f"'{password}'"))


def _on_test_servers(example: str, data: dict, tls_mariadb, secured_broker, kafka_tls,
                     tmp_path: Path) -> tuple[Path, dict, tuple]:
    """The example's account (its grants.sql, a known password) and signal database, with a table
    `orders` of three rows, on the TLS-only MariaDB; its Kafka user on the SASL_SSL broker; the
    config with the test's servers instead of the example's hosts (everything else as the example
    has it) written to `tmp_path`. Returns (config path, environment with the secrets, secrets)."""
    db = tls_mariadb.db
    user = data["source"]["user"]
    for host in ("%", "localhost"):
        db.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
    signal_db = data["signals"]["table"].split(".")[0]
    db.execute(f"DROP DATABASE IF EXISTS `{signal_db}`")
    db.execute(f"CREATE DATABASE `{signal_db}`")
    db.execute(f"CREATE TABLE `{signal_db}`.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    db.execute(f"INSERT INTO `{signal_db}`.orders VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    db_password, kafka_password = f"Db-{uuid.uuid4().hex}", f"Kafka-{uuid.uuid4().hex}"
    _run_grants(db, (EXAMPLES / example / "grants.sql").read_text(), db_password)
    secured_broker.create_user(data["kafka"]["sasl_username"], kafka_password, data["kafka"]["sasl_mechanism"])
    # The broker enforces ACLs: the example's user gets them all, as on a cluster set up for it
    # (what a missing one does: tests/sinks/kafka/test_kafka_security.py)
    secured_broker.allow_everything(data["kafka"]["sasl_username"])
    data["source"].update(host="localhost", port=db.port)
    data["source"]["tls"]["ca"] = str(tls_mariadb.ca)
    data["kafka"].update(bootstrap_servers=secured_broker.bootstrap, ssl_ca=kafka_tls["ca"])
    if data.get("sink", {}).get("kafka", {}).get("replication_factor"):
        data["sink"]["kafka"]["replication_factor"] = 1  # the test's Kafka is one broker (the example asks 3)
    data.setdefault("offsets", {})["path"] = str(tmp_path / "offsets.json")
    data.pop("http", None)
    config = tmp_path / "dblog.toml"
    config.write_text(tomli_w.dumps(data))
    env = _dblog_env(**{data["source"]["password_env"]: db_password,
                        data["kafka"]["sasl_password_env"]: kafka_password})
    return config, env, (db_password, kafka_password)


@pytest.mark.parametrize("example", ["mysql-tls-to-kafka", "debezium-connect", "debezium-server"])
def test_an_example_passes_dblog_check_against_tls_mariadb_and_a_sasl_ssl_broker(
        example, tls_mariadb, secured_broker, kafka_tls, tmp_path):
    data = tomllib.loads((EXAMPLES / example / "dblog.toml").read_text())
    config, env, secrets = _on_test_servers(example, data, tls_mariadb, secured_broker, kafka_tls, tmp_path)
    result = subprocess.run([sys.executable, "-m", "dblog.cli", "check", "--config", str(config), "--no-spark"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✗" not in result.stdout and "TLS" in result.stdout, result.stdout
    assert not any(secret in result.stdout + result.stderr for secret in secrets)


@pytest.mark.parametrize("example", sorted(DEBEZIUM_EXAMPLES))
def test_a_debezium_example_converts_and_runs_unchanged(example, tls_mariadb, secured_broker, kafka_tls, tmp_path):
    """Issue 28 item 4: the Debezium file, converted as it is, runs: `dblog run` on the converted
    config (the test's servers for the example's hosts) snapshots the table into the topic Debezium
    names, then streams a delete, with the example's schemas.enable and tombstones.on.delete."""
    from support.kafka_topics import decode, topic_records

    data = tomllib.loads(_convert(example, tmp_path / example).read_text())
    schemas, tombstones = data["sink"]["kafka"]["schemas"], data["sink"]["kafka"].get("tombstones", True)
    assert (schemas, tombstones) == {"debezium-connect": (True, True), "debezium-server": (False, False)}[example]
    config, env, secrets = _on_test_servers(example, data, tls_mariadb, secured_broker, kafka_tls, tmp_path)
    db_name = data["signals"]["table"].split(".")[0]
    topic = f"{data['name']}.{db_name}.orders"  # Debezium's <topic.prefix>.<db>.<table>
    reader = secured_broker.client_options()
    log = tmp_path / "dblog.log"

    def changes() -> list:
        return [decode(record, schemas) for part in topic_records(secured_broker.bootstrap, topic, **reader).values()
                for record in part]

    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "dblog.cli", "run", "--config", str(config)], cwd=tmp_path,
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    try:
        def completed() -> bool:
            assert process.poll() is None, log.read_text()[-3000:]
            return " COMPLETED " in log.read_text()

        eventually(completed, 120, interval=0.2, message=lambda: log.read_text()[-3000:])
        tls_mariadb.db.execute(f"DELETE FROM `{db_name}`.orders WHERE id = 2")
        eventually(lambda: any(value and value.get("op") == "d" for _, value in changes()), 60, interval=0.5,
                   message=lambda: log.read_text()[-3000:])
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    records = changes()
    snapshot = sorted((key["id"], value["after"]["note"]) for key, value in records if value and value["op"] == "r")
    assert snapshot == [(1, "one"), (2, "two"), (3, "three")], records
    deletes = [index for index, (key, value) in enumerate(records) if value and value["op"] == "d"]
    assert [records[index][0] for index in deletes] == [{"id": 2}]
    assert [key for key, value in records if value is None] == ([{"id": 2}] if tombstones else [])
    first = next(record for part in topic_records(secured_broker.bootstrap, topic, **reader).values()
                 for record in part)
    assert ("schema" in json.loads(first.value)) == schemas  # JsonConverter's schemas.enable, as the file says
    output = log.read_text()
    assert not any(secret in output for secret in secrets)


def test_the_iceberg_example_passes_dblog_check_with_its_jdbc_catalog(tls_mariadb, mariadb, tmp_path):
    """The source part of its grants.sql on the TLS-only MariaDB, the catalog part on another
    server (the session's MariaDB, a database of its own), then `dblog check` with Spark: the
    example's driver jar, catalog type and credentials (from a file) open the catalog."""
    from lab.jdbc_driver import mariadb_jdbc_jar

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
        env = _dblog_env(**{data["source"]["password_env"]: db_password})
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
