"""The snapshot progress in the offsets document: a queued table is written as its name and
request alone, and every entry reads back as it was (issue 29: thousands of queued tables)."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from dblog.core.events import TableId
from dblog.core.progress import SnapshotProgress, TableSnapshot

_optional_int = st.one_of(st.none(), st.integers(min_value=0, max_value=10**12))
_key = st.one_of(st.none(), st.tuples(st.integers(), st.text(max_size=5)))
entries = st.builds(
    TableSnapshot,
    table=st.builds(TableId, st.sampled_from(["db", "shop"]), st.from_regex(r"t[0-9]{1,5}", fullmatch=True)),
    condition=st.one_of(st.none(), st.just("id > 5")),
    surrogate_key=st.one_of(st.none(), st.just("code")),
    started=st.booleans(),
    max_key=_key,
    last_key=_key,
    rows_scanned=st.integers(min_value=0, max_value=10**9),
    chunks=st.integers(min_value=0, max_value=10**6),
    window_rows=st.integers(min_value=0, max_value=10**6),
    rows_emitted=st.integers(min_value=0, max_value=10**9),
    initial_order=st.one_of(st.none(), st.integers(min_value=1, max_value=10**5)),
    estimated_rows=_optional_int,
    started_ms=_optional_int,
    updated_ms=_optional_int,
)


@given(st.lists(entries, max_size=6), st.booleans(), st.lists(st.text(max_size=8), max_size=3))
@example([TableSnapshot(TableId("db", "t0"), updated_ms=0)], False, [])  # a 0 ms time is not "unset"
def test_progress_reads_back_as_written(queue, paused, completed):
    progress = SnapshotProgress(queue=queue, paused=paused, snapshot_id="s", completed_tables=completed)
    document = json.loads(json.dumps(progress.to_json()))
    assert SnapshotProgress.from_json(document) == progress


def test_a_queued_table_is_its_name_and_request_alone():
    queued = [TableSnapshot(TableId("db", "t1")), TableSnapshot(TableId("db", "t2"), "id > 5", "code"),
              TableSnapshot(TableId("db", "t3"), initial_order=4)]
    started = TableSnapshot(TableId("db", "t0"), started=True, max_key=(9,), rows_scanned=0)
    document = SnapshotProgress(queue=[started, *queued]).to_json()["queue"]
    assert document[1:] == [{"table": "db.t1"}, {"table": "db.t2", "condition": "id > 5", "surrogate_key": "code"},
                            {"table": "db.t3", "initial_order": 4}]
    assert document[0]["started"] is True and document[0]["max_key"] == [9] and document[0]["rows_scanned"] == 0
