"""Debezium's `event` and `row` skips as a binlog coordinate (dblog.core.delivered_cut).

Pure: the binlog events of the transaction Debezium stopped inside (`SHOW BINLOG EVENTS` from its
offset's `file`/`pos`, read by dblog.runtime.debezium_offsets) and the offset's counts in, the cut
out. How Debezium counts (BinlogStreamingChangeEventSource, BinlogOffsetContext):

- The transaction's first event (MySQL's BEGIN query; MariaDB's GTID event, which a client that
  does not announce MariaDB's GTID capability, as Debezium's MySQL connector, receives as a BEGIN)
  starts it: `startNextTransaction` sets the offset's `pos` there and both counts to 0.
- Every event the connector receives after that adds 1 to `event` once handled (`completeEvent`),
  the first event included: table maps, MySQL's Rows_query events, and rows events of tables it
  does not capture too. MariaDB sends ANNOTATE_ROWS events only to a client that asks for them:
  Debezium's MariaDB connector with `include.query=true`; the MySQL connector never.
- While it emits a rows event's rows, `row` is how many it emitted (the event not yet counted).
- On restart it skips the first `event` events of that transaction, then the first `row` rows of
  the next rows event it handles (`restart_events_to_skip`, `restart_rows_to_skip`).

So Debezium delivered every rows event among the first `event` events, and the first `row` rows
of the first rows event after them: a cut at that rows event's end position and `row` (or, when
the transaction ends first, at its end).

Debezium's MySQL connector on MariaDB does not recognise MariaDB's GTID events as a transaction's
start (its binlog client announces MariaDB's GTID capability, so no BEGIN comes): outside a
transaction as far as it knows, each event moves the offset's `pos` to that event's end
(`setEventPosition`) with no `event` count, and `row` counts the rows emitted of the rows event
ending there (`cut_after_event`). Its own restart would skip `row` rows of the event after it;
dblog skips what it emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dblog.core.delivered_cut import DeliveredCut

# Event_type names of SHOW BINLOG EVENTS: MySQL Write_rows, Update_rows, Delete_rows,
# Partial_update_rows; MariaDB Write_rows_v1, Update_rows_compressed_v1, …
_NOT_ROWS = {"annotate_rows", "rows_query"}
ANNOTATE_ROWS = "annotate_rows"


@dataclass(frozen=True)
class LoggedEvent:
    """One row of SHOW BINLOG EVENTS."""
    start: int  # Pos
    end: int  # End_log_pos
    kind: str  # Event_type
    info: str = ""

    @property
    def is_rows(self) -> bool:
        kind = self.kind.lower()
        return "_rows" in kind and kind not in _NOT_ROWS

    @property
    def ends_transaction(self) -> bool:
        kind = self.kind.lower()
        statement = self.info.strip().upper()
        return kind in ("xid", "xa_prepare") or (kind == "query" and (
            statement in ("COMMIT", "ROLLBACK") or statement.startswith(("XA COMMIT", "XA ROLLBACK"))))


class Annotations(Enum):
    """Whether Debezium received MariaDB's ANNOTATE_ROWS events (and counted them)."""
    SENT = "sent"
    NOT_SENT = "not sent"
    UNKNOWN = "unknown"


class SkipsUnknown(ValueError):
    """The events do not say where Debezium's skips end: the transaction is read again whole."""


def _cut(file: str, events: list[LoggedEvent], event: int, row: int) -> DeliveredCut:
    for index, logged in enumerate(events):
        if logged.kind.lower() == "transaction_payload":
            raise SkipsUnknown("the transaction is compressed (a Transaction_payload event), whose inner events "
                               "Debezium counts one by one and SHOW BINLOG EVENTS does not list")
        if index >= event and logged.is_rows:
            return DeliveredCut(file, events[0].start, logged.end, row)
        if index > 0 and logged.ends_transaction:
            return DeliveredCut(file, events[0].start, logged.end, 0)  # every rows event before it
    raise SkipsUnknown(f"the {len(events)} events read from {file}:{events[0].start if events else '?'} end before "
                       f"Debezium's {event} events and the rows event after them")


# Where a transaction starts and ends, as SHOW BINLOG EVENTS lists it (Event_type, Info):
# - MariaDB (as 10.11 lists them): its `Gtid` event. Info `BEGIN GTID d-s-n` (an XA transaction's
#   part up to its XA PREPARE: `XA START xid GTID d-s-n`) opens a transaction lasting to its end;
#   `GTID d-s-n` (FL_STANDALONE, "no terminating COMMIT") makes a group of the one event after it
#   (a DDL statement, an XA COMMIT or ROLLBACK).
# - MySQL: its `Gtid` or `Anonymous_Gtid` event (the names of `Log_event::get_type_str`), known by its
#   Info `SET @@SESSION.GTID_NEXT= '…'` (`Gtid_log_event::pack_info`, its SET_STRING_PREFIX: mysql-server's
#   sql/log_event.cc; every Gtid_log_event, anonymous or tagged, prints it), then a Query event, the
#   group's first statement: `BEGIN` or `XA START …` opens a transaction lasting to its end, any other
#   statement (DDL, the `XA COMMIT …` of a prepared transaction) is the whole group. (The MySQL manual,
#   "SHOW BINLOG EVENTS Statement": a compressed transaction's Transaction_payload event is listed, then
#   the events in it.)
# A transaction ends at its Xid, its XA_prepare, or a COMMIT / ROLLBACK / one-phase XA COMMIT query
# (`LoggedEvent.ends_transaction`).
_MYSQL_GTID_INFO = "SET @@SESSION.GTID_NEXT="
_OPENS_TRANSACTION = ("BEGIN", "XA START")


class _Until(Enum):
    END = "its end"  # inside BEGIN … (XA START …)
    NEXT_EVENT = "the event after the GTID"  # MariaDB's standalone GTID
    FIRST_STATEMENT = "its first statement says"  # MySQL


@dataclass(frozen=True)
class OpenTransaction:
    start: int  # its GTID event's position
    until: _Until


def _opened(logged: LoggedEvent) -> OpenTransaction | None:
    """The group `logged` opens when it is a GTID event (MySQL's or MariaDB's), else None."""
    info = logged.info.strip().upper()
    if info.startswith(_MYSQL_GTID_INFO):  # (a statement is never logged so: SET is not)
        return OpenTransaction(logged.start, _Until.FIRST_STATEMENT)
    if logged.kind.lower() == "gtid":
        return OpenTransaction(logged.start, _Until.NEXT_EVENT if info.startswith("GTID") else _Until.END)
    return None


def open_transaction(events: list[LoggedEvent], carried: OpenTransaction | None = None) -> OpenTransaction | None:
    """The transaction still open after `events` (read in order, from an event boundary between
    transactions; MySQL's and MariaDB's forms, above), or None when they end between transactions;
    `carried`: the one open after the events read before these."""
    state = carried
    for logged in events:
        opened = _opened(logged)
        if opened is not None:
            state = opened
        elif state is None:
            continue
        elif state.until is _Until.FIRST_STATEMENT:
            if logged.kind.lower() == "query":
                begins = logged.info.strip().upper().startswith(_OPENS_TRANSACTION)
                state = OpenTransaction(state.start, _Until.END) if begins else None
        elif state.until is _Until.NEXT_EVENT or logged.ends_transaction:
            state = None
    return state


def cut_after_event(file: str, start: int, pos: int, row: int) -> DeliveredCut:
    """The cut of an offset with `row` and no `event` count: the rows event ending at `pos` in
    `file` had its first `row` rows emitted, and every change before it in the transaction that
    starts at `start` (`open_transaction`)."""
    if row <= 0 or not 0 <= start < pos:
        raise SkipsUnknown(f"an offset with no `event` count and row {row} at {file}:{pos} says nothing emitted")
    return DeliveredCut(file, start, pos, row)


def delivered_cut(file: str, events: list[LoggedEvent], event: int, row: int,
                  annotations: Annotations) -> tuple[DeliveredCut, str | None]:
    """The cut for Debezium's offset (`file`, `event`, `row`), `events` being the binlog's from
    the offset's `pos` on; and a warning when it cannot be exact (`annotations` UNKNOWN and the
    counts fit both ways: the cut that delivers less is taken, so changes come twice rather than
    never). SkipsUnknown when the events do not reach the cut."""
    if event < 0 or row < 0:
        raise SkipsUnknown(f"Debezium's offset holds negative counts (event {event}, row {row})")
    if not events:
        raise SkipsUnknown(f"no binlog events at {file}")
    without = [logged for logged in events if logged.kind.lower() != ANNOTATE_ROWS]
    if annotations is Annotations.SENT or without == events:
        return _cut(file, events, event, row), None
    if annotations is Annotations.NOT_SENT:
        return _cut(file, without, event, row), None
    # Counted, the annotations make the first `event` events end earlier: that cut is the lesser
    lesser = _cut(file, events, event, row)
    try:
        greater = _cut(file, without, event, row)
    except SkipsUnknown:
        greater = None
    if greater == lesser:
        return lesser, None
    if row and greater is not None:  # an offset written while emitting a row: its event is that rows event
        counted = event < len(events) and events[event].is_rows
        not_counted = event < len(without) and without[event].is_rows
        if counted != not_counted:
            return (lesser if counted else greater), None
    return lesser, (f"Debezium's counts (event {event}, row {row}) fit its transaction at {file}:{events[0].start} "
                   "both with and without MariaDB's ANNOTATE_ROWS events, which Debezium's MariaDB connector "
                   "receives only with include.query=true: dblog skips the smaller part, so some changes Debezium "
                   "sent may come twice")
