"""Doubles inside MySQL JSON values print as MySQL prints them (issue 36, item 3).

A SELECT of a JSON column returns MySQL's text, and the snapshot path keeps it as it is; the binlog
path renders the binary JSON itself (`dblog.mysql.binlog.values.mysql_json_text`), so its doubles must
come out as MySQL's: `1e16`, not Python's `1e+16`; `0.00001`, not `1e-05`; `9.007199254740992e15`, not
`9007199254740992.0`.

The rule (sql-common/json_dom.cc, `wrapper_to_string`, case J_DOUBLE: `my_gcvt(d, MY_GCVT_ARG_DOUBLE,
MY_GCVT_MAX_FIELD_WIDTH, ...)`, then ".0" when there is no '.' and no 'e'; strings/dtoa.cc `my_gcvt`) is
modelled for the tests in `support.mysql_double`: a step-by-step transliteration of my_gcvt's format choice
for any field width, fed with the shortest round-trip digits found by exact decimal search (not by repr,
which dblog's `json_double_text` uses). The two must agree on every finite double: raw 64-bit patterns
(so every exponent, subnormals and both zeros), and the powers of ten and their neighbours at the format's
boundaries.

MySQL's own test results give the expected text of some doubles directly (a table below, with where
each comes from), and the issue's three cases were captured from MySQL 8.0.45.

MariaDB stores JSON as LONGTEXT: its binlog carries the text the client sent, which dblog passes through
unchanged (a text column), so nothing here applies to it. Past the decoder a JSON value is a string that
no sink parses or prints again: the JSON-lines sink and the Kafka sink's Debezium values (io.debezium.data.Json,
a string) write the text as it is (checked at the end).
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import binlog_encoder as be
from support import mysql_double
from support.binlog_transactions import Packaging, decoded_rows, transaction

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.mysql.binlog.json_double import json_double_text
from dblog.mysql.binlog.values import mysql_json_text
from dblog.mysql.schema import Column
from dblog.sinks.kafka.debezium_values import ValueModes, column_encoding
from dblog.sinks.jsonl.sink import JsonLinesSink, read_json_lines

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# (double, MySQL's JSON text of it), each from MySQL itself.
MYSQL_PRINTED = [
    # The issue: captured from MySQL 8.0.45.
    (1e16, "1e16"),
    (0.00001, "0.00001"),
    (9007199254740992.0, "9.007199254740992e15"),
    # mysql-test/suite/json/r/json_conversions.result (mysql/mysql-server 8.0):
    # insert into t values ('double', cast(3.14E0 as json)) ... select c, json_type(j), j → DOUBLE 3.14;
    # cast(st_geomfromtext('point(1 1)') as json) → {"type": "Point", "coordinates": [1.0, 1.0]}
    (3.14, "3.14"),
    (1.0, "1.0"),
    # mysql-test/suite/gis/r/geojson_functions.result (8.0; ST_AsGeoJSON builds a Json_object of
    # Json_doubles and prints it with Json_wrapper::to_string, the same J_DOUBLE case):
    # POINT(10 11) → [10.0, 11.0]; POINT(-10 -11) → [-10.0, -11.0];
    # POINT(1.7976931348623157E+308 ...) → [1.7976931348623157e308, ...];
    # POINT(1.7976931348623157E-308 ...) → [1.7976931348623155e-308, ...];
    # LINESTRING(0 0, 0 10, ...) → [[0.0, 0.0], [0.0, 10.0], ...]; (10 10, ..., 100 100) → [100.0, 100.0];
    # POINT(10.123456789 11.123456789) with 4 decimals → [10.1235, 11.1235], with 10 → [10.123456789, ...];
    # POINT(10.1234567890123456789 ...) → [10.123456789012346, ...]
    (10.0, "10.0"), (11.0, "11.0"), (-10.0, "-10.0"), (-11.0, "-11.0"),
    (1.7976931348623157e308, "1.7976931348623157e308"),
    (float("1.7976931348623157E-308"), "1.7976931348623155e-308"),
    (0.0, "0.0"), (100.0, "100.0"),
    (10.1235, "10.1235"), (10.123456789, "10.123456789"),
    (float("10.1234567890123456789"), "10.123456789012346"),
    # unittest/gunit/json_dom-t.cc (BasicTest): Json_double(-123.45) formats as "-123.45"; the document
    # {"abc": 3, "foo": [1, 2, {"foo": 3.24}, null]} prints back as it was written.
    (-123.45, "-123.45"), (3.24, "3.24"),
]


@pytest.mark.parametrize("value, printed", MYSQL_PRINTED, ids=[text for _, text in MYSQL_PRINTED])
def test_doubles_print_as_mysql_printed_them(value, printed):
    assert json_double_text(value) == printed
    assert mysql_double.json_double(value) == printed, "the model agrees with MySQL too"


def test_a_json_document_from_the_binlog_prints_its_doubles_as_mysql_does():
    """Through the decoder: the row's JSON text is MySQL's (the same text a SELECT returns)."""
    document = {"a": 1e16, "b": [0.00001, 9007199254740992.0, 1.0, -0.0], "c": 2.5}
    table = be.Table(6, "db", "t", [be.int_("id", nullable=False), be.json_column("j")], primary_key=(0,))
    packaging = Packaging("mysql")
    _, decoded = decoded_rows(transaction(table, "c", [[1, be.json_binary(document)]], packaging), packaging)
    assert decoded.images[0]["j"] == '{"a": 1e16, "b": [0.00001, 9.007199254740992e15, 1.0, -0.0], "c": 2.5}'


def _boundary_doubles() -> list[float]:
    """Powers of ten from the subnormals to the largest, each with its neighbours, and the extremes."""
    values = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, 2.0 ** 53]
    for exponent in range(-324, 309):
        power = float(f"1e{exponent}")
        if power == 0.0 or math.isinf(power):
            continue
        values += [power, math.nextafter(power, 0.0), math.nextafter(power, math.inf)]
    return values + [-value for value in values]


def test_every_power_of_ten_and_its_neighbours_prints_as_the_model_says():
    for value in _boundary_doubles():
        assert json_double_text(value) == mysql_double.json_double(value), value


finite_doubles = st.integers(0, (1 << 64) - 1).map(mysql_double.double_from_bits).filter(math.isfinite)


@settings(max_examples=3000, **SETTINGS)
@given(st.one_of(finite_doubles, st.floats(allow_nan=False, allow_infinity=False),
                 st.floats(min_value=-1e-300, max_value=1e-300), st.integers(-(1 << 64), 1 << 64).map(float)))
def test_any_double_prints_as_the_model_of_my_gcvt_says(value):
    assert json_double_text(value) == mysql_double.json_double(value), value


@settings(max_examples=300, **SETTINGS)
@given(finite_doubles)
def test_the_printed_text_reads_back_as_the_same_double(value):
    """What MySQL prints loses nothing: the shortest digits, whatever the format."""
    text = json_double_text(value)
    assert struct.pack("<d", float(text)) == struct.pack("<d", value), text


def test_values_json_cannot_hold_print_as_mysqls_dtoa_answers_them():
    """NaN and infinities are no JSON values (MySQL refuses them); were one in a damaged document,
    dtoa answers "0" (DTOA_OVERFLOW) and json_dom.cc appends ".0"."""
    for value in (math.inf, -math.inf, math.nan):
        assert json_double_text(value) == "0.0"
    assert mysql_json_text(bytes([be.J_DOUBLE]) + struct.pack("<d", math.inf)) == "0.0"


def test_sinks_write_the_json_text_as_it_is(tmp_path):
    text = '{"a": 1e16, "b": [0.00001, 9.007199254740992e15, 1.0]}'
    sink = JsonLinesSink(tmp_path / "changes.jsonl", lambda table: ("id",), "conn")
    sink.write([RowChange(TableId("shop", "docs"), "c", (1,), None, {"id": 1, "j": text},
                          SourceInfo("0-1-1", "binlog.000001", 4, 0, 1, 0))])
    sink.close()
    (line,) = read_json_lines(tmp_path / "changes.jsonl")
    assert line["value"]["after"]["j"] == text
    encoding = column_encoding(Column("j", "json", "json"), ValueModes())
    assert encoding.schema["name"] == "io.debezium.data.Json" and encoding.encode is None, "a string, written as is"
