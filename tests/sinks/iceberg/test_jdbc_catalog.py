"""The Iceberg sink behind Iceberg's JDBC catalog (`iceberg.catalog_type = "jdbc"`), on a real
database: a database of the run's private MariaDB, reached through Debian's MariaDB Connector/J
as a user of its own with a password given by environment variable.

The in-process tests add the catalog to the run's shared Spark session (`spark`, whose
classpath holds the driver: a catalog's settings can be set on a running session, its jars not);
the kill -9 test runs `dblog run` in a child process (its own JVM) and blocks the catalog's
commit by holding a lock on the table's row of `iceberg_tables`, so that the kill lands between
the new metadata file and the catalog's compare-and-swap.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.harness import EngineProcess, EngineThread, config_data, snapshot_under_writes

from dblog.core.gtid import GtidSet
from lab.jdbc_driver import mariadb_jdbc_jar
from lab.object_store import LocalS3
from dblog.demo.verify import source_rows
from dblog.demo.workload import tables
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.sink_factory import open_sink, resolve_secret
from dblog.sinks.base import SinkError, SinkUnavailable
from dblog.sinks.iceberg.catalog import CatalogSpec, catalog_error
from dblog.sinks.iceberg.plugin import catalog_secrets
from dblog.sinks.iceberg.sink import read_target
from dblog.sinks.iceberg.session import iceberg_spark_conf, runtime_package, s3a_package

pytestmark = pytest.mark.timeout(900)

CATALOG = "jcat"  # the Spark catalog name (also the catalog_name column of iceberg_tables)
PASSWORD_VARIABLE = "DBLOG_TEST_CATALOG_PASSWORD"


class JdbcCatalog:
    """A catalog database and its user on the run's MariaDB, and the settings that reach it."""

    def __init__(self, mariadb, warehouse: Path) -> None:
        self.mariadb = mariadb
        self.database = f"iceberg_{uuid.uuid4().hex[:10]}"
        self.user = f"cat_{uuid.uuid4().hex[:8]}"
        self.password = "pw-" + secrets.token_hex(12)  # grepped for in every output
        self.warehouse = str(warehouse)
        self.uri = f"jdbc:mariadb://127.0.0.1:{mariadb.port}/{self.database}"
        mariadb.execute(f"CREATE DATABASE `{self.database}`")
        mariadb.create_user(self.user, self.password, [f"ALL ON `{self.database}`.* "])

    def sections(self, **iceberg) -> dict:
        """`[spark]` and `[iceberg]` of an engine writing through this catalog."""
        return {
            "sink": {"type": "iceberg"},
            "spark": {"catalog": CATALOG, "warehouse": self.warehouse, "jars": [str(mariadb_jdbc_jar())]},
            "iceberg": {"catalog_type": "jdbc", "catalog_uri": self.uri, "jdbc_user": self.user,
                        "jdbc_password_env": PASSWORD_VARIABLE, **iceberg},
        }

    def attach(self, spark) -> None:
        """Add the catalog to the running session (for reading what a `dblog run` child wrote)."""
        spec = CatalogSpec("jdbc", self.uri, {"jdbc.user": self.user}, {"jdbc.password": self.password})
        for key, value in {**spec.conf(CATALOG, self.warehouse), **spec.secret_conf(CATALOG)}.items():
            spark.conf.set(key, value)

    def tables(self) -> dict[tuple[str, str], str]:
        """(namespace, table) → metadata_location, as the catalog database holds them (none before
        the catalog's first start creates its tables)."""
        if not self.mariadb.execute(f"SHOW TABLES FROM `{self.database}` LIKE 'iceberg_tables'"):
            return {}
        rows = self.mariadb.execute(
            f"SELECT table_namespace, table_name, metadata_location FROM `{self.database}`.iceberg_tables "
            "WHERE catalog_name = %s", (CATALOG,))
        return {(namespace, table): location for namespace, table, location in rows}

    def drop(self) -> None:
        self.mariadb.execute(f"DROP DATABASE IF EXISTS `{self.database}`")
        for host in ("%", "localhost"):
            self.mariadb.execute("DROP USER IF EXISTS %s@%s", (self.user, host))


@pytest.fixture(scope="module")
def jdbc_catalog(mariadb, tmp_path_factory):
    catalog = JdbcCatalog(mariadb, tmp_path_factory.mktemp("jdbc-warehouse"))
    try:
        yield catalog
    finally:
        catalog.drop()


@pytest.fixture
def catalog_password(jdbc_catalog, monkeypatch):
    """The catalog password in the environment variable the configs name (also for children)."""
    monkeypatch.setenv(PASSWORD_VARIABLE, jdbc_catalog.password)
    return jdbc_catalog.password


# --- settings, without services ------------------------------------------------------------


def _iceberg(**values):
    return parse_config({"iceberg": values}).iceberg


def test_catalog_settings_are_checked_against_the_catalog_type():
    with pytest.raises(ConfigError, match='catalog_type = "jdbc" needs catalog_uri'):
        _iceberg(catalog_type="jdbc")
    with pytest.raises(ConfigError, match="catalog_uri is for"):
        _iceberg(catalog_uri="jdbc:mariadb://db/iceberg")
    with pytest.raises(ConfigError, match="jdbc_user: for catalog_type"):
        _iceberg(jdbc_user="me")
    with pytest.raises(ConfigError, match="a JDBC URL starting with jdbc:"):
        _iceberg(catalog_type="jdbc", catalog_uri="mariadb://db/iceberg")
    with pytest.raises(ConfigError, match="catalog_uri holds a password"):
        _iceberg(catalog_type="jdbc", catalog_uri="jdbc:mysql://db/iceberg?user=a&password=b")
    with pytest.raises(ConfigError, match="use iceberg.jdbc_password_env"):
        _iceberg(catalog_properties={"jdbc.password": "b"})
    with pytest.raises(ConfigError, match="use spark.warehouse"):
        _iceberg(catalog_properties={"warehouse": "/x"})


def test_catalog_secrets_come_from_the_environment_or_files_and_stay_out_of_spark_start_settings(
        tmp_path, monkeypatch):
    monkeypatch.setenv("CAT_PW", "pw-from-env")
    (tmp_path / "token").write_text("token-from-file\n")
    settings = _iceberg(catalog_type="jdbc", catalog_uri="jdbc:mariadb://db:3306/iceberg", jdbc_user="dblog",
                        jdbc_password_env="CAT_PW", catalog_properties={"jdbc.useSSL": "true"},
                        catalog_properties_file={"token": str(tmp_path / "token")})
    assert catalog_secrets(settings, resolve_secret) == {"jdbc.password": "pw-from-env", "token": "token-from-file"}
    with pytest.raises(ConfigError, match="iceberg.jdbc_password_env names 'NOT_SET_ANYWHERE'"):
        catalog_secrets(settings.model_copy(update={"jdbc_password_env": "NOT_SET_ANYWHERE"}), resolve_secret)

    spec = CatalogSpec("jdbc", settings.catalog_uri, {"jdbc.user": "dblog", "jdbc.useSSL": "true"},
                       catalog_secrets(settings, resolve_secret))
    conf = iceberg_spark_conf("/lake", "c", catalog_spec=spec, jars=["/usr/share/java/driver.jar"])
    assert conf["spark.sql.catalog.c.type"] == "jdbc" and conf["spark.sql.catalog.c.uri"] == settings.catalog_uri
    assert conf["spark.sql.catalog.c.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.c.jdbc.user"] == "dblog" and conf["spark.sql.catalog.c.jdbc.useSSL"] == "true"
    assert conf["spark.jars"] == "/usr/share/java/driver.jar" and conf["spark.jars.packages"] == runtime_package()
    assert "pw-from-env" not in repr(conf) and "token-from-file" not in repr(conf) and "pw-from-env" not in repr(spec)
    assert spec.secret_conf("c") == {"spark.sql.catalog.c.jdbc.password": "pw-from-env",
                                     "spark.sql.catalog.c.token": "token-from-file"}


def test_catalog_errors_name_the_setting_to_fix_and_hide_the_password():
    spec = CatalogSpec("jdbc", "jdbc:postgresql://db/iceberg", {}, {"jdbc.password": "hunter22"})
    missing = catalog_error("c", spec, ["java.sql.SQLException: No suitable driver found for jdbc:postgresql://db/iceberg"])
    assert "apt-get install libpostgresql-jdbc-java" in str(missing) and "/usr/share/java/postgresql.jar" in str(missing)
    refused = catalog_error("c", spec, ["org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect",
                                        "java.sql.SQLInvalidAuthorizationSpecException: Access denied (hunter22)"])
    assert "iceberg.jdbc_password" in str(refused) and "hunter22" not in str(refused)
    unreachable = catalog_error("c", CatalogSpec("rest", "http://127.0.0.1:8181"), [
        "org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request",
        "java.net.ConnectException: Connection refused"])
    assert isinstance(unreachable, SinkUnavailable) and "iceberg.catalog_uri = 'http://127.0.0.1:8181'" in str(unreachable)


# --- against the catalog database ------------------------------------------------------------


@pytest.mark.parametrize("write_mode", ["merge", "upsert"])
def test_snapshot_under_writers_and_streaming_through_a_jdbc_catalog(write_mode, mariadb, database, tmp_path, spark,
                                                                    loaded, write_load, jdbc_catalog,
                                                                    catalog_password):
    rows = 3_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 500},
                       offsets={"commit_interval_seconds": 1.0}, **jdbc_catalog.sections(write_mode=write_mode))
    workload = write_load(rows, writers=2, seed=31, rate=100)
    engine, writes = snapshot_under_writes(workload, lambda: EngineThread(parse_config(data)), timeout=600,
                                           catch_up_timeout=600)
    assert writes > 0
    sink = engine.engine.sink
    assert sink.write_mode == write_mode
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            got = read_target(spark, sink.target_name(table), reader.schemas.schema(table))  # raises on a key twice
            assert got == source_rows(reader, table), table
    finally:
        reader.close()
    # The tables are the catalog database's rows (schema V1: with iceberg_type), under the warehouse
    held = jdbc_catalog.tables()
    for table in tables(database):
        assert held[(database, table.table)].startswith(jdbc_catalog.warehouse + f"/{database}/{table.table}/metadata/")
    columns = {row[0] for row in mariadb.execute(f"SHOW COLUMNS FROM `{jdbc_catalog.database}`.iceberg_tables")}
    assert "iceberg_type" in columns
    assert not spark.catalog.tableExists(f"lake.{database}.orders")  # not the session's Hadoop catalog
    summaries = [r.summary for r in spark.sql(f"SELECT summary FROM {sink.target_name(tables(database)[0])}.snapshots")
                 .collect()]
    equality_deletes = sum(int(s.get("added-equality-delete-files", 0)) for s in summaries)
    assert (equality_deletes > 0) == (write_mode == "upsert"), summaries[-3:]


def test_refused_logins_and_missing_drivers_stop_with_the_setting_to_fix(mariadb, database, tmp_path, spark,
                                                                       jdbc_catalog, monkeypatch):
    wrong = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv(PASSWORD_VARIABLE, wrong)
    sections = jdbc_catalog.sections()
    sections["spark"]["catalog"] = "jcat_refused"  # a catalog Spark has not loaded yet
    config = parse_config(config_data(mariadb, database, tmp_path, **sections))
    with pytest.raises(SinkError, match="refused the login; check iceberg.jdbc_user and iceberg.jdbc_password") as refused:
        open_sink(config, lambda table: None, lambda: "mariadb", lambda table: True)
    assert wrong not in str(refused.value)

    sections["spark"]["catalog"] = "jcat_no_driver"
    sections["iceberg"]["catalog_uri"] = "jdbc:postgresql://127.0.0.1:1/iceberg"
    config = parse_config(config_data(mariadb, database, tmp_path, **sections))
    with pytest.raises(SinkError, match="no JDBC driver .*libpostgresql-jdbc-java") as missing:
        open_sink(config, lambda table: None, lambda: "mariadb", lambda table: True)
    assert wrong not in str(missing.value)


def _metadata_files(table_dir: Path) -> set[str]:
    return {str(path) for path in (table_dir / "metadata").glob("*.metadata.json")}


def _version(metadata_file: str) -> int:
    """The table version a JDBC catalog's metadata file is for (`00042-<uuid>.metadata.json`)."""
    return int(Path(metadata_file).name.split("-", 1)[0])


def _java_children(pid: int) -> list[int]:
    """The pids of the java processes below `pid` (pyspark's JVM of a `dblog run` child)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            queue.append(child)
            try:
                if b"java" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]:
                    found.append(child)
            except OSError:
                pass
    return found


def test_kill_9_during_a_jdbc_catalog_commit_then_restart(mariadb, database, tmp_path, spark, loaded, write_load,
                                                         jdbc_catalog, catalog_password):
    rows = 2_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 400},
                       offsets={"commit_interval_seconds": 0.3}, **jdbc_catalog.sections())
    orders_dir = Path(jdbc_catalog.warehouse) / database / "orders"
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=2, seed=13, rate=100)
    locker = mariadb.connect(jdbc_catalog.database, autocommit=False)
    try:
        engine.start()
        engine.eventually(lambda: len(_metadata_files(orders_dir)) >= 3, 300, message="three commits to orders")
        java = _java_children(engine.process.pid)
        assert java, "no JVM below dblog run"
        for pid in java:  # the password was never on a command line
            assert catalog_password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        # Hold the row the commit's compare-and-swap must update: the next commit of orders
        # writes its metadata file, then waits in its UPDATE.
        with locker.cursor() as cursor:
            cursor.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = %s AND "
                           "table_namespace = %s AND table_name = 'orders' FOR UPDATE", (CATALOG, database))
            (held,) = cursor.fetchone()
        # (or one already waiting when the lock was taken): metadata newer than the catalog's
        engine.eventually(lambda: max(map(_version, _metadata_files(orders_dir))) > _version(held), 30,
                          interval=0.02, message="a commit of orders waiting for the catalog")
        time.sleep(0.2)  # its UPDATE is sent and waits for the lock
        engine.kill()
        assert jdbc_catalog.tables()[(database, "orders")] == held  # the catalog had not moved
    finally:
        locker.rollback()
        locker.close()
        workload.stop()
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: not o.snapshot.get("queue") and target.issubset(o.position), timeout=400)
    engine.terminate()
    assert catalog_password not in engine.log.read_text()
    jdbc_catalog.attach(spark)
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            name = f"`{CATALOG}`.`{database}`.`{table.table}`"
            spark.sql(f"REFRESH TABLE {name}")
            got = read_target(spark, name, reader.schemas.schema(table))  # raises on a key seen twice
            assert got == source_rows(reader, table), table
    finally:
        reader.close()


# --- the JDBC catalog with its tables on S3-compatible object storage --------------------------

# Run in a child process: reading s3a:// needs the S3A packages on the JVM's classpath from its start,
# and the run's shared session has none. Prints {table: equal to the source}.
READ_BACK = """
import json, os, sys
import pymysql
from dblog.core.events import TableId
from dblog.demo.verify import source_rows
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.iceberg.catalog import CatalogSpec
from dblog.sinks.iceberg.session import iceberg_spark_session
from dblog.sinks.iceberg.sink import read_target

args = json.loads(sys.argv[1])
spec = CatalogSpec("jdbc", args["uri"], {"jdbc.user": args["user"]}, {"jdbc.password": os.environ[args["password_env"]]})
spark = iceberg_spark_session(args["warehouse"], args["catalog"], extra_conf=args["conf"], jars=args["jars"],
                              packages=args["packages"], catalog_spec=spec)
reader = SourceConnection(lambda: pymysql.connect(**args["source"], autocommit=True, charset="utf8mb4"))
equal = {}
for name in args["tables"]:
    table = TableId(args["db"], name)
    got = read_target(spark, f"`{args['catalog']}`.`{table.db}`.`{table.table}`", reader.schemas.schema(table))
    equal[name] = got == source_rows(reader, table)
reader.close()
spark.stop()
print(json.dumps(equal))
"""


def test_a_staging_directory_pyarrow_cannot_write_names_the_setting(spark):
    from dblog.sinks.iceberg.sink import SparkIcebergSink

    with pytest.raises(SinkError, match="set iceberg.staging_dir"):
        SparkIcebergSink(spark, "lake", lambda table: None, "mariadb", staging_dir="s3a://lake/staging")


@pytest.fixture(scope="module")
def s3():
    """A private S3 server (moto) with a bucket `lake`."""
    with LocalS3() as server:
        server.create_bucket("lake")
        yield server


def test_jdbc_catalog_with_tables_on_s3_through_a_kill_9(mariadb, database, tmp_path, loaded, write_load,
                                                          jdbc_catalog, catalog_password, s3, monkeypatch):
    """The production shape: a JDBC catalog, tables on object storage (s3a://, Hadoop's S3A
    connector, credentials from the environment), `dblog run` killed and restarted."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dblog-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3-" + secrets.token_hex(8))
    rows = 2_000
    loaded(rows)
    sections = jdbc_catalog.sections()
    warehouse = f"s3a://lake/{database}"
    jars = sections["spark"]["jars"]
    packages = f"{runtime_package()},{s3a_package()}"  # hadoop-aws brings its AWS SDK bundle
    sections["spark"].update(warehouse=warehouse, packages=packages, conf=s3.spark_conf())
    sections["iceberg"]["staging_dir"] = str(tmp_path / "staging")  # pyarrow knows s3://, not s3a://
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 400},
                       offsets={"commit_interval_seconds": 0.3}, **sections)
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=2, seed=17, rate=100)
    try:
        engine.start()
        engine.eventually(lambda: _version(jdbc_catalog.tables().get((database, "orders"), "/0-")) >= 3, 300,
                          interval=0.1, message="three commits to orders")
        engine.kill()
    finally:
        workload.stop()
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: not o.snapshot.get("queue") and target.issubset(o.position), timeout=400)
    engine.terminate()

    location = jdbc_catalog.tables()[(database, "orders")]
    assert location.startswith(f"{warehouse}/{database}/orders/metadata/"), location
    keys = s3.keys("lake", f"{database}/{database}/orders/")
    assert location.removeprefix("s3a://lake/") in keys
    assert any(key.endswith(".parquet") for key in keys), keys
    args = {"uri": jdbc_catalog.uri, "user": jdbc_catalog.user, "password_env": PASSWORD_VARIABLE,
            "warehouse": warehouse, "catalog": CATALOG, "conf": s3.spark_conf(), "jars": jars, "packages": packages,
            "db": database,
            "tables": [table.table for table in tables(database)], "source": mariadb.connection_settings}
    result = subprocess.run([sys.executable, "-c", READ_BACK, json.dumps(args)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {table.table: True for table in tables(database)}
