"""Debezium's initial-snapshot markers on the startup snapshot's rows (`snapshot.initial_markers`):
`dblog.core.capture.initial_marker` and where the capture puts them while tables go out chunk by
chunk in windows. The rules are Debezium 3.6's, seen on its own initial snapshot of the same
shapes of tables (tests/sinks/kafka/test_connect_snapshot_differential.py compares the two)."""

from __future__ import annotations

import pytest

from dblog.core.capture import ChangeCapture, ChunkResult, MaxKeyRead, initial_marker
from dblog.core.events import RowChange, SourceInfo, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import GtidWatermarks
from dblog.sinks.envelope import source_block


def test_the_marker_of_each_place_as_debezium_orders_them():
    # last wins over first; a table's only row is its last; first only in the first table
    assert initial_marker(True, True, True, True) == "last"
    assert initial_marker(True, False, True, True) == "first"
    assert initial_marker(False, False, True, True) == "last_in_data_collection"
    assert initial_marker(False, True, True, False) == "first_in_data_collection"
    assert initial_marker(True, True, False, False) == "true"
    assert initial_marker(False, True, False, True) == "last"


def snapshot_rows(tables: dict[str, list[int]], chunk_size: int, markers: bool = True,
                  touched: dict[str, int] | None = None) -> list[tuple[str, int, str | None]]:
    """Run the startup snapshot of `tables` (name -> keys) through the capture, each chunk's
    window closing at once, or, for `touched` (name -> key), after an update of that key read
    inside the window; the (table, key, marker) of each snapshot row, in emission order."""
    ids = {name: TableId("db", name) for name in tables}
    capture = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), chunk_size)
    capture.request_snapshot([TableSnapshot(ids[name], initial_order=order if markers else None)
                              for order, name in enumerate(tables, 1)], "initial")
    out = []
    sequence = 0
    while (read := capture.next_read()) is not None:
        keys = sorted(tables[read.snapshot.table.table])
        if isinstance(read, MaxKeyRead):  # and, as the engine does, the later tables' emptiness
            empty = 0
            while empty < len(read.later) and not tables[read.later[empty].table.table]:
                empty += 1
            out += capture.max_key_read(read, (keys[-1],) if keys else None, empty)
            continue
        after = read.after_key[0] if read.after_key is not None else None
        rows = [((key,), {"id": key}) for key in keys if (after is None or key > after) and key <= read.max_key[0]]
        rows = rows[:read.limit]
        key = (touched or {}).get(read.snapshot.table.table)
        if key is None or key not in [row[0][0] for row in rows]:
            out += capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, capture.position)))
            continue
        sequence += 1
        gtid = Gtid("0", sequence, 1)
        out += capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position,
                                                                         capture.position.with_gtid(gtid))))
        table = read.snapshot.table
        for event in (TransactionStart(gtid), RowChange(table, "u", (key,), {"id": key}, {"id": key}, SourceInfo()),
                      TransactionEnd(gtid)):
            out += capture.on_event(event)
    return [(change.table.table, change.key[0], change.source.initial_marker)
            for change in out if isinstance(change, RowChange) and change.op == "r"]


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 100])
def test_rows_are_marked_as_debezium_marks_them_whatever_the_chunks(chunk_size):
    # As Debezium 3.6 marked the same tables (an empty first table: no row says `first`)
    assert snapshot_rows({"a": [], "b": [1, 2, 3], "c": [1], "d": [1, 2]}, chunk_size) == [
        ("b", 1, "first_in_data_collection"), ("b", 2, "true"), ("b", 3, "last_in_data_collection"),
        ("c", 1, "last_in_data_collection"),
        ("d", 1, "first_in_data_collection"), ("d", 2, "last")]
    assert snapshot_rows({"a": [1], "b": [1, 2], "c": [1]}, chunk_size) == [
        ("a", 1, "first"), ("b", 1, "first_in_data_collection"), ("b", 2, "last_in_data_collection"),
        ("c", 1, "last")]
    assert snapshot_rows({"a": [5]}, chunk_size) == [("a", 5, "last")]
    # Empty tables after the last one with rows: its last row is the snapshot's `last`, as
    # Debezium marks it (it holds back each row until the next one)
    assert snapshot_rows({"a": [], "b": [1, 2, 3], "c": [1], "d": [1, 2], "e": []}, chunk_size)[-1] == ("d", 2, "last")
    assert snapshot_rows({"a": [1, 2], "b": [], "c": [], "d": [4], "e": [], "f": []}, chunk_size) == [
        ("a", 1, "first"), ("a", 2, "last_in_data_collection"), ("d", 4, "last")]
    assert snapshot_rows({"a": [1, 2], "b": [], "c": []}, chunk_size) == [("a", 1, "first"), ("a", 2, "last")]
    assert snapshot_rows({"a": list(range(1, 6))}, chunk_size) == [
        ("a", 1, "first"), *(("a", key, "true") for key in range(2, 5)), ("a", 5, "last")]


def test_a_table_whose_first_or_last_row_the_log_took_marks_the_rows_it_emits():
    # The update of key 1 (resp. 3) inside its window drops that row: the log's change is newer.
    # The table's first (last) row emitted is the next one.
    assert snapshot_rows({"a": [1, 2, 3], "b": [1]}, 1, touched={"a": 1}) == [
        ("a", 2, "first"), ("a", 3, "last_in_data_collection"), ("b", 1, "last")]
    assert snapshot_rows({"a": [1, 2, 3]}, 2, touched={"a": 3}) == [("a", 1, "first"), ("a", 2, "true")]


def test_without_the_setting_rows_are_incremental():
    rows = snapshot_rows({"a": [1, 2], "b": [1]}, 1, markers=False)
    assert [marker for *_, marker in rows] == [None, None, None]
    assert source_block(SourceInfo(snapshot=True), TableId("db", "a"), "shop", 0)["snapshot"] == "incremental"
    assert source_block(SourceInfo(snapshot=True, initial_marker="first"), TableId("db", "a"), "shop",
                        0)["snapshot"] == "first"
    assert source_block(SourceInfo(), TableId("db", "a"), "shop", 0)["snapshot"] == "false"


def test_a_table_queued_by_a_signal_during_the_startup_snapshot_is_not_marked():
    ids = [TableId("db", name) for name in "ab"]
    capture = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), 10)
    capture.request_snapshot([TableSnapshot(ids[0], initial_order=1)], "initial")
    capture.request_snapshot([TableSnapshot(ids[1])], "signal")
    out = []
    while (read := capture.next_read()) is not None:
        if isinstance(read, MaxKeyRead):
            out += capture.max_key_read(read, (2,))
        else:
            rows = [((key,), {"id": key}) for key in (1, 2)]
            out += capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(capture.position, capture.position)))
    assert [(c.table.table, c.source.initial_marker) for c in out if isinstance(c, RowChange)] == [
        ("a", "first"), ("a", "last"), ("b", None), ("b", None)]


def test_the_markers_survive_a_restart_from_the_offsets():
    entry = TableSnapshot(TableId("db", "a"), initial_order=2)
    assert TableSnapshot.from_json(entry.to_json()).initial_order == 2
    entry.started, entry.max_key, entry.last_key, entry.rows_emitted = True, (9,), (3,), 3
    back = TableSnapshot.from_json(entry.to_json())
    assert back.initial_order == 2 and back.rows_emitted == 3
    assert "initial_order" not in TableSnapshot(TableId("db", "a")).to_json()


def test_the_empty_tables_after_a_table_are_done_when_it_starts():
    ids = {name: TableId("db", name) for name in "abcd"}
    capture = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), 10)
    capture.request_snapshot([TableSnapshot(ids[name], initial_order=order) for order, name in enumerate("abcd", 1)],
                             "initial")
    read = capture.next_read()
    assert isinstance(read, MaxKeyRead) and [entry.table for entry in read.later] == [ids["b"], ids["c"], ids["d"]]
    done = capture.max_key_read(read, (3,), empty_after=2)  # b and c have no row; d has
    assert [(n.type, n.data["data_collection"], n.data["status"]) for n in done] == [
        ("TABLE_SCAN_COMPLETED", "db.b", "EMPTY"), ("TABLE_SCAN_COMPLETED", "db.c", "EMPTY")]
    assert [entry.table for entry in capture.progress.queue] == [ids["a"], ids["d"]]
    assert capture.progress.completed_tables == ["db.b", "db.c"]
    # A table of another request is not asked about, nor one read without markers
    plain = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), 10)
    plain.request_snapshot([TableSnapshot(ids["a"]), TableSnapshot(ids["b"])], "initial")
    assert plain.next_read().later == ()


def test_a_later_table_emptied_meanwhile_leaves_the_snapshot_without_last():
    # b had rows when a started, none when its own turn came: a's last row was already out,
    # marked last_in_data_collection (Debezium's blocking snapshot cannot meet this)
    ids = {name: TableId("db", name) for name in "ab"}
    capture = ChangeCapture(GtidSet.empty("mariadb"), SnapshotProgress(), 10)
    capture.request_snapshot([TableSnapshot(ids["a"], initial_order=1), TableSnapshot(ids["b"], initial_order=2)],
                             "initial")
    out = capture.max_key_read(capture.next_read(), (1,), empty_after=0)
    read = capture.next_read()
    out += capture.chunk_read(read, ChunkResult([((1,), {"id": 1})], GtidWatermarks(capture.position,
                                                                                    capture.position)))
    out += capture.max_key_read(capture.next_read(), None)
    assert [c.source.initial_marker for c in out if isinstance(c, RowChange)] == ["first"]
    assert [n.type for n in out if not isinstance(n, RowChange)][-1] == "COMPLETED"
