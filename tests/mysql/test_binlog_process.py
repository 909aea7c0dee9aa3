"""BinlogReaderProcess against a real MariaDB: the same events as BinlogSource, the child's schema
cache after DDL, keys set at run time, the engine's table filter, errors with their type, no
waiting for a full batch, bounded memory, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.harness import process_alive, wait_until_gone
from support import eventually, next_server_id

from dblog.core.events import Heartbeat, RowChange, SchemaChange, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import GtidSet
from dblog.mysql.binlog import BinlogError, SourceDiverged
from dblog.mysql.binlog.process import BinlogReaderProcess, reader_process_wanted, usable_cores
from dblog.runtime.config import ConfigError, SourceConfig, parse_config

pytestmark = pytest.mark.timeout(180)



@pytest.fixture
def open_reader(mariadb, source_connection):
    """open_reader(start, include=[...], signal_table=None, schemas=source_connection.schemas, **options)."""
    readers: list[BinlogReaderProcess] = []

    def open_(start, include=(r"[^.]+\..+",), signal_table=None, schemas=None, heartbeat_seconds=0.5, **options):
        reader = BinlogReaderProcess(mariadb.connection_settings, next_server_id(), start,
                                     SourceConfig(include=list(include)), signal_table, schemas or source_connection.schemas,
                                     heartbeat_seconds, **options)
        readers.append(reader)
        return reader

    try:
        yield open_
    finally:
        for reader in readers:
            reader.close()


def _until_position(source, target):
    return lambda event, _: isinstance(event, TransactionEnd) and target.issubset(source.position)


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _bytes_read(pid: int) -> int:
    """What the process has read through system calls so far (sockets and pipes included)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def _pipe_full(reader: BinlogReaderProcess) -> bool:
    """Whether the reader's data pipe is full: less than a page free (the kernel fills a pipe
    page by page), so the child's write blocks."""
    import array
    import fcntl
    import termios

    fd = reader._data.fileno()
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting)
    return waiting[0] > fcntl.fcntl(fd, getattr(fcntl, "F_GETPIPE_SZ", 1032)) - os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("batch_events", [3, 512])
def test_the_same_events_and_position_as_in_process(
    mariadb, database, source_connection, open_binlog, open_reader, binlog_reader, batch_events
):
    start = source_connection.server.executed_gtids()
    conn = mariadb.connect(database)
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), u UUID NULL)")
        cursor.execute("CREATE TABLE plain (id INT PRIMARY KEY, v VARCHAR(5)) ENGINE=MyISAM")
        cursor.execute("BEGIN")
        cursor.execute("INSERT INTO items VALUES (1, 'a', UUID()), (2, 'b', NULL), (3, 'c', NULL)")
        cursor.execute("UPDATE items SET id = 20, name = 'bb' WHERE id = 2")
        cursor.execute("DELETE FROM items WHERE id = 3")
        cursor.execute("COMMIT")
        for n in range(10):
            cursor.execute("INSERT INTO items VALUES (%s, 'x', NULL)", (100 + n,))
        cursor.execute("INSERT INTO plain VALUES (1, 'a'), (2, 'b')")
        cursor.execute("ALTER TABLE items ADD COLUMN price DECIMAL(8,2)")
        cursor.execute("INSERT INTO items VALUES (4, 'after ddl', NULL, 1.50)")
        cursor.execute("CREATE TABLE copied (id INT PRIMARY KEY) SELECT id FROM plain")
    conn.close()
    end = source_connection.server.executed_gtids()

    source = open_binlog(start)
    expected = binlog_reader(source, _until_position(source, end))
    reader = open_reader(start, batch_events=batch_events)
    got = binlog_reader(reader, _until_position(reader, end))
    assert got == expected
    assert reader.position == source.position == end
    assert any(isinstance(e, RowChange) and e.before_key == (2,) for e in got)


def test_rows_after_ddl_are_decoded_with_the_new_schema(mariadb, database, source_connection, open_reader, binlog_reader):
    """The child caches schemas as the engine does, and forgets them at a SchemaChange it
    yields: a row after a new primary key is keyed by it."""
    table = f"`{database}`.k"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, code INT NOT NULL, UNIQUE KEY (code))")
    reader = open_reader(source_connection.server.executed_gtids())
    mariadb.execute(f"INSERT INTO {table} VALUES (1, 100)")
    first = binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd))
    assert [e.key for e in first if isinstance(e, RowChange)] == [(1,)]  # the child has cached the schema

    mariadb.execute(f"ALTER TABLE {table} DROP PRIMARY KEY, ADD PRIMARY KEY (code)")
    mariadb.execute(f"INSERT INTO {table} VALUES (2, 200)")
    target = source_connection.server.executed_gtids()
    events = binlog_reader(reader, _until_position(reader, target))
    assert [type(e) for e in events if not isinstance(e, Heartbeat)] == [
        TransactionStart, SchemaChange, TransactionEnd, TransactionStart, RowChange, TransactionEnd]
    assert [e.key for e in events if isinstance(e, RowChange)] == [(200,)]


def test_a_key_set_at_run_time_rekeys_the_changes_in_flight(
    mariadb, database, source_connection, open_reader, binlog_reader
):
    """A surrogate key given to a keyless table while the child is ahead: every change of that
    table the engine takes from then on is keyed by it, also those decoded before."""
    table = TableId(database, "plain")
    name = f"`{database}`.plain"
    mariadb.execute(f"CREATE TABLE {name} (uid INT NOT NULL, v VARCHAR(20), UNIQUE KEY (uid))")
    reader = open_reader(source_connection.server.executed_gtids())
    mariadb.execute(f"INSERT INTO {name} VALUES (0, 'before')")
    first = binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd))
    assert [e.key for e in first if isinstance(e, RowChange)] == [()]  # no key yet

    for uid in range(1, 41):
        mariadb.execute(f"INSERT INTO {name} VALUES ({uid}, 'x')")
    mariadb.execute(f"UPDATE {name} SET uid = 1000 WHERE uid = 1")
    mariadb.execute(f"DELETE FROM {name} WHERE uid = 2")
    target = source_connection.server.executed_gtids()
    time.sleep(1.0)  # the child decodes them meanwhile (with no key) and sends them ahead
    [start] = binlog_reader(reader, lambda event, _: True)
    assert isinstance(start, TransactionStart)

    source_connection.schemas.set_key(table, ("uid",))
    reader.key_changed(table)
    changes = [e for e in binlog_reader(reader, _until_position(reader, target)) if isinstance(e, RowChange)]
    assert [e.key for e in changes] == [(uid,) for uid in range(1, 41)] + [(1000,), (2,)]
    assert changes[40].before_key == (1,)
    assert all(e.before_key is None for e in changes[:40])


def test_the_child_keeps_the_captured_tables_and_the_signal_table(
    mariadb, database, source_connection, open_reader, binlog_reader
):
    for name in ("kept", "dropped", "dblog_signal"):
        mariadb.execute(f"CREATE TABLE `{database}`.{name} (id INT PRIMARY KEY)")
    start = source_connection.server.executed_gtids()
    for name in ("kept", "dropped", "dblog_signal"):
        mariadb.execute(f"INSERT INTO `{database}`.{name} VALUES (1)")
    end = source_connection.server.executed_gtids()
    signals = TableId(database, "dblog_signal")
    reader = open_reader(start, include=[rf"{database}\.kept"], signal_table=signals)
    events = binlog_reader(reader, _until_position(reader, end))
    assert [e.table for e in events if isinstance(e, RowChange)] == [TableId(database, "kept"), signals]
    assert sum(isinstance(e, TransactionEnd) for e in events) == 3  # every transaction still ends
    # what the metrics read from the child: its source's filtered rows events and connection
    assert reader.filtered_events == 1 and reader.connected and reader.reconnects == 0


def test_a_position_the_server_never_logged_is_source_diverged_in_the_engine_process(
        database, source_connection, open_binlog, open_reader):  # (database: a transaction logged)
    """Error 1236 for a position past the server's end ("... which is not in the master's binlog")
    is no purged binlog (issue 40: it was wrapped in "the binlog files holding it were purged")."""
    executed = source_connection.server.executed_gtids()
    domain = sorted(executed.sources())[0]
    nowhere = GtidSet.parse(f"{domain}-1-{executed.last(domain) + 1000}", "mariadb")
    with pytest.raises(SourceDiverged) as in_process:
        next(iter(open_binlog(nowhere)))
    message = str(in_process.value)
    assert "which is not in the master's binlog" in message and "never had" in message, message
    assert "purged" not in message and "keep binlogs longer" not in message
    reader = open_reader(nowhere)
    with pytest.raises(SourceDiverged) as in_child:
        next(iter(reader))
    assert str(in_child.value) == str(in_process.value)
    assert wait_until_gone(reader.pid, 10)


def test_a_refused_row_image_is_binlog_error_after_the_events_before_it(
    mariadb, database, source_connection, open_reader, binlog_reader
):
    table = f"`{database}`.t"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, a INT, b INT)")
    mariadb.execute(f"INSERT INTO {table} VALUES (1, 1, 1)")
    start = source_connection.server.executed_gtids()
    mariadb.execute(f"INSERT INTO {table} VALUES (2, 2, 2)")
    with mariadb.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cursor.execute("UPDATE t SET a = 5 WHERE id = 1")
    reader = open_reader(start)  # one batch: the events before the error are sent before it
    events = []
    with pytest.raises(BinlogError, match="binlog_row_image=MINIMAL or NOBLOB.*binlog_row_image=FULL") as error:
        for event in reader:
            events.append(event)
    assert type(error.value) is BinlogError
    assert [type(e) for e in events] == [TransactionStart, RowChange, TransactionEnd, TransactionStart]
    assert any("binlog reader process" in note for note in error.value.__notes__)


def test_a_transaction_is_sent_at_once_not_when_a_batch_is_full(
    mariadb, database, source_connection, open_reader, binlog_reader
):
    """Heartbeats 30 s apart and a 512-event batch: a lone transaction still arrives at once."""
    table = f"`{database}`.items"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY)")
    reader = open_reader(source_connection.server.executed_gtids(), heartbeat_seconds=30)
    mariadb.execute(f"INSERT INTO {table} VALUES (1)")
    binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd), timeout=60)  # start-up
    for n in (2, 3):
        written = time.monotonic()
        mariadb.execute(f"INSERT INTO {table} VALUES ({n})")
        events = binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd), timeout=60)
        assert time.monotonic() - written < 1.0
        assert [e.key for e in events if isinstance(e, RowChange)] == [(n,)]


def test_the_child_blocks_when_the_engine_is_behind(mariadb, database, source_connection, open_reader, binlog_reader):
    """24 MB of row events, a 64 KiB pipe and batches of 16 events: while nobody iterates, the
    child holds a few batches, not the backlog; then every row arrives, in order."""
    table = f"`{database}`.big"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, pad VARCHAR(4000))")
    reader = open_reader(source_connection.server.executed_gtids(), batch_events=16, pipe_bytes=65536)
    mariadb.execute(f"INSERT INTO {table} VALUES (0, 'warm up')")
    binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd), timeout=60)
    idle_rss = _rss_kb(reader.pid)
    rows = 6_000
    for first in range(1, rows, 1_000):
        mariadb.execute(f"INSERT INTO {table} SELECT seq, REPEAT('x', 4000) FROM "
                        f"`{database}`.seq_{first}_to_{first + 999}")
    target = source_connection.server.executed_gtids()
    _wait_until_held_back(reader)
    grown = _rss_kb(reader.pid) - idle_rss
    assert grown < 16_000, f"the child grew by {grown} kB while the engine read nothing"
    _read_keys_in_order(reader, binlog_reader, target, rows)


def _wait_until_held_back(reader: BinlogReaderProcess) -> None:
    """Not a fixed time: until the child has stopped reading from the server (nothing read for
    half a second) with the pipe to the engine full. Were it not held back, it would read and
    keep the whole backlog first."""
    read = [-1]

    def held_back() -> bool:
        before, read[0] = read[0], _bytes_read(reader.pid)
        return read[0] == before and _pipe_full(reader)

    eventually(held_back, 60, interval=0.5, message="the child to stop reading, held back by the full pipe")


def _read_keys_in_order(reader: BinlogReaderProcess, binlog_reader, target, rows: int) -> None:
    keys = [e.key[0] for e in binlog_reader(reader, _until_position(reader, target), timeout=120)
            if isinstance(e, RowChange)]
    assert keys == list(range(1, rows + 1))


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_rows_of_large_blobs_move_a_few_at_a_time(mariadb, database, source_connection, open_reader, binlog_reader):
    """A batch is sent once its rows took `BATCH_BYTES` in the binlog, not only at 512 events:
    one transaction of 48 rows of 1 MiB, while nobody iterates, grows the child by a few batches
    of 8 MiB, not by the transaction (and its pickled copy); then every row arrives, in order."""
    table = f"`{database}`.blobs"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, b LONGBLOB)")
    reader = open_reader(source_connection.server.executed_gtids(), pipe_bytes=65536)
    mariadb.execute(f"INSERT INTO {table} VALUES (0, 'warm up')")
    binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd), timeout=60)
    idle_rss = _rss_kb(reader.pid)
    rows = 48
    mariadb.execute(f"INSERT INTO {table} SELECT seq, REPEAT('x', 1048576) FROM `{database}`.seq_1_to_{rows}")
    target = source_connection.server.executed_gtids()
    _wait_until_held_back(reader)
    grown = _peak_rss_kb(reader.pid) - idle_rss
    assert grown < 40_000, f"the child grew by {grown} kB for a transaction of {rows} MiB"
    _read_keys_in_order(reader, binlog_reader, target, rows)


def test_killed_dump_threads_are_reconnected_in_the_child(mariadb, database, source_connection, open_reader, binlog_reader):
    table = f"`{database}`.items"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY)")
    reader = open_reader(source_connection.server.executed_gtids(), heartbeat_seconds=0.3)
    seen: list[int] = []
    next_id = 1
    for round_ in range(3):
        for _ in range(3):
            mariadb.execute(f"INSERT INTO {table} VALUES ({next_id})")
            next_id += 1
        target = source_connection.server.executed_gtids()
        seen += [e.key[0] for e in binlog_reader(reader, _until_position(reader, target), timeout=60)
                 if isinstance(e, RowChange)]
        assert reader.reconnects == round_ and reader.connected  # as the child's source counted them
        threads = [row[0] for row in mariadb.execute("SHOW PROCESSLIST") if row[4] == "Binlog Dump"]
        assert len(threads) == 1, threads
        mariadb.execute(f"KILL {threads[0]}")
    assert seen == list(range(1, next_id))


def test_close_leaves_no_process_also_while_another_thread_iterates(
    mariadb, database, source_connection, open_reader, binlog_reader
):
    """close() ends the child at once, not at its next message (heartbeats 30 s apart), and
    the iteration blocked in another thread ends without an error."""
    mariadb.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY)")
    reader = open_reader(source_connection.server.executed_gtids(), heartbeat_seconds=30)
    mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1)")
    binlog_reader(reader, lambda event, _: isinstance(event, TransactionEnd), timeout=60)
    pid = reader.pid
    assert process_alive(pid)
    ended = threading.Event()

    def iterate() -> None:
        for _ in reader:
            pass
        ended.set()

    thread = threading.Thread(target=iterate, daemon=True)
    thread.start()
    time.sleep(0.5)
    began = time.monotonic()
    reader.close()
    assert time.monotonic() - began < 3
    assert not process_alive(pid)
    assert ended.wait(5)
    reader.close()  # idempotent


def test_the_reader_dies_with_its_parent(mariadb, tmp_path):
    """The engine's process killed with SIGKILL: its reader process exits by itself, at once
    (not at its next heartbeat, 30 s away, when writing to the engine would fail)."""
    server_id = next_server_id()
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = {sys.path!r}
        import pymysql
        from dblog.mysql.binlog.process import BinlogReaderProcess
        from dblog.mysql.source_connection import SourceConnection
        from dblog.runtime.config import SourceConfig
        settings = {mariadb.connection_settings!r}
        source = SourceConnection(lambda: pymysql.connect(**settings))
        reader = BinlogReaderProcess(settings, {server_id}, source.server.executed_gtids(), SourceConfig(), None,
                                     source.schemas, 30)
        print(reader.pid, flush=True)
        time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())

        def reading() -> bool:  # the child registered as a replica: it reads the binlog
            if server_id in [row[0] for row in mariadb.execute("SHOW SLAVE HOSTS")]:
                return True
            assert process_alive(child), "the reader process exited"
            return False

        eventually(reading, 60, message="the reader process to connect")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_until_gone(child, 5), "the reader process outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


# --- source.reader_process = "auto" (the default) -----------------------------------------------


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("files", "cap"), [
    ({"cpu.max": "150000 100000\n"}, 2),                                   # v2: 1.5 CPUs -> 2 cores
    ({"cpu.max": "100000 100000\n"}, 1),                                   # v2: one CPU
    ({"cpu.max": "max 100000\n"}, None),                                   # v2: unlimited
    ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1: half a CPU
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),  # v1: unlimited
    ({}, None),                                                            # no cgroup files
], ids=["v2-1.5", "v2-1", "v2-max", "v1-0.5", "v1-unlimited", "none"])
def test_usable_cores_are_the_affinity_capped_by_the_cgroup_quota(tmp_path, files, cap):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    expected = _affinity() if cap is None else min(_affinity(), cap)
    assert usable_cores(tmp_path) == expected


def test_reader_process_setting_auto_on_off():
    assert parse_config({}).source.reader_process == "auto"
    assert reader_process_wanted("auto") == (usable_cores() >= 2)
    assert reader_process_wanted(True) and not reader_process_wanted(False)
    assert parse_config({"source": {"reader_process": False}}).source.reader_process is False
    with pytest.raises(ConfigError, match="reader_process"):
        parse_config({"source": {"reader_process": "sometimes"}})
