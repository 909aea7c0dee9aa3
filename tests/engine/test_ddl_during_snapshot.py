"""DDL on a table while its snapshot runs: the table's snapshot starts again from its first key
(TABLE_SCAN_RESTARTED), so no chunk and no table mixes rows of two schemas, and the sink's
replay ends equal to the source. Also DDL that lands exactly where it hurts: inside a chunk's
window from another default database, and between the schema cached for a chunk and its SELECT
(`at_chunk`)."""

from __future__ import annotations

import threading

import pytest
from support.harness import EngineThread, compare, make_config
from support import hold_chunk_read

from dblog.core.events import TableId
from dblog.demo.workload import tables
from dblog.mysql.chunk_reader import ChunkReader
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)


def _wait_scanned(engine: EngineThread, table: str, rows: int) -> None:
    def scanned() -> bool:
        current = engine.capture.progress.current
        return current is not None and str(current.table) == table and current.rows_scanned >= rows

    engine.eventually(scanned, 120, interval=0.02, message=f"{rows} rows of {table} scanned")


def test_add_column_and_type_change_restart_the_tables_snapshot(mariadb, database, tmp_path, loaded, write_load,
                                                               monkeypatch):
    rows = 10_000
    loaded(rows)
    orders = TableId(database, "orders")
    # Fixed chunks: the read after the restart cannot finish in a few grown chunks before the second ALTER.
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 300, "max_chunk_size": 300})
    workload = write_load(rows, writers=2, seed=4, rate=100)
    try:
        engine = EngineThread(config)
        _wait_scanned(engine, str(orders), 2_000)
        mariadb.execute(f"ALTER TABLE `{database}`.orders ADD COLUMN extra INT NOT NULL DEFAULT 7")
        engine.eventually(lambda: "TABLE_SCAN_RESTARTED" in engine.types(), 120, message="the first restart")
        # The read started again waits at its 5th chunk until the second ALTER has committed: the
        # ALTER (a table copy) may take longer than the rest of the read would.
        modified = threading.Event()
        hold_chunk_read(monkeypatch, orders, 5, modified.is_set, message="the second ALTER")
        _wait_scanned(engine, str(orders), 1_200)
        mariadb.execute(f"ALTER TABLE `{database}`.orders MODIFY amount DECIMAL(14,3) NOT NULL")
        modified.set()
        engine.wait_for("COMPLETED", timeout=300)
    finally:
        workload.stop()
    engine.until_caught_up()
    restarts = [n.data for n in engine.notifications if n.type == "TABLE_SCAN_RESTARTED"]
    assert [r["data_collection"] for r in restarts] == [f"{database}.orders"] * 2
    result = compare(mariadb, config.sink.path, tables(database))
    assert result.equal, result.summary()  # every row has `extra` = 7 and three decimals


def test_primary_key_change_restarts_the_snapshot_with_the_new_key(mariadb, database, tmp_path, monkeypatch):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.items (id INT NOT NULL, part INT NOT NULL, v VARCHAR(20), PRIMARY KEY (id))")
    mariadb.execute(f"INSERT INTO {db}.items SELECT seq, seq % 7, CONCAT('v', seq) FROM {db}.seq_1_to_6000")
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 200},
                         source={"include": [rf"{database}\.items"]})
    # At the 6th chunk, not after a wait: 6,000 rows are read faster than the ALTER commits.
    at_chunk(monkeypatch, mariadb, TableId(database, "items"), 6,
             [f"ALTER TABLE {db}.items DROP PRIMARY KEY, ADD PRIMARY KEY (part, id)"], "after")
    engine = EngineThread(config)
    engine.wait_for("COMPLETED")
    mariadb.execute(f"UPDATE {db}.items SET v = 'after' WHERE id <= 10")
    engine.until_caught_up()
    assert "TABLE_SCAN_RESTARTED" in engine.types()
    # Records written after the change are keyed (part, id); replayed, they give the table.
    records = [r for r in read_json_lines(config.sink.path) if list(r["key"]) == ["part", "id"]]
    replayed = materialize(records)[f"{database}.items"]
    source = {(part, id_): {"id": id_, "part": part, "v": v}
              for id_, part, v in mariadb.execute(f"SELECT id, part, v FROM {db}.items")}
    assert replayed == source


def at_chunk(monkeypatch, mariadb, table: TableId, chunk: int, statements: list[str], when: str,
             use: str | None = None) -> dict:
    """Run `statements` on a connection of their own (default database `use`) once, at the
    `chunk`-th chunk read of `table`: "before" its SELECT (the engine has cached the schema and
    taken the low watermark: DDL then breaks a query naming the old columns) or "after" it
    (before the high watermark: inside the chunk's window). The server is the real one; only the
    moment is chosen."""
    original = ChunkReader.read_chunk
    state = {"reads": 0, "ran": False}

    def run() -> None:
        state["ran"] = True
        with mariadb.connect() as connection, connection.cursor() as cursor:
            if use:
                cursor.execute(f"USE `{use}`")
            for statement in statements:
                cursor.execute(statement)

    def read_chunk(self, request):
        due = request.schema.table == table and not state["ran"] and state["reads"] + 1 == chunk
        if request.schema.table == table:
            state["reads"] += 1
        if due and when == "before":
            run()
        rows = original(self, request)
        if due and when == "after":
            run()
        return rows

    monkeypatch.setattr(ChunkReader, "read_chunk", read_chunk)
    return state


def _items(mariadb, database: str, rows: int) -> TableId:
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.items (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, "
                    f"qty INT NOT NULL, note VARCHAR(20) NULL)")
    mariadb.execute(f"INSERT INTO {db}.items SELECT seq, CONCAT('n', seq), seq % 13, IF(seq % 3, 'x', NULL) "
                    f"FROM {db}.seq_1_to_{rows}")
    return TableId(database, "items")


def _ops(config, table: TableId) -> list[str]:
    """The ops of the records about `table`, in file order (schema changes as 'ddl')."""
    ops = []
    for record in read_json_lines(config.sink.path):
        value = record["value"]
        if "tableChanges" in value:
            if any(str(table) in (c["id"], c.get("previousId")) for c in value["tableChanges"]):
                ops.append("ddl")
        elif value["source"]["db"] == table.db and value["source"]["table"] == table.table:
            ops.append(value["op"])
    return ops


@pytest.mark.parametrize("statement", ["TRUNCATE `{db}`.items", "DROP TABLE `{db}`.items"])
def test_truncate_or_drop_from_another_database_inside_a_window(mariadb, database, tmp_path, monkeypatch, statement):
    """`USE other; TRUNCATE db.items` between a chunk's SELECT and its high watermark discards
    the window (no `r` row of the truncated data after the truncate), and the output carries the
    TRUNCATE (`op` t) / DROP (schema change) so that its replay empties / forgets the table."""
    table = _items(mariadb, database, 3_000)
    other = f"{database}_other"
    mariadb.execute(f"CREATE DATABASE `{other}`")
    try:
        ddl = statement.format(db=database)
        follow = [] if ddl.startswith("DROP") else [f"INSERT INTO `{database}`.items VALUES (5, 'new', 1, NULL)"]
        state = at_chunk(monkeypatch, mariadb, table, 3, [ddl, *follow], "after", use=other)
        config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 200},
                             source={"include": [rf"{database}\.items"]})
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`")
    assert state["ran"]
    ops = _ops(config, table)
    mark = "t" if ddl.startswith("TRUNCATE") else "ddl"
    assert mark in ops, ops
    after = ops[ops.index(mark) + 1:]
    assert "r" not in after, f"rows of the {mark} data emitted after it: {after.count('r')} r records"
    assert ops.index(mark) >= 400  # two chunks were emitted before it
    result = compare(mariadb, config.sink.path, [table])
    assert result.equal, result.summary()


DDL_MID_SNAPSHOT = {
    "drop column": ["ALTER TABLE `{db}`.items DROP COLUMN note"],
    "rename column": ["ALTER TABLE `{db}`.items RENAME COLUMN name TO label"],
    "change column": ["ALTER TABLE `{db}`.items CHANGE COLUMN qty quantity BIGINT NOT NULL"],
    "modify column": ["ALTER TABLE `{db}`.items MODIFY COLUMN name VARCHAR(40) NOT NULL"],
    "rename key column": ["ALTER TABLE `{db}`.items RENAME COLUMN id TO item_id"],
    "rename table": ["RENAME TABLE `{db}`.items TO `{db}`.items_renamed"],
    "drop table": ["DROP TABLE `{db}`.items"],
}


@pytest.mark.parametrize("name", list(DDL_MID_SNAPSHOT))
def test_ddl_that_breaks_the_chunk_query_mid_snapshot(mariadb, database, tmp_path, monkeypatch, name):
    """DDL committed after the engine cached the table's schema and before its next chunk's
    SELECT (which names the old columns or table): the engine waits until the binlog reader has
    passed the DDL, then reads again with the new schema. The table ends complete
    (TABLE_SCAN_RESTARTED, then SUCCEEDED), never SQL_EXCEPTION; a dropped or renamed table
    ends UNKNOWN_SCHEMA and a renamed one is read under its new name."""
    table = _items(mariadb, database, 3_000)
    statements = [statement.format(db=database) for statement in DDL_MID_SNAPSHOT[name]]
    state = at_chunk(monkeypatch, mariadb, table, 3, statements, "before")
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 200},
                         source={"include": [rf"{database}\.items.*"]})
    engine = EngineThread(config)
    engine.wait_for("COMPLETED")
    if name != "drop table":  # changes after the DDL, in the new shape
        target = "items_renamed" if name == "rename table" else "items"
        key = "item_id" if name == "rename key column" else "id"
        mariadb.execute(f"UPDATE `{database}`.{target} SET {key} = {key} + 10000 WHERE {key} % 97 = 0")
        mariadb.execute(f"DELETE FROM `{database}`.{target} WHERE {key} % 89 = 0")
    engine.until_caught_up()
    assert state["ran"]
    statuses = {n.data["data_collection"]: n.data["status"]
                for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"}
    assert "SQL_EXCEPTION" not in statuses.values(), statuses
    if name in ("rename table", "drop table"):
        assert statuses[str(table)] == "UNKNOWN_SCHEMA"
    else:
        assert statuses == {str(table): "SUCCEEDED"}
        assert "TABLE_SCAN_RESTARTED" in engine.types()
    renamed = TableId(database, "items_renamed")
    if name == "rename table":
        assert statuses[str(renamed)] == "SUCCEEDED"
    result = compare(mariadb, config.sink.path, [table, renamed])
    assert result.equal, result.summary()
