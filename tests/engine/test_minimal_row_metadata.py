"""Servers that log binlog_row_metadata below FULL (issue 39): MySQL's default MINIMAL and
MariaDB's default NO_LOG, on real MariaDB servers started that way (`row_metadata_mariadb`).
Their table maps carry no column names, keys nor ENUM/SET members; dblog decodes their rows with
its schema history (dblog.mysql.binlog.nameless_maps). Before issue 39 dblog refused to start
on them ("binlog_row_metadata is MINIMAL ... Set binlog_row_metadata=FULL"), so each test here
failed at its first engine start or its first rows event."""

from __future__ import annotations

import uuid

import pytest
from support import next_server_id
from support.column_change_backlog import decode_a_column_change_backlog
from support.every_type import COLUMNS, ROWS, UPDATES, insert_sql
from support.harness import EngineProcess, compare, config_data

from dblog.core.events import RowChange, TableId, TransactionEnd
from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.binlog import BinlogSource
from dblog.mysql.binlog.source import BinlogUndecodable
from dblog.mysql.source_connection import SourceConnection
from dblog.mysql.table_definitions import TableDefinitions
from dblog.mysql.table_history import TableHistory

pytestmark = pytest.mark.timeout(300)

LEVELS = ["MINIMAL", "NO_LOG"]


def _database(server) -> str:
    name = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{name}`")
    return name


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("reader_process", [False, True], ids=["in_process", "reader_process"])
def test_a_backlog_across_add_drop_rename_and_modify_is_decoded_with_the_definitions_of_its_time(
        row_metadata_mariadb, tmp_path, level, reader_process):
    """dblog stopped; rows written between ADD, RENAME, DROP and MODIFY COLUMN; dblog started:
    each row comes out with the names and types of its moment (the table maps say none of them)."""
    decode_a_column_change_backlog(row_metadata_mariadb(level), tmp_path, reader_process=reader_process)


def _every_type_changes(server, level_name: str, columns: str = COLUMNS, rows: dict = ROWS,
                        updates: dict = UPDATES) -> list[tuple]:
    """The every-type table's inserts and updates on `server`, as its binlog decodes them (a
    schema history seeded where the stream starts, as the engine seeds it)."""
    database = _database(server)
    table = TableId(database, "every_type")
    name = f"`{database}`.`every_type`"
    reader = SourceConnection(server.connect)
    writer = server.connect(database)
    try:
        with writer.cursor() as cursor:
            cursor.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")  # zero and invalid dates, clamped floats
            cursor.execute("SET time_zone = '+00:00'")
            cursor.execute(f"CREATE TABLE {name} ({columns})")
            start = reader.server.executed_gtids()
            history = TableHistory(TableDefinitions(reader.schemas.session.run), reader.server.executed_gtids,
                                   lambda t: t == table)
            history.seed([table])
            for row_id, literals in rows.items():
                cursor.execute(insert_sql(name, row_id, literals))
            for row_id, literals in updates.items():
                assignments = ", ".join(f"{column} = {literal}" for column, literal in literals.items())
                cursor.execute(f"UPDATE {name} SET {assignments} WHERE id = {row_id}")
            cursor.execute(f"DELETE FROM {name} WHERE id = 1")
        end = reader.server.executed_gtids()
        source = BinlogSource(server.connection_settings, next_server_id(), start, reader.schemas.schema,
                              lambda t: t == table, 0.5, history=history)
        changes = []
        try:
            for event in source:
                if isinstance(event, RowChange):
                    changes.append((event.op, event.key, event.before, event.after))
                elif isinstance(event, TransactionEnd) and end.issubset(source.position):
                    break
        finally:
            source.close()
        assert changes, f"no row changes read on the {level_name} server"
        return changes
    finally:
        writer.close()
        reader.close()
        server.execute(f"DROP DATABASE IF EXISTS `{database}`")


@pytest.mark.parametrize("level", LEVELS)
def test_every_column_type_decodes_as_on_a_full_server(row_metadata_mariadb, level):
    """Every MariaDB column type (tests/support/every_type.py): the same statements on a FULL
    server (a private one: on the run's server Debezium's embedded reference would parse these
    tables, and refuses some) and on one logging `level` give the same changes, value for value."""
    full = _every_type_changes(row_metadata_mariadb("FULL"), "FULL")
    assert len(full) == len(ROWS) + len(UPDATES) + 1
    assert _every_type_changes(row_metadata_mariadb(level), level) == full


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


@pytest.mark.parametrize("level", LEVELS)
def test_long_unique_hash_and_invisible_columns_decode_as_on_a_full_server(row_metadata_mariadb, level):
    """MariaDB's UNIQUE over BLOB/TEXT is enforced by a hidden `DB_ROW_HASH_<n>` column that the
    binlog logs and information_schema (so the history) does not list; INVISIBLE columns are
    listed by both. Decoded as on a FULL server, which names the hash columns."""
    columns = ("id INT PRIMARY KEY, b BLOB, inv INT INVISIBLE DEFAULT 5, c TEXT, s VARCHAR(10), UNIQUE(b), "
               "UNIQUE(c(2000))")
    rows = {1: dict(b="'x'", c="'y'", s="'z'"), 2: dict(b="NULL", s="'w'")}
    updates = {2: dict(b="'q'", inv="9")}
    full = _every_type_changes(row_metadata_mariadb("FULL"), "FULL", columns, rows, updates)
    assert any("DB_ROW_HASH_2" in (change[3] or {}) for change in full)
    assert _every_type_changes(row_metadata_mariadb(level), level, columns, rows, updates) == full


def test_kill_9_under_writers_loses_nothing(row_metadata_mariadb, tmp_path):
    """The equality check of the FULL-server crash tests (tests/engine/test_faults.py), on a
    MINIMAL server: `dblog run` killed with SIGKILL under writers, mid-snapshot and streaming,
    restarted from its offsets (and the schema history saved with them); the sink equals the
    tables."""
    server = row_metadata_mariadb("MINIMAL")
    database = _database(server)
    rows = 3_000
    with server.connect() as connection:
        load(connection, database, rows, seed=3)
    data = config_data(server, database, tmp_path, snapshot={"chunk_size": 200})
    engine = EngineProcess(data, tmp_path)
    workload = WriteLoad(server.connect, database, rows, writers=2, seed=4, rate=200).start()
    try:
        engine.start()
        engine.wait_until(lambda offsets: offsets.position is not None)
        server.execute(f"ALTER TABLE `{database}`.orders ADD COLUMN extra VARCHAR(10) NULL")
        altered = GtidSet.parse(server.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
        engine.wait_until(lambda offsets: altered.issubset(offsets.position))  # saved with the moved history
        engine.kill()
        engine.start()
        engine.wait_until(lambda offsets: offsets.position is not None)
        engine.kill()
        engine.start()
    finally:
        workload.stop()
    try:
        target = GtidSet.parse(server.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
        engine.wait_until(lambda offsets: target.issubset(offsets.position) and _snapshot_done(offsets), timeout=300)
    finally:
        engine.terminate()
    result = compare(server, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()


@pytest.mark.parametrize("level", LEVELS)
def test_a_history_that_does_not_describe_the_rows_stops_the_stream_naming_table_and_column(
        row_metadata_mariadb, level):
    """A change the binlog does not hold (`sql_log_bin = 0`: the ALTER is not logged, so no
    history can know it) leaves the history describing `amount` as DECIMAL(10,2) while the rows
    carry DECIMAL(12,4): the source stops, naming the table and the column, instead of decoding
    the rows with the wrong definition."""
    server = row_metadata_mariadb(level)
    database = _database(server)
    table = TableId(database, "t")
    server.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    reader = SourceConnection(server.connect)
    try:
        start = reader.server.executed_gtids()
        history = TableHistory(TableDefinitions(reader.schemas.session.run), reader.server.executed_gtids,
                               lambda t: t == table)
        history.seed([table])
        with server.connect(database) as writer, writer.cursor() as cursor:
            cursor.execute("SET SESSION sql_log_bin = 0")
            cursor.execute("ALTER TABLE t MODIFY amount DECIMAL(12,4)")
            cursor.execute("SET SESSION sql_log_bin = 1")
            cursor.execute("INSERT INTO t VALUES (1, 1.5)")
            writer.commit()
        source = BinlogSource(server.connection_settings, next_server_id(), start, reader.schemas.schema,
                              lambda t: t == table, 0.5, history=history)
        try:
            with pytest.raises(BinlogUndecodable) as raised:
                for event in source:
                    assert not isinstance(event, RowChange), f"decoded with a wrong definition: {event}"
        finally:
            source.close()
    finally:
        reader.close()
    message = str(raised.value)
    assert f"{database}.t" in message and "amount decimal(10,2)" in message and "FULL" in message, message


@pytest.mark.parametrize("level", LEVELS)
def test_dblog_check_accepts_the_server_and_says_rows_decode_from_the_schema_history(
        row_metadata_mariadb, tmp_path, level):
    from dblog.runtime.config import parse_config
    from dblog.runtime.preflight import run_checks

    server = row_metadata_mariadb(level)
    database = _database(server)
    server.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    results = {result.check: result for result in run_checks(parse_config(config_data(server, database, tmp_path)))}
    metadata = results["binlog_row_metadata"]
    assert metadata.status == "ok" and level in metadata.detail and "schema history" in metadata.detail, metadata
