"""Whose binlog a place in a binlog is in (pure: no I/O).

A binlog file name and byte offset mean something only on the server that wrote them: after a
failover, or a server rebuilt behind the same address, the same file and offset hold other
transactions, or none yet. Both kinds of binlog place name their server by one `BinlogIdentity`:

* a visibility coordinate (`dblog.core.visibility.BinlogCoordinate`) by the server's `server_id`,
  host name and port, read at each connection: a restarted server keeps them (its binlog goes
  on), another server behind the same address has others;
* a file position of the offsets (`dblog.core.file_positions`) by its binlog files' base name,
  `server_id` and MySQL's `server_uuid`: no host or port, which a server moved to another machine
  (or a container recreated on its data) changes while its binlog stays the same.

Two identities name the same binlog when every field both know agrees. Two servers sharing
server_id, host name and port (and base name, and no server_uuid) are told apart by nothing
here: a replication topology needs distinct server_ids.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["BinlogIdentity"]


@dataclass(frozen=True)
class BinlogIdentity:
    """`base_name`: the binlog files' name before the sequence number; `server_uuid`: MySQL's
    @@server_uuid (MariaDB has none); `host`, `port`: @@hostname and @@port. None: not known."""

    server_id: int
    base_name: str | None = None
    server_uuid: str | None = None
    host: str | None = None
    port: int | None = None

    def same_binlog(self, other: BinlogIdentity) -> bool:
        """Whether the two name one server's binlog: every field known on both sides agrees."""
        for field in fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if mine is not None and theirs is not None and mine != theirs:
                return False
        return True

    def of_files(self, base_name: str) -> BinlogIdentity:
        """As a file position names the server: by its binlog files, server_id and server_uuid."""
        return BinlogIdentity(self.server_id, base_name, self.server_uuid)

    def describe(self) -> str:
        return ", ".join(
            ([f"server_uuid {self.server_uuid}"] if self.server_uuid else []) + [f"server_id {self.server_id}"]
            + ([f"host {self.host}:{self.port}"] if self.host is not None else [])
            + ([f"binlog files {self.base_name}.*"] if self.base_name is not None else []))

    __str__ = describe
