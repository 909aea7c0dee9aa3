"""The suite's options, markers and collection hooks. The fixtures are pytest plugins, one per
component, in tests/support/fixtures/ (registered below): one private MariaDB, one Apache Kafka broker
and one Spark session per test run (per xdist worker), a fresh database per test, the shop tables
loaded (`loaded`) and writers on them (`write_load`). Here: the `server` marker on every test that
needs a server, the `spark` marker on every test that uses the Spark session; --run-slow;
--spark-master (where the Spark session runs: `local[2]`, a private standalone cluster started
for the run, or a given spark:// master)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from lab import jvm_archive
from support.slow_tier import REPEATS

# Property tests check what is computed, never how fast: on a shared 2-core machine an example
# can take 100x its usual time, so no per-example deadline.
settings.register_profile("dblog", deadline=None)
# `--hypothesis-profile=quick`: a tenth of the examples, for the quick pure run (tests/README.md).
settings.register_profile("quick", settings.get_profile("dblog"), max_examples=10)
settings.load_profile("dblog")

# Every JVM the tests start (Spark sessions, the launcher and driver of each `dblog run` with the
# Iceberg sink, Debezium's reference engine) compiles with C1 only: the run is CPU-bound on two
# cores, and a JVM that lives seconds to minutes spends much of its CPU in C2 compiling code it
# will not run long enough to pay back (a Spark session with six MERGEs: 40 s of CPU, 23 s with
# C1 only). JIT tiers change speed, never results. Spark JVMs also map their classes from a
# class-data-sharing archive made once per machine (lab.jvm_archive: 25 → 9 s of CPU per session
# start); the Kafka broker and Connect worker from archives of their own (lab.jvm_archive.ClassArchive,
# given on their command line). Inherited by the xdist workers and every child.
os.environ.setdefault("JAVA_TOOL_OPTIONS", jvm_archive.java_tool_options())

pytest_plugins = [
    "support.fixtures.mariadb",
    "support.fixtures.broker",
    "support.fixtures.connect",
    "support.fixtures.spark",
    "support.fixtures.tls",
    "support.fixtures.private_mariadb",
]

# A test that uses one of these fixtures (directly or through another fixture) needs a server:
# it gets the `server` marker, so that `python -m pytest -m "not server"` runs the pure tests.
SERVER_FIXTURES = frozenset({"mariadb", "broker", "secured_broker", "spark", "spark_cluster", "tls_mariadb", "own_mariadb",
                              "connect_broker", "dblog_broker", "kafka_connect", "row_metadata_mariadb",
                              "file_position_mariadb"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
    parser.addoption("--run-quarantined", action="store_true", default=False,
                     help="also run tests marked quarantine (known to fail at times; tests/README.md)")
    parser.addoption(
        "--spark-master", default="local", metavar="local|cluster|spark://HOST:PORT",
        help="where the `spark` fixture's session runs: local (local[2], the default); cluster (a private "
             "Spark standalone cluster, one master and two workers on 127.0.0.1, started for the run by "
             "lab.spark_cluster); or the URL of a running standalone master. `-m spark` selects the "
             "tests that use the session (the Iceberg tests).",
    )


_ARCHIVE_MAKER = pytest.StashKey()  # the thread making the class-data archive, if it was missing


def pytest_configure(config: pytest.Config) -> None:
    master = config.getoption("--spark-master")
    if master not in ("local", "cluster") and not master.startswith(("spark://", "local[")):
        raise pytest.UsageError(f"--spark-master must be local, cluster, local[N] or spark://HOST:PORT, not {master!r}")
    if not hasattr(config, "workerinput"):  # the run's main process, once (not each xdist worker)
        config.stash[_ARCHIVE_MAKER] = jvm_archive.start_making()


def pytest_unconfigure(config: pytest.Config) -> None:
    maker = config.stash.get(_ARCHIVE_MAKER, None)
    if maker is not None:
        maker.join()  # a short run leaves no Spark child behind


# The run is spread over xdist workers (`-n 2 --dist loadgroup` in pyproject.toml), each with its
# own MariaDB and broker (the session fixtures). Tests that must not run beside one another go to
# one worker, in an xdist group: the tests of a Spark session (a process has one SparkContext; two
# groups, so two workers each start one) and the
# standalone-cluster module (it checks the cluster temp dirs it leaves, and runs Iceberg tests in a
# child pytest). The tests of the Kafka Connect worker (`kafka_connect`) are a group too: its start
# (a broker and a worker JVM, 15-30 s) is paid once a run. Without xdist (`-n 0`, `-p no:xdist`)
# the marker does nothing.
SERIAL_MODULES = {"test_spark_cluster.py": "spark_cluster"}
# The Spark session's tests are the run's longest path, so they are two groups, on two workers,
# each worker with its own session: these modules (the longest: several `dblog run` JVMs per
# test) in `spark`, the others in `spark-b`.
SPARK_GROUP_MODULES = {"test_spark_sink.py", "test_jdbc_catalog.py", "test_xa_sinks.py", "test_faults.py"}
# xdist hands out the groups first (the scopes with the most tests), then the other tests one by
# one in collection order as a worker runs dry: the modules with the longest single tests
# (20–80 s each, from `--durations`) come first, so the run ends on short tests and neither
# worker idles while the other finishes a long one.
LONGEST_FIRST = ("test_capture_model.py", "test_security.py", "test_engine.py", "test_kafka_sink.py",
                 "test_kafka_security.py", "test_large_values.py", "test_kafka_transactions_heartbeats.py",
                 "test_faults.py", "test_cli.py")


@pytest.hookimpl(tryfirst=True)  # before xdist's hook, which appends the group to the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST
               else len(LONGEST_FIRST))  # stable: each module's tests stay together and in order
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if SERVER_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.server)
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.xdist_group("spark" if item.path.name in SPARK_GROUP_MODULES else "spark-b"))
        elif item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.xdist_group(SERIAL_MODULES[item.path.name]))
        elif "kafka_connect" in fixtures:  # one Connect worker (and its broker) per run, not one per xdist worker
            item.add_marker(pytest.mark.xdist_group("kafka_connect"))
    if not config.getoption("--run-quarantined"):
        skip_quarantined = pytest.mark.skip(reason="quarantined (fails at times): give --run-quarantined to run it")
        for item in items:
            if "quarantine" in item.keywords:
                item.add_marker(skip_quarantined)
    mark_repeats_slow(config, items)
    if config.getoption("--run-slow"):
        return
    skip_slow = pytest.mark.skip(reason="slow test: give --run-slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


def mark_repeats_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The repeats `support.slow_tier` leaves to the slow tier get its marker. A whole-suite
    collection that misses one of its ids stops: a renamed test must not slip back unseen."""
    seen = set()
    for item in items:
        test_id = item.nodeid.removeprefix("tests/")
        if test_id in REPEATS:
            item.add_marker(pytest.mark.slow)
            seen.add(test_id)
    whole_suite = [Path(arg).resolve() for arg in config.args] == [Path(config.rootpath, "tests").resolve()]
    if whole_suite and not config.getoption("--deselect") and seen != REPEATS.keys():
        raise pytest.UsageError(f"support/slow_tier.py names tests that were not collected: {sorted(REPEATS.keys() - seen)}")
