"""The Arrow path into Spark gives every value the Spark value the row path (`to_spark`) gives,
and key bounds order values the way Spark does."""

from __future__ import annotations

import base64
import datetime
import struct
from decimal import Context, Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.mysql.schema import Column
from dblog.sinks.iceberg.arrow_batch import arrow_array, arrow_type, key_bounds
from dblog.sinks.iceberg.types import from_spark, spark_type, to_spark

DATES = st.dates(min_value=datetime.date(1, 1, 1), max_value=datetime.date(9999, 12, 31))
DATETIMES = st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59, 59))


def _iso(value: datetime.datetime, digits: int) -> str:
    text = value.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0")
    return text + ("." + f"{value.microsecond:06d}"[:digits] if digits else "")


def _decimal_text(precision: int, scale: int):
    digits = st.integers(-(10**precision - 1), 10**precision - 1)
    exact = Context(prec=100)  # the default context would round to 28 digits
    return digits.map(lambda n: f"{Decimal(n).scaleb(-scale, exact):.{scale}f}")


CASES = {
    "int": (Column("c", "int", "int"), st.integers(-(2**31), 2**31 - 1)),
    "int unsigned": (Column("c", "int", "int unsigned", unsigned=True), st.integers(0, 2**32 - 1)),
    "bigint": (Column("c", "bigint", "bigint"), st.integers(-(2**63), 2**63 - 1)),
    "bigint unsigned": (Column("c", "bigint", "bigint unsigned", unsigned=True), st.integers(0, 2**64 - 1)),
    "bit(64)": (Column("c", "bit", "bit(64)", numeric_precision=64), st.integers(0, 2**64 - 1)),
    "decimal(12,2)": (Column("c", "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
                      _decimal_text(12, 2)),
    "decimal(38,10)": (Column("c", "decimal", "decimal(38,10)", numeric_precision=38, numeric_scale=10),
                       _decimal_text(38, 10)),
    "decimal(65,30)": (Column("c", "decimal", "decimal(65,30)", numeric_precision=65, numeric_scale=30),
                       _decimal_text(65, 30)),
    "double": (Column("c", "double", "double"), st.floats(allow_nan=False, allow_infinity=False)),
    "date": (Column("c", "date", "date"), st.one_of(DATES.map(lambda d: d.isoformat().rjust(10, "0")),
                                                     st.just("0000-00-00"))),
    "datetime(6)": (Column("c", "datetime", "datetime(6)", datetime_precision=6),
                    st.one_of(DATETIMES.map(lambda d: _iso(d, 6)), st.just("0000-00-00T00:00:00.000000"))),
    "datetime(0)": (Column("c", "datetime", "datetime", datetime_precision=0), DATETIMES.map(lambda d: _iso(d, 0))),
    "timestamp(3)": (Column("c", "timestamp", "timestamp(3)", datetime_precision=3),
                     st.datetimes(min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2038, 1, 1))
                     .map(lambda d: _iso(d, 3) + "Z")),
    "varbinary": (Column("c", "varbinary", "varbinary(20)", char_length=20),
                  st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode())),
    "varchar": (Column("c", "varchar", "varchar(20)", char_length=20), st.text(max_size=20)),
    "json": (Column("c", "json", "json"), st.one_of(st.text(max_size=10), st.dictionaries(st.text(max_size=3),
                                                                                             st.integers()))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_arrow_values_equal_the_row_path(case):
    column, values = CASES[case]

    @given(st.lists(st.one_of(st.none(), values), max_size=20))
    def check(batch):
        array = arrow_array(column, batch)
        assert array.type == arrow_type(column)
        expected = [to_spark(column)(v) for v in batch]
        got = array.to_pylist()
        if column.data_type == "double":
            assert got == expected
        else:
            assert got == expected, (batch, got, expected)

    check()


def test_float_values_are_float32():
    column = Column("c", "float", "float")
    assert arrow_array(column, [0.1, None]).to_pylist() == [struct.unpack("<f", struct.pack("<f", 0.1))[0], None]


@given(st.lists(st.text(), min_size=1))
def test_string_bounds_follow_utf8_byte_order(values):
    table = pa.table({"k": pa.array(values, pa.string())})
    [bound] = key_bounds([Column("k", "varchar", "varchar(10)")], table)
    by_bytes = sorted(values, key=lambda v: v.encode("utf-8", "surrogatepass"))
    low, high = by_bytes[0], by_bytes[-1]
    assert bound.low == "'" + low.replace("\\", "\\\\").replace("'", "\\'") + "'"
    assert bound.high == "'" + high.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_bounds_of_numbers_dates_and_timestamps():
    columns = [Column("a", "bigint", "bigint unsigned", unsigned=True), Column("b", "date", "date"),
               Column("c", "datetime", "datetime(6)", datetime_precision=6), Column("d", "double", "double")]
    table = pa.table({
        "a": arrow_array(columns[0], [2**64 - 1, 7]),
        "b": arrow_array(columns[1], ["2026-01-02", "1999-12-31"]),
        "c": arrow_array(columns[2], ["2026-01-01T00:00:00.000001", "2026-01-01T00:00:00.000000"]),
        "d": arrow_array(columns[3], [1.0, 2.0]),
    })
    bounds = {b.column: (b.low, b.high) for b in key_bounds(columns, table)}
    assert bounds == {
        "a": ("CAST('7' AS DECIMAL(20,0))", "CAST('18446744073709551615' AS DECIMAL(20,0))"),
        "b": ("DATE'1999-12-31'", "DATE'2026-01-02'"),
        "c": ("TIMESTAMP_NTZ'2026-01-01 00:00:00'", "TIMESTAMP_NTZ'2026-01-01 00:00:00.000001'"),
    }  # no bound on a DOUBLE key: Spark and Arrow differ on -0.0 and NaN


def test_vector_values_are_float32_arrays_that_read_back_as_the_normal_form():
    """MySQL 9's VECTOR: array<float> in Iceberg; its normal form (each float the shortest decimal
    of its float32) goes in as float32s and comes back out equal."""
    column = Column("c", "vector", "vector(3)")
    assert spark_type(column) == "ARRAY<FLOAT>" and arrow_type(column) == pa.list_(pa.float32())

    def f32(value: float) -> float:
        return struct.unpack("<f", struct.pack("<f", value))[0]

    normal = [[1.1, -2.5, 3.4028235e38], None, []]
    array = arrow_array(column, normal)
    assert array.to_pylist() == [[f32(1.1), -2.5, f32(3.4028235e38)], None, []]
    assert [to_spark(column)(value) for value in normal] == normal
    assert [from_spark(column)(value) for value in array.to_pylist()] == normal
