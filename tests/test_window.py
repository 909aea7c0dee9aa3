"""Unit examples for the watermark window (the model test covers interleavings)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.capture import ChangeCapture, ChunkRead, chunk_row_limit
from dblog.events import Notification, RowChange, TableId, TransactionEnd, TransactionStart
from dblog.gtid import Gtid, GtidSet
from dblog.progress import SnapshotProgress, TableSnapshot
from dblog.window import GtidWatermarks, SignalWatermarks, Window

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
    out = capture.chunk_read(read, rows, GtidWatermarks(position, position))
    assert [c.key for c in out if isinstance(c, RowChange)] == [(1,), (2,), (3,)]
    assert capture.window is None and progress.current.last_key == (3,)


def test_changes_inside_the_window_win_over_the_chunk():
    low = GtidSet.parse("0-1-5", "mariadb")
    high = GtidSet.parse("0-1-7", "mariadb")
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=(10,))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=3)
    read = capture.next_read()
    rows = [((k,), {"id": k}) for k in (1, 2, 3)]
    assert capture.chunk_read(read, rows, GtidWatermarks(low, high)) == []
    emitted = []
    for seq, op, key in [(5, "u", 1), (6, "d", 2), (7, "u", 9)]:
        gtid = Gtid.mariadb(0, 1, seq)
        emitted += capture.on_event(TransactionStart(gtid))
        emitted += capture.on_event(change(op, key))
        emitted += capture.on_event(TransactionEnd(gtid))
    # Key 1 changed at seq 5, inside L: older than the chunk, so the chunk row stays.
    # Key 2 deleted at seq 6, inside the window: dropped from the chunk.
    assert [(c.op, c.key) for c in emitted if isinstance(c, RowChange)] == [("u", (1,)), ("d", (2,)), ("u", (9,)), ("r", (1,)), ("r", (3,))]


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
    capture.max_key_read(progress.current, (50,))
    read = capture.next_read()
    assert (read.limit, read.max_bytes) == (10, 100)  # nothing known of the rows yet
    position = capture.position
    rows = [((1,), {"id": 1}), ((2,), {"id": 2})]
    out = capture.chunk_read(read, rows, GtidWatermarks(position, position), bytes_read=120, cut_short=True)
    assert [n.type for n in out if isinstance(n, Notification)] == ["IN_PROGRESS"]
    assert progress.current.last_key == (2,)
    assert capture.next_read().limit == 1  # rows of 60 bytes: one fits 100 bytes
    with pytest.raises(ValueError):
        capture.chunk_read(capture.next_read(), [], GtidWatermarks(position, position), cut_short=True)
