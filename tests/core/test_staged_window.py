"""Examples of the capture's API for reads made elsewhere (`ChangeCapture(..., distributed=True)`:
`StagedRead`, `staged_read_started` / `_progress` / `_ended` / `_refused`, `StagedSnapshot`).
No database: events are built by hand. tests/core/test_capture_model.py checks the interleavings."""

import pytest

from dblog.core.capture import (
    ChangeCapture,
    IllegalCall,
    MaxKeyRead,
    Phase,
    StagedRead,
    StagedResult,
)
from dblog.core.events import (
    Notification,
    RowChange,
    SchemaChange,
    StagedSnapshot,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import (
    GtidWatermarks,
    SignalWatermarks,
    StagedWindow,
    identity_token,
    same_key,
)

T = TableId("shop", "t")
OTHER = TableId("shop", "u")
SIGNALS = TableId("shop", "dblog_signal")
STAGED = "staging/read-1"  # the sink's handle of the staged rows: opaque to the capture


def position(seq: int) -> GtidSet:
    return GtidSet.parse(f"0-1-{seq}", "mariadb")


def row_change(op: str, key: tuple, table: TableId = T, before_key: tuple | None = None) -> RowChange:
    row = {"id": key[0]}
    return RowChange(table, op, key, row if op != "c" else None, row if op != "d" else None, before_key=before_key)


def marker(op: str, marker_id: str) -> RowChange:
    row = {"id": marker_id, "type": "snapshot-window-open"}
    return RowChange(SIGNALS, op, (marker_id,), row if op == "d" else None, row if op == "c" else None)


def transaction(capture: ChangeCapture, seq: int, *events) -> list:
    """One transaction 0-1-`seq` through the capture; what it emitted."""
    gtid = Gtid.mariadb(0, 1, seq)
    out = capture.on_event(TransactionStart(gtid))
    for event in events:
        out += capture.on_event(SchemaChange(gtid, "shop", event) if isinstance(event, str) else event)
    return out + capture.on_event(TransactionEnd(gtid))


def staged_capture(last_key: tuple | None = None, max_key: tuple = (10,), at: int = 4):
    """A distributed capture at 0-1-`at` whose table t is started: its next read is a StagedRead."""
    progress = SnapshotProgress([TableSnapshot(T, started=True, max_key=max_key, last_key=last_key)])
    capture = ChangeCapture(position(at), progress, chunk_size=3, distributed=True)
    read = capture.next_read()
    assert isinstance(read, StagedRead)
    return capture, read


def opened(identity=same_key, **kwargs):
    """A staged read whose window is open with GTID watermarks (low: the read's position)."""
    capture, read = staged_capture(**kwargs)
    capture.staged_read_started(read, GtidWatermarks(read.position, None), identity)
    return capture, read


def result(rows: int = 5, ranges: int = 2, last_key: tuple | None = (10,), table_done: bool = True,
           high: GtidSet | None = None) -> StagedResult:
    return StagedResult(STAGED, rows, ranges, last_key, table_done, high)


def kinds(out: list) -> list:
    return [type(item).__name__ if not isinstance(item, Notification) else item.type for item in out]


def applied(out: list, staged: list[tuple], identity=same_key) -> list[tuple]:
    """What the sink does with a StagedSnapshot: the staged keys whose identity was not touched."""
    [snapshot] = [item for item in out if isinstance(item, StagedSnapshot)]
    return [key for key in staged if identity_token(identity(key)) not in snapshot.dropped]


# --- the read and its window ---------------------------------------------------------------------


def test_a_distributed_capture_reads_the_max_key_then_hands_out_staged_reads():
    progress = SnapshotProgress([TableSnapshot(T)])
    capture = ChangeCapture(position(4), progress, chunk_size=3, distributed=True)
    assert isinstance(read := capture.next_read(), MaxKeyRead)
    assert capture.max_key_read(read, (10,)) == []
    read = capture.next_read()
    assert isinstance(read, StagedRead) and (read.after_key, read.max_key, read.position) == (None, (10,), position(4))
    assert capture.phase is Phase.READING and capture.next_read() is read
    capture.staged_read_started(read, GtidWatermarks(read.position, None))
    assert capture.phase is Phase.WINDOW_OPEN and capture.staged_read is read
    assert isinstance(capture.window, StagedWindow) and capture.next_read() is None  # one window at a time


def test_the_window_drops_the_keys_the_log_touched_inside_it():
    capture, read = opened()
    out = transaction(capture, 5, row_change("u", (2,)), row_change("c", (4,), table=OTHER))
    out += transaction(capture, 6, row_change("u", (11,), before_key=(3,)))  # a key change: both keys
    assert kinds(out) == ["RowChange"] * 3  # the changes pass through at once; nothing closed yet
    assert capture.window.touched == {(2,), (3,), (11,)}  # u's key 4 is another table's
    out = capture.staged_read_ended(read, result(high=position(6)))  # the loop already passed 0-1-6
    assert kinds(out) == ["StagedSnapshot", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    snapshot = out[0]
    assert (snapshot.table, snapshot.staged, snapshot.rows) == (T, STAGED, 5)
    assert snapshot.dropped == {identity_token((2,)), identity_token((3,)), identity_token((11,))}
    assert snapshot.source.snapshot
    assert applied(out, [(1,), (2,), (3,), (5,)]) == [(1,), (5,)]


def test_the_window_closes_where_the_binlog_passes_the_high_watermark():
    capture, read = opened()
    assert capture.staged_read_ended(read, result(high=position(6))) == []  # the loop is at 0-1-4
    out = transaction(capture, 5, row_change("d", (2,)))
    assert kinds(out) == ["RowChange"] and capture.staged_read is read
    out = transaction(capture, 6, row_change("u", (7,)))  # the last transaction of the high watermark
    assert kinds(out) == ["RowChange", "StagedSnapshot", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert out[1].dropped == {identity_token((2,)), identity_token((7,))}
    assert capture.staged_read is None and capture.phase is Phase.STREAMING


def test_collated_respellings_of_a_touched_key_are_dropped():
    """Under a _ci collation 'abc', 'ABC' and 'Abc' are one key: the sink matches identities."""
    def identity(key):
        return (key[0].lower(),)

    capture, read = opened(identity, max_key=("zzz",))
    transaction(capture, 5, row_change("u", ("ABC",)))
    out = capture.staged_read_ended(read, result(last_key=("zzz",), high=position(5)))
    assert out[0].dropped == {identity_token(("abc",))}
    assert applied(out, [("Abc",), ("abd",)], identity) == [("abd",)]


# --- checkpoints and the table's progress ----------------------------------------------------------


def test_a_checkpoint_exists_during_the_staged_window_and_keeps_the_table_before_it():
    capture, _ = opened(last_key=(3,))
    transaction(capture, 5, row_change("u", (4,)))
    gtid = Gtid.mariadb(0, 1, 6)
    capture.on_event(TransactionStart(gtid))
    assert capture.checkpoint() is None  # inside a transaction
    capture.on_event(TransactionEnd(gtid))
    checkpoint = capture.checkpoint()
    assert checkpoint is not None and checkpoint.position == position(6)
    saved = SnapshotProgress.from_json(checkpoint.progress).current
    assert saved.last_key == (3,) and saved.rows_scanned == 0
    # A restart from it reads the window's ranges again: the same read, from the same key.
    restarted = ChangeCapture(checkpoint.position, SnapshotProgress.from_json(checkpoint.progress), 3,
                              distributed=True)
    again = restarted.next_read()
    assert isinstance(again, StagedRead) and (again.after_key, again.max_key) == ((3,), (10,))


def test_the_table_goes_on_after_last_key_then_finishes_on_table_done():
    capture, read = opened()
    out = capture.staged_read_ended(read, result(rows=4, ranges=2, last_key=(6,), table_done=False,
                                                 high=position(4)))
    assert kinds(out) == ["StagedSnapshot", "IN_PROGRESS"]
    snapshot = capture.progress.current
    assert (snapshot.last_key, snapshot.rows_scanned, snapshot.chunks) == ((6,), 4, 2)
    assert capture.checkpoint().progress["queue"][0]["last_key"] == [6]
    read = capture.next_read()
    assert isinstance(read, StagedRead) and read.after_key == (6,)
    capture.staged_read_started(read, GtidWatermarks(read.position, None))
    out = capture.staged_read_ended(read, result(rows=3, ranges=1, last_key=(10,), high=position(4)))
    assert kinds(out) == ["StagedSnapshot", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert out[1].data["status"] == "SUCCEEDED" and out[1].data["total_rows_scanned"] == 7
    assert capture.progress.current is None and capture.next_read() is None


def test_a_read_that_did_not_reach_the_max_key_says_where_the_next_one_starts():
    with pytest.raises(ValueError):
        StagedResult(STAGED, 0, 1, None, table_done=False)


# --- signal watermarks ------------------------------------------------------------------------


@pytest.mark.parametrize("close_id", ["w-close", None], ids=["insert_insert", "insert_delete"])
def test_the_close_marker_before_the_result_holds_the_binlog_until_it_is_handed_in(close_id):
    capture, read = staged_capture()
    capture.staged_read_started(read, SignalWatermarks(SIGNALS, "w-open", close_id))
    transaction(capture, 5, row_change("u", (1,)))  # before the open marker: older than every range read
    transaction(capture, 6, marker("c", "w-open"))
    transaction(capture, 7, row_change("d", (2,)))
    assert capture.checkpoint() is not None
    gtid = Gtid.mariadb(0, 1, 8)
    capture.on_event(TransactionStart(gtid))
    out = capture.on_event(marker("c", "w-close") if close_id else marker("d", "w-open"))
    assert kinds(out) == ["RowChange"]  # the marker itself (for the signal channel); no rows yet
    assert capture.awaits_staged_result and capture.staged_read is read
    with pytest.raises(IllegalCall):  # later events must come after the staged rows
        capture.on_event(TransactionEnd(gtid))
    out = capture.staged_read_ended(read, result(last_key=(5,), table_done=False))
    assert kinds(out) == ["StagedSnapshot", "IN_PROGRESS"]
    assert out[0].dropped == {identity_token((2,))}
    assert not capture.awaits_staged_result and capture.window is None
    assert capture.on_event(TransactionEnd(gtid)) == []
    assert capture.checkpoint() is not None


def test_a_signal_window_handed_in_early_closes_at_its_close_marker():
    capture, read = staged_capture()
    capture.staged_read_started(read, SignalWatermarks(SIGNALS, "w-open", "w-close"))
    transaction(capture, 5, marker("c", "w-open"))
    assert capture.staged_read_ended(read, result()) == []
    out = transaction(capture, 6, row_change("u", (3,)), marker("c", "w-close"))
    # the rows before the marker's row, which follows them (the signal channel reads it)
    assert kinds(out) == ["RowChange", "StagedSnapshot", "TABLE_SCAN_COMPLETED", "COMPLETED", "RowChange"]
    assert out[1].dropped == {identity_token((3,))} and out[4].table == SIGNALS


# --- windows discarded, ranges refused ------------------------------------------------------------


@pytest.mark.parametrize("discard, next_read", [
    (lambda capture: transaction(capture, 5, "TRUNCATE TABLE t"), StagedRead),
    (lambda capture: transaction(capture, 5, "ALTER TABLE t ADD COLUMN c INT"), MaxKeyRead),  # restarts the table
    (lambda capture: capture.stop_snapshot([r"shop\.t"]), type(None)),
], ids=["truncate", "add_column", "stop_snapshot"])
def test_a_discarded_window_ignores_the_late_result(discard, next_read):
    capture, read = opened(last_key=(3,))
    capture.staged_read_progress(read, 40)
    discard(capture)
    assert capture.staged_read is None and capture.window is None and capture.phase is Phase.STREAMING
    assert capture.staged_read_ended(read, result(high=position(5))) == []  # its rows are not used
    assert capture.staged_read_refused(read, position(5), "too late") == []
    capture.staged_read_progress(read, 50)  # ignored too
    assert read.snapshot.window_rows != 50
    assert isinstance(capture.next_read(), next_read)


def test_a_refused_range_holds_the_reads_until_the_ddl_is_consumed():
    capture, read = opened()
    # A range query names a column the server dropped at 0-1-5, which the loop has not consumed.
    assert capture.staged_read_refused(read, position(5), "Unknown column 'c'") == []
    assert capture.window is None and capture.next_read() is None
    transaction(capture, 5, "ALTER TABLE t DROP COLUMN c")  # restarts the table's snapshot
    assert isinstance(capture.next_read(), MaxKeyRead)


def test_a_range_refused_again_without_ddl_in_between_fails_the_table():
    capture, read = opened()
    assert capture.staged_read_refused(read, position(5), "Unknown column 'c'") == []
    transaction(capture, 5, row_change("u", (1,), table=OTHER))  # no DDL: the query itself is wrong
    read = capture.next_read()
    assert isinstance(read, StagedRead)
    capture.staged_read_started(read, GtidWatermarks(read.position, None))
    out = capture.staged_read_refused(read, position(5), "Unknown column 'c'")
    assert kinds(out) == ["TABLE_SCAN_COMPLETED", "COMPLETED"] and out[0].data["status"] == "SQL_EXCEPTION"


# --- progress --------------------------------------------------------------------------------------


def test_window_rows_count_the_rows_staged_so_far_until_the_window_closes():
    capture, read = staged_capture(last_key=(3,))
    snapshot = read.snapshot
    snapshot.rows_scanned, snapshot.started_ms, snapshot.updated_ms, snapshot.estimated_rows = 60, 0, 2_000, 300
    capture.staged_read_started(read, GtidWatermarks(read.position, None))
    capture.staged_read_progress(read, 40)
    assert snapshot.window_rows == 40 and snapshot.rows_read() == 100
    assert snapshot.rate() == 50.0 and snapshot.eta_seconds() == 4.0  # 100 rows in 2 s; 200 rows to go
    assert TableSnapshot.from_json(snapshot.to_json()).window_rows == 40
    out = capture.staged_read_ended(read, result(rows=45, ranges=3, last_key=(9,), table_done=False,
                                                 high=position(4)))
    assert kinds(out) == ["StagedSnapshot", "IN_PROGRESS"]
    assert (snapshot.window_rows, snapshot.rows_scanned, snapshot.rows_read()) == (0, 105, 105)
    assert out[1].data["total_rows_scanned"] == 105


def test_rate_needs_a_clock_interval():
    snapshot = TableSnapshot(T, rows_scanned=10, window_rows=5, started_ms=1_000, updated_ms=1_000)
    assert snapshot.rows_read() == 15 and snapshot.rate() is None and snapshot.eta_seconds() is None


def test_window_rows_are_zero_when_no_window_is_open():
    """`rows_read()` counts `window_rows` as rows "the open window ... staged so far": with no window
    open (discarded by DDL, or after a restart from a checkpoint taken while it was open) they are
    not staged by anything under way. The checkpoint itself keeps them: `dblog status` reads it
    while the read runs."""
    capture, read = opened()
    capture.staged_read_progress(read, 40)
    checkpoint = capture.checkpoint()
    transaction(capture, 5, "TRUNCATE TABLE t")  # discards the window
    assert capture.staged_read is None and read.snapshot.window_rows == 0
    assert SnapshotProgress.from_json(checkpoint.progress).current.window_rows == 40
    restarted = ChangeCapture(checkpoint.position, SnapshotProgress.from_json(checkpoint.progress), 2,
                              distributed=True)
    assert restarted.progress.current.window_rows == 0
