"""One consistent snapshot of the whole database held open while a blocking snapshot reads
(MariaDB): `START TRANSACTION WITH CONSISTENT SNAPSHOT` on a connection of its own, and the
exact binlog position MariaDB states for it (`binlog_snapshot_file` / `binlog_snapshot_position`,
as a GTID set with `BINLOG_GTID_POS`): every chunk read through `reader` sees the database as
of `seen`, as Debezium's initial snapshot sees it as of one binlog position (Debezium takes a
lock for it; MariaDB states the position without one).

A lost connection takes the snapshot with it: the session would reconnect outside the
transaction, so `check` raises ConnectionError instead (the engine restarts from its offsets).
"""

from __future__ import annotations

from typing import Callable

import pymysql

from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidSet
from dblog.mysql.chunk_reader import ChunkReader
from dblog.mysql.schema import text_of
from dblog.mysql.server_session import ServerSession

__all__ = ["ConsistentSnapshot"]


class ConsistentSnapshot:
    def __init__(self, connect: Callable[[], pymysql.Connection], file_positions: bool = False) -> None:
        self.session = ServerSession(connect)
        self._conn = self.session.connection()
        with self._conn.cursor(pymysql.cursors.Cursor) as cursor:
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cursor.execute("SHOW SESSION STATUS LIKE 'binlog\\_snapshot\\_%'")
            status = {text_of(name).lower(): text_of(value) for name, value in cursor.fetchall()}
            file, pos = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
            if file_positions:  # (dblog.core.file_positions: the position is the coordinate itself)
                self.seen = FilePosition(file, pos).position()
            else:
                cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
                self.seen = GtidSet.parse(text_of(cursor.fetchone()[0] or ""), flavor="mariadb")
        self.reader = ChunkReader(self.session)

    def check(self) -> None:
        """Raise ConnectionError when the reads no longer ran inside the snapshot."""
        if self.session._conn is not self._conn:
            self.session.close()
            raise ConnectionError("the connection holding the blocking snapshot's consistent read was lost; the "
                                  "snapshot is read again from the offsets")

    def close(self) -> None:
        if self.session._conn is self._conn:
            try:
                with self._conn.cursor() as cursor:
                    cursor.execute("COMMIT")
            except pymysql.err.MySQLError:
                pass
        self.session.close()
