"""KeyRanges against a plain list of the intervals added: a key range overlaps exactly when
some added interval shares a key with it, and what is kept stays disjoint and sorted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyarrow as pa

from dblog.sinks.iceberg.key_ranges import KeyRanges, arrow_extremes, identity_span, key_identity, orderable

keys = st.tuples(st.sampled_from(["ap", "eu", "us"]), st.integers(0, 30))


def case_insensitive(text: str):
    """A collation's sort key in miniature: case and trailing spaces ignored, and a character
    it has no weight for ("?") leaves the value's bytes, as `WeightedCollation` does."""
    return text.encode() if "?" in text else text.upper().rstrip(" ")


spellings = st.sampled_from(["eu", "EU", "eu ", "Eu", "ap", "AP", "us", "x?", "y?", "", " "])
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


SORT_KEYS = [(case_insensitive, None, case_insensitive), (None, None, None), (None, None, case_insensitive)]


@given(st.lists(st.tuples(spellings, st.integers(0, 5), spellings), max_size=40), st.sampled_from(SORT_KEYS))
def test_the_identity_span_is_the_lowest_and_highest_identity_of_every_key(batch, sort_keys):
    def identity(key):
        return tuple(orderable(value if sort_key is None else sort_key(value))
                     for sort_key, value in zip(sort_keys, key))

    expected = (min(map(identity, batch)), max(map(identity, batch))) if batch else None
    assert identity_span(batch, sort_keys) == expected


@given(st.lists(st.tuples(spellings, st.integers(0, 2**64 - 1), spellings), max_size=40), st.sampled_from(SORT_KEYS),
       st.sampled_from([pa.uint64(), pa.decimal128(20, 0)]))
def test_the_arrow_extremes_are_rows_of_the_lowest_and_highest_identity(batch, sort_keys, number_type):
    columns = [pa.array([key[0] for key in batch], pa.string()), pa.array([key[1] for key in batch], number_type),
               pa.array([key[2] for key in batch], pa.string())]
    found = arrow_extremes(columns, sort_keys)
    if not batch:
        assert found is None
        return
    low, high = found
    found_span = (key_identity(batch[low], sort_keys), key_identity(batch[high], sort_keys))
    assert found_span == identity_span(batch, sort_keys)


def test_arrow_extremes_refuse_types_whose_arrow_order_is_not_the_identitys():
    assert arrow_extremes([pa.array([b"\x01", b"\x02"])], [None]) is None  # binary: keys are base64 text
    assert arrow_extremes([pa.array([1.5, 2.5])], [None]) is None
    assert arrow_extremes([pa.array(["1.50", "2.25"]).cast(pa.decimal128(10, 2))], [None]) is None
