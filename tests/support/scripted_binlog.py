"""A primary's binlog as encoded events (tests/support/binlog_encoder.py), served to the real
`BinlogSource` through its `connection_factory`: for the MySQL shapes no MySQL server can
produce here. Only the wire is scripted; every byte still goes through dblog's decoder and
the source's transaction logic.

    primary = ScriptedPrimary()
    with primary.transaction(Gtid.mysql(UUID, 1)) as log:
        log.query("BEGIN"); log.table_map(table); log.rows(table, "c", [[1, "a"]]); log.xid()
    events = primary.read(start=GtidSet.empty("mysql"))

A dump connection asking from a GTID set is sent a rotate, the format description, then every
transaction that set lacks, whole and in binlog order (as a server with GTID auto-positioning
does), then heartbeats. `cut_after[i]` loses connection i after that many packets.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from support import binlog_encoder as be
import pymysql

from dblog.core.events import Heartbeat, TableId
from dblog.core.gtid import Gtid, GtidSet
from dblog.mysql.binlog import BinlogSource

FILE = "binlog.000001"


class ScriptedPrimary:
    def __init__(self, flavor: str = "mysql") -> None:
        self.flavor = flavor
        self.log = be.BinlogWriter(flavor, checksum=True)
        # (GTID or None, the transaction's events, where its first event starts in FILE)
        self.transactions: list[tuple[Gtid | None, list[bytes], int]] = []
        self.cut_after: list[int | None] = []
        self.connections: list = []  # the position each connection asked from (a FilePosition in file mode)

    @contextlib.contextmanager
    def transaction(self, gtid: Gtid) -> Iterator[be.BinlogWriter]:
        """The events written inside the block, after the transaction's GTID event."""
        first, start = len(self.log.packets), self.log.position
        if self.flavor == "mysql":
            self.log.mysql_gtid(gtid.source, gtid.seq)
        else:
            self.log.mariadb_gtid(gtid.seq, int(gtid.source))
        yield self.log
        self.transactions.append((gtid, self.log.packets[first:], start))

    @contextlib.contextmanager
    def anonymous_transaction(self, anonymous_gtid_event: bytes) -> Iterator[be.BinlogWriter]:
        """A MySQL transaction logged without a GTID: `anonymous_gtid_event`'s body (type 34)
        first, then the events written inside the block."""
        first, start = len(self.log.packets), self.log.position
        self.log.add(be.ANONYMOUS_GTID, anonymous_gtid_event)
        yield self.log
        self.transactions.append((None, self.log.packets[first:], start))

    def connect(self, settings: dict, server_id: int, heartbeat_seconds: float, flavor: str) -> "ScriptedConnection":
        return ScriptedConnection(self)

    def source(self, start: GtidSet, *, schema_of=None, table_filter=None, **options) -> BinlogSource:
        """`table_filter`: the captured tables (default: all); `schema_of`: their schemas (default:
        none, so rows are keyed by the table map's primary-key metadata)."""
        return BinlogSource({}, server_id=1, start=start, schema_of=schema_of or _no_schema,
                            table_filter=table_filter or (lambda table: True), flavor=self.flavor,
                            connection_factory=self.connect, **options)

    def read(self, start: GtidSet | None = None, **options) -> list:
        """Every event the source yields up to the first heartbeat after the last transaction."""
        source = self.source(start if start is not None else GtidSet.empty(self.flavor), **options)
        events = []
        try:
            for event in source:
                if isinstance(event, Heartbeat):
                    break
                events.append(event)
        finally:
            source.close()
        return events


def _no_schema(table: TableId):
    raise LookupError(table)  # rows keyed by the table map's primary-key metadata


class ScriptedConnection:
    """The `BinlogConnection` interface over a ScriptedPrimary."""

    def __init__(self, primary: ScriptedPrimary) -> None:
        self.primary = primary
        self.checksum = True
        self.packets: list[bytes] = []
        self.sent = 0
        self.cut_after: int | None = None

    def open(self, position: GtidSet, at=None) -> None:
        """From a GTID set (the transactions it lacks), or from a file position `at`."""
        primary = self.primary
        index = len(primary.connections)
        primary.connections.append(position if at is None else at)
        self.cut_after = primary.cut_after[index] if index < len(primary.cut_after) else None
        head = be.BinlogWriter(primary.flavor, checksum=True)
        head.rotate(FILE)
        head.format_description()
        if at is not None:
            assert at.file == FILE
            wanted = [packets for gtid, packets, start in primary.transactions if start >= at.pos]
        else:
            wanted = [packets for gtid, packets, start in primary.transactions if gtid not in position]
        self.packets = head.packets + [packet for packets in wanted for packet in packets]

    def read_event(self) -> bytes:
        if self.cut_after is not None and self.sent >= self.cut_after:
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query (scripted)")
        self.sent += 1
        if self.sent <= len(self.packets):
            return self.packets[self.sent - 1]
        return be.event(be.HEARTBEAT, FILE.encode(), log_pos=self.primary.log.position, checksum=True,
                        flags=be.LOG_EVENT_ARTIFICIAL_F)

    def pending(self) -> bool:
        return self.sent < len(self.packets)

    def close(self) -> None:
        pass
