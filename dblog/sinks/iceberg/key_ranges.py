"""The key ranges a table can hold rows in, as far as the sink has written it.

A batch without deletes (a snapshot's reads, inserts) may be appended instead of MERGEd when
the table holds none of its keys (`dblog.sinks.iceberg.merge.TableWrites._can_append`). Iceberg's
column metrics answer that one column at a time, which fails for composite keys: a batch that crossed from
region `ap` to `eu` leaves a file whose `order_id` bounds span every order id and whose `region`
bounds span `ap`..`eu`, and every later batch of `eu` then overlaps it in both columns, though
no key of them can be in it. Whole keys compared as tuples do not have that blind spot. The sink is the table's only
writer, so once it has seen the table without data files, every key the table can hold lies in
the [lowest, highest] key of some batch it committed since (deletes only take keys away,
compaction moves them between files); a table with a single integer key starts from its files'
lowest and highest bound instead. Keys are compared by identity (`TableSchema.identity_of`:
string columns by their collation's sort key), the order the snapshot reads them in: values the
MERGE finds equal have one identity, and any total order of identities serves, as long as the
same one records and checks. By raw values a batch that read "eu", "ÉU-nord", "latam" in
collation order would span everything from "latam" to "ÉU-nord" in code-point order.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Key = tuple[Any, ...]
SortKey = Callable[[Any], Any]  # a string column's value -> its collation sort key


def identity_span(keys: Sequence[Key], sort_keys: Sequence[SortKey | None]) -> tuple[Key, Key] | None:
    """The lowest and highest identity of `keys` (None for none): each value replaced by its
    column's sort key (`TableSchema.identity_of`), then made orderable (`orderable`).

    Column by column rather than key by key: the extreme identity of the first column, then
    among the keys holding it the extreme of the second, and so on, each distinct value sort-keyed
    once. For a batch of snapshot reads whose first key column holds a few regions this is a
    tenth of the time of computing every key's identity, time the snapshot's reader waits for."""
    if not keys:
        return None
    return _extreme(keys, sort_keys, min), _extreme(keys, sort_keys, max)


def arrow_extremes(columns: Sequence[pa.Array], sort_keys: Sequence[SortKey | None]) -> tuple[int, int] | None:
    """The row indices of the lowest and highest identity among the rows of `columns` (a
    batch's key columns, typed as in `arrow_batch`), as `identity_span` orders them; None when
    there are no rows, or a column's type is not one whose Arrow order is its identity's order:
    integers (also as DECIMAL(p, 0): an unsigned BIGINT's; the caller passes numbers only for
    columns whose keys are Python ints), and strings (code points compare as their UTF-8 bytes;
    a collated column by the rank of each distinct value's sort key).

    The batch's values are then read from Arrow's buffers, not from each change's key tuple:
    for a snapshot's batch of tens of thousands of rows scattered in memory that is what the
    key range costs (a few milliseconds against ~0.1 s a batch, paid in the GIL)."""
    if not columns or len(columns[0]) == 0:
        return None
    ranked = []
    for array, sort_key in zip(columns, sort_keys):
        numeric = pa.types.is_integer(array.type) or (pa.types.is_decimal(array.type) and array.type.scale == 0)
        if numeric and sort_key is None:
            ranked.append(array)
        elif pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            ranked.append(array if sort_key is None else _ranks(array, sort_key))
        else:
            return None
    table = pa.table({str(index): column for index, column in enumerate(ranked)})
    order = pc.sort_indices(table, sort_keys=[(name, "ascending") for name in table.column_names])
    return order[0].as_py(), order[-1].as_py()


def _ranks(array: pa.Array, sort_key: SortKey) -> pa.Array:
    """Each value's rank among the distinct values by sort key (equal sort keys, equal ranks)."""
    distinct = pc.drop_null(pc.unique(array))  # (a key has no NULL; a NULL would rank last)
    identities = [orderable(sort_key(value)) for value in distinct.to_pylist()]
    ranks = [0] * len(identities)
    rank, previous = -1, None
    for index in sorted(range(len(identities)), key=identities.__getitem__):
        if rank < 0 or identities[index] != previous:
            rank, previous = rank + 1, identities[index]
        ranks[index] = rank
    return pc.take(pa.array(ranks, pa.int64()), pc.index_in(array, value_set=distinct))


def orderable(value: Any) -> tuple[int, Any]:
    """An identity's value, comparable with every other of its column: a sort key is a weight
    string, or the value's bytes where the collation has no weight for a character."""
    return (1, value) if isinstance(value, bytes) else (0, value)


def key_identity(key: Key, sort_keys: Sequence[SortKey | None]) -> Key:
    """One key's identity, as `identity_span` gives it."""
    return tuple(orderable(value if sort_key is None or value is None else sort_key(value))
                 for sort_key, value in zip(sort_keys, key))


def _extreme(keys: Sequence[Key], sort_keys: Sequence[SortKey | None], pick: Callable) -> Key:
    candidates = keys
    identity: list[tuple[int, Any]] = []
    for column, sort_key in enumerate(sort_keys):
        distinct = {key[column] for key in candidates}
        of = {value: orderable(value if sort_key is None or value is None else sort_key(value)) for value in distinct}
        best = pick(of.values())
        identity.append(best)
        candidates = [key for key in candidates if of[key[column]] == best]
    return tuple(identity)


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
