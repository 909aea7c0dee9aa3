"""The pure parts of backfills read by Spark tasks: key ranges join up with no gap and end at
the window's end, the key bounds of several staged ranges combine, and the configuration
refuses a sink that cannot take staged rows."""

from __future__ import annotations

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import given

from dblog.mysql.schema import Column
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.distributed_snapshot import plan_ranges
from dblog.sinks.iceberg.arrow_batch import bounds_of, key_bounds, key_extremes, merge_extremes


@given(st.lists(st.integers(1, 999), unique=True).map(sorted), st.none() | st.integers(-5, 0), st.integers(1000, 1200))
def test_ranges_cover_the_window_once_in_order(boundaries, after, max_key):
    keys = [(b,) for b in boundaries]
    start = None if after is None else (after,)
    ranges = plan_ranges(start, keys, (max_key,))
    assert [r.index for r in ranges] == list(range(len(ranges)))
    assert ranges[0].after_key == start and ranges[-1].upto == (max_key,)
    for previous, following in zip(ranges, ranges[1:]):
        assert following.after_key == previous.upto  # no gap, no overlap
    assert len(ranges) == len(boundaries) + 1


def test_a_last_boundary_at_the_max_key_adds_no_empty_range():
    ranges = plan_ranges(None, [(5,), (9,)], (9,))
    assert [(r.after_key, r.upto) for r in ranges] == [(None, (5,)), ((5,), (9,))]


KEYS = [Column("region", "varchar", "varchar(10)", nullable=False), Column("id", "int", "int", nullable=False)]


@given(st.lists(st.lists(st.tuples(st.sampled_from(["eu", "na", "ap", "é"]), st.integers(-10**6, 10**6)),
                         max_size=20), min_size=1, max_size=5))
def test_extremes_of_parts_combine_to_the_extremes_of_all(parts):
    tables = [pa.table({"region": pa.array([r for r, _ in part], pa.string()),
                        "id": pa.array([i for _, i in part], pa.int32())}) for part in parts]
    combined = merge_extremes([key_extremes(KEYS, table) for table in tables])
    whole = pa.concat_tables(tables)
    assert bounds_of(KEYS, combined) == key_bounds(KEYS, whole)


def test_snapshot_distributed_needs_the_iceberg_sink():
    with pytest.raises(ConfigError, match='snapshot.distributed = true .* needs sink.type = "iceberg"'):
        parse_config({"snapshot": {"distributed": True}, "sink": {"type": "jsonl"}})
    assert parse_config({"snapshot": {"distributed": True}, "sink": {"type": "iceberg"}}).snapshot.distributed
