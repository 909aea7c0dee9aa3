"""Unit examples for the watermark window (the model test covers interleavings)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.core.capture import (
    CHUNK_GROWTH,
    CHUNK_SHRINK,
    ChangeCapture,
    ChunkRead,
    ChunkResult,
    IllegalCall,
    MaxKeyRead,
    Phase,
    chunk_row_limit,
    next_chunk_size,
)
from dblog.core.events import (
    Heartbeat,
    Notification,
    RowChange,
    SchemaChange,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import GtidWatermarks, SignalWatermarks, Window

T = TableId("shop", "t")
A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def mysql(text):
    return GtidSet.parse(text, "mysql")


def change(op, key, gtid="0-1-7"):
    row = {"id": key}
    return RowChange(T, op, (key,), row if op == "d" else None, row if op != "d" else None)


def test_quiet_database_closes_the_window_without_waiting_for_the_binlog():
    position = GtidSet.parse("0-1-5", "mariadb")
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(position, progress, chunk_size=3)
    read = capture.next_read()
    assert isinstance(read, ChunkRead)
    rows = [((k,), {"id": k}) for k in (1, 2, 3)]
    out = capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(position, position)))
    assert [c.key for c in out if isinstance(c, RowChange)] == [(1,), (2,), (3,)]
    assert capture.window is None and progress.current.last_key == (3,)


def test_changes_inside_the_window_win_over_the_chunk():
    low = GtidSet.parse("0-1-5", "mariadb")
    high = GtidSet.parse("0-1-7", "mariadb")
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    rows = [((k,), {"id": k}) for k in (1, 2, 3)]
    assert capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(low, high))) == []
    emitted = []
    for seq, op, key in [(5, "u", 1), (6, "d", 2), (7, "u", 9)]:
        gtid = Gtid.mariadb(0, 1, seq)
        emitted += capture.on_event(TransactionStart(gtid))
        emitted += capture.on_event(change(op, key))
        emitted += capture.on_event(TransactionEnd(gtid))
    # Key 1 changed at seq 5, inside L: older than the chunk, so the chunk row stays.
    # Key 2 deleted at seq 6, inside the window: dropped from the chunk.
    assert [(c.op, c.key) for c in emitted if isinstance(c, RowChange)] == [("u", (1,)), ("d", (2,)), ("u", (9,)), ("r", (1,)), ("r", (3,))]


def test_tagged_transactions_are_placed_by_their_own_numbers():
    # MySQL 8.3+: 'A:t:n' and 'A:n' are different transactions (each (UUID, tag) numbers its
    # own), so a tagged one is inside or outside the watermarks whatever the untagged numbers.
    low, high = mysql(f"{A}:1-9:t:1-2"), mysql(f"{A}:1-9:t:1-4")
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(low, progress, chunk_size=3)
    read = capture.next_read()
    rows = [((k,), {"id": k}) for k in (1, 2, 3)]
    assert capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(low, high))) == []
    emitted = []
    for seq, key in [(3, 1), (5, 2)]:  # A:3 and A:5 are in both watermarks; A:t:3 and A:t:5 are not in L
        gtid = Gtid.mysql(A, seq, "t")
        emitted += capture.on_event(TransactionStart(gtid))
        emitted += capture.on_event(change("u", key))
        emitted += capture.on_event(TransactionEnd(gtid))
    # A:t:3 is inside the window: key 1's chunk row is dropped. A:t:5 is past H: the window
    # closes before it, emitting the rows left.
    assert [(c.op, c.key) for c in emitted if isinstance(c, RowChange)] == [("u", (1,)), ("r", (2,)), ("r", (3,)), ("u", (2,))]


def test_signal_markers_open_and_close_the_window():
    signals = TableId("shop", "dblog_signal")
    window = Window(T, [((1,), {"id": 1}), ((2,), {"id": 2})], SignalWatermarks(signals, "w-open", "w-close"))
    assert not window.observe(change("d", 1))  # before the open marker: older than the chunk
    marker = {"id": "w-open", "type": "snapshot-window-open"}
    assert not window.observe(RowChange(signals, "c", ("w-open",), None, marker))
    assert not window.observe(change("d", 2))
    assert window.observe(RowChange(signals, "c", ("w-close",), None, {"id": "w-close"}))
    assert window.close() == [((1,), {"id": 1})]


@given(
    chunk_size=st.integers(1, 100_000),
    chunk_bytes=st.none() | st.integers(1, 1 << 34),
    bytes_per_row=st.none() | st.just(0.0) | st.floats(1, 1e10),  # a row packet has a byte at least
)
def test_chunk_row_limit_asks_for_what_fits_the_byte_bound(chunk_size, chunk_bytes, bytes_per_row):
    limit = chunk_row_limit(chunk_size, chunk_bytes, bytes_per_row)
    assert 1 <= limit <= chunk_size
    if chunk_bytes is None or not bytes_per_row:
        assert limit == chunk_size
    elif limit > 1:
        assert limit * bytes_per_row <= chunk_bytes  # rows like the last ones fit
    if chunk_bytes is not None and bytes_per_row and limit < chunk_size:
        assert (limit + 1) * bytes_per_row > chunk_bytes  # and no fewer than fit


def test_a_chunk_cut_short_by_its_byte_bound_does_not_end_the_table():
    progress = SnapshotProgress()
    table = TableId("db", "t")
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=10, chunk_bytes=100)
    capture.request_snapshot([TableSnapshot(table)])
    capture.max_key_read(capture.next_read(), (50,))
    read = capture.next_read()
    assert (read.limit, read.max_bytes) == (10, 100)  # nothing known of the rows yet
    position = capture.position
    rows = [((1,), {"id": 1}), ((2,), {"id": 2})]
    out = capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(position, position), bytes_read=120, cut_short=True))
    assert [n.type for n in out if isinstance(n, Notification)] == ["IN_PROGRESS"]
    assert progress.current.last_key == (2,)
    assert capture.next_read().limit == 1  # rows of 60 bytes: one fits 100 bytes
    with pytest.raises(ValueError):
        capture.chunk_read(capture.next_read(), ChunkResult([], GtidWatermarks(position, position), cut_short=True))


# --- chunk sizes under lag ------------------------------------------------------------------

def sizes(last, rate, waits, chunk_size=1024, max_chunk_size=65_536, max_chunk_seconds=0.5):
    """The sizes `next_chunk_size` picks after windows that waited `waits`, reads at `rate`."""
    out = []
    for wait in waits:
        last = next_chunk_size(last, rate, wait, chunk_size, max_chunk_size, max_chunk_seconds)
        out.append(last)
    return out


def test_chunks_grow_at_most_fourfold_per_window_to_read_as_long_as_windows_wait():
    # 100k rows/s, a reader 10 s behind: 1M rows would take as long as the wait; the growth
    # limit gets there in steps, and the 0.5 s bound stops it at 50k rows.
    assert sizes(1024, 100_000, [10.0] * 5) == [4096, 16_384, 50_000, 50_000, 50_000]
    # A short wait asks for what the reader gets through in it.
    assert sizes(1024, 100_000, [0.02]) == [2000]


def test_chunks_shrink_by_half_per_window_back_to_chunk_size_when_windows_stop_waiting():
    assert sizes(50_000, 100_000, [0.0] * 7) == [25_000, 12_500, 6250, 3125, 1562, 1024, 1024]
    assert sizes(50_000, 100_000, [0.0, 10.0]) == [25_000, 50_000]  # one quiet window, not back to 1024


def test_the_caps_apply_at_once_and_chunk_size_is_the_floor():
    assert sizes(1024, 10_000_000, [10.0] * 4) == [4096, 16_384, 65_536, 65_536]  # max_chunk_size
    assert sizes(50_000, 10_000, [10.0]) == [5000]  # reads got slower: 0.5 s of them, not 4 x 50k
    assert sizes(4096, 100, [100.0]) == [1024]  # 0.5 s is 50 rows here, but never below chunk_size
    assert sizes(1024, 100_000, [10.0], max_chunk_size=1024) == [1024]  # fixed chunks


@given(
    chunk_size=st.integers(1, 100_000),
    growth=st.integers(1, 1000),
    last_share=st.floats(0, 1),
    rate=st.floats(1e-3, 1e12),
    wait=st.just(0.0) | st.floats(0, 1e6),
    max_chunk_seconds=st.floats(1e-6, 1e4),
)
def test_next_chunk_size_stays_within_its_bounds(chunk_size, growth, last_share, rate, wait, max_chunk_seconds):
    max_chunk_size = chunk_size * growth
    last = chunk_size + int(last_share * (max_chunk_size - chunk_size))
    size = next_chunk_size(last, rate, wait, chunk_size, max_chunk_size, max_chunk_seconds)
    assert chunk_size <= size <= max_chunk_size
    assert size <= max(chunk_size, CHUNK_GROWTH * last)
    assert size <= max(chunk_size, rate * max_chunk_seconds)  # one read pauses streaming this long at most
    ceiling = min(max_chunk_size, rate * max_chunk_seconds)
    assert size >= min(int(last / CHUNK_SHRINK), int(ceiling))  # no deeper drop than the caps ask
    if rate * wait <= last / CHUNK_SHRINK and ceiling >= last:
        assert size == max(chunk_size, int(last / CHUNK_SHRINK))  # short waits: halve, towards chunk_size


def windows(capture, waits, read_seconds_per_row=1e-5, bytes_per_row=None):
    """Chunk reads of `capture`'s table, as many rows as asked, each window closed by the
    binlog after the next wait; returns the limits asked for."""
    limits = []
    for wait in waits:
        read = capture.next_read()
        limits.append(read.limit)
        first = (read.after_key or (0,))[0] + 1
        rows = [((k,), {"id": k}) for k in range(first, first + read.limit)]
        gtid = Gtid.mariadb(0, 1, 100 + len(limits))  # a commit after the SELECT: the window waits for it
        high = capture.position.with_gtid(gtid)
        assert capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, high),
                                  bytes_read=len(rows) * (bytes_per_row or 0),
                                  read_seconds=read_seconds_per_row * len(rows))) == []
        capture.on_event(TransactionStart(gtid))
        out = capture.on_event(TransactionEnd(gtid))
        assert capture.window is None and [n.type for n in out if isinstance(n, Notification)] == ["IN_PROGRESS"]
        capture.window_waited(wait)
    return limits


def lagging_capture(**sizing):
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10**9,))])
    return ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=100, **sizing), progress


def test_waiting_windows_make_the_next_chunks_larger_and_counts_stay_per_window():
    capture, progress = lagging_capture(max_chunk_size=10_000, max_chunk_seconds=0.5)
    # 100k rows/s: 0.5 s is 50k rows, max_chunk_size 10k wins; then windows stop waiting.
    limits = windows(capture, [2.0] * 5 + [0.0] * 8)
    assert limits == [100, 400, 1600, 6400, 10_000, 10_000, 5000, 2500, 1250, 625, 312, 156, 100]
    assert progress.current.chunks == len(limits) and progress.current.rows_scanned == sum(limits)
    assert progress.current.last_key == (sum(limits),)


def test_the_byte_bound_wins_over_a_grown_chunk():
    capture, _ = lagging_capture(chunk_bytes=50_000, max_chunk_size=10_000)
    assert windows(capture, [2.0] * 4, bytes_per_row=100) == [100, 400, 500, 500]  # 50 kB of 100-byte rows


def test_a_window_that_closes_at_once_counts_as_no_wait():
    capture, _ = lagging_capture(max_chunk_size=10_000)
    assert windows(capture, [2.0, 2.0]) == [100, 400]
    read = capture.next_read()
    assert read.limit == 1600
    rows = [((k,), {"id": k}) for k in range(501, 501 + read.limit)]
    out = capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, capture.position), read_seconds=0.016))
    assert capture.window is None and len([c for c in out if isinstance(c, RowChange)]) == 1600
    assert capture.next_read().limit == 800


def test_untimed_reads_and_discarded_windows_leave_the_chunk_size_alone():
    capture, _ = lagging_capture(max_chunk_size=10_000)
    read = capture.next_read()
    rows = [((k,), {"id": k}) for k in range(1, 101)]
    high = capture.position.with_gtid(Gtid.mariadb(0, 1, 9))
    capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, high)))  # no read_seconds
    capture.on_event(TransactionStart(Gtid.mariadb(0, 1, 9)))
    capture.on_event(TransactionEnd(Gtid.mariadb(0, 1, 9)))
    capture.window_waited(5.0)
    assert capture.next_read().limit == 100
    read = capture.next_read()
    high = capture.position.with_gtid(Gtid.mariadb(0, 1, 10))
    capture.chunk_read(read, ChunkResult([((k,), {"id": k}) for k in range(101, 201)], GtidWatermarks(capture.position, high),
                       read_seconds=0.001))
    capture.discard_window()  # e.g. DDL on the table: nothing closed, nothing to measure
    capture.window_waited(5.0)
    assert capture.next_read().limit == 100
    with pytest.raises(ValueError):
        capture.window_waited(-1.0)
    with pytest.raises(ValueError):
        ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), SnapshotProgress(), chunk_size=100, max_chunk_size=99)


def _open_window(low="0-1-4", high="0-1-6"):
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse(low, "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    capture.chunk_read(read, ChunkResult([((k,), {"id": k}) for k in (1, 2, 3)],
                       GtidWatermarks(GtidSet.parse(low, "mariadb"), GtidSet.parse(high, "mariadb"))))
    assert capture.window is not None
    return capture


@pytest.mark.parametrize("db, sql, discarded", [
    ("other", "TRUNCATE shop.t", True),  # the default database is not the table's
    ("other", "DROP TABLE IF EXISTS x, shop.t", True),
    ("shop", "ALTER TABLE t DROP COLUMN c", True),
    ("shop", "ALTER TABLE u ADD COLUMN c INT", False),  # same database, another table
    ("shop", "TRUNCATE other.t", False),
    ("other", "DROP DATABASE shop", True),  # names no table: may touch any
])
def test_ddl_discards_the_window_of_a_table_it_names(db, sql, discarded):
    from dblog.core.events import SchemaChange

    capture = _open_window()
    gtid = Gtid.parse("0-1-5")
    out = capture.on_event(TransactionStart(gtid))
    out += capture.on_event(SchemaChange(gtid, db, sql))
    out += capture.on_event(TransactionEnd(gtid))
    assert (capture.window is None and not any(isinstance(c, RowChange) for c in out)) == discarded


def test_a_refused_read_waits_for_the_binlog_then_reads_again_and_fails_only_without_ddl():
    from dblog.core.events import SchemaChange

    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    # The server ran 0-1-5 (DDL) before the SELECT: hold reads until the loop has consumed it.
    assert capture.read_refused(read, GtidSet.parse("0-1-5", "mariadb"), "unknown column") == []
    assert capture.next_read() is None
    gtid = Gtid.parse("0-1-5")
    for event in (TransactionStart(gtid), SchemaChange(gtid, "other", "ALTER TABLE shop.t DROP c"), TransactionEnd(gtid)):
        capture.on_event(event)
    read = capture.next_read()
    assert isinstance(read, MaxKeyRead)  # the DROP COLUMN restarted the table: its read starts over
    # Refused again after that DDL: wait again; then refused with no DDL in between: the query's fault.
    assert capture.read_refused(read, GtidSet.parse("0-1-6", "mariadb"), "unknown column") == []
    gtid = Gtid.parse("0-1-6")
    for event in (TransactionStart(gtid), TransactionEnd(gtid)):
        capture.on_event(event)
    out = capture.read_refused(capture.next_read(), GtidSet.parse("0-1-7", "mariadb"), "unknown column")
    assert [(n.type, n.data.get("status")) for n in out if isinstance(n, Notification)][0] == \
        ("TABLE_SCAN_COMPLETED", "SQL_EXCEPTION")
    # Refused with nothing unconsumed on the server: no wait at all.
    progress.enqueue([TableSnapshot(T, started=True, max_key=(10,))])
    out = capture.read_refused(capture.next_read(), capture.position, "unknown column")
    assert any(isinstance(n, Notification) and n.data.get("status") == "SQL_EXCEPTION" for n in out)


# --- the capture's phases and the rules it owns -----------------------------------------------


def test_phases_and_calls_they_do_not_allow():
    capture = _open_window()
    assert capture.phase is Phase.WINDOW_OPEN
    with pytest.raises(IllegalCall):  # an answer with no read out
        capture.chunk_read(ChunkRead(capture.progress.current, None, (10,), 3),
                           ChunkResult([], GtidWatermarks(capture.position, capture.position)))
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    assert capture.phase is Phase.STREAMING
    read = capture.next_read()
    assert capture.phase is Phase.READING and capture.next_read() is read  # asked again: the same read
    assert capture.checkpoint() is None  # a read out is not a consistent cut
    with pytest.raises(IllegalCall):  # reading the chunk is the pause: no binlog event meanwhile
        capture.on_event(TransactionStart(Gtid.parse("0-1-5")))
    position = capture.position
    capture.chunk_read(read, ChunkResult([((1,), {"id": 1})], GtidWatermarks(position, position)))
    assert capture.phase is Phase.STREAMING
    with pytest.raises(IllegalCall):  # answered twice
        capture.chunk_read(read, ChunkResult([((1,), {"id": 1})], GtidWatermarks(position, position)))


def test_the_answer_to_a_read_whose_table_was_stopped_meanwhile_is_dropped():
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    assert [n.type for n in capture.stop_snapshot([r"shop\.t"])] == ["ABORTED"]
    position = capture.position
    assert capture.chunk_read(read, ChunkResult([((1,), {"id": 1})], GtidWatermarks(position, position))) == []
    assert capture.phase is Phase.STREAMING and progress.current is None


def test_stop_snapshot_matches_queued_tables_by_regular_expression():
    tables = [TableId("shop", name) for name in ("orders", "orders_archive", "customers")]
    progress = SnapshotProgress([TableSnapshot(table) for table in tables])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    out = capture.stop_snapshot([r"shop\.orders"])  # the whole name: not orders_archive
    assert out[0].data["data_collections"] == ["shop.orders"]
    assert capture.stop_snapshot([r"nothing\..*"]) == []
    assert [n.data["data_collections"] for n in capture.stop_snapshot()] == [["shop.orders_archive", "shop.customers"]]


def test_snapshot_rows_carry_the_binlog_position_the_reader_had_reached():
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    capture.on_event(Heartbeat("binlog.000007", 4242))
    read = capture.next_read()
    position = capture.position
    out = capture.chunk_read(read, ChunkResult([((1,), {"id": 1})], GtidWatermarks(position, position)))
    rows = [c for c in out if isinstance(c, RowChange)]
    assert [(c.op, c.source.file, c.source.pos, c.source.snapshot) for c in rows] == [("r", "binlog.000007", 4242, True)]


@pytest.mark.parametrize("sql, restarted", [
    ("ALTER TABLE shop.t ADD COLUMN c INT", True),
    ("ALTER TABLE shop.t DROP COLUMN c", True),
    ("ALTER TABLE shop.t ADD INDEX i (id)", False),  # harmless to the rows already read
    ("TRUNCATE shop.t", False),  # the window is discarded; rows read before are truncated anyway
    ("ALTER TABLE shop.other ADD COLUMN c INT", False),
])
def test_reshaping_ddl_restarts_the_table_being_read(sql, restarted):
    capture = _open_window()
    gtid = Gtid.parse("0-1-5")
    out = capture.on_event(TransactionStart(gtid)) + capture.on_event(SchemaChange(gtid, "other", sql))
    kinds = [n.type for n in out if isinstance(n, Notification)]
    assert (kinds == ["TABLE_SCAN_RESTARTED"]) == restarted
    assert isinstance(out[-1], SchemaChange)  # the DDL itself comes after what it caused
    capture.on_event(TransactionEnd(gtid))
    assert isinstance(capture.next_read(), MaxKeyRead) == restarted


def test_a_table_renamed_to_a_captured_name_is_read_under_it():
    captured = {TableId("shop", "t"), TableId("shop", "t2"), TableId("shop", "new")}
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3, captures=captured.__contains__)
    gtid = Gtid.parse("0-1-5")
    capture.on_event(TransactionStart(gtid))
    out = capture.on_event(SchemaChange(gtid, "shop", "RENAME TABLE t TO t2, staging TO new, x TO y"))
    started = [n for n in out if isinstance(n, Notification) and n.type == "STARTED"]
    # t2: t's read was under way (restarted, and t is gone); new: staging was not captured; y: not captured
    assert started[0].data["data_collections"] == ["shop.t2", "shop.new"]


def test_surrogate_keys_of_reads_under_way():
    progress = SnapshotProgress([TableSnapshot(T, surrogate_key="uid", started=True, max_key=(1,)),
                                 TableSnapshot(TableId("shop", "u"), surrogate_key="uid")])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    assert capture.surrogate_keys() == [(T, "uid")]  # the queued one is keyed when it starts
