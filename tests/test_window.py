"""Unit examples for the watermark window (the model test covers interleavings)."""

from dblog.capture import ChangeCapture, ChunkRead
from dblog.events import RowChange, TableId, TransactionEnd, TransactionStart
from dblog.gtid import Gtid, GtidSet
from dblog.progress import SnapshotProgress, TableSnapshot
from dblog.window import GtidWatermarks, SignalWatermarks, Window

T = TableId("shop", "t")
A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def mysql(text):
    return GtidSet.parse(text, "mysql")


def test_high_watermark_spanning_two_server_uuids_needs_a_reread():
    assert not GtidWatermarks(mysql(f"{A}:1-5"), mysql(f"{A}:1-9")).needs_reread()
    assert GtidWatermarks(mysql(f"{A}:1-5,{B}:1-2"), mysql(f"{A}:1-9,{B}:1-3")).needs_reread()
    # Only the difference counts: a second UUID that did not move is fine.
    assert not GtidWatermarks(mysql(f"{A}:1-5,{B}:1-2"), mysql(f"{A}:1-9,{B}:1-2")).needs_reread()
    maria = GtidSet.parse("0-1-5,1-2-3", "mariadb")
    assert not GtidWatermarks(maria, GtidSet.parse("0-1-9,1-2-7", "mariadb")).needs_reread()


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
