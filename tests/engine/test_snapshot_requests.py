"""The fate of every snapshot request, against a real MariaDB: requests are queued by table,
condition and surrogate key, none is dropped without a notification, and a surrogate key that
cannot page a table is refused before its first chunk."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.events import TableId
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.runtime.status import describe
from dblog.sinks.jsonl.sink import JsonLinesSink, read_json_lines

pytestmark = pytest.mark.timeout(300)


def numbers_table(mariadb, database: str, rows: int) -> TableId:
    db = f"`{database}`"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO {db}.t VALUES " + ",".join(f"({n}, {n})" for n in range(1, rows + 1)))
    return TableId(database, "t")


def fates(engine: EngineThread) -> dict[str, list[str]]:
    """Per request id, the notifications that answered it."""
    answered: dict[str, list[str]] = {}
    for n in engine.notifications:
        if "request" in n.data:
            answered.setdefault(n.data["request"], []).append(n.type)
    return answered


def snapshot_ids(path, table: TableId) -> list[int]:
    return [r["value"]["after"]["id"] for r in read_json_lines(path)
            if r["value"]["op"] == "r" and r["value"]["source"]["table"] == table.table]


def test_every_execute_snapshot_is_answered_and_a_table_being_read_is_queued_again(mariadb, database, tmp_path):
    rows = 5_000
    table = numbers_table(mariadb, database, rows)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 10})
    engine = EngineThread(config)
    everything = {"data-collections": [f"{database}\\.t"]}
    send_via_table(config, "execute-snapshot", everything, "s1")
    engine.wait_for("IN_PROGRESS")
    send_via_table(config, "pause-snapshot", {}, "p1")
    engine.wait_for("PAUSED")
    reading = engine.capture.progress.current
    assert reading is not None and reading.started and reading.rows_scanned < rows, "s1 is not being read"
    # s1's read is under way: rows it read before s2 may be what s2 wants read again.
    send_via_table(config, "execute-snapshot", everything, "s2")
    # s2's read has not started: it covers s3.
    send_via_table(config, "execute-snapshot", everything, "s3")
    # Another condition is another read.
    send_via_table(config, "execute-snapshot", {**everything, "additional-conditions": [
        {"data-collection": str(table), "filter": "id > 4990"}]}, "s4")
    engine.eventually(lambda: len(fates(engine)) == 4, 60, message="an answer to every request")
    assert fates(engine) == {"s1": ["STARTED"], "s2": ["STARTED"], "s3": ["ALREADY_QUEUED"], "s4": ["STARTED"]}
    covered = next(n for n in engine.notifications if n.type == "ALREADY_QUEUED")
    assert covered.data["data_collection"] == str(table) and "covers this request" in covered.data["reason"]
    # `dblog status` tells the three queued reads of one table apart.
    store = OffsetStore(config.offsets.path)
    engine.eventually(lambda: len(store.load().snapshot["queue"]) == 3, 60, message="the queue committed")
    lines = describe(store.load()).splitlines()
    assert [line.split(",")[0].strip() for line in lines[2:5]] == [f"{table}: paused", f"{table}: queued",
                                                                  f"{table}: queued"]
    assert lines[4].endswith(", where `id` > 4990")
    send_via_table(config, "resume-snapshot", {}, "r1")
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    completed = [n.data["status"] for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert completed == ["SUCCEEDED"] * 3
    ids = snapshot_ids(config.sink.path, table)
    assert sorted(set(ids)) == list(range(1, rows + 1))
    assert len(ids) >= 2 * rows + 10, "s2 did not read the table again"
    result = compare(mariadb, config.sink.path, [table])
    assert result.equal, result.summary()


class ResnapshotAfterAddColumn(JsonLinesSink):
    """The JSON-lines sink asking, as the Iceberg sink does, for an unfiltered re-read of a
    table after ADD COLUMN (the server wrote the column's default into every row without a
    row event)."""

    def schema_changed(self, change, ddl, position):
        base = getattr(super(), "schema_changed", None)
        wanted = list(base(change, ddl, position) or []) if base is not None else []
        if ddl.kind == "add_column":
            wanted += [table for table in ddl.tables if table not in wanted]
        return wanted


def test_a_resnapshot_after_ddl_is_not_swallowed_by_a_filtered_request(mariadb, database, tmp_path):
    table = numbers_table(mariadb, database, 100)
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 10})
    keys = SourceConnection(mariadb.connect)
    try:
        sink = ResnapshotAfterAddColumn(config.sink.path, lambda t: keys.schemas.schema(t).key_columns, config.name)
        engine = EngineThread(config, sink=sink)
        send_via_table(config, "pause-snapshot", {}, "p1")
        engine.wait_for("PAUSED")
        send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.t"], "additional-conditions": [
            {"data-collection": str(table), "filter": "id <= 5"}]}, "filtered")
        engine.eventually(lambda: "filtered" in fates(engine), 60, message="the filtered request queued")
        mariadb.execute(f"ALTER TABLE `{database}`.t ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'new'")
        engine.eventually(lambda: len(fates(engine)) == 2, 20, message="the sink's re-snapshot request answered")
        requests = fates(engine)
        resnapshot = next(request for request in requests if request.startswith("schema-change-"))
        assert requests[resnapshot] == ["STARTED"], "the unfiltered re-read was swallowed by the filtered one"
        send_via_table(config, "resume-snapshot", {}, "r1")
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    finally:
        keys.close()
    rows = [r["value"]["after"] for r in read_json_lines(config.sink.path)
            if r["value"].get("op") == "r" and r["value"]["source"]["table"] == "t"]  # DDL records have no op
    assert {row["id"] for row in rows if row.get("note") == "new"} == set(range(1, 101))
    result = compare(mariadb, config.sink.path, [table])
    assert result.equal, result.summary()


@pytest.mark.parametrize("definition, value, problem", [
    ("INT NOT NULL", "seq DIV 3", "no UNIQUE index"),  # duplicates: paging by it skips rows
    ("INT NULL, UNIQUE (code)", "NULL", "NULLable"),  # NULLs never match a key comparison
])
def test_a_surrogate_key_that_cannot_page_a_table_with_a_primary_key_is_refused(
    mariadb, database, tmp_path, definition, value, problem
):
    db = f"`{database}`"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, ref INT NOT NULL, UNIQUE (ref), code {definition})")
    mariadb.execute(f"INSERT INTO {db}.t SELECT seq, 1000 - seq, {value} FROM mysql.seq_1_to_30")
    table = TableId(database, "t")
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 4})
    engine = EngineThread(config)
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.t"], "surrogate-key": "code"},
                   "bad")
    engine.wait_for("COMPLETED")
    refused = [n.data for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert [(n["status"], n["total_rows_scanned"]) for n in refused] == [("UNKNOWN_SCHEMA", 0)]
    assert problem in refused[0]["reason"] and "surrogate key 'code'" in refused[0]["reason"]
    assert "leave 'surrogate-key' out" in refused[0]["reason"]
    assert snapshot_ids(config.sink.path, table) == []
    # A NOT NULL column with a UNIQUE index of its own pages the table.
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.t"], "surrogate-key": "ref"},
                   "good")
    engine.eventually(lambda: engine.types().count("COMPLETED") == 2, 60, message="the second snapshot")
    engine.until_caught_up()
    statuses = [n.data["status"] for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert statuses == ["UNKNOWN_SCHEMA", "SUCCEEDED"]
    assert sorted(snapshot_ids(config.sink.path, table)) == list(range(1, 31))
    result = compare(mariadb, config.sink.path, [table])
    assert result.equal, result.summary()
