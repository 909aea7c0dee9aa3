"""How a MariaDB/MySQL column becomes an Iceberg column, and its values Spark values.

dblog carries every value in one normalized, JSON-safe form (`dblog.mysql.values`). A Spark sink needs
typed columns instead, so this module maps each source column to a Spark SQL type that holds
every value the source can hold (no overflow: an unsigned BIGINT needs DECIMAL(20,0)), converts
normalized values to the Python objects Spark expects for that type (`to_spark`), and back
(`from_spark`), so that an Iceberg table can be compared with `SELECT *` of its source.

| MariaDB / MySQL                          | Iceberg (Spark SQL)                       |
|------------------------------------------|-------------------------------------------|
| TINYINT, SMALLINT, MEDIUMINT, INT        | int (INT UNSIGNED: bigint)                |
| BIGINT                                   | bigint (BIGINT UNSIGNED: decimal(20,0))   |
| DECIMAL(p,s)                             | decimal(p,s); p > 38: string (exact text) |
| FLOAT / DOUBLE                           | float / double                            |
| DATE                                     | date                                      |
| DATETIME(p)                              | timestamp_ntz (microseconds)              |
| TIMESTAMP(p)                             | timestamp (UTC instant)                   |
| TIME(p)                                  | string "[-]HH:MM:SS[.f]" (may exceed 24 h)|
| YEAR                                     | int                                       |
| CHAR, VARCHAR, TEXT, JSON                | string                                    |
| ENUM, SET                                | string (member / comma-joined members)    |
| UUID, INET4, INET6                       | string (canonical text)                   |
| BINARY, VARBINARY, BLOB, GEOMETRY        | binary                                    |
| BIT(n)                                   | bigint (n = 64: decimal(20,0))            |
| VECTOR (MySQL 9)                         | array<float>                              |

Zero dates (`0000-00-00`, allowed by a lax `sql_mode`) have no Iceberg value and become NULL.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from typing import Any, Callable

from dblog.mysql.schema import BINARY_TYPES, Column
from dblog.mysql.values import float32_shortest

_SMALL_INTEGERS = {"tinyint", "smallint", "mediumint"}
FLOAT_ARRAY = "ARRAY<FLOAT>"


def spark_type(column: Column) -> str:
    """The Spark SQL type of a source column (see the table above)."""
    kind = column.data_type.lower()
    if kind in _SMALL_INTEGERS or kind == "year":
        return "INT"
    if kind in ("int", "integer"):
        return "BIGINT" if column.unsigned else "INT"
    if kind == "bigint":
        return "DECIMAL(20,0)" if column.unsigned else "BIGINT"
    if kind == "decimal":
        precision, scale = column.numeric_precision or 10, column.numeric_scale or 0
        return f"DECIMAL({precision},{scale})" if precision <= 38 else "STRING"
    if kind == "float":
        return "FLOAT"
    if kind == "double":
        return "DOUBLE"
    if kind == "date":
        return "DATE"
    if kind == "datetime":
        return "TIMESTAMP_NTZ"
    if kind == "timestamp":
        return "TIMESTAMP"
    if kind == "bit":
        return "DECIMAL(20,0)" if (column.numeric_precision or 1) > 63 else "BIGINT"
    if kind == "vector":
        return FLOAT_ARRAY
    if kind in BINARY_TYPES or column.is_binary:
        return "BINARY"
    return "STRING"


# Widenings Iceberg allows in place (ALTER COLUMN … TYPE): a source type change that maps to
# one of these keeps the target table; any other is an incompatible schema change.
def can_widen(old: str, new: str) -> bool:
    if old == new:
        return True
    if (old, new) in {("INT", "BIGINT"), ("FLOAT", "DOUBLE")}:
        return True
    if old.startswith("DECIMAL(") and new.startswith("DECIMAL("):
        (p1, s1), (p2, s2) = _decimal_parts(old), _decimal_parts(new)
        return s1 == s2 and p2 >= p1
    return False


def _decimal_parts(spark: str) -> tuple[int, int]:
    precision, scale = spark[len("DECIMAL("):-1].split(",")
    return int(precision), int(scale)


def _is_zero_date(value: str) -> bool:
    return value.startswith("0000")


def to_spark(column: Column) -> Callable[[Any], Any]:
    """Normalized value → the Python object Spark takes for `spark_type(column)`."""
    target = spark_type(column)
    if target.startswith("DECIMAL"):
        return lambda v: None if v is None else decimal.Decimal(str(v))
    if target == "DATE":
        return lambda v: None if v is None or _is_zero_date(v) else datetime.date.fromisoformat(v)
    if target == "TIMESTAMP_NTZ":
        return lambda v: None if v is None or _is_zero_date(v) else datetime.datetime.fromisoformat(v)
    if target == "TIMESTAMP":
        def timestamp(v):
            if v is None or _is_zero_date(v):
                return None
            return datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
        return timestamp
    if target == "BINARY":
        return lambda v: None if v is None else bytearray(base64.b64decode(v))
    if target in ("FLOAT", "DOUBLE"):
        return lambda v: None if v is None else float(v)
    if target == FLOAT_ARRAY:
        return lambda v: None if v is None else [float(item) for item in v]
    if target == "STRING":
        return lambda v: None if v is None else (v if isinstance(v, str) else json.dumps(v))
    return lambda v: v


def from_spark(column: Column) -> Callable[[Any], Any]:
    """The inverse of `to_spark`: a value read back from Iceberg → dblog's normalized form."""
    target = spark_type(column)
    if target.startswith("DECIMAL"):
        if column.data_type.lower() == "decimal":
            scale = column.numeric_scale or 0
            return lambda v: None if v is None else f"{v:.{scale}f}"
        return lambda v: None if v is None else int(v)
    if target == "DATE":
        return lambda v: None if v is None else v.isoformat()
    if target == "TIMESTAMP_NTZ":
        digits = column.datetime_precision or 0
        return lambda v: None if v is None else _iso(v, digits)
    if target == "TIMESTAMP":
        digits = column.datetime_precision or 0

        def timestamp(v):
            if v is None:
                return None
            # pyspark returns TIMESTAMP as a naive datetime in the process's local time zone.
            return _iso(v.astimezone(datetime.timezone.utc).replace(tzinfo=None), digits) + "Z"
        return timestamp
    if target == "BINARY":
        return lambda v: None if v is None else base64.b64encode(bytes(v)).decode()
    if target == "FLOAT":
        return lambda v: None if v is None else float32_shortest(v)
    if target == FLOAT_ARRAY:
        return lambda v: None if v is None else [float32_shortest(item) for item in v]
    return lambda v: v


def _iso(value: datetime.datetime, digits: int) -> str:
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    return text + ("." + f"{value.microsecond:06d}"[:digits] if digits else "")
