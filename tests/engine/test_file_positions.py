"""Capture without GTIDs (issue 39): binlog file-and-position offsets (dblog.core.file_positions)
and signal-table watermarks, on real MariaDB servers started with gtid_strict_mode=OFF (a MariaDB
replicated by file and position; `file_position_mariadb`), read with source.position_mode =
"file", as dblog reads a MySQL server with gtid_mode OFF. Before issue 39 dblog refused such a
server ("gtid_strict_mode is OFF ... Set SET GLOBAL gtid_strict_mode=ON"), and knew no
source.position_mode: each test here failed at its first engine start."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from support import next_server_id
from support.column_change_backlog import decode_a_column_change_backlog
from support.fixtures.mariadb import purge_binlogs_before_the_newest
from support.harness import EngineProcess, EngineThread, compare, config_data, make_config, position_taken

from dblog.core.events import TableId
from dblog.core.file_positions import FilePosition
from dblog.core.progress import SnapshotProgress
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.binlog import BinlogPurged, SourceDiverged
from dblog.runtime.config import ConfigError
from dblog.runtime.engine import Engine
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)

FILE_MODE = {"position_mode": "file"}


def _database(server) -> str:
    name = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{name}`")
    return name


def _binlog_end(server) -> FilePosition:
    file, pos = server.execute("SHOW MASTER STATUS")[0][:2]
    return FilePosition(file, int(pos))


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def _streamed(path) -> list[tuple]:
    """(file, pos, row) of every streamed (not snapshot) record."""
    return [(r["value"]["source"]["file"], r["value"]["source"]["pos"], r["value"]["source"]["row"])
            for r in read_json_lines(path) if "op" in r["value"] and r["value"]["op"] != "r"]


def test_kill_9_under_writers_mid_snapshot_and_streaming_loses_nothing(file_position_mariadb, tmp_path):
    """`dblog run` in file-position mode, its start-up snapshot read with signal-table watermarks
    (chosen by itself: snapshot.watermarks is left at "gtid"), killed with SIGKILL under writers
    and restarted from its file-position offsets: the sink equals the tables."""
    server = file_position_mariadb()
    database = _database(server)
    rows = 3_000
    with server.connect() as connection:
        load(connection, database, rows, seed=3)
    data = config_data(server, database, tmp_path, snapshot={"chunk_size": 200}, source=FILE_MODE)
    engine = EngineProcess(data, tmp_path, log_level="info")
    workload = WriteLoad(server.connect, database, rows, writers=2, seed=4, rate=200).start()
    try:
        engine.start()
        engine.wait_until(lambda offsets: offsets.binlog is not None)
        engine.kill()
        engine.start()
        engine.wait_until(lambda offsets: SnapshotProgress.from_json(offsets.snapshot).completed_tables)
        engine.kill()
        engine.start()
    finally:
        workload.stop()
    try:
        target = _binlog_end(server).position()
        engine.wait_until(lambda offsets: target.issubset(offsets.position) and _snapshot_done(offsets), timeout=300)
    finally:
        engine.terminate()
    result = compare(server, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    document = json.loads((tmp_path / "offsets.json").read_text())
    assert document["position_mode"] == "file" and document["server_id"] == 1 and "gtid_position" not in document
    log = (tmp_path / "engine.log").read_text()
    assert "signal-table watermarks" in log and "binlog positions: file and offset" in log
    # the windows' markers came back through the binlog (the signal table saw them)
    assert server.execute(f"SELECT COUNT(*) FROM `{database}`.dblog_signal WHERE type = 'snapshot-window-open'")[0][0]


@pytest.mark.parametrize("reader_process", [False, True], ids=["in_process", "reader_process"])
def test_a_restart_resumes_at_the_saved_file_position_with_nothing_lost_or_repeated(
        file_position_mariadb, tmp_path, reader_process):
    server = file_position_mariadb()
    database = _database(server)
    server.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    server.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data TEXT NULL)")
    source = {**FILE_MODE, "reader_process": reader_process}
    config = make_config(server, database, tmp_path, snapshot={"startup": "never"}, source=source)
    engine = EngineThread(config)
    for key in range(1, 51):
        server.execute(f"INSERT INTO `{database}`.t VALUES ({key}, {key})")
    engine.until_caught_up()
    saved = json.loads((tmp_path / "offsets.json").read_text())
    assert (saved["binlog_file"], saved["binlog_pos"]) == (_binlog_end(server).file, _binlog_end(server).pos)
    for key in range(1, 51):  # while dblog is stopped
        server.execute(f"UPDATE `{database}`.t SET v = v + 1 WHERE id = {key}")
    server.execute("FLUSH BINARY LOGS")  # and a rotation on the way
    server.execute(f"DELETE FROM `{database}`.t WHERE id <= 10")
    engine = EngineThread(make_config(server, database, tmp_path, snapshot={"startup": "never"}, source=source))
    engine.until_caught_up()
    result = compare(server, tmp_path / "changes.jsonl", [TableId(database, "t")])
    assert result.equal, result.summary()
    streamed = _streamed(tmp_path / "changes.jsonl")
    assert len(streamed) == 50 + 50 + 10 and not [at for at, n in Counter(streamed).items() if n > 1]
    assert all(r["value"]["source"]["gtid"] is None for r in read_json_lines(tmp_path / "changes.jsonl")
               if "op" in r["value"])


def test_a_backlog_across_add_drop_rename_and_modify_column(file_position_mariadb, tmp_path):
    records = decode_a_column_change_backlog(file_position_mariadb(), tmp_path, **FILE_MODE)
    statements = [value for value in records if "ddl" in value]
    assert len(statements) == 4 and all(value["source"]["gtid"] is None for value in statements)  # no GTID named


def test_an_execute_snapshot_signal_reads_the_table_with_signal_table_watermarks(file_position_mariadb, tmp_path):
    server = file_position_mariadb()
    database = _database(server)
    with server.connect() as connection:
        load(connection, database, 1_000, seed=5)
    config = make_config(server, database, tmp_path, snapshot={"startup": "never", "chunk_size": 100},
                         source=FILE_MODE)
    engine = EngineThread(config)
    workload = WriteLoad(server.connect, database, 1_000, writers=2, seed=6, rate=100).start()
    try:
        server.execute(f"INSERT INTO `{database}`.dblog_signal VALUES ('s1', 'execute-snapshot', "
                       f"'{{\"data-collections\": [\"{database}\\\\\\\\..*\"], \"type\": \"incremental\"}}')")
        engine.wait_for("COMPLETED", timeout=180)
    finally:
        workload.stop()
    engine.until_caught_up()
    result = compare(server, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    assert engine.engine.snapshot_reads.watermark_mode.name == "insert_insert"


def test_gtid_watermarks_without_a_signal_table_are_refused_with_the_remedy(file_position_mariadb, tmp_path):
    server = file_position_mariadb()
    database = _database(server)
    data = config_data(server, database, tmp_path, source=FILE_MODE)
    del data["signals"]
    from dblog.runtime.config import parse_config

    with pytest.raises(ConfigError, match=r"needs GTIDs\. Set signals\.table"):
        Engine(parse_config(data)).start()


def test_a_server_without_gtid_strict_mode_is_still_refused_in_gtid_mode(file_position_mariadb, tmp_path):
    server = file_position_mariadb()
    database = _database(server)
    with pytest.raises(ConfigError, match='gtid_strict_mode is OFF.*source.position_mode = "file"'):
        Engine(make_config(server, database, tmp_path)).start()  # auto on MariaDB: GTIDs


def test_a_purged_binlog_file_is_refused_with_the_remedy(file_position_mariadb, tmp_path):
    server = file_position_mariadb()
    database = _database(server)
    server.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    config = make_config(server, database, tmp_path, snapshot={"startup": "never"}, source=FILE_MODE)
    position_taken(config)
    server.execute(f"INSERT INTO `{database}`.t VALUES (1)")  # lost to dblog
    purge_binlogs_before_the_newest(server)
    engine = Engine(make_config(server, database, tmp_path, snapshot={"startup": "never"}, source=FILE_MODE))
    try:
        with pytest.raises(BinlogPurged, match=r"were purged.*Remedy: move the offsets file away"):
            engine.start()
    finally:
        engine.close()


def test_another_server_is_refused_with_the_choices(file_position_mariadb, tmp_path):
    first, other = file_position_mariadb(), file_position_mariadb(2)
    database = _database(first)
    other.execute(f"CREATE DATABASE `{database}`")
    config = make_config(first, database, tmp_path, snapshot={"startup": "never"}, source=FILE_MODE)
    position_taken(config)
    moved = config_data(other, database, tmp_path, snapshot={"startup": "never"}, source=FILE_MODE)
    from dblog.runtime.config import parse_config

    engine = Engine(parse_config(moved))
    try:
        with pytest.raises(SourceDiverged, match=r"server_id 1.*mean nothing on another server.*Choices: point "):
            engine.start()
    finally:
        engine.close()


def test_dblog_check_says_which_position_mode_the_server_allows_and_which_dblog_uses(file_position_mariadb, tmp_path):
    from dblog.runtime.config import parse_config
    from dblog.runtime.preflight import run_checks

    server = file_position_mariadb()
    database = _database(server)
    server.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data TEXT NULL)")
    data = config_data(server, database, tmp_path, snapshot={"startup": "never"}, source=FILE_MODE)
    position_taken(parse_config(data))

    def checks(data):
        return {result.check: result for result in run_checks(parse_config(data), spark=False)}

    found = checks(data)
    line = found["position mode"]
    assert line.status == "ok", line
    assert "dblog uses binlog file and position" in line.detail and "the server allows binlog file and position" \
        in line.detail and 'snapshot.watermarks = "insert_insert"' in line.detail
    assert found["gtid_strict_mode"].status == "ok"  # not needed by file positions
    assert found["binlog position"].status == "ok" and "binlog.0" in found["binlog position"].detail
    assert found["INSERT on the signal table"].status == "ok"  # the watermarks' rows
    auto = checks({**data, "source": {**data["source"], "position_mode": "auto"}})  # MariaDB's auto: GTIDs
    assert auto["position mode"].status == "fail" and auto["gtid_strict_mode"].status == "fail"
    assert "holds a file position" in auto["binlog position"].detail


def test_blocking_start_up_reads_and_a_keyless_table_take_the_coordinate_as_their_position(
        file_position_mariadb, tmp_path):
    """A consistent snapshot's binlog coordinate is the position itself in file-position mode
    (GTID mode asks the server for BINLOG_GTID_POS of it): the blocking start-up read and the
    whole read of a table without a key, under writers."""
    server = file_position_mariadb()
    database = _database(server)
    with server.connect() as connection:
        load(connection, database, 1_000, seed=8)
    server.execute(f"CREATE TABLE `{database}`.plain (uid INT NOT NULL, v VARCHAR(20))")
    server.execute(f"INSERT INTO `{database}`.plain VALUES " + ", ".join(f"({n}, 'v{n}')" for n in range(1, 41)))
    workload = WriteLoad(server.connect, database, 1_000, writers=2, seed=9, rate=100).start()
    try:
        engine = EngineThread(make_config(server, database, tmp_path, source=FILE_MODE,
                                          snapshot={"startup_reads": "blocking", "chunk_size": 200}))
        engine.eventually(lambda: _snapshot_done_capture(engine), 180, message="the start-up snapshot")
    finally:
        workload.stop()
    engine.until_caught_up()
    result = compare(server, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    plain = [r for r in read_json_lines(tmp_path / "changes.jsonl")
             if "op" in r["value"] and r["value"]["source"]["table"] == "plain"]
    assert sorted(r["value"]["after"]["uid"] for r in plain) == list(range(1, 41))


def _snapshot_done_capture(engine) -> bool:
    progress = engine.capture.progress
    return progress.current is None and not progress.queue and bool(progress.completed_tables)
