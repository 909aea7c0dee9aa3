"""The part of the first transaction after the offsets' position that was already delivered.

A tool dblog takes over from (Debezium: its offset's `event` and `row`) may have stopped inside a
transaction, after sending some of its changes. dblog's position is a set of whole
transactions, so that transaction is read again; `DeliveredCut` says which of its changes to
drop: those logged before a binlog coordinate. The binlog is in commit order and a rows event's
rows come in their order, so "delivered" is a prefix of the transaction: every change of a rows
event ending before `pos`, and the first `rows` rows of the event ending at `pos` (changes carry
their rows event's end position and their row's index in it, `SourceInfo.pos` and `.row`).

The cut concerns one transaction, the one starting at `file`:`start`: `without_delivered` drops
its delivered changes and passes everything after its end untouched. It is kept in the offsets
while their position is still the one it was made for (a checkpoint lies between transactions:
with that position, the transaction has not ended yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from dblog.core.events import BinlogEvent, RowChange, TransactionEnd


@dataclass(frozen=True)
class DeliveredCut:
    file: str
    start: int  # where the transaction's first event starts
    pos: int  # the end position of the rows event the cut lies in (or of the transaction's end)
    rows: int  # of that event's rows, how many were delivered

    def delivered(self, change: RowChange) -> bool:
        source = change.source
        if source.file != self.file or source.pos is None or source.pos <= self.start:
            return False
        return (source.pos, source.row) < (self.pos, self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "start": self.start, "pos": self.pos, "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeliveredCut:
        """KeyError, TypeError or ValueError when `data` is not what `to_json` wrote."""
        cut = cls(str(data["file"]), int(data["start"]), int(data["pos"]), int(data["rows"]))
        if not cut.start < cut.pos or cut.rows < 0:
            raise ValueError(f"not a delivered cut: {data}")
        return cut


def without_delivered(events: Iterable[BinlogEvent], cut: DeliveredCut) -> Iterator[BinlogEvent]:
    """`events` without the changes `cut` says were delivered, up to the first transaction's end;
    everything after it as it comes."""
    iterator = iter(events)
    for event in iterator:
        if type(event) is RowChange and cut.delivered(event):
            continue
        yield event
        if type(event) is TransactionEnd:
            break
    yield from iterator
