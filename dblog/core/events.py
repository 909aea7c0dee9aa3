"""The records that flow through dblog: what the binlog adapter yields and what sinks receive.

Values inside `before`/`after` are *normalized* (see `dblog.mysql.values`): JSON-safe and identical
whether the row came from a chunk SELECT or was decoded from the binlog, so a key read one way
can be compared with a key read the other way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate

Row = dict[str, Any]
Key = tuple


class TableId(NamedTuple):
    db: str
    table: str

    def __str__(self) -> str:
        return f"{self.db}.{self.table}"

    @classmethod
    def parse(cls, text: str) -> "TableId":
        db, sep, table = text.partition(".")
        if not sep or not db or not table:
            raise ValueError(f"table name {text!r} must be written as 'database.table'")
        return cls(db, table)


def valid_table_patterns(patterns: list[str]) -> list[str]:
    """Regexes over "db.table" (a pydantic validator's body: raises ValueError naming the fix)."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(
                f"pattern {pattern!r} is not a valid regular expression ({error}); "
                r"write a regex over 'db.table', e.g. 'shop\.orders_\d+'"
            ) from None
    return patterns


@dataclass(slots=True)
class SourceInfo:
    """Where a change came from: Debezium's `source` block without the constant fields."""

    gtid: str | None = None
    file: str | None = None
    pos: int | None = None
    row: int = 0
    server_id: int | None = None
    ts_ms: int | None = None
    snapshot: bool = False  # True for rows read by an incremental-snapshot chunk
    # A row of the startup snapshot read with `snapshot.initial_markers`: Debezium's marker of
    # an initial snapshot's row (INITIAL_MARKERS), written as `source.snapshot` in its place.
    initial_marker: str | None = None


@dataclass(slots=True)
class RowChange:
    """One row change. `op` is Debezium's: c (insert), u (update), d (delete), r (snapshot read).

    `key` is the normalized primary key of `after` (or of `before` for deletes);
    `before_key` is set only for updates that changed the primary key. `size`: the bytes the
    change took in the binlog (its rows event's share), a cheap measure of what holding it costs
    (`change_bytes`); 0 where unknown (snapshot reads). Not part of its identity.
    `definition`: the table's definition in force when the change was logged, set only when it
    is not the one the source adapter has loaded (a row logged before DDL the server has since
    applied): opaque here, the adapter's own (dblog.mysql: a TableSchema).
    """

    table: TableId
    op: str
    key: Key
    before: Row | None
    after: Row | None
    source: SourceInfo = field(default_factory=SourceInfo)
    before_key: Key | None = None
    size: int = field(default=0, compare=False)
    definition: Any = field(default=None, compare=False, repr=False)


_VALUE_BYTES = 8  # a number, date or NULL, as a row image stores it (about)


def change_bytes(change: RowChange) -> int:
    """About how many bytes a change's row images hold: its binlog size where the source knew it,
    else the lengths of its text and binary values (a fixed width for the others). What the
    byte bounds of held and buffered changes count (`source.max_held_xa_bytes`,
    `iceberg.max_buffer_bytes`)."""
    if change.size:
        return change.size
    return _image_bytes(change.before) + _image_bytes(change.after)


def _image_bytes(image: Row | None) -> int:
    if not image:
        return 0
    return sum(len(value) if isinstance(value, (str, bytes)) else _VALUE_BYTES for value in image.values())


# --- what the binlog adapter yields, in commit order ----------------------------------------


@dataclass(slots=True)
class TransactionStart:
    gtid: Gtid
    server_id: int | None = None
    ts_ms: int | None = None
    file: str | None = None
    pos: int | None = None


@dataclass(slots=True)
class TransactionEnd:
    """The transaction `gtid` committed: every row change of it has been yielded. `commit`:
    where its storage-engine commit (XID event) ends in the binlog; None for DDL and for
    non-transactional tables, whose changes are visible before they are logged. `resume`:
    where a reader started anew must read the binlog from to rebuild what the source holds
    (MariaDB XA transactions prepared and not yet decided, whose changes are emitted at their
    XA COMMIT); None when it holds nothing, i.e. the delivered position itself."""

    gtid: Gtid
    commit: BinlogCoordinate | None = None
    resume: GtidSet | None = None


@dataclass(slots=True)
class SchemaChange:
    """A DDL statement (inside its own transaction, between Start and End); `source`: where it is
    in the binlog (its query event: file, position, server, time), as far as known."""

    gtid: Gtid
    db: str
    sql: str
    source: SourceInfo = field(default_factory=SourceInfo)


@dataclass(slots=True)
class Heartbeat:
    """The server had nothing more to send: the reader is caught up to `file:pos`. `reached`
    (file-position mode, dblog.core.file_positions): the position that makes, every transaction
    before `file:pos`; the events between transactions (a rotation, MariaDB's binlog checkpoints)
    move the server's binlog end, and only this tells the reader has passed them."""

    file: str | None = None
    pos: int | None = None
    reached: GtidSet | None = None


BinlogEvent = TransactionStart | RowChange | TransactionEnd | SchemaChange | Heartbeat


# --- what the engine tells the world about snapshots ----------------------------------------


@dataclass(slots=True)
class StagedSnapshot:
    """Snapshot reads (`op=r`) of a key range whose rows never passed through dblog: a read
    made elsewhere (`snapshot.distributed`) staged them at `staged` (the sink's handle). The
    sink applies them except the rows whose key identity, as `dblog.core.window.identity_token`
    writes it, is in `dropped`: the log touched those keys inside the window. Emitted where the
    window closed, after every change up to its high watermark and before any later one."""

    table: TableId
    staged: Any
    dropped: frozenset[str]
    rows: int  # rows staged, the dropped ones included
    source: SourceInfo = field(default_factory=SourceInfo)


@dataclass(slots=True)
class Notification:
    """A snapshot notification with Debezium's type names and fields."""

    type: str  # STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, PAUSED, RESUMED, ABORTED, COMPLETED, ...
    data: dict = field(default_factory=dict)
    aggregate_type: str = "Incremental Snapshot"
