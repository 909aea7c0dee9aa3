"""Which client and server errors mean "the database server went away", and which mean "the
server refused this statement", in one place.

Two degrees of going away: a connection that broke (retry at once on a new one) and a server
that is down, restarting or refusing connections for now (wait, then retry). Every adapter that
reconnects (chunk reader, binlog reader, supervisor, the test workload) asks here. And the
opposite: an error the server raised about the statement itself (`refused_by_server`: bad SQL,
a column a DDL dropped, a function an old server lacks), which a retry would only repeat; the
snapshot reads and the collation loader ask here.
"""

from __future__ import annotations

import pymysql

# An open connection broke: server gone away, lost connection during a query (or with a system error).
CONNECTION_LOST = frozenset({2006, 2013, 2055})

# The server cannot serve now but may soon: the above, or it refuses or closes connections.
SERVER_UNREACHABLE = CONNECTION_LOST | {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1927,  # connection killed (MariaDB)
    2002, 2003,  # cannot connect (socket / TCP)
}


# Server errors (codes below 2000) that say nothing about the statement: the server shut down or
# killed the connection, the network between us failed, or the transaction lost a lock wait or
# a deadlock (a retry may succeed). The statement was not refused.
NOT_ABOUT_THE_STATEMENT = frozenset({
    1053,  # server shutdown in progress
    1077, 1078, 1079, 1080,  # normal shutdown, got signal, shutdown complete, forcing close of thread
    1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161,  # aborted connection, network errors
    1184,  # aborted new connection
    1205,  # lock wait timeout
    1213,  # deadlock
    1317,  # query interrupted (KILL QUERY)
    1927,  # connection killed (MariaDB)
})


ER_ACCESS_DENIED = 1045  # ER_ACCESS_DENIED_ERROR: bad user or password, or a REQUIRE SSL/X509 user

# MariaDB/MySQL error numbers of a statement the server refuses as written or for this user
# (SQLSTATE 42000 and 3D000 among them): running it again cannot help.
REFUSED_AS_WRITTEN = frozenset({
    1044,  # ER_DBACCESS_DENIED_ERROR
    1045,  # ER_ACCESS_DENIED_ERROR
    1046,  # ER_NO_DB_ERROR (3D000)
    1049,  # ER_BAD_DB_ERROR
    1064,  # ER_PARSE_ERROR
    1142,  # ER_TABLEACCESS_DENIED_ERROR
    1143,  # ER_COLUMNACCESS_DENIED_ERROR
    1227,  # ER_SPECIFIC_ACCESS_DENIED_ERROR
    1370,  # ER_PROCACCESS_DENIED_ERROR
})


def error_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def refused_by_server(error: BaseException) -> bool:
    """The server raised this error about the statement itself. Codes below 2000 are the
    server's, 2000 and above the client's (a lost connection); an InterfaceError is the client's
    too (a closed connection, code 0)."""
    if isinstance(error, pymysql.err.InterfaceError):
        return False
    code = error_code(error)
    return code is not None and code < 2000 and code not in NOT_ABOUT_THE_STATEMENT


def connection_lost(error: BaseException) -> bool:
    """A pymysql error that a new connection may not have (InterfaceError: the connection is closed)."""
    return isinstance(error, pymysql.err.InterfaceError) or (
        isinstance(error, pymysql.err.OperationalError) and error_code(error) in CONNECTION_LOST
    )


def server_unreachable(error: BaseException) -> bool:
    """A pymysql error that waiting for the server to come back may cure."""
    return isinstance(error, pymysql.err.InterfaceError) or (
        isinstance(error, pymysql.err.OperationalError) and error_code(error) in SERVER_UNREACHABLE
    )
