"""Signals through the signal table against a real MariaDB: every type's effect on the
emitted events and notifications, pause that survives a restart, stop, and a flood of
malformed signals that must each be rejected while nothing else is lost."""

from __future__ import annotations

import json
import random

import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import tables
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.signal_client import send_via_table
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)


def chunk_queries(mariadb, user, table):
    rows = mariadb.execute(
        "SELECT argument FROM mysql.general_log WHERE user_host LIKE %s AND command_type = 'Query'",
        (f"{user}%",),
    )
    texts = [(r[0].decode() if isinstance(r[0], bytes) else r[0]) for r in rows]
    return [t for t in texts if f"`{table}`" in t and "LIMIT" in t and "ORDER BY" in t]


def test_pause_survives_restart_and_resume_finishes(mariadb, database, tmp_path, loaded, write_load):
    loaded(20_000)
    user = f"pause_{database[-6:]}"
    mariadb.create_user(user, "pw", [f"SELECT ON `{database}`.*", "REPLICATION SLAVE, REPLICATION CLIENT ON *.*"])
    config = make_config(
        mariadb, database, tmp_path,
        source={"user": user, "password": "pw"}, snapshot={"startup": "never", "chunk_size": 200},
    )
    engine = EngineThread(config)
    workload = write_load(20_000, writers=2, seed=5, rate=100)
    try:
        send_via_table(config_as_root(config, mariadb), "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "s1")
        engine.eventually(lambda: any(n.type == "IN_PROGRESS" and n.data["total_rows_scanned"] >= 2000
                                      for n in engine.notifications), 60, message="2,000 rows scanned")
        send_via_table(config_as_root(config, mariadb), "pause-snapshot", {}, "p1")
        engine.wait_for("PAUSED")
        engine.until_caught_up()
        offsets = OffsetStore(config.offsets.path).load()
        paused_progress = SnapshotProgress.from_json(offsets.snapshot)
        assert paused_progress.paused and paused_progress.current is not None
        scanned_at_pause = paused_progress.current.rows_scanned

        # Restart while paused: it stays paused, streaming goes on, no chunk is read.
        mariadb.execute("TRUNCATE mysql.general_log")
        mariadb.execute("SET GLOBAL log_output = 'TABLE'")
        mariadb.execute("SET GLOBAL general_log = ON")
        try:
            engine = EngineThread(config)
            before = sum(1 for _ in read_json_lines(config.sink.path))
            # Not a fixed time: until the restarted engine has streamed a change made after its
            # start (any chunk it was going to read by mistake would have been read by then).
            mariadb.execute(f"UPDATE `{database}`.customers SET name = 'after the restart' WHERE id = 1")
            engine.eventually(lambda: any((r["value"]["after"] or {}).get("name") == "after the restart"
                                          for r in read_json_lines(config.sink.path)), 60,
                              message="the change made after the restart streamed")
            engine.until_caught_up()
        finally:
            mariadb.execute("SET GLOBAL general_log = OFF")
        assert chunk_queries(mariadb, user, "orders") == []
        assert sum(1 for _ in read_json_lines(config.sink.path)) > before, "streaming stopped while paused"
        progress = SnapshotProgress.from_json(OffsetStore(config.offsets.path).load().snapshot)
        assert progress.paused and progress.current.rows_scanned == scanned_at_pause

        engine = EngineThread(config)
        send_via_table(config_as_root(config, mariadb), "resume-snapshot", {}, "r1")
        engine.wait_for("RESUMED")
        engine.wait_for("COMPLETED", timeout=300)
    finally:
        workload.stop()
    engine.until_caught_up()
    result = compare(mariadb, config.sink.path, [tables(database)[0]])
    assert result.equal, result.summary()


def config_as_root(config, mariadb):
    """Signals are sent by an operator, not by dblog's read-only user."""
    return config.model_copy(update={"source": config.source.model_copy(update={"user": mariadb.user, "password": mariadb.password})})


def test_stop_one_queued_table_and_the_running_one(mariadb, database, tmp_path, loaded):
    loaded(20_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 100})
    engine = EngineThread(config)
    orders, customers = (str(t) for t in tables(database))
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "s1")
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.customers"]}, "s2")
    engine.wait_for("IN_PROGRESS", 60)
    send_via_table(config, "stop-snapshot", {"data-collections": [f"{database}\\.customers"]}, "x1")
    engine.wait_for("ABORTED", 60)
    assert [n.data["data_collections"] for n in engine.notifications if n.type == "ABORTED"] == [[customers]]
    send_via_table(config, "stop-snapshot", {"data-collections": [f"{database}\\.orders"]}, "x2")
    engine.eventually(lambda: engine.types().count("ABORTED") == 2, 60, message="the second ABORTED")
    engine.until_caught_up()
    assert "COMPLETED" not in engine.types() and "TABLE_SCAN_COMPLETED" not in engine.types()
    snapshot_rows = [r for r in read_json_lines(config.sink.path) if r["value"]["op"] == "r"]
    assert 0 < len(snapshot_rows) < 20_000
    assert {r["value"]["source"]["table"] for r in snapshot_rows} == {"orders"}
    assert SnapshotProgress.from_json(OffsetStore(config.offsets.path).load().snapshot).current is None


def test_log_signal_and_execute_snapshot_by_regex(mariadb, database, tmp_path, caplog, loaded):
    loaded(500)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"})
    engine = EngineThread(config)
    with caplog.at_level("INFO", logger="dblog"):
        send_via_table(config, "log", {"message": "hello from the operator"}, "l1")
        send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\..*"]}, "s1")
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    assert "hello from the operator" in caplog.text
    completed = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert sorted(n.data["data_collection"] for n in completed) == sorted(str(t) for t in tables(database))
    result = compare(mariadb, config.sink.path, tables(database))
    assert result.equal, result.summary()


def malformed_signals(database: str, seed: int = 3) -> list[tuple[str, str, str | None]]:
    rng = random.Random(seed)
    cases: list[tuple[str, str | None]] = [
        ("execute-snapshot", None),
        ("execute-snapshot", ""),
        ("execute-snapshot", "{}"),
        ("execute-snapshot", "[]"),
        ("execute-snapshot", "null"),
        ("execute-snapshot", '"shop.orders"'),
        ("execute-snapshot", "{not json"),
        ("execute-snapshot", '{"data-collections": []}'),
        ("execute-snapshot", '{"data-collections": [""]}'),
        ("execute-snapshot", '{"data-collections": [42]}'),
        ("execute-snapshot", '{"data-collections": "(unclosed"}'),
        ("execute-snapshot", '{"data-collections": ["[a-"]}'),
        ("execute-snapshot", '{"data-collections": ["*orders"]}'),
        ("execute-snapshot", '{"data-collections": ["nosuchdb\\\\.orders"]}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.nosuch"]}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "type": "snapshot"}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "type": 5}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "surrogate-key": ""}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "surrogate-key": 7}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "additional-conditions": "x"}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "additional-conditions": [1]}}'),
        ("execute-snapshot", f'{{"data-collections": ["{database}\\\\.orders"], "additional-conditions": [{{"filter": "1=1"}}]}}'),
        ("stop-snapshot", '{"data-collections": ["(bad"]}'),
        ("stop-snapshot", '{"data-collections": {}}'),
        ("stop-snapshot", "not json at all"),
        ("log", None),
        ("log", "{}"),
        ("log", '{"message": 12}'),
        ("log", "[1,2,3]"),
        ("Execute-Snapshot", "{}"),
        ("launch-rockets", "{}"),
        ("", "{}"),
        (" ", "{}"),
        ("snapshot", "{}"),
        ("DROP TABLE x", "{}"),
    ]
    injections = [
        "1=1) OR (1=1",
        "id > 0; DROP TABLE orders",
        "region IN (SELECT region FROM mysql.user)",
        "SLEEP(5) = 0",
        "1=1 /*! UNION SELECT 1 */",
        "1=1 -- trailing comment",
        "amount > 0 #",
        "@@version > 0",
        "LOAD_FILE('/etc/passwd') IS NULL",
        "BENCHMARK(1000000, MD5(1)) = 0",
    ]
    for predicate in injections:
        data = {"data-collections": [f"{database}\\.orders"], "additional-conditions": [
            {"data-collection": f"{database}\\.orders", "filter": predicate}]}
        cases.append(("execute-snapshot", json.dumps(data)))
    alphabet = '{}[]":,\\ abcdefgh-0123456789.*()'
    while len(cases) < 60:
        fuzz = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        try:
            json.loads(fuzz)
            continue  # only text that is not JSON
        except ValueError:
            cases.append(("execute-snapshot", fuzz))
    return [(f"bad-{index}", kind, data) for index, (kind, data) in enumerate(cases)]


def test_malformed_signals_are_rejected_and_nothing_is_lost(mariadb, database, tmp_path, caplog, loaded, write_load):
    loaded(2_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "initial", "chunk_size": 300})
    bad = malformed_signals(database)
    assert len(bad) >= 50
    workload = write_load(2_000, writers=2, seed=9, rate=200)
    try:
        with caplog.at_level("WARNING", logger="dblog"):
            engine = EngineThread(config)
            with mariadb.connect() as connection, connection.cursor() as cursor:
                for signal_id, kind, data in bad:
                    cursor.execute(f"INSERT INTO `{database}`.dblog_signal VALUES (%s, %s, %s)", (signal_id, kind, data))
            engine.eventually(lambda: engine.types().count("REJECTED") >= len(bad), 120, message="all rejections")
            engine.wait_for("COMPLETED", timeout=300)
    finally:
        workload.stop()
    engine.until_caught_up()
    rejected = [n.data["id"] for n in engine.notifications if n.type == "REJECTED"]
    assert sorted(rejected) == sorted(signal_id for signal_id, _, _ in bad)
    for signal_id, _, _ in bad:
        assert f"signal {signal_id!r}" in caplog.text
    assert "STARTED" in engine.types()
    started = [n for n in engine.notifications if n.type == "STARTED"]
    assert len(started) == 1, "a malformed signal started a snapshot"
    result = compare(mariadb, config.sink.path, tables(database))
    assert result.equal, result.summary()


def test_additional_condition_limits_the_snapshot_to_matching_rows(mariadb, database, tmp_path, loaded):
    loaded(3_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 250})
    engine = EngineThread(config)
    orders = f"{database}.orders"
    send_via_table(config, "execute-snapshot", {
        "data-collections": [f"{database}\\.orders"],
        "additional-conditions": [{"data-collection": orders, "filter": "region = 'eu' AND amount > 1000"}],
    }, "c1")
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    snapshot_rows = [r["value"]["after"] for r in read_json_lines(config.sink.path) if r["value"]["op"] == "r"]
    expected = mariadb.execute(f"SELECT COUNT(*) FROM `{database}`.orders WHERE region = 'eu' AND amount > 1000")[0][0]
    assert len(snapshot_rows) == expected > 0
    assert all(row["region"] == "eu" and float(row["amount"]) > 1000 for row in snapshot_rows)


def test_table_scan_completed_statuses(mariadb, database, tmp_path, loaded):
    loaded(4_000)
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.empty_t (id INT PRIMARY KEY)")
    mariadb.execute(f"CREATE TABLE {db}.no_key (a INT, b TEXT)")
    mariadb.execute(f"INSERT INTO {db}.no_key VALUES (1, 'x')")
    mariadb.execute(f"CREATE TABLE {db}.bad_key (a INT NULL, b TEXT)")
    mariadb.execute(f"INSERT INTO {db}.bad_key VALUES (1, 'x')")
    mariadb.execute(f"CREATE TABLE {db}.doomed (id INT PRIMARY KEY, note TEXT)")
    mariadb.execute(f"INSERT INTO {db}.doomed VALUES (1, 'x'), (2, 'y')")
    mariadb.execute(f"CREATE TABLE {db}.ignored_t (id INT PRIMARY KEY)")
    config = make_config(
        mariadb, database, tmp_path,
        source={"exclude": [f"{database}\\.ignored_t"]}, snapshot={"startup": "never", "chunk_size": 100},
    )
    engine = EngineThread(config)
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.orders"]}, "big")
    for name in ("empty_t", "no_key", "ignored_t"):
        send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.{name}"]}, name)
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.doomed"],
        "additional-conditions": [{"data-collection": f"{database}.doomed", "filter": "note <> 'z'"}]}, "doomed")
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.customers"],
                                                "surrogate-key": "no_such_column"}, "surrogate")
    # A table without a key is read whole; keyed by a column that cannot key it, it is refused.
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.bad_key"],
                                                "surrogate-key": "a"}, "bad-key")
    engine.eventually(lambda: engine.types().count("STARTED") >= 4, 60, message="four requests STARTED")
    # While orders is still being read, the column the queued filter needs disappears.
    mariadb.execute(f"ALTER TABLE {db}.doomed DROP COLUMN note")
    engine.wait_for("COMPLETED", timeout=120)
    engine.until_caught_up()
    statuses = {n.data["data_collection"].split(".")[1]: n.data["status"]
                for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"}
    assert statuses == {
        "orders": "SUCCEEDED", "empty_t": "EMPTY", "no_key": "SUCCEEDED", "bad_key": "NO_PRIMARY_KEY",
        "ignored_t": "SKIPPED",
        "doomed": "SQL_EXCEPTION", "customers": "UNKNOWN_SCHEMA",
    }
    result = compare(mariadb, config.sink.path, [tables(database)[0]])
    assert result.equal, result.summary()
