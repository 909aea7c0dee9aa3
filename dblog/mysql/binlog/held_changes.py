"""The row changes of prepared XA transactions, held until each is decided, in bounded memory.

A prepared transaction's changes may be delivered only at its `XA COMMIT` (`dblog.mysql.binlog.source`),
which can come long after; a transaction can be of any size, and any number of them can be
prepared at once. One `HeldChangesStore` per binlog source holds them all (`hold()` gives each
transaction its `HeldChanges`) under one budget, whatever their number:

* Memory: at most `memory_rows` changes, and `memory_bytes` of them as the binlog carried them
  (`change_bytes`: a few rows of large BLOBs weigh more than many small ones), are in memory
  across every held transaction, at every moment. When a rows event's changes would not fit, the
  largest held transactions (by their share of the budget, rows or bytes, whichever is larger;
  the newest first among equals) are spilled whole until they fit and at most half the budget
  is left in memory. The largest first: each write frees the most, and the many small
  transactions of an OLTP load, decided within moments, stay in memory; the newest first among
  equals: prepared transactions are mostly decided in the order they were prepared, so the
  oldest are read back soonest. Down to half: a burst of rows events after a spill does not
  spill again at each event. A rows event larger than the whole budget goes to the file as it
  comes (after the transaction's own changes in memory, so the order holds).
* Files: the spilled changes are appended, pickled in slices of at most `slice_rows` changes
  and `slice_bytes`, to ONE anonymous temporary file for all transactions (one file descriptor
  however many are spilled, two while it is compacted; unlinked at once, so a crash leaves
  nothing behind), and each
  transaction keeps where its slices are. Reading a transaction back at its commit holds one
  slice at a time. A decided transaction's slices are garbage: the file is closed when nothing
  spilled is held any more, and when its garbage exceeds both what is still held in it and
  `compact_bytes`, the held slices are copied to a new file, so the disk holds at most about
  twice what is spilled, plus `compact_bytes`.

Pickling is what the reader process already does with every event it hands the engine
(`dblog.mysql.binlog.process`). Not thread-safe: the binlog source's one thread uses it.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterable, Iterator
from itertools import count
from typing import BinaryIO

from dblog.core.events import RowChange, change_bytes

MEMORY_ROWS = 100_000  # source.max_held_xa_rows: all prepared transactions' changes in memory
MEMORY_BYTES = 64 * 1024 * 1024  # source.max_held_xa_bytes
SLICE_ROWS = 1_000  # changes per pickled slice of the file: what reading back holds at once
SLICE_BYTES = 1 << 20  # and their bytes (change_bytes)
COMPACT_BYTES = 64 * 1024 * 1024  # garbage in the file below which it is not compacted


class HeldChangesStore:
    """Every prepared XA transaction's held changes, under one memory budget and in one
    temporary file (see the module docstring)."""

    def __init__(self, memory_rows: int = MEMORY_ROWS, memory_bytes: int = MEMORY_BYTES,
                 compact_bytes: int = COMPACT_BYTES, slice_rows: int = SLICE_ROWS,
                 slice_bytes: int = SLICE_BYTES) -> None:
        self.memory_rows = memory_rows
        self.memory_bytes = memory_bytes
        self.compact_bytes = compact_bytes
        self.slice_rows, self.slice_bytes = slice_rows, slice_bytes
        self.rows_in_memory = 0  # changes in memory, over every held transaction
        self.bytes_in_memory = 0  # and their change_bytes
        self._held: dict[HeldChanges, None] = {}  # in the order they were held: the oldest first
        self._order = count()
        self._file: BinaryIO | None = None  # from the first spill while something spilled is held
        self._end = 0  # bytes written to the file
        self._live = 0  # bytes of slices still held

    def hold(self) -> HeldChanges:
        """A new, empty holder of one transaction's changes (give it back with its `close`)."""
        held = HeldChanges(self, next(self._order))
        self._held[held] = None
        return held

    @property
    def open_files(self) -> int:
        """File descriptors the store holds: 1 while spilled changes are held, else 0."""
        return 0 if self._file is None else 1

    @property
    def file_bytes(self) -> int:
        """The temporary file's size: slices still held, and garbage not compacted yet."""
        return self._end

    def close(self) -> None:
        """Forget every held transaction and close the file."""
        for held in list(self._held):
            held.close()
        self._close_file()

    # --- for HeldChanges ---------------------------------------------------------------------

    def _admit(self, rows: int, size: int) -> bool:
        """Make room in memory for `rows` changes of `size` bytes, spilling the largest held
        transactions; False when they would not fit in the whole budget."""
        if self.rows_in_memory + rows <= self.memory_rows and self.bytes_in_memory + size <= self.memory_bytes:
            return True
        if rows > self.memory_rows or size > self.memory_bytes:
            return False
        room_rows = min(self.memory_rows // 2, self.memory_rows - rows)
        room_bytes = min(self.memory_bytes // 2, self.memory_bytes - size)

        def weight(held: HeldChanges) -> tuple[float, int]:
            return max(len(held._memory) / self.memory_rows, held._memory_bytes / self.memory_bytes), held._number

        for held in sorted((held for held in self._held if held._memory), key=weight, reverse=True):
            if self.rows_in_memory <= room_rows and self.bytes_in_memory <= room_bytes:
                break
            held._spill()
        return True

    def _write(self, held: HeldChanges, changes: list[RowChange]) -> None:
        """Append `changes` to the file as `held`'s next slices."""
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="dblog-xa-")
            self._end = 0
        file = self._file
        file.seek(self._end)
        start, rows, size = 0, 0, 0
        for index, change in enumerate(changes):
            rows += 1
            size += change_bytes(change)
            if rows >= self.slice_rows or size >= self.slice_bytes or index == len(changes) - 1:
                data = pickle.dumps(changes[start:index + 1], protocol=pickle.HIGHEST_PROTOCOL)
                file.write(data)
                held._slices.append((self._end, len(data), rows))
                held._spilled += rows
                self._end += len(data)
                self._live += len(data)
                start, rows, size = index + 1, 0, 0

    def _read(self, offset: int, length: int) -> list[RowChange]:
        file = self._file
        file.flush()
        file.seek(offset)
        return pickle.loads(file.read(length))

    def _forget(self, held: HeldChanges) -> None:
        self.rows_in_memory -= len(held._memory)
        self.bytes_in_memory -= held._memory_bytes
        self._live -= sum(length for _, length, _ in held._slices)
        self._held.pop(held, None)
        if self._file is None:
            return
        if self._live == 0:
            self._close_file()
        elif self._end - self._live > max(self._live, self.compact_bytes):
            self._compact()

    def _compact(self) -> None:
        """Copy the slices still held to a new file, in order, and drop the old one."""
        old, new = self._file, tempfile.TemporaryFile(prefix="dblog-xa-")
        end = 0
        try:
            old.flush()
            for held in self._held:
                moved = []
                for offset, length, rows in held._slices:
                    old.seek(offset)
                    new.write(old.read(length))
                    moved.append((end, length, rows))
                    end += length
                held._slices[:] = moved  # in place: a holder being read back reads on from here
        except BaseException:
            new.close()
            raise
        old.close()
        self._file, self._end, self._live = new, end, end

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file, self._end, self._live = None, 0, 0


class HeldChanges:
    """One prepared transaction's changes, in order: the earliest in the store's file (its
    slices), the latest in memory."""

    __slots__ = ("_store", "_number", "_memory", "_memory_bytes", "_slices", "_spilled")

    def __init__(self, store: HeldChangesStore, number: int) -> None:
        self._store = store
        self._number = number  # the order it was held in: newer holders have higher numbers
        self._memory: list[RowChange] = []
        self._memory_bytes = 0  # change_bytes of the changes in memory
        self._slices: list[tuple[int, int, int]] = []  # (offset, length, changes) in the store's file
        self._spilled = 0  # changes in the file

    def extend(self, changes: Iterable[RowChange]) -> None:
        batch = list(changes)
        if not batch:
            return
        size = sum(map(change_bytes, batch))
        store = self._store
        if store._admit(len(batch), size):
            self._memory.extend(batch)
            self._memory_bytes += size
            store.rows_in_memory += len(batch)
            store.bytes_in_memory += size
        else:  # larger than the whole budget: to the file as it comes, after what is in memory
            self._spill()
            store._write(self, batch)

    def _spill(self) -> None:
        if not self._memory:
            return
        store = self._store
        store._write(self, self._memory)
        store.rows_in_memory -= len(self._memory)
        store.bytes_in_memory -= self._memory_bytes
        self._memory, self._memory_bytes = [], 0

    @property
    def spilled(self) -> int:
        """Changes held in the temporary file rather than in memory."""
        return self._spilled

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[RowChange]:
        """Every change, in the order held (read back from the file a slice at a time first)."""
        index = 0
        while index < len(self._slices):
            offset, length, _ = self._slices[index]  # looked up afresh: a compaction may have moved it
            yield from self._store._read(offset, length)
            index += 1
        yield from self._memory

    def close(self) -> None:
        """The transaction is decided: its changes are dropped, its share of the budget and
        of the file given back."""
        self._store._forget(self)
        self._memory, self._memory_bytes, self._slices, self._spilled = [], 0, [], 0
