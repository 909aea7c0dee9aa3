"""DDL on a table while its snapshot runs: the table's snapshot starts again from its first key
(TABLE_SCAN_RESTARTED), so no chunk and no table mixes rows of two schemas, and the sink's
replay ends equal to the source."""

from __future__ import annotations

import pytest

from dblog.envelope import materialize
from dblog.sinks import read_json_lines
from dblog.workload import WriteLoad, load, tables
from harness import EngineThread, compare, make_config

pytestmark = pytest.mark.timeout(600)


def _wait_scanned(engine: EngineThread, table: str, rows: int) -> None:
    import time

    deadline = time.monotonic() + 120
    while True:
        current = engine.capture.progress.current
        if current is not None and str(current.table) == table and current.rows_scanned >= rows:
            return
        assert engine.error is None and time.monotonic() < deadline, engine.error
        time.sleep(0.02)


def test_add_column_and_type_change_restart_the_tables_snapshot(mariadb, database, tmp_path):
    rows = 10_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 300})
    workload = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=4, rate=100).start()
    try:
        engine = EngineThread(config)
        _wait_scanned(engine, f"{database}.orders", 2_000)
        mariadb.execute(f"ALTER TABLE `{database}`.orders ADD COLUMN extra INT NOT NULL DEFAULT 7")
        _wait_scanned(engine, f"{database}.orders", 1_500)
        mariadb.execute(f"ALTER TABLE `{database}`.orders MODIFY amount DECIMAL(14,3) NOT NULL")
        engine.wait_for("COMPLETED", timeout=300)
    finally:
        workload.stop()
    engine.until_caught_up()
    restarts = [n.data for n in engine.notifications if n.type == "TABLE_SCAN_RESTARTED"]
    assert [r["data_collection"] for r in restarts] == [f"{database}.orders"] * 2
    result = compare(mariadb, config.sink.path, tables(database))
    assert result.equal, result.summary()  # every row has `extra` = 7 and three decimals


def test_primary_key_change_restarts_the_snapshot_with_the_new_key(mariadb, database, tmp_path):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.items (id INT NOT NULL, part INT NOT NULL, v VARCHAR(20), PRIMARY KEY (id))")
    mariadb.execute(f"INSERT INTO {db}.items SELECT seq, seq % 7, CONCAT('v', seq) FROM {db}.seq_1_to_6000")
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 200},
                         source={"include": [rf"{database}\.items"]})
    engine = EngineThread(config)
    _wait_scanned(engine, f"{database}.items", 1_000)
    mariadb.execute(f"ALTER TABLE {db}.items DROP PRIMARY KEY, ADD PRIMARY KEY (part, id)")
    mariadb.execute(f"UPDATE {db}.items SET v = 'after' WHERE id <= 10")
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    assert "TABLE_SCAN_RESTARTED" in engine.types()
    # Records written after the change are keyed (part, id); replayed, they give the table.
    records = [r for r in read_json_lines(config.sink.path) if list(r["key"]) == ["part", "id"]]
    replayed = materialize(records)[f"{database}.items"]
    source = {(part, id_): {"id": id_, "part": part, "v": v}
              for id_, part, v in mariadb.execute(f"SELECT id, part, v FROM {db}.items")}
    assert replayed == source
