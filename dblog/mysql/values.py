"""One normal form for column values, whether a row came from a chunk SELECT or from the binlog.

The watermark algorithm compares keys read by a SELECT with keys decoded from the binlog, and
sinks merge rows from both paths into one table, so the same stored value must come out as the
same JSON-safe Python value either way. The SELECT path starts from the server's text (this
module); the binlog path from the binary row image (dblog's decoder, `dblog.mysql.binlog.values`); the
test suite checks them against each other for every type on a real server.

| MariaDB type                          | normalized JSON form                                          |
|---------------------------------------|---------------------------------------------------------------|
| TINYINT..BIGINT (signed/unsigned)     | int (full range, e.g. 18446744073709551615)                   |
| DECIMAL(p,s)                          | str, exact, exactly s decimals: "12.30", "-0.50", "7"         |
| FLOAT                                 | float: shortest decimal that round-trips through float32      |
| DOUBLE                                | float                                                         |
| DATE                                  | str "YYYY-MM-DD"                                              |
| DATETIME(p)                           | str "YYYY-MM-DDTHH:MM:SS[.f]" with exactly p fraction digits  |
| TIMESTAMP(p)                          | str "YYYY-MM-DDTHH:MM:SS[.f]Z" (UTC), p fraction digits       |
| zero DATE / DATETIME / TIMESTAMP      | str "0000-00-00" / "0000-00-00 00:00:00[.000…]" (server text) |
| TIME(p)                               | str "[-]HH:MM:SS[.f]", hours up to 838, p fraction digits     |
| YEAR                                  | int (0 for YEAR 0000)                                         |
| CHAR/VARCHAR/TEXT (any charset)       | str                                                           |
| JSON (MariaDB: LONGTEXT)              | str, the text as stored                                       |
| BINARY(n)                             | str, base64 of all n bytes (0x00 padding included)            |
| VARBINARY / BLOB / GEOMETRY           | str, base64                                                   |
| ENUM                                  | str, the member ("" for the invalid-value member 0)           |
| SET                                   | str, members comma-joined in definition order ("" if empty)   |
| BIT(n)                                | int                                                           |
| UUID                                  | str, canonical lowercase "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"|
| INET6                                 | str, RFC 5952 compressed; IPv4-mapped as "::ffff:1.2.3.4"     |
| INET4                                 | str, dotted quad                                              |
| VECTOR (MySQL 9)                      | list of float, each as FLOAT: [1.1, -2.5, 0.0]                |
| NULL                                  | None                                                          |

What each path needs, and why:

* SELECT: the session time_zone must be '+00:00' (`prepare_session`), so TIMESTAMP comes back
  in UTC like the binlog's. A FLOAT column must be selected as `CAST(col AS DOUBLE)`: its plain
  text has only 6 significant digits (16777216 prints as 16777200). `ChunkQuery` does both.
  The chunk reader does not let pymysql turn the server's text into Python objects (datetime,
  Decimal) only to format them back: `wire_normalizer` goes from the bytes of the text protocol
  to the normal form, directly where the server's text already is it (integers, DECIMAL, dates,
  DATETIME, TIME, strings, SET), and through pymysql's own conversion plus `selected_normalizer`
  for everything else and every value a fast path cannot vouch for (zero and invalid dates,
  negative TIMEs, negative zero), so both give the same value (tests/mysql/test_wire_rows.py).
* binlog: dblog's own decoder (`dblog.mysql.binlog.rows`, `dblog.mysql.binlog.values`) reads the row image
  straight into this form; tests/mysql/test_values.py checks both paths against each other for every
  type on a real server, and tests/mysql/test_binlog_differential.py against mysql-replication.

Dates a lax sql_mode lets in that are not calendar dates ('2024-00-00', '2024-02-31') are the
server's text on both paths. Old pre-5.6 temporal formats with fractions (MariaDB tables created
before mysql56_temporal_format) are not handled.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import ipaddress
import json
import re
import struct
import uuid
from functools import lru_cache
from typing import Any, Callable, NamedTuple

import pymysql.charset

from dblog.mysql.schema import BINARY_TYPES, INTEGER_TYPES, TEXT_TYPES, Column

__all__ = [
    "normalize_selected",
    "selected_normalizer",
    "wire_normalizer",
    "prepare_session",
    "SESSION_TIME_ZONE_SQL",
    "zero_date_text",
    "default_value",
    "EPOCH_TEXT",
    "float_vector",
]

SESSION_TIME_ZONE_SQL = "SET time_zone = '+00:00'"

Normalizer = Callable[[Any], Any]
_DECIMAL_CONTEXT = decimal.Context(prec=200)  # DECIMAL has at most 65 digits


def prepare_session(conn) -> None:
    """Make a SELECT session agree with the binlog: TIMESTAMP values in UTC."""
    with conn.cursor() as cursor:
        cursor.execute(SESSION_TIME_ZONE_SQL)


def normalize_selected(column: Column, value: Any) -> Any:
    """Normalize a value pymysql returned for `column` from a SELECT (see the module table)."""
    return selected_normalizer(column)(value)


def normalize_unknown(value: Any) -> Any:
    """Best-effort JSON-safe form for a value of a column the schema does not know (yet)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return _b64(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _time_text(value, 6)
    if isinstance(value, (set, frozenset)):
        return ",".join(sorted(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# --- shared formatting -----------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def float32_shortest(value: float) -> float:
    """The shortest decimal that reads back as the same float32."""
    as_float32 = struct.unpack("<f", struct.pack("<f", float(value)))[0]
    for digits in range(1, 10):  # 9 significant digits always round-trip a float32
        candidate = float(f"{as_float32:.{digits}g}")
        try:
            if struct.unpack("<f", struct.pack("<f", candidate))[0] == as_float32:
                return candidate
        except OverflowError:  # rounded up past the float32 maximum
            continue
    return as_float32


_FLOAT32 = struct.Struct("<f")


def _float32_shortest_of(value: float, bits: int) -> float:
    """`float32_shortest(value)` for a float32 `value` whose bit pattern is `bits`, in 2-3
    round trips instead of up to 9: from 8 digits down while they round-trip. Exact because a
    float32's rounding interval is symmetric, but at a power of two (the interval below it is
    half the one above), which takes the full scan: the correctly rounded d-digit decimal is at
    least as close as the (d-1)-digit one, so round-tripping only stops as digits decrease."""
    if not bits & 0x7FFFFF:
        return float32_shortest(value)
    pack, unpack = _FLOAT32.pack, _FLOAT32.unpack
    best = None
    for digits in (8, 7, 6, 5, 4, 3, 2, 1):
        candidate = float(f"{value:.{digits}g}")
        try:
            if unpack(pack(candidate))[0] != value:
                break
        except OverflowError:  # rounded past the float32 maximum
            break
        best = candidate
    return best if best is not None else float(f"{value:.9g}")


def float_vector(data: bytes) -> list[float]:
    """A VECTOR value's bytes (MySQL 9: little-endian float32s, 4 bytes each; sql/field.h
    Field_vector, as a SELECT returns it and the binlog logs it) as Debezium's FloatVector holds
    them: a list of floats, each the shortest decimal that reads back as the same float32 (as a
    FLOAT column's value)."""
    count, rest = divmod(len(data), 4)
    if rest:
        raise ValueError(f"a VECTOR value of {len(data)} bytes is not a whole number of 4-byte floats")
    values = struct.unpack(f"<{count}f", data)
    return [_float32_shortest_of(value, bits) for value, bits in zip(values, struct.unpack(f"<{count}I", data))]


def _decimal_text(value: Any, scale: int) -> str:
    if isinstance(value, decimal.Decimal):
        # Already exactly `scale` decimals (as pymysql builds it from the server's text) and not
        # a negative zero: its plain text is the normal form.
        text = format(value, "f")
        dot = text.find(".")
        if (len(text) - dot - 1 == scale if dot >= 0 else scale == 0) and not _negative_zero(text):
            return text
    number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    if number.is_zero():
        number = abs(number)  # no "-0.00"
    quantum = decimal.Decimal(1).scaleb(-scale)
    return format(number.quantize(quantum, context=_DECIMAL_CONTEXT), "f")


def _fraction(microseconds: int, precision: int) -> str:
    return f".{microseconds:06d}"[: precision + 1] if precision > 0 else ""


def _datetime_text(value: datetime.datetime, precision: int) -> str:
    # isoformat pads the year to 4 digits; its fraction is truncated to `precision` digits
    if value.tzinfo is not None:
        value = value.replace(tzinfo=None)
    if precision <= 0:
        return value.isoformat("T", "seconds")
    return value.isoformat("T", "microseconds")[: 20 + precision]


def _time_text(value: datetime.timedelta, precision: int) -> str:
    total = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if total < 0 else ""
    seconds, micros = divmod(abs(total), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{_fraction(micros, precision)}"


def zero_date_text(column: Column) -> str:
    """How a zero date of `column` is normalized: the server's own text for it."""
    if column.data_type == "date":
        return "0000-00-00"
    return "0000-00-00 00:00:00" + _fraction(0, column.datetime_precision or 0)


def _inet6_text(address: ipaddress.IPv6Address) -> str:
    mapped = address.ipv4_mapped
    return f"::ffff:{mapped}" if mapped is not None else address.compressed


# --- per-type normalizers ---------------------------------------------------------------------
#
# Every column type has one entry in NORMALIZERS_BY_TYPE with two builders: `selected` makes the
# normalizer of the value pymysql gives (its own conversion applied), `wire` the one of the
# value's bytes in the text protocol (the chunk reader's packet parser), which skips pymysql
# where the server's text already is the normal form. What depends on more than the type (a
# text column of charset binary, the scale, the fraction digits, zero dates) is decided inside
# the builders.

WireBuilder = Callable[[Column, str | None, Normalizer], Normalizer]
"""(column, encoding, via_pymysql) -> the normalizer of a value's bytes. `via_pymysql` is the
slow path (pymysql's conversion, then the `selected` normalizer): a builder falls back to it for
every value its fast path cannot vouch for."""


class TypeNormalizers(NamedTuple):
    selected: Callable[[Column], Normalizer]
    wire: WireBuilder | None = None  # None: every value via pymysql


def _text_value(column: Column) -> Normalizer:
    def normalize(value: Any) -> Any:
        if type(value) is str:
            return value
        if isinstance(value, (bytes, bytearray)):  # a charset Python does not know
            return bytes(value).decode(_python_encoding(column.charset), "replace")
        return value

    return normalize


def _python_encoding(charset: str | None) -> str:
    found = pymysql.charset.charset_by_name(charset) if charset else None
    return found.encoding if found else "utf-8"


def _same_for_every_column(normalize: Normalizer) -> Callable[..., Normalizer]:
    """A builder (`selected` or `wire`) whose normalizer needs nothing from the column."""
    return lambda *_: normalize


def _float32_wire(raw: bytes) -> float:
    return float32_shortest(float(raw))  # selected as CAST(col AS DOUBLE): see ChunkQuery


def _bit_value(value: Any) -> int:
    return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else int(value)


def _decimal_selected(column: Column) -> Normalizer:
    scale = column.numeric_scale or 0
    return lambda value: _decimal_text(value, scale)


def _decimal_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    def decimal_wire(raw: bytes) -> str:
        # The server prints exactly `scale` decimals; only a negative zero needs fixing.
        text = raw.decode("ascii")
        return via_pymysql(raw) if _negative_zero(text) else text

    return decimal_wire


def _date_selected(column: Column) -> Normalizer:
    def date_selected(value: Any) -> str:
        if isinstance(value, datetime.date):
            return value.isoformat()
        text = str(value)  # pymysql leaves invalid dates as text
        return zero_date_text(column) if text.startswith("0000-00-00") else text

    return date_selected


def _date_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    def date_wire(raw: bytes) -> str:
        text = raw.decode("ascii")
        return text if _is_plain_date(text) else via_pymysql(raw)

    return date_wire


def _datetime_normalizers(suffix: str) -> TypeNormalizers:
    """DATETIME and TIMESTAMP: the same text, TIMESTAMP's marked as UTC (see prepare_session)."""

    def selected(column: Column) -> Normalizer:
        precision = column.datetime_precision or 0

        def datetime_selected(value: Any) -> str:
            if isinstance(value, datetime.datetime):
                return _datetime_text(value, precision) + suffix
            text = str(value)
            return zero_date_text(column) if text.startswith("0000-00-00") else text

        return datetime_selected

    def wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
        def datetime_wire(raw: bytes) -> str:
            # 'YYYY-MM-DD HH:MM:SS[.f]' with exactly the column's fraction digits
            text = raw.decode("ascii")
            if _is_plain_date(text) and len(text) >= 19:
                return text[:10] + "T" + text[11:] + suffix
            return via_pymysql(raw)

        return datetime_wire

    return TypeNormalizers(selected, wire)


def _time_selected(column: Column) -> Normalizer:
    precision = column.datetime_precision or 0

    def time_selected(value: Any) -> str:
        return _time_text(value, precision) if isinstance(value, datetime.timedelta) else str(value)

    return time_selected


def _time_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    def time_wire(raw: bytes) -> str:
        # '[-]HH[H]:MM:SS[.f]'; negative times (and a possible '-00:00:00') the slow way
        return raw.decode("ascii") if raw[:1] != b"-" else via_pymysql(raw)

    return time_wire


# UUID, INET6, INET4: pymysql gives the stored bytes, or the text when the server sends text.


def _uuid_selected(column: Column) -> Normalizer:
    def uuid_selected(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)) and len(value) == 16:
            return str(uuid.UUID(bytes=bytes(value)))
        return str(uuid.UUID(_text_value(column)(value)))

    return uuid_selected


def _inet6_selected(column: Column) -> Normalizer:
    def inet6_selected(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)) and len(value) == 16:
            return _inet6_text(ipaddress.IPv6Address(bytes(value)))
        return _inet6_text(ipaddress.IPv6Address(_text_value(column)(value)))

    return inet6_selected


def _inet4_selected(column: Column) -> Normalizer:
    def inet4_selected(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)) and len(value) == 4:
            return str(ipaddress.IPv4Address(bytes(value)))
        return str(ipaddress.IPv4Address(_text_value(column)(value)))

    return inet4_selected


def _set_selected(column: Column) -> Normalizer:
    members = column.enum_values or ()

    def set_value(value: Any) -> str:
        if isinstance(value, str):
            chosen = set(value.split(",")) if value else set()
        else:
            chosen = value if isinstance(value, (set, frozenset)) else set(value)
        return ",".join([member for member in members if member in chosen])

    return set_value


def _vector_selected(value: Any) -> list[float]:
    return float_vector(_as_bytes(value)) if not isinstance(value, list) else value


def _vector_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    # MySQL sends a VECTOR's stored bytes; pymysql would decode them as ASCII (its type, 242,
    # is not one of pymysql's text types), which float bytes are not.
    return float_vector


def _characters_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    # The server sends characters in the connection's charset, and SET members in definition
    # order (the normal form).
    return lambda raw: raw.decode(encoding)


def _binary_selected(value: Any) -> str:
    return _b64(_as_bytes(value))


def _binary_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    return (lambda raw: base64.b64encode(raw).decode("ascii")) if encoding is None else via_pymysql


def _text_selected(column: Column) -> Normalizer:
    # JSON included: MariaDB's is text, and so is MySQL's SELECT of it. A text type whose
    # charset is binary holds bytes: base64, as the binary types.
    return _binary_selected if column.is_binary else _text_value(column)


def _text_wire(column: Column, encoding: str | None, via_pymysql: Normalizer) -> Normalizer:
    if column.is_binary:
        return _binary_wire(column, encoding, via_pymysql)
    return _characters_wire(column, encoding, via_pymysql)


_INTEGER = TypeNormalizers(_same_for_every_column(int), _same_for_every_column(int))

NORMALIZERS_BY_TYPE: dict[str, TypeNormalizers] = {
    **dict.fromkeys(INTEGER_TYPES, _INTEGER),  # signed or unsigned: Python's int holds both
    "year": _INTEGER,  # YEAR 0000 is 0
    "bit": TypeNormalizers(_same_for_every_column(_bit_value)),
    "decimal": TypeNormalizers(_decimal_selected, _decimal_wire),
    "float": TypeNormalizers(_same_for_every_column(float32_shortest), _same_for_every_column(_float32_wire)),
    "double": TypeNormalizers(_same_for_every_column(float), _same_for_every_column(float)),
    "real": TypeNormalizers(_same_for_every_column(float), _same_for_every_column(float)),
    "date": TypeNormalizers(_date_selected, _date_wire),
    "datetime": _datetime_normalizers(suffix=""),
    "timestamp": _datetime_normalizers(suffix="Z"),
    "time": TypeNormalizers(_time_selected, _time_wire),
    "uuid": TypeNormalizers(_uuid_selected),
    "inet6": TypeNormalizers(_inet6_selected),
    "inet4": TypeNormalizers(_inet4_selected),
    "enum": TypeNormalizers(_text_value, _characters_wire),
    "set": TypeNormalizers(_set_selected, _characters_wire),
    "vector": TypeNormalizers(_same_for_every_column(_vector_selected), _vector_wire),
    **dict.fromkeys(TEXT_TYPES, TypeNormalizers(_text_selected, _text_wire)),
    **dict.fromkeys(BINARY_TYPES, TypeNormalizers(_same_for_every_column(_binary_selected), _binary_wire)),
}
"""Column type (information_schema DATA_TYPE) -> how its values are normalized. A type not
here is normalized by `normalize_unknown` (SELECT) or via pymysql (wire)."""


def _selected(column: Column) -> Normalizer:
    """The normalizer of a non-NULL value pymysql gives for `column` from a SELECT."""
    normalizers = NORMALIZERS_BY_TYPE.get(column.data_type)
    return normalizers.selected(column) if normalizers is not None else normalize_unknown


def _null_safe(normalize: Normalizer) -> Normalizer:
    def normalize_or_none(value: Any) -> Any:
        return None if value is None else normalize(value)

    return normalize_or_none


@lru_cache(maxsize=4096)
def selected_normalizer(column: Column) -> Normalizer:
    """The SELECT-path normalizer of `column`, built once per column definition."""
    return _null_safe(_selected(column))


def _negative_zero(text: str) -> bool:
    """'-0', '-0.00': a decimal's text whose sign the normal form drops."""
    return text[0] == "-" and not text.strip("-0.")


def _is_plain_date(text: str) -> bool:
    """'YYYY-MM-DD…' that is a valid date of year 1 or later, checked cheaply: month 01-12 and
    day 01-28 (later days, year 0 and zero parts go the slow way, as pymysql would parse them)."""
    return "01" <= text[5:7] <= "12" and "01" <= text[8:10] <= "28" and text[:4] != "0000"


def wire_normalizer(column: Column, encoding: str | None, converter: Callable[[Any], Any] | None) -> Normalizer:
    """The normalizer of `column` for a non-NULL value as the text protocol carries it (bytes),
    when the column was SELECTed as `ChunkQuery` does. `encoding` and `converter` are what
    pymysql would have applied to that result field (its MySQLResult.converters entry): the
    value is normalized exactly as `selected_normalizer` would normalize pymysql's value, but
    without building the Python object where the server's text is already the normal form."""
    selected = _selected(column)

    def via_pymysql(raw: bytes) -> Any:
        value = raw.decode(encoding) if encoding is not None else raw
        return selected(converter(value) if converter is not None else value)

    if encoding is None and not column.is_binary:
        return via_pymysql  # a character column sent as binary: pymysql's own handling
    normalizers = NORMALIZERS_BY_TYPE.get(column.data_type)
    if normalizers is None or normalizers.wire is None:
        return via_pymysql
    return normalizers.wire(column, encoding, via_pymysql)


# --- column defaults ---------------------------------------------------------------------------

_CURRENT_TIME = re.compile(r"(current_timestamp|now|localtime|localtimestamp)\b(\(\d*\))?", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# the epoch as each date type's normal form (what Debezium writes for some zero dates and defaults)
EPOCH_TEXT = {"date": "1970-01-01", "datetime": "1970-01-01T00:00:00", "timestamp": "1970-01-01T00:00:00Z"}


def default_value(column: Column, default: str | None) -> tuple[bool, Any]:
    """`column`'s default as information_schema's COLUMN_DEFAULT states it on MariaDB (literals
    quoted, NULL as `NULL`, functions as called), in dblog's normal form: `(True, value)`, or
    `(False, None)` when there is none to state (NULL, an expression, a nullable column's zero
    date) or dblog cannot state it (JSON, spatial, UUID and INET types). `default` must be read in
    a UTC session, as dblog's server session reads (MariaDB states a TIMESTAMP default in the
    reading session's time zone). CURRENT_TIMESTAMP and a NOT NULL column's zero date are the
    epoch, and a quoted literal loses its outer quotes only (`'it''s'` stays `it''s`), as
    Debezium 3.6 states them (test_connect_differential.py)."""
    if default is None or default.upper() == "NULL":
        return False, None
    data_type = column.data_type
    quoted = len(default) >= 2 and default[0] == default[-1] == "'"
    text = default[1:-1] if quoted else default  # the outer quotes only: Debezium keeps `''` as it is
    if data_type in EPOCH_TEXT or data_type == "time":
        if _CURRENT_TIME.fullmatch(default):
            return (True, EPOCH_TEXT[data_type]) if data_type in EPOCH_TEXT else (False, None)
        if not quoted:
            return False, None
        if text.startswith("0000-00-00"):
            return (True, EPOCH_TEXT[data_type]) if not column.nullable else (False, None)
        precision = column.datetime_precision or 0
        if data_type == "date":
            return True, text
        if data_type == "time":
            whole, _, fraction = text.partition(".")
            return True, whole + ("." + (fraction + "0" * precision)[:precision] if precision else "")
        moment = _datetime_text(datetime.datetime.fromisoformat(text), precision)
        return True, moment + "Z" if data_type == "timestamp" else moment  # read in a UTC session
    if data_type in INTEGER_TYPES or data_type == "year":
        return (True, int(text)) if _NUMBER.fullmatch(text) and "." not in text else (False, None)
    if data_type == "bit":
        if default[:2].lower() == "b'" and default.endswith("'"):
            return True, int(default[2:-1] or "0", 2)
        return (True, int(text)) if text.isdigit() else (False, None)
    if data_type in ("decimal", "numeric"):
        return (True, _decimal_text(decimal.Decimal(text), column.numeric_scale or 0)) if _NUMBER.fullmatch(text) \
            else (False, None)
    if data_type in ("float", "double", "real"):
        if not _NUMBER.fullmatch(text):
            return False, None
        return True, float32_shortest(float(text)) if data_type == "float" else float(text)
    if column.is_binary:
        if default[:2].lower() == "x'" and default.endswith("'"):
            data = bytes.fromhex(default[2:-1])
        elif quoted:
            data = text.encode("utf-8")
        else:
            return False, None
        if data_type == "binary" and column.char_length:
            data = data.ljust(column.char_length, b"\0")
        return True, _b64(data)
    if data_type in TEXT_TYPES or data_type in ("enum", "set"):
        return (True, text) if quoted else (False, None)
    return False, None
