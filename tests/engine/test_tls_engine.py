"""The engine over TLS, against the TLS-only MariaDB (`tls_mariadb`: require_secure_transport,
certificate for "localhost"), as the account that REQUIREs X509, with
`source.tls.mode = "verify_identity"`: a snapshot under writers, streaming, a signal sent by
`dblog signal` through the signal table, a kill -9 restart of `dblog run`, and a distributed
backfill's Spark tasks. The account refuses any connection without the client certificate, and
the server itself is asked (processlist joined with performance_schema's Ssl_cipher per
thread) whether every session of dblog is encrypted, the binlog dump thread included.

In this module `mariadb` is the TLS server: `database`, `loaded` and `write_load` work on it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tomli_w
from support import eventually, hold_chunk_read
from support.fixtures.tls import SERVER_NAME
from support.harness import EngineProcess, EngineThread, compare, config_data, spark_settings

from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import tables
from dblog.runtime.config import parse_config

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def mariadb(tls_mariadb):
    return tls_mariadb.db


def _source(tls_mariadb, **more) -> dict:
    return {"host": SERVER_NAME, "user": tls_mariadb.x509_user, "password": tls_mariadb.password,
            "tls": tls_mariadb.tls("verify_identity"), **more}


def _all_encrypted_with_a_dump(tls_mariadb, minimum: int):
    """dblog's sessions as the server sees them, once the binlog dump and at least `minimum`
    sessions are there; every one must be encrypted."""
    def seen():
        sessions = tls_mariadb.sessions(tls_mariadb.x509_user)
        dump = any(command == "Binlog Dump" for _, command, _ in sessions)
        return sessions if dump and len(sessions) >= minimum else None

    sessions = eventually(seen, 60, interval=0.1, message="dblog's sessions, the binlog dump among them")
    assert all(cipher for _, _, cipher in sessions), f"a session of dblog is not encrypted: {sessions}"
    return sessions


@pytest.mark.parametrize("reader_process", [False, True])
def test_snapshot_streaming_and_signals_over_tls_every_session_encrypted(
        mariadb, tls_mariadb, database, tmp_path, loaded, write_load, monkeypatch, reader_process):
    rows = 12_000
    orders, customers = loaded(rows)
    data = config_data(mariadb, database, tmp_path, source=_source(tls_mariadb, reader_process=reader_process),
                       snapshot={"chunk_size": 700})
    (tmp_path / "dblog.toml").write_text(tomli_w.dumps(data))
    workload = write_load(rows, writers=3, seed=11)
    held = hold_chunk_read(monkeypatch, orders, 2, lambda: sum(workload.writes) > 300,
                           message="300 writes during the snapshot")
    try:
        engine = EngineThread(parse_config(data))
        # engine session + binlog dump (+ the reader process's own session)
        sessions = _all_encrypted_with_a_dump(tls_mariadb, 3 if reader_process else 2)
        engine.wait_for("COMPLETED", timeout=300)
        # A signal as a user sends it: `dblog signal` (its own connection, same settings).
        sent = subprocess.run([sys.executable, "-m", "dblog.cli", "signal", "execute-snapshot", "--config",
                               str(tmp_path / "dblog.toml"), "--tables", f"{database}\\.customers"],
                              capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr
        engine.eventually(lambda: engine.types().count("COMPLETED") >= 2, 300,
                          message=lambda: f"the signalled snapshot to complete; got {engine.types()}")
    finally:
        writes = workload.stop()
    engine.until_caught_up()
    assert held["held"] and writes > 300
    assert len(sessions) >= 2
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    scanned = [n.data["data_collection"] for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert scanned.count(str(customers)) == 2  # the initial snapshot and the signalled one


def _scanned(offsets) -> int:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return sum(entry.rows_scanned for entry in progress.queue)


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def test_kill_9_of_dblog_run_over_tls_and_restart_loses_nothing(mariadb, tls_mariadb, database, tmp_path, loaded,
                                                                 write_load):
    rows = 20_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, source=_source(tls_mariadb, reader_process=True),
                       snapshot={"chunk_size": 300})
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=2, seed=5, rate=200)
    try:
        engine.start()
        engine.wait_until(lambda offsets: _scanned(offsets) > 0)  # mid-snapshot
        _all_encrypted_with_a_dump(tls_mariadb, 3)
        engine.kill()
        engine.start()
        engine.wait_until(lambda offsets: _scanned(offsets) > 0 or _snapshot_done(offsets))
        _all_encrypted_with_a_dump(tls_mariadb, 3)
    finally:
        workload.stop()
    try:
        target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
        engine.wait_until(lambda offsets: _snapshot_done(offsets) and target.issubset(offsets.position), timeout=300)
    finally:
        engine.terminate()
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


@pytest.mark.spark
def test_a_distributed_backfills_spark_tasks_connect_over_tls(mariadb, tls_mariadb, database, tmp_path, spark,
                                                               loaded):
    """The range tasks run in Spark's Python workers, on connections of their own: as the X509
    account they get in only with the client certificate shipped to them (PEM texts, no files)."""
    from dblog.demo.verify import source_rows
    from dblog.mysql.source_connection import SourceConnection
    from dblog.sinks.iceberg.sink import read_target

    rows = 3_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, source=_source(tls_mariadb), sink={"type": "iceberg"},
                       spark=spark_settings(spark),
                       snapshot={"chunk_size": 500, "distributed": True, "distributed_tasks": 2,
                                 "distributed_range_rows": 500, "distributed_window_rows": 3_000})
    engine = EngineThread(parse_config(data))
    sink = engine.engine.sink
    engine.wait_for("COMPLETED", timeout=600)
    engine.until_caught_up(timeout=300)
    completed = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert {n.data["status"] for n in completed} == {"SUCCEEDED"}
    orders = next(n for n in completed if n.data["data_collection"].endswith(".orders"))
    assert orders.data["total_rows_scanned"] >= rows
    with SourceConnection(lambda: mariadb.connect()) as reader:
        for table in tables(database):
            schema = reader.schemas.schema(table)
            assert read_target(spark, sink.target_name(table), schema) == source_rows(reader, table), table
