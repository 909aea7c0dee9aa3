"""What the capture (dblog.core.capture), its model test and the sinks assume of the events
`BinlogSource` yields, as an executable check.

`BinlogContract.check(event)` takes the events one by one, as the engine does, and raises
`ContractBroken` at the first one the assumptions do not allow. The same check runs over the
real adapter's output (tests/mysql/test_binlog_contract.py: a private MariaDB, and encoded MySQL
events for every kind of transaction MySQL logs) and over the log the model test draws
(tests/core/test_capture_model.py), so the model cannot assume what the adapter does not do.

The contract:

* Shape: `Heartbeat` only between transactions; a transaction is `TransactionStart`, its
  events, `TransactionEnd` of the same GTID; no Start while one is open (a connection cut
  inside a transaction is invisible: its rest follows, never a second Start).
* No transaction twice: a GTID is started at most once, never one the start position holds,
  whatever connections were lost and re-made.
* A `SchemaChange` is the first event of its transaction and the only one of its kind; rows
  may follow it (CREATE TABLE ... SELECT), never precede it.
* Every row carries its committing transaction's coordinates: `source.gtid` is the open
  transaction's GTID (for XA, the XA COMMIT's, not the XA PREPARE's), and its position is at
  or after that transaction's Start.
* Positions never run backwards, and a row's (file, pos, row) is unique: each row is after
  the row before it; a `TransactionEnd.commit` is at or after its transaction's rows.
* After an End, the source's `position` holds its GTID (when the caller passes it).
"""

from __future__ import annotations

from dblog.core.events import Heartbeat, RowChange, SchemaChange, TransactionEnd, TransactionStart
from dblog.core.file_positions import transaction_end
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate


class ContractBroken(AssertionError):
    """An event the adapter's contract does not allow."""


def _at(file: str, pos: int) -> tuple[int, int]:
    coordinate = BinlogCoordinate.of(file, pos)
    return coordinate.sequence, coordinate.pos


class BinlogContract:
    def __init__(self, start: GtidSet | None = None, file_positions: bool = False) -> None:
        self.start = start
        self.file_positions = file_positions
        self.started: set[Gtid] = set()
        self.open: TransactionStart | None = None
        self.events_in_open = 0
        self.schema_changes_in_open = 0
        self.last_row: tuple | None = None  # (file number, pos, row) of the last row yielded
        self.last_position: tuple | None = None  # (file number, pos) of the last event with a file
        self.transactions = 0
        self.rows = 0

    def check_all(self, events) -> "BinlogContract":
        for event in events:
            self.check(event)
        return self

    def check(self, event, position: GtidSet | None = None) -> None:
        kind = type(event)
        if kind is Heartbeat:
            if self.open is not None:
                self._broken(f"a heartbeat inside transaction {self.open.gtid}")
        elif kind is TransactionStart:
            self._start(event)
        elif kind is RowChange:
            self._row(event)
        elif kind is SchemaChange:
            self._schema_change(event)
        elif kind is TransactionEnd:
            self._end(event, position)
        else:
            self._broken(f"an event of unknown kind {kind.__name__}")

    def _start(self, start: TransactionStart) -> None:
        if self.open is not None:
            self._broken(f"transaction {start.gtid} starts inside transaction {self.open.gtid}")
        if start.gtid in self.started:
            self._broken(f"transaction {start.gtid} is yielded a second time")
        if self.start is not None and start.gtid in self.start:
            self._broken(f"transaction {start.gtid} is in the start position {self.start}")
        self.started.add(start.gtid)
        self.open, self.events_in_open, self.schema_changes_in_open = start, 0, 0
        if start.file is not None and start.pos is not None:
            self._advance(start.file, start.pos, f"transaction {start.gtid}'s start")

    def _row(self, change: RowChange) -> None:
        if self.open is None:
            self._broken(f"a row of {change.table} outside any transaction")
        source = change.source
        # (file-position mode: records carry no GTID, dblog.core.file_positions)
        if source.gtid != str(self.open.gtid) and not (source.gtid is None and self.file_positions):
            self._broken(f"a row of {change.table} inside transaction {self.open.gtid} carries GTID {source.gtid}: "
                         "rows must carry the coordinates of the transaction that commits them")
        # The model's rows carry no file, only a position that grows with the log: they are
        # ordered among themselves, not against transaction coordinates.
        positioned = source.file is not None and source.pos is not None
        start = self.open
        if positioned and start.file is not None and _at(source.file, source.pos) < _at(start.file, start.pos):
            self._broken(f"a row of transaction {start.gtid} is at {source.file}:{source.pos}, "
                         f"before the transaction's start at {start.file}:{start.pos}")
        if source.pos is not None:
            here = (*(_at(source.file, source.pos) if source.file else (0, source.pos)), source.row)
            if self.last_row is not None and here <= self.last_row:
                self._broken(f"row {source.file}:{source.pos}#{source.row} of {start.gtid} is not after the row "
                             f"before it {self.last_row}: positions run backwards or repeat")
            self.last_row = here
        if positioned:
            self._advance(source.file, source.pos, f"a row of {start.gtid}")
        self.events_in_open += 1
        self.rows += 1

    def _schema_change(self, change: SchemaChange) -> None:
        if self.open is None:
            self._broken(f"a schema change ({change.sql[:60]!r}) outside any transaction")
        if change.gtid != self.open.gtid:
            self._broken(f"a schema change of {change.gtid} inside transaction {self.open.gtid}")
        if self.events_in_open or self.schema_changes_in_open:
            self._broken(f"a schema change ({change.sql[:60]!r}) after other events of transaction {self.open.gtid}: "
                         "DDL is alone in its transaction, or first (CREATE TABLE ... SELECT)")
        self.schema_changes_in_open += 1

    def _end(self, end: TransactionEnd, position: GtidSet | None) -> None:
        if self.open is None:
            self._broken(f"transaction {end.gtid} ends without a start")
        if self.file_positions:
            # named where it starts, it ends where it ends: past its start (dblog.core.file_positions)
            if not (end.gtid.seq % 2 == 0 and end.gtid.seq > self.open.gtid.seq):
                self._broken(f"transaction {self.open.gtid} ends as {end.gtid}, not past its start")
            if end.commit is not None and end.gtid != transaction_end(end.commit):
                self._broken(f"transaction {self.open.gtid} ends as {end.gtid}, not at its commit {end.commit}")
        elif end.gtid != self.open.gtid:
            self._broken(f"transaction {self.open.gtid} ends as {end.gtid}")
        if end.commit is not None:
            self._advance(end.commit.file, end.commit.pos, f"transaction {end.gtid}'s commit")
        if position is not None and (end.gtid not in position or self.open.gtid not in position):
            self._broken(f"after transaction {end.gtid} ended the source's position {position} does not hold it")
        self.open = None
        self.transactions += 1

    def _advance(self, file: str, pos: int, what: str) -> None:
        here = _at(file, pos)
        if self.last_position is not None and here < self.last_position:
            self._broken(f"{what} is at {file}:{pos}, before an event yielded earlier ({self.last_position})")
        self.last_position = here

    @staticmethod
    def _broken(message: str) -> None:
        raise ContractBroken(message)
