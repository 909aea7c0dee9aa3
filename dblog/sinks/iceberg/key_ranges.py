"""The key ranges a table can hold rows in, as far as the sink has written it.

A batch of snapshot reads may be appended instead of MERGEd when the table holds none of its
keys (`SparkIcebergSink._can_append`). Iceberg's column metrics answer that one column at a
time, which fails for composite keys: a batch that crossed from region `ap` to `eu` leaves a
file whose `order_id` bounds span every order id and whose `region` bounds span `ap`..`eu`,
and every later batch of `eu` then overlaps it in both columns, though no key of them can be in
it. Whole keys compared as tuples do not have that blind spot. The sink is the table's only
writer, so once it has seen the table without data files, every key the table can hold lies in
the [lowest, highest] key of some batch it committed since (deletes only take keys away,
compaction moves them between files). Keys are compared by identity (`TableSchema.identity_of`:
string columns by their collation's sort key), the order the snapshot reads them in: values the
MERGE finds equal have one identity, and any total order of identities serves, as long as the
same one records and checks. By raw values a batch that read "eu", "ÉU-nord", "latam" in
collation order would span everything from "latam" to "ÉU-nord" in code-point order.
"""

from __future__ import annotations

import bisect
from typing import Any

Key = tuple[Any, ...]


class KeyRanges:
    """Disjoint, sorted closed intervals of keys; adding one merges those it touches."""

    def __init__(self) -> None:
        self._lows: list[Key] = []
        self._highs: list[Key] = []

    def __len__(self) -> int:
        return len(self._lows)

    def add(self, low: Key, high: Key) -> None:
        if high < low:
            raise ValueError(f"empty key range {low!r}..{high!r}")
        first = bisect.bisect_left(self._highs, low)  # the first interval that ends at or after low
        last = bisect.bisect_right(self._lows, high)  # past the last that starts at or before high
        if first < last:
            low = min(low, self._lows[first])
            high = max(high, self._highs[last - 1])
        self._lows[first:last] = [low]
        self._highs[first:last] = [high]

    def overlaps(self, low: Key, high: Key) -> bool:
        """True when some recorded key may lie within [low, high]."""
        first = bisect.bisect_left(self._highs, low)
        return first < len(self._lows) and self._lows[first] <= high

    def intervals(self) -> list[tuple[Key, Key]]:
        return list(zip(self._lows, self._highs))
