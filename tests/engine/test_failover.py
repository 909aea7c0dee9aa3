"""A failover to a server that lacks transactions dblog delivered (issue 40): dblog reads nothing
from it, chunks included, and stops with one error that says what diverged and the choices;
`dblog check` gives the same verdict. Two private MariaDB servers with one shared history, then
the first one's own transactions that dblog delivers and the second one never has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from support.harness import EngineProcess, config_data

from dblog.core.progress import SnapshotProgress
from dblog.demo.localstack import LocalMariaDB
from dblog.runtime.offset_store import OffsetStore

pytestmark = pytest.mark.server

ROWS = 20_000


def _both(servers, sql: str) -> None:
    for server in servers:
        server.execute(sql)


@pytest.fixture
def primary_and_lagging_replica():
    """`old`, `new`: the same domain 0 and server id 1, the same first transactions (the rows
    with v = 'old'); then `old` alone updates every row to 'new' (what `new` never got)."""
    with LocalMariaDB() as old, LocalMariaDB() as new:
        _both((old, new), "CREATE DATABASE shop")
        _both((old, new), "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10))")
        _both((old, new), f"INSERT INTO shop.t SELECT seq, 'old' FROM shop.seq_1_to_{ROWS}")
        _both((old, new), "CREATE TABLE shop.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                          "data TEXT NULL)")
        assert old.execute("SELECT @@gtid_binlog_pos") == new.execute("SELECT @@gtid_binlog_pos")
        old.execute("UPDATE shop.t SET v = 'new'")
        yield old, new


def _run(data: dict, workdir: Path, *command: str) -> subprocess.CompletedProcess:
    path = workdir / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    return subprocess.run([sys.executable, "-m", "dblog.cli", *command, "--config", str(path)],
                          capture_output=True, text=True, timeout=120)


def _in_flight(offsets) -> bool:
    return SnapshotProgress.from_json(offsets.snapshot).current is not None


def _scanned(offsets) -> int:
    return sum(entry.rows_scanned for entry in SnapshotProgress.from_json(offsets.snapshot).queue)


def _delivered_mid_snapshot(old: LocalMariaDB, tmp_path: Path) -> dict:
    """dblog on `old`, stopped with its snapshot of shop.t in flight."""
    data = config_data(old, "shop", tmp_path, snapshot={"chunk_size": 50})
    engine = EngineProcess(data, tmp_path)
    engine.start()
    try:
        engine.eventually(lambda: (offsets := engine.offsets()) is not None and _scanned(offsets) >= 200,
                          message="a few chunks of shop.t")
    finally:
        engine.terminate()
    return data


def test_no_row_is_written_from_a_server_that_lacks_delivered_transactions(primary_and_lagging_replica, tmp_path):
    old, new = primary_and_lagging_replica
    data = _delivered_mid_snapshot(old, tmp_path)
    sink = Path(data["sink"]["path"])
    written = sink.read_bytes()
    stored = OffsetStore(data["offsets"]["path"]).load()
    assert _in_flight(stored), "the snapshot must still be in flight"
    data["source"]["port"] = new.port  # the failover: dblog's address now reaches the lagging server

    result = _run(data, tmp_path, "run")

    after = sink.read_bytes()
    stale = [line for line in after[len(written):].splitlines() if b'"v":"old"' in line.replace(b" ", b"")]
    assert after == written, f"rows written from the lagging server: {len(stale)} stale ('old') ones"
    assert result.returncode == 1, result.stderr
    message = result.stderr
    missing = old.execute("SELECT @@gtid_binlog_pos")[0][0]
    assert f"lacks transactions dblog already delivered: {missing}" in message, message
    assert f"server_id 1 at 127.0.0.1:{new.port}" in message
    assert "never had" in message
    assert "wait for it to catch up" in message and "point source.host/source.port" in message
    assert 'snapshot.startup = "initial"' in message
    assert "purged" not in message and "Traceback" not in message
    assert OffsetStore(data["offsets"]["path"]).load().position == stored.position  # nothing moved

    check = _run(data, tmp_path, "check")  # the same verdict
    assert check.returncode != 0
    assert f"lacks transactions dblog already delivered: {missing}" in check.stdout + check.stderr


def test_a_new_primary_whose_own_transactions_pass_dblogs_is_refused_by_run_and_check(
        primary_and_lagging_replica, tmp_path):
    """The promoted server writes on as server id 2 until its sequence numbers pass the ones dblog
    delivered: sequence numbers alone would say it holds them; the server itself refuses."""
    old, new = primary_and_lagging_replica
    data = _delivered_mid_snapshot(old, tmp_path)
    sink = Path(data["sink"]["path"])
    written = sink.read_bytes()
    new.execute("SET GLOBAL server_id = 2")
    for row in range(1, 6):
        new.execute(f"UPDATE shop.t SET v = 'n{row}' WHERE id = {row}")
    delivered = OffsetStore(data["offsets"]["path"]).load().position
    assert int(new.execute("SELECT @@gtid_binlog_pos")[0][0].split("-")[2]) > delivered.last("0")
    data["source"]["port"] = new.port

    check = _run(data, tmp_path, "check")
    result = _run(data, tmp_path, "run")

    for output in (check.stdout + check.stderr, result.stderr):
        assert "diverged from the history dblog delivered" in output, output
        assert f"never logged {old.execute('SELECT @@gtid_binlog_pos')[0][0]}" in output
        assert "waiting cannot help" in output and "wait for it to catch up" not in output
    assert check.returncode != 0 and result.returncode == 1
    assert sink.read_bytes() == written


def test_every_new_connection_of_a_running_engine_is_checked_before_use(primary_and_lagging_replica, tmp_path):
    """A failover while dblog runs: the loop's SQL session (chunk reads) and the binlog reader
    connect again through `Engine._connect`; reaching the lagging server, it refuses before the
    connection is used."""
    from dblog.mysql.binlog import SourceDiverged
    from dblog.runtime.config import parse_config
    from dblog.runtime.engine import Engine

    old, new = primary_and_lagging_replica
    data = config_data(old, "shop", tmp_path, snapshot={"startup": "never"})
    engine = Engine(parse_config(data))
    engine.start()
    try:
        engine._connect().close()  # the same server: accepted
        data["source"]["port"] = new.port
        engine.config = parse_config(data)  # the address now reaches the lagging server
        with pytest.raises(SourceDiverged, match="lacks transactions dblog already delivered"):
            engine._connect()
        with pytest.raises(SourceDiverged, match="lacks transactions dblog already delivered"):
            engine._check_binlog_server()
    finally:
        engine.close()


def test_the_reader_process_checks_the_server_before_it_reads_the_binlog_again(primary_and_lagging_replica, tmp_path):
    """The binlog read in a reader process (`source.reader_process`): its reconnects reach the
    lagging server through the same address, and the child refuses it before its dump, with the
    engine's own verdict (the missing GTIDs, the server, the offsets file), not the dump's 1236."""
    from dblog.mysql.binlog import SourceDiverged
    from dblog.mysql.binlog.process import BinlogReaderProcess
    from dblog.runtime.config import parse_config
    from dblog.runtime.engine import Engine
    from lab.tcp_proxy import TcpProxy

    old, new = primary_and_lagging_replica
    with TcpProxy(("127.0.0.1", old.port)) as proxy:
        data = config_data(old, "shop", tmp_path, snapshot={"startup": "never"},
                           source={"port": proxy.port, "reader_process": True, "binlog_reconnects": 5,
                                   "heartbeat_seconds": 0.2})
        engine = Engine(parse_config(data))
        capture = engine.start()
        binlog = engine._open_binlog(capture.position)
        try:
            assert isinstance(binlog, BinlogReaderProcess)
            events = iter(binlog)
            next(events)  # a heartbeat from the old server: the child's dump is open
            proxy.switch(("127.0.0.1", new.port))  # the failover: its dump is cut, the address reaches `new`
            with pytest.raises(SourceDiverged) as refused:
                for _ in events:
                    pass
        finally:
            binlog.close()
            engine.close()
    message = str(refused.value)
    missing = old.execute("SELECT @@gtid_binlog_pos")[0][0]
    assert f"lacks transactions dblog already delivered: {missing}" in message, message
    assert f"server_id 1 at 127.0.0.1:{proxy.port}" in message
    assert str(engine.store.path) in message
