"""Chunk rows parsed straight from the text protocol (dblog.mysql.source_connection.RowsCursor with
dblog.mysql.values.wire_normalizer) equal what pymysql's stock parsing plus the SELECT normalizer
give, value for value and type for type.

The packet parser is checked with hypothesis against an encoder of the protocol's
length-encoded strings (every prefix width, NULLs, empty values); the normalizers against the
stock path on a real server, for every column type and for the values a fast path must hand
over to pymysql's parsing: zero and invalid dates (lax sql_mode), day 29-31, year 0, negative
TIMEs, negative zero and negative DECIMALs.
"""

from __future__ import annotations

import pymysql
import pymysql.cursors
from hypothesis import given, settings
from hypothesis import strategies as st
from support.every_type import COLUMNS, ROWS, insert_sql

from dblog.core.events import TableId
from dblog.mysql.chunk_reader import ChunkQuery, ChunkRequest, row_parser
from dblog.mysql.values import normalize_selected

# --- the packet parser: pure ------------------------------------------------------------------


def _length_prefix(length: int, width: int) -> bytes:
    """A length-encoded integer of `length`: 1 byte, or 0xFC/0xFD/0xFE + 2/3/8 bytes. Servers use
    the shortest; wider ones are valid too and exercise every branch with small values."""
    if width == 1:
        assert length < 251
        return bytes([length])
    marker, size = {2: (0xFC, 2), 3: (0xFD, 3), 8: (0xFE, 8)}[width]
    return bytes([marker]) + length.to_bytes(size, "little")


def _packet(values: list[bytes | None], widths: list[int]) -> bytes:
    out = bytearray()
    for value, width in zip(values, widths):
        if value is None:
            out.append(0xFB)
        else:
            out += _length_prefix(len(value), 1 if width == 1 and len(value) < 251 else max(width, 2))
            out += value
    return bytes(out)


_values = st.lists(
    st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=240, max_size=300)), min_size=1, max_size=12
)


def _values_of(packet: bytes, count: int) -> list[bytes | None]:
    """The packet's values as the parser hands them over: raw bytes, None for NULL."""
    names = [f"c{i}" for i in range(count)]
    return list(row_parser(names, [lambda raw: raw] * count)(packet).values())


@settings(max_examples=300, deadline=None)
@given(_values, st.data())
def test_row_packets_parse_back_to_their_values(values, data):
    widths = data.draw(st.lists(st.sampled_from([1, 2, 3, 8]), min_size=len(values), max_size=len(values)))
    packet = _packet(values, widths)
    assert _values_of(packet, len(values)) == values
    names = [f"c{i}" for i in range(len(values))]
    parse = row_parser(names, [lambda raw: ("seen", raw)] * len(values))
    # NULL never reaches a normalizer; every other value reaches it as its exact bytes
    assert parse(packet) == {name: None if value is None else ("seen", value) for name, value in zip(names, values)}


def test_a_packet_of_the_servers_shortest_prefixes():
    values = [b"", None, b"x" * 250, b"y" * 251, b"z" * 70_000]
    packet = (b"\x00" + b"\xfb" + b"\xfa" + b"x" * 250 + b"\xfc\xfb\x00" + b"y" * 251
              + b"\xfd" + (70_000).to_bytes(3, "little") + b"z" * 70_000)
    assert _values_of(packet, len(values)) == values


# --- the normalizers: against the stock path, on a real server ---------------------------------

EDGE_COLUMNS = """
    id INT PRIMARY KEY, dte DATE, dt0 DATETIME, dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL DEFAULT NULL,
    tm0 TIME, tm2 TIME(2), dec_a DECIMAL(10,2), dec_z DECIMAL(5,0), s SET('a','b','c'), e ENUM('x','y')
"""

# (date, datetime) spellings around every guard of the fast paths; lax sql_mode allows them all
_DATES = ["2024-02-28", "2024-02-29", "2024-02-30", "2024-04-31", "2024-12-31", "2024-00-15", "2024-07-00",
          "0000-01-01", "0001-01-01", "0999-12-28", "9999-12-31", "0000-00-00"]
_TIMES = ["00:00:00", "-00:00:00.5", "-00:00:01", "-838:59:59", "838:59:59", "12:34:56.78", "-12:34:56.01"]
_DECIMALS = [("0", "0"), ("-0.00", "-0"), ("-0.01", "-1"), ("-12.30", "99999"), ("99999999.99", "-99999"), ("0.5", "5")]


def _edge_rows() -> list[str]:
    rows = []
    for index, date in enumerate(_DATES):
        time_text = _TIMES[index % len(_TIMES)]
        dec_a, dec_z = _DECIMALS[index % len(_DECIMALS)]
        if date == "0000-00-00":
            timestamp = "'0000-00-00 00:00:00'"
        elif date < "1971" or date > "2037" or date[5:7] == "00" or date[8:] in ("00", "30", "31"):
            timestamp = "NULL"  # outside TIMESTAMP's range, or not a real date
        else:
            timestamp = f"'{date} 10:20:30.456'"
        rows.append(
            f"({index + 1}, '{date}', '{date} 23:59:59', '{date} 01:02:03.000001', {timestamp}, '{time_text}', "
            f"'{time_text}', {dec_a}, {dec_z}, '{['', 'c,a', 'b', 'a,b,c'][index % 4]}', '{['x', 'y', ''][index % 3]}')"
        )
    return rows


def _stock_rows(connection, schema) -> list[dict]:
    """The table read the stock way: pymysql's parsing and conversions, then the SELECT normalizer."""
    sql, params = ChunkQuery(schema, 1000).build()
    with connection.cursor(pymysql.cursors.Cursor) as cursor:
        cursor.execute(sql, params)
        return [
            {column.name: normalize_selected(column, value) for column, value in zip(schema.columns, row)}
            for row in cursor.fetchall()
        ]


def _assert_identical(wire: list[dict], stock: list[dict]) -> None:
    assert len(wire) == len(stock) > 0
    for wire_row, stock_row in zip(wire, stock):
        assert list(wire_row) == list(stock_row)
        for name, value in stock_row.items():
            got = wire_row[name]
            assert got == value and type(got) is type(value), (stock_row["id"], name, got, value)


def _check_table(mariadb, source_connection, database: str, table_name: str, columns: str, rows: list[str]) -> None:
    table = TableId(database, table_name)
    writer = mariadb.connect(database)
    try:
        with writer.cursor() as cursor:
            cursor.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")  # zero dates, Feb 30, the invalid ENUM member
            cursor.execute("SET time_zone = '+00:00'")
            cursor.execute(f"CREATE TABLE `{table_name}` ({columns})")
            for row in rows:
                cursor.execute(row)
        schema = source_connection.schemas.schema(table)
        wire = source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 1000))
        stock_connection = mariadb.connect()
        try:
            with stock_connection.cursor() as cursor:
                cursor.execute("SET time_zone = '+00:00'")
            _assert_identical(wire, _stock_rows(stock_connection, schema))
        finally:
            stock_connection.close()
        # the max key takes the same path
        assert source_connection.chunks.max_key(schema) == (max(row["id"] for row in wire),)
    finally:
        writer.close()


def test_every_type_reads_as_the_stock_path_did(mariadb, database, source_connection):
    rows = [insert_sql(f"`{database}`.`every_type`", row_id, literals) for row_id, literals in ROWS.items()]
    _check_table(mariadb, source_connection, database, "every_type", COLUMNS, rows)


def test_edge_values_read_as_the_stock_path_did(mariadb, database, source_connection):
    rows = [f"INSERT INTO `{database}`.`edges` VALUES {row}" for row in _edge_rows()]
    _check_table(mariadb, source_connection, database, "edges", EDGE_COLUMNS, rows)
    # the guards did route values both ways: some are the server's text as is, some were fixed
    schema = source_connection.schemas.schema(TableId(database, "edges"))
    by_id = {row["id"]: row for row in source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 1000))}
    assert by_id[1]["dt6"] == "2024-02-28T01:02:03.000001" and by_id[1]["ts3"] == "2024-02-28T10:20:30.456Z"
    assert by_id[12]["dte"] == "0000-00-00" and by_id[12]["dt0"] == "0000-00-00 00:00:00"
    assert by_id[2]["tm2"] == "-00:00:00.50" and by_id[2]["dec_a"] == "0.00"
