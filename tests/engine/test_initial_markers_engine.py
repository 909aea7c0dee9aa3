"""`snapshot.initial_markers` end to end: the engine's startup snapshot on a real MariaDB writes
Debezium's initial-snapshot markers in `source.snapshot` (JSON-lines sink here; the Kafka sink
against Debezium itself: tests/sinks/kafka/test_connect_snapshot_differential.py), also across
a stop in the middle of the snapshot and a restart from the offsets."""

from __future__ import annotations

import json

import pytest
from support import eventually, hold_chunk_read
from support.harness import EngineThread, make_config

from dblog.core.events import TableId

pytestmark = pytest.mark.timeout(300)

TABLES = {"a": [], "b": [1, 2, 3, 4, 5, 6, 7], "c": [9], "d": [], "e": [1, 2, 3], "f": []}


def _markers(path) -> list[tuple[str, int, str]]:
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        value = record.get("value") or {}
        if value.get("op") == "r":
            out.append((value["source"]["table"], record["key"]["id"], value["source"]["snapshot"]))
    return out


def _create(mariadb, database: str) -> None:
    for name, keys in TABLES.items():
        mariadb.execute(f"CREATE TABLE `{database}`.`{name}` (id INT PRIMARY KEY, v VARCHAR(10))")
        if keys:
            mariadb.execute(f"INSERT INTO `{database}`.`{name}` VALUES " + ", ".join(f"({k}, 'v{k}')" for k in keys))


EXPECTED = [("b", 1, "first_in_data_collection"), *(("b", k, "true") for k in range(2, 7)),
            ("b", 7, "last_in_data_collection"), ("c", 9, "last_in_data_collection"),
            ("e", 1, "first_in_data_collection"), ("e", 2, "true"), ("e", 3, "last")]


def _config(mariadb, database, tmp_path, markers: bool = True):
    return make_config(mariadb, database, tmp_path, source={"include": [f"{database}\\.[a-f]"]},
                       snapshot={"startup": "initial", "initial_markers": markers, "chunk_size": 2})


def test_the_startup_snapshot_carries_debeziums_markers(mariadb, database, tmp_path):
    _create(mariadb, database)
    engine = EngineThread(_config(mariadb, database, tmp_path))
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    assert _markers(tmp_path / "changes.jsonl") == EXPECTED
    empty = [n.data["data_collection"] for n in engine.notifications
             if n.type == "TABLE_SCAN_COMPLETED" and n.data["status"] == "EMPTY"]
    assert sorted(empty) == [f"{database}.{name}" for name in "adf"]


def test_without_the_setting_the_startup_snapshot_is_incremental(mariadb, database, tmp_path):
    _create(mariadb, database)
    engine = EngineThread(_config(mariadb, database, tmp_path, markers=False))
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    assert {marker for *_, marker in _markers(tmp_path / "changes.jsonl")} == {"incremental"}


def test_a_restart_in_the_middle_goes_on_marking(mariadb, database, tmp_path, monkeypatch):
    _create(mariadb, database)
    config = _config(mariadb, database, tmp_path)
    first = EngineThread(config)
    # b's second chunk waits until the engine is told to stop; the engine stops after it, with
    # b's last two chunks, c and e still to read: the restarted engine goes on from the offsets
    state = hold_chunk_read(monkeypatch, TableId(database, "b"), 2, lambda: first.engine.stopping)
    eventually(lambda: state["reads"] >= 2, 60, message="b's second chunk read")
    first.stop()
    monkeypatch.undo()
    written = _markers(tmp_path / "changes.jsonl")
    assert written[0] == ("b", 1, "first_in_data_collection") and written[-1][0] == "b"
    assert "last" not in {marker for *_, marker in written}
    second = EngineThread(config)
    second.wait_for("COMPLETED")
    second.until_caught_up()
    after = _markers(tmp_path / "changes.jsonl")[len(written):]
    assert after[0][0] == "b" and after[-1] == ("e", 3, "last")
    # each row keeps its marker when read again after the restart: b's first is not marked again
    assert [row for row in after if row[2] == "first_in_data_collection"] == [("e", 1, "first_in_data_collection")]
    assert dict(((table, key), marker) for table, key, marker in written + after) == {
        (table, key): marker for table, key, marker in EXPECTED}
