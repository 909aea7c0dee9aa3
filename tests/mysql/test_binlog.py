"""BinlogSource against a real MariaDB: transaction framing, keys, DDL, heartbeats, and
exactly-once delivery across killed connections."""

from __future__ import annotations

import time

import pytest

from dblog.core.events import Heartbeat, RowChange, SchemaChange, TableId, TransactionEnd, TransactionStart
from dblog.mysql.chunk_reader import ChunkRequest

pytestmark = pytest.mark.timeout(120)


def _until_position(source, target):
    """Stop condition: every transaction of `target` has been delivered."""
    return lambda event, _: isinstance(event, TransactionEnd) and target.issubset(source.position)


def _dump_thread_ids(mariadb) -> list[int]:
    return [row[0] for row in mariadb.execute("SHOW PROCESSLIST") if row[4] == "Binlog Dump"]


@pytest.fixture
def items(mariadb, database):
    mariadb.execute(f"CREATE TABLE `{database}`.`items` (id INT PRIMARY KEY, name VARCHAR(50))")
    mariadb.execute(f"CREATE TABLE `{database}`.`other` (id INT PRIMARY KEY)")
    return TableId(database, "items")


def test_starts_after_the_given_position(mariadb, database, items, source_connection, open_binlog, binlog_reader):
    mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1, 'before')")
    start = source_connection.server.executed_gtids()
    mariadb.execute(f"INSERT INTO `{database}`.items VALUES (2, 'after')")
    mariadb.execute(f"INSERT INTO `{database}`.items VALUES (3, 'after')")
    end = source_connection.server.executed_gtids()

    source = open_binlog(start, table_filter=lambda table: table == items)
    events = binlog_reader(source, _until_position(source, end))
    starts = [event for event in events if isinstance(event, TransactionStart)]
    assert all(event.gtid not in start for event in starts)
    assert len(starts) == 2
    changes = [event for event in events if isinstance(event, RowChange)]
    assert [(change.op, change.key, change.after) for change in changes] == [
        ("c", (2,), {"id": 2, "name": "after"}),
        ("c", (3,), {"id": 3, "name": "after"}),
    ]
    assert source.position == end


def test_a_transaction_is_start_rows_end(mariadb, database, items, source_connection, open_binlog, binlog_reader):
    start = source_connection.server.executed_gtids()
    conn = mariadb.connect(database)
    with conn.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        cursor.execute("INSERT INTO other VALUES (1)")  # not accepted by the filter
        cursor.execute("UPDATE items SET name = 'bb' WHERE id = 2")
        cursor.execute("DELETE FROM items WHERE id = 3")
        cursor.execute("COMMIT")
        cursor.execute("INSERT INTO other VALUES (2)")  # a transaction with no accepted table
    conn.close()
    end = source_connection.server.executed_gtids()

    source = open_binlog(start, table_filter=lambda table: table == items)
    events = binlog_reader(source, _until_position(source, end))
    assert [type(event).__name__ for event in events] == [
        "TransactionStart", "RowChange", "RowChange", "RowChange", "RowChange", "RowChange", "TransactionEnd",
        "TransactionStart", "TransactionEnd",
    ]
    gtid = events[0].gtid
    assert events[6].gtid == gtid and events[7].gtid != gtid and events[8].gtid == events[7].gtid
    changes = events[1:6]
    assert [(c.op, c.key) for c in changes] == [("c", (1,)), ("c", (2,)), ("c", (3,)), ("u", (2,)), ("d", (3,))]
    assert [c.source.row for c in changes[:3]] == [0, 1, 2]  # position within the rows event
    assert all(c.source.gtid == str(gtid) and c.source.file.startswith("binlog.") for c in changes)
    assert all(c.table == items and c.source.server_id == 1 and c.source.ts_ms > 0 for c in changes)
    assert changes[3].before == {"id": 2, "name": "b"} and changes[3].after == {"id": 2, "name": "bb"}
    assert changes[3].before_key is None
    assert changes[4].before == {"id": 3, "name": "c"} and changes[4].after is None
    assert events[0].server_id == 1 and events[0].file.startswith("binlog.") and events[0].pos > 0


def test_an_update_of_the_key_sets_before_key(mariadb, database, items, source_connection, open_binlog, binlog_reader):
    mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1, 'a')")
    start = source_connection.server.executed_gtids()
    mariadb.execute(f"UPDATE `{database}`.items SET id = 10 WHERE id = 1")
    end = source_connection.server.executed_gtids()

    source = open_binlog(start)
    changes = [e for e in binlog_reader(source, _until_position(source, end)) if isinstance(e, RowChange)]
    assert len(changes) == 1
    assert changes[0].op == "u" and changes[0].key == (10,) and changes[0].before_key == (1,)


def test_ddl_is_a_schema_change_in_its_own_transaction(mariadb, database, items, source_connection, open_binlog, binlog_reader):
    start = source_connection.server.executed_gtids()
    conn = mariadb.connect(database)
    with conn.cursor() as cursor:
        cursor.execute("ALTER TABLE items ADD COLUMN price DECIMAL(8,2)")
    conn.close()
    end = source_connection.server.executed_gtids()

    source = open_binlog(start)
    events = binlog_reader(source, _until_position(source, end))
    assert [type(event) for event in events] == [TransactionStart, SchemaChange, TransactionEnd]
    assert events[1].db == database
    assert events[1].sql == "ALTER TABLE items ADD COLUMN price DECIMAL(8,2)"
    assert events[0].gtid == events[1].gtid == events[2].gtid


def test_an_idle_stream_yields_heartbeats(source_connection, open_binlog, binlog_reader):
    source = open_binlog(source_connection.server.executed_gtids(), heartbeat_seconds=0.3)
    began = time.monotonic()
    events = binlog_reader(source, lambda event, _: isinstance(event, Heartbeat), timeout=10)
    assert time.monotonic() - began < 5
    assert events[-1].file.startswith("binlog.") and events[-1].pos > 0


def test_killed_dump_threads_never_lose_or_repeat_a_transaction(
    mariadb, database, items, source_connection, open_binlog, binlog_reader
):
    start = source_connection.server.executed_gtids()
    source = open_binlog(start, table_filter=lambda table: table == items, heartbeat_seconds=0.3)
    table = f"`{database}`.items"
    next_id = 1
    seen: list[int] = []
    ends: list = []

    def write(count: int) -> None:
        nonlocal next_id
        for _ in range(count):
            mariadb.execute(f"INSERT INTO {table} VALUES ({next_id}, 'x')")
            next_id += 1

    def read_all_written() -> None:
        target = source_connection.server.executed_gtids()
        for event in binlog_reader(source, _until_position(source, target)):
            if isinstance(event, RowChange):
                seen.append(event.key[0])
            elif isinstance(event, TransactionEnd):
                ends.append(event.gtid)

    write(3)
    read_all_written()
    kills = 0
    for round_ in range(4):
        threads = _dump_thread_ids(mariadb)
        assert len(threads) == 1, threads
        mariadb.execute(f"KILL {threads[0]}")
        kills += 1
        write(2 + round_)  # writes while the reader is disconnected
        read_all_written()
        # the reader came back on a new dump thread
        assert _dump_thread_ids(mariadb) not in ([], threads)

    assert kills == 4
    assert seen == list(range(1, next_id)), "every row exactly once, in commit order"
    assert len(ends) == len(set(ends)) == next_id - 1, "every transaction ended exactly once"
    assert source.position == source_connection.server.executed_gtids()


def test_a_transaction_cut_by_a_lost_connection_goes_on_where_it_was_cut(
    mariadb, database, items, source_connection, open_binlog, binlog_reader
):
    """Kill the dump thread while it streams one big transaction: the server sends it again
    from its start, and the source goes on after the rows it had yielded: one Start, every row
    once, one End."""
    mariadb.execute(f"CREATE TABLE `{database}`.big (id INT PRIMARY KEY, pad VARCHAR(4000))")
    big = TableId(database, "big")
    start = source_connection.server.executed_gtids()
    rows = 12_000  # ~48 MB of row events: more than the socket buffers hold, so the server blocks
    mariadb.execute(f"INSERT INTO `{database}`.big SELECT seq, REPEAT('x', 4000) FROM `{database}`.seq_1_to_{rows}")
    end = source_connection.server.executed_gtids()
    source = open_binlog(start, table_filter=lambda table: table == big)

    first = binlog_reader(source, lambda event, events: len(events) == 20)
    assert isinstance(first[0], TransactionStart) and all(isinstance(e, RowChange) for e in first[1:])
    time.sleep(0.2)  # let the server fill the socket and block
    (thread,) = _dump_thread_ids(mariadb)
    mariadb.execute(f"KILL {thread}")

    rest = binlog_reader(source, _until_position(source, end), timeout=60)
    events = first + rest
    assert source.reconnects == 1
    assert [type(e) for e in events].count(TransactionStart) == 1, "no second Start"
    assert [e.key[0] for e in events if isinstance(e, RowChange)] == list(range(1, rows + 1))
    assert [type(e) for e in events].count(TransactionEnd) == 1 and isinstance(events[-1], TransactionEnd)


def test_other_group_shapes_are_framed(mariadb, database, items, source_connection, open_binlog, binlog_reader):
    """MyISAM (ends with a COMMIT query), CREATE ... SELECT (DDL plus rows, not standalone),
    SAVEPOINT (not a schema change), and rows of a table dropped since (no schema any more)."""
    start = source_connection.server.executed_gtids()
    conn = mariadb.connect(database)
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE plain (id INT PRIMARY KEY, v VARCHAR(5)) ENGINE=MyISAM")
        cursor.execute("INSERT INTO plain VALUES (1, 'a'), (2, 'b')")
        cursor.execute("CREATE TABLE copied (id INT PRIMARY KEY) SELECT id FROM plain")
        cursor.execute("BEGIN")
        cursor.execute("INSERT INTO items VALUES (1, 'kept')")
        cursor.execute("SAVEPOINT s1")
        cursor.execute("INSERT INTO items VALUES (2, 'undone')")
        cursor.execute("ROLLBACK TO SAVEPOINT s1")
        cursor.execute("COMMIT")
        cursor.execute("DROP TABLE copied")
    conn.close()
    end = source_connection.server.executed_gtids()

    source = open_binlog(start)
    events = binlog_reader(source, _until_position(source, end))
    shape = []
    for event in events:
        if isinstance(event, RowChange):
            shape.append(f"{event.op}:{event.table.table}:{event.key}")
        elif isinstance(event, SchemaChange):
            shape.append(f"ddl:{event.sql.split()[0].upper()}")
        else:
            shape.append(type(event).__name__)
    assert shape == [
        "TransactionStart", "ddl:CREATE", "TransactionEnd",
        "TransactionStart", "c:plain:(1,)", "c:plain:(2,)", "TransactionEnd",
        "TransactionStart", "ddl:CREATE", "c:copied:(1,)", "c:copied:(2,)", "TransactionEnd",
        "TransactionStart", "c:items:(1,)", "TransactionEnd",
        "TransactionStart", "ddl:DROP", "TransactionEnd",
    ]
    copied = [e for e in events if isinstance(e, RowChange) and e.table.table == "copied"]
    assert copied[0].after == {"id": 1}  # decoded without a schema: the table is gone


def test_select_and_replication_slave_privileges_are_enough(mariadb, database, items, binlog_reader):
    from dblog.mysql.binlog import BinlogSource
    from dblog.mysql.source_connection import SourceConnection

    user = f"cdc_{database[-8:]}"
    mariadb.create_user(user, "secret", [f"SELECT ON `{database}`.*", "REPLICATION SLAVE ON *.*"])
    reader = SourceConnection(lambda: mariadb.connect(user=user, password="secret"))
    settings = dict(mariadb.connection_settings, user=user, password="secret")
    source = None
    try:
        start = reader.server.executed_gtids()
        mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1, 'a')")
        source = BinlogSource(settings, 424242, start, reader.schemas.schema, lambda table: table == items, 0.3)
        events = binlog_reader(source, lambda event, _: isinstance(event, TransactionEnd))
        assert [e.after for e in events if isinstance(e, RowChange)] == [{"id": 1, "name": "a"}]
        assert reader.chunks.read_chunk(ChunkRequest(reader.schemas.schema(items), None, None, 10)) == [{"id": 1, "name": "a"}]
    finally:
        if source is not None:
            source.close()
        reader.close()
        for host in ("%", "localhost"):
            mariadb.execute("DROP USER IF EXISTS %s@%s", (user, host))
