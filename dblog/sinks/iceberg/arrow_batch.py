"""A batch of changes as an Arrow table, typed as the Iceberg target's columns.

Handing Spark Python rows costs ~50 µs a row (pyspark verifies and pickles every value, the
JVM unpickles it); building one Arrow array per column from the normalized values costs
~1 µs a row, and the casts that parse text (decimals, dates, timestamps) run in Arrow's C++.
The table is written as a Parquet file that Spark reads as the MERGE source
(`dblog.sinks.iceberg.staging`).

Each column gets the type `spark_type` gives it (see `dblog.sinks.iceberg.types`), with the
same values `to_spark` gives (tests/sinks/iceberg/test_arrow_batch.py checks both paths agree), so Spark's
Parquet reader maps it onto the target's columns one to one: INT int32, BIGINT int64, DECIMAL
decimal128, FLOAT float32, DOUBLE float64, DATE date32, TIMESTAMP_NTZ timestamp[us],
TIMESTAMP timestamp[us, UTC], BINARY binary, STRING utf8, ARRAY<FLOAT> list<float32>.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dblog.mysql.schema import Column
from dblog.sinks.iceberg.maintenance import sql_string
from dblog.sinks.iceberg.types import FLOAT_ARRAY, spark_type

SEQ_TYPE = pa.decimal128(38, 0)


def arrow_type(column: Column) -> pa.DataType:
    return _arrow_type(spark_type(column))


def _arrow_type(spark: str) -> pa.DataType:
    if spark.startswith("DECIMAL("):
        precision, scale = spark[len("DECIMAL("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {
        "INT": pa.int32(), "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(),
        "DATE": pa.date32(), "TIMESTAMP_NTZ": pa.timestamp("us"), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
        "BINARY": pa.binary(), "STRING": pa.string(), FLOAT_ARRAY: pa.list_(pa.float32()),
    }[spark]


def arrow_array(column: Column, values: list[Any]) -> pa.Array:
    """Normalized values (`dblog.mysql.values`) of one column → an Arrow array of its type."""
    spark = spark_type(column)
    target = _arrow_type(spark)
    if spark in ("DATE", "TIMESTAMP_NTZ", "TIMESTAMP"):
        text = pa.array(values, pa.string())
        # a zero date (0000-00-00, lax sql_mode) has no Iceberg value: NULL, as to_spark
        text = pc.if_else(pc.starts_with(text, "0000"), pa.scalar(None, pa.string()), text)
        return text.cast(target)
    if spark.startswith("DECIMAL(") and column.data_type.lower() == "decimal":
        return pa.array(values, pa.string()).cast(target)  # exact decimal text, parsed in C++
    if spark == "BINARY":
        return pa.array([None if v is None else base64.b64decode(v) for v in values], target)
    if spark == "STRING":
        try:
            return pa.array(values, target)
        except (pa.ArrowTypeError, pa.ArrowInvalid):  # a JSON value kept as a structure
            return pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in values], target)
    return pa.array(values, target)


def seq_array(sequences: list[int | None]) -> pa.Array:
    return pa.array(sequences, SEQ_TYPE)


@dataclass(frozen=True)
class KeyBound:
    """The range a key column's values span in a batch, as Spark SQL literals."""

    column: str
    low: str
    high: str


Extremes = dict[str, tuple[Any, Any]]  # key column -> (min, max), as Python values


def key_bounds(key_columns: Sequence[Column], table: pa.Table) -> list[KeyBound]:
    """Each key column's [min, max] in `table`, for the types whose order Arrow and Spark agree
    on (numbers, dates, and strings, which both compare byte by byte in UTF-8); other key
    types get no bound."""
    return bounds_of(key_columns, key_extremes(key_columns, table))


def key_extremes(key_columns: Sequence[Column], table: pa.Table) -> Extremes:
    """Each boundable key column's (min, max) in `table` (see `key_bounds`)."""
    extremes: Extremes = {}
    for column in key_columns:
        if _literal(column) is None or table.num_rows == 0:
            continue
        found = pc.min_max(table.column(column.name))
        low, high = found["min"].as_py(), found["max"].as_py()
        if low is not None and high is not None:
            extremes[column.name] = (low, high)
    return extremes


def merge_extremes(parts: Sequence[Extremes]) -> Extremes:
    """The extremes of several tables together (those of no rows left out; a column missing
    from one has no bound)."""
    parts = [part for part in parts if part]
    if not parts:
        return {}
    names = set.intersection(*(set(part) for part in parts))
    return {name: (min(part[name][0] for part in parts), max(part[name][1] for part in parts)) for name in names}


def bounds_of(key_columns: Sequence[Column], extremes: Extremes) -> list[KeyBound]:
    bounds = []
    for column in key_columns:
        literal = _literal(column)
        if literal is not None and column.name in extremes:
            low, high = extremes[column.name]
            bounds.append(KeyBound(column.name, literal(low), literal(high)))
    return bounds


def _literal(column: Column):
    spark = spark_type(column)
    return _LITERALS.get(spark) or (_decimal_literal(spark) if spark.startswith("DECIMAL(") else None)


def _decimal_literal(spark: str):
    return lambda value: f"CAST('{value}' AS {spark})"


_LITERALS = {
    "INT": str,
    "BIGINT": str,
    "STRING": sql_string,
    "DATE": lambda value: f"DATE'{value.isoformat()}'",
    "TIMESTAMP_NTZ": lambda value: f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'",
}
