"""Offsets are replaced atomically and rejected clearly when damaged; the JSON-lines sink
writes Debezium records and survives a torn last line."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets, OffsetsError
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.envelope import envelopes, materialize
from dblog.sinks.jsonl.sink import JsonLinesSink, encode_record, read_json_lines

ORDERS = TableId("shop", "orders")


def test_offsets_round_trip_and_replace(tmp_path):
    store = OffsetStore(tmp_path / "state" / "offsets.json")
    assert store.load() is None
    first = Offsets("mariadb", GtidSet.parse("0-1-10"), {"queue": [], "paused": True}, {"kafka": {"0": 5}})
    store.save(first)
    store.save(Offsets("mariadb", GtidSet.parse("0-1-11,1-2-3"), {"paused": False}))
    loaded = store.load()
    assert str(loaded.position) == "0-1-11,1-2-3"
    assert loaded.snapshot == {"paused": False}
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["offsets.json"]  # no temp files left


def test_mysql_offsets_with_tagged_gtids_round_trip(tmp_path):
    # MySQL 8.3+ tagged GTIDs, mixed with the untagged intervals of one UUID, as the server
    # prints them (sql/rpl_gtid_set.cc, Gtid_set::to_string).
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    position = GtidSet.parse(f"{uuid}:1-57:Batch_1:1-3:tag2:5")
    resume = GtidSet.parse(f"{uuid}:1-50:batch_1:1-3")
    store = OffsetStore(tmp_path / "offsets.json")
    store.save(Offsets("mysql", position, {"paused": False}, resume=resume))
    document = json.loads((tmp_path / "offsets.json").read_text())
    assert document["gtid_position"] == f"{uuid}:1-57:batch_1:1-3:tag2:5"
    assert document["gtid_resume"] == f"{uuid}:1-50:batch_1:1-3"
    loaded = store.load()
    assert loaded.position == position and loaded.resume == resume and loaded.flavor == "mysql"


def test_the_schema_history_is_saved_beside_the_offsets_only_when_it_changed(tmp_path, monkeypatch):
    """A file of its own, named by its content, written before the document naming it; a commit
    whose history object is the one saved last writes only the small document; the file of an
    older history is removed once a document names a newer one."""
    store = OffsetStore(tmp_path / "offsets.json")
    history = {"version": 1, "tables": {"shop": {"t": {"columns": [["id", "int(11)", None, False, None, "", ""]]}}}}
    store.save(Offsets("mariadb", GtidSet.parse("0-1-1"), definitions=history))
    (side,) = tmp_path.glob("offsets.json.definitions-*.json")
    assert json.loads((tmp_path / "offsets.json").read_text())["definitions_file"] == side.name
    assert "tables" not in (tmp_path / "offsets.json").read_text()
    written = []
    real_dumps = json.dumps
    monkeypatch.setattr(json, "dumps", lambda value, **kw: written.append(value) or real_dumps(value, **kw))
    store.save(Offsets("mariadb", GtidSet.parse("0-1-2"), definitions=history))  # the same object
    assert history not in written and [p.name for p in tmp_path.glob("offsets.json.definitions-*")] == [side.name]
    changed = {**history, "tables": {}}
    store.save(Offsets("mariadb", GtidSet.parse("0-1-3"), definitions=changed))
    assert changed in written and not side.exists()
    loaded = OffsetStore(tmp_path / "offsets.json").load()
    assert loaded.definitions == changed and str(loaded.position) == "0-1-3"
    (newer,) = tmp_path.glob("offsets.json.definitions-*.json")
    store.save(Offsets("mariadb", GtidSet.parse("0-1-4")))  # a sink that keeps no history: none named
    assert not newer.exists()
    store.save(Offsets("mariadb", GtidSet.parse("0-1-5"), definitions=changed))
    (newer,) = tmp_path.glob("offsets.json.definitions-*.json")
    newer.unlink()
    with pytest.raises(OffsetsError, match=f"names the schema history file .*{newer.name}.*restore both"):
        OffsetStore(tmp_path / "offsets.json").load()


def test_damaged_offsets_name_the_file_and_the_remedy(tmp_path):
    path = tmp_path / "offsets.json"
    path.write_text('{"flavor": "mariadb", "gtid_position": "0-1-x"}')
    with pytest.raises(OffsetsError, match="offsets.json is not valid.*delete it"):
        OffsetStore(path).load()


def test_unwritable_offsets_directory_is_a_clear_error(tmp_path):
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("")
        store = OffsetStore(blocker / "offsets.json")  # parent is a file: cannot be created
    else:
        tmp_path.chmod(0o500)
        store = OffsetStore(tmp_path / "sub" / "offsets.json")
    with pytest.raises(OffsetsError, match="cannot write offsets file"):
        store.save(Offsets("mariadb", GtidSet.parse("0-1-1")))


def test_key_change_becomes_delete_then_create():
    change = RowChange(
        ORDERS, "u", ("eu", 2), {"region": "eu", "order_id": 1}, {"region": "eu", "order_id": 2},
        SourceInfo(gtid="0-1-5", file="binlog.000001", pos=100, server_id=1, ts_ms=5), before_key=("eu", 1),
    )
    records = list(envelopes(change, ("region", "order_id"), "shop", 7))
    assert [r["value"]["op"] for r in records] == ["d", "c"]
    assert records[0]["key"] == {"region": "eu", "order_id": 1}
    assert records[1]["key"] == {"region": "eu", "order_id": 2}
    assert records[1]["value"]["source"]["gtid"] == "0-1-5"
    assert materialize(records) == {"shop.orders": {("eu", 2): {"region": "eu", "order_id": 2}}}


def test_sink_cuts_a_torn_tail_before_appending(tmp_path):
    path = tmp_path / "changes.jsonl"
    sink = JsonLinesSink(path, lambda table: ("id",), "shop")
    sink.write([RowChange(ORDERS, "c", (1,), None, {"id": 1, "v": "é"})])
    sink.close()
    with open(path, "a") as out:
        out.write('{"key": {"id": 2}, "val')  # crash mid-line
    sink = JsonLinesSink(path, lambda table: ("id",), "shop")
    sink.write([RowChange(ORDERS, "r", (3,), None, {"id": 3, "v": "x"}, SourceInfo(snapshot=True))])
    sink.close()
    records = list(read_json_lines(path))
    assert [r["key"]["id"] for r in records] == [1, 3]
    assert records[1]["value"]["source"]["snapshot"] == "incremental"
    assert json.loads(path.read_text().splitlines()[0])["value"]["after"]["v"] == "é"


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),  # any code point but lone surrogates (UTF-8 cannot hold them)
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), _JSON_VALUES, max_size=6))
def test_records_encode_as_the_stdlib_would(record):
    """orjson writes the lines: what a reader gets back is what json.dumps would have given
    (non-ASCII kept as UTF-8, compact, every int of BIGINT and BIGINT UNSIGNED)."""
    encoded = encode_record(record)
    assert b"\n" not in encoded  # one record, one line
    expected = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(encoded) == json.loads(expected)
