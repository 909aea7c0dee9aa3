"""`BinlogConnection.pending` against a real dump session, plain and over TLS: true while bytes
that have arrived are unread, false once they are all read, and (plain) one system call answers
for many events (the reader process asks at every transaction's end)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from dblog.core.gtid import GtidSet
from dblog.mysql.binlog import stream
from dblog.mysql.binlog.decoder import XID
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.runtime.config import parse_config
from support.fixtures.tls import SERVER_NAME

pytestmark = pytest.mark.timeout(300)

TRANSACTIONS = 300


def _burst(db, server_id: int, settings, monkeypatch) -> tuple[list[bool], bool, int]:
    """A burst of TRANSACTIONS written before a dump session starts at it: `pending` at each
    transaction's end, after the last one, and the system calls it made."""
    database = f"burst_{uuid.uuid4().hex[:8]}"
    db.execute(f"CREATE DATABASE {database}")
    db.execute(f"CREATE TABLE {database}.burst (id INT PRIMARY KEY, note VARCHAR(40))")
    start = GtidSet.parse(db.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    for n in range(TRANSACTIONS):
        db.execute(f"INSERT INTO {database}.burst VALUES ({n}, 'a note of some forty bytes, or about')")
    asked = []  # the system calls `pending` makes: FIONREAD, or select() where it would poll
    ioctl, select = stream.ioctl, stream.select.select
    monkeypatch.setattr(stream, "ioctl", lambda *args: (asked.append(1), ioctl(*args))[1])
    monkeypatch.setattr(stream, "select", SimpleNamespace(select=lambda *args: (asked.append(1), select(*args))[1]))
    connection = BinlogConnection(settings, server_id, 30.0, "mariadb")  # no heartbeat meanwhile
    connection.open(start)
    try:
        connection.read_event()
        time.sleep(1.0)  # the whole burst is in the socket's buffers now
        ends, pending = 0, []
        while ends < TRANSACTIONS:
            packet = connection.read_event()
            if packet[4] == XID:  # the event type, after the timestamp
                ends += 1
                pending.append(connection.pending())
        return pending, connection.pending(), len(asked)
    finally:
        connection.close()
        db.execute(f"DROP DATABASE {database}")


def test_pending_counts_the_bytes_that_arrived_with_one_system_call_for_many_events(mariadb, monkeypatch):
    pending, after_all, calls = _burst(mariadb, 4242, mariadb.connection_settings, monkeypatch)
    # While most of the burst was still to read, every transaction's end saw more arrived.
    assert all(pending[:TRANSACTIONS // 2]), pending.index(False)
    # Every byte that arrived is read: nothing more has arrived (a caller would hold an event).
    assert not after_all
    assert calls < TRANSACTIONS // 10, f"{calls} system calls for {TRANSACTIONS} transactions"


def test_over_tls_pending_is_true_while_bytes_are_unread_and_false_once_all_are_read(tls_mariadb, monkeypatch):
    """The kernel's count is of TLS records, whose plaintext is shorter: only the bytes the SSL
    object has decrypted count, the socket is asked when it holds none."""
    source = {"host": SERVER_NAME, "port": tls_mariadb.db.port, "user": tls_mariadb.x509_user,
              "password": tls_mariadb.password, "tls": tls_mariadb.tls("verify_identity")}
    settings = parse_config({"source": source}).source.connection_settings()
    pending, after_all, _ = _burst(tls_mariadb.db, 4243, settings, monkeypatch)
    assert all(pending[:TRANSACTIONS // 2]), pending.index(False)
    assert not after_all



def test_a_connection_closed_under_the_reader_is_told_without_the_readers_internals(mariadb):
    """Issue 40: the connection-loss message said IndexError('index out of range') (an empty read
    indexed). The socket is shut down under a real dump session: the message says what happened."""
    import socket

    import pymysql

    start = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    connection = BinlogConnection(mariadb.connection_settings, 4243, 30.0, "mariadb")
    connection.open(start)
    try:
        connection.read_event()  # the server's first event: the session is streaming
        connection._connection._sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(pymysql.err.OperationalError) as lost:
            for _ in range(1000):  # the events already buffered, then the closed socket
                connection.read_event()
    finally:
        connection.close()
    message = str(lost.value)
    assert "closed the connection" in message, message
    assert "IndexError" not in message and "index out of range" not in message, message
