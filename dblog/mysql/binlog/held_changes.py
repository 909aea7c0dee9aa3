"""The row changes of a prepared XA transaction, held until it is decided, in bounded memory.

A prepared transaction's changes may be delivered only at its `XA COMMIT` (`dblog.mysql.binlog.source`),
which can come long after, and a transaction can be of any size. Up to `memory_rows` changes,
and up to `memory_bytes` of them as the binlog carried them (`change_bytes`: a few rows of large
BLOBs weigh more than many small ones), stay in memory; past either they are appended, pickled in batches, to an anonymous temporary file
(unlinked at once: a crash leaves nothing behind) and read back, in order, when they are
released. Pickling is what the reader process already does with every event it hands the
engine (`dblog.mysql.binlog.process`).
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterable, Iterator

from dblog.core.events import RowChange, change_bytes

MEMORY_ROWS = 100_000  # source.max_held_xa_rows
MEMORY_BYTES = 64 * 1024 * 1024  # source.max_held_xa_bytes


class HeldChanges:
    def __init__(self, memory_rows: int = MEMORY_ROWS, memory_bytes: int = MEMORY_BYTES) -> None:
        self.memory_rows = memory_rows
        self.memory_bytes = memory_bytes
        self._memory: list[RowChange] = []
        self._memory_size = 0  # change_bytes of the changes in memory
        self._file = None  # the temporary file, from the first spill
        self._spilled = 0  # changes in the file

    def extend(self, changes: Iterable[RowChange]) -> None:
        start = len(self._memory)
        self._memory.extend(changes)
        self._memory_size += sum(change_bytes(change) for change in self._memory[start:])
        if len(self._memory) >= self.memory_rows or self._memory_size >= self.memory_bytes:
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="dblog-xa-")
        pickle.dump(self._memory, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._spilled += len(self._memory)
        self._memory, self._memory_size = [], 0

    @property
    def spilled(self) -> int:
        """Changes held in the temporary file rather than in memory."""
        return self._spilled

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[RowChange]:
        """Every change, in the order held (read back from the file first); once."""
        if self._file is not None:
            self._file.flush()
            self._file.seek(0)
            read = 0
            while read < self._spilled:
                batch = pickle.load(self._file)
                read += len(batch)
                yield from batch
        yield from self._memory

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._memory, self._memory_size, self._spilled = [], 0, 0
