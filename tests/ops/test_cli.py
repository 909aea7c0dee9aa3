"""The command line as a user runs it: signals via both channels, and `dblog status`."""

import json
import os
import socket
import subprocess
import sys
import uuid

import pytest
import tomli_w
from support.harness import EngineThread, config_data
from support import eventually

from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.runtime.config import parse_config
from dblog.runtime.offset_store import OffsetStore
from dblog.signals.kafka_channel import KafkaSignalChannel


def dblog(*args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


def test_signal_commands_write_debezium_signals(mariadb, broker, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL)")
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    data = config_data(mariadb, database, tmp_path, signals={"table": f"{database}.dblog_signal", "kafka_topic": topic},
                       kafka={"bootstrap_servers": broker.bootstrap})
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    result = dblog("signal", "execute-snapshot", "--config", str(path), "--tables", f"{database}\\.orders",
                   "--condition", f"{database}.orders=amount > 100", "--surrogate-key", "order_id")
    assert result.returncode == 0, result.stderr
    assert dblog("signal", "pause", "--config", str(path)).returncode == 0
    assert dblog("signal", "stop", "--config", str(path), "--tables", "x\\.y").returncode == 0
    rows = {r[1]: json.loads(r[2]) if r[2] else None
            for r in mariadb.execute(f"SELECT id, type, data FROM `{database}`.dblog_signal")}
    assert rows["execute-snapshot"] == {
        "data-collections": [f"{database}\\.orders"], "type": "incremental",
        "additional-conditions": [{"data-collection": f"{database}.orders", "filter": "amount > 100"}],
        "surrogate-key": "order_id",
    }
    assert rows["pause-snapshot"] == {} and rows["stop-snapshot"] == {"data-collections": ["x\\.y"]}

    assert dblog("signal", "resume", "--config", str(path), "--via", "kafka").returncode == 0
    assert dblog("signal", "log", "--config", str(path), "--via", "kafka", "hi").returncode == 0
    channel = KafkaSignalChannel(broker.bootstrap, topic, data["name"], None)
    received = []
    eventually(lambda: received.extend(channel.poll(250)) or len(received) >= 2, 10, interval=0,
               message=lambda: f"the two signals; got {received}")
    channel.close()
    assert [(t, d) for _, t, d in received] == [("resume-snapshot", {}), ("log", {"message": "hi"})]

    bad = dblog("signal", "execute-snapshot", "--config", str(path), "--tables", "a", "--condition", "nonsense")
    assert bad.returncode != 0 and "TABLE=PREDICATE" in bad.stderr


def test_status_reports_progress_rate_and_pause(tmp_path):
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps({"offsets": {"path": str(tmp_path / "offsets.json")}}))
    assert "has not run yet" in dblog("status", "--config", str(path)).stderr
    progress = SnapshotProgress(
        [TableSnapshot(TableId("shop", "orders"), started=True, max_key=("us", 99), last_key=("eu", 41),
                       rows_scanned=41_000, chunks=41, estimated_rows=100_000, started_ms=0, updated_ms=2_000),
         TableSnapshot(TableId("shop", "customers"))],
        paused=True, snapshot_id="adhoc-1",
    )
    OffsetStore(tmp_path / "offsets.json").save(Offsets("mariadb", GtidSet.parse("0-1-77"), progress.to_json()))
    out = dblog("status", "--config", str(path)).stdout
    assert "binlog position: 0-1-77" in out and "PAUSED" in out
    assert "shop.orders: paused, 41,000 of ~100,000 rows scanned in 41 chunks" in out
    assert "last key ('eu', 41), max key ('us', 99), 20,500 rows/s" in out
    assert "shop.customers: queued" in out
    raw = json.loads(dblog("status", "--config", str(path), "--json").stdout)
    assert raw["snapshot"]["paused"] is True


def test_status_shows_a_mysql_position_with_tagged_gtids(tmp_path):
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps({"offsets": {"path": str(tmp_path / "offsets.json")}}))
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    position = GtidSet.parse(f"{uuid.upper()}:1-5:TAG1:1-3,\n{uuid}:tag1:4:6")
    OffsetStore(tmp_path / "offsets.json").save(Offsets("mysql", position))
    out = dblog("status", "--config", str(path)).stdout
    assert f"binlog position: {uuid}:1-5:tag1:1-4:6\n" in out


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _committed(path):
    offsets = OffsetStore(path).load()
    return None if offsets is None else SnapshotProgress.from_json(offsets.snapshot)


def _table_line(out: str, table) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(f"{table}:"))


def test_status_of_a_real_engine_run_shows_rate_and_eta_then_the_pause(mariadb, database, tmp_path, loaded):
    loaded(8_000)
    data = config_data(mariadb, database, tmp_path, snapshot={"startup": "initial", "chunk_size": 10})
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    offsets_path = data["offsets"]["path"]

    # Stopped in the middle of the first table, not paused: the committed state has a rate and an ETA.
    engine = EngineThread(parse_config(data))
    def mid_table() -> bool:
        assert "COMPLETED" not in engine.types()
        progress = _committed(offsets_path)
        return bool(progress and progress.current and progress.current.rows_scanned >= 100)

    engine.eventually(mid_table, 60, interval=0.02, message="100 rows of the first table committed")
    engine.stop()
    assert engine.error is None
    progress = _committed(offsets_path)
    current = progress.current
    assert not progress.paused and current.rows_scanned < 8_000 and current.estimated_rows
    out = dblog("status", "--config", str(path)).stdout
    assert "snapshot: running (request initial)" in out
    line = _table_line(out, current.table)
    assert line.strip().startswith(
        f"{current.table}: reading, {current.rows_scanned:,} of ~{current.estimated_rows:,} rows scanned "
        f"in {current.chunks} chunks, last key {current.last_key!r}".replace(",)", ")")
    ), line
    eta = (current.estimated_rows - current.rows_scanned) / current.rate()
    assert line.endswith(f", {current.rate():,.0f} rows/s, ETA {_duration(eta)}"), line
    assert len(progress.queue) + len(progress.completed_tables) == 2  # orders and customers
    for entry in progress.queue[1:]:
        assert f"{entry.table}: queued, 0 rows scanned" in out
    for table in progress.completed_tables:
        assert f"{table}: completed" in out

    # Restarted and paused through the signal table: PAUSED, and no ETA for the paused table.
    mariadb.execute(f"INSERT INTO `{database}`.dblog_signal (id, type, data) VALUES ('p1', 'pause-snapshot', '{{}}')")
    engine = EngineThread(parse_config(data))
    engine.wait_for("PAUSED")
    engine.until_caught_up()
    paused = _committed(offsets_path)
    assert paused.paused and paused.current.table == current.table
    assert paused.current.rows_scanned >= current.rows_scanned
    out = dblog("status", "--config", str(path)).stdout
    assert "snapshot: PAUSED (request initial)" in out
    line = _table_line(out, current.table)
    assert f"paused, {paused.current.rows_scanned:,} of ~" in line and "rows/s" in line
    assert "ETA" not in line, "a paused table has no ETA"


def test_signal_via_unreachable_kafka_is_a_one_line_error(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps({
        "signals": {"kafka_topic": "signals"}, "kafka": {"bootstrap_servers": f"127.0.0.1:{closed}"},
        "offsets": {"path": str(tmp_path / "offsets.json")},
    }))
    result = dblog("--log-level", "error", "signal", "pause", "--config", str(path), "--via", "kafka")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: pause-snapshot was not sent via kafka: cannot reach Kafka at 127.0.0.1:{closed}: "
                      f"KafkaTimeoutError: Unable to bootstrap from 127.0.0.1:{closed}"], result.stderr


@pytest.mark.server  # the demo starts a MariaDB (and Spark) of its own
def test_demo_end_to_end_into_iceberg_prints_one_summary_line(tmp_path):
    keep = tmp_path / "kept"
    result = dblog("demo", "--rows", "2000", "--writers", "2", "--chunk-size", "256", "--keep", str(keep),
                   env={"COLUMNS": "80", "TMPDIR": str(tmp_path)}, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # one line on stdout, even 80 columns wide through a pipe
    assert lines[-1].startswith("demo OK: snapshot of 3,000 rows"), lines[-1]
    assert "; Iceberg tables equal source: 2 tables, " in lines[-1], lines[-1]
    # Spark's JVM and the engine's INFO logs stay out of the terminal.
    for noise in ("Setting default log level", " WARN ", " INFO ", "NativeCodeLoader"):
        assert noise not in result.stderr, result.stderr[-3000:]
    # --keep: the tables stay, and stderr says how to open them from pyspark.
    warehouse = keep / "warehouse"
    assert (warehouse / "shop" / "orders" / "metadata").is_dir()
    assert f"--conf spark.sql.catalog.lake.warehouse={warehouse}" in result.stderr
    assert "--conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog" in result.stderr


@pytest.mark.server  # the demo starts a MariaDB (and Spark) of its own
def test_demo_with_the_json_lines_sink_and_a_kept_directory(tmp_path):
    keep = tmp_path / "kept"
    result = dblog("demo", "--sink", "jsonl", "--rows", "2000", "--writers", "2", "--chunk-size", "256",
                   "--keep", str(keep), env={"COLUMNS": "80", "TMPDIR": str(tmp_path)}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[-1].startswith("demo OK: snapshot of 3,000 rows") and "sink replay equals source: 2 tables" in lines[-1]
    assert (keep / "changes.jsonl").stat().st_size > 0 and (keep / "offsets.json").is_file()
    # A kept directory describes a MariaDB that is gone: a second run refuses it before starting one.
    again = dblog("demo", "--sink", "jsonl", "--keep", str(keep), timeout=60)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith(f"Error: {keep} already holds a demo's files"), again.stderr


@pytest.mark.server  # the demo starts a MariaDB (and Spark) of its own
def test_demo_without_a_startable_mariadb_exits_with_a_clear_message(tmp_path):
    # A temp dir so deep that the server's unix socket path is over its 107-character limit:
    # mariadbd aborts at start, as it would on a machine where it cannot run.
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    deep.mkdir(parents=True)
    result = dblog("demo", "--rows", "100", env={"TMPDIR": str(deep)}, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.startswith("Error: the demo could not start its private MariaDB: mariadbd exited with code 1")
    assert "[ERROR] The socket file path is too long" in result.stderr
