"""MySQL's binlog without GTIDs (gtid_mode OFF, MySQL's default), read in file-position mode
(dblog.core.file_positions), fed as encoded events through the real source and decoder (no MySQL
server is installable here).

Each transaction a MySQL server logs without a GTID opens with an ANONYMOUS_GTID_LOG_EVENT (type
34) instead of a GTID_LOG_EVENT (33): the same layout, read by the same constructor
(libs/mysql/binlog/event/control_events.cpp, `Gtid_event::Gtid_event`, 8.4):

    1 byte flags | 16 bytes SID | 8 bytes GNO | 1 byte lt_type (2) | 8 bytes last_committed |
    8 bytes sequence_number | 7/14 bytes commit timestamps | 1-9 bytes transaction_length |
    4/8 bytes server versions | (8 bytes commit group ticket)

and "Assume this is an ANONYMOUS_GTID_LOG_EVENT ... if (gtid_info_struct.rpl_gtid_gno != 0)
READER_THROW("Invalid GNO")": an anonymous event's GNO is 0 (its SID is all zeros). The
FORMAT_DESCRIPTION's post-header lengths give both types `Gtid_event::POST_HEADER_LENGTH`. The
events below are built byte by byte from that table, not by the tests' encoder.
"""

from __future__ import annotations

import struct

import pytest
from support import binlog_encoder as be
from support.binlog_contract import BinlogContract
from support.scripted_binlog import FILE, ScriptedPrimary

from dblog.core.events import RowChange, TransactionEnd, TransactionStart
from dblog.core.file_positions import FilePosition, base_name, position_before, transaction_at
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.binlog import BinlogError
from dblog.mysql.binlog.decoder import BinlogDecodeError, BinlogDecoder, GtidRecord

TABLE = be.Table(12, "shop", "t", [be.int_("id", nullable=False), be.varchar("name", 20)], primary_key=(0,))


def anonymous_gtid_body(gno: int = 0, last_committed: int = 3, sequence_number: int = 4) -> bytes:
    """Gtid_event's layout (control_events.cpp, above) as a gtid_mode=OFF server writes it."""
    flags = 1  # FLAG_MAY_HAVE_SBR
    return (bytes([flags]) + bytes(16) + struct.pack("<q", gno)
            + bytes([2]) + struct.pack("<qq", last_committed, sequence_number)  # LOGICAL_TIMESTAMP_TYPECODE
            + (1_700_000_000_123_456).to_bytes(7, "little")  # immediate commit timestamp, high bit clear
            + bytes([250 & 0x7F]) + struct.pack("<I", 80400))  # transaction_length (1 byte), server version


def primary_without_gtids(rows: int) -> ScriptedPrimary:
    primary = ScriptedPrimary("mysql")
    for key in range(1, rows + 1):
        with primary.anonymous_transaction(anonymous_gtid_body()) as log:
            log.query("BEGIN")
            log.table_map(TABLE)
            log.rows(TABLE, "c", [[key, f"r{key}"]])
            log.xid()
    return primary


def test_the_decoder_reads_an_anonymous_gtid_event_as_a_transaction_start_without_a_gtid():
    decoder = BinlogDecoder("mysql")
    decoder.file = FILE
    event = be.event(be.ANONYMOUS_GTID, anonymous_gtid_body(), log_pos=1000, checksum=False)
    record = decoder.decode(event)
    assert isinstance(record, GtidRecord)
    assert record.gtid is None and record.standalone
    assert (record.start, record.pos) == (1000 - len(event), 1000)


def test_an_anonymous_gtid_event_with_a_gno_is_refused_as_mysql_refuses_it():
    decoder = BinlogDecoder("mysql")
    with pytest.raises(BinlogDecodeError, match="GNO 7"):
        decoder.decode(be.event(be.ANONYMOUS_GTID, anonymous_gtid_body(gno=7), log_pos=500, checksum=False))


def test_file_mode_reads_every_anonymous_transaction_with_no_gtid_in_its_records():
    primary = primary_without_gtids(3)
    start = position_before(BinlogCoordinate.of(FILE, 4))
    events = primary.read(start, binlog_base="binlog")
    changes = [event for event in events if isinstance(event, RowChange)]
    assert [change.key for change in changes] == [(1,), (2,), (3,)]
    assert all(change.source.gtid is None and change.source.file == FILE for change in changes)
    starts = [event for event in events if isinstance(event, TransactionStart)]
    # named by where each starts: three distinct, growing names
    assert [event.gtid for event in starts] == [transaction_at(BinlogCoordinate.of(FILE, start))
                                                for _, _, start in primary.transactions]
    BinlogContract(file_positions=True).check_all(events)
    assert primary.connections == [FilePosition(FILE, 4)]


def test_the_old_gtid_reader_lost_these_rows_and_now_refuses_them_by_name():
    # Before: ANONYMOUS_GTID was skipped as "nothing", and the rows of each transaction fell
    # outside any transaction (silently dropped). Now a GTID-mode reader stops with the remedy.
    primary = primary_without_gtids(1)
    with pytest.raises(BinlogError, match='position_mode = "file"'):
        primary.read(GtidSet.empty("mysql"))


def test_a_resumed_file_mode_reader_starts_where_the_last_delivered_transaction_ends():
    primary = primary_without_gtids(4)
    source = primary.source(position_before(BinlogCoordinate.of(FILE, 4)), binlog_base="binlog")
    delivered = []
    try:
        for event in source:
            if isinstance(event, TransactionEnd):
                delivered.append(source.position)
            if len(delivered) == 2:
                break
    finally:
        source.close()
    saved = FilePosition.of(delivered[1], base_name(FILE))  # what a checkpoint after the second holds
    assert saved == FilePosition(FILE, primary.transactions[2][2])  # where the third starts: nothing to skip
    again = primary.read(saved.position(), binlog_base="binlog")
    assert [event.key for event in again if isinstance(event, RowChange)] == [(3,), (4,)]
    assert primary.connections[-1] == saved


def test_a_position_naming_a_delivered_transaction_start_reads_it_again_and_skips_it():
    # Debezium's offsets (file, pos of a transaction's start) with its whole transaction done
    primary = primary_without_gtids(3)
    second = FilePosition(FILE, primary.transactions[1][2], delivered=True)
    events = primary.read(second.position(), binlog_base="binlog")
    assert [event.key for event in events if isinstance(event, RowChange)] == [(3,)]
    assert primary.connections == [second]
    BinlogContract(file_positions=True).check_all(events)


def test_a_connection_lost_inside_a_transaction_goes_on_without_a_row_twice():
    primary = ScriptedPrimary("mysql")
    with primary.anonymous_transaction(anonymous_gtid_body()) as log:
        log.query("BEGIN")
        log.table_map(TABLE)
        log.rows(TABLE, "c", [[1, "a"]])
        log.rows(TABLE, "c", [[2, "b"]])
        log.xid()
    primary.cut_after = [5]  # rotate, format description, anonymous GTID, BEGIN, map: then lost
    events = primary.read(position_before(BinlogCoordinate.of(FILE, 4)), binlog_base="binlog")
    assert [event.key for event in events if isinstance(event, RowChange)] == [(1,), (2,)]
    BinlogContract(file_positions=True).check_all(events)


def test_mixed_gtid_and_anonymous_transactions_are_all_read_in_file_mode():
    # gtid_mode ON_PERMISSIVE / OFF_PERMISSIVE: both kinds in one binlog
    primary = ScriptedPrimary("mysql")
    with primary.transaction(Gtid.mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562", 1)) as log:
        log.query("BEGIN"); log.table_map(TABLE); log.rows(TABLE, "c", [[1, "a"]]); log.xid()
    with primary.anonymous_transaction(anonymous_gtid_body()) as log:
        log.query("BEGIN"); log.table_map(TABLE); log.rows(TABLE, "c", [[2, "b"]]); log.xid()
    events = primary.read(position_before(BinlogCoordinate.of(FILE, 4)), binlog_base="binlog")
    assert [event.key for event in events if isinstance(event, RowChange)] == [(1,), (2,)]
    assert all(event.source.gtid is None for event in events if isinstance(event, RowChange))
