"""Several consecutive chunks read at once, between one low and one high watermark.

With `snapshot.parallel_reads = N` the capture opens a window for N chunks (N x chunk_size rows,
N x chunk_bytes), and the `ChunkRequest` of that window carries N. `ParallelChunkReads` splits
that read into N parts (`ChunkRequest.part_limit`, `part_bytes`): it finds where parts 2..N
start with key-only queries (`ChunkReader.boundary`: the key of the chunk_size-th row after the
previous start), then sends every part's SELECT on its own connection and parses the results
one after the other (see `ParallelChunkReads`). Every part's SELECT runs after
the low watermark and before the high one, which is all the window needs: a change between
them to a key of any part drops that key, whichever part read it and whenever.

The parts must join up with no gap. A part that returns as many rows as it asked for (one more
than its boundary query counted) may not have reached its upper boundary (rows were inserted
inside it since the boundary query), and a
part the byte bound cut short ended early: the rows after such a part are dropped and the
window ends there, marked cut short so that the next read starts after its last row
(`combine_parts`, pure).

The speed-up is bounded by Python: rows are parsed in one thread, so the connections overlap
only the server's work and the network with the parsing (see benchmarks/README.md for what
this machine measured).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import pymysql

from dblog.core.events import Key
from dblog.mysql.chunk_reader import ChunkReader, ChunkRequest, ChunkRows
from dblog.mysql.schema import TableSchema
from dblog.mysql.server_errors import connection_lost
from dblog.mysql.server_session import ServerSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Part:
    """One part of a parallel read: rows with `after_key < key <= upto` (`upto` None: up to
    the read's max key), at most `limit` of them."""

    after_key: Key | None
    upto: Key | None
    limit: int


def plan_parts(after_key: Key | None, boundaries: list[Key], max_key: Key | None, limit: int) -> list[Part]:
    """Parts from `after_key` through each boundary (found `limit` rows apart), the last one
    up to `max_key`. A part ending at a boundary asks for one row more than the boundary
    query counted: if it gets that many, rows were inserted inside it and it may not have
    reached its boundary; if it gets fewer, it read everything up to the boundary."""
    starts = [after_key, *boundaries]
    return [Part(start, end, limit + 1) for start, end in zip(starts, boundaries)] + [
        Part(starts[-1], max_key, limit)]


def combine_parts(parts: list[Part], results: list[ChunkRows]) -> ChunkRows:
    """The rows of consecutive parts with no gap between them: up to and including the first
    part that may have stopped before its upper boundary (it got all the rows it asked for,
    or the byte bound cut it). If there is one, the result is marked cut short: fewer rows
    than asked do not mean that the table ends (the next read starts after its last row; such
    a part has at least one)."""
    combined = ChunkRows()
    for part, rows in zip(parts, results):
        combined.extend(rows)
        combined.bytes_read += rows.bytes_read
        if rows.cut_short or len(rows) >= part.limit:
            combined.cut_short = True
            return combined
    return combined


class ParallelChunkReads:
    """Reads with `parallelism` connections: `reader` (the engine's) finds the boundaries and
    reads the first part; `parallelism - 1` more readers read the others.

    No threads: every part's SELECT is sent first, then the results are parsed one after the
    other in this thread. The server runs the queries meanwhile and streams their rows into the
    sockets (it blocks once a socket's buffers are full, so memory stays bounded), so its work
    and the network overlap the parsing, which holds the GIL and would gain nothing from
    threads."""

    def __init__(self, reader: ChunkReader, connect: Callable[[], pymysql.Connection], parallelism: int) -> None:
        if parallelism < 2:
            raise ValueError("parallel reads need at least 2 connections")
        self.reader = reader
        self.parallelism = parallelism
        self._readers = [reader] + [ChunkReader(ServerSession(connect)) for _ in range(parallelism - 1)]

    def max_key(self, schema: TableSchema, condition: str | None = None, source: str | None = None) -> Key | None:
        return self.reader.max_key(schema, condition, source)

    def read_whole(self, schema: TableSchema, condition: str | None = None, source: str | None = None):
        return self.reader.read_whole(schema, condition, source)

    def read_chunk(self, request: ChunkRequest) -> ChunkRows:
        """As `ChunkReader.read_chunk`, in `request.parallel_reads` parts (at most `parallelism`)
        of `request.part_limit` rows; a request of one part is read whole by `reader`."""
        parallelism = request.parallel_reads
        if parallelism > self.parallelism:
            raise ValueError(f"a read in {parallelism} parts needs as many connections, not {self.parallelism}")
        if parallelism < 2:
            return self.reader.read_chunk(request)
        part_limit, part_bytes = request.part_limit, request.part_bytes
        boundaries: list[Key] = []
        start = request.after_key
        for _ in range(parallelism - 1):
            start = self.reader.boundary(request.part(start, request.max_key, part_limit, None))
            if start is None:
                break
            boundaries.append(start)
        parts = plan_parts(request.after_key, boundaries, request.max_key, part_limit)
        readers = self._readers[:len(parts)]
        try:
            if not self._same_server(readers):
                return self.reader.read_chunk(request)
            pending = [reader.send_chunk(request.part(part.after_key, part.upto, part.limit, part_bytes))
                       for reader, part in zip(readers, parts)]
            results = [ChunkReader.receive_chunk(cursor) for cursor in pending]
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as error:
            # Results may be left unread on any of the connections: start them all afresh.
            for reader in readers:
                reader.session.drop_connection()
            if not connection_lost(error):
                raise
            # A connection broke: this window is read on one connection (which retries once).
            return self.reader.read_chunk(request)
        return combine_parts(parts, results)

    def _same_server(self, readers: list[ChunkReader]) -> bool:
        """Whether every part's connection reaches the server of the engine's session, whose
        read views the window waited for. After a failover behind one address, a connection
        opened at another moment may reach another server, perhaps one that lags: its rows
        would be older than the window's. Such connections are dropped (the next read opens
        them again) and this window is read whole on the engine's connection."""
        expected = self.reader.session.identity()
        strangers = [reader for reader in readers[1:] if reader.session.identity() != expected]
        for reader in strangers:
            log.warning("a parallel read's connection reaches %s, not the engine's %s (a failover?): this window "
                        "is read on one connection", reader.session.identity(), expected)
            reader.session.drop_connection()
        return not strangers

    def close(self) -> None:
        for reader in self._readers[1:]:
            reader.session.close()
