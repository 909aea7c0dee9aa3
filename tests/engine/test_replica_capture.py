"""Capture from a read-only replica (issue 40, "Capture from replicas"): a private MariaDB primary
and its GTID replica (`lab.mariadb_replica`), dblog on the replica as a user with no write right,
GTID watermarks (read-only), writers on the primary, and an execute-snapshot signal written on the
primary (it reaches dblog through the replica's binlog) or sent over Kafka. A replica whose
binlog lacks what it applies (log_slave_updates OFF) is refused at start and by `dblog check`."""

from __future__ import annotations

import json
import uuid

import pytest
from support.harness import EngineThread, compare, config_data

from dblog.demo.localstack import LocalMariaDB
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.replica_role import replication_sources
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.preflight import run_checks
from lab.mariadb_replica import MariaDBReplica

USER, PASSWORD = "dblog", "replica-secret-1"
# What the README grants dblog's user (no SLAVE MONITOR: MariaDB >= 10.5 wants it to show the
# replication status).
GRANTS = ["SELECT ON *.*", "REPLICATION SLAVE, BINLOG MONITOR ON *.*"]


@pytest.fixture(scope="module")
def replicated():
    """A primary and its read-only replica with log_slave_updates, dblog's user on both."""
    with LocalMariaDB() as primary:
        primary.create_user(USER, PASSWORD, GRANTS)  # replicated to the replica
        with MariaDBReplica(primary) as replica:
            replica.caught_up()
            yield primary, replica


@pytest.fixture
def shop(replicated):
    """A database with the shop tables (2,000 orders), made on the primary and replicated."""
    primary, replica = replicated
    database = f"r_{uuid.uuid4().hex[:10]}"
    with primary.connect() as connection:
        connection.cursor().execute(f"CREATE DATABASE `{database}`")
        load(connection, database, 2_000)
    replica.caught_up()
    yield database
    primary.execute(f"DROP DATABASE IF EXISTS `{database}`")


def on_replica(replica: MariaDBReplica, database: str, tmp_path, **sections) -> dict:
    """dblog's configuration on the replica, as its own user, streaming only (a signal asks)."""
    data = config_data(replica.server, database, tmp_path, snapshot={"startup": "never", "chunk_size": 300},
                       **sections)
    data["source"].update(user=USER, password=PASSWORD)
    return data


def grant(server: LocalMariaDB, statement: str) -> None:
    """GRANT or REVOKE … TO/FROM dblog's user, on both of its hosts (LocalMariaDB.create_user)."""
    for host in ("%", "localhost"):
        server.execute(f"{statement} '{USER}'@'{host}'")


def checks(data: dict) -> dict[str, tuple[str, str, str | None]]:
    return {result.check: (result.status, result.detail, result.remedy) for result in run_checks(parse_config(data))}


@pytest.mark.parametrize("signals", ["table", "kafka"])
def test_a_snapshot_from_a_read_only_replica_under_writers_on_the_primary_equals_the_source(
        signals, replicated, shop, tmp_path, request):
    primary, replica = replicated
    sections = {}
    if signals == "kafka":
        broker = request.getfixturevalue("broker")
        topic = f"signals-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic)
        sections = {"signals": {"kafka_topic": topic, "kafka_poll_interval_seconds": 0.1},
                    "kafka": {"bootstrap_servers": broker.bootstrap}}
    data = on_replica(replica, shop, tmp_path, **sections)
    verdict = checks(data)
    assert verdict["replication"][0] == "ok" or verdict["replication"][0] == "skip", verdict["replication"]
    config = parse_config(data)
    engine = EngineThread(config)
    writers = WriteLoad(lambda: primary.connect(), shop, 2_000, writers=2, rate=60).start()
    request_data = {"data-collections": [f"{shop}\\.orders", f"{shop}\\.customers"]}
    if signals == "table":  # written on the primary: the replica is read-only, and replicates it
        primary.execute(f"INSERT INTO `{shop}`.dblog_signal VALUES ('on-primary', 'execute-snapshot', %s)",
                        (json.dumps(request_data),))
    else:
        from dblog.signals.kafka_channel import send_signal

        send_signal(config.kafka.bootstrap_servers, config.signals.kafka_topic, config.name, "execute-snapshot",
                    request_data, "over-kafka")
    engine.wait_for("COMPLETED")
    assert writers.stop() > 0
    replica.caught_up()
    engine.until_caught_up()
    result = compare(primary, tmp_path / "changes.jsonl", tables(shop))
    assert result.equal, result.summary()
    # dblog wrote nothing on the replica: its binlog holds the primary's transactions only
    (replica_logged,), = replica.server.execute("SELECT @@gtid_binlog_pos")
    (primary_logged,), = primary.execute("SELECT @@gtid_binlog_pos")
    assert replica_logged == primary_logged


def test_a_replica_without_log_slave_updates_is_refused_at_start_and_by_dblog_check(replicated, shop, tmp_path):
    """Its binlog lacks what it applies: dblog would capture none of the primary's changes. Named
    with the remedy, whether dblog's user may read the replication status or not."""
    primary, _ = replicated
    with MariaDBReplica(primary, server_id=3, log_slave_updates=False) as silent:
        silent.caught_up()
        data = on_replica(silent, shop, tmp_path)
        with pytest.raises(ConfigError) as refused:
            EngineThread(parse_config(data))
        message = str(refused.value)
        assert "log_slave_updates" in message and "gtid_slave_pos" in message and "SLAVE MONITOR" in message, message
        assert checks(data)["replication"][0] == "fail"

        grant(silent.server, "GRANT SLAVE MONITOR ON *.* TO")  # now dblog sees that it replicates
        with pytest.raises(ConfigError) as refused:
            EngineThread(parse_config(data))
        message = str(refused.value)
        assert f"replicates from 127.0.0.1:{primary.port}" in message and "log_slave_updates OFF" in message, message
        assert "Set log_slave_updates=ON on it" in message, message

        silent.promote()  # a promoted replica replicates from nowhere: captured from now on
        status, detail, _ = checks(data)["replication"]
        assert (status, detail) == ("ok", "not a replica (no replication source configured)")


def test_dblog_check_tells_a_replica_its_lag_and_a_stopped_replication(replicated, shop, tmp_path):
    primary, replica = replicated
    grant(replica.server, "GRANT SLAVE MONITOR ON *.* TO")
    try:
        data = on_replica(replica, shop, tmp_path)
        status, detail, _ = checks(data)["replication"]
        assert status == "ok" and f"a replica of 127.0.0.1:{primary.port}, replicating" in detail, detail
        replica.stop_replication()
        try:
            status, detail, remedy = checks(data)["replication"]
            assert status == "warn" and "replication is stopped" in detail and "START SLAVE" in remedy, detail
        finally:
            replica.start_replication()
    finally:
        grant(replica.server, "REVOKE SLAVE MONITOR ON *.* FROM")


def test_mysql_and_mariadb_replication_status_columns_read_alike():
    """MySQL 8.0.22+ renamed SHOW SLAVE STATUS's columns (SHOW REPLICA STATUS: Replica_IO_Running,
    Source_Host, Seconds_Behind_Source, Channel_Name — MySQL 8.0 manual, 15.7.7.35 "SHOW REPLICA
    STATUS Statement"); MariaDB keeps the old names (SHOW ALL SLAVES STATUS: Connection_name)."""
    mysql = {"Replica_IO_State": "Waiting for source to send event", "Source_Host": "db1", "Source_Port": 3306,
             "Replica_IO_Running": "Yes", "Replica_SQL_Running": "No", "Seconds_Behind_Source": None,
             "Last_IO_Error": "", "Last_SQL_Error": "Error 'x' on query", "Channel_Name": ""}
    mariadb = {"Connection_name": "east", "Master_Host": "db2", "Master_Port": 3307, "Slave_IO_Running": "Yes",
               "Slave_SQL_Running": "Yes", "Seconds_Behind_Master": 4, "Last_IO_Error": "", "Last_SQL_Error": ""}
    reset = {"Master_Host": "", "Slave_IO_Running": "No", "Slave_SQL_Running": "No"}
    first, second = replication_sources([mysql, mariadb, reset])
    assert (first.address, first.running, first.seconds_behind, first.last_error) == (
        "db1:3306", False, None, "Error 'x' on query")
    assert (second.address, second.running, second.seconds_behind) == ("db2:3307 (connection 'east')", True, 4)
