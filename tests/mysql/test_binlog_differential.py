"""dblog's binlog decoder against a real MariaDB, and against mysql-replication.

What is proven, on the session's MariaDB 10.11:

* For a table with a column of every MariaDB type (tests/mysql/test_values.py's, plus every TEXT/BLOB
  width, utf16, latin1 bytes 0x80-0x9F, ENUM/SET members in latin1, a 300-member ENUM, a 64-member
  SET, VARCHARs and a CHAR over 255 bytes, fractional TIME/DATETIME/TIMESTAMP precisions, BITs,
  geometries, a YEAR before unsigned integers), rows inserted, updated and deleted (NULLs,
  multi-row statements) decode through dblog's BinlogSource exactly as mysql-replication plus
  the reference normalization (mysql_replication_reference.normalize_binlog) decodes them, except
  the partially zero and invalid dates, where dblog gives what a SELECT gives.
* The test encoder (tests/support/binlog_encoder.py) writes the same bytes as the server for a format
  description, a table map, a rows event and a compressed rows event: the property tests of
  tests/mysql/test_binlog_decoder.py feed the decoder what a server would.
* The server's other ways of writing: `log_bin_compress` (compressed queries and rows events),
  `binlog_checksum=NONE` (and switching back and forth while a reader streams), a session with
  `binlog_row_image=MINIMAL` (refused naming the setting), a row event over 16 MiB (one event
  split over several packets).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import zlib

from support import binlog_encoder as be
import pytest
from support.mysql_replication_reference import normalize_binlog
from support import eventually
from support.every_type import COLUMNS, ROWS, UPDATES

from dblog.core.events import RowChange, TableId, TransactionEnd, TransactionStart
from dblog.mysql.binlog import BinlogError
from dblog.mysql.binlog.decoder import BinlogDecoder
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.mysql.chunk_reader import ChunkRequest
from dblog.mysql.values import zero_date_text

pytestmark = pytest.mark.timeout(300)

ENUM_300 = tuple(f"m{i:03d}" for i in range(300))
SET_64 = tuple(f"s{i}" for i in range(64))
SET_20 = tuple(f"f{i}" for i in range(20))

EXTRA_COLUMNS = f"""
    , y2 YEAR, ubig BIGINT UNSIGNED, uint_after INT UNSIGNED, dec_w DECIMAL(30,10)
    , wide VARCHAR(300), wide_latin VARCHAR(300) CHARACTER SET latin1, c100 CHAR(100), c255 CHAR(255)
    , u16 VARCHAR(20) CHARACTER SET utf16, u16c CHAR(4) CHARACTER SET utf16
    , tt TINYTEXT, mt MEDIUMTEXT, lt LONGTEXT, tb TINYBLOB, mb MEDIUMBLOB, lb LONGBLOB
    , el ENUM('café','naïve','€uro') CHARACTER SET latin1, sl SET('à','b€','ç') CHARACTER SET latin1
    , e300 ENUM({", ".join(f"'{m}'" for m in ENUM_300)})
    , s20 SET({", ".join(f"'{m}'" for m in SET_20)}), s64 SET({", ".join(f"'{m}'" for m in SET_64)})
    , b9 BIT(9), b33 BIT(33), tm2 TIME(2), dt1 DATETIME(1), dt4 DATETIME(4), ts3 TIMESTAMP(3) NULL DEFAULT NULL
    , g POINT, gg GEOMETRY, d_odd DATE, dt_odd DATETIME(2)
"""

EXTRA_VALUES: dict[int, dict[str, str]] = {
    1: dict(y2="2155", ubig="18446744073709551615", uint_after="4294967295", dec_w="-12345678901234567890.0123456789",
            wide="REPEAT('é😀', 150)", wide_latin="REPEAT(UNHEX('80829FA0E9FF'), 50)", c100="REPEAT('😀', 100)",
            c255="CONCAT(REPEAT('ü', 254), 'x')", u16="'h€llo 😀'", u16c="'ab  '", tt="REPEAT('t', 255)",
            mt="REPEAT('m', 70000)", lt="'long 😀'", tb="UNHEX('00FF')", mb="REPEAT(UNHEX('00'), 65536)",
            lb="UNHEX('DEADBEEF')", el="'naïve'", sl="'à,ç'", e300="'m299'", s20="'f0,f19'",
            s64="'s0,s31,s32,s63'", b9="b'100000001'", b33="b'100000000000000000000000000000001'",
            tm2="'-00:00:01.25'", dt1="'2024-01-02 03:04:05.6'", dt4="'1999-12-31 23:59:59.9999'",
            ts3="'2024-03-10 10:30:00.125'", g="POINT(1, 2)", gg="ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)')",
            d_odd="'2024-06-15'", dt_odd="'2024-06-15 01:02:03.45'"),
    2: dict(y2="1901", ubig="0", uint_after="0", dec_w="0.0000000001", wide="''", wide_latin="''", c100="''",
            c255="'a  '", u16="''", u16c="''", tt="''", mt="''", lt="''", tb="''", mb="''", lb="''", el="'€uro'",
            sl="''", e300="'m000'", s20="''", s64="''", b9="b'0'", b33="b'0'", tm2="'838:59:59.99'",
            dt1="'2024-02-29 00:00:00.0'", dt4="'0000-00-00 00:00:00'", ts3="'0000-00-00 00:00:00'"),
    3: dict(el="'café'", sl="'b€'", e300="'m255'", s64="'s63'", c255="REPEAT('😀', 255)"),
    5: dict(ubig="9223372036854775808", dec_w="99999999999999999999.9999999999", u16="'😀'", s20="'f1,f2,f3'"),
}

# Dates a lax sql_mode (ALLOW_INVALID_DATES) lets in: partially zero, or a day the month lacks.
# (A DATE with a day its month lacks made mysql-replication fail outright: see
# test_what_mysql_replication_could_not_decode.)
ODD_DATES = {
    20: dict(d_odd="'2024-00-00'", dt_odd="'2024-02-31 10:00:00.50'", dte="'2024-00-15'", dt0="'2024-00-15 12:00:00'"),
    21: dict(d_odd="'0000-01-01'", dt_odd="'2023-02-29 23:59:59.99'", dte="'2024-06-00'", dt0="'2024-04-31 00:00:00'"),
}
# ... whose binlog values mysql-replication decodes as "out of range" and the reference path then as
# the zero date, while a SELECT gives the server's text. dblog's decoder gives that text.
ODD_DATE_COLUMNS = {(row_id, column) for row_id, literals in ODD_DATES.items() for column in literals}


# Columns mysql-replication decodes wrongly, so dblog (which reads them as SELECT does, checked
# below) differs from the reference path there: it reads utf16 as UTF-16LE ('h€llo' comes out as
# '栀갠氀氀漀'), and ENUM/SET members of a latin1 column as utf-8 (every value comes out as '').
MYSQL_REPLICATION_WRONG = {"u16", "u16c", "el", "sl"}


def _literals(row_id: int) -> dict[str, str]:
    literals = dict(ROWS.get(row_id, {}))
    literals.update(EXTRA_VALUES.get(row_id, {}))
    literals.update(ODD_DATES.get(row_id, {}))
    return literals


def _insert_many(table: str, rows: dict[int, dict[str, str]]) -> str:
    """One INSERT of several rows (one rows event of several row images)."""
    names = sorted({name for literals in rows.values() for name in literals})
    values = ", ".join(
        "(" + ", ".join([str(row_id)] + [rows[row_id].get(name, "NULL") for name in names]) + ")" for row_id in rows)
    return f"INSERT INTO {table} ({', '.join(['id', *names])}) VALUES {values}"


def _until(source, target):
    return lambda event, _: isinstance(event, TransactionEnd) and target.issubset(source.position)


def _changes(events) -> list[tuple]:
    return [(e.op, e.before, e.after) for e in events if isinstance(e, RowChange)]


def _mysql_replication_changes(mariadb, start, end, schema, server_id: int) -> list[tuple]:
    """The row changes as the reference path decodes them: mysql-replication's
    BinLogStreamReader, each value through mysql_replication_reference.normalize_binlog with the
    schema's column and the row's none_source."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    columns = {column.name: column for column in schema.columns}

    def normalize(values: dict, none_sources: dict) -> dict:
        return {name: normalize_binlog(columns[name], value, none_sources.get(name)) for name, value in values.items()}

    last = max(end.last(source) for source in end.sources())
    stream = BinLogStreamReader(
        connection_settings=dict(mariadb.connection_settings), server_id=server_id, blocking=True,
        auto_position=str(start), is_mariadb=True, slave_heartbeat=0.5, enable_logging=False,
        only_schemas=[schema.table.db], only_tables=[schema.table.table],
        only_events=[MariadbGtidEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    changes: list[tuple] = []
    seq = None
    events = iter(stream)

    def at_the_end() -> bool:  # one event taken; True at the last transaction's end
        nonlocal seq
        event = next(events)
        if isinstance(event, MariadbGtidEvent):
            seq = int(event.gtid.rsplit("-", 1)[1])
        elif isinstance(event, XidEvent) and seq == last:
            return True
        elif isinstance(event, (WriteRowsEvent, DeleteRowsEvent)) and event.table == schema.table.table:
            for row in event.rows:
                image = normalize(row["values"], row["none_sources"])
                changes.append(("c", None, image) if isinstance(event, WriteRowsEvent) else ("d", image, None))
        elif isinstance(event, UpdateRowsEvent) and event.table == schema.table.table:
            for row in event.rows:
                changes.append(("u", normalize(row["before_values"], row["before_none_sources"]),
                                normalize(row["after_values"], row["after_none_sources"])))
        return False

    try:
        eventually(at_the_end, 60, interval=0, message="mysql-replication to reach the end")
    finally:
        stream.close()
    return changes


@pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning")  # inside mysql-replication
def test_dblog_decodes_every_type_as_mysql_replication_did(mariadb, database, source_connection, open_binlog,
                                                             binlog_reader):
    table = TableId(database, "every_type")
    name = f"`{database}`.`every_type`"
    writer = mariadb.connect(database)
    selected: dict[str, dict[int, dict]] = {}
    with writer.cursor() as cursor:
        cursor.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")  # zero, partial and invalid dates
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"CREATE TABLE {name} ({COLUMNS} {EXTRA_COLUMNS})")
        start = source_connection.server.executed_gtids()
        cursor.execute(_insert_many(name, {row_id: _literals(row_id) for row_id in (1, 2, 3)}))  # 3 rows, 1 event
        cursor.execute(_insert_many(name, {4: {}}))  # every column NULL
        cursor.execute(_insert_many(name, {5: _literals(5)}))
        cursor.execute(_insert_many(name, {row_id: _literals(row_id) for row_id in ODD_DATES}))
        selected["inserted"] = _select_all(source_connection, table)
        for row_id, literals in UPDATES.items():
            assignments = ", ".join(f"{column} = {literal}" for column, literal in literals.items())
            cursor.execute(f"UPDATE {name} SET {assignments} WHERE id = {row_id}")
        cursor.execute(f"UPDATE {name} SET wide = CONCAT(IFNULL(wide, ''), 'ü'), s64 = 's1', el = 'café' "
                       "WHERE id IN (1, 3, 5)")  # one event, three before/after pairs
        selected["updated"] = _select_all(source_connection, table)
        cursor.execute(f"DELETE FROM {name} WHERE id IN (1, 3, 20)")
        cursor.execute(f"DELETE FROM {name} WHERE id = 21")
    writer.close()
    end = source_connection.server.executed_gtids()
    schema = source_connection.schemas.schema(table)

    source = open_binlog(start, table_filter=lambda t: t == table)
    events = binlog_reader(source, _until(source, end), timeout=60)
    ours = _changes(events)
    theirs = _mysql_replication_changes(mariadb, start, end, schema, server_id=991_000 + 1)
    # Every type's table map agrees with information_schema's definition (no DDL since): no
    # row carries a definition of its own (dblog.mysql.binlog.definitions).
    assert [e.definition for e in events if isinstance(e, RowChange)] == [None] * 17

    assert [change[0] for change in ours] == ["c"] * 7 + ["u"] * 6 + ["d"] * 4
    assert len(theirs) == len(ours), f"mysql-replication saw {len(theirs)} row changes, dblog {len(ours)}"
    compared = 0
    mismatches = []
    for index, (mine, old) in enumerate(zip(ours, theirs)):
        assert mine[0] == old[0], f"change {index}: {mine[0]} != {old[0]}"
        for which, image, old_image in (("before", mine[1], old[1]), ("after", mine[2], old[2])):
            if image is None:
                assert old_image is None
                continue
            assert list(image) == list(old_image), f"change {index} {which}: columns differ"
            row_id = image["id"]
            for column, value in image.items():
                compared += 1
                if column in MYSQL_REPLICATION_WRONG:
                    continue  # compared with SELECT below
                if (row_id, column) in ODD_DATE_COLUMNS:
                    # The intended difference: the reference path has only "out of range" for these
                    # and gives the zero date; dblog's decoder gives the server's text, as SELECT does.
                    assert old_image[column] == zero_date_text(schema.column(column)), (row_id, column)
                    assert value not in (None, old_image[column]) and not value.startswith("0000-00-00"), value
                    assert value == selected["inserted"][row_id][column], (row_id, column, value)
                    continue
                if value != old_image[column] or type(value) is not type(old_image[column]):
                    mismatches.append(f"change {index} ({mine[0]}) {which} row {row_id} column {column}: "
                                      f"dblog {value!r:.80} != mysql-replication {old_image[column]!r:.80}")
    assert not mismatches, "\n".join(mismatches)
    assert compared > 1000

    # and both equal what a SELECT reads (the normal form is one for both read paths)
    inserts = {after["id"]: after for op, _, after in ours if op == "c"}
    assert inserts == selected["inserted"]
    updates = {after["id"]: after for op, _, after in ours if op == "u"}  # the last update of each row
    assert all(updates[row_id] == selected["updated"][row_id] for row_id in updates)
    deletes = {before["id"]: before for op, before, _ in ours if op == "d"}
    assert deletes == {row_id: selected["updated"][row_id] for row_id in (1, 3, 20, 21)}
    assert inserts[1]["el"] == "naïve" and inserts[1]["sl"] == "à,ç", "latin1 ENUM/SET members"
    assert inserts[1]["wide_latin"] == "€‚Ÿ\xa0éÿ" * 50, "latin1 0x80-0x9F"
    assert inserts[20]["d_odd"] == "2024-00-00" and inserts[20]["dte"] == "2024-00-15"
    assert inserts[20]["dt_odd"] == "2024-02-31 10:00:00.50" and inserts[21]["dt0"] == "2024-04-31 00:00:00"


def test_what_mysql_replication_could_not_decode(mariadb, database, source_connection, open_binlog, binlog_reader):
    """A DATE with a day its month lacks (mysql-replication raised ValueError) and latin1's bytes
    0x81, 0x8D, 0x8F, 0x90 and 0x9D (it raised UnicodeDecodeError): dblog reads what SELECT reads."""
    table = TableId(database, "beyond")
    name = f"`{database}`.beyond"
    mariadb.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, d DATE, l VARCHAR(20) CHARACTER SET latin1)")
    start = source_connection.server.executed_gtids()
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")
        cursor.execute(f"INSERT INTO {name} VALUES (1, '2024-04-31', UNHEX('41818D8F909D5A')), (2, '2023-02-29', '')")
        connection.commit()
    end = source_connection.server.executed_gtids()
    source = open_binlog(start, table_filter=lambda t: t == table)
    inserted = [after for _, _, after in _changes(binlog_reader(source, _until(source, end)))]
    assert inserted == list(_select_all(source_connection, table).values())
    assert inserted == [{"id": 1, "d": "2024-04-31", "l": "A\x81\x8d\x8f\x90\x9dZ"},
                        {"id": 2, "d": "2023-02-29", "l": ""}]


def _select_all(source_connection, table: TableId) -> dict[int, dict]:
    schema = source_connection.schemas.schema(table)
    return {row["id"]: row for row in source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 1000))}


# --- the test encoder writes what the server writes --------------------------------------------------


def _raw_events(mariadb, start, stop, server_id: int) -> list[bytes]:
    """The dump's event packets from `start` until `stop(packet)` is true (dblog's dump session)."""
    connection = BinlogConnection(mariadb.connection_settings, server_id, 1.0, "mariadb")
    connection.open(start)
    packets: list[bytes] = []

    def stopped() -> bool:
        packets.append(connection.read_event())
        return stop(packets[-1])

    try:
        eventually(stopped, 30, interval=0,
                   message=lambda: f"the dump to reach the expected event; got types {[p[4] for p in packets]}")
    finally:
        connection.close()
    return packets


def test_the_test_encoder_writes_what_the_server_writes(mariadb, database, source_connection):
    """Byte for byte: format description, table map (metadata and optional metadata), rows event."""
    mariadb.execute(
        f"CREATE TABLE `{database}`.enc (id INT PRIMARY KEY, y YEAR, u INT UNSIGNED, m MEDIUMINT, v VARCHAR(10), "
        "c CHAR(100), l VARCHAR(5) CHARACTER SET latin1, e ENUM('a','b'), s SET('x','y') CHARACTER SET latin1, "
        "d DECIMAL(10,2), dt DATETIME(3), ts TIMESTAMP(6) NULL, b BINARY(4), g POINT, t TEXT, tm TIME(2), "
        "bt BIT(10), f FLOAT, dd DOUBLE, dte DATE)")
    start = source_connection.server.executed_gtids()
    mariadb.execute(
        f"INSERT INTO `{database}`.enc VALUES (1, 2000, 7, -8388608, 'héllo', 'abc  ', 'caf', 'b', 'x,y', -12.5, "
        "'2024-01-02 03:04:05.678', FROM_UNIXTIME(1700000000.25), x'0102', POINT(1, 2), 'text', "
        "'-00:00:01.25', b'1000000001', 0.5, -2.25, '2024-02-29'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    packets = _raw_events(mariadb, start, lambda packet: packet[4] == be.XID, 991_100)
    assert all(zlib.crc32(p[:-4]) == int.from_bytes(p[-4:], "little") for p in packets), "CRC32 checksums"

    def same_header(packet: bytes) -> be.BinlogWriter:
        writer = be.BinlogWriter("mariadb", timestamp=int.from_bytes(packet[:4], "little"))
        writer.position = int.from_bytes(packet[13:17], "little") - len(packet)
        return writer

    (fd,) = [p for p in packets if p[4] == be.FORMAT_DESCRIPTION]
    version = fd[21:71].rstrip(b"\x00").decode()
    assert same_header(fd).format_description(version) == fd, "format description"

    (table_map,) = [p for p in packets if p[4] == be.TABLE_MAP]
    table_id = int.from_bytes(table_map[19:25], "little")
    columns = [be.int_("id", nullable=False), be.year("y"), be.int_("u", unsigned=True), be.mediumint("m"),
               be.varchar("v", 10), be.char("c", 100), be.varchar("l", 5, be.LATIN1), be.enum("e", ["a", "b"]),
               be.set_("s", ["x", "y"], be.LATIN1), be.decimal("d", 10, 2), be.datetime2("dt", 3),
               be.timestamp2("ts", 6), be.binary("b", 4), be.geometry("g", geometry_type=1),
               be.blob("t", 2, be.UTF8MB4), be.time2("tm", 2), be.bit("bt", 10), be.float_("f"), be.double("dd"),
               be.date("dte")]
    table = be.Table(table_id, database, "enc", columns, primary_key=(0,))
    assert same_header(table_map).table_map(table) == table_map, "table map"

    (rows,) = [p for p in packets if p[4] == be.WRITE_ROWS_V1]
    point = bytes.fromhex("00000000" "01" "01000000" "000000000000f03f" "0000000000000040")
    images = [[1, 2000, 7, -8388608, "héllo", "abc  ", "caf", 2, 3, ("12.50", True), (2024, 1, 2, 3, 4, 5, 678000),
               (1700000000, 250000), b"\x01\x02", point, "text", (True, 0, 0, 1, 250000), 513, 0.5, -2.25,
               (2024, 2, 29)],
              [2] + [None] * 19]
    # MariaDB sets the NULL bitmaps' unused bits
    assert same_header(rows).rows(table, "c", images, null_padding=0xFF) == rows, "rows event"


# --- the server's other ways of writing ----------------------------------------------------------------


@contextlib.contextmanager
def _global(mariadb, **settings):
    """SET GLOBAL for the block, then back to what it was: the server is the whole session's."""
    before = {name: mariadb.execute(f"SELECT @@GLOBAL.{name}")[0][0] for name in settings}
    try:
        for name, value in settings.items():
            mariadb.execute(f"SET GLOBAL {name} = %s", (value,))
        yield
    finally:
        for name, value in before.items():
            mariadb.execute(f"SET GLOBAL {name} = %s", (value.decode() if isinstance(value, bytes) else value,))


def test_log_bin_compress_rows_and_queries_decode(mariadb, database, source_connection, open_binlog, binlog_reader):
    table = TableId(database, "packed")
    name = f"`{database}`.packed"
    mariadb.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, note VARCHAR(500), n INT UNSIGNED, b BLOB)")
    start = source_connection.server.executed_gtids()
    comment = "x" * 300
    with _global(mariadb, log_bin_compress="ON", log_bin_compress_min_len=10):
        with mariadb.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {name} VALUES (1, REPEAT('abc', 100), 4294967295, UNHEX('00FF')), "
                           "(2, 'short', 0, NULL), (3, NULL, NULL, REPEAT(UNHEX('7F80'), 500))")
            cursor.execute(f"UPDATE {name} SET note = CONCAT(IFNULL(note, ''), ' and more'), n = 1")
            cursor.execute(f"DELETE FROM {name} WHERE id = 2")
            cursor.execute(f"CREATE TABLE `{database}`.long_ddl (id INT PRIMARY KEY) COMMENT '{comment}'")
            connection.commit()
        selected = _select_all(source_connection, table)
    end = source_connection.server.executed_gtids()

    packets = _raw_events(mariadb, start, lambda packet: packet[4] == be.QUERY_COMPRESSED, 991_200)
    types = {packet[4] for packet in packets}
    assert {be.WRITE_ROWS_COMPRESSED_V1, be.UPDATE_ROWS_COMPRESSED_V1, be.DELETE_ROWS_COMPRESSED_V1,
            be.QUERY_COMPRESSED} <= types, f"the server did not compress: event types {sorted(types)}"
    # and the test encoder compresses as the server does: the row images only, behind the count
    # and bitmaps (the bytes are the same: both use zlib's compress() at its default level)
    (written,) = [p for p in packets if p[4] == be.WRITE_ROWS_COMPRESSED_V1]
    table_id = int.from_bytes(written[19:25], "little")
    columns = [be.int_("id", nullable=False), be.varchar("note", 500), be.int_("n", unsigned=True), be.blob("b", 2)]
    writer = be.BinlogWriter("mariadb", timestamp=int.from_bytes(written[:4], "little"))
    writer.position = int.from_bytes(written[13:17], "little") - len(written)
    images = [[1, "abc" * 100, 4294967295, b"\x00\xff"], [2, "short", 0, None], [3, None, None, b"\x7f\x80" * 500]]
    encoded = writer.rows(be.Table(table_id, database, "packed", columns), "c", images, compressed=True,
                          null_padding=0xFF)
    assert encoded == written, "a MariaDB compressed rows event"

    source = open_binlog(start, table_filter=lambda t: t == table)
    events = binlog_reader(source, _until(source, end))
    changes = _changes(events)
    assert [op for op, _, _ in changes] == ["c", "c", "c", "u", "u", "u", "d"]
    after = {image["id"]: image for op, _, image in changes if op == "u"}
    assert {row_id: image for row_id, image in after.items() if row_id != 2} == selected  # 2 was deleted
    assert after[1]["n"] == 1 and after[3]["b"] == base64.b64encode(b"\x7f\x80" * 500).decode()
    assert changes[0][2] == {"id": 1, "note": "abc" * 100, "n": 4294967295, "b": "AP8="}
    assert changes[6][1] == {"id": 2, "note": "short and more", "n": 1, "b": None}
    (ddl,) = [e for e in events if type(e).__name__ == "SchemaChange"]
    assert ddl.sql.endswith(f"COMMENT '{comment}'"), "the compressed query's text"


def test_binlog_checksum_none_and_back(mariadb, database, source_connection, open_binlog, binlog_reader):
    """Checksums switched off (a new binlog file without CRC32s) and on again while a reader
    streams through both changes; a reader that connects while they are off."""
    table = TableId(database, "plain")
    name = f"`{database}`.plain"
    mariadb.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(20))")
    start = source_connection.server.executed_gtids()
    mariadb.execute(f"INSERT INTO {name} VALUES (1, 'crc32')")
    streaming = open_binlog(start, table_filter=lambda t: t == table)
    first = binlog_reader(streaming, _until(streaming, source_connection.server.executed_gtids()))
    with _global(mariadb, binlog_checksum="NONE"):  # rotates to a file without checksums
        middle = source_connection.server.executed_gtids()
        mariadb.execute(f"INSERT INTO {name} VALUES (2, 'none'), (3, 'none')")
        mariadb.execute(f"UPDATE {name} SET v = 'NONE' WHERE id = 2")
        off = source_connection.server.executed_gtids()
        late = open_binlog(middle, table_filter=lambda t: t == table)  # connects while checksums are off
        late_events = binlog_reader(late, _until(late, off))
        packets = _raw_events(mariadb, middle, lambda packet: packet[4] == be.XID, 991_300)
    second = binlog_reader(streaming, _until(streaming, off))
    mariadb.execute(f"INSERT INTO {name} VALUES (4, 'crc32 again')")  # after the rotation back
    third = binlog_reader(streaming, _until(streaming, source_connection.server.executed_gtids()))

    decoder = BinlogDecoder("mariadb")
    for packet in packets:
        decoder.decode(packet)
    assert not decoder.checksum, "the new file's format description says: no checksums"
    assert [after for _, _, after in _changes(first)] == [{"id": 1, "v": "crc32"}]
    for events in (second, late_events):
        assert [(op, after) for op, _, after in _changes(events)] == [
            ("c", {"id": 2, "v": "none"}), ("c", {"id": 3, "v": "none"}), ("u", {"id": 2, "v": "NONE"})]
    assert [after for _, _, after in _changes(third)] == [{"id": 4, "v": "crc32 again"}]
    files = [e.file for e in first + second + late_events + third if isinstance(e, TransactionStart)]
    assert all(re.fullmatch(r"binlog\.\d{6}", file) for file in files), files
    assert len(set(files)) == 3, f"three binlog files were read: {files}"


def test_a_minimal_row_image_is_refused_naming_binlog_row_image(mariadb, database, source_connection, open_binlog,
                                                                binlog_reader):
    table = TableId(database, "items")
    name = f"`{database}`.items"
    mariadb.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, a VARCHAR(10), b INT)")
    mariadb.execute(f"INSERT INTO {name} VALUES (1, 'x', 1)")
    start = source_connection.server.executed_gtids()
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cursor.execute(f"UPDATE {name} SET b = 2 WHERE id = 1")
        connection.commit()
    source = open_binlog(start, table_filter=lambda t: t == table)
    with pytest.raises(BinlogError, match="binlog_row_image=MINIMAL or NOBLOB.*binlog_row_image=FULL"):
        binlog_reader(source, lambda event, _: False, timeout=20)

    # the same event of a table dblog does not capture is no reason to stop
    other = open_binlog(start, table_filter=lambda t: False)
    end = source_connection.server.executed_gtids()
    events = binlog_reader(other, _until(other, end))
    assert [type(e) for e in events] == [TransactionStart, TransactionEnd]


def test_a_row_event_over_16_mib_decodes_intact(mariadb, database, source_connection, open_binlog, binlog_reader):
    """One LONGBLOB of 20 MB: its rows event arrives split over two 16 MiB packets and a third."""
    table = TableId(database, "big")
    name = f"`{database}`.big"
    mariadb.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, b LONGBLOB)")
    size = 20_000_000
    start = source_connection.server.executed_gtids()
    with _global(mariadb, max_allowed_packet=64 << 20):  # for REPEAT's result; new sessions only
        with mariadb.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {name} VALUES (1, CONCAT(REPEAT(UNHEX('00FF7F80'), %s), 'END!'))",
                           ((size - 4) // 4,))
            cursor.execute(f"SELECT LENGTH(b), SHA2(b, 256) FROM {name} WHERE id = 1")
            length, digest = cursor.fetchone()
            connection.commit()
    assert length == size
    end = source_connection.server.executed_gtids()

    packets = _raw_events(mariadb, start, lambda packet: packet[4] == be.XID, 991_400)
    (rows,) = [p for p in packets if p[4] == be.WRITE_ROWS_V1]
    assert len(rows) > 1 << 24, "the event is larger than one 16 MiB packet"

    source = open_binlog(start, table_filter=lambda t: t == table)
    (change,) = _changes(binlog_reader(source, _until(source, end), timeout=60))
    value = base64.b64decode(change[2]["b"])
    assert len(value) == size and value.endswith(b"\x00\xff\x7f\x80END!")
    assert hashlib.sha256(value).hexdigest() == digest
