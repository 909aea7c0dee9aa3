"""Blocking reads and tables read whole ahead of the stream in `ChangeCapture`: a blocking
read's chunks go out as soon as they are read, before an incremental read under way, which
then goes on; a table read whole at a GTID set past the stream's position drops the stream's
changes of that table inside the set (also after a restart from the offsets), and no others."""

from __future__ import annotations

from dblog.core.capture import ChangeCapture, ChunkRead, ChunkResult, MaxKeyRead
from dblog.core.events import RowChange, SourceInfo, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import GtidWatermarks

A, B = TableId("db", "a"), TableId("db", "b")


def _transaction(capture: ChangeCapture, seq: int, table: TableId, key: int) -> list:
    gtid = Gtid("0", seq, 1)
    out = []
    for event in (TransactionStart(gtid), RowChange(table, "c", (key,), None, {"id": key}, SourceInfo()),
                  TransactionEnd(gtid)):
        out += capture.on_event(event)
    return [item for item in out if isinstance(item, RowChange)]


def test_blocking_reads_go_first_and_emit_each_chunk_at_once():
    capture = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), chunk_size=2)
    capture.request_snapshot([TableSnapshot(A)])
    read = capture.next_read()
    capture.max_key_read(read, (10,))
    read = capture.next_read()
    later = capture.position.with_gtid(Gtid("0", 5, 1))  # an incremental window waits for its high watermark
    rows = [((1,), {"id": 1}), ((2,), {"id": 2})]
    capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, later)))
    capture.request_snapshot([TableSnapshot(B, blocking=True)])
    assert capture.next_read() is None  # the open window first
    for seq in range(1, 6):
        _transaction(capture, seq, A, 100 + seq)
    assert capture.window is None
    read = capture.next_read()
    assert isinstance(read, MaxKeyRead) and read.snapshot.table == B  # ahead of A's read under way
    capture.max_key_read(read, (3,))
    emitted = []
    while (read := capture.next_read()) is not None and read.snapshot.table == B:
        assert isinstance(read, ChunkRead)
        after = read.after_key[0] if read.after_key else 0
        rows = [((key,), {"id": key}) for key in range(after + 1, min(after + read.limit, 3) + 1)]
        # no binlog event in between: the high watermark is far ahead, yet the rows go out now
        out = capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, later.with_gtid(
            Gtid("0", 99, 1)))))
        emitted += [item.key for item in out if isinstance(item, RowChange)]
    assert emitted == [(1,), (2,), (3,)]
    assert read is not None and read.snapshot.table == A and read.after_key == (2,)  # A goes on


def test_a_table_read_whole_ahead_drops_the_changes_its_rows_hold():
    capture = ChangeCapture(GtidSet.parse("0-1-10"), SnapshotProgress(), chunk_size=10)
    capture.request_snapshot([TableSnapshot(A)])
    read = capture.next_read()
    out = capture.read_whole(read, [((), {"id": 1}), ((), {"id": 2})], GtidSet.parse("0-1-12"))
    assert [item.op for item in out if isinstance(item, RowChange)] == ["r", "r"]
    assert capture.progress.current is None and capture.progress.read_ahead == {"db.a": "0-1-12"}
    # restarted from the offsets here: the rule survives
    restarted = ChangeCapture(capture.checkpoint().position, SnapshotProgress.from_json(capture.checkpoint().progress),
                              chunk_size=10)
    for machine in (capture, restarted):
        assert _transaction(machine, 11, A, 1) == []  # in the read's rows already
        assert [change.table for change in _transaction(machine, 12, B, 1)] == [B]  # another table: streamed
        assert machine.progress.read_ahead == {}  # passed
        assert [change.key for change in _transaction(machine, 13, A, 7)] == [(7,)]  # after the read: streamed


def test_a_blocking_read_restarted_from_the_offsets_goes_on_from_its_last_chunk_at_the_same_position():
    """A crash mid-blocking read: the checkpoint between its chunks holds the position where
    the stream paused and the read's progress; restarted from it, the read goes on (still
    blocking, still first), the stream still paused there."""
    capture = ChangeCapture(GtidSet.parse("0-1-7"), SnapshotProgress(), chunk_size=2)
    capture.request_snapshot([TableSnapshot(A), TableSnapshot(B, blocking=True, select="SELECT * FROM db.b")])
    read = capture.next_read()
    assert read.snapshot.table == B
    capture.max_key_read(read, (9,))
    read = capture.next_read()
    capture.chunk_read(read, ChunkResult([((1,), {"id": 1}), ((2,), {"id": 2})],
                                         GtidWatermarks(capture.position, capture.position)))
    checkpoint = capture.checkpoint()
    assert checkpoint.position == GtidSet.parse("0-1-7")
    restarted = ChangeCapture(checkpoint.position, SnapshotProgress.from_json(checkpoint.progress), chunk_size=2)
    read = restarted.next_read()
    assert isinstance(read, ChunkRead) and read.snapshot.table == B and read.after_key == (2,)
    assert read.snapshot.blocking and read.snapshot.select == "SELECT * FROM db.b"


def test_a_blocking_read_stopped_midway_drops_nothing_of_the_stream():
    """Its keys not read get no row: their changes inside its snapshot must be streamed."""
    capture = ChangeCapture(GtidSet.parse("0-1-7"), SnapshotProgress(), chunk_size=2)
    capture.request_snapshot([TableSnapshot(A, blocking=True)])
    read = capture.next_read()
    capture.max_key_read(read, (9,))
    capture.read_ahead(A, GtidSet.parse("0-1-9"))  # what the engine's consistent snapshot saw
    read = capture.next_read()
    capture.chunk_read(read, ChunkResult([((1,), {"id": 1}), ((2,), {"id": 2})],
                                         GtidWatermarks(capture.position, capture.position)))
    assert capture.stop_snapshot([r"db\.a"])
    assert capture.progress.read_ahead == {}
    assert [change.key for change in _transaction(capture, 8, A, 5)] == [(5,)]
