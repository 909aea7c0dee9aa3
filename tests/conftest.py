"""Shared fixtures: one private MariaDB, one tansu broker and one Spark session per test run,
a fresh database per test, the shop tables loaded (`loaded`) and writers on them (`write_load`);
the `server` marker on every test that needs a server, the `spark` marker on every test that
uses the Spark session; --run-slow; --spark-master (where the Spark session runs: `local[2]`, a
private standalone cluster started for the run, or a given spark:// master)."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import settings
from support import eventually

from dblog.lab.localstack import LocalMariaDB

# Property tests check what is computed, never how fast: on a shared 2-core machine an example
# can take 100x its usual time, so no per-example deadline.
settings.register_profile("dblog", deadline=None)
# `--hypothesis-profile=quick`: a tenth of the examples, for the quick pure run (tests/README.md).
settings.register_profile("quick", settings.get_profile("dblog"), max_examples=10)
settings.load_profile("dblog")

# A test that uses one of these fixtures (directly or through another fixture) needs a server:
# it gets the `server` marker, so that `python -m pytest -m "not server"` runs the pure tests.
SERVER_FIXTURES = frozenset({"mariadb", "broker", "spark", "spark_cluster"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
    parser.addoption(
        "--spark-master", default="local", metavar="local|cluster|spark://HOST:PORT",
        help="where the `spark` fixture's session runs: local (local[2], the default); cluster (a private "
             "Spark standalone cluster, one master and two workers on 127.0.0.1, started for the run by "
             "dblog.lab.spark_cluster); or the URL of a running standalone master. `-m spark` selects the "
             "tests that use the session (the Iceberg tests).",
    )


def pytest_configure(config: pytest.Config) -> None:
    master = config.getoption("--spark-master")
    if master not in ("local", "cluster") and not master.startswith(("spark://", "local[")):
        raise pytest.UsageError(f"--spark-master must be local, cluster, local[N] or spark://HOST:PORT, not {master!r}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if SERVER_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.server)
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
    if config.getoption("--run-slow"):
        return
    skip_slow = pytest.mark.skip(reason="slow test: give --run-slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def mariadb():
    """One LocalMariaDB for the whole run; stopped at the end even when tests fail."""
    server = LocalMariaDB()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def database(mariadb: LocalMariaDB):
    """A uniquely named, empty database on the session server, dropped afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def source_connection(mariadb: LocalMariaDB):
    """A SourceConnection (server session, schema catalog, chunk reader) on the session server
    (root), closed afterwards."""
    from dblog.mysql.source_connection import SourceConnection

    reader = SourceConnection(mariadb.connect)
    try:
        yield reader
    finally:
        reader.close()


_next_replica_id = iter(range(1000, 10**6))


@pytest.fixture
def open_binlog(mariadb: LocalMariaDB, source_connection):
    """open_binlog(start, table_filter=..., heartbeat_seconds=...) -> BinlogSource.

    Each source gets its own replica server_id (a second reader with the same id would make
    the server drop the first) and is closed when the test ends.
    """
    from dblog.mysql.binlog import BinlogSource

    sources = []

    def open_source(start, table_filter=lambda table: True, heartbeat_seconds=0.5, schema_of=None):
        source = BinlogSource(
            mariadb.connection_settings,
            server_id=next(_next_replica_id),
            start=start,
            schema_of=schema_of or source_connection.schemas.schema,
            table_filter=table_filter,
            heartbeat_seconds=heartbeat_seconds,
        )
        sources.append(source)
        return source

    try:
        yield open_source
    finally:
        for source in sources:
            source.close()


def read_binlog(source, until, timeout: float = 20.0) -> list:
    """Events from `source` until `until(event, events_so_far)` is true; fails the test at the
    deadline instead of hanging (an idle source yields heartbeats, so the deadline is checked)."""
    events: list = []
    iterator = iter(source)

    def reached() -> bool:
        event = next(iterator, None)
        if event is None:
            raise AssertionError(f"the binlog source ended; got {len(events)} events: {events[-10:]}")
        events.append(event)
        return until(event, events)

    eventually(reached, timeout, interval=0,
               message=lambda: f"the binlog to reach the expected point; got {len(events)} events: {events[-10:]}")
    return events


@pytest.fixture
def binlog_reader():
    """The `read_binlog` helper, as a fixture so test modules need not import conftest."""
    return read_binlog


@pytest.fixture
def loaded(mariadb: LocalMariaDB, database: str):
    """loaded(rows, seed=1, database=the test's) creates the shop tables (dblog.lab.workload:
    orders with `rows` rows, customers, the signal table) and returns [orders, customers]."""
    from dblog.lab.workload import load, tables

    def load_shop(rows: int, seed: int = 1, database: str = database) -> list:
        with mariadb.connect() as connection:
            load(connection, database, rows, seed=seed)
        return tables(database)

    return load_shop


@pytest.fixture
def write_load(mariadb: LocalMariaDB, database: str):
    """write_load(rows, writers=..., seed=..., rate=..., reconnect=..., database=the test's) starts
    a WriteLoad (dblog.lab.workload) on the shop tables; the test stops it (`stop()` returns the
    number of writes and raises a writer's error); any still running is stopped at teardown."""
    from dblog.lab.workload import WriteLoad

    started: list[WriteLoad] = []

    def start(rows: int, database: str = database, **options) -> WriteLoad:
        workload = WriteLoad(lambda: mariadb.connect(), database, rows, **options).start()
        started.append(workload)
        return workload

    try:
        yield start
    finally:
        for workload in started:
            with contextlib.suppress(Exception):  # a writer's error was the test's to report
                workload.stop()


@pytest.fixture(scope="session")
def broker():
    """One private tansu broker (Kafka protocol, memory storage) for the whole test run."""
    from dblog.lab.localbroker import LocalBroker

    with LocalBroker() as running:
        yield running


@pytest.fixture(scope="session")
def spark_cluster():
    """A private Spark standalone cluster (a master and two workers on 127.0.0.1) for the run."""
    from dblog.lab.spark_cluster import LocalSparkCluster

    with LocalSparkCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_master(request: pytest.FixtureRequest) -> str:
    """The master URL the run's Spark session uses (see --spark-master)."""
    option = request.config.getoption("--spark-master")
    if option == "local":
        return "local[2]"
    if option == "cluster":
        return request.getfixturevalue("spark_cluster").master_url
    return option


@pytest.fixture(scope="session")
def spark(tmp_path_factory, spark_master: str):
    """One Spark session with an Iceberg catalog `lake` (Hadoop catalog in a temp dir) for the
    whole test run: a session takes seconds to start, and a process has one SparkContext. It
    runs on `local[2]`, or on a standalone cluster with --spark-master."""
    from dblog.sinks.iceberg.session import iceberg_spark_session

    session = iceberg_spark_session(str(tmp_path_factory.mktemp("warehouse")), catalog="lake", master=spark_master)
    try:
        yield session
    finally:
        session.stop()
