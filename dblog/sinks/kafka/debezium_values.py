"""Debezium's value encodings: each column's Connect schema and its values as Debezium's MySQL
connector writes them, with its switches (`time.precision.mode`, `decimal.handling.mode`,
`bigint.unsigned.handling.mode`, `binary.handling.mode`) and their defaults.

The engine's rows are in dblog's one normal form (`dblog.mysql.values`: the same for chunk rows
and binlog rows); this module turns a normal-form value into Debezium's, so a snapshot row and a
streamed row of the same stored value come out identical, as they do in the normal form. Each
encoding was checked against Debezium 3.6 itself on MariaDB 10.11
(tests/sinks/kafka/test_connect_differential.py; a snapshot row against the streamed one:
test_connect_snapshot_differential.py):

| column                      | schema (name, version 1 where named)                       | value                         |
|-----------------------------|------------------------------------------------------------|-------------------------------|
| TINYINT, TINYINT UNSIGNED   | int16 (TINYINT(1) too)                                     | int                           |
| SMALLINT / UNSIGNED         | int16 / int32                                              | int                           |
| MEDIUMINT, INT / UNSIGNED   | int32 / int64                                              | int                           |
| BIGINT                      | int64                                                      | int                           |
| BIGINT UNSIGNED             | long: int64; precise: bytes Decimal scale 0                | long: wraps past 2^63-1 (-1)  |
| DECIMAL(p,s)                | precise: bytes Decimal {scale, connect.decimal.precision}; double: double; string: string |       |
| FLOAT / DOUBLE, REAL        | float / double                                             | float                         |
| DATE                        | int32 io.debezium.time.Date (connect: ...connect.data.Date; isostring: string IsoDate) | days |
| DATETIME(0-3) / (4-6)       | int64 io.debezium.time.Timestamp / MicroTimestamp (connect: ...connect.data.Timestamp, ms; isostring: string IsoTimestamp) | epoch ms / µs |
| TIMESTAMP(p)                | string io.debezium.time.ZonedTimestamp                     | "…T…[.p digits]Z" (UTC)       |
| TIME(p)                     | int64 io.debezium.time.MicroTime (adaptive p<=3 and connect: int32 ms, io.debezium.time.Time / ...connect.data.Time; isostring: string IsoTime) | signed µs / ms (connect, isostring: null unless 0 <= t < 24 h) |
| YEAR                        | int32 io.debezium.time.Year                                | int (YEAR 0000: 1900, as Debezium's binlog reader) |
| CHAR…TEXT, JSON on MariaDB  | string (MySQL's JSON type: io.debezium.data.Json)          | str                           |
| BINARY, VARBINARY, BLOB     | bytes (base64, base64-url-safe, hex: string)               | base64 text in JSON / text    |
| ENUM / SET                  | string io.debezium.data.Enum / EnumSet {allowed}           | str                           |
| BIT(1) / BIT(n>1)           | boolean / bytes io.debezium.data.Bits {length: n}          | bool / ceil(n/8) bytes, little-endian |
| GEOMETRY… / POINT           | struct io.debezium.data.geometry.Geometry {wkb, srid} / Point {x, y, wkb, srid} |        |
| UUID, INET4, INET6          | string (Debezium's MySQL connector cannot read them)       | str                           |
| VECTOR (MySQL 9)            | array of float io.debezium.data.FloatVector                | list of float (float32s)      |

A zero date (DATE, DATETIME, TIMESTAMP `0000-00-00…`) is what Debezium writes for it: the column's
default where it has one, else the epoch in a NOT NULL column, else null (the Kafka sink gives
`RowEncoder` those values, `zero_dates`, from the server's column defaults). isostring's texts
end in `Z` and drop a fraction's trailing zeros, as Java's ISO formatters do (`2024-01-01Z`,
`2024-01-01T00:00:00.1Z`, `12:00:00.5Z`). Debezium 3.6 refuses
`time.precision.mode=adaptive` for MySQL ("no longer supported"); dblog still writes it as
Debezium's documentation describes it (older Debezium releases), checked by unit tests only.
JSON carries bytes as base64 text, which is also dblog's normal form of binary
values, so `bytes` needs no work per value.
"""

from __future__ import annotations

import base64
import datetime
import struct as binary
from binascii import b2a_base64
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple

from dblog.mysql.schema import BINARY_TYPES, Column
from dblog.sinks.kafka.connect_schema import FLOAT_VECTOR

TimePrecisionMode = Literal["adaptive_time_microseconds", "adaptive", "connect", "isostring"]
DecimalHandlingMode = Literal["precise", "double", "string"]
BigintUnsignedHandlingMode = Literal["long", "precise"]
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]

Schema = dict[str, Any]
Encode = Callable[[Any], Any]

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = _EPOCH.date()
_GEOMETRY_TYPES = frozenset({"geometry", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                             "geometrycollection"})


@dataclass(frozen=True)
class ValueModes:
    """Debezium's value switches, with Debezium's defaults."""

    time_precision_mode: TimePrecisionMode = "adaptive_time_microseconds"
    decimal_handling_mode: DecimalHandlingMode = "precise"
    bigint_unsigned_handling_mode: BigintUnsignedHandlingMode = "long"
    binary_handling_mode: BinaryHandlingMode = "bytes"


class ColumnEncoding(NamedTuple):
    schema: Schema  # the Connect schema, without `field` and `optional`
    encode: Encode | None  # normal form (not None) -> Debezium's value; None: the same value


def _named(kind: str, name: str, parameters: dict[str, str] | None = None) -> Schema:
    schema: Schema = {"type": kind, "name": name, "version": 1}
    if parameters is not None:
        schema["parameters"] = parameters
    return schema


_INTEGERS = {  # (signed, unsigned) Connect types
    "tinyint": ("int16", "int16"),
    "smallint": ("int16", "int32"),
    "mediumint": ("int32", "int32"),
    "int": ("int32", "int64"),
    "integer": ("int32", "int64"),
    "bigint": ("int64", "int64"),
}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"


# --- value conversions (normal form -> Debezium's) -------------------------------------------


def _unscaled_bytes(unscaled: int) -> str:
    """Java's BigInteger.toByteArray() (minimal big-endian two's complement), base64 as JSON
    carries bytes."""
    size = (unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()) // 8 + 1
    return b2a_base64(unscaled.to_bytes(size, "big", signed=True), newline=False).decode("ascii")


def _decimal_precise(text: str) -> str:
    return _unscaled_bytes(int(text.replace(".", "")))  # exactly `scale` decimals: the unscaled value


def _unsigned_long(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _days(text: str) -> int | None:
    try:
        return (datetime.date.fromisoformat(text) - _EPOCH_DATE).days
    except ValueError:  # a zero or invalid date
        return None


_EPOCH_ORDINAL = _EPOCH.toordinal()
_from_iso = datetime.datetime.fromisoformat


def _micros(text: str) -> int | None:
    """'YYYY-MM-DDTHH:MM:SS[.f]' -> microseconds since the epoch (None for zero dates)."""
    try:
        moment = _from_iso(text)
    except ValueError:
        return None
    # by the fields: 40% cheaper than subtracting the epoch and dividing the timedelta
    return ((((moment.toordinal() - _EPOCH_ORDINAL) * 24 + moment.hour) * 60 + moment.minute) * 60
            + moment.second) * 1_000_000 + moment.microsecond


def _millis(text: str) -> int | None:
    micros = _micros(text)
    return None if micros is None else micros // 1000


def _time_micros(text: str) -> int:
    """'[-]HH:MM:SS[.f]' (hours up to 838) -> signed microseconds."""
    negative = text.startswith("-")
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, fraction = seconds.partition(".")
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + int((fraction + "000000")[:6])
    return -micros if negative else micros


def _zoned(text: str) -> str | None:
    return None if text.startswith("0000-00-00") else text  # the normal form is Debezium's "…Z" text


def _bits(length: int) -> Encode:
    size = (length + 7) // 8
    return lambda value: base64.b64encode(int(value).to_bytes(size, "little")).decode("ascii")


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _b64_to_url_safe(value: str) -> str:
    return value.replace("+", "-").replace("/", "_")


def _geometry(value: str) -> dict:
    stored = base64.b64decode(value)  # MySQL's internal format: 4-byte SRID (little-endian), then WKB
    srid = int.from_bytes(stored[:4], "little")
    return {"wkb": base64.b64encode(stored[4:]).decode("ascii"), "srid": srid or None}


def _point(value: str) -> dict:
    stored = base64.b64decode(value)
    srid = int.from_bytes(stored[:4], "little")
    wkb = stored[4:]
    order = "<" if wkb[0] == 1 else ">"
    x, y = binary.unpack_from(order + "dd", wkb, 5)
    return {"x": x, "y": y, "wkb": base64.b64encode(wkb).decode("ascii"), "srid": srid or None}


# --- per column --------------------------------------------------------------------------------


def _temporal(column: Column, modes: ValueModes) -> ColumnEncoding:
    data_type, mode = column.data_type, modes.time_precision_mode
    precision = column.datetime_precision or 0
    if data_type == "timestamp":
        return ColumnEncoding({"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}, _zoned)
    if data_type == "date":
        if mode == "isostring":
            return ColumnEncoding(_named("string", "io.debezium.time.IsoDate"), _iso_date)
        name = "org.apache.kafka.connect.data.Date" if mode == "connect" else "io.debezium.time.Date"
        return ColumnEncoding(_named("int32", name), _days)
    if data_type == "datetime":
        if mode == "isostring":
            return ColumnEncoding(_named("string", "io.debezium.time.IsoTimestamp"), _iso_timestamp)
        if mode == "connect":
            return ColumnEncoding(_named("int64", "org.apache.kafka.connect.data.Timestamp"), _millis)
        if precision <= 3:
            return ColumnEncoding(_named("int64", "io.debezium.time.Timestamp"), _millis)
        return ColumnEncoding(_named("int64", "io.debezium.time.MicroTimestamp"), _micros)
    # time
    if mode == "isostring":
        return ColumnEncoding(_named("string", "io.debezium.time.IsoTime"), _iso_time)
    if mode == "connect":
        return ColumnEncoding(_named("int32", "org.apache.kafka.connect.data.Time"), _time_of_day_millis)
    if mode == "adaptive" and precision <= 3:
        return ColumnEncoding(_named("int32", "io.debezium.time.Time"), _time_millis)
    return ColumnEncoding(_named("int64", "io.debezium.time.MicroTime"), _time_micros)


def _time_millis(text: str) -> int:
    """adaptive, TIME(0-3): signed milliseconds."""
    micros = _time_micros(text)
    return -(-micros // 1000) if micros < 0 else micros // 1000


def _time_of_day_millis(text: str) -> int | None:
    """connect: Connect's Time is a time of day; Debezium writes null for a negative TIME or one
    of 24 hours or more."""
    micros = _time_micros(text)
    return micros // 1000 if 0 <= micros < _DAY_MICROS else None


def _iso_fraction(text: str) -> str:
    """Java's ISO formatters: the fraction without its trailing zeros (none when zero), then Z."""
    whole, dot, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else whole + "Z"


def _iso_date(text: str) -> str | None:
    return None if _days(text) is None else text + "Z"


def _iso_timestamp(text: str) -> str | None:
    return None if _micros(text) is None else _iso_fraction(text)


def _iso_time(text: str) -> str | None:
    micros = _time_micros(text)
    return _iso_fraction(text) if 0 <= micros < _DAY_MICROS else None


_DAY_MICROS = 86_400_000_000


def column_encoding(column: Column, modes: ValueModes) -> ColumnEncoding:
    """How Debezium writes `column`: its schema and the conversion of dblog's normal form."""
    data_type = column.data_type
    if data_type in _INTEGERS:
        signed, unsigned = _INTEGERS[data_type]
        if data_type == "bigint" and column.unsigned:
            if modes.bigint_unsigned_handling_mode == "precise":
                return ColumnEncoding(_named("bytes", _DECIMAL, {"scale": "0", "connect.decimal.precision": "20"}),
                                      _unscaled_bytes)
            return ColumnEncoding({"type": "int64"}, _unsigned_long)
        return ColumnEncoding({"type": unsigned if column.unsigned else signed}, None)
    if data_type == "decimal":
        mode = modes.decimal_handling_mode
        if mode == "string":
            return ColumnEncoding({"type": "string"}, None)
        if mode == "double":
            return ColumnEncoding({"type": "double"}, float)
        parameters = {"scale": str(column.numeric_scale or 0)}
        if column.numeric_precision is not None:
            parameters["connect.decimal.precision"] = str(column.numeric_precision)
        return ColumnEncoding(_named("bytes", _DECIMAL, parameters), _decimal_precise)
    if data_type == "float":
        return ColumnEncoding({"type": "float"}, None)
    if data_type in ("double", "real"):
        return ColumnEncoding({"type": "double"}, None)
    if data_type in ("date", "datetime", "timestamp", "time"):
        return _temporal(column, modes)
    if data_type == "year":
        return ColumnEncoding(_named("int32", "io.debezium.time.Year"), _year)
    if data_type == "bit":
        length = column.numeric_precision or 1
        if length == 1:
            return ColumnEncoding({"type": "boolean"}, bool)
        return ColumnEncoding(_named("bytes", "io.debezium.data.Bits", {"length": str(length)}), _bits(length))
    if data_type in ("enum", "set"):
        name = "io.debezium.data.Enum" if data_type == "enum" else "io.debezium.data.EnumSet"
        return ColumnEncoding(_named("string", name, {"allowed": ",".join(column.enum_values or ())}), None)
    if data_type == "json":  # MySQL's JSON type (MariaDB's JSON is LONGTEXT: a plain string)
        return ColumnEncoding(_named("string", "io.debezium.data.Json"), None)
    if data_type == "vector":  # the normal form is FloatVector's value: floats
        return ColumnEncoding(dict(FLOAT_VECTOR), None)
    if data_type == "point":
        return ColumnEncoding(_POINT, _point)
    if data_type in _GEOMETRY_TYPES:
        return ColumnEncoding(_GEOMETRY, _geometry)
    if column.is_binary or data_type in BINARY_TYPES:
        mode = modes.binary_handling_mode
        if mode == "bytes":
            return ColumnEncoding({"type": "bytes"}, None)
        if mode == "hex":
            return ColumnEncoding({"type": "string"}, _b64_to_hex)
        if mode == "base64-url-safe":
            return ColumnEncoding({"type": "string"}, _b64_to_url_safe)
        return ColumnEncoding({"type": "string"}, None)
    return ColumnEncoding({"type": "string"}, None)  # text, uuid, inet4/6, and any type dblog does not know


def _year(value: int) -> int:
    return 1900 if value == 0 else value  # Debezium's binlog reader reads YEAR 0000 as 1900


_GEOMETRY: Schema = {
    "type": "struct",
    "fields": [{"type": "bytes", "optional": False, "field": "wkb"},
               {"type": "int32", "optional": True, "field": "srid"}],
    "name": "io.debezium.data.geometry.Geometry", "version": 1, "doc": "Geometry",
}
_POINT: Schema = {
    "type": "struct",
    "fields": [{"type": "double", "optional": False, "field": "x"}, {"type": "double", "optional": False, "field": "y"},
               {"type": "bytes", "optional": True, "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}],
    "name": "io.debezium.data.geometry.Point", "version": 1, "doc": "Geometry (POINT)",
}


class RowEncoder:
    """The conversion of one table's rows (and keys): only the columns whose values change.

    `encode` and `pair` are compiled for the table (Python source generated from its
    converting columns, as the binlog's row readers are): in a burst into Kafka a loop over
    the columns, a call per value and a zero-date wrapper cost as much as the conversions
    themselves (py-spy: RowEncoder was 15% of the engine's thread, half of it overhead)."""

    def __init__(self, columns: list[Column], modes: ValueModes, zero_dates: dict[str, Any] | None = None) -> None:
        """`zero_dates`: by column, what is written for a zero date (`0000-00-00…`) instead of null."""
        self.encodings = {column.name: column_encoding(column, modes) for column in columns}
        converting = [(name, encoding.encode, (zero_dates or {}).get(name, None), bool(zero_dates and name in zero_dates))
                      for name, encoding in self.encodings.items() if encoding.encode is not None]
        # encode(row) -> the row converted; pair(before, after) -> `(encode(before), encode(after))`,
        # encoding a value an update left as it was once (an encoding is a function of the value alone)
        self.encode, self.pair = _compiled_encoder(converting) if converting else (_unchanged, _unchanged_pair)

    def __call__(self, row: dict | None) -> dict | None:
        return self.encode(row)


def _unchanged(row: dict | None) -> dict | None:
    return row


def _unchanged_pair(before: dict | None, after: dict | None) -> tuple[dict | None, dict | None]:
    return before, after


_HIGH_BIT = 1 << 63


def _compiled_encoder(converting: list[tuple[str, Encode, Any, bool]]) -> tuple[Callable, Callable]:
    """`encode(row)` and `pair(before, after)` for these (column, encode, zero-date value, has
    one) columns, as generated Python source. `_unsigned_long` is written inline: it changes
    only values past 2^63."""
    namespace: dict[str, Any] = {}
    one = ["def encode(row):", "    if row is None:", "        return None", "    row = row.copy()"]
    two = ["def pair(before, after):", "    if before is None or after is None:",
           "        return encode(before), encode(after)", "    new_before, new_after = before.copy(), after.copy()"]

    def converted(target: str, value: str, index: int, zero: bool) -> list[str]:
        if not zero:
            return [f"{target} = e{index}({value})"]
        return [f"x = e{index}({value})", f"{target} = z{index} if x is None else x"]

    for index, (name, encode, zero_value, zero) in enumerate(converting):
        column = repr(name)
        namespace[f"e{index}"], namespace[f"z{index}"] = encode, zero_value
        if encode is _unsigned_long:
            one += [f"    v = row.get({column})", f"    if v is not None and v >= {_HIGH_BIT}:",
                    f"        row[{column}] = v - {1 << 64}"]
            two += [f"    v, o = after.get({column}), before.get({column})",
                    f"    if v is not None and v >= {_HIGH_BIT}:", f"        new_after[{column}] = v - {1 << 64}",
                    f"    if o is not None and o >= {_HIGH_BIT}:", f"        new_before[{column}] = o - {1 << 64}"]
            continue
        one += [f"    v = row.get({column})", "    if v is not None:",
                *("        " + line for line in converted(f"row[{column}]", "v", index, zero))]
        two += [f"    v, o = after.get({column}), before.get({column})", "    if v is not None:",
                *("        " + line for line in converted(f"new_after[{column}] = y", "v", index, zero)),
                "        if o is not None:",
                "            if o == v and type(o) is type(v):",
                f"                new_before[{column}] = y",
                "            else:",
                *("                " + line for line in converted(f"new_before[{column}]", "o", index, zero)),
                "    elif o is not None:",
                *("        " + line for line in converted(f"new_before[{column}]", "o", index, zero))]
    one.append("    return row")
    two.append("    return new_before, new_after")
    exec(compile("\n".join(one + two), f"<row encoder {','.join(name for name, *_ in converting)[:60]}>", "exec"),
         namespace)
    return namespace["encode"], namespace["pair"]
