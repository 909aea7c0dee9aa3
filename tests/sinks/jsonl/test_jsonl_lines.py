"""The JSON-lines sink's lines are `orjson.dumps` of the envelope's records, byte for byte, though
it assembles them from pieces (dblog.sinks.record_bytes)."""

from __future__ import annotations

from unittest import mock

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.sinks.jsonl import sink as jsonl
from dblog.sinks.envelope import envelopes
from dblog.sinks.jsonl.sink import JsonLinesSink

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
values = st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), text, st.floats(allow_nan=False, allow_infinity=False))
sources = st.builds(SourceInfo, gtid=st.one_of(st.none(), st.just("0-1-7")), file=st.one_of(st.none(), text),
                    pos=st.one_of(st.none(), st.integers(0, 2**40)), row=st.integers(0, 99),
                    server_id=st.one_of(st.none(), st.integers(0, 9)), ts_ms=st.one_of(st.none(), st.integers(0, 2**42)),
                    snapshot=st.booleans(), initial_marker=st.one_of(st.none(), st.just("first")))
TABLES = [TableId("shop", "orders"), TableId("shop", "keyless"), TableId("other", "o")]


@st.composite
def changes(draw):
    table = draw(st.sampled_from(TABLES))
    op = draw(st.sampled_from(["c", "u", "d", "r", "key change"]))
    before = {"id": draw(values), "v": draw(values)}
    after = {"id": draw(values), "v": draw(values)}
    source = draw(sources)
    if op == "key change":
        return RowChange(table, "u", (after["id"],), before, after, source, before_key=(before["id"],))
    return RowChange(table, op, (after["id"] if op != "d" else before["id"],), None if op in ("c", "r") else before,
                     None if op == "d" else after, source)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(changes(), max_size=6), min_size=1, max_size=4), rekeyed=st.booleans())
def test_each_line_is_the_envelopes_record(tmp_path_factory, batches, rekeyed):
    path = tmp_path_factory.mktemp("lines") / "changes.jsonl"
    keys = {TABLES[0]: ("id",), TABLES[1]: (), TABLES[2]: ("id",)}
    sink = JsonLinesSink(path, lambda table: keys[table], "conn")
    expected = []
    for number, batch in enumerate(batches):
        if rekeyed and number == 1:
            keys[TABLES[0]] = ("v",)  # a key set at run time: the records' keys follow it
        batch = [RowChange(change.table, change.op, tuple((change.after or change.before)[name]
                                                          for name in keys[change.table]),
                           change.before, change.after, change.source, change.before_key) for change in batch]
        now_ns = 1_800_000_000_123_456_789 + number * 1_000_000_007  # each batch written at its own instant
        with mock.patch.object(jsonl.time, "time_ns", return_value=now_ns):
            sink.write(batch)
        expected += [orjson.dumps(record) for change in batch
                     for record in envelopes(change, keys[change.table], "conn", now_ns // 1_000_000, now_ns)]
    sink.close()
    assert path.read_bytes().splitlines() == expected
