"""KeyRanges against a plain list of the intervals added: a key range overlaps exactly when
some added interval shares a key with it, and what is kept stays disjoint and sorted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dblog.sinks.iceberg.key_ranges import KeyRanges

keys = st.tuples(st.sampled_from(["ap", "eu", "us"]), st.integers(0, 30))
intervals = st.tuples(keys, keys).map(sorted).map(tuple)


@given(st.lists(intervals, max_size=25), st.lists(intervals, min_size=1, max_size=10))
def test_overlaps_exactly_when_an_added_interval_meets_the_range(added, probes):
    ranges = KeyRanges()
    for low, high in added:
        ranges.add(low, high)
    for low, high in probes:
        expected = any(not (h < low or l > high) for l, h in added)
        assert ranges.overlaps(low, high) == expected
    kept = ranges.intervals()
    assert all(low <= high for low, high in kept)
    assert all(kept[i][1] < kept[i + 1][0] for i in range(len(kept) - 1))


def test_a_composite_key_crossing_its_first_column_does_not_cover_the_later_keys():
    ranges = KeyRanges()
    ranges.add(("ap", 1), ("ap", 999))
    ranges.add(("ap", 1000), ("eu", 300))  # a batch that crossed from ap to eu
    assert len(ranges) == 2
    assert not ranges.overlaps(("eu", 301), ("eu", 900))
    assert ranges.overlaps(("eu", 300), ("eu", 900))


def test_an_empty_range_is_refused():
    with pytest.raises(ValueError, match="empty key range"):
        KeyRanges().add(("eu", 2), ("eu", 1))
