"""What the source server still has in its binlog files, for `dblog check`: whether dblog can
resume from a GTID position, before it tries (the binlog dump would fail with error 1236 then).

- MySQL: `@@GLOBAL.gtid_purged`, the transactions no longer in any binlog file.
- MariaDB: the GTID state at the start of the oldest binlog file (its Gtid_list event, read with
  `BINLOG_GTID_POS(file, 4)`): every transaction up to it is gone. Listing the files
  (`SHOW BINARY LOGS`) needs REPLICATION CLIENT (BINLOG MONITOR on MariaDB >= 10.5).

A position can be resumed from when everything purged is in it (`purged - position` empty) and
it holds nothing the server has not executed (`position - executed` empty).
"""

from __future__ import annotations

from dblog.core.gtid import GtidSet
from dblog.mysql.schema import text_of
from dblog.mysql.server_session import ServerSession

__all__ = ["binlog_files", "purged_gtids"]


def binlog_files(server: ServerSession) -> list[str]:
    """The server's binlog files, oldest first (SHOW BINARY LOGS: REPLICATION CLIENT)."""
    return [text_of(row[0]) for row in server.fetch("SHOW BINARY LOGS")]


def purged_gtids(server: ServerSession) -> GtidSet:
    """The transactions the server's binlog files no longer hold."""
    flavor = server.flavor()
    if flavor == "mysql":
        text = text_of(server.fetch("SELECT @@GLOBAL.gtid_purged")[0][0] or "")
        return GtidSet.parse(text.replace("\n", ""), flavor="mysql")
    files = binlog_files(server)
    if not files:
        return GtidSet.empty("mariadb")
    text = text_of(server.fetch("SELECT BINLOG_GTID_POS(%s, 4)", (files[0],))[0][0] or "")
    return GtidSet.parse(text, flavor="mariadb")
