"""Opaque values inside MySQL's binary JSON (issue 25, item 4): what dblog's decoder
(`dblog.mysql.binlog.values.mysql_json_text`) makes of them is the JSON text MySQL prints for
them, which is also what a chunk SELECT of the JSON column returns (the snapshot path keeps that
text as it is: JSON is a text type in `dblog.mysql.values`).

An opaque value is a MySQL field type byte, a 7-bits-per-byte length and raw bytes. No MySQL
server runs here, so every expected text below comes from MySQL's source or manual:

* sql-common/json_dom.cc (mysql/mysql-server at 603ef659, 2024; sql/json_dom.cc in earlier
  8.0 releases): `Json_wrapper::type` makes an opaque NEWDECIMAL (246) / DATETIME (12) / DATE
  (10) / TIME (11) / TIMESTAMP (7) a J_DECIMAL / J_DATETIME / J_DATE / J_TIME / J_TIMESTAMP;
  `Json_datetime::from_packed` reads the 8 payload bytes with sint8korr (a little-endian int64)
  through TIME_from_longlong_packed; `wrapper_to_string` prints the temporal values with
  my_TIME_to_str(t, ptr, 6), an opaque VAR_STRING (253) as a plain JSON string ("Treat strings
  saved in opaque as plain json strings"), and any other opaque value as
  "base64:type<field type>:<base64_encode of the bytes>", quoted and escaped by double_quote
  ("The encoded string may contain special characters, specifically newline characters").
* mysys/my_time.cc (MySQL 8.0): TIME_to_longlong_datetime_packed / _date_packed /
  _time_packed and their TIME_from_longlong_* inverses: ((year*13+month) << 5 | day) << 17 |
  hour << 12 | minute << 6 | second, shifted left 24 bits plus the microseconds, negated for a
  negative TIME (whose hours take 10 bits); my_time_to_str ('-' if negative, hours zero-padded
  to at least 2 digits, then :MM:SS and, with dec=6, '.' and 6 digits), my_date_to_str
  ('YYYY-MM-DD', no fraction), my_datetime_to_str ('YYYY-MM-DD hh:mm:ss' + '.ffffff'; a space,
  no 'T', no zone); my_zero_datetime6 = "0000-00-00 00:00:00.000000".
* include/base64.h, base64_encode: standard alphabet with '=' padding, and a newline after
  every 76 characters of output.
* MySQL Reference Manual 8.0, "Functions That Create JSON Values" (json-creation-functions):
  SELECT JSON_ARRAY(1, "abc", NULL, TRUE, CURTIME()) gives [1, "abc", null, true, "11:30:24.000000"].

mysql-replication 1.0.17 (pymysqlreplication.json_binary.parse_json) is the differential
reference where it decodes: DECIMAL, TIME from 00:00:00 to 23:59:59.999999, DATE and DATETIME
of calendar dates. Elsewhere it departs from MySQL's text, and dblog follows MySQL: it drops the
sign of a negative TIME (and cannot hold hours past 23), decodes a TIMESTAMP's and every other
type's raw bytes as UTF-8 text instead of base64, and gives the zero DATETIME without fraction.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
import struct

from support import binlog_encoder as be
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysqlreplication.json_binary import parse_json
from support.binlog_transactions import Packaging, decoded_rows, transaction

from dblog.mysql.binlog.values import mysql_json_text
from dblog.mysql.schema import Column
from dblog.mysql.values import selected_normalizer

TIMESTAMP, DATE, TIME, DATETIME, VARCHAR, BIT = 7, 10, 11, 12, 15, 16
NEWDECIMAL, BLOB, VAR_STRING, STRING, GEOMETRY = 246, 252, 253, 254, 255

# --- packing, as my_time.cc does it -----------------------------------------------------------------


def packed_datetime(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, micros: int = 0) -> int:
    """TIME_to_longlong_datetime_packed (a DATE packs the same with a zero time)."""
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return (((ymd << 17) | hms) << 24) + micros


def packed_time(negative: bool, h: int, mi: int, s: int, micros: int = 0) -> int:
    """TIME_to_longlong_time_packed."""
    packed = (((h << 12) | (mi << 6) | s) << 24) + micros
    return -packed if negative else packed


def varlen(length: int) -> bytes:
    out = bytearray()
    while True:
        out.append((length & 0x7F) | (0x80 if length >> 7 else 0))
        length >>= 7
        if not length:
            return bytes(out)


def opaque(field_type: int, payload: bytes) -> bytes:
    """A whole JSON document holding one opaque value: type 0x0f, field type, length, bytes."""
    return bytes([15, field_type]) + varlen(len(payload)) + payload


def temporal(field_type: int, packed: int) -> bytes:
    return opaque(field_type, struct.pack("<q", packed))


def container(elements: list[bytes], keys: list[str] | None = None) -> bytes:
    """A small array (or, with `keys` in MySQL's key order, object) of whole documents: literals
    and 16-bit integers inline in their value entry, the rest after the keys."""
    encoded_keys = [key.encode() for key in keys or []]
    header = 4 + 4 * len(encoded_keys) + 3 * len(elements)
    key_entries, cursor = b"", header
    for key in encoded_keys:
        key_entries += struct.pack("<HH", cursor, len(key))
        cursor += len(key)
    value_entries, values = b"", b""
    for element in elements:
        kind, data = element[0], element[1:]
        if kind in (be.J_LITERAL, be.J_INT16, be.J_UINT16):
            value_entries += bytes([kind]) + data.ljust(2, b"\x00")
        else:
            value_entries += bytes([kind]) + struct.pack("<H", cursor + len(values))
            values += data
    body = key_entries + value_entries + b"".join(encoded_keys) + values
    kind = be.J_SMALL_OBJECT if keys is not None else be.J_SMALL_ARRAY
    return bytes([kind]) + struct.pack("<HH", len(elements), 4 + len(body)) + body


# --- what MySQL prints ------------------------------------------------------------------------------


def test_the_manuals_json_array_with_curtime():
    """The manual's JSON_ARRAY(1, "abc", NULL, TRUE, CURTIME()) at 11:30:24."""
    document = container([be.json_binary(1), be.json_binary("abc"), be.json_binary(None), be.json_binary(True),
                          temporal(TIME, packed_time(False, 11, 30, 24))])
    assert mysql_json_text(document) == '[1, "abc", null, true, "11:30:24.000000"]'


@pytest.mark.parametrize("field_type, packed, text", [
    (DATE, packed_datetime(2020, 1, 2), "2020-01-02"),  # CAST(DATE'2020-01-02' AS JSON)
    (DATE, packed_datetime(1000, 1, 1), "1000-01-01"),
    (DATE, packed_datetime(9999, 12, 31), "9999-12-31"),
    (DATE, 0, "0000-00-00"),  # the zero date
    (DATE, packed_datetime(2024, 0, 0), "2024-00-00"),  # a partial date, as it is
    (TIME, packed_time(False, 12, 34, 56), "12:34:56.000000"),
    (TIME, packed_time(False, 12, 34, 56, 500000), "12:34:56.500000"),
    (TIME, 0, "00:00:00.000000"),
    (TIME, packed_time(False, 100, 0, 0), "100:00:00.000000"),  # 3-digit hours
    (TIME, packed_time(False, 838, 59, 59), "838:59:59.000000"),
    (TIME, packed_time(True, 838, 59, 59), "-838:59:59.000000"),
    (TIME, packed_time(True, 1, 2, 3, 4), "-01:02:03.000004"),
    (TIME, packed_time(True, 0, 0, 0, 1), "-00:00:00.000001"),  # negative by its fraction alone
    (DATETIME, packed_datetime(2020, 1, 2, 12, 34, 56, 123456), "2020-01-02 12:34:56.123456"),
    (DATETIME, packed_datetime(2020, 1, 2, 12, 34, 56), "2020-01-02 12:34:56.000000"),
    (DATETIME, packed_datetime(1000, 1, 1), "1000-01-01 00:00:00.000000"),
    (DATETIME, packed_datetime(9999, 12, 31, 23, 59, 59, 999999), "9999-12-31 23:59:59.999999"),
    (DATETIME, 0, "0000-00-00 00:00:00.000000"),  # my_zero_datetime6
    (DATETIME, packed_datetime(2024, 2, 31, 1, 2, 3), "2024-02-31 01:02:03.000000"),  # not a calendar date
    # TIMESTAMP is packed and printed as DATETIME: the writer's local time, no zone, no UTC shift
    (TIMESTAMP, packed_datetime(2020, 1, 2, 12, 34, 56, 123456), "2020-01-02 12:34:56.123456"),
    (TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7, 999999), "2038-01-19 03:14:07.999999"),
])
def test_temporal_values_print_as_mysql_prints_them(field_type, packed, text):
    assert mysql_json_text(temporal(field_type, packed)) == json.dumps(text)


def test_temporal_values_inside_objects_and_arrays():
    """JSON_OBJECT('at', NOW(), 'd', CURDATE(), 'price', CAST(12.50 AS DECIMAL(4,2)), 'n', 7):
    every kind of value side by side, keys in MySQL's order (length, then bytes)."""
    at = temporal(DATETIME, packed_datetime(2024, 5, 31, 14, 41, 47))
    day = temporal(DATE, packed_datetime(2024, 5, 31))
    price = be.json_binary(be.JsonDecimal("12.50", False, 4, 2))
    keys = be.json_key_order(["at", "d", "price", "n", "list"])
    assert keys == ["d", "n", "at", "list", "price"]
    members = {"d": day, "n": be.json_binary(7), "at": at, "price": price,
               "list": container([temporal(TIME, packed_time(True, 0, 0, 1)), be.json_binary("x")])}
    document = container([members[key] for key in keys], keys)
    assert mysql_json_text(document) == ('{"d": "2024-05-31", "n": 7, "at": "2024-05-31 14:41:47.000000", '
                                         '"list": ["-00:00:01.000000", "x"], "price": 12.50}')


def test_decimals_keep_their_digits():
    """J_DECIMAL: decimal2string of the stored DECIMAL(precision, scale), exactly `scale` decimals."""
    cases = [(be.JsonDecimal("12.50", False, 4, 2), "12.50"), (be.JsonDecimal("7", True, 5, 0), "-7"),
             (be.JsonDecimal("0.001", False, 10, 3), "0.001"),
             (be.JsonDecimal("12345678901234567890.123", True, 30, 3), "-12345678901234567890.123")]
    for value, text in cases:
        assert mysql_json_text(be.json_binary(value)) == text


@pytest.mark.parametrize("field_type", [VARCHAR, BIT, BLOB, STRING, GEOMETRY, 13, 249, 250, 251])
def test_other_opaque_types_print_as_base64_with_their_type(field_type):
    """CAST(x'cafe' AS JSON) is an opaque VARCHAR: "base64:type15:yv4="; BLOB, BIT, BINARY(n)
    (STRING), YEAR (13) and the rest the same way, with their own type number."""
    assert mysql_json_text(opaque(field_type, b"\xca\xfe")) == f'"base64:type{field_type}:yv4="'
    assert mysql_json_text(opaque(field_type, b"")) == f'"base64:type{field_type}:"'


def test_long_opaque_values_break_their_base64_lines_as_mysql_does():
    """base64_encode starts a new line after 76 characters (57 bytes); the JSON text escapes the
    newline as \\n. 57 bytes fit one line, 58 do not, 200 bytes take 4 lines."""
    one_line = bytes(range(57))
    assert mysql_json_text(opaque(BLOB, one_line)) == json.dumps("base64:type252:" + base64.b64encode(one_line).decode())
    for size in (58, 114, 115, 200):
        data = bytes(range(size))
        encoded = base64.b64encode(data).decode()
        lines = [encoded[start : start + 76] for start in range(0, len(encoded), 76)]
        text = mysql_json_text(opaque(BLOB, data))
        assert text == '"base64:type252:' + "\\n".join(lines) + '"', size
        assert json.loads(text).count("\n") == (len(encoded) - 1) // 76
        assert base64.b64decode(json.loads(text).split(":", 2)[2]) == data  # b64decode skips the newlines
    # the raw payload length itself takes two varlen bytes past 127
    assert json.loads(mysql_json_text(opaque(BLOB, bytes(300)))).startswith("base64:type252:AAAA")


def test_an_opaque_var_string_prints_as_a_plain_json_string():
    """wrapper_to_string treats an opaque MYSQL_TYPE_VAR_STRING (253) as J_STRING."""
    assert mysql_json_text(opaque(VAR_STRING, 'a "quoted"\nline é'.encode())) == '"a \\"quoted\\"\\nline é"'


def test_the_stream_and_the_snapshot_give_the_same_value():
    """A JSON column decoded from a MySQL rows event is exactly the text MySQL's SELECT returns
    for it, and the snapshot path keeps that text as it is."""
    document = container([temporal(DATE, packed_datetime(2020, 1, 2)), temporal(TIME, packed_time(False, 12, 34, 56)),
                          temporal(DATETIME, packed_datetime(2020, 1, 2, 12, 34, 56, 123456)),
                          temporal(TIMESTAMP, packed_datetime(2020, 1, 2, 12, 34, 56, 123456))], ["d", "t", "dt", "ts"])
    selected = '{"d": "2020-01-02", "t": "12:34:56.000000", "dt": "2020-01-02 12:34:56.123456", "ts": "2020-01-02 12:34:56.123456"}'
    table = be.Table(7, "db", "t", [be.int_("id", nullable=False), be.json_column("j")], primary_key=(0,))
    packaging = Packaging("mysql", payload="zstd")
    _, decoded = decoded_rows(transaction(table, "c", [[1, document]], packaging), packaging)
    streamed = decoded.images[0]["j"]
    snapshot = selected_normalizer(Column("j", "json", "json", charset="utf8mb4"))(selected)
    assert streamed == snapshot == selected


# --- against mysql-replication ------------------------------------------------------------------------


def replication_text(document: bytes) -> str:
    """mysql-replication's value of a one-opaque document, printed as MySQL prints its type."""
    field_type, value = document[1], parse_json(document[0], document[1:])
    if field_type == NEWDECIMAL:
        return str(value)
    if field_type == TIME:
        return f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    date = f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if field_type == DATE:
        return date
    return f"{date} {value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"


MYSQL_DATETIMES = st.datetimes(min_value=datetime.datetime(1000, 1, 1),
                               max_value=datetime.datetime(9999, 12, 31, 23, 59, 59, 999999))


def pack(value: datetime.datetime) -> int:
    return packed_datetime(value.year, value.month, value.day, value.hour, value.minute, value.second,
                           value.microsecond)


@given(MYSQL_DATETIMES, st.times())
def test_dates_times_and_datetimes_agree_with_mysql_replication(moment, clock):
    documents = [temporal(DATETIME, pack(moment)), temporal(DATE, pack(datetime.datetime.combine(moment.date(),
                                                                                               datetime.time()))),
                 temporal(TIME, packed_time(False, clock.hour, clock.minute, clock.second, clock.microsecond))]
    for document in documents:
        assert json.loads(mysql_json_text(document)) == replication_text(document)


@given(st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**12, max_value=10**12))
def test_decimals_agree_with_mysql_replication(value):
    digits = format(abs(value), "f")
    if value.is_zero():
        return  # "-0.0000" from mysql-replication: MySQL's decimal2string prints no negative zero
    document = be.json_binary(be.JsonDecimal(digits, value < 0, 17, 4))
    ours = json.loads(mysql_json_text(document), parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    assert str(ours) == replication_text(document)


# --- round trips of the packed temporal format ---------------------------------------------------------

TIME_TEXT = re.compile(r"(-?)(\d{2,3}):(\d{2}):(\d{2})\.(\d{6})")
MAX_TIME_MICROS = ((838 * 60 + 59) * 60 + 59) * 1_000_000  # TIME's range: -838:59:59 to 838:59:59


@given(MYSQL_DATETIMES, st.sampled_from([DATETIME, TIMESTAMP]))
def test_datetimes_round_trip(moment, field_type):
    text = json.loads(mysql_json_text(temporal(field_type, pack(moment))))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}", text), text
    assert datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f") == moment


@given(st.dates(min_value=datetime.date(1000, 1, 1)))
def test_dates_round_trip(day):
    text = json.loads(mysql_json_text(temporal(DATE, packed_datetime(day.year, day.month, day.day))))
    assert datetime.date.fromisoformat(text) == day and len(text) == 10


@given(st.integers(-MAX_TIME_MICROS, MAX_TIME_MICROS))
def test_times_round_trip_negative_ones_too(micros):
    seconds, fraction = divmod(abs(micros), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = json.loads(mysql_json_text(temporal(TIME, packed_time(micros < 0, hour, minute, second, fraction))))
    sign, *parts = TIME_TEXT.fullmatch(text).groups()
    h, m, s, f = map(int, parts)
    assert (-1 if sign else 1) * (((h * 60 + m) * 60 + s) * 1_000_000 + f) == micros
    assert bool(sign) == (micros < 0)
