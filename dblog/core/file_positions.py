"""Binlog file-and-position offsets: dblog's position on a server without GTIDs.

MySQL's default is `gtid_mode=OFF` (RDS and Aurora ship so): its binlog names no transaction, and
a reader resumes from a binlog file and a byte position, as Debezium does. A MariaDB user may choose
the same (`source.position_mode = "file"`): MariaDB always logs GTIDs, but without
`gtid_strict_mode` their sequence numbers need not follow the binlog's order.

The engine reasons in positions that are sets of delivered transactions (`GtidSet`: the window's
watermarks, the checkpoint, the sinks' "already holds it"). In file mode a transaction is named by
where it starts in the binlog, its *coordinate* (the file's sequence number and the byte offset of
the event that opens it), as a MariaDB-form GTID in domain 0 whose sequence number grows with the
coordinate:

    transaction starting at coordinate s        ->  0-0-(2s + 1)      (its TransactionStart)
    the same transaction, ending at coordinate e ->  0-0-2e            (its TransactionEnd)
    position "everything before c"              ->  the prefix 0-0-2c

with c = file sequence << 32 | byte offset (an offset fits in 32 bits: a binlog event's position
field has 4 bytes). The capture adds a TransactionEnd's GTID to its position: after a transaction
ending at e the position is "everything before e", which holds the transaction's own name, and
which the server's position (`position_before` its binlog's end) equals once the reader has
caught up. Binlog order is coordinate order on one server, so every position is a down-closed
prefix, as a strict MariaDB domain's is, and all the GTID-set algebra holds unchanged (watermarks,
"the reader has passed what the server had", the sinks' "already holds it").
These names never leave dblog (records carry no GTID in this mode, as Debezium's do not): the
offsets store the file and the byte offset (`FilePosition`), where the next transaction starts. A
position between a transaction's start and its end (never saved by the engine, which commits
between transactions) is stored as that transaction's start, `delivered`: a reader resumed there
reads it again and skips it.

Pure code.
"""

from __future__ import annotations

from dataclasses import dataclass

from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate

__all__ = ["FilePosition", "base_name", "is_file_position_name", "position_before",
           "transaction_at", "transaction_end"]

_DOMAIN = 0
_OFFSET_BITS = 32


def _number(coordinate: BinlogCoordinate) -> int:
    if not 0 <= coordinate.pos < 1 << _OFFSET_BITS:
        raise ValueError(f"binlog position {coordinate} is outside a binlog file's 4-byte offsets")
    return coordinate.sequence << _OFFSET_BITS | coordinate.pos


def transaction_at(coordinate: BinlogCoordinate) -> Gtid:
    """The name of the transaction whose first event starts at `coordinate`."""
    return Gtid.mariadb(_DOMAIN, 0, 2 * _number(coordinate) + 1)


def is_file_position_name(gtid: Gtid) -> bool:
    """Whether `gtid` is one of these names, not a server's GTID (server id 0: a server that logs
    for replicas has another; MySQL's GTIDs have a UUID): sinks write no GTID for it."""
    return gtid.flavor == "mariadb" and gtid.source == str(_DOMAIN) and gtid.server_id == 0


def transaction_end(coordinate: BinlogCoordinate) -> Gtid:
    """What a transaction ending at `coordinate` adds to the position: everything before it."""
    return Gtid.mariadb(_DOMAIN, 0, 2 * _number(coordinate))


def position_before(coordinate: BinlogCoordinate) -> GtidSet:
    """The position that holds every transaction starting before `coordinate`, none after."""
    number = _number(coordinate)
    return GtidSet.parse(f"{_DOMAIN}-0-{2 * number}", "mariadb") if number else GtidSet.empty("mariadb")


@dataclass(frozen=True)
class FilePosition:
    """Where a file-mode reader starts: `file`:`pos`, the start of a transaction (or the binlog's
    end at a first start); `delivered`: the transaction starting there was delivered (read again
    and skipped)."""

    file: str
    pos: int
    delivered: bool = False

    @property
    def coordinate(self) -> BinlogCoordinate:
        return BinlogCoordinate.of(self.file, self.pos)

    def position(self) -> GtidSet:
        """The engine's position for it."""
        coordinate = self.coordinate
        return position_before(coordinate).with_gtid(transaction_at(coordinate)) if self.delivered else \
            position_before(coordinate)

    @classmethod
    def of(cls, position: GtidSet, base_name: str) -> FilePosition:
        """Back from the engine's position; `base_name`: the binlog files' name before the
        sequence number (`binlog` of `binlog.000042`). ValueError for a position that is not a
        file-mode one."""
        domain = str(_DOMAIN)
        last = position.last(domain) or 0
        if position.sources() - {domain} or (last and tuple(position.intervals(domain)) != ((1, last),)):
            raise ValueError(f"{position!r} is not a binlog file-and-position offset")
        number, delivered = divmod(last, 2)
        sequence, pos = number >> _OFFSET_BITS, number & ((1 << _OFFSET_BITS) - 1)
        return cls(f"{base_name}.{sequence:06d}", pos, bool(delivered))

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (" (the transaction starting there delivered)" if self.delivered else "")


def base_name(file: str) -> str:
    """`binlog` of `binlog.000042` (a directory dropped)."""
    return BinlogCoordinate.of(file, 4).file.rpartition(".")[0]
