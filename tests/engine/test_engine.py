"""The engine against a real MariaDB under concurrent writes (issue acceptance tests).

Each test loads the shop schema into its own database, runs the engine, and ends with the
check that matters: replaying the JSON-lines sink equals `SELECT *` exactly.
"""

from __future__ import annotations

import random
import time

import pytest
from support.harness import EngineProcess, EngineThread, compare, config_data, make_config, snapshot_under_writes
from support import hold_chunk_read

from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import tables
from dblog.runtime.signal_client import send_via_table

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_snapshot_under_concurrent_writes_equals_source(mariadb, database, tmp_path, loaded, write_load,
                                                        monkeypatch, seed):
    rows = 50_000
    orders = loaded(rows)[0]
    workload = write_load(rows, writers=4, seed=seed)
    # The second chunk of orders waits until the writers have made 1,000 writes: the snapshot
    # runs under writes (some inside a chunk's window) however fast the engine reads.
    state = hold_chunk_read(monkeypatch, orders, 2, lambda: sum(workload.writes) > 1000,
                            message="1,000 writes during the snapshot")
    engine, writes = snapshot_under_writes(
        workload, lambda: EngineThread(make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 1000 + seed * 37})),
        timeout=300)
    assert state["held"] and writes > 1000, "the writers did not really run during the snapshot"
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    assert result.rows[f"{database}.orders"] > rows * 0.8
    scanned = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert {n.data["data_collection"] for n in scanned} == {str(t) for t in tables(database)}
    assert all(n.data["status"] == "SUCCEEDED" for n in scanned)


@pytest.mark.parametrize("watermarks", ["insert_insert", "insert_delete"])
def test_signal_table_watermarks_under_concurrent_writes(mariadb, database, tmp_path, loaded, write_load, watermarks):
    rows = 15_000
    loaded(rows)
    workload = write_load(rows, writers=3, seed=7)
    engine, _ = snapshot_under_writes(workload, lambda: EngineThread(
        make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 700, "watermarks": watermarks})
    ), timeout=300)
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    marker_rows = mariadb.execute(f"SELECT COUNT(*) FROM `{database}`.dblog_signal")[0][0]
    assert marker_rows > 0 if watermarks == "insert_insert" else marker_rows == 0


def test_signal_table_requests_a_snapshot_and_rejects_bad_signals(mariadb, database, tmp_path, loaded):
    loaded(3_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 400})
    engine = EngineThread(config)
    mariadb.execute(f"INSERT INTO `{database}`.orders VALUES ('eu', 999999, 1, '1.00', NOW(6), 'new', '', NULL, NULL, NULL)")
    send_via_table(config, "execute-snapshot", {"data-collections": ["no\\.such_table"]}, "bad-1")
    mariadb.execute(
        f"INSERT INTO `{database}`.dblog_signal VALUES ('bad-2', 'execute-snapshot', '{{not json')"
    )
    send_via_table(config, "launch-rockets", {}, "bad-3")
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "good-1")
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    rejected = [n for n in engine.notifications if n.type == "REJECTED"]
    assert [n.data["id"] for n in rejected] == ["bad-1", "bad-2", "bad-3"]
    assert "no table matches" in rejected[0].data["reason"]
    assert "not valid JSON" in rejected[1].data["reason"]
    assert "unknown type 'launch-rockets'" in rejected[2].data["reason"]
    result = compare(mariadb, tmp_path / "changes.jsonl", [tables(database)[0]])
    assert result.equal, result.summary()


def test_startup_never_streams_only_and_restart_resumes(mariadb, database, tmp_path, loaded):
    loaded(100)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"})
    engine = EngineThread(config)
    mariadb.execute(f"UPDATE `{database}`.customers SET balance = 42 WHERE id <= 10")
    engine.until_caught_up()
    assert "STARTED" not in engine.types()
    mariadb.execute(f"UPDATE `{database}`.customers SET balance = 43 WHERE id <= 5")  # while stopped
    engine = EngineThread(config)
    engine.until_caught_up()
    from dblog.sinks.jsonl.sink import read_json_lines

    records = list(read_json_lines(tmp_path / "changes.jsonl"))
    assert len(records) == 15 and all(r["value"]["op"] == "u" for r in records)
    assert [r["value"]["after"]["balance"] for r in records[-5:]] == [43] * 5


# One seed in the default run, the other in the scheduled slow tier (tests/README.md).
@pytest.mark.parametrize("seed", [2026, pytest.param(7, marks=pytest.mark.slow)])
def test_kill_9_at_random_points_during_snapshot_and_streaming(mariadb, database, tmp_path, loaded, write_load, seed):
    rows = 100_000  # the snapshot outlasts several kill points at the engine's speed
    rng = random.Random(seed)
    loaded(rows)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 300})
    engine = EngineProcess(data, tmp_path)
    # Throttled: a separate engine process cannot keep up with three unthrottled writers on two
    # cores, and a window closes only once the reader has caught up with its high watermark.
    workload = write_load(rows, writers=3, seed=11, rate=150)
    kills = {"snapshot": 0, "streaming": 0}
    try:
        # Kill points during the snapshot: after a random share of the orders table is scanned.
        for share in sorted(rng.uniform(0.05, 0.9) for _ in range(5)):
            engine.start()
            engine.wait_until(lambda o: _orders_scanned(o, database) >= share * rows or _snapshot_done(o))
            time.sleep(rng.uniform(0, 0.3))
            engine.kill()
            kills["snapshot" if not _snapshot_done(engine.offsets()) else "streaming"] += 1
        engine.start()
        engine.wait_until(_snapshot_done, timeout=300)
        # Kill points while streaming.
        for _ in range(3):
            time.sleep(rng.uniform(0.2, 1.5))
            engine.kill()
            kills["streaming"] += 1
            engine.start()
    finally:
        workload.stop()
    target = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.wait_until(lambda o: _snapshot_done(o) and target.issubset(o.position), timeout=300)
    engine.terminate()
    assert kills["snapshot"] >= 3 and sum(kills.values()) >= 8, kills
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


def _orders_scanned(offsets, database) -> int:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    orders = [e for e in progress.queue if str(e.table) == f"{database}.orders"]
    if not orders:
        return 0 if f"{database}.orders" not in progress.completed_tables else 10**12
    return orders[0].rows_scanned


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def test_no_locks_and_least_privilege(mariadb, database, tmp_path, loaded, write_load):
    loaded(5_000)
    mariadb.create_user("dblog_ro", "ro-pass", [f"SELECT ON `{database}`.*", "REPLICATION SLAVE, REPLICATION CLIENT ON *.*"])
    mariadb.execute("TRUNCATE mysql.general_log")
    mariadb.execute("SET GLOBAL log_output = 'TABLE'")
    mariadb.execute("SET GLOBAL general_log = ON")
    try:
        config = make_config(
            mariadb, database, tmp_path,
            source={"user": "dblog_ro", "password": "ro-pass"}, snapshot={"chunk_size": 600},
        )
        workload = write_load(5_000, writers=2, seed=3)
        engine, _ = snapshot_under_writes(workload, lambda: EngineThread(config))
    finally:
        mariadb.execute("SET GLOBAL general_log = OFF")
    statements = [
        (row[0].decode() if isinstance(row[0], bytes) else row[0]).upper()
        for row in mariadb.execute(
            "SELECT argument FROM mysql.general_log WHERE user_host LIKE 'dblog_ro%%' AND command_type = 'Query'"
        )
    ]
    assert any("SELECT" in s and "ORDERS" in s for s in statements), "the general log did not see the chunk reads"
    assert not [s for s in statements if "LOCK TABLE" in s or "FLUSH TABLE" in s]
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


def test_long_snapshots_log_rows_rate_and_eta(mariadb, database, tmp_path, loaded, caplog):
    loaded(3_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 100})
    with caplog.at_level("INFO", logger="dblog"):
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"snapshot {database}.")]
    assert lines, "no progress line"
    assert "rows scanned in" in lines[0] and " of ~" in lines[0] and "rows/s" in lines[0] and "ETA" in lines[0]
