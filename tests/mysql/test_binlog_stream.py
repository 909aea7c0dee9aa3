"""`BinlogConnection.pending` against a real dump session: true while bytes that have arrived are
unread, false once they are all read, and one system call answers for many events (the reader
process asks at every transaction's end)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from dblog.mysql.binlog import stream
from dblog.mysql.binlog.decoder import XID
from dblog.mysql.binlog.stream import BinlogConnection

TRANSACTIONS = 300


def test_pending_counts_the_bytes_that_arrived_with_one_system_call_for_many_events(
    mariadb, database, source_connection, monkeypatch
):
    mariadb.execute(f"CREATE TABLE `{database}`.burst (id INT PRIMARY KEY, note VARCHAR(40))")
    start = source_connection.server.executed_gtids()
    for n in range(TRANSACTIONS):
        mariadb.execute(f"INSERT INTO `{database}`.burst VALUES ({n}, 'a note of some forty bytes, or about')")
    asked = []  # the system calls `pending` makes: FIONREAD, or select() where it would poll
    ioctl, select = stream.ioctl, stream.select.select
    monkeypatch.setattr(stream, "ioctl", lambda *args: (asked.append(1), ioctl(*args))[1])
    monkeypatch.setattr(stream, "select", SimpleNamespace(select=lambda *args: (asked.append(1), select(*args))[1]))
    connection = BinlogConnection(mariadb.connection_settings, 4242, 30.0, "mariadb")  # no heartbeat meanwhile
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
        # While most of the burst was still to read, every transaction's end saw more arrived.
        assert all(pending[:TRANSACTIONS // 2]), pending.index(False)
        # Every byte that arrived is read: nothing more has arrived (a caller would hold an event).
        assert not connection.pending()
        assert len(asked) < TRANSACTIONS // 10, f"{len(asked)} system calls for {TRANSACTIONS} transactions"
    finally:
        connection.close()
