"""The Kafka sink's assembled records are `orjson.dumps` of the envelope's dicts, byte for byte."""

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.sinks.envelope import envelopes
from dblog.sinks.record_bytes import NO_TRANSACTION, RecordBytes, envelope_times, transaction_piece

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # quotes, escapes, emoji
values = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), text,
                   st.floats(allow_nan=False, allow_infinity=False))
rows = st.dictionaries(text, values, max_size=5)
sources = st.builds(SourceInfo, gtid=st.one_of(st.none(), text), file=st.one_of(st.none(), text),
                    pos=st.one_of(st.none(), st.integers(0, 2**40)), row=st.integers(0, 10_000),
                    server_id=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
                    ts_ms=st.one_of(st.none(), st.integers(0, 2**42)), snapshot=st.booleans(),
                    initial_marker=st.one_of(st.none(), st.sampled_from(["first", "true", "last"])))
blocks = st.one_of(st.none(), st.fixed_dictionaries({"id": text, "total_order": st.integers(1, 99),
                                                     "data_collection_order": st.integers(1, 99)}))


@settings(max_examples=300, deadline=None)
@given(db=text.filter(bool), table=text.filter(bool), connector=text, key=st.lists(values, min_size=0, max_size=3),
       op=st.sampled_from(["c", "u", "d", "r"]), before=rows, after=rows, block=blocks,
       ts_ns=st.integers(0, 2**62), sources=st.lists(sources, min_size=1, max_size=4))
def test_assembled_records_are_the_envelopes_bytes(db, table, connector, key, op, before, after, block, ts_ns,
                                                   sources):
    table_id = TableId(db, table)
    key_columns = tuple(f"k{index}" for index in range(len(key)))
    records = RecordBytes(table_id, connector, key_columns, None)
    times = envelope_times(ts_ns)
    # several changes in a row: the source block kept from one to the next must not leak
    for source in sources + sources[::-1]:
        change = RowChange(table_id, op, tuple(key), None if op in ("c", "r") else before,
                           None if op == "d" else after, source)
        (expected,) = envelopes(change, key_columns, connector, ts_ns // 1_000_000, ts_ns)
        expected["value"]["transaction"] = block
        value = records.value(change, change.before, change.after,
                              NO_TRANSACTION if block is None else transaction_piece(block), times, ts_ns)
        assert value == orjson.dumps(expected["value"])
        assert records.key(change.key) == orjson.dumps(expected["key"])


def test_a_key_is_encoded_by_the_key_encoder():
    records = RecordBytes(TableId("d", "t"), "c", ("id", "region"), lambda key: {**key, "id": key["id"] - 2**64})
    assert records.key((2**64 - 1, "eu")) == b'{"id":-1,"region":"eu"}'
