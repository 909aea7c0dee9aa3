"""Binlog row-image values straight into dblog's normal form (the table in `dblog.mysql.values`).

Pure functions of bytes, one per storage format, used by the compiled row readers of
`dblog.mysql.binlog.rows`. Each reader returns the normalized value directly (text for DECIMAL and the
temporal types, ints, floats, base64 for binary data): no `datetime` or `Decimal` is built only
to be formatted back. The formats are the server's (MySQL's `my_decimal`/`my_time` packing, which
MariaDB shares):

* DECIMAL(p, s): groups of 9 digits in 4 big-endian bytes, a shorter leading/trailing group in
  1–4 bytes; the first bit is the sign (set = positive), negative values are stored inverted.
* DATETIME2: 5 big-endian bytes, offset 2^39: year*13+month (17 bits), day (5), hour (5),
  minute (6), second (6); then 0–3 bytes of fraction. TIMESTAMP2: 4 big-endian seconds since the
  epoch (UTC) + fraction. TIME2: 3 big-endian bytes, offset 2^23 (1 sign-ish bit, 10 hour bits,
  6 minute, 6 second) + fraction, negative values in two's complement across int and fraction.
* DATE: 3 little-endian bytes, year << 9 | month << 5 | day.
* The pre-5.6 DATETIME (8-byte YYYYMMDDhhmmss), TIMESTAMP (4 bytes) and TIME (3-byte signed
  HHMMSS) without fractions.

What a SELECT gives for dates a lax `sql_mode` lets in (zero parts, day 31 of a 30-day month) is the
server's text, and so is what these readers give: the zero date as `zero_date_text`, any other
date the server cannot call valid as 'YYYY-MM-DD[ HH:MM:SS[.f]]'.
"""

from __future__ import annotations

import binascii
import calendar
import ipaddress
import json
import struct
import time
from typing import Any, Callable

from dblog.mysql.binlog.json_double import json_double_text
from dblog.mysql.values import float32_shortest, float_vector

__all__ = [
    "decimal_reader",
    "decimal_size",
    "datetime2_reader",
    "timestamp2_reader",
    "time2_reader",
    "fraction_size",
    "date_value",
    "old_datetime_value",
    "old_timestamp_reader",
    "old_time_value",
    "year_value",
    "bits_value",
    "enum_reader",
    "set_reader",
    "b64",
    "padded_b64",
    "uuid_text",
    "inet6_text",
    "inet4_text",
    "text_decoder",
    "mysql_json_text",
    "mysql_json_value",
    "json_document_text",
    "float32_shortest",
    "float_vector",
]

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_FRACTION_BYTES = (0, 1, 1, 2, 2, 3, 3)


def b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


# --- DECIMAL ---------------------------------------------------------------------------------


def decimal_size(precision: int, scale: int) -> int:
    whole, leading = divmod(precision - scale, 9)
    full_fraction, trailing = divmod(scale, 9)
    return whole * 4 + _DIG2BYTES[leading] + full_fraction * 4 + _DIG2BYTES[trailing]


def decimal_reader(precision: int, scale: int) -> Callable[[bytes, int], str]:
    """A reader of DECIMAL(precision, scale): exact text with exactly `scale` decimals, no '-0'."""
    whole, leading = divmod(precision - scale, 9)
    full_fraction, trailing = divmod(scale, 9)
    size = decimal_size(precision, scale)
    # Byte widths of the groups, in order: a leading partial integer group, full integer groups,
    # full fraction groups, a trailing partial fraction group; and the digits each stands for.
    int_groups = ([_DIG2BYTES[leading]] if leading else []) + [4] * whole
    frac_groups = [(4, 9)] * full_fraction + ([(_DIG2BYTES[trailing], trailing)] if trailing else [])
    from_bytes = int.from_bytes

    def read(buf: bytes, pos: int) -> str:
        data = bytearray(buf[pos : pos + size])
        negative = not data[0] & 0x80
        data[0] ^= 0x80
        if negative:  # stored inverted
            data = bytearray(byte ^ 0xFF for byte in data)
        integer = 0
        offset = 0
        for width in int_groups:
            integer = integer * 1_000_000_000 + from_bytes(data[offset : offset + width], "big")
            offset += width
        text = str(integer)
        if not frac_groups:
            return "-" + text if negative and integer else text
        digits = []
        for width, count in frac_groups:
            digits.append(str(from_bytes(data[offset : offset + width], "big")).zfill(count))
            offset += width
        fraction = "".join(digits)
        if negative and (integer or fraction.strip("0")):
            return f"-{text}.{fraction}"
        return f"{text}.{fraction}"

    return read


# --- temporal --------------------------------------------------------------------------------


def fraction_size(precision: int) -> int:
    return _FRACTION_BYTES[precision]


def _fraction_reader(precision: int) -> Callable[[bytes, int], int]:
    """Microseconds from the 0–3 fraction bytes after a DATETIME2/TIMESTAMP2/TIME2 integer part."""
    width = _FRACTION_BYTES[precision]
    if width == 0:
        return lambda buf, pos: 0
    scale = (0, 10_000, 100, 1)[width]
    from_bytes = int.from_bytes
    return lambda buf, pos: from_bytes(buf[pos : pos + width], "big") * scale


def _fraction_text(micros: int, precision: int) -> str:
    return f".{micros:06d}"[: precision + 1] if precision > 0 else ""


def _valid_date(year: int, month: int, day: int) -> bool:
    if year == 0 or not 1 <= month <= 12 or day == 0:
        return False
    return day <= 28 or day <= calendar.monthrange(year, month)[1]


def _zero_datetime(precision: int) -> str:
    return "0000-00-00 00:00:00" + _fraction_text(0, precision)


def _datetime_text(year, month, day, hour, minute, second, micros, precision) -> str:
    date = f"{year:04d}-{month:02d}-{day:02d}"
    clock = f"{hour:02d}:{minute:02d}:{second:02d}{_fraction_text(micros, precision)}"
    if _valid_date(year, month, day):
        return f"{date}T{clock}"
    if year == month == day == 0:
        return _zero_datetime(precision)
    return f"{date} {clock}"  # the server's text for a date it cannot call valid


def datetime2_reader(precision: int) -> Callable[[bytes, int], str]:
    fraction = _fraction_reader(precision)
    from_bytes = int.from_bytes

    def read(buf: bytes, pos: int) -> str:
        packed = from_bytes(buf[pos : pos + 5], "big") - 0x8000000000
        date, clock = packed >> 17, packed & 0x1FFFF
        year_month = date >> 5
        return _datetime_text(year_month // 13, year_month % 13, date & 31,
                              clock >> 12, (clock >> 6) & 63, clock & 63, fraction(buf, pos + 5), precision)

    return read


def _utc_text(seconds: int, micros: int, precision: int) -> str:
    if seconds == 0 and micros == 0:
        return _zero_datetime(precision)  # the zero TIMESTAMP is stored as the epoch
    t = time.gmtime(seconds)
    return (f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
            f"{_fraction_text(micros, precision)}Z")


def timestamp2_reader(precision: int) -> Callable[[bytes, int], str]:
    fraction = _fraction_reader(precision)
    from_bytes = int.from_bytes

    def read(buf: bytes, pos: int) -> str:
        return _utc_text(from_bytes(buf[pos : pos + 4], "big"), fraction(buf, pos + 4), precision)

    return read


def old_timestamp_reader(buf: bytes, pos: int) -> str:
    return _utc_text(int.from_bytes(buf[pos : pos + 4], "little"), 0, 0)


def _time_text(negative: bool, hours: int, minutes: int, seconds: int, micros: int, precision: int) -> str:
    sign = "-" if negative else ""
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{_fraction_text(micros, precision)}"


def time2_reader(precision: int) -> Callable[[bytes, int], str]:
    width = _FRACTION_BYTES[precision]
    from_bytes = int.from_bytes

    def read(buf: bytes, pos: int) -> str:
        # The whole value (integer part and fraction) is one big-endian number offset so that
        # it sorts as unsigned; subtracting the offset gives the signed packed time.
        packed = from_bytes(buf[pos : pos + 3 + width], "big") - (0x800000 << (8 * width))
        negative = packed < 0
        if negative:
            packed = -packed
        if width:
            whole, fraction = divmod(packed, 1 << (8 * width))
            micros = fraction * (0, 10_000, 100, 1)[width]
        else:
            whole, micros = packed, 0
        return _time_text(negative, (whole >> 12) & 0x3FF, (whole >> 6) & 63, whole & 63, micros, precision)

    return read


def date_value(raw: int) -> str:
    """DATE from its 3-byte little-endian integer."""
    year, month, day = raw >> 9, (raw >> 5) & 15, raw & 31
    return f"{year:04d}-{month:02d}-{day:02d}"  # also the server's text of zero and partial dates


def old_datetime_value(raw: int) -> str:
    """The pre-5.6 DATETIME: YYYYMMDDhhmmss as one integer."""
    date, clock = divmod(raw, 1_000_000)
    year, rest = divmod(date, 10_000)
    month, day = divmod(rest, 100)
    hour, rest = divmod(clock, 10_000)
    minute, second = divmod(rest, 100)
    return _datetime_text(year, month, day, hour, minute, second, 0, 0)


def old_time_value(raw: int) -> str:
    """The pre-5.6 TIME: a signed HHMMSS integer (3 bytes)."""
    negative = raw < 0
    hours, rest = divmod(abs(raw), 10_000)
    minutes, seconds = divmod(rest, 100)
    return _time_text(negative, hours, minutes, seconds, 0, 0)


def year_value(raw: int) -> int:
    return raw + 1900 if raw else 0


def bits_value(buf: bytes, pos: int, size: int) -> int:
    return int.from_bytes(buf[pos : pos + size], "big")


# --- ENUM / SET --------------------------------------------------------------------------------


def enum_reader(members: tuple[str, ...], size: int) -> Callable[[bytes, int], str]:
    names = ("",) + tuple(members)  # index 0 is the invalid-value member ''
    from_bytes = int.from_bytes

    def read(buf: bytes, pos: int) -> str:
        index = buf[pos] if size == 1 else from_bytes(buf[pos : pos + size], "little")
        return names[index] if index < len(names) else ""

    return read


def set_reader(members: tuple[str, ...], size: int) -> Callable[[bytes, int], str]:
    from_bytes = int.from_bytes
    bits = tuple((1 << index, member) for index, member in enumerate(members))

    def read(buf: bytes, pos: int) -> str:
        mask = from_bytes(buf[pos : pos + size], "little")
        return ",".join([member for bit, member in bits if mask & bit])

    return read


# --- binary and text -------------------------------------------------------------------------


def padded_b64(length: int) -> Callable[[bytes], str]:
    """BINARY(n): the binlog right-trims the 0x00 padding; the column always holds n bytes."""

    def encode(data: bytes) -> str:
        if len(data) < length:
            data = data + b"\x00" * (length - len(data))
        return b64(data)

    return encode


def _padded(data: bytes, length: int) -> bytes:
    return data + b"\x00" * (length - len(data)) if len(data) < length else data


def uuid_text(data: bytes) -> str:
    text = _padded(data, 16).hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def inet6_text(data: bytes) -> str:
    address = ipaddress.IPv6Address(_padded(data, 16))
    mapped = address.ipv4_mapped
    return f"::ffff:{mapped}" if mapped is not None else address.compressed


def inet4_text(data: bytes) -> str:
    return str(ipaddress.IPv4Address(_padded(data, 4)))


# MySQL's latin1 is Windows-1252 whose five unassigned bytes map to the C1 controls of the same
# number (what the server converts them to for a utf8mb4 client).
_CP1252_HIGH = bytes(range(0x80, 0xA0)).decode("cp1252", "replace")
_LATIN1_TABLE = {
    0x80 + index: (ord(char) if char != "\ufffd" else 0x80 + index) for index, char in enumerate(_CP1252_HIGH)
}

# Charsets whose Python codec name differs from what pymysql reports, or that pymysql lacks.
_PYTHON_ENCODINGS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "ascii": "ascii", "binary": None,
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
    "latin2": "iso8859-2", "latin5": "iso8859-9", "latin7": "iso8859-13", "greek": "iso8859-7",
    "hebrew": "iso8859-8", "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866", "koi8r": "koi8-r", "koi8u": "koi8-u",
    "sjis": "shift_jis", "cp932": "cp932", "ujis": "euc_jp", "eucjpms": "euc_jp", "gbk": "gbk",
    "gb2312": "gb2312", "gb18030": "gb18030", "big5": "big5", "euckr": "euc_kr", "tis620": "tis-620",
    "macroman": "mac_roman", "macce": "mac_latin2", "armscii8": "latin-1", "swe7": "latin-1",
    "dec8": "latin-1", "hp8": "latin-1", "keybcs2": "latin-1", "geostd8": "latin-1",
}


def text_decoder(charset: str | None) -> Callable[[bytes], str] | None:
    """bytes -> str for a column of `charset` (a MySQL charset name); None for binary data."""
    if charset == "binary":
        return None
    if charset == "latin1":
        return lambda data: data.decode("latin-1").translate(_LATIN1_TABLE)
    encoding = _PYTHON_ENCODINGS.get(charset or "utf8mb4", charset)
    try:
        "".encode(encoding)
    except LookupError:
        encoding = "utf-8"
    return lambda data: data.decode(encoding, "replace")


# --- MySQL binary JSON -------------------------------------------------------------------------

_JSONB_SMALL_OBJECT, _JSONB_LARGE_OBJECT, _JSONB_SMALL_ARRAY, _JSONB_LARGE_ARRAY = 0, 1, 2, 3
_JSONB_LITERAL, _JSONB_INT16, _JSONB_UINT16, _JSONB_INT32, _JSONB_UINT32 = 4, 5, 6, 7, 8
_JSONB_INT64, _JSONB_UINT64, _JSONB_DOUBLE, _JSONB_STRING, _JSONB_OPAQUE = 9, 10, 11, 12, 15


class JsonDecodeError(ValueError):
    pass


def mysql_json_text(data: bytes) -> str:
    """MySQL's binary JSON (the JSON column's storage format) as JSON text in MySQL's own style
    (", " and ": " separators, keys in storage order, doubles as MySQL prints them). An empty value
    is JSON null (MySQL logs a JSON NULL-in-NOT-NULL column that way)."""
    return json_document_text(mysql_json_value(data))


def mysql_json_value(data: bytes) -> Any:
    """MySQL's binary JSON as Python values: dicts in storage order, lists, str, int, float (a JSON
    double), bool, None; a DECIMAL keeps its digits and a temporal value is its text (see
    `json_document_text`)."""
    if not data:
        return None
    return _jsonb_value(data[0], data, 1, len(data))


def json_document_text(value: Any) -> str:
    """A document of `mysql_json_value` as the text MySQL prints for it (Json_wrapper::to_string): json.dumps'
    text, except for numbers. A double is printed as MySQL does (`json_double_text`: 1e16, not 1e+16); a
    DECIMAL with its exact digits (json.dumps prints a float subclass with float.__repr__, which would round
    12345678901234567890.123 and drop the zero of 2.50)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key, ensure_ascii=False)}: {json_document_text(item)}"
                               for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join([json_document_text(item) for item in value]) + "]"
    if isinstance(value, _JsonNumber):
        return value.text
    if isinstance(value, float):
        return json_double_text(value)
    return json.dumps(value, ensure_ascii=False)


def _lenenc_varlen(data: bytes, pos: int) -> tuple[int, int]:
    """The 7-bits-per-byte length of JSON strings and keys."""
    length = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return length, pos
        shift += 7
        if shift > 28:
            raise JsonDecodeError("JSON string length is too long")


def _jsonb_value(kind: int, data: bytes, pos: int, end: int) -> Any:
    if kind in (_JSONB_SMALL_OBJECT, _JSONB_LARGE_OBJECT, _JSONB_SMALL_ARRAY, _JSONB_LARGE_ARRAY):
        return _jsonb_container(kind, data, pos)
    if kind == _JSONB_LITERAL:
        return _literal(data[pos])
    if kind == _JSONB_STRING:
        length, start = _lenenc_varlen(data, pos)
        return data[start : start + length].decode("utf-8")
    formats = {_JSONB_INT16: "<h", _JSONB_UINT16: "<H", _JSONB_INT32: "<i", _JSONB_UINT32: "<I",
               _JSONB_INT64: "<q", _JSONB_UINT64: "<Q", _JSONB_DOUBLE: "<d"}
    if kind in formats:
        return struct.unpack_from(formats[kind], data, pos)[0]
    if kind == _JSONB_OPAQUE:
        length, start = _lenenc_varlen(data, pos + 1)
        return _jsonb_opaque(data[pos], data[start : start + length])
    raise JsonDecodeError(f"unknown MySQL binary JSON value type {kind}")


# MySQL field types (enum_field_types) whose opaque JSON values MySQL does not print as base64.
_MYSQL_TIMESTAMP, _MYSQL_DATE, _MYSQL_TIME, _MYSQL_DATETIME = 7, 10, 11, 12
_MYSQL_NEWDECIMAL, _MYSQL_VAR_STRING = 246, 253


def _jsonb_opaque(field_type: int, payload: bytes) -> Any:
    """An opaque value (a field type, then raw bytes) as MySQL's JSON text shows it, which is what
    a SELECT of the column returns (sql-common/json_dom.cc, wrapper_to_string, MySQL 8.0/8.4;
    5.7 and early 8.0 left the base64 line breaks unescaped and printed VAR_STRING as base64)."""
    if field_type == _MYSQL_NEWDECIMAL:  # precision, scale, then the binary decimal
        return _JsonNumber(decimal_reader(payload[0], payload[1])(payload, 2))
    if field_type in (_MYSQL_TIMESTAMP, _MYSQL_DATE, _MYSQL_TIME, _MYSQL_DATETIME):
        return _packed_temporal_text(field_type, int.from_bytes(payload[:8], "little", signed=True))
    if field_type == _MYSQL_VAR_STRING:  # a binary string MySQL prints as a plain JSON string
        return payload.decode("utf-8", "replace")
    # MySQL's base64_encode starts a new line every 76 characters; JSON text escapes it as \n.
    encoded = b64(payload)
    lines = [encoded[start : start + 76] for start in range(0, len(encoded), 76)]
    return f"base64:type{field_type}:" + "\n".join(lines)


def _packed_temporal_text(field_type: int, packed: int) -> str:
    """A DATE, TIME, DATETIME or TIMESTAMP inside JSON, stored as MySQL's packed int64 (my_time.cc,
    TIME_to_longlong_*_packed: the integer part << 24 | microseconds, negated when negative), as
    my_TIME_to_str(value, 6) prints it: always 6 fraction digits, none for a DATE; a space, not
    'T', and no zone, for DATETIME and TIMESTAMP (the value as it was in the writer's time zone);
    zero and partial dates as they are."""
    negative = packed < 0
    whole, micros = divmod(-packed if negative else packed, 1 << 24)
    if field_type == _MYSQL_TIME:  # hours (10 bits), minutes, seconds
        return _time_text(negative, (whole >> 12) & 0x3FF, (whole >> 6) & 63, whole & 63, micros, 6)
    date, clock = whole >> 17, whole & 0x1FFFF  # year*13+month, day | hour, minute, second
    year_month = date >> 5
    text = f"{year_month // 13:04d}-{year_month % 13:02d}-{date & 31:02d}"
    if field_type == _MYSQL_DATE:
        return text
    return f"{text} {clock >> 12:02d}:{(clock >> 6) & 63:02d}:{clock & 63:02d}.{micros:06d}"


def _literal(byte: int) -> Any:
    if byte > 2:
        raise JsonDecodeError(f"unknown MySQL binary JSON literal {byte}")
    return (None, True, False)[byte]


class _JsonNumber(float):
    """A DECIMAL inside JSON: printed with its exact digits."""

    def __new__(cls, text: str) -> "_JsonNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __repr__(self) -> str:
        return self.text


def _jsonb_container(kind: int, data: bytes, start: int) -> Any:
    large = kind in (_JSONB_LARGE_OBJECT, _JSONB_LARGE_ARRAY)
    is_object = kind in (_JSONB_SMALL_OBJECT, _JSONB_LARGE_OBJECT)
    offset_size = 4 if large else 2
    unpack_count = "<I" if large else "<H"
    count = struct.unpack_from(unpack_count, data, start)[0]
    entry = start + 2 * offset_size  # element count, then total size
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            key_offset = struct.unpack_from(unpack_count, data, entry)[0]
            key_length = struct.unpack_from("<H", data, entry + offset_size)[0]
            keys.append(data[start + key_offset : start + key_offset + key_length].decode("utf-8"))
            entry += offset_size + 2
    values = []
    inline_types = (_JSONB_LITERAL, _JSONB_INT16, _JSONB_UINT16) + ((_JSONB_INT32, _JSONB_UINT32) if large else ())
    for _ in range(count):
        value_type = data[entry]
        if value_type in inline_types:
            if value_type == _JSONB_LITERAL:
                value = _literal(data[entry + 1])
            else:
                fmt = {_JSONB_INT16: "<h", _JSONB_UINT16: "<H", _JSONB_INT32: "<i", _JSONB_UINT32: "<I"}[value_type]
                value = struct.unpack_from(fmt, data, entry + 1)[0]
        else:
            value_offset = struct.unpack_from(unpack_count, data, entry + 1)[0]
            value = _jsonb_value(value_type, data, start + value_offset, len(data))
        values.append(value)
        entry += 1 + offset_size
    return dict(zip(keys, values)) if is_object else values
