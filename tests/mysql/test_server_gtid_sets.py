"""The server's GTID sets as dblog reads them, in the text MySQL 8.3+ prints with tags:
`@@GLOBAL.gtid_executed` (the watermarks, the first start's position, `dblog check`) and
`@@GLOBAL.gtid_purged` (`dblog check`'s binlog retention check, `dblog.mysql.binlog_retention`).

MySQL prints a set with ",\\n" between UUIDs and each UUID once, its untagged intervals first,
then its tags in order with theirs (Gtid_set::to_string and default_string_format,
sql/rpl_gtid_set.cc); pymysql may hand the value over as bytes.
"""

from __future__ import annotations

from dblog.core.gtid import Gtid, GtidSet
from dblog.mysql.binlog_retention import purged_gtids
from dblog.mysql.server_session import ServerSession

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4f22ab58-82db-22f2-af44-d91bb0530673"


class MySqlServer(ServerSession):
    """A MySQL server that answers `SELECT @@GLOBAL.<variable>` with the given text."""

    def __init__(self, **variables: bytes) -> None:
        super().__init__(lambda: None)
        self._flavor = "mysql"
        self.variables = variables

    def fetch(self, sql: str, params: tuple = ()) -> tuple:
        return ((self.variables[sql.removeprefix("SELECT @@GLOBAL.")],),)


EXECUTED = f"{A}:1-57:batch_1:1-3:tag2:5,\n{B}:1-9:tag2:1".encode()
PURGED = f"{A}:1-20:batch_1:1-2".encode()


def test_executed_and_purged_sets_with_tags():
    server = MySqlServer(gtid_executed=EXECUTED, gtid_purged=PURGED)
    executed = server.executed_gtids()
    assert executed.sources() == {A, f"{A}:batch_1", f"{A}:tag2", B, f"{B}:tag2"}
    assert Gtid.mysql(A, 3, "batch_1") in executed and Gtid.mysql(A, 4, "batch_1") not in executed
    assert str(executed) == EXECUTED.decode().replace("\n", "")
    purged = purged_gtids(server)
    assert purged == GtidSet.parse(f"{A}:1-20:batch_1:1-2") and purged <= executed


def test_the_retention_check_counts_tagged_transactions():
    # What `dblog check` (Preflight's binlog position) computes: a position can be resumed from
    # when everything purged is in it and it holds nothing the server has not executed.
    server = MySqlServer(gtid_executed=EXECUTED, gtid_purged=PURGED)
    purged, executed = purged_gtids(server), server.executed_gtids()
    resumable = GtidSet.parse(f"{A}:1-30:batch_1:1-2", "mysql")
    assert not purged - resumable and not resumable - executed
    lost = GtidSet.parse(f"{A}:1-30:batch_1:1", "mysql")  # batch_1:2 was purged, never read
    assert str(purged - lost) == f"{A}:batch_1:2"
    foreign = GtidSet.parse(f"{A}:1-30:batch_1:1-2:other:1", "mysql")  # a tag this server never logged
    assert str(foreign - executed) == f"{A}:other:1"
