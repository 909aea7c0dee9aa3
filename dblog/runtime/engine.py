"""The loop: binlog events and chunk reads through `ChangeCapture`, out to the sink.

Single-threaded on purpose: while a chunk is read the binlog is simply not being read, which
is the "pause" the algorithm needs, with no locks and no coordination. The loop reads a chunk
whenever the capture asks for one (no window open, snapshot not paused); otherwise it takes
the next binlog event (blocking at most one heartbeat interval when the server is idle).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import time
import uuid
from typing import Callable

import pymysql

from dblog.core.capture import ChangeCapture, ChunkRead, Emission, MaxKeyRead
from dblog.core.ddl import classify_ddl
from dblog.core.events import (
    Heartbeat,
    Notification,
    RowChange,
    SchemaChange,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.sql import quote_identifier
from dblog.core.window import GtidWatermarks, SignalWatermarks, Watermarks
from dblog.mysql.binlog import BinlogSource
from dblog.mysql.binlog_process import BinlogReaderProcess, reader_process_wanted
from dblog.mysql.chunk_reader import ChunkReader, KeyColumnsError
from dblog.mysql.parallel_read import ParallelChunkReads
from dblog.mysql.schema import TableNotFound, TableSchema, list_tables
from dblog.mysql.server_requirements import REQUIRED_VARIABLES, unsupported_settings
from dblog.runtime.config import Config, ConfigError
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.status import table_progress
from dblog.sinks.base import NullSink, Sink
from dblog.sinks.jsonl import JsonLinesSink
from signals.model import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    SignalError,
    StopSnapshot,
    parse_signal,
)

log = logging.getLogger("dblog")

NotificationListener = Callable[[Notification], None]
PROGRESS_LOG_SECONDS = 10.0


class Engine:
    def __init__(
        self,
        config: Config,
        sink: Sink | None = None,
        on_notification: NotificationListener | None = None,
    ) -> None:
        self.config = config
        self.signal_table = config.signal_table()
        self.store = OffsetStore(config.offsets.path)
        self.reader = ChunkReader(
            self._connect, {TableId.parse(name): tuple(columns) for name, columns in config.source.key_columns.items()}
        )
        # What reads a window's chunks: the reader itself, or it and more connections at once.
        self.chunks: ChunkReader | ParallelChunkReads = self.reader
        if config.snapshot.parallel_reads > 1:
            self.chunks = ParallelChunkReads(self.reader, self._connect, config.snapshot.parallel_reads)
        self.sink = sink or self._default_sink()
        self._listeners = [on_notification] if on_notification else []
        self.kafka_signals = None  # signals.kafka_channel.KafkaSignalChannel, opened by start()
        self.kafka_notifier = None
        self._next_kafka_poll = 0.0
        self._next_progress_log = 0.0
        self._captured: dict[TableId, bool] = {}
        self._binlog_file: str | None = None  # position of the last binlog event read
        self._binlog_pos: int | None = None
        self._stop = threading.Event()
        self._last_commit = 0.0
        self.channel_offsets: dict = {}  # positions of signal channels outside the binlog (Kafka)
        self.capture: ChangeCapture | None = None
        self.flavor: str | None = None
        self.binlog: BinlogSource | BinlogReaderProcess | None = None  # what run() reads

    # --- wiring ---------------------------------------------------------------------------

    def _connection_settings(self) -> dict:
        source = self.config.source
        return {
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "passwd": source.resolved_password(),
        }

    def _connect(self) -> pymysql.Connection:
        settings = self._connection_settings()
        return pymysql.connect(
            host=settings["host"],
            port=settings["port"],
            user=settings["user"],
            password=settings["passwd"],
            charset="utf8mb4",
            autocommit=True,
        )

    def _default_sink(self) -> Sink:
        if self.config.sink.type == "null":
            return NullSink()
        if self.config.sink.type == "iceberg":
            from dblog.sinks.iceberg.sink import open_iceberg_sink

            return open_iceberg_sink(self.config, self.reader.schema, self.reader.flavor(), self.captures)
        return JsonLinesSink(self.config.sink.path, self._key_columns, self.config.name, self.captures)

    def _key_columns(self, table: TableId) -> tuple[str, ...]:
        return self.reader.schema(table).key_columns

    def captures(self, table: TableId) -> bool:
        captured = self._captured.get(table)
        if captured is None:  # regexes per table, not per row
            captured = self._captured[table] = table != self.signal_table and self.config.source.captures(table)
        return captured

    def _capture(self, position: GtidSet, progress: SnapshotProgress) -> ChangeCapture:
        snapshot = self.config.snapshot
        # One window holds `parallel_reads` chunks.
        return ChangeCapture(position, progress, snapshot.chunk_size * snapshot.parallel_reads,
                             int(snapshot.chunk_bytes) * snapshot.parallel_reads,
                             snapshot.chunk_rows_cap() * snapshot.parallel_reads, snapshot.max_chunk_seconds)

    def captured_tables(self) -> list[TableId]:
        with self._connect() as connection:
            return [table for table in list_tables(connection) if self.captures(table)]

    def stop(self) -> None:
        self._stop.set()

    # --- the loop ---------------------------------------------------------------------------

    def start(self) -> ChangeCapture:
        """Restore or initialise the offsets; returns the capture state machine."""
        self.flavor = self.reader.flavor()
        problems = unsupported_settings(self.reader.global_variables(REQUIRED_VARIABLES), self.flavor)
        if problems:
            raise ConfigError("the source server's settings do not let dblog read its changes: " + "; ".join(problems))
        if self.config.snapshot.watermarks == "gtid" and self.flavor != "mariadb" and self.reader.semi_sync_after_sync():
            raise ConfigError(
                "the source runs semi-sync replication with wait point AFTER_SYNC: a transaction is in the binlog "
                "before reads can see it, and on MySQL dblog cannot tell when a read sees it (untested here). "
                'Set snapshot.watermarks = "insert_insert" (needs INSERT on the signal table), or use the '
                "AFTER_COMMIT wait point"
            )
        offsets = self.store.load()
        if offsets is None:
            progress = SnapshotProgress()
            position = self.reader.executed_gtids()
            self.capture = self._capture(position, progress)
            self.capture.must_see = self.reader.binlog_end()  # read after the position: past all of it
            if self.config.snapshot.startup == "initial":
                tables = [TableSnapshot(table) for table in self.captured_tables()]
                self._dispatch(self.capture.request_snapshot(tables, "initial"))
            self._commit(force=True)
        else:
            if offsets.flavor != self.flavor:
                raise ConfigError(
                    f"offsets file {self.store.path} was written for a {offsets.flavor} server but the source "
                    f"is {self.flavor}; point offsets.path at a new file"
                )
            self.channel_offsets = offsets.channels
            self.capture = self._capture(offsets.position, SnapshotProgress.from_json(offsets.snapshot))
            self.capture.resume_position = offsets.resume  # prepared XA transactions to read again
            # What an earlier run read may still be on its way to visibility: the first chunk
            # waits for the binlog's present end (which lies past all of it).
            self.capture.must_see = self.reader.binlog_end()
            for entry in self.capture.progress.queue:  # keyless tables keyed by a signal's surrogate
                if entry.surrogate_key and entry.started and not self.reader.schema(entry.table).key_columns:
                    self.reader.set_key(entry.table, (entry.surrogate_key,))
            log.info("resuming from %s", offsets.position or "the beginning")
        for name in self.config.source.key_columns:  # refuse a key that cannot serve, before streaming
            try:
                self.reader.schema(TableId.parse(name))
            except (KeyColumnsError, TableNotFound) as error:
                raise ConfigError(f"source.key_columns: {error}") from None
        self.sink.check_routes(self.captured_tables())
        self._open_kafka()
        return self.capture

    def _open_kafka(self) -> None:
        kafka = self.config.kafka.bootstrap_servers
        if self.config.notifications.kafka_topic:
            from signals.notifications import KafkaNotifier

            self.kafka_notifier = KafkaNotifier(kafka, self.config.notifications.kafka_topic, self.config.name)
        if self.config.signals.kafka_topic:
            from signals.kafka_channel import KafkaSignalChannel

            stored = self.channel_offsets.get("kafka_signals") or {}
            self.kafka_signals = KafkaSignalChannel(
                kafka, self.config.signals.kafka_topic, self.config.name,
                {int(partition): offset for partition, offset in stored.items()} or None,
            )

    def run(self, until: Callable[[], bool] | None = None) -> None:
        capture = self.capture or self.start()
        source = self.binlog = self._open_binlog(capture.position, capture.resume_position)
        events = iter(source)
        # The open window's table and when its chunk read ended: the capture sizes the next
        # chunks by how long windows wait for the reader (`ChangeCapture.window_waited`).
        opened: tuple[TableSnapshot, float] | None = None
        try:
            # Per binlog event this is the hot path: work that can only matter at a transaction's
            # end (a commit needs a checkpoint, which exists only between transactions) or for
            # a non-empty emission is skipped otherwise.
            while not self._stop.is_set() and not (until and until()):
                if self.kafka_signals is not None:
                    self._poll_kafka_signals()
                read = capture.next_read()
                if read is not None:
                    self._dispatch(self._read(read))
                    opened = (read.snapshot, time.monotonic()) if capture.window is not None else None
                    self._commit()
                    continue
                event = next(events)
                kind = type(event)
                if kind is RowChange:
                    source_info = event.source
                    self._binlog_file, self._binlog_pos = source_info.file, source_info.pos
                elif kind is TransactionStart or kind is Heartbeat:
                    self._note_position(event)
                emissions = capture.on_event(event)
                if opened is not None and capture.window is None:  # closed (or discarded) by this event
                    snapshot, since = opened
                    opened = None
                    capture.window_waited(time.monotonic() - since)
                    snapshot.updated_ms = _now_ms()  # its rows count from now: `dblog status` rate
                if emissions:
                    self._dispatch(emissions)
                if kind is TransactionEnd or kind is Heartbeat:
                    self._commit()
            self._commit(force=True)
        finally:
            source.close()
            self.close()

    def _open_binlog(self, position: GtidSet, resume: GtidSet | None = None) -> BinlogSource | BinlogReaderProcess:
        """The binlog after `position` (read from `resume` when set, to hold prepared XA
        transactions again): read and decoded here, or in a reader process."""
        source = self.config.source
        if reader_process_wanted(source.reader_process):
            return BinlogReaderProcess(
                self._connection_settings(), source.server_id, position, source, self.signal_table, self.reader,
                source.heartbeat_seconds, flavor=self.flavor, resume_from=resume,
            )
        return BinlogSource(
            self._connection_settings(),
            server_id=source.server_id,
            start=position,
            schema_of=self.reader.schema,
            table_filter=lambda table: self.captures(table) or table == self.signal_table,
            heartbeat_seconds=source.heartbeat_seconds,
            max_reconnects=source.binlog_reconnects,
            resume_from=resume,
        )

    def close(self) -> None:
        """Release the sink, the connections and the Kafka clients. Idempotent; what was not
        committed is dropped (a new engine replays it from the offsets)."""
        self.sink.close()
        if self.chunks is not self.reader:
            self.chunks.close()
        self.reader.close()
        for channel in (self.kafka_signals, self.kafka_notifier):
            if channel is not None:
                channel.close()
        self.kafka_signals = self.kafka_notifier = None

    def _note_position(self, event: TransactionStart | Heartbeat) -> None:
        if event.file is not None and event.pos is not None:
            self._binlog_file, self._binlog_pos = event.file, event.pos

    def _commit(self, force: bool = False) -> None:
        now = time.monotonic()
        due = now - self._last_commit >= self.config.commit_interval_seconds()
        full = self.sink.pending_rows >= self.config.sink.batch_rows
        if not (force or due or full):
            return
        checkpoint = self.capture.checkpoint()
        if checkpoint is None:
            return
        offsets = Offsets(self.flavor, checkpoint.position, checkpoint.progress, self.channel_offsets,
                          checkpoint.resume)
        self.sink.flush(offsets)
        self.store.save(offsets)
        self._last_commit = time.monotonic()  # from the end of a commit: slow MERGEs never run back to back
        self.sink.after_commit()  # e.g. Iceberg maintenance, only once the offsets are saved

    # --- chunk reads --------------------------------------------------------------------------

    def _read(self, read: MaxKeyRead | ChunkRead) -> list[Emission]:
        capture = self.capture
        snapshot = read.snapshot
        try:
            schema, paging = self._snapshot_schemas(snapshot)
        except SnapshotRefused as refusal:
            log.warning("cannot snapshot %s: %s", snapshot.table, refusal.reason)
            return capture.table_failed(snapshot, refusal.status, refusal.reason)
        try:
            if isinstance(read, MaxKeyRead):
                # In every watermark mode: a largest key committed before the loop's position
                # but not yet visible would lie above the max key and behind the stream.
                self.reader.wait_until_visible(read.position, read.must_see,
                                               self.config.snapshot.visibility_timeout_seconds)
                snapshot.estimated_rows = self.reader.estimated_rows(snapshot.table)
                snapshot.started_ms = snapshot.updated_ms = _now_ms()
                return capture.max_key_read(snapshot, self.reader.max_key(paging, snapshot.condition))
            started = time.monotonic()
            rows, watermarks = self._read_between_watermarks(read, paging)
        except pymysql.err.MySQLError as error:
            if not _refused_by_server(error):
                raise
            # The server refused the query: DDL the loop has not consumed yet broke it (the
            # capture holds reads until it has, then reads again with the new schema), or the
            # query itself is wrong (e.g. a filter naming a dropped column: the table fails,
            # streaming goes on).
            emissions = capture.read_refused(read, self.reader.executed_gtids(), str(error))
            if emissions:
                log.warning("snapshot of %s failed: %s", snapshot.table, error)
            else:
                log.info("snapshot of %s: %s; reading again once the binlog reader has passed the DDL",
                         snapshot.table, error)
            return emissions
        snapshot.updated_ms = _now_ms()
        keyed = [(schema.key_of(row), row) for row in rows]
        last_key = paging.key_of(rows[-1]) if rows else None
        read_seconds = time.monotonic() - started  # how long this read paused the binlog
        return capture.chunk_read(read, keyed, watermarks, last_key, schema.identity_of, paging.identity_of,
                                  rows.bytes_read, rows.cut_short, read_seconds)

    def _snapshot_schemas(self, snapshot: TableSnapshot) -> tuple[TableSchema, TableSchema]:
        """The table's schema (its primary key dedupes against the binlog) and the schema whose
        key orders the chunks: the surrogate key when the signal gave one."""
        try:
            schema = self.reader.schema(snapshot.table)
        except TableNotFound as error:
            raise SnapshotRefused("UNKNOWN_SCHEMA", str(error)) from error
        if not schema.key_columns and snapshot.surrogate_key:
            # A table without a primary key: the signal's surrogate key becomes its key, for
            # the binlog's changes as well, so that the window can drop what the log touched.
            try:
                self.reader.set_key(snapshot.table, (snapshot.surrogate_key,))
            except KeyColumnsError as error:
                raise SnapshotRefused("NO_PRIMARY_KEY", str(error)) from error
            if self.binlog is not None:  # a reader process has changes decoded earlier in flight
                self.binlog.key_changed(snapshot.table)
            return self.reader.schema(snapshot.table), self.reader.schema(snapshot.table)
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
                self.reader.check_key(schema, (snapshot.surrogate_key,))
            except KeyColumnsError as error:
                raise SnapshotRefused(
                    "UNKNOWN_SCHEMA",
                    f"surrogate key {snapshot.surrogate_key!r} cannot page {snapshot.table}: the table "
                    f"{error.problem}; give a NOT NULL column with a UNIQUE index of its own as 'surrogate-key', "
                    "or leave 'surrogate-key' out to page by the primary key",
                ) from error
        return schema, dataclasses.replace(schema, key_columns=(snapshot.surrogate_key,))

    def _read_between_watermarks(self, read: ChunkRead, schema: TableSchema) -> tuple[list, Watermarks]:
        mode = self.config.snapshot.watermarks
        snapshot = read.snapshot
        if mode == "gtid":
            # The low watermark is what the loop has consumed: every later transaction is in
            # the window. The SELECT starts once the server shows all of it (dblog.core.visibility).
            # (Debezium re-reads a MySQL chunk whose high watermark spans several server UUIDs,
            # because its low watermark is the server's @@gtid_executed, which then need not
            # be a prefix of the binlog; the reader's own position always is.)
            self.reader.wait_until_visible(read.position, read.must_see,
                                           self.config.snapshot.visibility_timeout_seconds)
            rows = self.chunks.read_chunk(
                schema, read.after_key, read.max_key, read.limit, snapshot.condition, read.max_bytes)
            return rows, GtidWatermarks(read.position, self.reader.executed_gtids())
        window_id = uuid.uuid4().hex
        open_id, close_id = f"{window_id}-open", f"{window_id}-close"
        self._write_signal(open_id, "snapshot-window-open")
        rows = self.chunks.read_chunk(
            schema, read.after_key, read.max_key, read.limit, snapshot.condition, read.max_bytes)
        if mode == "insert_insert":
            self._write_signal(close_id, "snapshot-window-close")
            return rows, SignalWatermarks(self.signal_table, open_id, close_id)
        self._delete_signal(open_id)
        return rows, SignalWatermarks(self.signal_table, open_id, None)

    def _write_signal(self, signal_id: str, signal_type: str) -> None:
        db, table = self.signal_table
        with self._connect() as connection, connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {quote_identifier(db)}.{quote_identifier(table)} (id, type, data) VALUES (%s, %s, %s)",
                (signal_id, signal_type, json.dumps({"ts_ms": _now_ms()})),
            )

    def _delete_signal(self, signal_id: str) -> None:
        db, table = self.signal_table
        with self._connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {quote_identifier(db)}.{quote_identifier(table)} WHERE id = %s", (signal_id,))

    # --- what the capture emits ---------------------------------------------------------------

    def _dispatch(self, emissions: list[Emission]) -> None:
        changes: list[RowChange] = []
        for item in emissions:
            if isinstance(item, RowChange) and item.op == "r":
                # A snapshot read is as new as the binlog position the reader has reached.
                item.source.file, item.source.pos = self._binlog_file, self._binlog_pos
            if isinstance(item, RowChange):
                if item.table == self.signal_table:
                    self.sink.write(changes)
                    changes = []
                    if item.op == "c":
                        self._on_signal(item.after or {})
                elif self.captures(item.table):
                    changes.append(item)
            elif isinstance(item, Notification):
                self._notify(item)
            elif isinstance(item, SchemaChange):
                self.sink.write(changes)
                changes = []
                self.reader.forget_schema()
                ddl = classify_ddl(item.sql, item.db)
                if ddl.kind in _RESHAPING_DDL:
                    for table in ddl.tables:
                        self._dispatch(self.capture.restart_table(table, f"{ddl.kind.replace('_', ' ')}: {item.sql[:200]}"))
                if ddl.renamed:
                    self._dispatch(self._snapshot_renamed(ddl.renamed, item))
                # The DDL's own transaction is open: the capture's position is the cut before it.
                # The sink names the tables whose existing rows it cannot fix by itself.
                resnapshot = self.sink.schema_changed(item, ddl, self.capture.position)
                if resnapshot:
                    requests = [TableSnapshot(table) for table in resnapshot if self.captures(table)]
                    self._dispatch(self.capture.request_snapshot(requests, f"schema-change-{item.gtid}"))
        self.sink.write(changes)

    def _snapshot_renamed(self, renamed, item: SchemaChange) -> list[Emission]:
        """A table renamed to a captured name keeps its rows without row events: the output moves
        what it emitted under the old name (see README, Output), so the new name needs a
        snapshot only where that is not all of it: the old name was not captured, or its
        snapshot was under way or queued (restarted above; its old name is now gone)."""
        requests = []
        for old, new in renamed:
            if not self.captures(new):
                continue
            reads = [entry for entry in self.capture.progress.queue if entry.table == old]
            if not self.captures(old):
                requests.append(TableSnapshot(new))
            requests += [TableSnapshot(new, condition=entry.condition, surrogate_key=entry.surrogate_key)
                         for entry in reads]
        return self.capture.request_snapshot(requests, f"rename-{item.gtid}") if requests else []

    def _log_progress(self) -> None:
        """Long snapshots say where they stand: rows, rate and ETA, every PROGRESS_LOG_SECONDS."""
        current = self.capture.progress.current
        now = time.monotonic()
        if current is None or now < self._next_progress_log:
            return
        self._next_progress_log = now + PROGRESS_LOG_SECONDS
        log.info("snapshot %s: %s", current.table, table_progress(current))

    def _poll_kafka_signals(self) -> None:
        """Signals from Kafka act between binlog events. Their topic offsets are committed in
        the same offsets file as the binlog position and snapshot state, so each acts once."""
        if self.kafka_signals is None or time.monotonic() < self._next_kafka_poll:
            return
        self._next_kafka_poll = time.monotonic() + self.config.signals.kafka_poll_interval_seconds
        for signal_id, signal_type, data in self.kafka_signals.poll(0):
            if signal_type is None:
                self._reject(signal_id, f"signal {signal_id!r}: the Kafka message value must be JSON "
                                        '{"type": "…", "data": {…}}, got ' + repr(str(data)[:200]))
            else:
                self._on_signal({"id": signal_id, "type": signal_type, "data": data})
        self.channel_offsets["kafka_signals"] = {str(p): o for p, o in self.kafka_signals.offsets().items()}

    def _notify(self, notification: Notification) -> None:
        level = logging.DEBUG if notification.type == "IN_PROGRESS" else logging.INFO
        log.log(level, "%s %s", notification.type, json.dumps(notification.data, default=str))
        if notification.type == "IN_PROGRESS":
            self._log_progress()
        if self.kafka_notifier is not None:
            self.kafka_notifier.send(notification, _now_ms())
        for listener in self._listeners:
            listener(notification)

    def _on_signal(self, row: dict) -> None:
        signal_id = str(row.get("id"))
        try:
            signal = parse_signal(signal_id, row.get("type"), row.get("data"))
            if signal is not None:
                self._dispatch(self.apply_signal(signal, signal_id))
        except SignalError as error:
            self._reject(signal_id, str(error))

    def _reject(self, signal_id: str, reason: str) -> None:
        log.warning("rejected signal: %s", reason)
        self._notify(Notification("REJECTED", {"id": signal_id, "reason": reason}, "Signal"))

    def apply_signal(self, signal, signal_id: str | None = None) -> list[Emission]:
        capture = self.capture
        if isinstance(signal, ExecuteSnapshot):
            tables, skipped = self._matching_tables(signal.data_collections, signal_id)
            requests = [
                TableSnapshot(table, condition=self._condition(signal, table, signal_id),
                              surrogate_key=signal.surrogate_key)
                for table in tables
            ]
            return [_skipped(table) for table in skipped] + capture.request_snapshot(requests, signal_id)
        if isinstance(signal, StopSnapshot):
            if signal.data_collections is None:
                return capture.stop_snapshot(None)
            patterns = [re.compile(p) for p in signal.data_collections]
            queued = {entry.table for entry in capture.progress.queue}
            return capture.stop_snapshot({t for t in queued if any(p.fullmatch(str(t)) for p in patterns)})
        if isinstance(signal, PauseSnapshot):
            return capture.pause()
        if isinstance(signal, ResumeSnapshot):
            return capture.resume()
        if isinstance(signal, LogSignal):
            log.info("signal %s: %s", signal_id, signal.message)
            return []
        raise TypeError(f"unexpected signal {signal!r}")

    def _condition(self, signal: ExecuteSnapshot, table: TableId, signal_id: str | None) -> str | None:
        """The validated `additional-conditions` filter for `table`, if one names it."""
        from signals.conditions import validate_condition

        name = str(table)
        filters = [flt for pattern, flt in signal.additional_conditions if pattern == name or re.fullmatch(pattern, name)]
        if not filters:
            return None
        if len(filters) > 1:
            raise SignalError(f"signal {signal_id!r}: several 'additional-conditions' match {table}; give one")
        columns = set(self.reader.schema(table).column_names)
        try:
            return validate_condition(filters[0], columns)
        except SignalError as error:
            raise SignalError(f"signal {signal_id!r}: additional condition for {table}: {error}") from None

    def _matching_tables(self, patterns: tuple[str, ...], signal_id: str | None) -> tuple[list[TableId], list[TableId]]:
        """(captured tables matching the patterns, existing tables matching them that are not
        captured: those are reported SKIPPED, as Debezium does)."""
        compiled = [re.compile(pattern) for pattern in patterns]
        with self._connect() as connection:
            existing = [t for t in list_tables(connection) if any(p.fullmatch(str(t)) for p in compiled)]
        captured = [t for t in existing if self.captures(t)]
        skipped = [t for t in existing if not self.captures(t) and t != self.signal_table]
        if not captured and not skipped:
            raise SignalError(
                f"signal {signal_id!r}: no table matches {list(patterns)}; patterns are regular expressions "
                "over 'db.table' (escape the dot: 'shop\\\\.orders')"
            )
        return captured, skipped


# DDL after which rows already read from a table no longer have its shape (or its key).
# A dropped or renamed table restarts too: its next read finds no table (UNKNOWN_SCHEMA),
# or, after CREATE OR REPLACE, the new one.
_RESHAPING_DDL = {"add_column", "drop_column", "modify_column", "primary_key", "other", "drop_table", "rename_table"}


def _skipped(table: TableId) -> Notification:
    return Notification("TABLE_SCAN_COMPLETED", {
        "data_collection": str(table), "scanned_collection": str(table), "total_rows_scanned": 0,
        "status": "SKIPPED", "reason": "the table is not captured (source.include / source.exclude)",
    })


# Server errors that say nothing about the query: the connection or the server went away.
_TRANSIENT_SERVER_ERRORS = {1053, 1077, 1078, 1079, 1080, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159,
                            1160, 1161, 1184, 1205, 1213, 1317, 1927}


def _refused_by_server(error: pymysql.err.MySQLError) -> bool:
    """True for an error the server raised about the statement itself (codes below 2000 are
    the server's; 2000 and above are the client's, e.g. a lost connection)."""
    code = error.args[0] if error.args and isinstance(error.args[0], int) else None
    return code is not None and code < 2000 and code not in _TRANSIENT_SERVER_ERRORS


def _now_ms() -> int:
    return int(time.time() * 1000)


class SnapshotRefused(Exception):
    """A table that cannot be snapshotted; `status` is its TABLE_SCAN_COMPLETED status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
