"""The adapter's contract (tests/support/binlog_contract.py) against the real `BinlogSource`
on the private MariaDB: every kind of transaction MariaDB logs, with a dump connection killed
on the way. (MySQL's kinds: tests/mysql/test_binlog_mysql_transactions.py, through the same check;
the model test draws its log through it too.) And the check itself: it must fail on the
streams it exists to catch, the XA rows stamped with their XA PREPARE's coordinates first.
"""

from __future__ import annotations

import pytest
from support.binlog_contract import BinlogContract, ContractBroken

from dblog.core.events import Heartbeat, RowChange, SchemaChange, SourceInfo, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate

T = TableId("shop", "t")
FILE = "binlog.000001"


def _row(gtid: Gtid, key: int, pos: int, row: int = 0) -> RowChange:
    return RowChange(T, "c", (key,), None, {"id": key}, SourceInfo(str(gtid), FILE, pos, row))


def _transaction(gtid: Gtid, pos: int, *events, commit: int | None = None) -> list:
    end = TransactionEnd(gtid, BinlogCoordinate.of(FILE, commit) if commit else None)
    return [TransactionStart(gtid, file=FILE, pos=pos), *events, end]


PREPARE, OTHER, COMMIT = Gtid.mariadb(0, 1, 5), Gtid.mariadb(0, 1, 6), Gtid.mariadb(0, 1, 7)


def test_the_contract_accepts_xa_rows_released_with_the_commits_coordinates():
    stream = (_transaction(PREPARE, 100)
              + _transaction(OTHER, 300, _row(OTHER, 2, 350), commit=360)
              + _transaction(COMMIT, 400, _row(COMMIT, 1, 450, 0), _row(COMMIT, 3, 450, 1), commit=450)
              + [Heartbeat(FILE, 500)])
    contract = BinlogContract().check_all(stream)
    assert (contract.transactions, contract.rows) == (3, 3)


def test_the_contract_refuses_xa_rows_stamped_when_prepared():
    """What BinlogSource yielded before the fix: the XA COMMIT's transaction releasing rows that
    carry the XA PREPARE's GTID and position (the Iceberg sink then dropped them as held)."""
    stream = (_transaction(PREPARE, 100)
              + _transaction(OTHER, 300, _row(OTHER, 2, 350), commit=360)
              + _transaction(COMMIT, 400, _row(PREPARE, 1, 150), commit=450))
    with pytest.raises(ContractBroken, match="carries GTID 0-1-5"):
        BinlogContract().check_all(stream)


@pytest.mark.parametrize("broken, message", [
    (_transaction(OTHER, 300, _row(OTHER, 1, 350), _row(OTHER, 2, 340)), "not after the row before it"),
    (_transaction(OTHER, 300, _row(OTHER, 1, 350), _row(OTHER, 2, 350)), "repeat"),
    (_transaction(OTHER, 300, _row(OTHER, 1, 250)), "before the transaction's start"),
    ([TransactionStart(OTHER, file=FILE, pos=300), Heartbeat(FILE, 310)], "heartbeat inside"),
    (_transaction(OTHER, 300)[:1] + _transaction(COMMIT, 400), "starts inside"),
    (_transaction(OTHER, 300) + _transaction(OTHER, 400), "second time"),
    (_transaction(OTHER, 300, _row(OTHER, 1, 350), SchemaChange(OTHER, "shop", "DROP TABLE t")), "after other events"),
    ([_row(OTHER, 1, 350)], "outside any transaction"),
    (_transaction(OTHER, 300, _row(OTHER, 1, 350), commit=340), "commit is at"),
])
def test_the_contract_refuses(broken, message):
    with pytest.raises(ContractBroken, match=message):
        BinlogContract().check_all(broken)


def test_the_contract_refuses_a_transaction_the_start_position_holds():
    with pytest.raises(ContractBroken, match="start position"):
        BinlogContract(GtidSet.parse("0-1-6", "mariadb")).check_all(_transaction(OTHER, 300))


# --- the real adapter on MariaDB ------------------------------------------------------------------


def _session(mariadb, database: str, *statements: str) -> None:
    """Runs the statements in one session, which then ends (a prepared XA transaction outlives it)."""
    connection = mariadb.connect(database)  # autocommit
    try:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
    finally:
        connection.close()


@pytest.fixture(autouse=True)
def _xa_tests_one_at_a_time(xa_one_at_a_time):
    """Server-wide XA ids: see the fixture."""


def _dump_threads(mariadb) -> list[int]:
    return [row[0] for row in mariadb.execute("SHOW PROCESSLIST") if row[4] == "Binlog Dump"]


def test_every_kind_of_mariadb_transaction_keeps_the_contract(mariadb, database, source_connection, open_binlog):
    _session(mariadb, database,
             "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
             "CREATE TABLE n (id INT PRIMARY KEY) ENGINE=MyISAM")
    start = source_connection.server.executed_gtids()
    _session(mariadb, database,
             "BEGIN", "INSERT INTO t VALUES (1, 'a'), (2, 'b')", "UPDATE t SET v = 'c' WHERE id = 1",
             "DELETE FROM t WHERE id = 2", "COMMIT")
    _session(mariadb, database, "XA START 'a'", "INSERT INTO t VALUES (10, 'xa'), (11, 'xa')", "XA END 'a'",
             "XA PREPARE 'a'")
    _session(mariadb, database, "INSERT INTO t VALUES (3, 'd')")
    _session(mariadb, database, "XA START 'b'", "INSERT INTO t VALUES (20, 'undone')", "XA END 'b'", "XA PREPARE 'b'")
    _session(mariadb, database, "SET SESSION gtid_domain_id = 1", "XA COMMIT 'a'", "XA ROLLBACK 'b'")
    _session(mariadb, database, "XA START 'c'", "INSERT INTO t VALUES (30, 'one')", "XA END 'c'",
             "XA COMMIT 'c' ONE PHASE")
    _session(mariadb, database, "INSERT INTO n VALUES (1)", "ALTER TABLE t ADD COLUMN w INT",
             "CREATE TABLE u SELECT * FROM t", "TRUNCATE TABLE n")
    _session(mariadb, database, "BEGIN", *(f"INSERT INTO t (id, v) VALUES ({100 + i}, 'big')" for i in range(300)),
             "COMMIT")
    _session(mariadb, database, "INSERT INTO t (id, v) VALUES (4, 'last')")
    end = source_connection.server.executed_gtids()

    source = open_binlog(start, table_filter=lambda table: table.db == database)
    contract = BinlogContract(start)
    events, killed = [], False
    for event in source:
        contract.check(event, source.position if isinstance(event, TransactionEnd) else None)
        events.append(event)
        if not killed and isinstance(event, RowChange) and event.after and event.after.get("v") == "big":
            for thread in _dump_threads(mariadb):  # cut the stream inside the big transaction
                mariadb.execute(f"KILL {thread}")
            killed = True
        if isinstance(event, Heartbeat) and end.issubset(source.position):
            break
    assert killed and source.reconnects >= 1

    rows = [event for event in events if isinstance(event, RowChange) and event.table.table == "t"]
    released = [row for row in rows if row.after and row.after.get("v") == "xa"]
    assert [row.key for row in released] == [(10,), (11,)]
    commit = Gtid.parse(released[0].source.gtid)
    assert commit.source == "1", "the rows carry the XA COMMIT's GTID (domain 1), not the XA PREPARE's"
    assert [row.source.row for row in released] == [0, 1]
    assert not [row for row in rows if row.key == (20,)], "XA ROLLBACK 'b': nothing"
    assert len([row for row in rows if row.after and row.after.get("v") == "big"]) == 300, "each row once"
    assert [e.sql for e in events if isinstance(e, SchemaChange)][:1] == ["ALTER TABLE t ADD COLUMN w INT"]
    assert source.position == end
