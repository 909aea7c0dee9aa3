"""Debezium's snapshot modes (`snapshot.startup`, dblog.runtime.snapshot_modes) on the run's
MariaDB: `when_needed` (no offsets, or offsets the binlog no longer holds), `initial_only`
(snapshot, then stop), `always` (a snapshot at each start, streaming from the present),
`recovery` (the schema history read again from the server), `configuration_based`; the
Debezium-exact blocking start-up (`snapshot.startup_reads = "blocking"`); and
`snapshot.select_overrides` (the chunks of a table read from the user's SELECT)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from support import eventually
from support.fixtures.mariadb import purge_binlogs_before_the_newest
from support.harness import EngineThread, compare, make_config
from support.replay import strict_replay

from dblog.core.events import TableId
from dblog.core.offsets import OffsetsError
from dblog.runtime.engine import Engine
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)


def _orders(server, database: str, rows: int) -> TableId:
    server.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY, region VARCHAR(8), amount INT)")
    server.execute(f"INSERT INTO `{database}`.orders SELECT seq, IF(seq % 3 = 0, 'eu', 'us'), seq * 10 "
                   f"FROM `{database}`.seq_1_to_{rows}")
    return TableId(database, "orders")


def _records(config) -> list[dict]:
    path = Path(config.sink.path)
    return list(read_json_lines(path)) if path.exists() else []


def _ops(records: list[dict], table: TableId | None = None) -> list[str]:
    return [record["value"]["op"] for record in records
            if "op" in record["value"] and (table is None or (record["value"]["source"]["db"],
                                                              record["value"]["source"]["table"]) == tuple(table))]


def _run_to_the_end(config, timeout: float = 120) -> EngineThread:
    """An engine whose mode stops it by itself (initial_only): `run` returns on its own."""
    engine = EngineThread(config)
    engine._thread.join(timeout)
    assert not engine._thread.is_alive(), "the engine did not stop by itself"
    if engine.error:
        raise engine.error
    return engine


def _caught_up(config) -> EngineThread:
    engine = EngineThread(config)
    engine.until_caught_up()
    return engine


def _equal(server, config, tables) -> None:
    result = compare(server, config.sink.path, tables)
    assert result.equal, result.summary()


# --- when_needed ---------------------------------------------------------------------------------

def test_when_needed_snapshots_without_offsets_and_again_when_the_binlog_no_longer_holds_them(own_mariadb,
                                                                                                 tmp_path):
    own_mariadb.execute("CREATE DATABASE shop")
    orders = _orders(own_mariadb, "shop", 300)
    config = make_config(own_mariadb, "shop", tmp_path, snapshot={"startup": "when_needed", "chunk_size": 100})
    _caught_up(config)
    assert _ops(_records(config), orders).count("r") == 300  # no offsets: snapshotted
    # A start with the offsets still in the binlog resumes: no snapshot.
    own_mariadb.execute("INSERT INTO shop.orders VALUES (1001, 'eu', 1)")
    _caught_up(config)
    assert _ops(_records(config), orders).count("r") == 300
    # Changes while dblog is stopped, then the binlog holding them is purged: snapshot again from the present.
    own_mariadb.execute("INSERT INTO shop.orders VALUES (1002, 'eu', 2)")
    own_mariadb.execute("UPDATE shop.orders SET amount = -1 WHERE id <= 10")
    own_mariadb.execute("DELETE FROM shop.orders WHERE id BETWEEN 11 AND 20")
    purge_binlogs_before_the_newest(own_mariadb)
    before = len(_records(config))
    engine = _caught_up(config)
    assert engine.engine.startup_plan.read_tables and engine.engine.startup_plan.fresh_position
    assert _ops(_records(config), orders).count("r") == 300 + 292
    # The new snapshot is the table from here (the deletes made meanwhile are lost with the binlog,
    # as in Debezium: a consumer starts over from the snapshot).
    since = tmp_path / "since.jsonl"
    since.write_text("".join(json.dumps(record) + "\n" for record in _records(config)[before:]))
    result = compare(own_mariadb, since, [orders])
    assert result.equal, result.summary()


# --- initial_only, always, configuration_based -----------------------------------------------------

@pytest.mark.parametrize("reads", ["incremental", "blocking"])
def test_initial_only_snapshots_then_stops_without_streaming(mariadb, database, tmp_path, reads):
    orders = _orders(mariadb, database, 500)
    config = make_config(mariadb, database, tmp_path,
                         snapshot={"startup": "initial_only", "chunk_size": 64, "startup_reads": reads})
    _run_to_the_end(config)
    assert sorted(_ops(_records(config), orders)) == ["r"] * 500
    _equal(mariadb, config, [orders])
    # Stopped: changes now are not streamed; a second initial_only start stops at once, emitting nothing.
    mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (9001, 'eu', 1)")
    mariadb.execute(f"DELETE FROM `{database}`.orders WHERE id = 1")
    _run_to_the_end(config)
    assert len(_ops(_records(config), orders)) == 500
    # A streaming mode then resumes where the snapshot left off: nothing lost in between.
    streaming = make_config(mariadb, database, tmp_path, snapshot={"startup": "initial"})
    _caught_up(streaming)
    assert _ops(_records(config), orders)[500:] == ["c", "d"]
    _equal(mariadb, config, [orders])


def test_always_snapshots_at_every_start_and_streams_from_the_present(mariadb, database, tmp_path):
    orders = _orders(mariadb, database, 200)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "always", "chunk_size": 50})
    _caught_up(config)
    assert _ops(_records(config), orders) == ["r"] * 200
    mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (501, 'eu', 1)")
    mariadb.execute(f"UPDATE `{database}`.orders SET amount = 0 WHERE id = 2")
    _caught_up(config)
    # Read again, the changes made while stopped included as rows (not streamed: Debezium's always
    # does not use its offsets either); nothing else.
    assert _ops(_records(config), orders) == ["r"] * 200 + ["r"] * 201
    _equal(mariadb, config, [orders])


def test_configuration_based_reads_streams_and_stops_as_its_keys_say(mariadb, database, tmp_path):
    orders = _orders(mariadb, database, 100)
    once = {"startup": "configuration_based",
            "configuration_based": {"snapshot_data": True, "start_stream": False}}
    config = make_config(mariadb, database, tmp_path, snapshot=once)
    _run_to_the_end(config)
    _run_to_the_end(config)  # snapshot_data: at each start; start_stream = false: then stop
    assert _ops(_records(config), orders) == ["r"] * 200
    # No data, stream; the offsets' position purged is refused unless snapshot_on_data_error
    streaming = make_config(mariadb, database, tmp_path, snapshot={
        "startup": "configuration_based", "configuration_based": {"start_stream": True}})
    mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (501, 'eu', 1)")
    _caught_up(streaming)
    assert _ops(_records(config), orders)[200:] == ["c"]
    from dblog.runtime.snapshot_modes import plan_startup

    plan = plan_startup(make_config(mariadb, database, tmp_path, snapshot={
        "startup": "configuration_based",
        "configuration_based": {"snapshot_on_data_error": True, "start_stream": True}}).snapshot, True, lambda: True)
    assert plan.read_tables and plan.fresh_position and plan.stream


# --- recovery: the schema history rebuilt from the server -----------------------------------------

def test_recovery_rebuilds_the_schema_history_from_the_server(mariadb, database, tmp_path, monkeypatch):
    from dblog.sinks.jsonl.sink import JsonLinesSink

    monkeypatch.setattr(JsonLinesSink, "uses_definitions", True)  # keep the history, as the Kafka sink does
    orders = _orders(mariadb, database, 10)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "initial"})
    engine = EngineThread(config)
    engine.until_caught_up()
    offsets = json.loads(Path(config.offsets.path).read_text())
    assert offsets.get("definitions_file"), offsets  # the history is kept with the offsets
    # The history file is damaged: `initial` stops, naming recovery as a remedy ...
    history = Path(config.offsets.path).parent / offsets["definitions_file"]
    history.write_text('{"tables": 5}')
    with pytest.raises(OffsetsError, match="recovery"):
        Engine(config).start()
    # ... and a column the binlog never shows (not logged) is in the server's definition only.
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"ALTER TABLE `{database}`.orders ADD COLUMN note VARCHAR(10) NULL")
    recovery = make_config(mariadb, database, tmp_path, snapshot={"startup": "recovery"})
    engine = EngineThread(recovery)
    definition = engine.engine.table_history.definition(orders)
    assert "note" in [column.name for column in definition.columns]
    mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (11, 'eu', 1, 'x')")
    engine.until_caught_up()
    assert _ops(_records(config), orders) == ["r"] * 10 + ["c"]  # no data read again: streamed on
    assert engine.engine.startup_plan.rebuild_history and not engine.engine.startup_plan.read_tables


# --- snapshot.select_overrides ------------------------------------------------------------------

def test_select_overrides_are_the_source_of_the_start_up_chunks(mariadb, database, tmp_path):
    orders = _orders(mariadb, database, 1000)
    mariadb.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.items SELECT seq, seq FROM `{database}`.seq_1_to_5")
    overrides = {str(orders): f"SELECT id, region FROM `{database}`.orders WHERE region = 'eu' AND id % 2 = 0;",
                 f"{database}.items": f"SELECT v FROM `{database}`.items"}
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 37, "select_overrides": overrides})
    engine = _caught_up(config)
    rows = [record["value"]["after"] for record in _records(config)
            if record["value"].get("op") == "r" and record["value"]["source"]["table"] == "orders"]
    expected = [id_ for id_ in range(1, 1001) if id_ % 3 == 0 and id_ % 2 == 0]
    assert [row["id"] for row in rows] == expected  # every row of the SELECT once, in key order, by chunks
    assert all(row["region"] == "eu" and row["amount"] is None for row in rows)  # left out: NULL
    [refused] = [n.data for n in engine.notifications
                 if n.type == "TABLE_SCAN_COMPLETED" and n.data["data_collection"] == f"{database}.items"]
    assert refused["status"] == "SQL_EXCEPTION"
    assert "does not give the key column(s) id" in refused["reason"]


# --- the start-up snapshot, Debezium's way (blocking) ---------------------------------------------

def test_blocking_start_up_reads_every_table_before_streaming(mariadb, database, tmp_path):
    orders = _orders(mariadb, database, 2000)
    config = make_config(mariadb, database, tmp_path,
                         snapshot={"startup": "initial", "startup_reads": "blocking", "chunk_size": 100})
    stop = threading.Event()
    inserted = [0]

    def write() -> None:
        with mariadb.connect() as connection, connection.cursor() as cursor:
            n = 10_000
            while not stop.is_set():
                n += 1
                cursor.execute(f"INSERT INTO `{database}`.orders VALUES (%s, 'us', 1)", (n,))
                cursor.execute(f"UPDATE `{database}`.orders SET amount = amount + 1 WHERE id = %s", (n % 2000 + 1,))
                inserted[0] += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
        # Inserts after the snapshot completed are past its consistent point: streamed, whatever
        # the machine's speed (on a loaded one the snapshot can end before the writer's first).
        at_completion = inserted[0]
        eventually(lambda: inserted[0] >= at_completion + 20, message="20 inserts after the snapshot")
    finally:
        stop.set()
        writer.join()
    engine.until_caught_up()
    ops = _ops(_records(config), orders)
    reads = ops.count("r")
    assert reads >= 2000 and ops[:reads] == ["r"] * reads  # every row before any streamed change
    assert "c" in ops[reads:]
    # One consistent snapshot, the stream exactly after it, as Debezium's initial snapshot:
    # no change the rows hold comes again (a c of a key held, a u from a stale row).
    strict_replay([record["value"] for record in _records(config) if "op" in record["value"]], "orders")
    _equal(mariadb, config, [orders])
