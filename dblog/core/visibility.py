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

`BinlogCoordinate` orders those coordinates across binlog files. The whole argument, MySQL and
the signal-table modes included: docs/algorithm.md, "Visibility".
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class BinlogCoordinate:
    """A position in the binlog: a file (`name.000042`) and a byte offset into it. Ordered by
    the file's sequence number, then the offset (a file's name is not compared: one server's
    binlog files share their base name)."""

    sequence: int
    pos: int
    file: str = field(compare=False)

    @classmethod
    def of(cls, file: str, pos: int | str) -> BinlogCoordinate:
        """From a file name as the server reports it (with or without a directory)."""
        name = str(file).rsplit("/", 1)[-1]
        base, dot, number = name.rpartition(".")
        if not dot or not base or not number.isdigit():
            raise ValueError(f"binlog file name {file!r} does not end in a sequence number (like binlog.000042)")
        return cls(int(number), int(pos), name)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"
