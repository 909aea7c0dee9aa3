"""Faults against real services: the source database restarted mid-snapshot and mid-stream,
a purged binlog, an unwritable offsets file, a Kafka broker down and back, an Iceberg commit
failing; and (opt-in, `--run-slow`) a soak of 20 kill -9 + restart cycles under writes."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fixtures.mariadb import purge_binlogs_before_the_newest
from support.harness import EngineProcess, SupervisedEngine, compare, config_data, spark_settings
from support import eventually

from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import WriteLoad, tables
from dblog.runtime.offset_store import OffsetStore

pytestmark = pytest.mark.timeout(900)

# The source outages: the binlog reader reconnects at most READER_RECONNECTS times in a row
# (source.binlog_reconnects; 0.1 s, then 0.2 s apart) before the engine stops, so an outage of
# OUTAGE_SECONDS (plus the server's own stop and start) outlasts them: the engine cannot ride
# through it and the supervisor must restart it. (With the default 10 reconnects, ~13 s.)
READER_RECONNECTS = 2
OUTAGE_SECONDS = 2.0


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def _scanned(offsets) -> int:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return sum(entry.rows_scanned for entry in progress.queue)


def test_source_restarted_mid_snapshot_and_mid_stream_loses_and_duplicates_nothing(
    mariadb, database, tmp_path, loaded, write_load
):
    rows = 20_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 500},
                       source={"binlog_reconnects": READER_RECONNECTS})
    workload = write_load(rows, writers=2, seed=3, rate=100, reconnect=True)
    engine = SupervisedEngine(data)
    # Each outage outlasts the binlog reader's own reconnects, so the engine cannot ride
    # through either: the supervisor restarts it at least once for each.
    first, second = _restart_mid_snapshot_and_mid_stream(
        mariadb, engine, workload, lambda o: _scanned(o) >= rows // 4, OUTAGE_SECONDS, OUTAGE_SECONDS)
    assert first >= 1 and second >= 1 and engine.supervisor.restarts >= 2, (first, second)
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


def _restart_mid_snapshot_and_mid_stream(mariadb, engine: SupervisedEngine, workload: WriteLoad, mid_snapshot,
                                         shutdown_seconds: float, crash_seconds: float) -> tuple[int, int]:
    """A clean shutdown once `mid_snapshot(offsets)`, a crash once the snapshot is done, the
    writers stopped; returns, once the engine committed all the server executed and stopped,
    how many restarts the supervisor made by the end of the snapshot and after it."""
    try:
        engine.wait_until(mid_snapshot)
        mariadb.restart(down_seconds=shutdown_seconds)
        engine.wait_until(_snapshot_done)
        restarts = engine.supervisor.restarts
        mariadb.restart(down_seconds=crash_seconds, crash=True)
        written = sum(workload.writes)  # the stream after the crash has writes to deliver
        eventually(lambda: sum(workload.writes) >= written + 200, 60, message="200 writes after the crash")
    finally:
        workload.stop()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: _snapshot_done(o) and target.issubset(o.position))
    engine.stop()
    return restarts, engine.supervisor.restarts - restarts


def _dblog_run(data: dict, workdir: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    import tomli_w

    path = workdir / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    return subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                          capture_output=True, text=True, timeout=timeout)


def test_purged_binlog_stops_with_the_remedy(own_mariadb, tmp_path):
    own_mariadb.execute("CREATE DATABASE shop")
    own_mariadb.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    data = config_data(own_mariadb, "shop", tmp_path, snapshot={"startup": "never"})
    engine = EngineProcess(data, tmp_path)
    engine.start()
    engine.wait_until(lambda o: True)
    engine.terminate()
    stored = OffsetStore(data["offsets"]["path"]).load().position
    own_mariadb.execute("INSERT INTO shop.t VALUES (1)")  # dblog must resume before this
    purge_binlogs_before_the_newest(own_mariadb)
    result = _dblog_run(data, tmp_path)
    assert result.returncode == 1
    message = result.stderr
    assert "purged" in message and str(stored) in message and "offsets file" in message, message
    assert "Traceback" not in message
    assert OffsetStore(data["offsets"]["path"]).load().position == stored  # nothing moved


def test_unwritable_offsets_file_is_a_clean_stop_with_a_message(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    data = config_data(mariadb, database, tmp_path, snapshot={"startup": "never"})
    offsets = Path(data["offsets"]["path"])
    engine = EngineProcess(data, tmp_path)
    engine.start()
    engine.wait_until(lambda o: True)
    # Where the next offsets must go there is now a directory (root ignores permissions).
    offsets.unlink()
    offsets.mkdir()
    (offsets / "keep").write_text("x")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1)")
    engine.process.wait(60)
    log = engine.log.read_text()
    assert engine.process.returncode == 1
    assert "cannot write offsets file" in log and "Traceback" not in log, log
    # At start, an offsets path that cannot be read is refused the same way.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the offsets directory should be")
    data["offsets"]["path"] = str(blocker / "offsets.json")
    result = _dblog_run(data, tmp_path)
    assert result.returncode == 1
    assert "cannot read offsets file" in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.slow
def test_soak_20_kill_9_cycles_under_writes(mariadb, database, tmp_path, loaded, write_load):
    rows = 30_000
    rng = random.Random(20)
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 300})
    engine = EngineProcess(data, tmp_path)
    workload = write_load(rows, writers=3, seed=7, rate=150)
    try:
        for _ in range(20):
            engine.start()
            engine.wait_until(lambda o: True)
            time.sleep(rng.uniform(0.2, 3.0))
            engine.kill()
    finally:
        workload.stop()
    engine.start()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: _snapshot_done(o) and target.issubset(o.position), timeout=600)
    engine.terminate()
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


def test_broker_down_and_back_signals_resume_and_the_data_path_never_stops(mariadb, database, tmp_path, loaded):
    from support.harness import EngineThread, make_config

    from lab.localbroker import LocalBroker
    from dblog.sinks.jsonl.sink import read_json_lines
    from dblog.signals.kafka_channel import send_signal

    loaded(3_000)
    with LocalBroker() as broker:  # a broker of its own, not the session's: this test stops it
        broker.create_topic("signals")
        broker.create_topic("notices")
        config = make_config(
            mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 200},
            signals={"kafka_topic": "signals", "kafka_poll_interval_seconds": 0.1},
            notifications={"kafka_topic": "notices"}, kafka={"bootstrap_servers": broker.bootstrap},
        )
        engine = EngineThread(config)
        send_signal(broker.bootstrap, "signals", config.name, "log", {"message": "before"})
        broker.stop()  # down: the data path must not notice
        mariadb.execute(f"UPDATE `{database}`.customers SET name = 'while the broker is down' WHERE id = 7")
        sink = Path(config.sink.path)

        def streamed() -> bool:
            return sink.exists() and any(
                (r["value"]["after"] or {}).get("name") == "while the broker is down" for r in read_json_lines(sink))

        engine.eventually(streamed, 30, interval=0.1, message="the update made while the broker is down streamed")
        # Back, with its topics and the earlier signal (read once already), then a new signal.
        broker.restart(down_seconds=0)
        send_signal(broker.bootstrap, "signals", config.name, "execute-snapshot",
                    {"data-collections": [rf"{database}\.customers"]})
        engine.wait_for("COMPLETED", timeout=120)
        engine.until_caught_up()
    result = compare(mariadb, config.sink.path, tables(database)[1:])
    assert result.equal, result.summary()
    assert any(r["value"]["source"]["snapshot"] == "incremental" for r in read_json_lines(config.sink.path))


def test_failed_iceberg_commit_keeps_the_offsets_and_a_restart_recovers(mariadb, database, tmp_path, spark, loaded):
    from support.harness import EngineThread, iceberg_config

    from dblog.demo.verify import source_rows
    from dblog.mysql.source_connection import SourceConnection
    from dblog.sinks.iceberg.sink import read_target

    loaded(2_000)
    config = iceberg_config(mariadb, database, tmp_path, spark, offsets={"commit_interval_seconds": 0.5})
    engine = EngineThread(config)
    engine.wait_for("COMPLETED", timeout=300)
    store = OffsetStore(config.offsets.path)
    mariadb.execute(f"UPDATE `{database}`.orders SET note = 'committed' LIMIT 10")
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    # the sink holds the table open by now
    engine.eventually(lambda: target.issubset(store.load().position), 120, message="the update committed")
    before = store.load()
    # The storage under one table fails: its metadata directory is not a directory any more.
    metadata = Path(spark.conf.get("spark.sql.catalog.lake.warehouse")) / database / "orders" / "metadata"
    metadata.rename(metadata.with_name("metadata.away"))
    metadata.write_text("storage failure")
    mariadb.execute(f"UPDATE `{database}`.orders SET note = 'after the failure' LIMIT 50")
    mariadb.execute(f"DELETE FROM `{database}`.orders LIMIT 20")
    with pytest.raises(Exception):
        engine.until_caught_up(timeout=120)
    assert engine.error is not None  # the MERGE's commit failed and stopped the engine
    assert store.load().position == before.position  # the offsets did not move past it
    metadata.unlink()
    metadata.with_name("metadata.away").rename(metadata)
    spark.sql(f"REFRESH TABLE lake.`{database}`.orders")
    engine = EngineThread(config)
    engine.until_caught_up()
    reader = SourceConnection(lambda: mariadb.connect())
    for table in tables(database):
        name = f"`lake`.`{database}`.`{table.table}`"
        assert read_target(spark, name, reader.schemas.schema(table)) == source_rows(reader, table)
    reader.close()


def test_source_restarted_with_the_iceberg_sink_loses_and_duplicates_nothing(
    mariadb, database, tmp_path, spark, loaded, write_load
):
    from dblog.demo.verify import source_rows
    from dblog.mysql.source_connection import SourceConnection
    from dblog.sinks.iceberg.sink import read_target

    rows = 30_000
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 250},
                       sink={"type": "iceberg"}, spark=spark_settings(spark),
                       offsets={"commit_interval_seconds": 0.5}, source={"binlog_reconnects": READER_RECONNECTS})
    workload = write_load(rows, writers=2, seed=5, rate=50, reconnect=True)
    engine = SupervisedEngine(data)
    # Iceberg commits cover many chunks: any committed progress short of the end will do. The
    # crash outlasts the binlog reader's own reconnects: the supervisor restarts the engine in
    # this process, beside the live Spark session.
    _, after_the_crash = _restart_mid_snapshot_and_mid_stream(
        mariadb, engine, workload, lambda o: _scanned(o) > 0 and not _snapshot_done(o), OUTAGE_SECONDS, OUTAGE_SECONDS)
    assert after_the_crash >= 1
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            name = f"`lake`.`{database}`.`{table.table}`"
            assert read_target(spark, name, reader.schemas.schema(table)) == source_rows(reader, table), table
    finally:
        reader.close()
