"""The Iceberg sink behind an Iceberg REST catalog (`iceberg.catalog_type = "rest"`), end to end:
Iceberg's own REST catalog server (`lab.rest_catalog`, jars from Maven Central) with OAuth2 client
credentials enforced, its tables on S3 (moto, through Iceberg's S3FileIO), and behind it Iceberg's
JDBC catalog in a database of the run's MariaDB.

One server and the run's Spark session serve the whole module (a catalog's settings can be set on
a running session; the session has the AWS SDK of S3FileIO on its classpath from its start). The
kill -9 test runs `dblog run` in a child process and stalls the server's commit by holding the
lock on the table's row of `iceberg_tables` (as test_jdbc_catalog.py does for the JDBC catalog);
here the server, not dblog, waits in the UPDATE, so the commit lands after dblog died, when the
lock is released: the restart must find it there and not apply it twice.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid

import pytest
import tomli_w
from support import eventually
from support.harness import EngineProcess, EngineThread, config_data, snapshot_under_writes

from dblog.core.gtid import GtidSet
from dblog.demo.verify import source_rows
from dblog.demo.workload import tables
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.sink_factory import open_sink, resolve_secret
from dblog.sinks.base import SinkError, SinkUnavailable
from dblog.sinks.iceberg.catalog import CatalogSpec, catalog_error
from dblog.sinks.iceberg.plugin import catalog_secrets
from dblog.sinks.iceberg.session import ICEBERG_AWS_BUNDLE, iceberg_spark_conf, runtime_package
from dblog.sinks.iceberg.sink import catalog_spec, read_target
from lab.apache_kafka import free_port
from lab.object_store import LocalS3
from lab.rest_catalog import RestCatalog

pytestmark = pytest.mark.timeout(600)

CATALOG = "rcat"  # the Spark catalog name dblog writes through
CREDENTIAL_VARIABLE = "DBLOG_TEST_REST_CREDENTIAL"
S3_SECRET_VARIABLE = "DBLOG_TEST_S3_SECRET"
S3_KEY_ID = "dblog-test"
BUCKET = "lake"
LOCK_POLL_SECONDS = 0.25  # > InnoDB's 0.1 s between refreshes of its lock tables (RestRig.waiting_for)


class RestRig:
    """The module's REST catalog server, its S3 and its catalog database, and dblog's settings for them."""

    def __init__(self, mariadb, s3: LocalS3) -> None:
        self.mariadb = mariadb
        self.s3 = s3
        self.s3_secret = "s3-" + secrets.token_hex(8)
        self.database = f"rest_{uuid.uuid4().hex[:10]}"  # the server's JDBC catalog
        self.user = f"rest_{uuid.uuid4().hex[:8]}"
        password = "pw-" + secrets.token_hex(12)
        mariadb.execute(f"CREATE DATABASE `{self.database}`")
        mariadb.create_user(self.user, password, [f"ALL ON `{self.database}`.* "])
        self.warehouse = f"s3://{BUCKET}/rest"
        self.server = RestCatalog(
            self.warehouse, catalog_uri=f"jdbc:mariadb://127.0.0.1:{mariadb.port}/{self.database}",
            catalog_name="rest_backend", properties={"jdbc.user": self.user, "jdbc.password": password},
            s3_endpoint=s3.endpoint,
            environment={"AWS_ACCESS_KEY_ID": S3_KEY_ID, "AWS_SECRET_ACCESS_KEY": self.s3_secret})

    def client_properties(self) -> dict[str, str]:
        """S3FileIO on moto, as a client of the catalog (its secret key: catalog_properties_env)."""
        return {**RestCatalog.s3_properties(self.s3.endpoint), "s3.access-key-id": S3_KEY_ID,
                "oauth2-server-uri": f"{self.server.uri}/v1/oauth/tokens", "scope": "catalog"}

    def sections(self, tmp_path, catalog: str = CATALOG, **iceberg) -> dict:
        """`[spark]` and `[iceberg]` of an engine writing through the REST catalog (staging its
        batches in tmp_path: pyarrow writes them locally, the tables are on S3)."""
        return {
            "sink": {"type": "iceberg"},
            "spark": {"catalog": catalog, "warehouse": self.warehouse,
                      "packages": f"{runtime_package()},{ICEBERG_AWS_BUNDLE}"},
            "iceberg": {"catalog_type": "rest", "catalog_uri": self.server.uri,
                        "rest_credential_env": CREDENTIAL_VARIABLE,
                        "catalog_properties": self.client_properties(),
                        "catalog_properties_env": {"s3.secret-access-key": S3_SECRET_VARIABLE},
                        "staging_dir": str(tmp_path / "staging"),
                        **iceberg},
        }

    def environment(self) -> dict[str, str]:
        return {CREDENTIAL_VARIABLE: self.server.credential, S3_SECRET_VARIABLE: self.s3_secret}

    def attach(self, spark) -> None:
        """Add the catalog to the running session (to read what a `dblog run` child wrote)."""
        spec = CatalogSpec("rest", self.server.uri, self.client_properties(),
                           {"credential": self.server.credential, "s3.secret-access-key": self.s3_secret})
        for key, value in {**spec.conf(CATALOG, self.warehouse), **spec.secret_conf(CATALOG)}.items():
            spark.conf.set(key, value)

    def metadata_location(self, namespace: str, table: str) -> str | None:
        rows = self.mariadb.execute(
            f"SELECT metadata_location FROM `{self.database}`.iceberg_tables WHERE table_namespace = %s "
            "AND table_name = %s", (namespace, table))
        return rows[0][0] if rows else None

    def waiting_for(self, blocker: int) -> bool:
        """Whether a transaction waits for a lock that transaction `blocker` holds (the server's commit
        waiting for the row the test locked), or an UPDATE of iceberg_tables waits for a lock.

        InnoDB's INNODB_TRX and INNODB_LOCK_WAITS are one cache, filled again only when it has gone
        unread for more than 0.1 s (MariaDB's storage/innobase/trx/trx0i_s.cc: CACHE_MIN_IDLE_TIME_NS,
        `can_cache_be_updated`; every read ends by setting `last_read`): ask at most every
        LOCK_POLL_SECONDS, else each answer is the first one again, from before the wait began."""
        rows = self.mariadb.execute(
            "SELECT (SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS WHERE blocking_trx_id = %s) + "
            "(SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' "
            "AND trx_query LIKE 'UPDATE iceberg_tables %%')", (blocker,))
        return int(rows[0][0]) > 0

    def drop(self) -> None:
        self.mariadb.execute(f"DROP DATABASE IF EXISTS `{self.database}`")
        for host in ("%", "localhost"):
            self.mariadb.execute("DROP USER IF EXISTS %s@%s", (self.user, host))


@pytest.fixture(scope="module")
def rest(mariadb):
    with LocalS3() as s3:
        s3.create_bucket(BUCKET)
        rig = RestRig(mariadb, s3)
        try:
            with rig.server:
                yield rig
        finally:
            rig.drop()


@pytest.fixture
def rest_env(rest, monkeypatch):
    """The REST credential and the S3 secret in the variables the configs name (also for children)."""
    for name, value in rest.environment().items():
        monkeypatch.setenv(name, value)
    return rest


def _compare(spark, mariadb, database: str, name_of) -> None:
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            name = name_of(table)
            spark.sql(f"REFRESH TABLE {name}")
            got = read_target(spark, name, reader.schemas.schema(table))  # raises on a key seen twice
            assert got == source_rows(reader, table), table
    finally:
        reader.close()


# --- settings, without services ------------------------------------------------------------


def _iceberg(**values):
    return parse_config({"iceberg": values}).iceberg


def test_rest_catalog_settings(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match='rest_credential_env: for catalog_type = "rest" only'):
        _iceberg(catalog_type="jdbc", catalog_uri="jdbc:mariadb://db/iceberg", rest_credential_env="X")
    with pytest.raises(ConfigError, match="use iceberg.rest_credential_env"):
        _iceberg(catalog_type="rest", catalog_uri="https://cat", catalog_properties={"credential": "a:b"})
    with pytest.raises(ConfigError, match="http:// or https:// URL"):
        _iceberg(catalog_type="rest", catalog_uri="cat:8181")
    monkeypatch.setenv("REST_CREDENTIAL", "client:s3cr3t-value")
    settings = _iceberg(catalog_type="rest", catalog_uri="https://cat/api/catalog", rest_credential_env="REST_CREDENTIAL",
                        catalog_properties={"scope": "PRINCIPAL_ROLE:ALL"})
    secrets_ = catalog_secrets(settings, resolve_secret)
    assert secrets_ == {"credential": "client:s3cr3t-value"}
    conf = iceberg_spark_conf("prod_warehouse", "c", catalog_spec=catalog_spec(settings, secrets_))
    assert conf["spark.sql.catalog.c.type"] == "rest" and conf["spark.sql.catalog.c.uri"] == "https://cat/api/catalog"
    assert conf["spark.sql.catalog.c.warehouse"] == "prod_warehouse"  # a warehouse name, not made a path
    assert conf["spark.sql.catalog.c.scope"] == "PRINCIPAL_ROLE:ALL"
    assert "s3cr3t-value" not in repr(conf)
    with pytest.raises(ConfigError, match="iceberg.rest_credential_env names 'NOT_SET_ANYWHERE'"):
        catalog_secrets(settings.model_copy(update={"rest_credential_env": "NOT_SET_ANYWHERE"}), resolve_secret)


def test_rest_catalog_errors_name_the_setting_to_fix_and_hide_the_credential():
    spec = CatalogSpec("rest", "https://cat", {}, {"credential": "client:hunter22"})
    refused = catalog_error("c", spec, [
        "org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: invalid_client: client:hunter22"])
    assert type(refused) is SinkError and "check iceberg.rest_credential" in str(refused)
    assert "the credential given" in str(refused) and "hunter22" not in str(refused)
    no_token = catalog_error("c", CatalogSpec("rest", "https://cat"), [
        "org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: no bearer token"])
    assert "no credential given" in str(no_token)
    unreachable = catalog_error("c", spec, [
        "org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request",
        "org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException: Connect to http://cat failed: "
        "Connection refused"])
    assert isinstance(unreachable, SinkUnavailable) and "cannot reach it" in str(unreachable)


# --- against the REST catalog server -----------------------------------------------------------


def test_the_catalog_refuses_a_wrong_secret_and_a_missing_token(mariadb, database, tmp_path, spark, rest_env):
    rest = rest_env
    status, body = rest.server.request("GET", "/v1/namespaces")  # the gate itself: no token, no answer
    assert status == 401 and b"no bearer token" in body
    wrong = f"{rest.server.client_id}:wrong-{secrets.token_hex(8)}"
    sections = rest.sections(tmp_path, catalog="rcat_wrong_secret")  # catalogs Spark has not loaded yet
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CREDENTIAL_VARIABLE, wrong)
        config = parse_config(config_data(mariadb, database, tmp_path, **sections))
        with pytest.raises(SinkError, match=r"refused the client \(the credential given\); check iceberg.rest_credential") \
                as refused:
            open_sink(config, lambda table: None, lambda: "mariadb", lambda table: True)
    assert "invalid_client" in str(refused.value) and wrong.split(":")[1] not in str(refused.value)
    assert not isinstance(refused.value, SinkUnavailable)  # a setting to fix, not a service to wait for

    sections = rest.sections(tmp_path, catalog="rcat_no_credential")
    del sections["iceberg"]["rest_credential_env"]
    config = parse_config(config_data(mariadb, database, tmp_path, **sections))
    with pytest.raises(SinkError, match=r"refused the client \(no credential given\); check iceberg.rest_credential"):
        open_sink(config, lambda table: None, lambda: "mariadb", lambda table: True)


def test_snapshot_under_writers_then_streaming_through_the_rest_catalog(mariadb, database, tmp_path, spark, loaded,
                                                                        write_load, rest_env):
    rest = rest_env
    rows = 2_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 500},
                       offsets={"commit_interval_seconds": 0.5}, **rest.sections(tmp_path))
    workload = write_load(rows, writers=2, seed=41, rate=100)
    engine, writes = snapshot_under_writes(workload, lambda: EngineThread(parse_config(data)), timeout=300,
                                           catch_up_timeout=300)
    assert writes > 0
    sink = engine.engine.sink
    _compare(spark, mariadb, database, lambda table: sink.target_name(table))
    # The tables are the REST server's (its JDBC catalog's rows), their files on S3
    orders = rest.metadata_location(database, "orders")
    assert orders and orders.startswith(f"{rest.warehouse}/{database}/orders/metadata/"), orders
    keys = rest.s3.keys(BUCKET, f"rest/{database}/orders/")
    assert orders.removeprefix(f"s3://{BUCKET}/") in keys and any(key.endswith(".parquet") for key in keys)

    # Streaming: the engine again, from its offsets, while the writers write
    engine = EngineThread(parse_config(data))
    try:
        workload = write_load(rows, writers=2, seed=43, rate=150)
        before = rest.metadata_location(database, "orders")
        engine.eventually(lambda: rest.metadata_location(database, "orders") != before, 120,
                          message="a streamed commit to orders")
        assert workload.stop() > 0
    except BaseException:
        engine.stop()
        raise
    engine.until_caught_up(timeout=300)
    _compare(spark, mariadb, database, lambda table: engine.engine.sink.target_name(table))


def test_kill_9_during_a_rest_catalog_commit_then_restart(mariadb, database, tmp_path, spark, loaded, write_load,
                                                          rest_env):
    rest = rest_env
    rows = 1_500
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 300},
                       offsets={"commit_interval_seconds": 0.3}, **rest.sections(tmp_path))
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=2, seed=19, rate=100)
    locker = mariadb.connect(rest.database, autocommit=False)
    try:
        engine.start()
        seen: set[str] = set()

        def three_commits_to_orders() -> bool:
            seen.add(rest.metadata_location(database, "orders") or "")
            return len(seen - {""}) >= 3

        engine.eventually(three_commits_to_orders, 300, message="three commits to orders")
        # Hold the row the server's compare-and-swap updates: dblog's next commit of orders waits
        # in its POST while the server waits in its UPDATE.
        with locker.cursor() as cursor:
            cursor.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = %s AND "
                           "table_namespace = %s AND table_name = 'orders' FOR UPDATE",
                           (rest.server.catalog_name, database))
            (held,) = cursor.fetchone()
            cursor.execute("SELECT trx_id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()")
            (blocker,) = cursor.fetchone()
        engine.eventually(lambda: rest.waiting_for(blocker), 120, interval=LOCK_POLL_SECONDS,
                          message="a commit of orders waiting in the catalog")
        engine.kill()
        assert rest.metadata_location(database, "orders") == held  # the catalog had not moved
    finally:
        locker.rollback()  # the server's commit goes on: it lands after dblog died
        locker.close()
        workload.stop()
    # dblog's last commit lands after dblog died: the restart must find it there, and not apply it twice
    eventually(lambda: rest.metadata_location(database, "orders") != held, 60, message="the server's commit")
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: not o.snapshot.get("queue") and target.issubset(o.position), timeout=400)
    engine.terminate()
    log = engine.log.read_text()
    assert rest.server.client_secret not in log and rest.s3_secret not in log
    rest.attach(spark)
    _compare(spark, mariadb, database, lambda table: f"`{CATALOG}`.`{database}`.`{table.table}`")


def test_dblog_check_names_an_unreachable_catalog_and_a_refused_credential(mariadb, database, tmp_path, rest_env):
    """`dblog check` (its own Spark session, in a child process): the catalog URL that answers
    nothing, then the credential the catalog refuses, each the setting to fix."""
    rest = rest_env
    unreachable = config_data(mariadb, database, tmp_path, **rest.sections(tmp_path))
    port = free_port()  # bound, then closed: nothing listens there
    unreachable["iceberg"]["catalog_uri"] = f"http://127.0.0.1:{port}"
    result = _dblog_check(tmp_path, unreachable)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "✗ Spark and Iceberg catalog:" in result.stdout, result.stdout
    assert f"iceberg.catalog_uri = 'http://127.0.0.1:{port}'" in result.stdout and "cannot reach it" in result.stdout

    refused = config_data(mariadb, database, tmp_path, **rest.sections(tmp_path))
    wrong = f"{rest.server.client_id}:wrong-{secrets.token_hex(8)}"
    result = _dblog_check(tmp_path, refused, {CREDENTIAL_VARIABLE: wrong})
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "refused the client" in result.stdout and "check iceberg.rest_credential" in result.stdout, result.stdout
    assert wrong.split(":")[1] not in result.stdout + result.stderr


def _dblog_check(tmp_path, data: dict, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "dblog-check.toml"
    path.write_text(tomli_w.dumps(data))
    return subprocess.run([sys.executable, "-m", "dblog.cli", "check", "--config", str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
