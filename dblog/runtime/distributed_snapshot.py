"""Backfills read by the cluster (`snapshot.distributed = true`, Iceberg sink): one watermark
window covers many key ranges, which Spark tasks read from the source straight into staging
files. No row of them passes through the dblog process.

A `StagedRead` of the capture runs on a thread of its own while the loop goes on reading the
binlog (the window collects the keys the log touches, `dblog.core.window.StagedWindow`):

1. Low watermark: the capture opened the window at the loop's position when it handed the read
   out. GTID mode waits until SELECTs see all of it (as a chunk does); signal mode writes the
   open marker.
2. Ranges: key-only queries (`ChunkReader.boundary`) cut the key space after the table's last
   key into ranges of `distributed_range_rows` rows, as many as `distributed_window_rows` take;
   the last ends at the read's max key.
3. Spark reads them, one task per range, at most `distributed_tasks` at once (one Spark job per
   wave: the sink's MERGEs, submitted meanwhile, run between waves). A task reads its range
   with one keyset SELECT on its own connection (pymysql in the executor, `RangeTask.read`),
   and writes it as one Parquet file, typed like the Iceberg target, with each row's key
   identity (`identity_token`, collation rules included), renamed into place once complete.
4. High watermark: the server's executed GTID set read after every range is staged (signal
   mode: the close marker). The capture closes the window once the loop has passed it and
   emits a `StagedSnapshot` carrying the identities the log touched; the sink MERGEs the staged
   rows except those (`SparkIcebergSink.write_staged`).

Any complete read of a range made between the watermarks is a right one: a key the log did not
touch inside the window held one value all along, and the others are dropped. So a range whose
task failed is simply read again (Spark retries a task on a cluster; this thread submits the
ranges still missing again, up to `distributed_attempts` reads of each), and a range read twice
(speculation, a retry racing a late attempt) leaves one whole file: nothing is lost or doubled.
A range the server refused (DDL the loop has not consumed broke its query) ends the read as a
refused chunk does (`ChangeCapture.staged_read_refused`).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pymysql

from dblog.core.capture import ChangeCapture, Emission, StagedRead, StagedResult
from dblog.core.events import Key, TableId
from dblog.core.gtid import GtidSet
from dblog.core.window import Watermarks, identity_token
from dblog.mysql.chunk_reader import ChunkReader, ChunkRequest
from dblog.mysql.schema import TableSchema
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.server_session import ServerSession
from dblog.runtime.config import SnapshotConfig
from dblog.runtime.watermark_modes import watermark_mode
from dblog.mysql.server_errors import refused_by_server
from dblog.core.sql import quote_identifier
from dblog.sinks.iceberg.arrow_batch import Extremes, arrow_array, key_extremes, merge_extremes
from dblog.sinks.iceberg.staging import AFTER_JSON_COLUMN, IDENTITY_COLUMN, StagedRanges, StagingArea, filesystem
from dblog.sinks.iceberg.types import spark_type

log = logging.getLogger("dblog")

BACKFILL_POOL = "dblog-backfill"
WHOLE_RANGE = 2**62  # a range is read whole: its LIMIT never binds


@dataclass(frozen=True)
class KeyRange:
    """Rows with `after_key < key <= upto` (None: from the table's first key)."""

    index: int
    after_key: Key | None
    upto: Key


def plan_ranges(after_key: Key | None, boundaries: list[Key], max_key: Key) -> list[KeyRange]:
    """Consecutive ranges from `after_key` through each boundary, the last one up to `max_key`
    unless the last boundary is it."""
    ends = list(boundaries)
    if not ends or ends[-1] != max_key:
        ends.append(max_key)
    starts = [after_key, *ends[:-1]]
    return [KeyRange(index, start, end) for index, (start, end) in enumerate(zip(starts, ends))]


def range_file(index: int) -> str:
    return f"range-{index:06d}.parquet"


@dataclass(frozen=True)
class RangeTask:
    """What every task of one read needs, shipped to the executors: how to connect (TLS
    included: the PEM texts travel with it, so executors need no certificate files), the
    table's schema (its columns, its key identity) and the one its ranges are paged by, the
    read's condition, and the read's staging directory (a local path or a URI)."""

    connection: ConnectionSettings
    schema: TableSchema
    paging: TableSchema
    condition: str | None
    directory: str
    changelog: bool = False

    def read(self, key_range: KeyRange) -> tuple[int, int, Extremes, str | None, int]:
        """Stage one range (in the executor): (index, rows, key extremes, None, attempt), or
        (index, 0, {}, reason, attempt) when the server refused the query; `attempt`: Spark's
        attempt number of the task (0: its first). A range already staged (by an earlier
        attempt) is kept."""
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        fs, root = filesystem(self.directory)
        final = f"{root}/{range_file(key_range.index)}"
        keys = [column for column in self.schema.columns if column.name in self.schema.key_columns]
        if fs.get_file_info(final).type == pafs.FileType.File:
            staged = pq.read_table(final, filesystem=fs, columns=[column.name for column in keys])
            return key_range.index, staged.num_rows, key_extremes(keys, staged), None, attempt
        session = ServerSession(lambda: self.connection.connect(program_name="dblog-range-reader"))
        try:
            rows = ChunkReader(session).read_chunk(
                ChunkRequest(self.paging, key_range.after_key, key_range.upto, WHOLE_RANGE, self.condition))
        except pymysql.err.MySQLError as error:
            if refused_by_server(error):
                return key_range.index, 0, {}, str(error), attempt
            raise
        finally:
            session.close()
        staged = self.staged_table(rows)
        # A hidden name (Spark skips names starting with '.') until the file is whole.
        partial = f"{root}/.{key_range.index}-{uuid.uuid4().hex}.partial"
        pq.write_table(staged, partial, filesystem=fs, compression="none")
        fs.move(partial, final)
        return key_range.index, len(rows), key_extremes(keys, staged), None, attempt

    def schema_ddl(self) -> str:
        """The staged files' columns, as Spark reads them."""
        ddl = [f"{quote_identifier(column.name)} {spark_type(column)}" for column in self.schema.columns]
        ddl.append(f"{IDENTITY_COLUMN} STRING")
        if self.changelog:
            ddl.append(f"{AFTER_JSON_COLUMN} STRING")
        return ", ".join(ddl)

    def staged_table(self, rows: list[dict]) -> pa.Table:
        """Rows as the staging file holds them: the table's columns typed like the target's,
        each row's key identity, and with the changelog the row as JSON."""
        schema = self.schema
        arrays = [arrow_array(column, [row.get(column.name) for row in rows]) for column in schema.columns]
        names = [column.name for column in schema.columns]
        arrays.append(pa.array([identity_token(schema.identity_of(schema.key_of(row))) for row in rows], pa.string()))
        names.append(IDENTITY_COLUMN)
        if self.changelog:
            from dblog.sinks.iceberg.changelog import row_json

            arrays.append(pa.array([row_json(row) for row in rows], pa.string()))
            names.append(AFTER_JSON_COLUMN)
        return pa.Table.from_arrays(arrays, names=names)


def _read_range(task, key_range: KeyRange) -> tuple:
    """In the executor: `RangeTask.read` of the broadcast task."""
    return task.value.read(key_range)


class RangeReadFailed(RuntimeError):
    """A range could not be read in `distributed_attempts` attempts."""


@dataclass
class Outcome:
    """What the read's thread hands the loop: a result, or a refusal."""

    result: StagedResult | None = None
    refused: tuple[GtidSet, str] | None = None


@dataclass
class ReadUnderWay:
    """One read's state, shared by the loop's thread and the read's own."""

    read: StagedRead
    directory: str  # in the staging area
    group: str  # Spark job group: cancelled together
    future: Future = field(default_factory=Future)
    cancelled: threading.Event = field(default_factory=threading.Event)
    rows_staged: dict[int, int] = field(default_factory=dict)  # range index -> rows (read's thread only)
    extremes: dict[int, Extremes] = field(default_factory=dict)  # range index -> key columns' (min, max)
    rows_so_far: int = 0  # rows staged so far, for the loop's thread to read


class _ReadSession:
    """The window's side on the server (`WindowServer`) for a read by Spark tasks: the read's own
    session (it runs off the loop's thread) and the signal-table marker writers."""

    def __init__(self, session: ServerSession, visibility_timeout: float, write_signal: Callable[[str, str], None],
                 delete_signal: Callable[[str], None]) -> None:
        self.session = session
        self.visibility_timeout = visibility_timeout
        self.write_signal = write_signal
        self.delete_signal = delete_signal

    def wait_until_visible(self, read: StagedRead) -> None:
        self.session.wait_until_visible(read.position, read.must_see, self.visibility_timeout)

    def executed_gtids(self) -> GtidSet:
        return self.session.executed_gtids()


class DistributedReads:
    """Runs the capture's `StagedRead`s on `spark`, staging under `staging`; `connection`:
    the source's connection settings; `connect`: a new connection for this process's own
    queries (watermarks, boundaries); `write_marker(id, type)` / `delete_marker(id)` write
    signal-table markers (signal watermarks)."""

    def __init__(self, spark, staging: StagingArea, settings: SnapshotConfig, connection: ConnectionSettings,
                 connect: Callable[[], pymysql.Connection], changelog: bool,
                 signal_table: TableId, write_marker: Callable[[str, str], None],
                 delete_marker: Callable[[str], None], engine_name: str) -> None:
        self.spark = spark
        self.staging = staging
        self.settings = settings
        self.connection = connection
        self.connect = connect
        self.changelog = changelog
        self.write_marker = write_marker
        self.delete_marker = delete_marker
        self.prefix = f"read-{engine_name}-"
        self.watermark_mode = watermark_mode(settings.watermarks, signal_table)
        self._current: ReadUnderWay | None = None
        staging.remove_directories(self.prefix)  # left by a run that died with a read under way

    @property
    def busy(self) -> bool:
        return self._current is not None

    def start(self, capture: ChangeCapture, read: StagedRead, schema: TableSchema, paging: TableSchema) -> None:
        """Open the read's window and start reading its ranges on a thread of its own."""
        self.cancel()  # a read whose window was discarded, not polled since
        watermarks = self.watermark_mode.watermarks(read)
        capture.staged_read_started(read, watermarks, schema.identity_of)
        state = self._current = ReadUnderWay(read, self.staging.new_directory(self.prefix),
                                             f"dblog-{read.snapshot.table}-{uuid.uuid4().hex[:8]}")
        task = RangeTask(self.connection, schema, paging, read.snapshot.condition,
                         self.staging.location(state.directory), self.changelog)
        threading.Thread(target=self._run, args=(state, task, watermarks), name="dblog-distributed-read",
                         daemon=True).start()

    def poll(self, capture: ChangeCapture, wait: bool = False) -> list[Emission]:
        """Hand the read's progress and, once it has ended, its outcome to the capture (`wait`:
        block until it has ended). A read whose window the capture discarded is cancelled."""
        state = self._current
        if state is None:
            return []
        if capture.staged_read is not state.read:
            self.cancel()
            return []
        capture.staged_read_progress(state.read, state.rows_so_far)
        if not (wait or state.future.done()):
            return []
        self._current = None
        try:
            outcome: Outcome = state.future.result()  # a failure is raised here, on the loop's thread
        except BaseException:
            self.staging.remove_directory(state.directory)
            raise
        if outcome.refused is not None:
            executed, reason = outcome.refused
            self.staging.remove_directory(state.directory)
            return capture.staged_read_refused(state.read, executed, reason)
        return capture.staged_read_ended(state.read, outcome.result)  # the sink removes the files once MERGEd

    def cancel(self) -> None:
        """Stop the read under way (its window was discarded, or the engine stops); its staged
        files are removed."""
        state, self._current = self._current, None
        if state is None:
            return
        state.cancelled.set()
        self.spark.sparkContext.cancelJobGroup(state.group)
        try:
            state.future.result(timeout=60)
        except Exception:  # cancelled, or failed: nothing of it is wanted
            pass
        self.staging.remove_directory(state.directory)

    def close(self) -> None:
        self.cancel()

    # --- the read's thread ----------------------------------------------------------------------

    def _run(self, state: ReadUnderWay, task: RangeTask, watermarks: Watermarks) -> None:
        try:
            state.future.set_result(self._read_window(state, task, watermarks))
        except BaseException as error:  # handed to the loop's thread
            state.future.set_exception(error)

    def _read_window(self, state: ReadUnderWay, task: RangeTask, watermarks: Watermarks) -> Outcome:
        read = state.read
        session = ServerSession(self.connect)
        window = _ReadSession(session, self.settings.visibility_timeout_seconds, self.write_marker, self.delete_marker)
        try:
            self.watermark_mode.open(watermarks, read, window)
            try:
                ranges = self._plan(ChunkReader(session), read, task.paging)
            except pymysql.err.MySQLError as error:
                if not refused_by_server(error):
                    raise
                return Outcome(refused=(session.executed_gtids(), str(error)))  # DDL broke the query
            log.info("snapshot %s: reading %d key ranges on Spark, from key %s", read.snapshot.table, len(ranges),
                     read.after_key)
            refused = self._read_ranges(state, ranges, task)
            if refused is not None:
                return Outcome(refused=(session.executed_gtids(), refused))
            high = self.watermark_mode.close(watermarks, window).high  # GTID mode: read now; else None
        finally:
            session.close()
        last = ranges[-1]
        done = task.paging.identity_of(last.upto) == task.paging.identity_of(read.max_key)
        staged = StagedRanges(state.directory, len(ranges), task.schema_ddl(), tuple(task.schema.column_names),
                              merge_extremes(list(state.extremes.values())))
        return Outcome(StagedResult(staged, state.rows_so_far, len(ranges), last.upto, done, high))

    def _plan(self, reader: ChunkReader, read: StagedRead, paging: TableSchema) -> list[KeyRange]:
        settings = self.settings
        wanted = max(1, math.ceil(settings.distributed_window_rows / settings.distributed_range_rows))
        boundaries: list[Key] = []
        start = read.after_key
        for _ in range(wanted):
            start = reader.boundary(ChunkRequest(paging, start, read.max_key, settings.distributed_range_rows,
                                                 read.snapshot.condition))
            if start is None:
                break
            boundaries.append(start)
            if paging.identity_of(start) == paging.identity_of(read.max_key):
                break
        if len(boundaries) == wanted and paging.identity_of(boundaries[-1]) != paging.identity_of(read.max_key):
            # the window ends at its last boundary: the table goes on after it
            return plan_ranges(read.after_key, boundaries[:-1], boundaries[-1])
        return plan_ranges(read.after_key, boundaries, read.max_key)

    def _read_ranges(self, state: ReadUnderWay, ranges: list[KeyRange], task: RangeTask) -> str | None:
        """Stage every range, `distributed_tasks` at a time; returns a refusal's reason, if any."""
        context = self.spark.sparkContext
        context.setJobGroup(state.group, f"dblog snapshot of {state.read.snapshot.table}", interruptOnCancel=True)
        context.setLocalProperty("spark.scheduler.pool", BACKFILL_POOL)  # MERGEs get their fair share
        # The task (its schema holds the collations' weights: megabytes) reaches each executor
        # once, not with every wave's tasks.
        shared = context.broadcast(task)
        try:
            return self._read_in_waves(state, ranges, functools.partial(_read_range, shared))
        finally:
            shared.destroy()

    def _read_in_waves(self, state: ReadUnderWay, ranges: list[KeyRange], read: Callable[[KeyRange], tuple]) -> str | None:
        context = self.spark.sparkContext
        table = state.read.snapshot.table
        width = self.settings.distributed_tasks or context.defaultParallelism
        attempts = self.settings.distributed_attempts
        missing = list(ranges)
        failure: Exception | None = None
        for attempt in range(1, attempts + 1):
            for first in range(0, len(missing), width):
                if state.cancelled.is_set():
                    raise RangeReadFailed("cancelled")
                wave = missing[first:first + width]
                try:
                    results = context.parallelize(wave, len(wave)).map(read).collect()
                except Exception as error:  # a task failed more often than Spark retries it
                    if state.cancelled.is_set():
                        raise RangeReadFailed("cancelled") from error
                    failure = error
                    log.warning("snapshot %s: a Spark task reading a key range failed (attempt %d of %d): %s",
                                table, attempt, attempts, str(error).strip().splitlines()[0][:300])
                    continue
                for index, rows, extremes, refused, spark_attempt in results:
                    if refused is not None:
                        return refused
                    if spark_attempt:
                        log.info("snapshot %s: key range %d read again by Spark's retry of its task (attempt %d)",
                                 table, index, spark_attempt + 1)
                    state.rows_staged[index] = rows
                    state.extremes[index] = extremes
                state.rows_so_far = sum(state.rows_staged.values())
            missing = [key_range for key_range in ranges if key_range.index not in state.rows_staged]
            if not missing:
                return None
            log.info("snapshot %s: reading %d key ranges again", table, len(missing))
        raise RangeReadFailed(f"{len(missing)} key ranges of {table} failed {attempts} times; last error: {failure}")
