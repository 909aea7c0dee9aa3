"""Issue 36, item 12: the changes of every prepared XA transaction share one memory budget
(`source.max_held_xa_rows` / `max_held_xa_bytes`) and one temporary file
(`dblog.mysql.binlog.held_changes.HeldChangesStore`). Driven by hypothesis over any interleaving
of transactions prepared, growing and decided (committed: read back; rolled back: dropped): at
no moment are more changes or bytes in memory than the budget, the store never holds more than
one file descriptor (counted in /proc/self/fd), its file never grows past twice what is still
spilled plus the compaction threshold, and each transaction reads back exactly its changes, in
order. Before, the bound was per transaction: N prepared transactions held N budgets and, once
spilled, N open files."""

from __future__ import annotations

import os

from hypothesis import given, settings, strategies as st

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.mysql.binlog.held_changes import HeldChangesStore

TABLE = TableId("shop", "t")
MEMORY_ROWS, MEMORY_BYTES, COMPACT_BYTES = 12, 4_000, 2_000


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


_operations = st.lists(st.one_of(
    st.tuples(st.just("prepare")),
    # a rows event: how many rows, each of how many bytes in the binlog (0: unknown, counted by its values)
    st.tuples(st.just("rows"), st.integers(0, 40), st.integers(1, 20), st.sampled_from([0, 10, 300, 1_500])),
    st.tuples(st.just("decide"), st.integers(0, 40), st.booleans()),
), max_size=60)


@settings(max_examples=300)
@given(_operations, st.integers(1, 4))
def test_every_prepared_transaction_shares_one_budget_and_one_file(operations, slice_rows):
    store = HeldChangesStore(MEMORY_ROWS, MEMORY_BYTES, compact_bytes=COMPACT_BYTES, slice_rows=slice_rows,
                             slice_bytes=1_000)
    fds = _open_fds()
    held: list = []  # (holder, the changes it was given)
    number = 0
    try:
        for operation in operations:
            if operation[0] == "prepare" or not held:
                held.append((store.hold(), []))
            if operation[0] == "rows":
                _, which, rows, size = operation
                holder, changes = held[which % len(held)]
                event = []
                for _ in range(rows):
                    number += 1
                    event.append(RowChange(TABLE, "c", (number,), None, {"id": number, "note": "x" * (size % 97)},
                                           SourceInfo(row=number), size=size))
                holder.extend(event)
                changes.extend(event)
            elif operation[0] == "decide":
                _, which, commit = operation
                holder, changes = held.pop(which % len(held))
                if commit:
                    assert list(holder) == changes  # every change once, in order, read back from file and memory
                holder.close()
            in_memory = [change for holder, _ in held for change in holder._memory]
            assert store.rows_in_memory == len(in_memory) <= MEMORY_ROWS
            assert store.bytes_in_memory <= MEMORY_BYTES
            assert all(len(holder) == len(changes) for holder, changes in held)
            assert store.open_files == (1 if any(holder.spilled for holder, _ in held) else 0)
            assert _open_fds() - fds <= 1
            spilled_bytes = sum(length for holder, _ in held for _, length, _ in holder._slices)
            assert store.file_bytes <= 2 * spilled_bytes + COMPACT_BYTES
        for holder, changes in held:
            assert list(holder) == changes
    finally:
        store.close()
    assert _open_fds() == fds and store.rows_in_memory == 0


def test_the_largest_transaction_is_spilled_first_and_the_newest_among_equals():
    store = HeldChangesStore(memory_rows=10)
    small, large, equal_older, equal_newer = (store.hold() for _ in range(4))
    change = RowChange(TABLE, "c", (1,), None, {"id": 1}, SourceInfo())
    small.extend([change])
    large.extend([change] * 5)
    large.extend([change])  # 6 rows
    assert store.rows_in_memory == 7
    equal_older.extend([change] * 2)
    equal_newer.extend([change] * 1)
    equal_newer.extend([change] * 1)  # 11 > 10: the largest spilled, down to at most half
    assert large.spilled == 6 and not small.spilled and not equal_older.spilled
    equal_older.extend([change] * 2)
    equal_newer.extend([change] * 2)
    small.extend([change] * 3)  # 9 + 3 > 10: of equal_older and equal_newer (4 each) the newer one
    assert equal_newer.spilled == 4 and not equal_older.spilled and not small.spilled
    assert store.rows_in_memory == 8 and store.open_files == 1
    store.close()
    assert store.open_files == 0
