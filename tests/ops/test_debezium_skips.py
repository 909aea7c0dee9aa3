"""Debezium's `event`/`row` skips as a cut (dblog.runtime.debezium_skips), checked against a model
of Debezium itself: BinlogStreamingChangeEventSource and BinlogOffsetContext as they count
(`completeEvent` after each event, the BEGIN included; `setRowNumber` while emitting a rows
event's rows; the offset a heartbeat carries between events) and as they restart
(`initialEventsToSkip` events skipped from the BEGIN on, then `startingRowNumber` rows of the next
rows event handled). For every offset Debezium can commit inside a transaction, the changes dblog
keeps of it are exactly those Debezium itself would emit again on restart."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.runtime.debezium_skips import (Annotations, LoggedEvent, SkipsUnknown, cut_after_event, delivered_cut,
                                          open_transaction)

FILE = "binlog.000004"
START = 4000


@dataclass(frozen=True)
class Statement:
    captured: bool
    rows_events: tuple[int, ...]  # rows per event (a statement's rows split over events)


def _logged(flavor: str, statements: list[Statement], annotated: bool):
    """The transaction's binlog events as SHOW BINLOG EVENTS lists them, each rows event with its
    (row count, captured)."""
    kinds: list[tuple[str, str, tuple[int, bool] | None]] = [("Gtid", "BEGIN GTID 0-1-9", None) if flavor == "mariadb"
                                                      else ("Query", "BEGIN", None)]
    rows_kind = "Write_rows_v1" if flavor == "mariadb" else "Update_rows"
    for statement in statements:
        if annotated:
            kinds.append(("Annotate_rows" if flavor == "mariadb" else "Rows_query", "INSERT …", None))
        kinds.append(("Table_map", "table_id: 7", None))
        kinds += [(rows_kind, "flags: STMT_END_F", (rows, statement.captured)) for rows in statement.rows_events]
    kinds.append(("Xid", "COMMIT /* xid=1 */", None))
    events, position = [], START
    for kind, info, statement in kinds:
        events.append((LoggedEvent(position, position + 50, kind, info), statement))
        position += 50
    return events


def _rows(events) -> list[tuple[int, int, bool]]:
    """Per rows event in order: its index in `events`, row count, whether captured."""
    return [(index, *rows) for index, (_, rows) in enumerate(events) if rows is not None]


def _received(events, annotations_sent: bool):
    return [(logged, rows) for logged, rows in events
            if annotations_sent or logged.kind != "Annotate_rows"]


def _debezium_offsets(received) -> set[tuple[int, int]]:
    """Every (event, row) Debezium's offset can hold inside this transaction: each emitted record's,
    and a heartbeat's after each event (BinlogStreamingChangeEventSource.handleEvent)."""
    sizes = {index: (rows, captured) for index, rows, captured in _rows(received)}
    offsets, done = set(), 0
    for index, _ in enumerate(received):
        if index in sizes and sizes[index][1]:
            rows = sizes[index][0]
            offsets |= {(done, number + 1 if number < rows - 1 else rows) for number in range(rows)}
        offsets.add((done, 0))  # a heartbeat: rows reset by changeEventCompleted, the event not yet counted
        done += 1
    return offsets


def _debezium_restart(received, event: int, row: int) -> set[tuple[int, int]]:
    """(end position, row) of the rows Debezium emits when it restarts with `event`, `row`."""
    sizes = {index: (rows, captured) for index, rows, captured in _rows(received)}
    to_skip, starting_row, skipping, emitted = event, row, False, set()
    for index, (logged, _) in enumerate(received):
        if index == 0 and to_skip:  # handleTransactionBegin
            skipping = True
        elif index in sizes and not skipping:  # handleChange
            rows, captured = sizes[index]
            if captured:
                emitted |= {(logged.end, number) for number in range(starting_row, rows)}
            starting_row = 0
        if skipping:
            to_skip -= 1
            skipping = to_skip > 0
    return emitted


def _kept(events, cut) -> set[tuple[int, int]]:
    """What dblog emits of the transaction: its captured rows the cut does not say were delivered."""
    kept = set()
    for index, rows, captured in _rows(events):
        logged = events[index][0]
        for number in range(rows):
            change = RowChange(TableId("d", "t"), "c", (number,), None, {}, SourceInfo("0-1-9", FILE, logged.end, number))
            if captured and not cut.delivered(change):
                kept.add((logged.end, number))
    return kept


statements = st.lists(st.builds(Statement, st.booleans(), st.lists(st.integers(1, 4), min_size=1, max_size=3)
                                .map(tuple)), min_size=1, max_size=5)


@given(st.sampled_from(["mariadb", "mysql"]), statements, st.booleans(), st.booleans(), st.data())
def test_dblog_keeps_what_debezium_would_emit_again(flavor, statements, annotated, sent, data):
    events = _logged(flavor, statements, annotated)
    # MySQL sends its Rows_query events to every client; MariaDB its ANNOTATE_ROWS when asked
    sent = sent or flavor == "mysql"
    received = _received(events, sent)
    event, row = data.draw(st.sampled_from(sorted(_debezium_offsets(received))), label="Debezium's offset")
    listed = [logged for logged, _ in events][:event + 16]  # as much as the take-over reads
    truth = _debezium_restart(received, event, row)
    known = Annotations.SENT if sent else Annotations.NOT_SENT
    cut, note = delivered_cut(FILE, listed, event, row, known)
    assert note is None and _kept(events, cut) == truth
    cut, note = delivered_cut(FILE, listed, event, row, Annotations.UNKNOWN)
    kept = _kept(events, cut)
    assert kept >= truth  # never a change lost
    if note is None:
        assert kept == truth


def test_an_offset_from_a_record_tells_whether_annotations_were_counted():
    """MariaDB's ANNOTATE_ROWS before each statement: Debezium's MariaDB connector counts them
    only with include.query=true. An offset written while emitting a row points at a rows event
    one way only."""
    two = [Statement(True, (3,)), Statement(True, (2,))]
    events = [logged for logged, _ in _logged("mariadb", two, annotated=True)]
    # Gtid, Annotate, Table_map, Write_rows(3), Annotate, Table_map, Write_rows(2), Xid
    cut, note = delivered_cut(FILE, events, 2, 1, Annotations.UNKNOWN)  # without: event 2 is the first rows event
    assert note is None and (cut.pos, cut.rows) == (events[3].end, 1)
    cut, note = delivered_cut(FILE, events, 3, 1, Annotations.UNKNOWN)  # with: event 3 is the first rows event
    assert note is None and (cut.pos, cut.rows) == (events[3].end, 1)
    cut, note = delivered_cut(FILE, events, 3, 0, Annotations.UNKNOWN)  # a heartbeat's: both fit, the lesser wins
    assert note is not None and (cut.pos, cut.rows) == (events[3].end, 0)


@pytest.mark.parametrize("events, says", [
    ([LoggedEvent(4, 50, "Query", "BEGIN"), LoggedEvent(50, 900, "Transaction_payload")], "compressed"),
    ([LoggedEvent(4, 50, "Query", "BEGIN"), LoggedEvent(50, 90, "Table_map")], "end before"),
    ([], "no binlog events"),
])
def test_counts_that_cannot_be_placed_are_said(events, says):
    with pytest.raises(SkipsUnknown, match=says):
        delivered_cut(FILE, events, 3, 1, Annotations.NOT_SENT)


@given(statements, st.booleans(), st.data())
def test_an_offset_without_an_event_count_skips_what_was_emitted(statements, annotated, data):
    """Debezium's MySQL connector on MariaDB sees no transaction start: each record's offset is the
    end of its rows event and the rows emitted of it (BinlogOffsetContext.setEventPosition outside
    a transaction, setRowNumber). dblog keeps exactly the rows after the record."""
    events = _logged("mariadb", statements, annotated)
    emitted = [(events[index][0].end, number) for index, rows, captured in _rows(events) if captured
               for number in range(rows)]
    if not emitted:
        return
    last = data.draw(st.integers(0, len(emitted) - 1), label="the last record Debezium emitted")
    pos, number = emitted[last]
    rows = next(rows for index, rows, _ in _rows(events) if events[index][0].end == pos)
    offset_row = number + 1 if number < rows - 1 else rows
    cut = cut_after_event(FILE, open_transaction([logged for logged, _ in events if logged.end <= pos]).start, pos,
                          offset_row)
    assert _kept(events, cut) == set(emitted[last + 1:])


def _groups(flavor: str, kind: str, size: int) -> list[list[tuple[str, str]]]:
    """The event groups of one transaction as SHOW BINLOG EVENTS lists them (Event_type, Info): a
    transaction of `size` rows events, a DDL statement, or an XA transaction prepared, then
    committed (dblog.runtime.debezium_skips: the forms and where MySQL's are from; MariaDB's as
    10.11 lists them)."""
    xid = "X'7831',X'',1"
    rows = [("Write_rows_v1" if flavor == "mariadb" else "Write_rows", "table_id: 7 flags: STMT_END_F")] * size
    if flavor == "mariadb":  # the GTID event says what follows
        begin, standalone = [("Gtid", "BEGIN GTID 0-1-1")], [("Gtid", "GTID 0-1-2")]
        xa_start, ddl = [("Gtid", f"XA START {xid} GTID 0-1-1")], "CREATE TABLE x (a INT)"
    else:  # the statement after the GTID event says it
        gtid = ("Anonymous_Gtid", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'")
        begin, standalone = [gtid, ("Query", "BEGIN"), ("Rows_query", "# INSERT …")], [gtid]
        xa_start, ddl = [gtid, ("Query", f"XA START {xid}")], "use `shop`; CREATE TABLE x (a INT)"
    return {"transaction": [begin + rows + [("Xid", "COMMIT /* xid=1 */")]],
            "ddl": [standalone + [("Query", ddl)]],
            "xa": [xa_start + rows + [("Query", f"XA END {xid}"), ("XA_prepare", f"XA PREPARE {xid}")],
                   standalone + [("Query", f"XA COMMIT {xid}")]]}[kind]


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@given(data=st.data())
def test_the_transaction_open_at_a_position_is_found_across_reads(flavor, data):
    """MySQL's and MariaDB's binlog events of transactions, DDL statements and XA transactions,
    read in pages: the transaction open at each event boundary."""
    kinds = st.tuples(st.sampled_from(["transaction", "ddl", "xa"]), st.integers(0, 4))
    transactions = data.draw(st.lists(kinds, min_size=1, max_size=6), label="transactions")
    events, opened, position = [], [None], 4  # opened[i]: the transaction open after events[:i]
    for kind, size in transactions:
        for group in _groups(flavor, kind, size):
            start = position
            for number, (event_type, info) in enumerate(group):
                events.append(LoggedEvent(position, position + 40, event_type, info))
                position += 40
                opened.append(start if number < len(group) - 1 else None)
    boundary = data.draw(st.integers(0, len(events)), label="position")
    page = data.draw(st.integers(1, 5), label="events per read")
    state = None
    for first in range(0, boundary, page):
        state = open_transaction(events[first:min(first + page, boundary)], state)
    assert (state.start if state is not None else None) == opened[boundary]
