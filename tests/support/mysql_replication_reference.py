"""mysql-replication's decoded values brought into dblog's normal form: the reference path
`tests/mysql/test_binlog_differential.py` compares dblog's decoder against.

mysql-replication 1.0.17 on MariaDB 10.11 decodes the row image into Python objects with quirks
this undoes: TIMESTAMP as a naive UTC datetime (the zero TIMESTAMP as 1970-01-01 00:00:00); zero
DATE/DATETIME and the empty SET as None, told apart from NULL only by the row's `none_sources`;
BINARY(n), UUID, INET6 and INET4 without their trailing 0x00 bytes (an all-zero value even as the
str ''); a negative TIME with a fraction has its fraction mirrored (-0.1 s as -0.9 s); YEAR 0000
as 1900; BIT as a '0101' string; SET as a Python set. Test code only: dblog streams with its
own decoder.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import uuid
from functools import lru_cache
from typing import Any, Callable

from dblog.mysql.schema import Column
from dblog.mysql.values import (
    _b64,
    _datetime_text,
    _inet6_text,
    _time_text,
    normalize_unknown,
    selected_normalizer,
    zero_date_text,
)

__all__ = ["normalize_binlog"]

# pymysqlreplication.constants.NONE_SOURCE values
_NONE_EMPTY_SET = "empty set"
_NONE_OUT_OF_RANGE = ("out of date range", "out of datetime range", "out of datetime2 range")
_EPOCH = datetime.datetime(1970, 1, 1)


def normalize_binlog(column: Column, value: Any, none_source: str | None = None) -> Any:
    """Normalize a value mysql-replication decoded for `column`; `none_source` is the row's
    `none_sources[name]` when `value` is None."""
    if value is None:
        if none_source == _NONE_EMPTY_SET:
            return ""
        if none_source in _NONE_OUT_OF_RANGE:
            return zero_date_text(column)
        return None
    return _binlog_normalizer(column)(value)


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def _padded(value: Any, length: int) -> bytes:
    data = _as_bytes(value)
    return data + b"\x00" * (length - len(data)) if len(data) < length else data


@lru_cache(maxsize=4096)
def _binlog_normalizer(column: Column) -> Callable[[Any], Any]:
    data_type = column.data_type
    precision = column.datetime_precision or 0
    selected = selected_normalizer(column)
    if data_type == "year":
        return lambda value: 0 if value == 1900 else int(value)
    if data_type == "bit":
        return lambda value: int(value, 2) if isinstance(value, str) else selected(value)
    if data_type in ("datetime", "timestamp"):
        suffix = "Z" if data_type == "timestamp" else ""

        def datetime_binlog(value: Any) -> str:
            if type(value) is datetime.datetime:
                if suffix and value == _EPOCH:  # the zero TIMESTAMP is stored as epoch 0
                    return zero_date_text(column)
                return _datetime_text(value, precision) + suffix
            return selected(value)

        return datetime_binlog
    if data_type == "time":
        def time_binlog(value: Any) -> str:
            if isinstance(value, datetime.timedelta) and value < datetime.timedelta(0):
                magnitude = -value  # the fraction of a negative TIME arrives mirrored
                whole = datetime.timedelta(days=magnitude.days, seconds=magnitude.seconds)
                if magnitude.microseconds:
                    value = -(whole + datetime.timedelta(microseconds=1_000_000 - magnitude.microseconds))
            return _time_text(value, precision) if isinstance(value, datetime.timedelta) else str(value)

        return time_binlog
    if data_type == "uuid":
        return lambda value: str(uuid.UUID(bytes=_padded(value, 16)))
    if data_type == "inet6":
        return lambda value: _inet6_text(ipaddress.IPv6Address(_padded(value, 16)))
    if data_type == "inet4":
        return lambda value: str(ipaddress.IPv4Address(_padded(value, 4)))
    if data_type == "set":
        return lambda value: selected(value if isinstance(value, str) else ",".join(value))
    if column.is_binary:
        length = column.char_length if data_type == "binary" else None
        return lambda value: _b64(_padded(value, length) if length else _as_bytes(value))
    if data_type == "json":
        return lambda value: value if type(value) is str else (
            json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, int, float, bool)) else normalize_unknown(value))
    return lambda value: selected(value) if value is not None else None
