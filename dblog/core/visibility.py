"""What a chunk's SELECT must see before its rows can enter a window (pure: no I/O).

The watermark algorithm assumes that a change the binlog reader has already passed is
visible to the chunk's SELECT: the window only drops keys for the changes it reads *after*
it opens, so an older row from a SELECT that cannot see an already-read change would be
emitted after that change (a resurrected delete, a stale update).

The server does not give that for free. A transactional commit is written to the binlog, its
GTID counted in `@@gtid_binlog_pos`, and the binlog sent to readers, *before* the storage
engine makes it visible. With plain asynchronous replication the gap is microseconds (measured
here: about 3% of `@@gtid_binlog_pos` reads under 8 concurrent writers name a transaction a
SELECT started right after cannot see); with semi-sync `AFTER_SYNC` it lasts until a replica
acknowledges. So dblog

* opens every GTID window at the reader's own position (the low watermark is what the loop
  has consumed, not the server's `@@gtid_binlog_pos`), so every later transaction is inside
  the window, and
* before each chunk, waits until the server shows a read view that contains the last
  storage-engine commit the loop consumed: MariaDB's `START TRANSACTION WITH CONSISTENT
  SNAPSHOT` reports the binlog coordinate its read view matches (`binlog_snapshot_file` /
  `binlog_snapshot_position`), and every read view opened later sees at least as much. At a
  start, the engine waits the same way for the binlog's end read after its position.

`BinlogCoordinate` orders those coordinates across binlog files, within one server's binlog.
A coordinate names the server whose binlog it is in (`server`, a `BinlogIdentity`): after a
failover, or a restart behind the same address onto another server, the reader's last commit
coordinate is a place in the *old* server's binlog and says nothing about the new one's (the same
file and offset there hold other transactions, or none yet). What a chunk must see is GTID-based, the transactions the
loop consumed: on another server the session waits until that server has logged them all, then
until its read views reach its own binlog's end (`ServerSession.wait_until_visible`). Coordinates
of two different servers are not ordered: comparing them raises `OtherServersBinlog`.

The whole argument, MySQL and the signal-table modes included: docs/algorithm.md, "Visibility".
"""

from __future__ import annotations

from dataclasses import dataclass

from dblog.core.binlog_identity import BinlogIdentity


class OtherServersBinlog(ValueError):
    """Two binlog coordinates of different servers were compared: they are not ordered."""


@dataclass(frozen=True, eq=False)
class BinlogCoordinate:
    """A position in the binlog: a file (`name.000042`) and a byte offset into it, and the server
    whose binlog that is (`server`: its server_id, host and port; None: not known, taken as the
    same). Ordered by the file's sequence number, then the offset (a file's name is not
    compared: one server's binlog files share their base name); only within one server's binlog."""

    sequence: int
    pos: int
    file: str
    server: BinlogIdentity | None = None

    @classmethod
    def of(cls, file: str, pos: int | str, server: BinlogIdentity | None = None) -> BinlogCoordinate:
        """From a file name as the server reports it (with or without a directory)."""
        name = str(file).rsplit("/", 1)[-1]
        base, dot, number = name.rpartition(".")
        if not dot or not base or not number.isdigit():
            raise ValueError(f"binlog file name {file!r} does not end in a sequence number (like binlog.000042)")
        return cls(int(number), int(pos), name, server)

    def same_binlog(self, other: BinlogCoordinate) -> bool:
        """Whether the two are places in one server's binlog (an unknown server counts as the same)."""
        return self.server is None or other.server is None or self.server.same_binlog(other.server)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BinlogCoordinate) and self.same_binlog(other)
                and (self.sequence, self.pos) == (other.sequence, other.pos))

    def __hash__(self) -> int:
        return hash((self.sequence, self.pos))

    def _key(self, other: object) -> tuple[tuple[int, int], tuple[int, int]]:
        if not isinstance(other, BinlogCoordinate):
            raise TypeError(f"a binlog coordinate is ordered against another, not {type(other).__name__}")
        if not self.same_binlog(other):
            raise OtherServersBinlog(f"{self} ({self.server}) and {other} ({other.server}) are in different "
                                     "servers' binlogs: they are not ordered")
        return (self.sequence, self.pos), (other.sequence, other.pos)

    def __lt__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine < theirs

    def __le__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine <= theirs

    def __gt__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine > theirs

    def __ge__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine >= theirs

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"
