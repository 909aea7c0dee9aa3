"""What a chunk's SELECT sees, against what the binlog reader has already read (dblog.core.visibility).

MariaDB writes a commit to the binlog, and sends it to readers, before InnoDB makes it visible.
These tests drive the real chain: a binlog reader consuming full-speed writers' commits, and
`ServerSession.wait_until_visible` on the commit coordinates it yields, after which a SELECT must
see every commit the reader has passed."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import eventually

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.events import RowChange, TableId, TransactionEnd
from dblog.core.gtid import Gtid
from dblog.core.visibility import BinlogCoordinate, OtherServersBinlog
from dblog.mysql.chunk_reader import ChunkRequest

files = st.integers(1, 999_999)
offsets = st.integers(4, 2**40)


@given(files, offsets, files, offsets)
def test_coordinates_order_by_file_sequence_then_offset(file_a, pos_a, file_b, pos_b):
    a = BinlogCoordinate.of(f"binlog.{file_a:06d}", pos_a)
    b = BinlogCoordinate.of(f"./data/binlog.{file_b:06d}", str(pos_b))
    assert (a < b) == ((file_a, pos_a) < (file_b, pos_b))
    assert (a == b) == ((file_a, pos_a) == (file_b, pos_b))


def test_coordinates_of_different_servers_binlogs_are_not_ordered():
    """After a failover the reader's last coordinate is a place in the old server's binlog: the
    new server's read views are never compared with it (they would wait for a file that may never
    exist there, or pass a place that holds other transactions)."""
    old = BinlogCoordinate.of("mariadb-bin.000009", 5000, BinlogIdentity(1, host="db-1", port=3306))
    new = BinlogCoordinate.of("mariadb-bin.000002", 400, BinlogIdentity(2, host="db-2", port=3306))
    for compare in (lambda: old < new, lambda: old <= new, lambda: old > new, lambda: old >= new):
        with pytest.raises(OtherServersBinlog, match="different servers' binlogs"):
            compare()
    assert not old.same_binlog(new)
    assert old != BinlogCoordinate.of("mariadb-bin.000009", 5000, BinlogIdentity(2, host="db-2", port=3306))
    # one server's coordinates order as before, and a coordinate of no known server orders with any
    assert new < BinlogCoordinate.of("mariadb-bin.000003", 4, BinlogIdentity(2, host="db-2", port=3306))
    assert old > BinlogCoordinate.of("mariadb-bin.000002", 400) and new.same_binlog(BinlogCoordinate.of("b.000001", 4))


def test_coordinates_name_their_file():
    coordinate = BinlogCoordinate.of("/var/lib/mysql/mariadb-bin.000012", 4711)
    assert str(coordinate) == "mariadb-bin.000012:4711"
    for bad in ("binlog", "binlog.", "binlog.0001a", ".000001"):
        with pytest.raises(ValueError, match="sequence number"):
            BinlogCoordinate.of(bad, 4)


@contextmanager
def semi_sync_after_sync(mariadb, hold_ms: int):
    """Semi-sync with wait point AFTER_SYNC and no replica: the next commit is written to the
    binlog (and sent to binlog readers), then waits `hold_ms` for an ACK that never comes
    before InnoDB makes it visible."""
    names = ("rpl_semi_sync_master_timeout", "rpl_semi_sync_master_wait_point",
             "rpl_semi_sync_master_wait_no_slave", "rpl_semi_sync_master_enabled")
    rows = mariadb.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s, %s, %s, %s)", names)
    saved = {str(name): str(value) for name, value in rows}
    assert set(saved) == set(names), f"semi-sync is not built into this server: {saved}"
    mariadb.execute(f"SET GLOBAL rpl_semi_sync_master_timeout = {hold_ms}")
    mariadb.execute("SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC")
    mariadb.execute("SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON")  # wait although no replica is there
    mariadb.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")
    try:
        yield
    finally:
        for name in reversed(names):  # `enabled` first: the others apply to no commit meanwhile
            value = saved[name]
            assert value.replace("_", "").isalnum(), value  # a number or a keyword: spliced as is
            mariadb.execute(f"SET GLOBAL {name} = {value}")


def held_back(mariadb, database: str, sql: str) -> threading.Thread:
    """Run `sql` in its own connection and thread (its commit may wait for the ACK)."""
    def run() -> None:
        with mariadb.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute(sql)
            connection.commit()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_wait_until_visible_waits_for_a_commit_the_reader_got_before_selects_see_it(
    mariadb, database, source_connection, open_binlog, binlog_reader
):
    mariadb.execute(f"CREATE TABLE `{database}`.counters (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.counters VALUES (0, 0)")
    table = TableId(database, "counters")
    schema = source_connection.schemas.schema(table)
    start = source_connection.server.executed_gtids()
    source = open_binlog(start, table_filter=lambda t: t == table)

    def counter() -> int:
        return source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 10))[0]["v"]

    with semi_sync_after_sync(mariadb, hold_ms=4000):
        writer = held_back(mariadb, database, "UPDATE counters SET v = 1")
        events = binlog_reader(source, lambda event, seen: isinstance(event, TransactionEnd)
                               and any(isinstance(e, RowChange) for e in seen))
        commit = events[-1].commit
        assert commit is not None
        assert counter() == 0, "the reader should have the commit before a SELECT can see it"
        source_connection.server.wait_until_visible(source.position, commit, timeout=30)
        assert counter() == 1
        writer.join()


def test_a_coordinate_of_another_servers_binlog_waits_for_the_gtids_here(
    mariadb, database, source_connection, open_binlog, binlog_reader
):
    """After a failover the capture's `must_see` is the old server's commit coordinate (here a file
    this server never reaches). The wait no longer compares it with this server's read views (it
    timed out with VisibilityTimeout): it waits until this server has logged the reader's GTID
    position and its read views see it, a commit held back by semi-sync included."""
    from dblog.mysql.server_session import VisibilityTimeout

    mariadb.execute(f"CREATE TABLE `{database}`.counters (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.counters VALUES (0, 0)")
    table = TableId(database, "counters")
    schema = source_connection.schemas.schema(table)
    server = source_connection.server
    elsewhere = BinlogCoordinate.of("mariadb-bin.000999", 4, BinlogIdentity(77, host="the-old-primary", port=3306))
    assert not server.binlog_end().same_binlog(elsewhere)
    assert server.wait_until_visible(server.executed_gtids(), elsewhere, timeout=5) is not None

    source = open_binlog(server.executed_gtids(), table_filter=lambda t: t == table)
    with semi_sync_after_sync(mariadb, hold_ms=4000):
        writer = held_back(mariadb, database, "UPDATE counters SET v = 1")
        events = binlog_reader(source, lambda event, seen: isinstance(event, TransactionEnd)
                               and any(isinstance(e, RowChange) for e in seen))
        assert events[-1].commit.server == server.binlog_end().server  # the reader's and the session's: one server
        read = lambda: source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 10))[0]["v"]  # noqa: E731
        assert read() == 0, "the reader should have the commit before a SELECT can see it"
        server.wait_until_visible(source.position, elsewhere, timeout=30)
        assert read() == 1
        writer.join()

    # a position this server has not logged (a lagging server behind the address): no read yet
    ahead = source.position.with_gtid(Gtid("0", source.position.last("0") + 5, server_id=1))
    with pytest.raises(VisibilityTimeout, match="not yet all the binlog reader read"):
        server.wait_until_visible(ahead, elsewhere, timeout=1)


def test_the_binlog_end_is_where_a_quiet_servers_read_views_end(mariadb, database, source_connection):
    mariadb.execute(f"CREATE TABLE `{database}`.counters (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.counters VALUES (0, 0)")
    end = source_connection.server.binlog_end()
    # DDL, a binlog rotation and non-transactional tables move a read view's coordinate too
    # (checked here once: otherwise a chunk would wait for a commit that never comes).
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(f"CREATE TABLE `{database}`.m (id INT PRIMARY KEY) ENGINE=MyISAM")
    mariadb.execute(f"INSERT INTO `{database}`.m VALUES (1)")
    later_end = source_connection.server.binlog_end()
    assert later_end > end
    assert source_connection.server.visible_coordinate() == later_end
    source_connection.server.wait_until_visible(source_connection.server.executed_gtids(), later_end, timeout=5)


@pytest.mark.parametrize("startup", ["initial", "never"])
def test_engine_resurrects_no_row_whose_delete_the_reader_got_before_selects_could_see_it(
    mariadb, database, tmp_path, startup
):
    """Under semi-sync AFTER_SYNC a delete sits in the binlog for seconds before InnoDB makes it
    visible. The engine starts meanwhile: its start position must not include the delete
    (`initial`: the first chunk is read at once). With `never`, it reads the delete and then a
    snapshot signal committed behind it before either is visible: the chunk's SELECT must wait
    until they are, or it would emit the deleted row after the delete."""
    from support.harness import EngineThread, compare, make_config

    from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table

    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES " + ",".join(f"({n}, 0)" for n in range(1, 51)))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": startup, "chunk_size": 10})
    table = TableId(database, "t")
    before = mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
    with semi_sync_after_sync(mariadb, hold_ms=5000):
        deleter = held_back(mariadb, database, "DELETE FROM t WHERE id = 7")
        eventually(lambda: mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0] != before, interval=0.01,
                   message="the held-back transaction in the binlog")
        assert mariadb.execute(f"SELECT COUNT(*) FROM `{database}`.t WHERE id = 7")[0][0] == 1, (
            "the delete should be in the binlog and not visible yet")
        engine = EngineThread(config)
        if startup == "never":
            send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.t"]}, "snapshot-1")
        engine.wait_for("COMPLETED", timeout=60)
        deleter.join()
    engine.until_caught_up()
    result = compare(mariadb, tmp_path / "changes.jsonl", [table])
    assert result.equal, result.summary()


def test_the_max_key_read_sees_a_new_largest_key_the_start_position_holds(mariadb, database, tmp_path):
    """A first start while one transaction, held back by semi-sync AFTER_SYNC, inserts the
    largest key of one table and the only row of another: the start position holds it, so the
    stream never emits it; the snapshot must. Without the max-key read's visibility wait, `t`'s
    maximum key lies below the new row and `only_new` ends EMPTY."""
    from support.harness import EngineThread, compare, make_config

    from dblog.runtime.signal_client import SIGNAL_TABLE_DDL

    db = f"`{database}`"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"CREATE TABLE {db}.only_new (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO {db}.t VALUES " + ",".join(f"({n}, 0)" for n in range(1, 21)))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "initial", "chunk_size": 50})
    before = mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0]

    def insert_both() -> None:
        with mariadb.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("INSERT INTO t VALUES (1000, 1)")
            cursor.execute("INSERT INTO only_new VALUES (1, 1)")
            connection.commit()

    with semi_sync_after_sync(mariadb, hold_ms=2000):
        inserter = threading.Thread(target=insert_both)
        inserter.start()
        eventually(lambda: mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0] != before, interval=0.01,
                   message="the held-back transaction in the binlog")
        assert mariadb.execute(f"SELECT COUNT(*) FROM {db}.only_new")[0][0] == 0, (
            "the insert should be in the binlog and not visible yet")
        engine = EngineThread(config)
        engine.wait_for("COMPLETED", timeout=60)
        inserter.join()
    engine.until_caught_up()
    statuses = {n.data["data_collection"]: n.data["status"] for n in engine.notifications
                if n.type == "TABLE_SCAN_COMPLETED"}
    assert statuses == {f"{database}.t": "SUCCEEDED", f"{database}.only_new": "SUCCEEDED"}
    result = compare(mariadb, tmp_path / "changes.jsonl", [TableId(database, "t"), TableId(database, "only_new")])
    assert result.equal, result.summary()
