"""Debezium's offsets, taken over (dblog.runtime.debezium_offsets, dblog.runtime.java_offset_file):
the file store's Java serialization stream built byte by byte from the Java Object Serialization
Stream Protocol (and written by a real JVM's ObjectOutputStream), the offsets topic's records, and
the checks of the hand-over."""

from __future__ import annotations

import dataclasses

import json
import shutil
import struct
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.delivered_cut import DeliveredCut
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.runtime.debezium_offsets import (DebeziumOffset, DebeziumOffsetsError, ServerFacts, choose, delivered_of,
                                            hand_over, offsets_of, position_of, snapshot_collections)
from dblog.runtime.debezium_skips import LoggedEvent
from dblog.runtime.java_offset_file import JavaStreamError, parse_offset_file
from dblog.runtime.offset_store import OffsetStore

# --- the Java Object Serialization stream, from the spec's grammar (chapter 6.4) -------------------
# stream: magic version contents; newObject: TC_OBJECT classDesc newHandle classdata[];
# newClassDesc: TC_CLASSDESC className serialVersionUID newHandle classDescInfo;
# classDescInfo: classDescFlags fields classAnnotation superClassDesc;
# newArray: TC_ARRAY classDesc newHandle (int)<size> values[size]; prevObject: TC_REFERENCE (int)handle


def _utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


HASHMAP_DESC = (b"\x72" + _utf("java.util.HashMap") + bytes.fromhex("0507DAC1C31660D1") + b"\x03"
                + struct.pack(">H", 2) + b"F" + _utf("loadFactor") + b"I" + _utf("threshold") + b"\x78\x70")
BYTE_ARRAY_DESC = b"\x72" + _utf("[B") + bytes.fromhex("ACF317F8060854E0") + b"\x02" + struct.pack(">H", 0) + b"\x78\x70"


def java_hashmap(entries: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """What ObjectOutputStream.writeObject(HashMap<byte[], byte[]>) writes: handles 0x7E0000 (the
    HashMap class), 0x7E0001 (the map), 0x7E0002 (the "[B" class), then one per array."""
    out = bytearray(b"\xAC\xED\x00\x05\x73" + HASHMAP_DESC)
    out += struct.pack(">fi", 0.75, 12) + b"\x77\x08" + struct.pack(">ii", 16, len(entries))
    class_written = False
    for item in (part for entry in entries for part in entry):
        if item is None:
            out += b"\x70"
            continue
        out += b"\x75"
        out += b"\x71" + struct.pack(">I", 0x7E0002) if class_written else BYTE_ARRAY_DESC
        class_written = True
        out += struct.pack(">i", len(item)) + item
    return bytes(out + b"\x78")


KEY = json.dumps(["inventory-connector", {"server": "shop"}]).encode()
VALUE = json.dumps({"file": "binlog.000003", "pos": 1234, "gtids": "0-1-7", "event": 2, "row": 1}).encode()


def test_a_file_store_reads_as_its_map():
    assert parse_offset_file(java_hashmap([(KEY, VALUE), (b"k", None), (None, b"v")])) == {
        KEY: VALUE, b"k": None, None: b"v"}
    assert parse_offset_file(java_hashmap([])) == {}


def test_a_reference_to_an_array_read_before():
    data = java_hashmap([(b"same", b"x")])
    # the value refers back to the key's array (handle 0x7E0003), as a stream may write one object twice
    shared = data[: data.rindex(b"\x75")] + b"\x71" + struct.pack(">I", 0x7E0003) + b"\x78"
    assert parse_offset_file(shared) == {b"same": b"same"}


@given(st.dictionaries(st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=300)), max_size=12))
def test_any_map_of_byte_arrays_reads_back(entries):
    assert parse_offset_file(java_hashmap(list(entries.items()))) == entries


@given(st.data())
def test_a_truncated_file_is_refused_not_misread(data):
    stream = java_hashmap([(KEY, VALUE), (b"other", b"value")])
    cut = data.draw(st.integers(0, len(stream) - 1))
    with pytest.raises(JavaStreamError):
        parse_offset_file(stream[:cut])


@pytest.mark.parametrize("stream, says", [
    (b"PK\x03\x04rest", "no 0xACED magic"),
    (b"\xAC\xED\x00\x04", "version 4"),
    (java_hashmap([(KEY, VALUE)]).replace(b"java.util.HashMap", b"java.util.TreeMap"), "java.util.TreeMap"),
    (java_hashmap([(KEY, VALUE)]) + b"\x70", "1 bytes follow the map"),
    (java_hashmap([(KEY, VALUE)]).replace(b"\x00\x02[B", b"\x00\x02[I"), "[I array, not a byte array"),
    (java_hashmap([(b"a", b"b"), (b"c", b"d")]).replace(b"\x71\x00\x7E\x00\x02", b"\x71\x00\x7E\x00\x09", 1),
     "never assigned"),
])
def test_other_streams_are_refused_with_what_was_found(stream, says):
    with pytest.raises(JavaStreamError, match=".*" + says.replace("[", r"\[")):
        parse_offset_file(stream)


@pytest.mark.skipif(shutil.which("java") is None, reason="no JVM")
def test_a_stream_written_by_javas_own_object_output_stream(tmp_path):
    """The real serializer (the JDK's ObjectOutputStream), fed the map FileOffsetBackingStore.save builds."""
    source = tmp_path / "WriteOffsets.java"
    source.write_text("""
import java.io.*; import java.util.*; import java.nio.charset.StandardCharsets;
public class WriteOffsets { public static void main(String[] a) throws Exception {
  Map<byte[], byte[]> raw = new HashMap<>();
  for (int i = 1; i + 1 < a.length; i += 2)
    raw.put(a[i].getBytes(StandardCharsets.UTF_8), a[i + 1].equals("null") ? null : a[i + 1].getBytes(StandardCharsets.UTF_8));
  try (ObjectOutputStream os = new ObjectOutputStream(new FileOutputStream(a[0]))) { os.writeObject(raw); }
}}""")
    path = tmp_path / "offsets.dat"
    other = json.dumps(["other", {"server": "x"}])
    subprocess.run(["java", str(source), str(path), KEY.decode(), VALUE.decode(), other, "null"], check=True,
                   capture_output=True, timeout=120)
    assert parse_offset_file(path.read_bytes()) == {KEY: VALUE, other.encode(): None}


# --- the offsets topic's records ----------------------------------------------------------------

def _key(name: str, server: str) -> bytes:
    return json.dumps([name, {"server": server}]).encode()


def test_the_last_record_of_a_key_wins_and_a_null_resets_it():
    records = [(_key("a", "shop"), b'{"pos": 1}'), (_key("b", "crm"), b'{"pos": 9}'), (_key("a", "shop"), b'{"pos": 2}'),
               (_key("b", "crm"), None), (None, b"ignored")]
    assert offsets_of(records, "t") == [DebeziumOffset("a", "shop", {"pos": 2})]


def test_a_key_of_another_kind_is_refused():
    with pytest.raises(DebeziumOffsetsError, match="not a Debezium MySQL connector's"):
        offsets_of([(b'{"database": "x"}', b"{}")], "offsets topic t")


def test_the_connector_chosen_is_the_one_with_dblogs_name_as_its_prefix():
    offsets = [DebeziumOffset("a", "shop", {}), DebeziumOffset("b", "crm", {})]
    assert choose(offsets, "crm", "t").connector == "b"
    with pytest.raises(DebeziumOffsetsError, match=r"no offsets of a connector with topic.prefix 'hr'.*'a' \(topic"):
        choose(offsets, "hr", "t")


def test_snapshot_collections_as_debezium_writes_them():
    written = json.dumps([{"incremental_snapshot_collections_id": "shop.orders",
                           "incremental_snapshot_collections_additional_condition": None,
                           "incremental_snapshot_collections_surrogate_key": None},
                          {"incremental_snapshot_collections_id": "shop.items"}])
    assert snapshot_collections(written) == ["shop.orders", "shop.items"]
    assert snapshot_collections(None) == [] and snapshot_collections("") == []


# --- the hand-over's checks -------------------------------------------------------------------

def _facts(flavor="mariadb", executed="0-1-20", purged="0-1-3", files=("binlog.000002", "binlog.000003"),
           positions=None, server_id=1):
    positions = positions or {("binlog.000003", 1234): "0-1-7"}
    return ServerFacts(flavor, server_id, GtidSet.parse(executed, flavor), GtidSet.parse(purged, flavor), list(files),
                       lambda file, pos: positions[(file, pos)])


def _offset(**fields):
    return DebeziumOffset("c", "shop", fields)


def test_gtids_are_the_position():
    position, warnings = position_of(_offset(gtids="0-1-9", file="binlog.000003", pos=99), _facts(), "t")
    assert position == GtidSet.parse("0-1-9", "mariadb") and warnings == []
    uuid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    mysql = _facts("mysql", f"{uuid}:1-50", f"{uuid}:1-3")
    position, _ = position_of(_offset(gtids=f"{uuid}:1-\n40"), mysql, "t")  # MySQL's set text may wrap
    assert position == GtidSet.parse(f"{uuid}:1-40", "mysql")


def test_mariadb_file_and_position_become_the_servers_gtid_position_there():
    position, warnings = position_of(_offset(file="binlog.000003", pos=1234, event=2, row=1), _facts(), "t")
    assert position == GtidSet.parse("0-1-7", "mariadb") and warnings == []


def test_debeziums_skips_become_the_delivered_cut_saved_with_the_offsets(tmp_path):
    """event 3, row 2 (Debezium's MySQL connector on MariaDB: no ANNOTATE_ROWS received): the
    GTID event, a table map, a rows event of 4 rows done, and 2 rows of the next one."""
    events = [LoggedEvent(1234, 1300, "Gtid", "BEGIN GTID 0-1-8"), LoggedEvent(1300, 1350, "Annotate_rows"),
              LoggedEvent(1350, 1400, "Table_map"), LoggedEvent(1400, 1500, "Write_rows_v1"),
              LoggedEvent(1500, 1600, "Update_rows_v1"), LoggedEvent(1600, 1630, "Xid", "COMMIT /* xid=9 */")]
    facts = dataclasses.replace(_facts(), binlog_events=lambda file, pos, limit: events[:limit])
    store = OffsetStore(tmp_path / "offsets.json")
    assert hand_over(store, _offset(file="binlog.000003", pos=1234, event=3, row=2), facts, "t", replace=False) == []
    saved = store.load()
    assert saved.position == GtidSet.parse("0-1-7", "mariadb")
    assert saved.delivered == DeliveredCut("binlog.000003", 1234, 1600, 2)


def test_skips_that_cannot_be_placed_read_the_transaction_again_in_full(tmp_path):
    store = OffsetStore(tmp_path / "offsets.json")
    warnings = hand_over(store, _offset(file="binlog.000003", pos=1234, event=2, row=1), _facts(), "t", replace=False)
    assert len(warnings) == 1 and "reads that transaction again in full" in warnings[0]
    assert store.load().delivered is None


@pytest.mark.parametrize("offset, facts, says", [
    (_offset(file="binlog.000003", pos=4), _facts("mysql", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", ""),
     'no `gtids`.*set source.position_mode = "file"'),
    (_offset(snapshot=True, file="binlog.000003", pos=4), _facts(), "during its initial snapshot"),
    (_offset(gtids="0-1-9", server_id=7), _facts(), "server_id 7, the source is server_id 1"),
    (_offset(gtids="0-1-2"), _facts(), "purged transactions Debezium had not read"),
    (_offset(gtids="0-1-30"), _facts(), "never logged"),
    (_offset(file="binlog.000001", pos=4), _facts(), "binlog file binlog.000001 is not on the server"),
    (_offset(gtids="not a set"), _facts(), "not a mariadb GTID set"),
])
def test_what_cannot_be_taken_over_exactly_is_refused(offset, facts, says):
    with pytest.raises(DebeziumOffsetsError, match=says):
        position_of(offset, facts, "t")


def test_mysql_file_and_position_without_gtids_start_there_in_file_position_mode(tmp_path):
    """Debezium on a MySQL server with gtid_mode OFF: its offset holds `file` and `pos` (where
    the transaction it was in starts) and no `gtids`. In file-position mode dblog starts there
    (refused before issue 39's file positions: "dblog resumes MySQL only from a GTID set")."""
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    identity = BinlogIdentity(1, "binlog", uuid)
    facts = dataclasses.replace(_facts("mysql", "", ""), binlog=identity)
    position, warnings = position_of(_offset(file="binlog.000003", pos=1234, server_id=1), facts, "t")
    assert FilePosition.of(position, "binlog") == FilePosition("binlog.000003", 1234) and warnings == []
    inside = _offset(file="binlog.000003", pos=1234, event=3, row=1)
    position, warnings = position_of(inside, facts, "t")
    assert FilePosition.of(position, "binlog") == FilePosition("binlog.000003", 1234) and warnings == []
    cut, notes = delivered_of(inside, facts, "t")  # the skips, as in GTID mode (here the binlog was not read)
    assert cut is None and len(notes) == 1 and "reads that transaction again in full" in notes[0]
    with pytest.raises(DebeziumOffsetsError, match="binlog file binlog.000001 is not on the server"):
        position_of(_offset(file="binlog.000001", pos=4), facts, "t")
    store = OffsetStore(tmp_path / "offsets.json")
    hand_over(store, _offset(file="binlog.000002", pos=77), facts, "t", replace=False)
    saved = store.load()
    assert (saved.binlog, FilePosition.of(saved.position, "binlog")) == (identity, FilePosition("binlog.000002", 77))


def test_dblogs_own_offsets_win_unless_replaced(tmp_path):
    store = OffsetStore(tmp_path / "offsets.json")
    store.save(Offsets("mariadb", GtidSet.parse("0-1-15", "mariadb")))
    with pytest.raises(DebeziumOffsetsError, match="dblog's own offsets.*--replace-offsets"):
        hand_over(store, _offset(gtids="0-1-9"), _facts(), "t", replace=False)
    assert store.load().position == GtidSet.parse("0-1-15", "mariadb")
    hand_over(store, _offset(gtids="0-1-9"), _facts(), "t", replace=True)
    assert store.load().position == GtidSet.parse("0-1-9", "mariadb") and store.load().snapshot == {}


# --- the commands -------------------------------------------------------------------------------

def _dblog(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_replace_offsets_goes_with_debezium_offsets(tmp_path):
    result = _dblog("run", "--config", str(tmp_path / "none.toml"), "--replace-offsets")
    assert result.returncode == 2 and "--replace-offsets goes with --debezium-offsets" in result.stderr


def test_convert_debezium_writes_dblogs_offsets_from_debezium_servers_file(mariadb, database, tmp_path):
    """Debezium Server's application.properties and its offset file: `convert-debezium` writes the
    TOML and dblog's offsets file at the server's present position; a second take-over is refused
    while dblog's own offsets are there, unless --replace-offsets."""
    executed = mariadb.execute("SELECT @@gtid_binlog_pos")[0][0]
    server_id = mariadb.execute("SELECT @@server_id")[0][0]
    (tmp_path / "application.properties").write_text("\n".join([
        "debezium.sink.type=kafka", "debezium.sink.kafka.producer.bootstrap.servers=127.0.0.1:9092",
        "debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector",
        "debezium.source.database.hostname=127.0.0.1", f"debezium.source.database.port={mariadb.port}",
        f"debezium.source.database.user={mariadb.user}", f"debezium.source.database.password={mariadb.password}",
        "debezium.source.database.server.id=4100077", "debezium.source.topic.prefix=shop",
        f"debezium.source.database.include.list={database}",
        "debezium.source.offset.storage.file.filename=data/offsets.dat"]) + "\n")
    (tmp_path / "data").mkdir()
    offset = {"file": "binlog.000001", "pos": 4, "gtids": executed, "server_id": server_id, "ts_sec": 1}
    (tmp_path / "data" / "offsets.dat").write_bytes(java_hashmap([
        (_key("other-connector", "crm"), b'{"gtids": "0-1-1"}'),
        (_key("shop-connector", "shop"), json.dumps(offset).encode())]))
    convert = ["--log-level", "info", "convert-debezium", "application.properties", "--no-environment",
               "--debezium-offsets", "data/offsets.dat"]
    result = _dblog(*convert, "-o", "dblog.toml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "took over Debezium's offsets" in result.stderr and "'shop-connector'" in result.stderr
    saved = OffsetStore(tmp_path / "dblog-data" / "offsets.json").load()
    assert saved.position == GtidSet.parse(executed, "mariadb") and saved.snapshot == {}
    again = _dblog(*convert, cwd=tmp_path)
    assert again.returncode == 1 and "dblog's own offsets are at" in again.stderr and "--replace-offsets" in again.stderr
    assert _dblog(*convert, "--replace-offsets", cwd=tmp_path).returncode == 0
    offset["server_id"] = server_id + 1
    (tmp_path / "data" / "offsets.dat").write_bytes(java_hashmap([(_key("c", "shop"), json.dumps(offset).encode())]))
    other = _dblog(*convert, "--replace-offsets", cwd=tmp_path)
    assert other.returncode == 1 and f"server_id {server_id + 1}" in other.stderr


# SHOW BINLOG EVENTS of MariaDB 10.11 as a take-over test's server printed them (one transaction
# before: its GTID event, rows and XID): Pos, Event_type, End_log_pos, Info.
_MARIADB_EVENTS = [
    (2681990, "Gtid", 2682032, "BEGIN GTID 0-1-7047"),
    (2682032, "Table_map", 2682060, "table_id: 18 (shop.t)"),
    (2682060, "Update_rows_v1", 2682098, "table_id: 18 flags: STMT_END_F"),
    (2682098, "Xid", 2682129, "COMMIT /* xid=22812 */"),
    (2682129, "Gtid", 2682171, "BEGIN GTID 0-1-7048"),
    (2682171, "Annotate_rows", 2682229, "INSERT INTO t VALUES (8600, 892545)"),
    (2682229, "Table_map", 2682300, "table_id: 18 (shop.t)"),
    (2682300, "Write_rows_v1", 2682342, "table_id: 18 flags: STMT_END_F"),
    (2682342, "Xid", 2682373, "COMMIT /* xid=22814 */"),
    (2682373, "Gtid", 2682415, "GTID 0-1-7049"),
    (2682415, "Query", 2682500, "ALTER TABLE t ADD COLUMN w INT"),
]
# MySQL 8's, as its SHOW BINLOG EVENTS names and prints them (mysql-server sql/log_event.cc:
# Log_event::get_type_str, Gtid_log_event::pack_info "SET @@SESSION.GTID_NEXT= '…'", Query and Xid
# events' statements): without GTIDs (anonymous), a transaction, a DDL statement; with a GTID, an
# XA transaction prepared, then committed.
_MYSQL_EVENTS = [
    (157, "Anonymous_Gtid", 236, "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"),
    (236, "Query", 311, "BEGIN"),
    (311, "Rows_query", 370, "# INSERT INTO t VALUES (1, 2)"),
    (370, "Table_map", 420, "table_id: 91 (shop.t)"),
    (420, "Write_rows", 460, "table_id: 91 flags: STMT_END_F"),
    (460, "Xid", 491, "COMMIT /* xid=12 */"),
    (491, "Anonymous_Gtid", 570, "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"),
    (570, "Query", 700, "use `shop`; ALTER TABLE t ADD COLUMN w INT /* xid=15 */"),
    (700, "Gtid", 779, "SET @@SESSION.GTID_NEXT= '3e11fa47-71ca-11e1-9e33-c80aa9429562:5'"),
    (779, "Query", 860, "XA START X'7831',X'',1"),
    (860, "Table_map", 910, "table_id: 91 (shop.t)"),
    (910, "Write_rows", 950, "table_id: 91 flags: STMT_END_F"),
    (950, "Query", 1030, "XA END X'7831',X'',1"),
    (1030, "XA_prepare", 1070, "XA PREPARE X'7831',X'',1"),
    (1070, "Gtid", 1149, "SET @@SESSION.GTID_NEXT= '3e11fa47-71ca-11e1-9e33-c80aa9429562:6'"),
    (1149, "Query", 1230, "XA COMMIT X'7831',X'',1"),
]


@pytest.mark.parametrize("listed, pos, start", [
    (_MARIADB_EVENTS, 2682098, 2681990),  # Debezium's pos at the XID of the transaction it stopped in: its start
    (_MARIADB_EVENTS, 2682300, 2682129),  # at a rows event
    (_MARIADB_EVENTS, 2682129, 2682129),  # at a transaction's start
    (_MARIADB_EVENTS, 2682373, 2682373),  # between transactions (after an XID)
    (_MARIADB_EVENTS, 2682500, 2682500),  # after a DDL statement
    (_MARIADB_EVENTS, 2682415, 2682373),  # at the DDL's statement
    (_MYSQL_EVENTS, 236, 157),  # at the BEGIN
    (_MYSQL_EVENTS, 420, 157),  # at a rows event (after MySQL's Rows_query)
    (_MYSQL_EVENTS, 460, 157),  # at the XID
    (_MYSQL_EVENTS, 491, 491),  # between transactions
    (_MYSQL_EVENTS, 570, 491),  # at the DDL's statement
    (_MYSQL_EVENTS, 700, 700),  # after it
    (_MYSQL_EVENTS, 1030, 700),  # inside an XA transaction, at its XA PREPARE
    (_MYSQL_EVENTS, 1070, 1070),  # after it
    (_MYSQL_EVENTS, 1149, 1070),  # at the XA COMMIT
    (_MYSQL_EVENTS, 1230, 1230),  # after it
])
def test_a_debezium_position_inside_a_transaction_goes_back_to_its_start(listed, pos, start):
    """The binlog read page by page (SHOW BINLOG EVENTS IN file FROM pos LIMIT 4), from the file's start."""
    from dblog.runtime.debezium_offsets import transaction_start

    def binlog_events(file, at, limit):
        assert file == "binlog.000001"
        return [LoggedEvent(first, end, kind, info) for first, kind, end, info in listed if first >= at][:min(limit, 4)]

    facts = dataclasses.replace(_facts(), binlog_events=binlog_events)
    found = transaction_start(facts, "binlog.000001", pos)
    assert (pos if found is None else found) == start
