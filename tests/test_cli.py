"""The command line as a user runs it: signals via both channels, and `dblog status`."""

import json
import subprocess
import sys
import uuid

import tomli_w

from dblog.gtid import GtidSet
from dblog.offsets import Offsets, OffsetStore
from dblog.progress import SnapshotProgress, TableSnapshot
from dblog.events import TableId
from harness import config_data
from signals.kafka_channel import KafkaSignalChannel


def dblog(*args):
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True, timeout=60)


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
    for _ in range(40):
        received += channel.poll(250)
        if len(received) == 2:
            break
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
    assert "shop.orders: reading, 41,000 of ~100,000 rows scanned in 41 chunks" in out
    assert "last key ('eu', 41), max key ('us', 99), 20,500 rows/s" in out
    assert "shop.customers: queued" in out
    raw = json.loads(dblog("status", "--config", str(path), "--json").stdout)
    assert raw["snapshot"]["paused"] is True
