"""A binlog encoder for the tests: event packets built as a MySQL or MariaDB server builds them.

Test code only (dblog never imports it). It is written from the formats as the servers define them
(MySQL's `binlog_event.h` / `rows_event.h` / `control_events.h` documentation, MariaDB's replication
protocol pages, `Field::pack` and `save_field_metadata` of each field type, `decimal2bin`,
`my_datetime_packed_to_binary` and friends, MySQL's `json_binary.h`, `json_diff.cc` and
`rpl_record.cc` for partial JSON updates), not from dblog's decoder,
so that the decoder's tests check it against an independent reading of the format. Where a format
detail was settled by looking at what a real MariaDB 10.11 sends, the comment says so.

What a packet is here: one event as the dump thread sends it after the 0x00 status byte: the
19-byte common header (timestamp, type, server id, event size, log_pos = end of the event in
its file, flags), the post-header and body, and a CRC32 of all of that when checksums are on.

`Column` describes one column twice: as the TABLE_MAP event declares it (binlog type,
metadata bytes, nullability, optional metadata) and how one value of it is written in a row
image (`encode`). The constructors below (`tinyint`, `decimal`, `varchar`, `datetime2`, ...)
know each type's storage format; `BinlogWriter` strings events together with their positions.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

# --- event types (MySQL binlog_event.h; MariaDB's own from 160) -------------------------------------

QUERY, STOP, ROTATE, INTVAR, RAND, USER_VAR = 2, 3, 4, 5, 13, 14
FORMAT_DESCRIPTION, XID, TABLE_MAP = 15, 16, 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
INCIDENT, HEARTBEAT, IGNORABLE, ROWS_QUERY = 26, 27, 28, 29
WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 30, 31, 32
GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS = 33, 34, 35
XA_PREPARE, PARTIAL_UPDATE_ROWS, TRANSACTION_PAYLOAD, HEARTBEAT_V2, GTID_TAGGED = 38, 39, 40, 41, 42
ANNOTATE_ROWS, BINLOG_CHECKPOINT, MARIADB_GTID, GTID_LIST = 160, 161, 162, 163
QUERY_COMPRESSED = 165
WRITE_ROWS_COMPRESSED_V1, UPDATE_ROWS_COMPRESSED_V1, DELETE_ROWS_COMPRESSED_V1 = 166, 167, 168
WRITE_ROWS_COMPRESSED, UPDATE_ROWS_COMPRESSED, DELETE_ROWS_COMPRESSED = 169, 170, 171

LOG_EVENT_IGNORABLE_F = 0x80
LOG_EVENT_ARTIFICIAL_F = 0x20
LOG_EVENT_BINLOG_IN_USE_F = 0x01
STMT_END_F = 0x01

# --- field types (include/field_types.h) ------------------------------------------------------------

T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_TIMESTAMP, T_LONGLONG, T_INT24 = 1, 2, 3, 4, 5, 7, 8, 9
T_DATE, T_TIME, T_DATETIME, T_YEAR, T_VARCHAR, T_BIT = 10, 11, 12, 13, 15, 16
T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 17, 18, 19
T_TYPED_ARRAY, T_VECTOR = 20, 242  # MySQL: a multi-valued index's hidden column (8.0.17+); VECTOR (9.0+)
T_JSON, T_NEWDECIMAL, T_ENUM, T_SET, T_BLOB, T_STRING, T_GEOMETRY = 245, 246, 247, 248, 252, 254, 255

# Optional metadata (binlog_row_metadata)
SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, COLUMN_NAME, SET_STR_VALUE, ENUM_STR_VALUE = 1, 2, 3, 4, 5, 6
GEOMETRY_TYPE, SIMPLE_PRIMARY_KEY, PRIMARY_KEY_WITH_PREFIX = 7, 8, 9
ENUM_AND_SET_DEFAULT_CHARSET, ENUM_AND_SET_COLUMN_CHARSET, COLUMN_VISIBILITY = 10, 11, 12
VECTOR_DIMENSIONALITY = 13  # MySQL 9.0 (libs/mysql/binlog/event/rows_event.h)


# --- primitives ------------------------------------------------------------------------------------


def lenenc(value: int) -> bytes:
    """A length-encoded integer (net_store_length): 1 byte below 251, else 0xFC/0xFD/0xFE + 2/3/8 bytes."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def bitmap(bits: Sequence[bool], pad_with_ones: bool = False) -> bytes:
    """Bit i in byte i // 8, least significant bit first. `pad_with_ones`: the unused bits of the
    last byte set, as MySQL's bitmap_set_all leaves them (it memsets whole words to 0xFF)."""
    out = bytearray((len(bits) + 7) // 8)
    for index, bit in enumerate(bits):
        if bit:
            out[index >> 3] |= 1 << (index & 7)
    if pad_with_ones and len(bits) % 8:
        out[-1] |= 0xFF << (len(bits) % 8) & 0xFF
    return bytes(out)


def mariadb_compress(data: bytes) -> bytes:
    """MariaDB's compressed event payload (binlog_buf_compress): a header byte 0x80 | algorithm << 4
    | n (zlib is algorithm 0), the uncompressed length in n big-endian bytes (the fewest that hold
    it), then zlib's compress() output (a zlib stream)."""
    length = len(data)
    width = 4 if length & 0xFF000000 else 3 if length & 0xFF0000 else 2 if length & 0xFF00 else 1
    return bytes([0x80 | width]) + length.to_bytes(width, "big") + zlib.compress(data)


def event(type_code: int, body: bytes, *, log_pos: int, checksum: bool, timestamp: int = 1_700_000_000,
          server_id: int = 1, flags: int = 0) -> bytes:
    """One event packet: common header, `body` (post-header + payload), CRC32 when `checksum`."""
    size = 19 + len(body) + (4 if checksum else 0)
    packet = struct.pack("<IBIIIH", timestamp, type_code, server_id, size, log_pos, flags) + body
    if checksum:
        packet += struct.pack("<I", zlib.crc32(packet))
    return packet


# --- charsets ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Charset:
    name: str
    collation: int  # the collation id the table map carries
    mbmaxlen: int
    pad: bytes  # the pad character, trimmed from CHAR values in the binlog (Field_string::pack)

    def encode(self, text: str) -> bytes:
        if self.name == "latin1":
            return latin1_bytes(text)
        return text.encode({"utf8mb4": "utf-8", "utf16": "utf-16-be", "ucs2": "utf-16-be",
                            "utf32": "utf-32-be"}[self.name])


UTF8MB4 = Charset("utf8mb4", 45, 4, b" ")
LATIN1 = Charset("latin1", 8, 1, b" ")
UTF16 = Charset("utf16", 54, 4, b"\x00 ")
BINARY = Charset("binary", 63, 1, b"\x00")

# MySQL's latin1 is Windows-1252, and the five bytes Windows-1252 leaves undefined (0x81, 0x8D,
# 0x8F, 0x90, 0x9D) stand for the C1 controls of the same number. The 32 characters of 0x80-0x9F:
LATIN1_HIGH = "€\x81‚ƒ„…†‡ˆ‰Š‹Œ\x8dŽ\x8f\x90‘’“”•–—˜™š›œ\x9džŸ"


def latin1_text(data: bytes) -> str:
    """The text a latin1 column's bytes stand for (what the server sends a utf8mb4 client)."""
    return "".join(LATIN1_HIGH[byte - 0x80] if 0x80 <= byte < 0xA0 else chr(byte) for byte in data)


def latin1_bytes(text: str) -> bytes:
    return bytes(0x80 + LATIN1_HIGH.index(char) if char in LATIN1_HIGH else ord(char) for char in text)


# --- columns ----------------------------------------------------------------------------------------


@dataclass
class Column:
    """One column: its table-map description and how a value is written in a row image."""

    name: str
    type: int  # the binlog type (CHAR, BINARY, ENUM and SET are all STRING)
    meta: bytes  # its bytes in the table map's metadata block
    encode: Callable[[Any], bytes]
    nullable: bool = True
    numeric: bool = False  # counted in the SIGNEDNESS bitmap
    unsigned: bool = False
    charset: Charset | None = None  # character columns (incl. binary ones) and ENUM/SET
    character: bool = False  # counted in the DEFAULT_CHARSET / COLUMN_CHARSET lists
    enum_members: tuple[str, ...] | None = None
    set_members: tuple[str, ...] | None = None
    geometry_type: int | None = None
    vector_dimensions: int | None = None


def _integer(name: str, type_code: int, size: int, unsigned: bool, **kw: Any) -> Column:
    def encode(value: int) -> bytes:
        return value.to_bytes(size, "little", signed=not unsigned)

    return Column(name, type_code, b"", encode, numeric=True, unsigned=unsigned, **kw)


def tinyint(name: str, unsigned: bool = False, **kw: Any) -> Column:
    return _integer(name, T_TINY, 1, unsigned, **kw)


def smallint(name: str, unsigned: bool = False, **kw: Any) -> Column:
    return _integer(name, T_SHORT, 2, unsigned, **kw)


def mediumint(name: str, unsigned: bool = False, **kw: Any) -> Column:
    return _integer(name, T_INT24, 3, unsigned, **kw)


def int_(name: str, unsigned: bool = False, **kw: Any) -> Column:
    return _integer(name, T_LONG, 4, unsigned, **kw)


def bigint(name: str, unsigned: bool = False, **kw: Any) -> Column:
    return _integer(name, T_LONGLONG, 8, unsigned, **kw)


def float_(name: str, **kw: Any) -> Column:
    # metadata: the pack length
    return Column(name, T_FLOAT, bytes([4]), lambda value: struct.pack("<f", value), numeric=True, **kw)


def double(name: str, **kw: Any) -> Column:
    return Column(name, T_DOUBLE, bytes([8]), lambda value: struct.pack("<d", value), numeric=True, **kw)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes for 0-9 decimal digits (decimal.c)


def decimal_bytes(digits: str, negative: bool, precision: int, scale: int) -> bytes:
    """decimal2bin: `digits` is the absolute value's text with exactly `scale` decimals. The
    integer digits go in groups of 9 from the point leftwards (a shorter leading group first), the
    fraction in groups of 9 from the point rightwards (a shorter trailing group last); each group
    big-endian in 4 bytes, a partial one in 1-4. Negative values have every byte inverted; then
    the first bit is flipped (so positive numbers start with a 1 bit)."""
    whole_text, _, fraction_text = digits.partition(".")
    integer_digits = precision - scale
    whole_text = whole_text.lstrip("0").rjust(integer_digits, "0")
    assert len(whole_text) == integer_digits, (digits, precision, scale)
    assert len(fraction_text) == scale, (digits, scale)
    out = bytearray()
    leading = integer_digits % 9
    if leading:
        out += int(whole_text[:leading]).to_bytes(_DIG2BYTES[leading], "big")
    for start in range(leading, integer_digits, 9):
        out += int(whole_text[start : start + 9]).to_bytes(4, "big")
    for start in range(0, scale - scale % 9, 9):
        out += int(fraction_text[start : start + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fraction_text[scale - scale % 9 :]).to_bytes(_DIG2BYTES[scale % 9], "big")
    if negative:
        out = bytearray(byte ^ 0xFF for byte in out)
    out[0] ^= 0x80
    return bytes(out)


def decimal(name: str, precision: int, scale: int, **kw: Any) -> Column:
    """Values: (digits text with exactly `scale` decimals, negative flag)."""
    return Column(name, T_NEWDECIMAL, bytes([precision, scale]),
                  lambda value: decimal_bytes(value[0], value[1], precision, scale), numeric=True, **kw)


def year(name: str, **kw: Any) -> Column:
    # MariaDB 10.11 counts YEAR among the SIGNEDNESS columns (seen in its table maps: a YEAR
    # before an INT UNSIGNED takes a bit), and so does every client library.
    return Column(name, T_YEAR, b"", lambda value: bytes([value - 1900 if value else 0]), numeric=True,
                  unsigned=True, **kw)


def date(name: str, **kw: Any) -> Column:
    """Values: (year, month, day); 3 bytes little-endian, day | month << 5 | year << 9."""
    return Column(name, T_DATE, b"", lambda v: (v[0] * 16 * 32 + v[1] * 32 + v[2]).to_bytes(3, "little"), **kw)


def _fraction_bytes(micros: int, fsp: int) -> bytes:
    """The fraction after DATETIME2/TIMESTAMP2: fsp 1-2 in 1 byte (hundredths), 3-4 in 2 bytes
    (1/10000 s), 5-6 in 3 bytes (microseconds), big-endian."""
    if fsp == 0:
        return b""
    if fsp <= 2:
        return (micros // 10_000).to_bytes(1, "big")
    if fsp <= 4:
        return (micros // 100).to_bytes(2, "big")
    return micros.to_bytes(3, "big")


def datetime2_bytes(value: tuple[int, int, int, int, int, int, int], fsp: int) -> bytes:
    """DATETIME2: 40 bits big-endian, offset 2^39: year * 13 + month (17 bits), day (5), hour (5),
    minute (6), second (6); then the fraction."""
    year_, month, day, hour, minute, second, micros = value
    packed = ((year_ * 13 + month) << 22 | day << 17 | hour << 12 | minute << 6 | second) + (1 << 39)
    return packed.to_bytes(5, "big") + _fraction_bytes(micros, fsp)


def datetime2(name: str, fsp: int, **kw: Any) -> Column:
    """Values: (year, month, day, hour, minute, second, microseconds)."""
    return Column(name, T_DATETIME2, bytes([fsp]), lambda value: datetime2_bytes(value, fsp), **kw)


def timestamp2(name: str, fsp: int, **kw: Any) -> Column:
    """Values: (seconds since the epoch, microseconds): 4 bytes big-endian + the fraction."""
    return Column(name, T_TIMESTAMP2, bytes([fsp]),
                  lambda value: value[0].to_bytes(4, "big") + _fraction_bytes(value[1], fsp), **kw)


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncates towards zero)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def time2_bytes(negative: bool, hours: int, minutes: int, seconds: int, micros: int, fsp: int) -> bytes:
    """TIME2 as my_time_packed_to_binary writes it: the packed time is ((h << 12 | m << 6 | s) << 24)
    + microseconds, negated for negative times; its integer part (the packed value >> 24, an
    arithmetic shift) + 0x800000 in 3 big-endian bytes, then the fraction part (C's % of the
    packed value, so negative with a negative time) / 10000 or / 100 cast to 1 or 2 bytes; fsp 5-6
    store the whole packed value + 0x800000000000 in 6 bytes."""
    packed = ((hours << 12 | minutes << 6 | seconds) << 24) + micros
    if negative:
        packed = -packed
    if fsp >= 5:
        return (packed + 0x800000000000).to_bytes(6, "big")
    integer = packed >> 24
    fraction = packed - _c_div(packed, 1 << 24) * (1 << 24)  # C's %: the sign of the dividend
    head = (integer + 0x800000).to_bytes(3, "big")
    if fsp == 0:
        return head
    if fsp <= 2:
        return head + (_c_div(fraction, 10_000) & 0xFF).to_bytes(1, "big")
    return head + (_c_div(fraction, 100) & 0xFFFF).to_bytes(2, "big")


def time2(name: str, fsp: int, **kw: Any) -> Column:
    """Values: (negative, hours, minutes, seconds, microseconds)."""
    return Column(name, T_TIME2, bytes([fsp]), lambda value: time2_bytes(*value, fsp), **kw)


def old_datetime(name: str, **kw: Any) -> Column:
    """The pre-5.6 DATETIME: YYYYMMDDhhmmss as an 8-byte little-endian integer."""

    def encode(value: tuple[int, ...]) -> bytes:
        y, mo, d, h, mi, s = value
        return (((y * 100 + mo) * 100 + d) * 1_000_000 + h * 10_000 + mi * 100 + s).to_bytes(8, "little")

    return Column(name, T_DATETIME, b"", encode, **kw)


def old_timestamp(name: str, **kw: Any) -> Column:
    """The pre-5.6 TIMESTAMP: seconds since the epoch, 4 bytes little-endian."""
    return Column(name, T_TIMESTAMP, b"", lambda seconds: seconds.to_bytes(4, "little"), **kw)


def old_time(name: str, **kw: Any) -> Column:
    """The pre-5.6 TIME: ±(hh * 10000 + mm * 100 + ss), 3 bytes little-endian (two's complement)."""

    def encode(value: tuple[bool, int, int, int]) -> bytes:
        negative, h, m, s = value
        number = h * 10_000 + m * 100 + s
        return (-number if negative else number).to_bytes(3, "little", signed=True)

    return Column(name, T_TIME, b"", encode, **kw)


def bit(name: str, bits: int, **kw: Any) -> Column:
    """BIT(n): (n + 7) // 8 bytes big-endian; metadata n % 8, then n // 8."""
    size = (bits + 7) // 8
    return Column(name, T_BIT, bytes([bits % 8, bits // 8]), lambda value: value.to_bytes(size, "big"), **kw)


def _string_meta(real_type: int, length: int) -> bytes:
    """Field_string::save_field_metadata: real type XOR the length's bits 8-9 moved to bits 4-5,
    then the low byte of the length (in bytes: characters * mbmaxlen)."""
    return bytes([real_type ^ ((length & 0x300) >> 4), length & 0xFF])


def char(name: str, length: int, charset: Charset = UTF8MB4, **kw: Any) -> Column:
    """CHAR(length) / BINARY(length). Values: str (bytes for BINARY). The binlog holds the value
    without its trailing pad characters, behind a 1-byte length (2 bytes when the column can hold
    more than 255 bytes)."""
    max_bytes = length * charset.mbmaxlen
    width = 2 if max_bytes > 255 else 1

    def encode(value: str | bytes) -> bytes:
        data = value if isinstance(value, bytes) else charset.encode(value)
        pad = charset.pad  # whole characters only: a UTF-16 code unit U+0020 at an even offset
        while data.endswith(pad) and len(data) % len(pad) == 0:
            data = data[: -len(pad)]
        return len(data).to_bytes(width, "little") + data

    return Column(name, T_STRING, _string_meta(T_STRING, max_bytes), encode, charset=charset, character=True, **kw)


def binary(name: str, length: int, **kw: Any) -> Column:
    return char(name, length, BINARY, **kw)


def varchar(name: str, length: int, charset: Charset = UTF8MB4, **kw: Any) -> Column:
    """VARCHAR(length) / VARBINARY: metadata the maximum length in bytes (2 bytes little-endian);
    values behind a 1-byte length when that maximum is below 256, else 2 bytes."""
    max_bytes = length * charset.mbmaxlen
    width = 1 if max_bytes < 256 else 2

    def encode(value: str | bytes) -> bytes:
        data = value if isinstance(value, bytes) else charset.encode(value)
        return len(data).to_bytes(width, "little") + data

    return Column(name, T_VARCHAR, max_bytes.to_bytes(2, "little"), encode, charset=charset, character=True, **kw)


def blob(name: str, length_bytes: int, charset: Charset = BINARY, **kw: Any) -> Column:
    """TINY/-/MEDIUM/LONG BLOB and TEXT (length_bytes 1/2/3/4): all logged as BLOB, metadata the
    width of the little-endian length before each value."""

    def encode(value: str | bytes) -> bytes:
        data = value if isinstance(value, bytes) else charset.encode(value)
        return len(data).to_bytes(length_bytes, "little") + data

    return Column(name, T_BLOB, bytes([length_bytes]), encode, charset=charset, character=True, **kw)


def geometry(name: str, flavor: str = "mariadb", geometry_type: int = 0, **kw: Any) -> Column:
    """GEOMETRY (geometry_type 0; POINT 1, LINESTRING 2, ...): like a LONGBLOB (4-byte length) of
    SRID + WKB. MariaDB lists it among the character columns in the charset metadata (binary);
    MySQL does not."""
    return Column(name, T_GEOMETRY, bytes([4]), lambda data: len(data).to_bytes(4, "little") + data,
                  charset=BINARY if flavor == "mariadb" else None, character=flavor == "mariadb",
                  geometry_type=geometry_type, **kw)


def enum(name: str, members: Sequence[str], charset: Charset = UTF8MB4, **kw: Any) -> Column:
    """ENUM: the member's index (1-based, 0 for the invalid-value member), 1 byte for up to 255
    members, else 2, little-endian. Logged as STRING with metadata (ENUM, pack length)."""
    size = 1 if len(members) < 256 else 2
    return Column(name, T_STRING, bytes([T_ENUM, size]), lambda index: index.to_bytes(size, "little"),
                  charset=charset, enum_members=tuple(members), **kw)


def set_(name: str, members: Sequence[str], charset: Charset = UTF8MB4, **kw: Any) -> Column:
    """SET: a bitmask, little-endian, (n + 7) // 8 bytes but 8 when that is more than 4."""
    size = (len(members) + 7) // 8
    size = 8 if size > 4 else size
    return Column(name, T_STRING, bytes([T_SET, size]), lambda mask: mask.to_bytes(size, "little"),
                  charset=charset, set_members=tuple(members), **kw)


def json_column(name: str, **kw: Any) -> Column:
    """MySQL's JSON: a 4-byte length, then the binary JSON document (see `json_binary`)."""
    return Column(name, T_JSON, bytes([4]), lambda doc: len(doc).to_bytes(4, "little") + doc, **kw)


# --- MySQL binary JSON (json_binary.h) ---------------------------------------------------------------

J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL = 0, 1, 2, 3, 4
J_INT16, J_UINT16, J_INT32, J_UINT32, J_INT64, J_UINT64, J_DOUBLE, J_STRING, J_OPAQUE = 5, 6, 7, 8, 9, 10, 11, 12, 15


@dataclass(frozen=True)
class JsonInt:
    """An integer stored as a given binary JSON type (INT16 ... UINT64)."""

    value: int
    type: int


@dataclass(frozen=True)
class JsonDecimal:
    """A DECIMAL stored as opaque data (what MySQL does with CAST(x AS DECIMAL) inside JSON)."""

    digits: str  # exactly `scale` decimals, no sign
    negative: bool
    precision: int
    scale: int


def json_key_order(keys: Sequence[str]) -> list[str]:
    """MySQL stores object keys sorted by length, then bytewise (utf8mb4)."""
    return sorted(keys, key=lambda key: (len(key.encode()), key.encode()))


def _varlen(length: int) -> bytes:
    """Lengths of strings and opaque data: 7 bits per byte, low bits first, high bit = more."""
    out = bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def _json_int_type(value: int) -> int:
    if -(1 << 15) <= value < 1 << 15:
        return J_INT16
    if -(1 << 31) <= value < 1 << 31:
        return J_INT32
    if -(1 << 63) <= value < 1 << 63:
        return J_INT64
    return J_UINT64


_JSON_INT_FORMATS = {J_INT16: "<h", J_UINT16: "<H", J_INT32: "<i", J_UINT32: "<I", J_INT64: "<q", J_UINT64: "<Q"}


def _json_scalar(value: Any) -> tuple[int, bytes]:
    """(type, value bytes) of a scalar; containers go through _json_container."""
    if value is None or value is True or value is False:
        return J_LITERAL, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, JsonInt):
        return value.type, struct.pack(_JSON_INT_FORMATS[value.type], value.value)
    if isinstance(value, int):
        kind = _json_int_type(value)
        return kind, struct.pack(_JSON_INT_FORMATS[kind], value)
    if isinstance(value, float):
        return J_DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode()
        return J_STRING, _varlen(len(data)) + data
    if isinstance(value, JsonDecimal):
        payload = bytes([value.precision, value.scale]) + decimal_bytes(
            value.digits, value.negative, value.precision, value.scale)
        return J_OPAQUE, bytes([T_NEWDECIMAL]) + _varlen(len(payload)) + payload
    raise TypeError(f"no binary JSON for {value!r}")


def _inlined(kind: int, large: bool) -> bool:
    return kind in (J_LITERAL, J_INT16, J_UINT16) or (large and kind in (J_INT32, J_UINT32))


def _json_value(value: Any, large: bool) -> tuple[int, bytes]:
    if isinstance(value, (dict, list)):
        return _json_container(value, large)
    return _json_scalar(value)


def _json_container(value: dict | list, large: bool) -> tuple[int, bytes]:
    if large:
        return _json_container_as(value, True)
    try:
        return _json_container_as(value, False)
    except struct.error:  # an offset past 64 KiB: the server then writes the large format
        return _json_container_as(value, True)


def _json_container_as(value: dict | list, large: bool) -> tuple[int, bytes]:
    """object ::= element-count size key-entry* value-entry* key* value*;
    array ::= element-count size value-entry* value*. Counts, sizes and offsets are 2 bytes in a
    small container and 4 in a large one; offsets count from the container's first byte. Literals
    and 16-bit integers (also 32-bit ones in a large container) sit in their value entry."""
    is_object = isinstance(value, dict)
    width = 4 if large else 2
    pack = "<I" if large else "<H"
    keys = list(value) if is_object else []  # dicts arrive in storage order (json_key_order)
    items = [value[key] for key in keys] if is_object else list(value)
    encoded_keys = [key.encode() for key in keys]
    header = 2 * width + len(items) * (width + 2 if is_object else 0) + len(items) * (1 + width)
    offset = header + sum(len(key) for key in encoded_keys)
    key_entries = bytearray()
    cursor = header
    for key in encoded_keys:
        key_entries += struct.pack(pack, cursor) + struct.pack("<H", len(key))
        cursor += len(key)
    value_entries = bytearray()
    values = bytearray()
    for item in items:
        kind, data = _json_value(item, large)
        if _inlined(kind, large):
            value_entries += bytes([kind]) + data.ljust(width, b"\x00")
        else:
            value_entries += bytes([kind]) + struct.pack(pack, offset + len(values))
            values += data
    body = key_entries + value_entries + b"".join(encoded_keys) + values
    size = 2 * width + len(body)
    kind = (J_LARGE_OBJECT if large else J_SMALL_OBJECT) if is_object else (J_LARGE_ARRAY if large else J_SMALL_ARRAY)
    return kind, struct.pack(pack, len(items)) + struct.pack(pack, size) + bytes(body)


def json_binary(value: Any, large: bool = False) -> bytes:
    """A JSON document in MySQL's binary format: its type byte, then its value. `large`: write
    containers in the large format even when the small one would do (both are valid)."""
    kind, data = _json_value(value, large)
    return bytes([kind]) + data


# --- table maps and rows ----------------------------------------------------------------------------


def vector(name: str, dimensions: int, **kw: Any) -> Column:
    """MySQL 9's VECTOR(n) (sql/field.h Field_vector, a BLOB with a 4-byte length): metadata 1
    byte, the length prefix's size, 4 (sql/rpl_utility.cc read_field_metadata); the value its
    length in 4 little-endian bytes, then n float32s, little-endian (calc_field_size; mysqlbinlog
    prints them with float4get). A character column of the binary collation in the charset
    metadata (sql/log_event.cc, is_character_type), n in VECTOR_DIMENSIONALITY."""
    def encode(value: Sequence[float] | bytes) -> bytes:
        data = value if isinstance(value, bytes) else struct.pack(f"<{len(value)}f", *value)
        return len(data).to_bytes(4, "little") + data

    return Column(name, T_VECTOR, bytes([4]), encode, charset=BINARY, character=True, vector_dimensions=dimensions,
                  **kw)


def typed_array(name: str, element_type: int, element_meta: bytes = b"", charset: Charset | None = None,
                **kw: Any) -> Column:
    """The hidden column of a multi-valued index, `CAST(... AS type ARRAY)`, as MySQL 8.0.17-8.0.19
    list it in a table map: type MYSQL_TYPE_TYPED_ARRAY, metadata the element type then its own
    metadata (a VARCHAR's length in 3 bytes: Field_typed_array::do_save_field_metadata, read back
    by sql/rpl_utility.cc read_field_metadata). Not numeric for SIGNEDNESS (binlog_type()), a
    character column when its element is (real_type() is the element's). Never in a row image."""
    def encode(value: Any) -> bytes:
        raise AssertionError("MySQL never logs a hidden column's value (sql/rpl_record.cc, pack_row)")

    character = element_type in (T_VARCHAR, T_STRING, T_BLOB)
    return Column(name, T_TYPED_ARRAY, bytes([element_type]) + element_meta, encode, charset=charset,
                  character=character, **kw)


@dataclass
class Table:
    table_id: int
    db: str
    name: str
    columns: list[Column]
    primary_key: tuple[int, ...] = ()


def table_map_body(table: Table, *, flavor: str = "mariadb", names: bool = True, charset_mode: str = "auto",
                   metadata: bool = True, minimal: bool = False) -> bytes:
    """A TABLE_MAP event's post-header and body.

    `minimal`: as binlog_row_metadata=MINIMAL logs it (MySQL 8.4 sql/log_event.cc,
    Table_map_log_event::init_metadata_fields: SIGNEDNESS, DEFAULT_CHARSET / COLUMN_CHARSET and
    GEOMETRY_TYPE only; names, ENUM/SET members and charsets, the primary key and visibility need
    FULL). `metadata=False`: no optional metadata at all (MariaDB's NO_LOG, MySQL 5.7).

    Post-header: table id (6 bytes), flags (2). Body: database and table names (a length byte,
    the name, a 0x00), the column count (length-encoded), one type byte per column, the metadata
    block (length-encoded size, then each column's metadata), the NULL-able bitmap, then the
    optional metadata (binlog_row_metadata): type byte, length-encoded size, value.

    `charset_mode`: 'default' (DEFAULT_CHARSET: the most common collation, then (index, collation)
    pairs for the columns with another one), 'column' (COLUMN_CHARSET: every column's collation)
    or 'auto' (the shorter of the two, as the servers choose). Field order: MySQL's
    (signedness, charsets, names, SET and ENUM members, geometry types, primary key, ENUM/SET
    charsets); MariaDB 10.11 writes the geometry types before the names and the ENUM/SET
    charsets right after them (seen on the wire).
    """
    columns = table.columns
    db, name = table.db.encode(), table.name.encode()
    out = bytearray(table.table_id.to_bytes(6, "little") + (1).to_bytes(2, "little"))  # TM_BIT_LEN_EXACT_F
    out += bytes([len(db)]) + db + b"\x00" + bytes([len(name)]) + name + b"\x00"
    out += lenenc(len(columns)) + bytes(column.type for column in columns)
    meta = b"".join(column.meta for column in columns)
    out += lenenc(len(meta)) + meta
    out += bitmap([column.nullable for column in columns])
    if not metadata:
        return bytes(out)

    fields: dict[int, bytes] = {}
    numeric = [column for column in columns if column.numeric]
    if numeric:
        flags = bytearray((len(numeric) + 7) // 8)
        for index, column in enumerate(numeric):  # most significant bit first
            if column.unsigned:
                flags[index >> 3] |= 0x80 >> (index & 7)
        fields[SIGNEDNESS] = bytes(flags)
    fields.update(_charset_field([c for c in columns if c.character], DEFAULT_CHARSET, COLUMN_CHARSET,
                                 charset_mode))
    if names:
        fields[COLUMN_NAME] = b"".join(lenenc(len(c.name.encode())) + c.name.encode() for c in columns)
    for kind, attribute in ((SET_STR_VALUE, "set_members"), (ENUM_STR_VALUE, "enum_members")):
        lists = [(getattr(c, attribute), c.charset) for c in columns if getattr(c, attribute) is not None]
        if lists:
            # Members are logged in the column's own charset.
            fields[kind] = b"".join(
                lenenc(len(members)) + b"".join(lenenc(len(cs.encode(m))) + cs.encode(m) for m in members)
                for members, cs in lists)
    geometries = [c.geometry_type for c in columns if c.geometry_type is not None]
    if geometries:
        fields[GEOMETRY_TYPE] = b"".join(lenenc(kind) for kind in geometries)
    dimensions = [c.vector_dimensions for c in columns if c.vector_dimensions is not None]
    if dimensions:
        fields[VECTOR_DIMENSIONALITY] = b"".join(lenenc(count) for count in dimensions)
    if table.primary_key:
        fields[SIMPLE_PRIMARY_KEY] = b"".join(lenenc(index) for index in table.primary_key)
    fields.update(_charset_field([c for c in columns if c.enum_members is not None or c.set_members is not None],
                                 ENUM_AND_SET_DEFAULT_CHARSET, ENUM_AND_SET_COLUMN_CHARSET, charset_mode))
    if flavor == "mariadb":
        order = (SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, GEOMETRY_TYPE, COLUMN_NAME, ENUM_AND_SET_DEFAULT_CHARSET,
                 ENUM_AND_SET_COLUMN_CHARSET, SET_STR_VALUE, ENUM_STR_VALUE, SIMPLE_PRIMARY_KEY)
    else:  # MySQL 9 writes VECTOR_DIMENSIONALITY after the charsets (seen in a 9.x binlog)
        order = (SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, VECTOR_DIMENSIONALITY, COLUMN_NAME, SET_STR_VALUE,
                 ENUM_STR_VALUE, GEOMETRY_TYPE, SIMPLE_PRIMARY_KEY, ENUM_AND_SET_DEFAULT_CHARSET,
                 ENUM_AND_SET_COLUMN_CHARSET)
    if minimal:
        order = tuple(kind for kind in order if kind in (SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, GEOMETRY_TYPE))
    for kind in order:
        if kind in fields:
            out += bytes([kind]) + lenenc(len(fields[kind])) + fields[kind]
    return bytes(out)


def _charset_field(columns: list[Column], default_kind: int, column_kind: int, mode: str) -> dict[int, bytes]:
    if not columns:
        return {}
    collations = [column.charset.collation for column in columns]
    common = max(dict.fromkeys(collations), key=collations.count)  # the first of the most used
    default = lenenc(common) + b"".join(lenenc(index) + lenenc(c) for index, c in enumerate(collations) if c != common)
    per_column = b"".join(lenenc(c) for c in collations)
    if mode == "auto":
        mode = "default" if len(default) <= len(per_column) else "column"
    return {default_kind: default} if mode == "default" else {column_kind: per_column}


def row_image(columns: Sequence[Column], row: Sequence[Any], present: Sequence[bool],
              null_padding: int = 0) -> bytes:
    """One row image: a NULL bitmap over the present columns, then each present non-NULL value.
    `null_padding`: bits to set in the NULL bitmap's unused high bits (ignored by readers)."""
    logged = [(column, value) for column, value, here in zip(columns, row, present) if here]
    nulls = bytearray(bitmap([value is None for _, value in logged]))
    if len(logged) % 8:
        nulls[-1] |= (null_padding << (len(logged) % 8)) & 0xFF
    return bytes(nulls) + b"".join(column.encode(value) for column, value in logged if value is not None)


_ROWS_TYPES = {
    (1, False): {"c": WRITE_ROWS_V1, "u": UPDATE_ROWS_V1, "d": DELETE_ROWS_V1},
    (2, False): {"c": WRITE_ROWS, "u": UPDATE_ROWS, "d": DELETE_ROWS},
    (1, True): {"c": WRITE_ROWS_COMPRESSED_V1, "u": UPDATE_ROWS_COMPRESSED_V1, "d": DELETE_ROWS_COMPRESSED_V1},
    (2, True): {"c": WRITE_ROWS_COMPRESSED, "u": UPDATE_ROWS_COMPRESSED, "d": DELETE_ROWS_COMPRESSED},
}


def rows_event_body(table: Table, op: str, rows: Sequence[Any], *, version: int = 1, compressed: bool = False,
                    present: Sequence[bool] | None = None, present_after: Sequence[bool] | None = None,
                    pad_bitmaps: bool = False, extra: bytes = b"", null_padding: int = 0) -> tuple[int, bytes]:
    """(event type, post-header + body) of a rows event.

    Post-header: table id (6 bytes), flags (2); version 2 adds the extra-data length (2 bytes,
    counting itself) and the extra data. Body: the column count (length-encoded), the bitmap of
    present columns (two for an update: before and after image), then the row images (for an
    update, before and after image of each row in turn). MariaDB's compressed rows events
    compress the row images only (`mariadb_compress`); count and bitmaps stay as they are.
    `rows`: for 'u' (before, after) pairs, else rows; a row is a sequence of values (None = NULL).
    """
    columns = table.columns
    present = list(present) if present is not None else [True] * len(columns)
    present_after = list(present_after) if present_after is not None else present
    type_code = _ROWS_TYPES[(version, compressed)][op]
    head = table.table_id.to_bytes(6, "little") + STMT_END_F.to_bytes(2, "little")
    if version == 2:
        head += (2 + len(extra)).to_bytes(2, "little") + extra
    body = lenenc(len(columns)) + bitmap(present, pad_bitmaps)
    if op == "u":
        body += bitmap(present_after, pad_bitmaps)
    images = bytearray()
    for row in rows:
        if op == "u":
            before, after = row
            images += row_image(columns, before, present, null_padding)
            images += row_image(columns, after, present_after, null_padding)
        else:
            images += row_image(columns, row, present, null_padding)
    data = mariadb_compress(bytes(images)) if compressed else bytes(images)
    return type_code, head + body + data


# --- partial JSON updates (binlog_row_value_options=PARTIAL_JSON) -----------------------------------

JSON_DIFF_REPLACE, JSON_DIFF_INSERT, JSON_DIFF_REMOVE = 0, 1, 2  # enum_json_diff_operation


class JsonDiffList(bytes):
    """A JSON column's after value written as a diff list (`json_diffs`) instead of a document."""


def json_diff(operation: int, path: str, value: Any = None) -> bytes:
    """One diff as sql-common/json_diff.cc (Json_diff::write_binary) writes it: the operation byte, the
    path's text with a net_field_length before it, then (not for REMOVE) the value in binary JSON, with
    its net_field_length."""
    out = bytes([operation]) + lenenc(len(path.encode())) + path.encode()
    if operation != JSON_DIFF_REMOVE:
        document = json_binary(value)
        out += lenenc(len(document)) + document
    return out


def json_diffs(*diffs: bytes) -> JsonDiffList:
    """A diff list (Json_diff_vector::write_binary writes a 4-byte length first: the JSON column's own
    length prefix, which the column's `encode` adds)."""
    return JsonDiffList(b"".join(diffs))


def partial_update_rows_body(table: Table, rows: Sequence[Any], *, present: Sequence[bool] | None = None,
                             present_after: Sequence[bool] | None = None,
                             value_options: int | None = None) -> tuple[int, bytes]:
    """(PARTIAL_UPDATE_ROWS, post-header + body) of an update as MySQL logs it with
    binlog_row_value_options=PARTIAL_JSON (it then logs every UPDATE so, JSON columns or not): the v2
    rows layout, and each after image preceded by the shared image of sql/rpl_record.cc (pack_row):
    value_options as a net_field_length, PARTIAL_JSON_UPDATES (1) when some JSON column of the after
    image is a diff list, else 0; then, only when it is 1, one bit per JSON column of the table (in the
    image or not, in column order, least significant bit first) set for a diff list. `value_options`
    forces the value written. `rows`: (before, after) pairs; a `JsonDiffList` after value is a diff."""
    columns = table.columns
    present = list(present) if present is not None else [True] * len(columns)
    present_after = list(present_after) if present_after is not None else present
    head = table.table_id.to_bytes(6, "little") + STMT_END_F.to_bytes(2, "little") + (2).to_bytes(2, "little")
    body = lenenc(len(columns)) + bitmap(present) + bitmap(present_after)
    json_indexes = [index for index, column in enumerate(columns) if column.type == T_JSON]
    for before, after in rows:
        flags = [isinstance(after[index], JsonDiffList) and present_after[index] for index in json_indexes]
        options = value_options if value_options is not None else int(any(flags))
        body += row_image(columns, before, present) + lenenc(options)
        if options & 1:
            body += bitmap(flags)
        body += row_image(columns, after, present_after)
    return PARTIAL_UPDATE_ROWS, head + body


# --- other events -----------------------------------------------------------------------------------

MARIADB_VERSION = "10.11.6-MariaDB-0+deb12u1-log"
MYSQL_VERSION = "8.0.36"


def _post_header_lengths(flavor: str) -> bytes:
    """Post-header lengths of event types 1.., as the servers' format description lists them."""
    lengths = {
        1: 56, 2: 13, 3: 0, 4: 8, 5: 0, 6: 18, 7: 0, 8: 4, 9: 4, 10: 4, 11: 4, 12: 18, 13: 0, 14: 0,
        15: 0, 16: 0, 17: 4, 18: 26, 19: 8, 20: 0, 21: 0, 22: 0, 23: 8, 24: 8, 25: 8, 26: 2, 27: 0,
        28: 0, 29: 0, 30: 10, 31: 10, 32: 10, 33: 42, 34: 42, 35: 0, 36: 18, 37: 52, 38: 0, 39: 10,
        40: 0, 41: 0,
    }
    if flavor == "mariadb":
        # As MariaDB 10.11 sends it: 171 types; of MySQL's 33-41 only 39-41 are listed (with 10).
        count = 171
        lengths.update({kind: 0 if kind < 39 else 10 for kind in range(33, 42)})
        lengths.update({160: 0, 161: 4, 162: 19, 163: 4, 164: 0, 165: 13, 166: 8, 167: 8, 168: 8,
                        169: 10, 170: 10, 171: 10})
    else:
        count = 41
    lengths[FORMAT_DESCRIPTION] = 2 + 50 + 4 + 1 + count  # its own: version, server, time, header length, these
    return bytes(lengths.get(kind, 0) for kind in range(1, count + 1))


def format_description_body(flavor: str, checksum: bool, server_version: str | None = None) -> bytes:
    """binlog version (2 bytes, 4), server version (50 bytes, 0-padded), create timestamp (4),
    common header length (1, 19), post-header lengths (one byte per event type), then the
    checksum algorithm (1: 0 off, 1 CRC32). The event itself always ends with 4 checksum bytes."""
    version = (server_version or (MARIADB_VERSION if flavor == "mariadb" else MYSQL_VERSION)).encode()
    return (struct.pack("<H", 4) + version.ljust(50, b"\x00") + struct.pack("<I", 0) + bytes([19])
            + _post_header_lengths(flavor) + bytes([1 if checksum else 0]))


def query_body(sql: str, db: str = "", *, compressed: bool = False, thread_id: int = 7) -> bytes:
    """QUERY: thread id (4), execution time (4), db length (1), error code (2), status-vars length
    (2); the status variables, the db, 0x00, the statement. MariaDB's QUERY_COMPRESSED has the
    statement as `mariadb_compress` output."""
    status = (bytes([0]) + struct.pack("<I", 0)  # Q_FLAGS2_CODE
              + bytes([1]) + struct.pack("<Q", 0)  # Q_SQL_MODE_CODE
              + bytes([6, 3]) + b"std"  # Q_CATALOG_NZ_CODE
              + bytes([4]) + struct.pack("<HHH", 33, 33, 45))  # Q_CHARSET_CODE
    text = sql.encode()
    if compressed:
        text = mariadb_compress(text)
    database = db.encode()
    return (struct.pack("<IIBHH", thread_id, 0, len(database), 0, len(status)) + status + database + b"\x00"
            + text)


def mariadb_gtid_body(seq: int, domain: int, flags: int, commit_id: int | None = None) -> bytes:
    """MariaDB GTID: sequence number (8), domain id (4), flags (1), then the commit id (8) when
    FL_GROUP_COMMIT_ID (2) is set, else 6 zero bytes."""
    head = struct.pack("<QIB", seq, domain, flags | (2 if commit_id is not None else 0))
    return head + (struct.pack("<Q", commit_id) if commit_id is not None else b"\x00" * 6)


def mysql_gtid_body(uuid_text: str, gno: int, *, last_committed: int = 0, sequence_number: int = 1) -> bytes:
    """MySQL GTID: flags (1), source UUID (16), GNO (8), logical-clock type (1, = 2), last
    committed (8), sequence number (8), immediate commit timestamp (7), transaction length
    (length-encoded), immediate server version (4)."""
    sid = bytes.fromhex(uuid_text.replace("-", ""))
    return (bytes([1]) + sid + struct.pack("<q", gno) + bytes([2]) + struct.pack("<qq", last_committed, sequence_number)
            + (1_700_000_000_000_000).to_bytes(7, "little") + lenenc(500) + struct.pack("<I", 80036))


def serialization_varlen(value: int) -> bytes:
    """An unsigned integer in MySQL's serialization format (libs/mysql/serialization/readme.md,
    "Variable-length integers"): n bytes, n - 1 trailing one bits and a zero in the first byte
    (no zero for n = 9), the value's bits above them, continued little-endian in the next bytes;
    n grows by one per 7 bits, up to 9 bytes for 64 bits."""
    size = min(9, max(1, -(-value.bit_length() // 7)))
    marker = (1 << (size - 1)) - 1
    if size == 9:
        return b"\xff" + value.to_bytes(8, "little")
    return (marker | value << size).to_bytes(size, "little")


def serialization_signed(value: int) -> bytes:
    """A signed integer of the same format: the sign in the lowest bit (x >= 0: x << 1; x < 0:
    (-(x + 1) << 1) | 1), then as unsigned."""
    return serialization_varlen(value << 1 if value >= 0 else (-(value + 1)) << 1 | 1)


def mysql_tagged_gtid_body(uuid_text: str, tag: str, gno: int, *, flags: int = 0, last_committed: int = 0,
                           sequence_number: int = 1, immediate_commit_timestamp: int = 1_770_368_687_000_000,
                           original_commit_timestamp: int | None = None, transaction_length: int = 296,
                           immediate_server_version: int = 90600, original_server_version: int | None = None,
                           commit_group_ticket: int = 0) -> bytes:
    """MySQL 8.3+'s GTID_TAGGED_LOG_EVENT body: Gtid_event's fields (Gtid_event::define_fields,
    libs/mysql/binlog/event/control_events.h) in MySQL's serialization format (readme.md of
    libs/mysql/serialization; Serializer::operator<<, Serializer_default's
    encode_serializable_metadata): the message's id (the format version, 1), its size in bytes
    counted from its first byte, the last field id readers must not skip + 1 (0: none), then
    each field's id and value. Fields: 0 flags, 1 the UUID (16 one-byte integers), 2 the GNO
    (signed), 3 the tag (length, characters), 4 last committed and 5 sequence number (signed),
    6 immediate commit timestamp, 7 original commit timestamp (only when it differs), 8
    transaction length, 9 immediate server version, 10 original server version (only when it
    differs), 11 commit group ticket (only when set)."""
    sid = bytes.fromhex(uuid_text.replace("-", ""))
    fields = [
        (0, serialization_varlen(flags)),
        (1, b"".join(serialization_varlen(byte) for byte in sid)),
        (2, serialization_signed(gno)),
        (3, serialization_varlen(len(tag)) + tag.encode("ascii")),
        (4, serialization_signed(last_committed)),
        (5, serialization_signed(sequence_number)),
        (6, serialization_varlen(immediate_commit_timestamp)),
    ]
    if original_commit_timestamp is not None and original_commit_timestamp != immediate_commit_timestamp:
        fields.append((7, serialization_varlen(original_commit_timestamp)))
    fields += [(8, serialization_varlen(transaction_length)), (9, serialization_varlen(immediate_server_version))]
    if original_server_version is not None and original_server_version != immediate_server_version:
        fields.append((10, serialization_varlen(original_server_version)))
    if commit_group_ticket:
        fields.append((11, serialization_varlen(commit_group_ticket)))
    return serialization_message(fields)


def serialization_message(fields: Sequence[tuple[int, bytes]], last_non_ignorable: int = 0,
                          version: int = 1) -> bytes:
    """A top-level message of MySQL's serialization format from its encoded fields."""
    payload = b"".join(serialization_varlen(field_id) + value for field_id, value in fields)
    head = serialization_varlen(version)
    tail = serialization_varlen(last_non_ignorable) + payload
    size = len(head) + 1 + len(tail)
    while len(head) + len(serialization_varlen(size)) + len(tail) != size:  # the size counts itself
        size = len(head) + len(serialization_varlen(size)) + len(tail)
    return head + serialization_varlen(size) + tail


def encoded_gtid_set(sources: Sequence[tuple[str, str, Sequence[tuple[int, int]]]], tagged: bool) -> bytes:
    """A GTID set in MySQL's binary encoding (Gtid_set::encode, sql/rpl_gtid_set.cc): the body of
    PREVIOUS_GTIDS_LOG_EVENT and the set of COM_BINLOG_DUMP_GTID. `sources`: (uuid, tag,
    [(first, last)...]). Untagged format: the source count (8 bytes); tagged (8.3+): the format
    1 in the count's lowest and highest byte, the count in between. Then per source the UUID
    (16 bytes), in the tagged format the tag (length as a serialization-format integer,
    characters), the interval count (8 bytes) and each interval as [first, last + 1)."""
    count = (1 << 56 | len(sources) << 8 | 1) if tagged else len(sources)
    out = bytearray(struct.pack("<Q", count))
    for uuid_text, tag, intervals in sources:
        out += bytes.fromhex(uuid_text.replace("-", ""))
        if tagged:
            out += serialization_varlen(len(tag)) + tag.encode("ascii")
        out += struct.pack("<Q", len(intervals))
        for first, last in intervals:
            out += struct.pack("<qq", first, last + 1)
    return bytes(out)


def xid_body(xid: int) -> bytes:
    return struct.pack("<Q", xid)


def rotate_body(file: str, position: int = 4) -> bytes:
    return struct.pack("<Q", position) + file.encode()


def heartbeat_v2_body(file: str | None, position: int | None) -> bytes:
    """MySQL 8's HEARTBEAT_V2: fields as (type, length, value), all length-encoded integers
    (file name: its bytes; position: a length-encoded integer), then the end mark 0."""
    out = bytearray()
    if file is not None:
        out += lenenc(1) + lenenc(len(file.encode())) + file.encode()
    if position is not None:
        value = lenenc(position)
        out += lenenc(2) + lenenc(len(value)) + value
    return bytes(out + lenenc(0))


def incident_body(message: str = "error writing to the binary log") -> bytes:
    """INCIDENT: the incident number (2 bytes, 1 = LOST_EVENTS), the message (1-byte length)."""
    return struct.pack("<H", 1) + bytes([len(message)]) + message.encode()


def xa_prepare_body(gtrid: bytes = b"trx1", bqual: bytes = b"", one_phase: bool = False) -> bytes:
    """XA_PREPARE_LOG_EVENT as MySQL writes it (libbinlogevents Xa_prepare_event): one_phase (1 byte),
    formatID, gtrid and bqual lengths (4 bytes each), then the XID's bytes."""
    return bytes([one_phase]) + struct.pack("<iii", 1, len(gtrid), len(bqual)) + gtrid + bqual


def transaction_payload_body(inner_events: Sequence[bytes], compression: str = "zstd") -> bytes:
    """MySQL's TRANSACTION_PAYLOAD: header fields (type, length, value as length-encoded integers:
    payload size 1, compression type 2 (0 zstd, 255 none), uncompressed size 3), the end mark 0,
    then the payload: the transaction's events one after the other, without checksums, compressed
    as one zstd frame (streamed: its header does not state the content size)."""
    import zstandard

    raw = b"".join(inner_events)
    if compression == "zstd":
        compressor = zstandard.ZstdCompressor().compressobj()
        payload = compressor.compress(raw) + compressor.flush()
        kind = 0
    else:
        payload, kind = raw, 255

    def header_field(field_type: int, value: int) -> bytes:
        encoded = lenenc(value)
        return lenenc(field_type) + lenenc(len(encoded)) + encoded

    header = header_field(1, len(payload)) + header_field(2, kind)
    if kind == 0:
        header += header_field(3, len(raw))
    return header + lenenc(0) + payload


# --- a binlog -----------------------------------------------------------------------------------------


@dataclass
class BinlogWriter:
    """Events one after another in one binlog file, each with its end position as log_pos."""

    flavor: str = "mariadb"
    checksum: bool = True
    position: int = 4  # after the file's magic number
    server_id: int = 1
    timestamp: int = 1_700_000_000
    packets: list[bytes] = field(default_factory=list)

    def add(self, type_code: int, body: bytes, *, flags: int = 0, checksum: bool | None = None,
            log_pos: int | None = None) -> bytes:
        checksum = self.checksum if checksum is None else checksum
        size = 19 + len(body) + (4 if checksum else 0)
        if log_pos is None:
            self.position += size
            log_pos = self.position
        packet = event(type_code, body, log_pos=log_pos, checksum=checksum, timestamp=self.timestamp,
                       server_id=self.server_id, flags=flags)
        self.packets.append(packet)
        return packet

    def format_description(self, server_version: str | None = None, in_use: bool = False) -> bytes:
        # The format description always ends with a CRC32 of itself, whatever algorithm it
        # announces (MariaDB 10.11 with binlog_checksum=NONE: seen on the wire).
        body = format_description_body(self.flavor, self.checksum, server_version)
        packet = self.add(FORMAT_DESCRIPTION, body, checksum=True)
        if in_use:
            # The first one of a file the server is writing (or was, when it crashed): flagged
            # LOG_EVENT_BINLOG_IN_USE_F (MySQL sql/binlog.cc, MYSQL_BIN_LOG::open_binlog), its
            # CRC32 computed with the flag clear (sql/log_event.cc, Log_event::write_header:
            # "recording checksum of FD event computed with dropped possibly active
            # LOG_EVENT_BINLOG_IN_USE_F flag"), as above. Dump threads clear it before sending.
            packet = packet[:17] + bytes([packet[17] | LOG_EVENT_BINLOG_IN_USE_F]) + packet[18:]
            self.packets[-1] = packet
        return packet

    def rotate(self, file: str, position: int = 4) -> bytes:
        # The dump thread's first rotate is artificial: log_pos 0, its own file's position unknown.
        return self.add(ROTATE, rotate_body(file, position), flags=LOG_EVENT_ARTIFICIAL_F, log_pos=0)

    def table_map(self, table: Table, **kw: Any) -> bytes:
        return self.add(TABLE_MAP, table_map_body(table, flavor=self.flavor, **kw))

    def rows(self, table: Table, op: str, rows: Sequence[Any], **kw: Any) -> bytes:
        type_code, body = rows_event_body(table, op, rows, **kw)
        return self.add(type_code, body)

    def partial_update_rows(self, table: Table, rows: Sequence[Any], **kw: Any) -> bytes:
        type_code, body = partial_update_rows_body(table, rows, **kw)
        return self.add(type_code, body)

    def mariadb_gtid(self, seq: int, domain: int = 0, standalone: bool = False, commit_id: int | None = None) -> bytes:
        return self.add(MARIADB_GTID, mariadb_gtid_body(seq, domain, 1 if standalone else 0, commit_id))

    def mysql_gtid(self, source: str, gno: int) -> bytes:
        """GTID_LOG_EVENT, or GTID_TAGGED_LOG_EVENT for a tagged source 'uuid:tag' (MySQL 8.3+)."""
        uuid_text, _, tag = source.partition(":")
        if tag:
            return self.add(GTID_TAGGED, mysql_tagged_gtid_body(uuid_text, tag, gno))
        return self.add(GTID, mysql_gtid_body(uuid_text, gno))

    def query(self, sql: str, db: str = "", compressed: bool = False) -> bytes:
        return self.add(QUERY_COMPRESSED if compressed else QUERY, query_body(sql, db, compressed=compressed))

    def xid(self, xid: int = 1) -> bytes:
        return self.add(XID, xid_body(xid))


def inner_event(type_code: int, body: bytes, timestamp: int = 1_700_000_000, server_id: int = 1) -> bytes:
    """An event inside a TRANSACTION_PAYLOAD: no checksum, log_pos 0."""
    return event(type_code, body, log_pos=0, checksum=False, timestamp=timestamp, server_id=server_id)
