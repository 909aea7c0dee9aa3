"""MySQL's partial JSON updates (binlog_row_value_options=PARTIAL_JSON) are applied, not refused
(issue 36, item 5).

With the option on (a session can turn it on by itself), MySQL logs every UPDATE as a
PARTIAL_UPDATE_ROWS_EVENT (type 39) and writes a JSON column changed by JSON_SET / JSON_REPLACE /
JSON_REMOVE as a list of diffs in the after image. The before image is untouched: under
binlog_row_image=FULL, which dblog requires, it holds the whole document (MySQL manual,
binlog_row_value_options: "binlog_row_image=FULL saves less space ... since the full JSON document is
stored in the before-image, and the partial update is stored only in the after-image"). So dblog applies
the diffs to the before document, as a MySQL replica does, and emits the whole after value.

No MySQL server runs here. The events are built as MySQL lays them out (tests/support/binlog_encoder.py,
`partial_update_rows_body` and `json_diff`), from MySQL's source (mysql/mysql-server, 8.0 / 8.4):

* sql/log_event.cc, Update_rows_log_event::get_update_rows_event_type: binlog_row_value_options != 0
  makes every UPDATE's event a PARTIAL_UPDATE_ROWS_EVENT, whatever the table's columns.
* sql/rpl_record.h and sql/rpl_record.cc (pack_row, unpack_row, start_partial_bit_reader): a
  PARTIAL_UPDATE_ROWS row is before-image, shared-image, after-image; the shared image is value_options
  (net_field_length; PARTIAL_JSON_UPDATES = 1, sql/system_variables.h) and, when that bit is set,
  partial_bits: one bit per JSON column of the table, in the image or not, set for a column written as a
  diff. value_options is 0 (and no bits follow) when no column of the row is a diff.
* sql-common/json_diff.cc (Json_diff::write_binary, Json_diff_vector::write_binary / read_binary,
  read_json_diff, apply_json_diff): a 4-byte length, then per diff the operation (REPLACE 0, INSERT 1,
  REMOVE 2), the path text (net_field_length + text) and, except for REMOVE, the value in binary JSON
  (net_field_length + bytes); REPLACE needs the value, INSERT its parent and (in an object) no such
  member yet, REMOVE the member or the array cell in bounds; anything else is REJECTED.
* sql-common/json_path.cc (Json_path_leg::to_string): ".key" for an ECMAScript identifier, else the
  key double-quoted; "[n]", "[last]", "[last-n]"; json_path.h, Json_array_index: an index past the end
  means the end (insert appends); json_dom.h, Json_key_comparator: object keys by length, then bytewise.

Checked by hand (not committed): a PARTIAL_UPDATE_ROWS event a MySQL 8.0.22 server wrote (public test
corpus of rust_mysql_common, test-data/binlogs/json.binlog.000001, binlog_row_image=MINIMAL there)
decodes with this layout: value_options 1, partial bits 0x01, the diff REPLACE $.age 26.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import binlog_encoder as be
from support import mysql_double
from support.binlog_transactions import MYSQL_UUID, decode
from support.scripted_binlog import ScriptedPrimary

from dblog.core.events import RowChange, TableId
from dblog.core.gtid import Gtid
from dblog.mysql.binlog import BinlogError
from dblog.mysql.binlog.decoder import BinlogDecodeError, RowsRecord
from dblog.mysql.binlog.json_diff import JsonDiffRejected, apply_json_diffs, read_json_diffs
from dblog.mysql.binlog.values import json_document_text, mysql_json_value

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REPLACE, INSERT, REMOVE = be.JSON_DIFF_REPLACE, be.JSON_DIFF_INSERT, be.JSON_DIFF_REMOVE

# --- a model of the three operations, on plain documents ------------------------------------------------


class Rejected(Exception):
    pass


def path_text(legs: list) -> str:
    """Json_path::to_string: "$", ".key" (identifier) or ."quoted", "[n]" / "[last]" / "[last-n]"."""
    out = "$"
    for leg in legs:
        if leg[0] == "member":
            name = leg[1]
            out += "." + (name if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", name) else json.dumps(name))
        else:
            _, index, from_end = leg
            out += "[" + (("last" + (f"-{index}" if index else "")) if from_end else str(index)) + "]"
    return out


def _position(leg: tuple, length: int) -> tuple[int, bool]:
    _, index, from_end = leg
    if from_end:
        return (length - index - 1 if index < length else 0), index < length
    return min(index, length), index < length


def model_apply(document: Any, operation: int, legs: list, value: Any) -> Any:
    """A new document with the diff applied, or Rejected; never changes `document`."""
    if not legs:
        raise Rejected
    leg, rest = legs[0], legs[1:]
    if isinstance(document, dict) and leg[0] == "member":
        name = leg[1]
        if rest:
            if name not in document:
                raise Rejected
            return {**document, name: model_apply(document[name], operation, rest, value)}
        if operation == INSERT:
            if name in document:
                raise Rejected
            merged = {**document, name: value}
            return {key: merged[key] for key in be.json_key_order(list(merged))}
        if name not in document:
            raise Rejected
        if operation == REPLACE:
            return {**document, name: value}
        return {key: item for key, item in document.items() if key != name}
    if isinstance(document, list) and leg[0] == "cell":
        position, within = _position(leg, len(document))
        if rest:
            if not within:
                raise Rejected
            return document[:position] + [model_apply(document[position], operation, rest, value)] + document[position + 1:]
        if operation == INSERT:
            return document[:position] + [value] + document[position:]
        if not within:
            raise Rejected
        if operation == REPLACE:
            return document[:position] + [value] + document[position + 1:]
        return document[:position] + document[position + 1:]
    raise Rejected


# --- documents and diff sequences ---------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
keys = st.one_of(st.sampled_from(["a", "b", "k1", "größe", "a b", 'q"uote', "", "last", "[0]", "x.y"]), st.text(max_size=4))


def _objects(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.dictionaries(keys, children, max_size=4).map(lambda d: {k: d[k] for k in be.json_key_order(list(d))})


documents = st.recursive(scalars, lambda children: st.lists(children, max_size=4) | _objects(children), max_leaves=10)
containers = st.one_of(st.lists(documents, max_size=4), _objects(documents))


def _locations(document: Any, legs: list | None = None) -> list[list]:
    """Every path to a value inside `document`, as both kinds of array leg."""
    legs = legs or []
    out = [legs] if legs else []
    if isinstance(document, dict):
        for key, item in document.items():
            out += _locations(item, legs + [("member", key)])
    elif isinstance(document, list):
        for index, item in enumerate(document):
            out += _locations(item, legs + [("cell", index, False)])
            out.append(legs + [("cell", len(document) - 1 - index, True)])
    return out


def _value_at(document: Any, legs: list) -> Any:
    for leg in legs:
        document = document[leg[1]] if leg[0] == "member" else document[_position(leg, len(document))[0]]
    return document


@st.composite
def diff_sequences(draw) -> tuple[Any, list]:
    """A container document and 1-6 diffs: mostly on places it has (INSERT: into a container it has),
    one in eight anywhere (those mostly do not apply)."""
    document = draw(containers)
    current, diffs = document, []
    for _ in range(draw(st.integers(1, 6))):
        operation = draw(st.sampled_from([REPLACE, INSERT, REMOVE]))
        places = _locations(current)
        if not places:  # an empty container: nothing to replace or remove yet
            operation = INSERT
        if operation == INSERT:
            places = [legs for legs in [[]] + places if isinstance(_value_at(current, legs), (dict, list))]
        if places and draw(st.integers(0, 7)):
            legs = list(draw(st.sampled_from(places)))
            if operation == INSERT:  # a new member (or an existing one: rejected), or a cell anywhere
                container = _value_at(current, legs)
                legs.append(("member", draw(keys)) if isinstance(container, dict)
                            else ("cell", draw(st.integers(0, 6)), draw(st.booleans())))
        else:
            legs = draw(st.lists(st.one_of(st.tuples(st.just("member"), keys),
                                           st.tuples(st.just("cell"), st.integers(0, 5), st.booleans())), max_size=3))
        value = None if operation == REMOVE else draw(documents)
        diffs.append((operation, legs, value))
        try:
            current = model_apply(current, operation, legs, value)
        except Rejected:
            break
    return document, diffs


def encoded(diffs: list) -> bytes:
    return b"".join(be.json_diff(operation, path_text(legs), value) for operation, legs, value in diffs)


@settings(max_examples=600, **SETTINGS)
@given(diff_sequences())
def test_diffs_apply_as_the_model_says(case):
    document, diffs = case
    expected: Any = document
    try:
        for operation, legs, value in diffs:
            expected = model_apply(expected, operation, legs, value)
    except Rejected:
        expected = Rejected
    applied = mysql_json_value(be.json_binary(document))
    if expected is Rejected:
        with pytest.raises(JsonDiffRejected):
            apply_json_diffs(applied, read_json_diffs(encoded(diffs)))
        return
    result = apply_json_diffs(applied, read_json_diffs(encoded(diffs)))
    assert json_document_text(result) == mysql_double.json_text(expected), (document, diffs)


@pytest.mark.parametrize("path, legs", [
    ("$.a", [("member", "a")]),
    ('$."a b"[3]', [("member", "a b"), ("cell", 3, False)]),
    ("$[last]", [("cell", 0, True)]),
    ("$[last-2].größe", [("cell", 2, True), ("member", "größe")]),
    (' $ . a [ last - 1 ] ."\\u0041\\"" ', [("member", "a"), ("cell", 1, True), ("member", 'A"')]),
])
def test_paths_as_mysql_writes_and_parses_them(path, legs):
    diff = read_json_diffs(be.json_diff(REMOVE, path))[0]
    expected = tuple(leg[1] if leg[0] == "member" else (leg[1], leg[2]) for leg in legs)
    assert tuple(leg if isinstance(leg, str) else (leg.index, leg.from_end) for leg in diff.path) == expected


@pytest.mark.parametrize("path", ["$.*", "$[*]", "$**.a", "$[1 to 3]", "a", "$.a["])
def test_paths_that_name_no_single_value_are_damage(path):
    with pytest.raises(ValueError, match="JSON path"):
        read_json_diffs(be.json_diff(REMOVE, path))


# --- events as MySQL writes them, through the decoder ---------------------------------------------------

TABLE = be.Table(21, "shop", "docs", [be.int_("id", nullable=False), be.json_column("j"), be.varchar("name", 20),
                                      be.json_column("k")], primary_key=(0,))
BEFORE = {"a": 1, "b": [1, 2, 3], "n": None}
AFTER_TEXT = '{"a": 1e16, "b": [1, "x", 2], "n": null, "c d": {"k": 0.00001}}'
DIFFS = be.json_diffs(be.json_diff(REPLACE, "$.a", 1e16), be.json_diff(INSERT, "$.b[1]", "x"),
                      be.json_diff(REMOVE, "$.b[last]"), be.json_diff(INSERT, '$."c d"', {"k": 0.00001}))


def partial_event_rows(rows: list, table: be.Table = TABLE, **kw: Any) -> tuple[RowsRecord, Any]:
    writer = be.BinlogWriter("mysql")
    writer.format_description()
    writer.mysql_gtid(MYSQL_UUID, 5)
    writer.query("BEGIN")
    writer.table_map(table)
    writer.partial_update_rows(table, rows, **kw)
    writer.xid()
    _, records = decode(writer.packets, "mysql")
    (record,) = [r for r in records if isinstance(r, RowsRecord)]
    return record, record.rows()


def test_a_partial_update_is_the_before_document_with_the_diffs_applied():
    before = [1, be.json_binary(BEFORE), "x", be.json_binary([2.5])]
    after = [1, DIFFS, "y", be.json_binary([9007199254740992.0])]  # k written whole, in the same row
    record, decoded = partial_event_rows([(before, after)])
    assert record.op == "u" and not decoded.partial
    ((old, new),) = decoded.images
    assert old == {"id": 1, "j": '{"a": 1, "b": [1, 2, 3], "n": null}', "name": "x", "k": "[2.5]"}
    assert new == {"id": 1, "j": AFTER_TEXT, "name": "y", "k": "[9.007199254740992e15]"}


def test_rows_without_diffs_and_empty_diff_lists_read_as_updates():
    """value_options 0 (no bits follow); PARTIAL_JSON_UPDATES with every bit clear; an empty diff list
    (MySQL writes one for a JSON column an UPDATE set to its own value); NULLs; and a table without JSON
    columns, whose every UPDATE is a PARTIAL_UPDATE_ROWS event too while the option is on."""
    doc = be.json_binary({"z": [True, False]})
    rows = [([1, doc, "a", None], [1, doc, "b", None]),
            ([2, doc, None, None], [2, be.json_diffs(), None, be.json_binary(7)])]
    _, decoded = partial_event_rows(rows)
    text = '{"z": [true, false]}'
    assert decoded.images == [({"id": 1, "j": text, "name": "a", "k": None}, {"id": 1, "j": text, "name": "b", "k": None}),
                              ({"id": 2, "j": text, "name": None, "k": None}, {"id": 2, "j": text, "name": None, "k": "7"})]
    _, decoded = partial_event_rows([([3, doc, "c", None], [3, doc, "d", None])], value_options=1)
    assert decoded.images[0][1]["j"] == text and decoded.images[0][1]["name"] == "d"
    plain = be.Table(22, "shop", "plain", [be.int_("id", nullable=False), be.varchar("name", 20)], primary_key=(0,))
    _, decoded = partial_event_rows([([1, "a"], [1, "b"]), ([2, "c"], [2, "d"])], table=plain)
    assert decoded.images == [({"id": 1, "name": "a"}, {"id": 1, "name": "b"}), ({"id": 2, "name": "c"}, {"id": 2, "name": "d"})]


def test_a_partial_update_inside_a_compressed_transaction():
    rows_type, rows_body = be.partial_update_rows_body(TABLE, [([1, be.json_binary(BEFORE), "x", None],
                                                                 [1, DIFFS, "x", None])])
    inner = [be.inner_event(be.QUERY, be.query_body("BEGIN")),
             be.inner_event(be.TABLE_MAP, be.table_map_body(TABLE, flavor="mysql")),
             be.inner_event(rows_type, rows_body), be.inner_event(be.XID, be.xid_body(9))]
    writer = be.BinlogWriter("mysql")
    writer.format_description()
    writer.mysql_gtid(MYSQL_UUID, 6)
    writer.add(be.TRANSACTION_PAYLOAD, be.transaction_payload_body(inner, "zstd"))
    _, records = decode(writer.packets, "mysql")
    (record,) = [r for r in records if isinstance(r, RowsRecord)]
    assert record.rows().images[0][1]["j"] == AFTER_TEXT


def test_a_diff_that_does_not_apply_is_refused_naming_the_table_and_the_remedy():
    before = [1, be.json_binary({"a": 1}), "x", None]
    for diff in (be.json_diff(REPLACE, "$.missing", 1), be.json_diff(INSERT, "$.a", 2), be.json_diff(REMOVE, "$[0]")):
        with pytest.raises(BinlogDecodeError, match=r"shop\.docs.*binlog_row_value_options = ''.*snapshot shop\.docs"):
            partial_event_rows([(before, [1, be.json_diffs(diff), "x", None])])
    with pytest.raises(BinlogDecodeError, match="column j: the before value is NULL"):
        partial_event_rows([([1, None, "x", None], [1, be.json_diffs(be.json_diff(REPLACE, "$.a", 1)), "x", None])])


def test_a_damaged_diff_list_is_refused_as_binlog_damage():
    for damaged in (b"\x07\x01$", b"\x00\x05$.a", b"\x00\x03$.a\x05\x0c\x05ab"):
        with pytest.raises(BinlogDecodeError, match="does not decode .*damaged"):
            partial_event_rows([([1, be.json_binary({"a": 1}), "x", None], [1, be.JsonDiffList(damaged), "x", None])])


def test_a_diff_without_its_before_value_makes_the_row_partial():
    """binlog_row_image=MINIMAL or NOBLOB (a session setting too): the before image lacks the document, so
    the column is left out of the after image and the row is partial, which the adapter refuses for
    captured tables (as MySQL 8.0.22 wrote it in the corpus event above)."""
    present = [True, False, False, False]
    after_present = [False, True, True, False]
    _, decoded = partial_event_rows([([1, None, None, None], [None, DIFFS, "y", None])],
                                    present=present, present_after=after_present)
    assert decoded.partial
    assert decoded.images == [({"id": 1}, {"name": "y"})]


# --- through the binlog adapter ---------------------------------------------------------------------

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = be.Table(23, "shop", "other", TABLE.columns, primary_key=(0,))


def _partial_update(primary: ScriptedPrimary, n: int, table: be.Table, before: list, after: list) -> None:
    with primary.transaction(Gtid.mysql(UUID, n)) as log:
        log.query("BEGIN", db="shop")
        log.table_map(table)
        log.partial_update_rows(table, [(before, after)])
        log.xid()


def _captured(table: TableId) -> bool:
    return table.table == "docs"


def test_the_adapter_emits_the_whole_after_value():
    primary = ScriptedPrimary()
    _partial_update(primary, 1, TABLE, [1, be.json_binary(BEFORE), "x", None], [1, DIFFS, "x", None])
    changes = [event for event in primary.read(table_filter=_captured) if isinstance(event, RowChange)]
    assert [(c.op, c.key, c.before["j"], c.after["j"]) for c in changes] == [
        ("u", (1,), '{"a": 1, "b": [1, 2, 3], "n": null}', AFTER_TEXT)]


def test_an_uncaptured_tables_partial_update_never_stops_the_stream():
    """Not even one that could not be applied or does not decode: it is not read at all."""
    primary = ScriptedPrimary()
    bad_before = [1, be.json_binary({"a": 1}), "x", None]
    _partial_update(primary, 1, OTHER, bad_before, [1, be.json_diffs(be.json_diff(REPLACE, "$.nope", 1)), "x", None])
    _partial_update(primary, 2, OTHER, bad_before, [1, be.JsonDiffList(b"\x09garbage"), "x", None])
    _partial_update(primary, 3, TABLE, [1, be.json_binary(BEFORE), "x", None], [1, DIFFS, "x", None])
    changes = [event for event in primary.read(table_filter=_captured) if isinstance(event, RowChange)]
    assert [(str(c.table), c.after["j"]) for c in changes] == [("shop.docs", AFTER_TEXT)]


def test_a_captured_tables_diff_that_does_not_apply_stops_the_stream_with_the_remedy():
    primary = ScriptedPrimary()
    _partial_update(primary, 1, TABLE, [1, be.json_binary({"a": 1}), "x", None],
                    [1, be.json_diffs(be.json_diff(REMOVE, "$.b")), "x", None])
    with pytest.raises(BinlogError, match=r"shop\.docs.*binlog_row_value_options"):
        primary.read(table_filter=_captured)


def test_a_captured_tables_diff_under_a_minimal_row_image_stops_the_stream_naming_the_setting():
    primary = ScriptedPrimary()
    with primary.transaction(Gtid.mysql(UUID, 1)) as log:
        log.query("BEGIN", db="shop")
        log.table_map(TABLE)
        log.partial_update_rows(TABLE, [([1, None, None, None], [None, DIFFS, "y", None])],
                                present=[True, False, False, False], present_after=[False, True, True, False])
        log.xid()
    with pytest.raises(BinlogError, match=r"shop\.docs.*binlog_row_image=MINIMAL or NOBLOB"):
        primary.read(table_filter=_captured)
