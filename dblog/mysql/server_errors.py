"""Which client and server errors mean "the database server went away", and which mean "the
server refused this statement", in one place.

Two degrees of going away: a connection that broke (retry at once on a new one) and a server
that is down, restarting or refusing connections for now (wait, then retry). Every adapter that
reconnects (chunk reader, binlog reader, supervisor, the test workload) asks here. And the
opposite: an error the server raised about the statement itself (`refused_by_server`: bad SQL,
a column a DDL dropped, a function an old server lacks), which a retry would only repeat; the
snapshot reads and the collation loader ask here.

Every error number dblog reads is named here, by the name MySQL and MariaDB give it; the rest of
the code reads codes through `error_code` and these names only (tests/ops/test_server_error_codes.py).
"""

from __future__ import annotations

import pymysql

# --- The codes, by the names MySQL and MariaDB give them -----------------------------------------
# Server errors: MySQL's include/mysqld_error.h (generated from share/messages_to_clients.txt) and
# MariaDB's sql/share/errmsg-utf8.txt (`perror CODE` prints the name); the manuals' "Server Error
# Message Reference" / "MariaDB Error Codes" list them too.
ER_CON_COUNT_ERROR = 1040  # too many connections
ER_DBACCESS_DENIED_ERROR = 1044
ER_ACCESS_DENIED_ERROR = 1045  # bad user or password, or a REQUIRE SSL/X509 user
ER_NO_DB_ERROR = 1046  # SQLSTATE 3D000
ER_BAD_DB_ERROR = 1049
ER_SERVER_SHUTDOWN = 1053  # server shutdown in progress
ER_PARSE_ERROR = 1064
ER_NORMAL_SHUTDOWN = 1077
ER_GOT_SIGNAL = 1078
ER_SHUTDOWN_COMPLETE = 1079
ER_FORCING_CLOSE = 1080
ER_TABLEACCESS_DENIED_ERROR = 1142
ER_COLUMNACCESS_DENIED_ERROR = 1143
ER_NO_SUCH_TABLE = 1146
ER_ABORTING_CONNECTION = 1152
ER_NET_PACKET_TOO_LARGE = 1153
ER_NET_READ_ERROR_FROM_PIPE = 1154
ER_NET_FCNTL_ERROR = 1155
ER_NET_PACKETS_OUT_OF_ORDER = 1156
ER_NET_UNCOMPRESS_ERROR = 1157
ER_NET_READ_ERROR = 1158
ER_NET_READ_INTERRUPTED = 1159
ER_NET_ERROR_ON_WRITE = 1160
ER_NET_WRITE_INTERRUPTED = 1161
ER_NEW_ABORTING_CONNECTION = 1184
ER_LOCK_WAIT_TIMEOUT = 1205
ER_LOCK_DEADLOCK = 1213
ER_SPECIFIC_ACCESS_DENIED_ERROR = 1227
# "Could not find GTID state requested by slave …" (MySQL 8.0.26+ spells it ER_SOURCE_FATAL_…)
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_QUERY_INTERRUPTED = 1317  # KILL QUERY
ER_PROCACCESS_DENIED_ERROR = 1370
ER_CONNECTION_KILLED = 1927  # MariaDB only
ER_SECURE_TRANSPORT_REQUIRED = 3159  # MySQL 5.7+ only: require_secure_transport refused plain TCP

# Client errors (pymysql raises the C client's codes): MySQL's include/errmsg.h (texts in
# libmysql/errmsg.cc), MariaDB Connector/C's include/errmsg.h; the manual's "Client Error Message
# Reference".
CR_MIN_ERROR = 2000  # the first client code: below it, the server's
CR_CONNECTION_ERROR = 2002  # cannot connect through the socket
CR_CONN_HOST_ERROR = 2003  # cannot connect over TCP
CR_UNKNOWN_HOST = 2005
CR_SERVER_GONE_ERROR = 2006
CR_SERVER_LOST = 2013  # lost connection during a query
CR_SSL_CONNECTION_ERROR = 2026
CR_SERVER_LOST_EXTENDED = 2055  # lost connection, with a system error

# --- What they mean to dblog ------------------------------------------------------------------

# An open connection broke: server gone away, lost connection during a query (or with a system error).
CONNECTION_LOST = frozenset({CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED})

# The server cannot serve now but may soon: the above, or it refuses or closes connections.
SERVER_UNREACHABLE = CONNECTION_LOST | {
    ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED, CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR,
}

# The client found no server at the configured address (or lost it at once): host, port, socket
# or a firewall, not the user or TLS.
CANNOT_REACH = frozenset({
    CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_UNKNOWN_HOST, CR_SERVER_GONE_ERROR, CR_SERVER_LOST,
})

# Two writers collided on a lock: the transaction (or statement) was rolled back; retrying may succeed.
LOCK_CONFLICT = frozenset({ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK})

# Server errors (codes below 2000) that say nothing about the statement: the server shut down or
# killed the connection, the network between us failed, or the transaction lost a lock wait or
# a deadlock (a retry may succeed). The statement was not refused.
NOT_ABOUT_THE_STATEMENT = LOCK_CONFLICT | {
    ER_SERVER_SHUTDOWN, ER_NORMAL_SHUTDOWN, ER_GOT_SIGNAL, ER_SHUTDOWN_COMPLETE, ER_FORCING_CLOSE,
    ER_ABORTING_CONNECTION, ER_NET_PACKET_TOO_LARGE, ER_NET_READ_ERROR_FROM_PIPE, ER_NET_FCNTL_ERROR,
    ER_NET_PACKETS_OUT_OF_ORDER, ER_NET_UNCOMPRESS_ERROR, ER_NET_READ_ERROR, ER_NET_READ_INTERRUPTED,
    ER_NET_ERROR_ON_WRITE, ER_NET_WRITE_INTERRUPTED, ER_NEW_ABORTING_CONNECTION,
    ER_QUERY_INTERRUPTED, ER_CONNECTION_KILLED,
}

# A statement the server refuses as written or for this user (SQLSTATE 42000 and 3D000 among
# them): running it again cannot help.
REFUSED_AS_WRITTEN = frozenset({
    ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR, ER_NO_DB_ERROR, ER_BAD_DB_ERROR, ER_PARSE_ERROR,
    ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR,
    ER_PROCACCESS_DENIED_ERROR,
})


def error_code(error: BaseException) -> int | None:
    """The MySQL/MariaDB error number a pymysql error carries (its first argument), if any."""
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def refused_by_server(error: BaseException) -> bool:
    """The server raised this error about the statement itself. Codes below 2000 are the
    server's, 2000 and above the client's (a lost connection); an InterfaceError is the client's
    too (a closed connection, code 0)."""
    if isinstance(error, pymysql.err.InterfaceError):
        return False
    code = error_code(error)
    return code is not None and code < CR_MIN_ERROR and code not in NOT_ABOUT_THE_STATEMENT


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
