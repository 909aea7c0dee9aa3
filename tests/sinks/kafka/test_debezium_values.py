"""Debezium's value encodings (dblog.sinks.kafka.debezium_values), unit by unit: what the differential
test against Debezium itself (test_connect_differential.py) does not reach. `adaptive`, which
Debezium 3.6 refuses for MySQL, as Debezium's documentation describes it; `hex`, observed from
Debezium 3.6 on MariaDB; Java's BigInteger bytes at the byte boundaries."""

from __future__ import annotations

import base64
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dblog.mysql.schema import Column
from dblog.sinks.kafka.debezium_values import RowEncoder, ValueModes, column_encoding
from dblog.sinks.kafka.settings import KafkaSinkSettings


def _column(name: str, data_type: str, column_type: str | None = None, **kw) -> Column:
    return Column(name, data_type, column_type or data_type, **kw)


def _encode(column: Column, value, **modes):
    encoding = column_encoding(column, ValueModes(**modes))
    return encoding.schema, (value if encoding.encode is None else encoding.encode(value))


@pytest.mark.parametrize("unscaled, expected", [
    (0, b"\x00"), (127, b"\x7f"), (128, b"\x00\x80"), (-1, b"\xff"), (-128, b"\x80"), (-129, b"\xff\x7f"),
    (255, b"\x00\xff"), (-32768, b"\x80\x00"), (2**64 - 1, b"\x00" + b"\xff" * 8),
])
def test_decimal_bytes_are_javas_big_integer_bytes(unscaled, expected):
    column = _column("n", "decimal", numeric_precision=65, numeric_scale=0)
    schema, value = _encode(column, str(unscaled))
    assert base64.b64decode(value) == expected
    assert schema == {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                      "parameters": {"scale": "0", "connect.decimal.precision": "65"}}


def test_adaptive_writes_time_up_to_milliseconds_as_int32_milliseconds():
    for precision, expected in ((0, ({"type": "int32", "name": "io.debezium.time.Time", "version": 1}, -3723000)),
                                (3, ({"type": "int32", "name": "io.debezium.time.Time", "version": 1}, -3723001)),
                                (6, ({"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1},
                                     -3723001002))):
        text = "-01:02:03" + (".001002"[: precision + 1] if precision else "")
        assert _encode(_column("t", "time", datetime_precision=precision), text,
                       time_precision_mode="adaptive") == expected
    schema, value = _encode(_column("d", "datetime", datetime_precision=6), "1970-01-01T00:00:01.000002",
                            time_precision_mode="adaptive")
    assert schema["name"] == "io.debezium.time.MicroTimestamp" and value == 1_000_002


def test_binary_handling_modes():
    column = _column("b", "varbinary")
    stored = base64.b64encode(b"\xfb\xff\x00").decode()  # '+/8A': the characters url-safe base64 replaces
    assert _encode(column, stored) == ({"type": "bytes"}, "+/8A")
    assert _encode(column, stored, binary_handling_mode="base64") == ({"type": "string"}, "+/8A")
    assert _encode(column, stored, binary_handling_mode="base64-url-safe") == ({"type": "string"}, "-_8A")
    assert _encode(column, stored, binary_handling_mode="hex") == ({"type": "string"}, "fbff00")
    # BIT and geometry are not binary columns: their encodings stay
    assert _encode(_column("f", "bit", numeric_precision=9), 257, binary_handling_mode="hex")[1] == "AQE="


def test_zero_dates_are_null_and_rows_keep_other_columns():
    columns = [_column("id", "int"), _column("d", "date"), _column("dt", "datetime", datetime_precision=0),
               _column("ts", "timestamp", datetime_precision=0), _column("name", "varchar")]
    encode = RowEncoder(columns, ValueModes())
    row = {"id": 1, "d": "0000-00-00", "dt": "0000-00-00 00:00:00", "ts": "0000-00-00 00:00:00", "name": "x"}
    assert encode(row) == {"id": 1, "d": None, "dt": None, "ts": None, "name": "x"}
    assert row["d"] == "0000-00-00", "the engine's row is left as it is"
    assert encode({"id": 2, "d": "1970-01-02", "dt": None, "ts": None, "name": None}) == \
        {"id": 2, "d": 1, "dt": None, "ts": None, "name": None}
    assert encode({"id": 3}) == {"id": 3}, "a key holds only its columns"
    assert encode(None) is None


def test_the_sink_settings_take_debeziums_values_only():
    settings = KafkaSinkSettings(decimal_handling_mode="string", time_precision_mode="connect")
    assert settings.value_modes == ValueModes("connect", "string", "long", "bytes")
    assert KafkaSinkSettings(values="dblog").value_modes is None
    with pytest.raises(ValidationError, match="decimal_handling_mode"):
        KafkaSinkSettings(decimal_handling_mode="exact")
    with pytest.raises(ValidationError, match="values"):
        KafkaSinkSettings(values="avro")


_PAIR_COLUMNS = [_column("id", "bigint", unsigned=True), _column("amount", "decimal", numeric_precision=12, numeric_scale=2),
                 _column("at", "datetime", datetime_precision=6), _column("day", "date"), _column("note", "varchar"),
                 _column("flag", "bit", numeric_precision=1), _column("year", "year")]
_PAIR_VALUES = {"id": [None, 1, 2**64 - 1], "amount": [None, "1.00", "-0.01"],
                "at": [None, "2026-01-01T00:00:00.000001", "0000-00-00T00:00:00"], "day": [None, "2026-01-01"],
                "note": [None, "a"], "flag": [None, 0, 1], "year": [None, 0, 2026]}


_ZERO_DATES = {"at": -1}  # what a zero date of `at` is written as (a NOT NULL column's replacement)


def _reference(row: dict | None) -> dict | None:
    """Each column of `row` encoded alone, by its column_encoding: what the compiled encoder
    must give."""
    if row is None:
        return None
    encoded = dict(row)
    for column in _PAIR_COLUMNS:
        encode, value = column_encoding(column, ValueModes()).encode, row.get(column.name)
        if encode is not None and value is not None:
            encoded[column.name] = encode(value)
            if encoded[column.name] is None and column.name in _ZERO_DATES:
                encoded[column.name] = _ZERO_DATES[column.name]
    return encoded


_ROWS = st.fixed_dictionaries({}, optional={name: st.sampled_from(values) for name, values in _PAIR_VALUES.items()})


@given(_ROWS, _ROWS, st.sampled_from(["before", "after", "both"]))
def test_an_updates_pair_is_encoded_as_each_row_alone(before, after, present):
    encode = RowEncoder(_PAIR_COLUMNS, ValueModes(), _ZERO_DATES)
    before, after = (before if present != "after" else None), (after if present != "before" else None)
    originals = (dict(before) if before else before, dict(after) if after else after)
    assert encode(before) == _reference(before) and encode(after) == _reference(after)
    assert encode.pair(before, after) == (_reference(before), _reference(after))
    assert (before, after) == originals  # the rows given are left as they were


@given(st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)))
def test_microseconds_since_the_epoch(moment):
    text = moment.isoformat(timespec="microseconds")
    assert column_encoding(_column("at", "datetime", datetime_precision=6), ValueModes()).encode(text) == \
        (moment - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)


def test_vector_is_debeziums_float_vector_in_both_value_modes():
    """MySQL 9's VECTOR as Debezium's MySQL connector writes it (BinlogVectorIT: the field's schema
    named io.debezium.data.FloatVector, the value the float32s): SchemaFactory's
    datatypeFloatVectorSchema, `SchemaBuilder.array(Schema.FLOAT32_SCHEMA)` with that name, version 1,
    as Kafka Connect's JsonConverter writes an array schema. dblog's normal form is the value."""
    from dblog.sinks.kafka.connect_schema import column_schema

    column = _column("v", "vector", column_type="vector(2)")
    expected = {"type": "array", "items": {"type": "float", "optional": False}, "name": "io.debezium.data.FloatVector",
                "version": 1}
    schema, value = _encode(column, [1.1, -2.5])
    assert (schema, value) == (expected, [1.1, -2.5])
    assert column_schema(column) == expected, "values = 'dblog' writes the same"
    assert RowEncoder([column], ValueModes())({"v": [0.5]}) == {"v": [0.5]}
