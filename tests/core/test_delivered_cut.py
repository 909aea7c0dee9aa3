"""DeliveredCut (dblog.core.delivered_cut): the delivered prefix of the first transaction after
the offsets' position is dropped, nothing else; and it round-trips through the offsets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dblog.core.delivered_cut import DeliveredCut, without_delivered
from dblog.core.events import RowChange, SourceInfo, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.offsets import Offsets

T = TableId("shop", "t")


def _transaction(file: str, start: int, rows_per_event: list[int], sequence: int):
    """A transaction starting at `start`: its rows events end 100 bytes apart."""
    gtid = Gtid.parse(f"0-1-{sequence}")
    events: list = [TransactionStart(gtid, file=file, pos=start)]
    for number, rows in enumerate(rows_per_event):
        end = start + 100 * (number + 1)
        events += [RowChange(T, "c", (end, row), None, {"id": row}, SourceInfo(str(gtid), file, end, row))
                   for row in range(rows)]
    return events + [TransactionEnd(gtid)]


@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.data())
def test_the_changes_before_the_cut_are_dropped_and_only_in_the_first_transaction(rows_per_event, data):
    first = _transaction("binlog.000002", 1000, rows_per_event, 5)
    second = _transaction("binlog.000002", 1000 + 100 * (len(rows_per_event) + 1), rows_per_event, 6)
    changes = [event for event in first if type(event) is RowChange]
    delivered = data.draw(st.integers(0, len(changes)), label="changes delivered")
    if delivered < len(changes):
        cut = DeliveredCut("binlog.000002", 1000, changes[delivered].source.pos, changes[delivered].source.row)
    else:
        cut = DeliveredCut("binlog.000002", 1000, first[-2].source.pos + 1, 0)
    out = list(without_delivered(first + second, cut))
    assert out == [first[0], *changes[delivered:], first[-1], *second]


def test_another_files_changes_at_the_same_positions_are_kept():
    events = _transaction("binlog.000003", 1000, [3], 5)
    cut = DeliveredCut("binlog.000002", 1000, 1100, 2)
    assert list(without_delivered(events, cut)) == events


def test_the_cut_round_trips_through_the_offsets_document():
    cut = DeliveredCut("binlog.000002", 1000, 1300, 2)
    offsets = Offsets("mariadb", GtidSet.parse("0-1-4", "mariadb"), delivered=cut)
    assert Offsets.from_json(offsets.to_json()).delivered == cut
    plain = Offsets("mariadb", GtidSet.parse("0-1-4", "mariadb"))
    assert "delivered" not in plain.to_json() and Offsets.from_json(plain.to_json()).delivered is None
