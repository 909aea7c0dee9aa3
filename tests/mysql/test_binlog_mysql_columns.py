"""MySQL 8 and 9 schemas as real servers log them, and what dblog does with an event it cannot
decode. Events are built as MySQL writes them (tests/support/binlog_encoder.py) and fed through the
real decoder and `BinlogSource` (tests/support/scripted_binlog.py); the end-to-end test runs
`dblog run` on a private MariaDB.

* Functional indexes (MySQL 8.0.13+). Each functional key part (`INDEX ((lower(email)))`, a
  multi-valued `INDEX ((CAST(j->'$.tags' AS UNSIGNED ARRAY)))`) is a hidden generated column,
  named `!hidden!<index>!<key part>!<n>` (sql/sql_table.cc, make_functional_index_column_name).
  MySQL never logs its value: sql/rpl_record.cc, pack_row, clears hidden generated columns from
  the image's bitmap, whatever binlog_row_image says, and the rows event's column bitmap has
  their bits clear. MySQL 8.0.13-8.0.19 still list the column in the TABLE_MAP, its name in the
  full metadata (the public binlog rpl_unfiltered_hidden_gcol.000001 of blackbeam/rust_mysql_common,
  written by 8.0.17 for `CREATE TABLE t (a INT, INDEX i((a+1)))` then `ADD COLUMN b TEXT`: column
  types 03 08 fc, the rows event's bitmap 0xfd); 8.0.20+ leave it out of both (sql/log_event.cc,
  Table_map_log_event over Replicated_columns_view OUTBOUND). A multi-valued index's column is a
  typed array: type MYSQL_TYPE_TYPED_ARRAY (20), metadata its element type then the element's own
  metadata, a VARCHAR's length in 3 bytes (sql/rpl_utility.cc, read_field_metadata; sql/field.h,
  Field_typed_array: binlog_type() TYPED_ARRAY, so not in SIGNEDNESS; real_type() the element's,
  so a CHAR array is a character column in the charset metadata, sql/log_event.cc
  is_character_field). Such a table streams; a row is partial, and refused, only when a column
  the table really has is missing (binlog_row_image=MINIMAL); the hidden column never reaches
  the output nor a row's definition.
* VECTOR (MySQL 9.0, type 242): table map metadata one byte, the length prefix's size (4), as a
  BLOB's (sql/rpl_utility.cc read_field_metadata, libs/mysql/binlog/event/binary_log_funcs.cpp
  calc_field_size); the value a 4-byte little-endian length, then little-endian float32s
  (sql/log_event.cc log_event_print_value: uint4korr, float4get); a character column of the
  binary collation in the charset metadata (is_character_type; the public vector.binlog of
  blackbeam/rust_mysql_common, written by MySQL 9: `02 05 3f 01 fc ff 00`, default collation 63
  and 255 for the TEXT at character position 1, between two VECTORs), and its dimensions in
  optional metadata 13 (VECTOR_DIMENSIONALITY, libs/mysql/binlog/event/rows_event.h). dblog
  decodes it as Debezium does (io.debezium.data.vector.FloatVector: a list of float32, the
  snapshot's bytes and the binlog's read the same way), the same values from a SELECT's bytes.
* Decode failures: one `BinlogUndecodable` (a BinlogError the supervisor does not retry and the
  CLI prints as one line) naming the table, the column, the event and its position, and what to
  do; a table dblog does not capture never stops the stream (its table map fails lazily).
* A binlog file still in use: its FORMAT_DESCRIPTION carries LOG_EVENT_BINLOG_IN_USE_F, its CRC32
  computed with the flag clear (sql/log_event.cc, Log_event::write_header; checked so by
  libs/mysql/binlog/event/binlog_event.cpp, Log_event_footer::event_checksum_test).
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import binlog_encoder as be
from support.binlog_transactions import Packaging, decoded_rows, transaction
from support.harness import EngineProcess, config_data
from support.scripted_binlog import FILE, ScriptedPrimary

from dblog.core.events import RowChange, TableId, TransactionEnd
from dblog.core.gtid import Gtid, GtidSet
from dblog.mysql.binlog import BinlogError, BinlogUndecodable
from dblog.mysql.binlog.decoder import BinlogDecodeError, BinlogDecoder
from dblog.mysql.binlog.definitions import definition_in_force
from dblog.mysql.schema import Column, TableSchema
from dblog.mysql.values import float32_shortest, float_vector, selected_normalizer, wire_normalizer
from dblog.runtime.config import parse_config
from dblog.runtime.supervisor import Supervisor, error_kind, is_transient

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UTF8MB4_BIN = be.Charset("utf8mb4", 46, 4, b" ")


def gtid(n: int) -> Gtid:
    return Gtid.mysql(UUID, n)


def log_pos(packet: bytes) -> int:
    return struct.unpack_from("<I", packet, 13)[0]


def row_changes(events: list) -> list[RowChange]:
    return [event for event in events if isinstance(event, RowChange)]


# --- functional indexes ------------------------------------------------------------------------------

# CREATE TABLE shop.users (id INT PRIMARY KEY, email VARCHAR(100), tags JSON, note VARCHAR(20) latin1,
#   INDEX idx_email ((lower(email))), INDEX idx_tags ((CAST(tags->'$.ids' AS UNSIGNED ARRAY))),
#   INDEX idx_codes ((CAST(tags->'$.codes' AS CHAR(10) ARRAY)))): as 8.0.17-8.0.19 list it, the
# hidden columns after the others (a later ADD COLUMN, as in the public binlog, puts them between).
USERS_COLUMNS = [
    be.int_("id", nullable=False),
    be.varchar("email", 100),
    be.varchar("!hidden!idx_email!0!0", 100),  # lower(email): VARCHAR(100), a character column
    be.json_column("tags"),
    be.typed_array("!hidden!idx_tags!0!0", be.T_LONGLONG),  # UNSIGNED ARRAY: element BIGINT, no metadata
    be.typed_array("!hidden!idx_codes!0!0", be.T_VARCHAR, (40).to_bytes(3, "little"), charset=UTF8MB4_BIN),
    be.varchar("note", 20, be.LATIN1),  # after the CHAR array in the charset list: its collation says latin1
]
USERS = be.Table(41, "shop", "users", USERS_COLUMNS, primary_key=(0,))
HIDDEN = [column.name.startswith("!hidden!") for column in USERS_COLUMNS]
FULL_IMAGE = [not hidden for hidden in HIDDEN]  # binlog_row_image=FULL: every column but the hidden ones
# 8.0.20+: the hidden columns are in neither the map nor the rows.
USERS_8020 = be.Table(41, "shop", "users", [c for c, hidden in zip(USERS_COLUMNS, HIDDEN) if not hidden],
                      primary_key=(0,))


def users_row(key: int, email: str, note: str) -> list:
    values = {"id": key, "email": email, "tags": be.json_binary({"ids": [key]}), "note": note}
    return [values.get(column.name) for column in USERS_COLUMNS]


def expected_user(key: int, email: str, note: str) -> dict:
    return {"id": key, "email": email, "tags": json.dumps({"ids": [key]}), "note": note}


@pytest.mark.parametrize("server", ["8.0.13-8.0.19", "8.0.20+"])
def test_a_table_with_functional_indexes_streams_without_its_hidden_columns(server):
    table = USERS if server == "8.0.13-8.0.19" else USERS_8020
    present = FULL_IMAGE if table is USERS else None

    def row(*values) -> list:
        full = users_row(*values)
        return full if table is USERS else [v for v, hidden in zip(full, HIDDEN) if not hidden]

    primary = ScriptedPrimary("mysql")
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN")
        log.table_map(table)
        log.rows(table, "c", [row(1, "Ann@x.org", "café"), row(2, "bob@x.org", "thé")], version=2,
                 present=present, pad_bitmaps=True)
        log.rows(table, "u", [(row(1, "Ann@x.org", "café"), row(1, "ann@x.org", "déjà"))], version=2,
                 present=present, present_after=present, pad_bitmaps=True)
        log.rows(table, "d", [row(2, "bob@x.org", "thé")], version=2, present=present, pad_bitmaps=True)
        log.xid()
    changes = row_changes(primary.read())
    assert [(change.op, change.key) for change in changes] == [("c", (1,)), ("c", (2,)), ("u", (1,)), ("d", (2,))]
    assert changes[0].after == expected_user(1, "Ann@x.org", "café"), "no hidden column; latin1 read as latin1"
    assert changes[2].before == expected_user(1, "Ann@x.org", "café")
    assert changes[2].after == expected_user(1, "ann@x.org", "déjà")
    assert changes[3].before == expected_user(2, "bob@x.org", "thé")


def test_a_minimal_row_image_of_a_table_with_functional_indexes_is_still_refused():
    """binlog_row_image=MINIMAL: a delete logs the key only. The missing email, tags and note
    are columns the table has: refused, naming the setting."""
    key_only = [column.name == "id" for column in USERS_COLUMNS]
    primary = ScriptedPrimary("mysql")
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN")
        log.table_map(USERS)
        log.rows(USERS, "d", [users_row(2, "bob@x.org", "thé")], version=2, present=key_only, pad_bitmaps=True)
        log.xid()
    with pytest.raises(BinlogError, match=r"shop\.users without all its columns: .*binlog_row_image=MINIMAL or NOBLOB"):
        primary.read()


def test_a_functional_index_column_is_no_column_of_a_rows_definition():
    """information_schema.COLUMNS leaves hidden columns out (mysql-test functional_index.test:
    `should_be_2` columns of a 2-column table with functional indexes); so does the definition
    a rows event carries: none while the other columns agree, and without the hidden ones when
    they do not."""
    decoder = BinlogDecoder("mysql")
    writer = be.BinlogWriter("mysql")
    decoder.decode(writer.format_description())
    decoder.decode(writer.table_map(USERS))
    table_map = decoder.table_maps[USERS.table_id]
    assert table_map.error is None
    assert [column.functional for column in table_map.columns] == HIDDEN
    id_ = Column("id", "int", "int", numeric_precision=10, numeric_scale=0, nullable=False)
    email = Column("email", "varchar", "varchar(100)", char_length=100, charset="utf8mb4")
    tags = Column("tags", "json", "json")
    note = Column("note", "varchar", "varchar(20)", char_length=20, charset="latin1")
    server = TableSchema(TableId("shop", "users"), [id_, email, tags, note], ("id",))
    assert definition_in_force(table_map, server) is None
    widened = Column("note", "varchar", "varchar(40)", char_length=40, charset="utf8mb4")  # ALTERed since
    definition = definition_in_force(table_map, TableSchema(TableId("shop", "users"), [id_, email, tags, widened],
                                                            ("id",)))
    assert definition is not None and definition.column_names == ["id", "email", "tags", "note"]


# --- VECTOR --------------------------------------------------------------------------------------------

finite_float32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
float32_bits = st.integers(0, 2**32 - 1).filter(lambda bits: bits & 0x7F800000 != 0x7F800000)  # not NaN/inf


# CREATE TABLE dtb.bar (id SERIAL, v VECTOR(2) NOT NULL, foo TEXT, w VECTOR(4)): vector.binlog's
# table, whose TEXT's charset override counts the VECTOR before it.
def vector_table(v: int, w: int) -> be.Table:
    columns = [be.bigint("id", unsigned=True, nullable=False), be.vector("v", v, nullable=False),
               be.blob("foo", 2, be.UTF8MB4), be.vector("w", w)]
    return be.Table(87, "dtb", "bar", columns, primary_key=(0,))


@settings(max_examples=60, deadline=None)
@given(st.lists(finite_float32, min_size=1, max_size=16), st.lists(finite_float32, min_size=1, max_size=16),
       st.sampled_from([None, "zstd"]), st.booleans())
def test_vector_columns_decode_to_debeziums_float_lists(v, w, payload, checksum):
    table = vector_table(len(v), len(w))
    packaging = Packaging("mysql", checksum, version=2, payload=payload, pad_bitmaps=True)
    rows = [[1, v, "bär", w], [2, v, None, None]]
    _, decoded = decoded_rows(transaction(table, "c", rows, packaging), packaging)
    expected_v, expected_w = [float32_shortest(x) for x in v], [float32_shortest(x) for x in w]
    assert decoded.images == [{"id": 1, "v": expected_v, "foo": "bär", "w": expected_w},
                              {"id": 2, "v": expected_v, "foo": None, "w": None}]


def test_a_vector_as_mysql_9_logged_it():
    """The rows of vector.binlog's table foo (VECTOR(3)), bytes as the server wrote them, read as
    rust_mysql_common's test of that file reads them ([1.1, 2.2, 3.3] and [1, -1, 0])."""
    columns = [be.bigint("id", unsigned=True, nullable=False), be.vector("v", 3, nullable=False)]
    table = be.Table(85, "dtb", "foo", columns, primary_key=(0,))
    logged = [bytes([205, 204, 140, 63, 205, 204, 12, 64, 51, 51, 83, 64]),
              bytes([0, 0, 128, 63, 0, 0, 128, 191, 0, 0, 0, 0])]
    packaging = Packaging("mysql", version=2, pad_bitmaps=True)
    _, decoded = decoded_rows(transaction(table, "c", [[1, logged[0]], [2, logged[1]]], packaging), packaging)
    assert decoded.images == [{"id": 1, "v": [1.1, 2.2, 3.3]}, {"id": 2, "v": [1.0, -1.0, 0.0]}]


@settings(max_examples=300, deadline=None)
@given(st.lists(float32_bits, max_size=8) | st.lists(st.sampled_from([
    0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x4B800000, 0x3DCCCCCD]), max_size=8))
def test_a_vector_is_each_float32_in_its_shortest_form(patterns):
    """Every float32 (subnormals, powers of two, the largest) as a FLOAT column's value is
    (`float32_shortest`), whatever shortcut `float_vector` takes."""
    data = struct.pack(f"<{len(patterns)}I", *patterns)
    assert float_vector(data) == [float32_shortest(x) for x in struct.unpack(f"<{len(patterns)}f", data)]


@settings(max_examples=100, deadline=None)
@given(st.lists(finite_float32, min_size=1, max_size=32))
def test_a_vector_reads_the_same_from_a_select_and_from_the_binlog(values):
    """A SELECT returns a VECTOR's stored bytes; pymysql would decode them as ASCII (type 242 is
    not one of its text types: the encoding it hands the chunk reader's wire parser is 'ascii')."""
    column = Column("v", "vector", f"vector({len(values)})")
    stored = struct.pack(f"<{len(values)}f", *values)
    table = be.Table(9, "db", "t", [be.int_("id", nullable=False), be.vector("v", len(values))], primary_key=(0,))
    packaging = Packaging("mysql", pad_bitmaps=True)
    _, decoded = decoded_rows(transaction(table, "c", [[1, stored]], packaging), packaging)
    binlog = decoded.images[0]["v"]
    assert wire_normalizer(column, "ascii", None)(stored) == binlog
    assert selected_normalizer(column)(stored) == binlog
    assert json.loads(json.dumps(binlog)) == binlog, "JSON-safe, and its floats read back unchanged"


# --- decode failures ---------------------------------------------------------------------------------

ORDERS = be.Table(50, "shop", "orders", [be.int_("id", nullable=False), be.varchar("item", 20)], primary_key=(0,))
ODD_TYPE = be.Column("kind", 99, b"\x07", lambda value: b"")  # a type dblog does not know (its metadata size unknown)
ODD = be.Table(51, "other", "odd", [be.int_("id", nullable=False), ODD_TYPE], primary_key=(0,))
EMBEDDINGS = be.Table(52, "other", "embeddings", [be.int_("id", nullable=False), be.vector("e", 2)], primary_key=(0,))
BROKEN = be.Table(53, "other", "broken", [be.int_("id", nullable=False), be.varchar("name", 20)], primary_key=(0,))


def _order(log: be.BinlogWriter, key: int) -> None:
    log.table_map(ORDERS)
    log.rows(ORDERS, "c", [[key, f"item{key}"]], version=2, pad_bitmaps=True)


def _garbage_rows(log: be.BinlogWriter, table: be.Table) -> bytes:
    """A rows event whose row image does not decode with its table map: a VARCHAR length past the end."""
    type_code, body = be.rows_event_body(table, "c", [[1, "x"]], version=2)
    return log.add(type_code, body[:-2] + b"\x7f")


def test_tables_that_are_not_captured_never_stop_the_stream():
    """Between changes of the captured shop.orders: a VECTOR table, a table whose map has a
    column type dblog does not know (with rows), and rows that do not decode, none captured."""
    primary = ScriptedPrimary("mysql")
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN")
        _order(log, 1)
        log.table_map(EMBEDDINGS)
        log.rows(EMBEDDINGS, "c", [[1, [0.5, -0.25]]], version=2, pad_bitmaps=True)
        log.table_map(ODD)
        log.rows(ODD, "c", [[1, None]], version=2, pad_bitmaps=True)
        log.table_map(BROKEN)
        _garbage_rows(log, BROKEN)
        _order(log, 2)
        log.xid()
    with primary.transaction(gtid(2)) as log:  # a compressed transaction alike
        inner = [be.inner_event(be.QUERY, be.query_body("BEGIN")),
                 be.inner_event(be.TABLE_MAP, be.table_map_body(ODD, flavor="mysql")),
                 be.inner_event(*be.rows_event_body(ODD, "c", [[2, None]], version=2)),
                 be.inner_event(be.TABLE_MAP, be.table_map_body(ORDERS, flavor="mysql")),
                 be.inner_event(*be.rows_event_body(ORDERS, "c", [[3, "item3"]], version=2)),
                 be.inner_event(be.XID, be.xid_body(9))]
        log.add(be.TRANSACTION_PAYLOAD, be.transaction_payload_body(inner))
    events = primary.read(table_filter=lambda table: table.db == "shop")
    assert [(change.table, change.after) for change in row_changes(events)] == [
        (TableId("shop", "orders"), {"id": key, "item": f"item{key}"}) for key in (1, 2, 3)]
    assert [event.gtid.seq for event in events if isinstance(event, TransactionEnd)] == [1, 2]


@pytest.mark.parametrize("captured", [False, True])
def test_a_compressed_rows_event_that_does_not_decompress_stops_only_a_captured_table(captured):
    """MariaDB log_bin_compress: a rows event whose zlib stream is damaged."""
    primary = ScriptedPrimary("mariadb")
    with primary.transaction(Gtid.mariadb(0, 1, 1)) as log:
        log.table_map(BROKEN)
        type_code, body = be.rows_event_body(BROKEN, "c", [[1, "x"]], compressed=True)
        damaged = log.add(type_code, body[:-6] + b"\x00" * 6)  # the zlib stream's end and checksum
        _order(log, 1)
        log.xid()
    filter_ = (lambda table: True) if captured else (lambda table: table.db == "shop")
    if not captured:
        assert [change.key for change in row_changes(primary.read(table_filter=filter_))] == [(1,)]
        return
    with pytest.raises(BinlogUndecodable, match=rf"^a rows event of other\.broken does not decode: a compressed rows "
                                                rf"event does not decompress .*\(WRITE_ROWS_COMPRESSED_V1 event of "
                                                rf"other\.broken ending at {FILE}:{log_pos(damaged)}\)"):
        primary.read(table_filter=filter_)


def _read_captured(setup) -> BinlogUndecodable:
    primary = ScriptedPrimary("mysql")
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN")
        _order(log, 1)
        setup(log)
        log.xid()
    source = primary.source(GtidSet.empty("mysql"))
    delivered = []
    with pytest.raises(BinlogUndecodable) as raised:
        for event in source:
            delivered.append(event)
    source.close()
    assert [change.key for change in row_changes(delivered)] == [(1,)], "what came before was delivered"
    return raised.value


def test_a_captured_table_whose_map_does_not_decode_stops_with_one_clear_error():
    packets = {}

    def setup(log):
        packets["map"] = log.table_map(ODD)
        packets["rows"] = log.rows(ODD, "c", [[1, None]], version=2, pad_bitmaps=True)

    error = _read_captured(setup)
    message = str(error)
    assert message.startswith("the table map of other.odd does not decode: column kind (type 99) has a type dblog "
                              f"does not know (TABLE_MAP event ending at {FILE}:{log_pos(packets['map'])}); its rows "
                              f"cannot be read (WRITE_ROWS event of other.odd ending at {FILE}:{log_pos(packets['rows'])})"
                              ), message
    assert "source.exclude" in message and "maintainers" in message, "what to do"
    assert isinstance(error, BinlogError) and not is_transient(error) and error_kind(error) == "source"


@pytest.mark.parametrize("damage", ["a partial float", "a length past the end"])
def test_a_captured_value_that_does_not_decode_names_its_column_and_event(damage):
    table = be.Table(54, "shop", "items", [be.int_("id", nullable=False), be.varchar("name", 20),
                                           be.vector("embedding", 2)], primary_key=(0,))
    packets = {}

    def setup(log):
        log.table_map(table)
        if damage == "a partial float":  # 5 bytes: no whole number of float32s
            packets["rows"] = log.rows(table, "u", [([1, "a", [1.0, 2.0]], [1, "b", b"\x00\x00\x80?\x01"])], version=2,
                                       pad_bitmaps=True)
        else:
            type_code, body = be.rows_event_body(table, "c", [[1, "a", [1.0, 2.0]]], version=2)
            packets["rows"] = log.add(type_code, body[:-3])

    message = str(_read_captured(setup))
    event = "UPDATE_ROWS" if damage == "a partial float" else "WRITE_ROWS"
    reason = ("ValueError: a VECTOR value of 5 bytes is not a whole number of 4-byte floats" if damage == "a partial float"
              else "IndexError: its 8-byte value runs past the end of the event")
    assert message.startswith(f"column embedding (VECTOR) of shop.items does not decode with its table map ({reason}): "
                              "the binlog is damaged or its table map does not describe it "
                              f"({event} event of shop.items ending at {FILE}:{log_pos(packets['rows'])})"), message


def test_an_event_that_does_not_decode_names_its_type_and_position():
    writer = be.BinlogWriter("mysql")
    decoder = BinlogDecoder("mysql")
    decoder.checksum = True  # as the dump session announced it
    decoder.decode(writer.rotate("binlog.000009"))
    decoder.decode(writer.format_description())
    packet = writer.add(be.GTID, be.mysql_gtid_body(UUID, 1)[:10])  # cut short, consistently
    with pytest.raises(BinlogDecodeError, match=rf"^the GTID event ending at binlog.000009:{log_pos(packet)} does not "
                                                r"decode \(.*\): dblog stops rather than skip it"):
        decoder.decode(packet)


def test_undecodable_is_final_for_the_supervisor_and_survives_the_reader_process(tmp_path):
    error = BinlogUndecodable("column c of db.t does not decode (WRITE_ROWS event of db.t ending at b.000001:4)")
    again = pickle.loads(pickle.dumps(error))  # the reader process sends its error pickled
    assert type(again) is BinlogUndecodable and str(again) == str(error)
    # Were it retried, the second attempt would come 0.5 s after the first, well inside the 5 s.
    config = parse_config({"source": {"include": ["db\\.t"], "reconnect_timeout_seconds": 5},
                           "sink": {"type": "jsonl", "path": str(tmp_path / "c")},
                           "offsets": {"path": str(tmp_path / "o.json")}})
    attempts = []

    class Failing:
        stats = None

        def start(self):
            pass

        def run(self):
            attempts.append(1)
            raise error

        def close(self):
            pass

        def stop(self):
            pass

    supervisor = Supervisor(config, make_engine=lambda _: Failing())
    with pytest.raises(BinlogUndecodable):
        supervisor.run()
    assert attempts == [1], "not retried: the same binlog would fail the same way"
    assert supervisor.stats.errors["source"] == 1 and supervisor.restarts == 0


# --- end to end: a column type dblog does not know, on a real server ------------------------------------


@pytest.mark.server  # a private MariaDB: its binlog gets events other tests' oracles need not read
def test_dblog_run_streams_past_uncaptured_tables_and_stops_on_a_captured_one_with_one_line(own_mariadb, tmp_path):
    """MariaDB's COMPRESSED columns are logged with types of their own (MYSQL_TYPE_VARCHAR_COMPRESSED,
    MYSQL_TYPE_BLOB_COMPRESSED), which dblog does not decode. In a table dblog does not capture they
    do not matter; in a captured one `dblog run` stops at once, with one line and no traceback."""
    server = own_mariadb
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, note VARCHAR(20))")
    server.execute("CREATE TABLE shop.bad (id INT PRIMARY KEY, note VARCHAR(100) COMPRESSED)")
    server.execute("CREATE TABLE shop.other (id INT PRIMARY KEY, doc BLOB COMPRESSED)")
    data = config_data(server, "shop", tmp_path, snapshot={"startup": "never"},
                       source={"include": ["shop\\.t", "shop\\.bad"]})
    engine = EngineProcess(data, tmp_path)
    engine.start()
    try:
        engine.wait_until(lambda offsets: True)
        server.execute("INSERT INTO shop.other VALUES (1, REPEAT('x', 300))")
        server.execute("INSERT INTO shop.t VALUES (1, 'after')")
        changes = Path(data["sink"]["path"])
        engine.eventually(lambda: changes.exists() and '"after"' in changes.read_text(), 60,
                          message="the captured row written after the uncaptured COMPRESSED table's")
        server.execute("INSERT INTO shop.bad VALUES (1, 'x')")
        engine.process.wait(60)
    finally:
        engine.kill()
    log = engine.log.read_text()
    assert engine.process.returncode == 1, log
    assert "Traceback" not in log and "restarting" not in log, log
    errors = [line for line in log.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, log
    assert errors[0].startswith("Error: the table map of shop.bad does not decode: column note (VARCHAR COMPRESSED "
                                "(MariaDB)) has a type dblog does not know (TABLE_MAP event ending at binlog.0"), errors[0]
    assert "WRITE_ROWS_V1 event of shop.bad ending at binlog.0" in errors[0] and "source.exclude" in errors[0]


# --- a binlog file still in use ------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_the_format_description_of_a_binlog_file_in_use_passes_its_checksum(flavor):
    """Read from the file of a running (or crashed) server: the flag is set, the CRC32 is of the
    event without it. Corrupt anything else and the check still fails."""
    writer = be.BinlogWriter(flavor)
    in_use = writer.format_description(in_use=True)
    assert in_use[17] & be.LOG_EVENT_BINLOG_IN_USE_F
    decoder = BinlogDecoder(flavor)
    decoder.checksum = True
    assert decoder.decode(in_use) is None and decoder.checksum
    table, rows = ORDERS, [[1, "a"]]
    writer.table_map(table)
    writer.rows(table, "c", rows)
    decoder.decode(writer.packets[1])
    assert decoder.decode(writer.packets[2]).rows().images == [{"id": 1, "item": "a"}], "and the file reads on"
    damaged = bytearray(in_use)
    damaged[30] ^= 0x01  # a byte of the server version
    with pytest.raises(BinlogDecodeError, match="format description event fails its CRC32 checksum"):
        BinlogDecoder(flavor).decode(bytes(damaged))
