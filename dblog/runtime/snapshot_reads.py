"""Snapshot reads against the source: the capture's `MaxKeyRead` / `ChunkRead` performed on
the server, between watermarks, and answered back to the capture. A blocking read's chunks need
no watermarks (the stream waits for them) and share one consistent snapshot on MariaDB; a table
without a key is read whole at an exact binlog position (`ChangeCapture.read_ahead`).

Which table may be read and how (its key, a surrogate key, a refusal) is checked here because
it needs the server's schema; what the answers mean is the capture's business.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

import pymysql

from dblog.core.capture import ChangeCapture, ChunkRead, ChunkResult, Emission, MaxKeyRead, StagedRead
from dblog.core.events import TableId
from dblog.core.progress import TableSnapshot
from dblog.core.sql import quote_identifier
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidSet
from dblog.core.window import GtidWatermarks, Watermarks
from dblog.mysql.chunk_reader import ChunkReader, ChunkRequest, whole_table_query
from dblog.mysql.consistent_snapshot import ConsistentSnapshot
from dblog.mysql.parallel_read import ParallelChunkReads
from dblog.mysql.schema import TableNotFound, TableSchema
from dblog.mysql.schema_catalog import KeyColumnsError, SchemaCatalog
from dblog.mysql.server_errors import refused_by_server
from dblog.mysql.server_session import ServerSession
from dblog.runtime.config import SnapshotConfig
from dblog.runtime.select_overrides import OverrideRefused, override_source
from dblog.runtime.signal_client import insert_signal
from dblog.runtime.watermark_modes import watermark_mode

log = logging.getLogger("dblog")

# Tables whose schemas are loaded together as a snapshot reaches one not loaded yet (the table
# and those queued after it): a snapshot of 10,000 tables makes 40 batches of queries, not 30,000.
PRELOAD_TABLES = 250


class SnapshotRefused(Exception):
    """A table that cannot be snapshotted; `status` is its TABLE_SCAN_COMPLETED status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SnapshotReads:
    """`server`: the session that waits for visibility and reads watermarks; `schemas`: the
    tables' schemas and given keys; `chunks`: what reads a window's chunks (one connection's
    reader, or it and more connections at once); `connect`: a new connection (signal-table watermarks are written on
    their own); `key_changed(table)`: a keyless table was just keyed by a surrogate key (the
    binlog reader re-keys what it decoded before)."""

    def __init__(self, server: ServerSession, schemas: SchemaCatalog, chunks: ChunkReader | ParallelChunkReads,
                 settings: SnapshotConfig,
                 signal_table: TableId, connect: Callable[[], pymysql.Connection],
                 key_changed: Callable[[TableId], None]) -> None:
        self.server = server
        self.schemas = schemas
        self.chunks = chunks
        self.settings = settings
        self.signal_table = signal_table
        self.connect = connect
        self.key_changed = key_changed
        self.watermark_mode = watermark_mode(settings.watermarks, signal_table)
        self.chunk_started: float | None = None  # time.monotonic() when the last chunk read began
        # What runs StagedReads (snapshot.distributed): dblog.runtime.distributed_snapshot.DistributedReads
        self.distributed = None
        # Told (seconds, whether it had to wait) after each visibility check: the engine's metrics.
        self.on_visibility_wait: Callable[[float, bool], None] | None = None
        self._estimates: dict[TableId, int | None] = {}  # row estimates of the next tables queued
        self._sources: dict[tuple[TableId, str], str] = {}  # snapshot.select_overrides, checked
        self._consistent: ConsistentSnapshot | None = None  # the blocking reads' snapshot (MariaDB)

    def perform(self, capture: ChangeCapture, read: MaxKeyRead | ChunkRead | StagedRead) -> list[Emission]:
        """Make `read` and hand its answer to `capture`; return what the capture emits. A
        StagedRead only starts: its window opens and Spark tasks read on while the loop goes on."""
        emissions = self._perform(capture, read)
        self.settle(capture)
        return emissions

    def settle(self, capture: ChangeCapture) -> None:
        """End the blocking reads' consistent snapshot once none is under way (done, stopped or
        paused): an open transaction holds back the server's purge of old row versions."""
        if self._consistent is not None and not self._blocking_under_way(capture):
            self.close()

    def _perform(self, capture: ChangeCapture, read: MaxKeyRead | ChunkRead | StagedRead) -> list[Emission]:
        snapshot = read.snapshot
        if isinstance(read, MaxKeyRead):
            self._preload_schemas(capture, snapshot)
            keyless = self._keyless(snapshot)
            if keyless is not None:
                return self._read_whole(capture, read, keyless)
        try:
            schema, paging = self._schemas(snapshot)
            source = self._source(snapshot, paging)
        except SnapshotRefused as refusal:
            return self._table_failed(capture, read, refusal)
        if isinstance(read, StagedRead):
            self.distributed.start(capture, read, schema, paging)
            return []
        try:
            if isinstance(read, MaxKeyRead):
                # In every watermark mode: a largest key committed before the loop's position
                # but not yet visible would lie above the max key and behind the stream.
                self.wait_until_visible(read)
                snapshot.estimated_rows = self._estimated_rows(capture, snapshot.table)
                snapshot.started_ms = snapshot.updated_ms = now_ms()
                reader = self._reader(capture, read)
                max_key = reader.max_key(paging, snapshot.condition, source)
                return capture.max_key_read(read, max_key, self._empty_after(read, reader))
            started = self.chunk_started = time.monotonic()
            rows, watermarks = self._read_between_watermarks(capture, read, paging, source)
        except pymysql.err.MySQLError as error:
            return self._read_refused(capture, read, error)
        snapshot.updated_ms = now_ms()
        result = ChunkResult(
            [(schema.key_of(row), row) for row in rows], watermarks,
            last_key=paging.key_of(rows[-1]) if rows else None,
            identity=schema.identity_of, paging_identity=paging.identity_of,
            bytes_read=rows.bytes_read, cut_short=rows.cut_short,
            read_seconds=time.monotonic() - started,  # how long this read paused the binlog
        )
        return capture.chunk_read(read, result)

    def _empty_after(self, read: MaxKeyRead, reader: ChunkReader | ParallelChunkReads | None = None) -> int:
        """How many of `read.later` (the startup snapshot's next tables, read with Debezium's
        markers), from the first, have no row now: read at the max key's point, so whatever
        they get later is streamed. A table that cannot be read stops the count (its own turn
        says why)."""
        empty = 0
        for entry in read.later:
            try:
                keyless = self._keyless(entry)
                if keyless is not None:
                    sql = whole_table_query(keyless, entry.condition, self._source(entry, keyless)) + " LIMIT 1"
                    if self.server.fetch(sql):
                        break
                    empty += 1
                    continue
                _, paging = self._schemas(entry)
                if (reader or self.chunks).max_key(paging, entry.condition, self._source(entry, paging)) is not None:
                    break
            except SnapshotRefused:
                break
            except pymysql.err.MySQLError as error:
                if not refused_by_server(error):
                    raise
                break
            empty += 1
        return empty

    def _preload_schemas(self, capture: ChangeCapture, snapshot: TableSnapshot) -> None:
        """A table's snapshot starts and its schema is not loaded: load it with those of the
        next tables queued (`PRELOAD_TABLES`), many per query, not three queries per table."""
        if self.schemas.cached(snapshot.table):
            return
        upcoming = [entry.table for entry in capture.progress.queue[:PRELOAD_TABLES]]
        self.schemas.preload([snapshot.table, *upcoming])

    def _estimated_rows(self, capture: ChangeCapture, table: TableId) -> int | None:
        """The server's row estimate of a table whose snapshot starts, asked for with those of
        the next tables queued (`PRELOAD_TABLES`; an estimate, for progress and ETA only)."""
        if table not in self._estimates:
            upcoming = [entry.table for entry in capture.progress.queue[:PRELOAD_TABLES]]
            self._estimates = self.server.estimated_rows_of([table, *upcoming])  # the last batch's are dropped
        return self._estimates.pop(table, None)

    def _schemas(self, snapshot: TableSnapshot) -> tuple[TableSchema, TableSchema]:
        """The table's schema (its primary key dedupes against the binlog) and the schema whose
        key orders the chunks: the surrogate key when the signal gave one."""
        try:
            schema = self.schemas.schema(snapshot.table)
        except TableNotFound as error:
            raise SnapshotRefused("UNKNOWN_SCHEMA", str(error)) from error
        if not schema.key_columns and snapshot.surrogate_key:
            # A table without a primary key: the signal's surrogate key becomes its key, for
            # the binlog's changes as well, so that the window can drop what the log touched.
            try:
                self.schemas.set_key(snapshot.table, (snapshot.surrogate_key,))
            except KeyColumnsError as error:
                raise SnapshotRefused("NO_PRIMARY_KEY", str(error)) from error
            self.key_changed(snapshot.table)
            return self.schemas.schema(snapshot.table), self.schemas.schema(snapshot.table)
        if not schema.key_columns:
            raise SnapshotRefused(
                "NO_PRIMARY_KEY",
                f"{snapshot.table} has no primary key: give the signal a 'surrogate-key' naming a unique NOT NULL "
                f"column, or set source.key_columns = {{\"{snapshot.table}\" = [\"col\"]}}",
            )
        if not snapshot.surrogate_key:
            return schema, schema
        if not schema.has_column(snapshot.surrogate_key):
            raise SnapshotRefused(
                "UNKNOWN_SCHEMA", f"surrogate key {snapshot.surrogate_key!r} is not a column of {snapshot.table}"
            )
        if not snapshot.started:  # when its scan starts (not per chunk: it costs a query)
            try:  # paging by a duplicated or NULL value would skip rows
                self.schemas.check_key(schema, (snapshot.surrogate_key,))
            except KeyColumnsError as error:
                raise SnapshotRefused(
                    "UNKNOWN_SCHEMA",
                    f"surrogate key {snapshot.surrogate_key!r} cannot page {snapshot.table}: the table "
                    f"{error.problem}; give a NOT NULL column with a UNIQUE index of its own as 'surrogate-key', "
                    "or leave 'surrogate-key' out to page by the primary key",
                ) from error
        return schema, dataclasses.replace(schema, key_columns=(snapshot.surrogate_key,))

    def _read_between_watermarks(self, capture: ChangeCapture, read: ChunkRead, schema: TableSchema,
                                 source: str | None = None) -> tuple[list, Watermarks]:
        request = ChunkRequest(schema, read.after_key, read.max_key, read.limit, read.snapshot.condition,
                               read.max_bytes, self.settings.parallel_reads, source)
        mode = self.watermark_mode
        if read.snapshot.blocking:  # the stream waits at the read's position: no window to bound
            at = read.position if read.position is not None else self.server.executed_gtids()
            return self._reader(capture, read).read_chunk(request), GtidWatermarks(at, at)
        watermarks = mode.watermarks(read)
        mode.open(watermarks, read, self)
        rows = self.chunks.read_chunk(request)
        return rows, mode.close(watermarks, self)

    # --- blocking reads: one consistent snapshot (MariaDB) ------------------------------------------

    def _reader(self, capture: ChangeCapture, read: MaxKeyRead | ChunkRead) -> ChunkReader | ParallelChunkReads:
        """What reads `read`: for a blocking read on MariaDB, the consistent snapshot the
        blocking reads share (opened by the first, once the server shows what the stream has
        passed), whose exact position the capture drops the table's streamed changes up to
        (`ChangeCapture.read_ahead`): the rows and the stream then meet exactly, as Debezium's
        initial snapshot and its binlog position do. Elsewhere the loop's own reader (MySQL's
        blocking chunks are each read at their own moment)."""
        if not read.snapshot.blocking:
            return self.chunks
        if self.server.flavor() != "mariadb":
            if self.watermark_mode.waits_for_visibility:
                self.wait_until_visible(read)
            return self.chunks
        if self._consistent is None:
            self.wait_until_visible(read)
            self._consistent = ConsistentSnapshot(self.connect, self.server.file_positions)
        capture.read_ahead(read.snapshot.table, self._consistent.seen)
        return _CheckedReader(self._consistent)

    @staticmethod
    def _blocking_under_way(capture: ChangeCapture) -> bool:
        current = capture.progress.current
        return current is not None and current.blocking and not capture.progress.paused

    def close(self) -> None:
        """End the blocking reads' consistent snapshot, if one is open."""
        consistent, self._consistent = self._consistent, None
        if consistent is not None:
            consistent.close()

    def _source(self, snapshot: TableSnapshot, schema: TableSchema) -> str | None:
        """The SELECT the table's rows are read from (snapshot.select_overrides), checked and
        completed once per table and process (`dblog.runtime.select_overrides`)."""
        if snapshot.select is None:
            return None
        key = (snapshot.table, snapshot.select)
        if key not in self._sources:
            try:
                self._sources[key] = override_source(self.server, schema, snapshot.select)
            except OverrideRefused as refusal:
                raise SnapshotRefused("SQL_EXCEPTION", str(refusal)) from None
        return self._sources[key]

    # --- tables without a key: read whole ahead of the stream -------------------------------------

    def _keyless(self, snapshot: TableSnapshot) -> TableSchema | None:
        """The schema of the table when it has no key to page by (none given by the signal, nor
        by source.key_columns): it is read whole (`_read_whole`)."""
        if snapshot.surrogate_key:
            return None
        try:
            schema = self.schemas.schema(snapshot.table)
        except TableNotFound:
            return None  # `_schemas` reports it
        return None if schema.key_columns else schema

    def _read_whole(self, capture: ChangeCapture, read: MaxKeyRead, schema: TableSchema) -> list[Emission]:
        """A table without a key cannot be read in chunks by key, nor can a window tell which
        of its rows a change touched. So it is read whole in one consistent snapshot whose exact
        binlog position the server states (MariaDB: `binlog_snapshot_file`/`_position`, as a
        GTID set with BINLOG_GTID_POS): its rows are emitted at once, and the stream drops this
        table's changes up to that position, which the rows already hold
        (`ChangeCapture.read_whole`). Streaming waits during the read, as for a chunk."""
        snapshot = read.snapshot
        if self.server.flavor() != "mariadb":
            return capture.table_failed(read, "NO_PRIMARY_KEY", (
                f"{snapshot.table} has no primary key, and on MySQL dblog reads such a table only by a key (a "
                "consistent read's binlog position needs a lock there): give the signal a 'surrogate-key' naming a "
                f"unique NOT NULL column, or set source.key_columns = {{\"{snapshot.table}\" = [\"col\"]}}"))
        try:
            source = self._source(snapshot, schema)
            self.wait_until_visible(read)  # the read sees at least what the stream has passed
            snapshot.estimated_rows = None
            snapshot.started_ms = now_ms()
            self.chunk_started = time.monotonic()
            limit = int(self.settings.keyless_max_bytes)
            rows, file, position = self.chunks.read_whole(schema, snapshot.condition, source, limit)
            if rows.cut_short:
                return capture.table_failed(read, "NO_PRIMARY_KEY", (
                    f"{snapshot.table} has no primary key, so dblog reads it whole into memory, and its rows take more "
                    f"than snapshot.keyless_max_bytes ({limit:,} bytes on the wire): give the signal a "
                    "'surrogate-key' naming a unique NOT NULL column, or set source.key_columns = "
                    f"{{\"{snapshot.table}\" = [\"col\"]}} (it is then read in chunks), or raise "
                    "snapshot.keyless_max_bytes if the memory allows (about twice it)"))
            if self.server.file_positions:  # (dblog.core.file_positions: the coordinate is the position)
                text = str(FilePosition(file, int(position)).position())
            else:
                text = self.server.fetch("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))[0][0] or ""
            empty_after = self._empty_after(read)
        except SnapshotRefused as refusal:
            return self._table_failed(capture, read, refusal)
        except pymysql.err.MySQLError as error:
            return self._read_refused(capture, read, error)
        seen = GtidSet.parse(text.decode() if isinstance(text, bytes) else text, flavor="mariadb")
        snapshot.updated_ms = now_ms()
        log.info("%s has no primary key: read whole (%d rows) in one consistent snapshot at %s", snapshot.table,
                 len(rows), seen)
        return capture.read_whole(read, [(schema.key_of(row), row) for row in rows], seen, empty_after)

    @staticmethod
    def _table_failed(capture: ChangeCapture, read: MaxKeyRead | ChunkRead | StagedRead,
                      refusal: SnapshotRefused) -> list[Emission]:
        log.warning("cannot snapshot %s: %s", read.snapshot.table, refusal.reason)
        return capture.table_failed(read, refusal.status, refusal.reason)

    def _read_refused(self, capture: ChangeCapture, read: MaxKeyRead | ChunkRead,
                      error: pymysql.err.MySQLError) -> list[Emission]:
        """The server refused a read: DDL the loop has not consumed yet broke it (the capture
        holds reads until it has, then reads again with the new schema), or the query itself is
        wrong (e.g. a filter naming a dropped column: the table fails, streaming goes on). Any
        other error (a lost connection) is the caller's to retry."""
        if not refused_by_server(error):
            raise error
        emissions = capture.read_refused(read, self.server.executed_gtids(), str(error))
        if emissions:
            log.warning("snapshot of %s failed: %s", read.snapshot.table, error)
        else:
            log.info("snapshot of %s: %s; reading again once the binlog reader has passed the DDL",
                     read.snapshot.table, error)
        return emissions

    # --- the window's side on the server (`WindowServer`), on the loop's own session ------------

    def wait_until_visible(self, read: MaxKeyRead | ChunkRead) -> None:
        started = time.monotonic()
        waited = self.server.wait_until_visible(read.position, read.must_see, self.settings.visibility_timeout_seconds)
        if self.on_visibility_wait is not None:
            self.on_visibility_wait(time.monotonic() - started, bool(waited))

    def executed_gtids(self) -> GtidSet:
        return self.server.executed_gtids()

    def write_signal(self, signal_id: str, signal_type: str) -> None:
        """A watermark marker row, on a connection of its own (any thread)."""
        with self.connect() as connection, connection.cursor() as cursor:
            insert_signal(cursor, self.signal_table, signal_id, signal_type, {"ts_ms": now_ms()})

    def delete_signal(self, signal_id: str) -> None:
        db, table = self.signal_table
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {quote_identifier(db)}.{quote_identifier(table)} WHERE id = %s", (signal_id,))


class _CheckedReader:
    """The consistent snapshot's reader, each read checked to have run inside it."""

    def __init__(self, consistent: ConsistentSnapshot) -> None:
        self._consistent = consistent

    def max_key(self, schema: TableSchema, condition: str | None = None, source: str | None = None):
        found = self._consistent.reader.max_key(schema, condition, source)
        self._consistent.check()
        return found

    def read_chunk(self, request: ChunkRequest):
        rows = self._consistent.reader.read_chunk(request)
        self._consistent.check()
        return rows


def now_ms() -> int:
    return int(time.time() * 1000)
