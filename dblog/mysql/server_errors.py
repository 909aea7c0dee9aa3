"""Which client and server errors mean "the database server went away", in one place.

Two degrees: a connection that broke (retry at once on a new one) and a server that is down,
restarting or refusing connections for now (wait, then retry). Every adapter that reconnects
(chunk reader, binlog reader, supervisor, the test workload) asks here.
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


def error_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


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
