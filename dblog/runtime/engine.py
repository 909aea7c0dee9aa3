"""The loop: binlog events and chunk reads through `ChangeCapture`, out to the sink.

Single-threaded on purpose: while a chunk is read the binlog is simply not being read, which
is the "pause" the algorithm needs, with no locks and no coordination. The loop reads a chunk
whenever the capture asks for one (no window open, snapshot not paused); otherwise it takes
the next binlog event (blocking at most one heartbeat interval when the server is idle).

The engine only wires: the rules are the capture's (`dblog.core`), the reads against the
server `SnapshotReads`', the signals `SignalHandling`'s; here they meet the binlog source,
the sink, the offsets and the notification listeners.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from typing import Callable

import pymysql

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.capture import ChangeCapture, Emission
from dblog.core.ddl import KnownTables, classify_ddl
from dblog.core.delivered_cut import DeliveredCut, without_delivered
from dblog.core.events import (Heartbeat, Notification, RowChange, SchemaChange, StagedSnapshot, TableId,
                               TransactionEnd, TransactionStart)
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidSet
from dblog.core.offsets import DOCUMENT_ERRORS, Offsets, OffsetsError
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.mysql.binlog import BinlogSource
from dblog.mysql.binlog.process import BinlogReaderProcess, reader_process_wanted
from dblog.mysql.chunk_reader import ChunkReader
from dblog.mysql.parallel_read import ParallelChunkReads
from dblog.mysql.schema import TableNotFound, TableSchema, list_tables
from dblog.mysql.schema_catalog import KeyColumnsError
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.server_history import refuse_unless_resumable, refuse_unless_resumable_at
from dblog.mysql.server_session import ServerSession
from dblog.mysql.server_requirements import (
    REQUIRED_VARIABLES, SEMI_SYNC_AFTER_SYNC, decodes_from_history, position_mode, unsupported_settings,
)
from dblog.mysql.source_connection import SourceConnection
from dblog.mysql.table_definitions import TableDefinitions
from dblog.mysql.table_history import TableHistory
from dblog.runtime.table_commits import TableCommits
from dblog.runtime.config import Config, ConfigError
from dblog.runtime.kafka_access import kafka_failure_explained
from dblog.runtime.log_format import log_fields
from dblog.runtime.engine_stats import OP_INDEX, EngineStats
from dblog.runtime.heartbeats import Heartbeats
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.signal_handling import SignalHandling
from dblog.runtime.sink_factory import open_distributed_reads, open_sink
from dblog.runtime.snapshot_modes import (StartupPlan, incremental_startup_note, plan_startup, position_purged,
                                          startup_tables)
from dblog.runtime.snapshot_reads import SnapshotReads, now_ms
from dblog.runtime.watermark_modes import watermark_mode
from dblog.runtime.status import table_progress
from dblog.sinks.base import Sink
from dblog.sinks.kafka.security import client_options

log = logging.getLogger("dblog")

_MODE_WORDS = {"gtid": "GTID position", "file": "binlog file and position (no GTIDs)"}

NotificationListener = Callable[[Notification], None]
PROGRESS_LOG_SECONDS = 10.0
HELD_CHANGES = 256  # streamed changes dispatched together at most (see `run`)
HELD_BYTES = 4 << 20  # and at most this much of the binlog's bytes of them


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
        key_columns = {TableId.parse(name): tuple(columns) for name, columns in config.source.key_columns.items()}
        self.source = SourceConnection(self._connect, key_columns)
        self.server, self.schemas = self.source.server, self.source.schemas
        # Streaming over thousands of tables: their schemas loaded in batches (SchemaCatalog.wanted).
        self.schemas.wanted = lambda table: self.is_captured(table) or table == self.signal_table
        # What reads a window's chunks: the source connection's reader, or it and more connections at once.
        self.chunks: ChunkReader | ParallelChunkReads = self.source.chunks
        if config.snapshot.parallel_reads > 1:
            self.chunks = ParallelChunkReads(self.source.chunks, self._connect, config.snapshot.parallel_reads)
        self.snapshot_reads = SnapshotReads(self.server, self.schemas, self.chunks, config.snapshot,
                                            self.signal_table, self._connect, self._key_changed)
        # The table definitions as of the stream's position (what the Kafka sink's schema-change
        # records and column defaults describe), kept when the sink uses them
        self.table_history = TableHistory(TableDefinitions(self.schemas.session.run), self.server.executed_gtids,
                                          self.is_captured)
        # binlog_row_metadata below FULL (set by start()): the history is kept whatever the sink
        self.decodes_from_history = False
        self.keeps_history = False
        self.sink = sink or open_sink(config, self.schemas.definition, self.server.flavor, self.is_captured,
                                      self.table_history)
        # What the metrics read (dblog.runtime.metrics); a supervisor replaces it before start()
        # with the one it keeps across restarts, so the hooks below look it up when called.
        self.stats = EngineStats()
        self.snapshot_reads.on_visibility_wait = lambda seconds, waited: self.stats.visibility_checked(seconds, waited)
        self.sink.report_merges(lambda table, seconds: self.stats.merged(table, seconds))  # Iceberg's MERGEs
        self._listeners = [on_notification] if on_notification else []
        self.kafka_notifier = None  # dblog.signals.notifications.KafkaNotifier, opened by start()
        self._next_progress_log = 0.0
        self._is_captured_cache: dict[TableId, bool] = {}
        self._stop = threading.Event()
        self._last_commit = 0.0
        self._table_commits: TableCommits | None = None  # started at the first commit
        self.channel_offsets: dict = {}  # positions of signal channels outside the binlog (Kafka)
        self.capture: ChangeCapture | None = None
        self.known_tables = KnownTables()  # listed by start(), then kept by the DDL read
        self.signals: SignalHandling | None = None
        self.flavor: str | None = None
        self.binlog: BinlogSource | BinlogReaderProcess | None = None  # what run() reads
        self.distributed = None  # DistributedReads: snapshot reads by Spark tasks (snapshot.distributed)
        self.heartbeats: Heartbeats | None = None  # Debezium's heartbeats, when the sink writes them
        self.startup_plan: StartupPlan | None = None  # what start() does with the offsets (snapshot.startup)
        # The first transaction after the offsets' position, partly delivered by the tool dblog
        # took over from (--debezium-offsets): its delivered changes are dropped when read
        self.delivered: tuple[GtidSet, DeliveredCut] | None = None
        self.position_mode = "gtid"  # or "file" (dblog.core.file_positions), chosen by start()
        self.binlog_identity: BinlogIdentity | None = None  # file-position mode: whose binlog

    # --- wiring ---------------------------------------------------------------------------

    def _connection_settings(self) -> ConnectionSettings:
        """How every connection to the source is made (TLS included): read again for each, so
        that a rotated password or certificate file is picked up by the next connection."""
        return self.config.source.connection_settings()

    def _connect(self) -> pymysql.Connection:
        settings = self._connection_settings()
        conn = settings.connect()
        capture = getattr(self, "capture", None)  # (None too while __init__ opens the sink)
        if capture is not None:  # started: a new connection may reach another server (a failover)
            try:
                self._refuse_unless_resumable(ServerSession(lambda: conn), settings, capture.position)
            except BaseException:
                conn.close()
                raise
        return conn

    def _refuse_unless_resumable(self, server: ServerSession, settings: ConnectionSettings, delivered: GtidSet,
                                 read_from: GtidSet | None = None) -> None:
        """Before anything is read from a server (chunks included): SourceDiverged unless it holds
        every transaction dblog delivered (dblog.core.resume_verdict); in file-position mode,
        unless it is the server whose binlog the position points into and still holds it."""
        address = f"{settings.host}:{settings.port}"
        if self.binlog_identity is not None:
            identity = self.binlog_identity
            at = FilePosition.of(read_from if read_from is not None else delivered, identity.base_name)
            refuse_unless_resumable_at(server, address, at, identity, str(self.store.path))
            return
        refuse_unless_resumable(server, address, delivered, str(self.store.path), read_from)

    def _read_by_file_positions(self) -> None:
        """File-position mode (dblog.core.file_positions): the server's position is its binlog's
        end, its identity is kept with the offsets, and snapshot windows take signal-table
        watermarks (GTID ones need GTIDs)."""
        self.server.file_positions = True
        self.binlog_identity = self.server.files_identity()
        reads = self.snapshot_reads
        if not reads.watermark_mode.writes_signal_rows:
            if self.signal_table is None:
                raise ConfigError(
                    "dblog reads this server by binlog file and position (source.position_mode = "
                    f"{self.config.source.position_mode!r}; the server logs no GTIDs dblog can resume from), and "
                    'snapshot.watermarks = "gtid" needs GTIDs. Set signals.table (a table dblog writes its window '
                    'markers into, as Debezium does: it needs INSERT there) with snapshot.watermarks = "insert_insert" '
                    'or "insert_delete", or enable GTIDs (MySQL: gtid_mode=ON, enforce_gtid_consistency=ON)')
            self.config.snapshot.watermarks = "insert_insert"  # (distributed reads take it from the configuration)
            reads.watermark_mode = watermark_mode("insert_insert", self.signal_table)
            log.info('snapshot windows take signal-table watermarks (snapshot.watermarks = "insert_insert", rows '
                     "written into %s): GTID watermarks need GTIDs", self.signal_table)
        log.info("binlog positions: file and offset on %s (source.position_mode = %r), as Debezium without GTIDs",
                 self.binlog_identity.describe(), self.config.source.position_mode)

    def _check_binlog_server(self) -> None:
        """Before the binlog reader connects again: the same check, on a new connection."""
        self._connect().close()

    def is_captured(self, table: TableId) -> bool:
        """Whether changes of `table` are streamed and it may be snapshotted: the source's
        include/exclude patterns say so, and it is not the signal table."""
        captured = self._is_captured_cache.get(table)
        if captured is None:  # regexes per table, not per row
            captured = table != self.signal_table and self.config.source.includes(table)
            self._is_captured_cache[table] = captured
        return captured

    def _new_capture(self, position: GtidSet, progress: SnapshotProgress) -> ChangeCapture:
        snapshot = self.config.snapshot
        # One window holds `parallel_reads` chunks; its ChunkRequest carries `parallel_reads`, and
        # ParallelChunkReads reads it in as many parts (ChunkRequest.part_limit, part_bytes).
        capture = ChangeCapture(position, progress, snapshot.chunk_size * snapshot.parallel_reads,
                                int(snapshot.chunk_bytes) * snapshot.parallel_reads,
                                snapshot.chunk_rows_cap() * snapshot.parallel_reads, snapshot.max_chunk_seconds,
                                captures=self.is_captured, distributed=snapshot.distributed)
        capture.on_window_closed = self._window_closed
        return capture

    def _window_closed(self, table: TableId, rows_read: int, rows_emitted: int) -> None:
        started = self.snapshot_reads.chunk_started
        self.stats.window_closed(time.monotonic() - started if started is not None else 0.0, rows_read - rows_emitted)

    def _existing_tables(self) -> list[TableId]:
        with self._connect() as connection:
            return list_tables(connection)

    def _column_names(self, table: TableId) -> list[str]:
        return self.schemas.schema(table).column_names

    def captured_tables(self) -> list[TableId]:
        """The source's tables that dblog captures."""
        return [table for table in self._existing_tables() if self.is_captured(table)]

    def _key_changed(self, table: TableId) -> None:
        if self.binlog is not None:  # a reader process has changes decoded earlier in flight
            self.binlog.key_changed(table)

    def stop(self) -> None:
        """Stop cleanly (any thread; `run` returns soon after): no read is started, the open
        window is dropped (its chunk is read again after a restart: the offsets never include
        it), the transaction being read is read to its end, the sink flushed and the offsets
        committed, so the next start goes on exactly from here."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """`stop()` was called (`/readyz` says "stopping")."""
        return self._stop.is_set()

    # --- the loop ---------------------------------------------------------------------------

    def start(self) -> ChangeCapture:
        """Restore or initialise the offsets; returns the capture state machine."""
        self.flavor = self.server.flavor()
        variables = self.server.global_variables(REQUIRED_VARIABLES)
        self.position_mode = position_mode(variables, self.flavor, self.config.source.position_mode)
        problems = unsupported_settings(variables, self.flavor, self.position_mode)
        # Table maps without column names: rows decode with the schema history's definitions
        self.decodes_from_history = decodes_from_history(variables)
        self.keeps_history = self.sink.uses_definitions or self.decodes_from_history
        if problems:
            raise ConfigError("the source server's settings do not let dblog read its changes: " + "; ".join(problems))
        if self.position_mode == "file":
            self._read_by_file_positions()
        refusal, _ = self.server.replica_role()
        if refusal:
            raise ConfigError("{}. {}".format(*refusal))
        if (self.snapshot_reads.watermark_mode.waits_for_visibility and self.flavor != "mariadb"
                and self.server.semi_sync_after_sync()):
            raise ConfigError(SEMI_SYNC_AFTER_SYNC)
        offsets = self.store.load()
        plan = self.startup_plan = plan_startup(self.config.snapshot, offsets is not None,
                                                lambda: position_purged(self.server, offsets))
        log.info("%s", plan.note)
        if offsets is not None and plan.fresh_position:  # start as a first start does (signal channels go on)
            self.channel_offsets = dict(offsets.channels)
            offsets = None
        if offsets is None:
            position = self.server.executed_gtids()  # (file positions: the binlog's end)
            self.capture = self._new_capture(position, SnapshotProgress())
            self.capture.must_see = self.server.binlog_end()  # read after the position: past all of it
            captured = self.captured_tables()
            if plan.read_tables:
                self._dispatch(self.capture.request_snapshot(startup_tables(self.config.snapshot, captured),
                                                             "initial"))
                note = incremental_startup_note(self.config.snapshot)
                if note:
                    log.info("%s", note)
        else:
            if offsets.flavor != self.flavor:
                raise ConfigError(
                    f"offsets file {self.store.path} was written for a {offsets.flavor} server but the source "
                    f"is {self.flavor}; point offsets.path at a new file"
                )
            if offsets.position_mode != self.position_mode:
                raise ConfigError(
                    f"offsets file {self.store.path} holds a {_MODE_WORDS[offsets.position_mode]} but dblog reads this "
                    f"server by {_MODE_WORDS[self.position_mode]} (source.position_mode = "
                    f"{self.config.source.position_mode!r}): set source.position_mode = {offsets.position_mode!r}, "
                    "or move the offsets file away and start again (with a snapshot of the captured tables)")
            self.channel_offsets = dict(offsets.channels)
            if self.keeps_history and not plan.rebuild_history:
                try:
                    self.table_history.restore(offsets.definitions, self._positions_flavor())
                except DOCUMENT_ERRORS as error:
                    if plan.rebuild_on_schema_error:
                        log.warning("the schema history saved with the offsets in %s is not valid (%s): %s reads it "
                                    "again from the server", self.store.path, error, plan.note.split(":")[0])
                        self.table_history.restore(None, self._positions_flavor())
                    else:
                        raise OffsetsError(
                            f"the schema history saved with the offsets in {self.store.path} is not valid ({error}); "
                            "restore the offsets file and the definitions file it names from the same backup, delete "
                            "its `definitions_file` entry to read the tables' definitions from the server again, or "
                            "start once with snapshot.startup = \"recovery\""
                        ) from error
            if offsets.binlog is not None:
                self.binlog_identity = offsets.binlog  # whose binlog the offsets point into: checked at each connection
            self._refuse_unless_resumable(self.server, self._connection_settings(), offsets.position, offsets.resume)
            self.capture = self._new_capture(offsets.position, SnapshotProgress.from_json(offsets.snapshot))
            self.capture.resume_position = offsets.resume  # prepared XA transactions to read again
            if offsets.delivered is not None:
                self.delivered = offsets.position, offsets.delivered
            # What the run that wrote these offsets read may still be on its way to visibility:
            # the first chunk waits for the binlog's present end (which lies past all of it).
            self.capture.must_see = self.server.binlog_end()
            for table, column in self.capture.surrogate_keys():
                if not self.schemas.schema(table).key_columns:
                    self.schemas.set_key(table, (column,))
            log.info("resuming from %s", offsets.describe_position())
        self.signals = SignalHandling(self.capture, self._existing_tables, self._column_names, self.is_captured,
                                      self.signal_table,
                                      kafka_poll_interval_seconds=self.config.signals.kafka_poll_interval_seconds)
        for name in self.config.source.key_columns:  # refuse a key that cannot serve, before streaming
            try:
                self.schemas.schema(TableId.parse(name))
            except (KeyColumnsError, TableNotFound) as error:
                raise ConfigError(f"source.key_columns: {error}") from None
        existing = self._existing_tables()
        # A DROP DATABASE read from here on drops the tables of its database known by then.
        self.known_tables = KnownTables(existing)
        self.sink.check_routes([table for table in existing if self.is_captured(table)])
        if offsets is None:  # the sink's start records (once: the commit below covers them), then the offsets
            marked = plan.read_tables and self.config.snapshot.initial_markers
            self.sink.first_start(captured, marked_rows_follow=marked)
            if self.keeps_history:  # (the Kafka sink's start records read them already, when written)
                self.table_history.seed(captured)
            self._commit(force=True)
        elif self.keeps_history and self.table_history.history is None:
            self.table_history.seed([table for table in existing if self.is_captured(table)],
                                    why=plan.note if plan.rebuild_history else
                                    f"the offsets in {self.store.path} hold no schema history (written by an "
                                    "earlier dblog, or for another sink)")
        if self.config.snapshot.distributed:
            reads = self.snapshot_reads
            self.distributed = reads.distributed = open_distributed_reads(
                self.sink, self.config, self._connection_settings(), self._connect, self.signal_table,
                reads.write_signal, reads.delete_signal)
        self._open_kafka()
        plugin = self.config.sink_plugin()
        beat = plugin.heartbeat(self.config)  # a sink that writes heartbeat records
        if beat is not None:
            self.heartbeats = Heartbeats(beat.interval_ms, self.sink, beat.action_query, self._connect,
                                         action_query_setting=plugin.setting("heartbeat_action_query"))
        return self.capture

    def _open_kafka(self) -> None:
        if not (self.config.notifications.kafka_topic or self.config.signals.kafka_topic):
            return
        kafka = self.config.kafka.bootstrap_servers
        security = self.config.kafka.security()
        options = client_options(security)
        if self.config.notifications.kafka_topic:
            from dblog.signals.notifications import KafkaNotifier

            with kafka_failure_explained(kafka, security, "the notifications topic"):
                self.kafka_notifier = KafkaNotifier(kafka, self.config.notifications.kafka_topic, self.config.name,
                                                    options)
        if self.config.signals.kafka_topic:
            from dblog.signals.kafka_channel import KafkaSignalChannel

            stored = self.channel_offsets.get("kafka_signals") or {}
            with kafka_failure_explained(kafka, security, "the signal topic"):
                self.signals.kafka = KafkaSignalChannel(
                    kafka, self.config.signals.kafka_topic, self.config.name,
                    {int(partition): offset for partition, offset in stored.items()} or None,
                    client_options=options,
                )

    def run(self, until: Callable[[], bool] | None = None) -> None:
        capture = self.capture or self.start()
        source = self.binlog = self._open_binlog(capture.position, capture.resume_position)
        events = iter(source)
        if self.delivered is not None and capture.position == self.delivered[0]:
            events = without_delivered(events, self.delivered[1])
        signals = self.signals
        stats = self.stats
        distributed = self.distributed
        sink, heartbeats = self.sink, self.heartbeats
        # The open window's table and when its chunk read ended: the capture sizes the next
        # chunks by how long windows wait for the reader (`ChangeCapture.window_waited`).
        opened: tuple[TableSnapshot, float] | None = None
        # Streamed changes that passed through the capture as they came are dispatched together,
        # before the capture sees the next event that is not one (a transaction's end at the
        # latest: its position never covers a change the sink has not had) or every
        # HELD_CHANGES / HELD_BYTES: one sink call per ~transaction instead of one per change,
        # in the same order (between a transaction's rows the loop's other work, Kafka signals
        # and the stop check, writes nothing, and no snapshot read starts inside a transaction).
        held: list[RowChange] = []
        held_bytes = 0
        signal_table = self.signal_table
        # snapshot.startup initial_only (or configuration_based without start_stream): stop once
        # the start-up snapshot is done, streaming no further.
        stop_when_done = self.startup_plan is not None and not self.startup_plan.stream
        try:
            # Per binlog event this is the hot path: work that can only matter at a transaction's
            # end (a commit needs a checkpoint, which exists only between transactions) or for
            # a non-empty emission is skipped otherwise.
            while not (until and until()):
                if self._stop.is_set():
                    if self._stopping_point(capture):
                        break
                else:
                    if stop_when_done and capture.progress.current is None and capture.window is None:
                        log.info("the start-up snapshot is done: stopping (%s)", self.startup_plan.note.split(":")[0])
                        self._stop.set()
                        continue
                    if signals.kafka is not None:
                        self._dispatch(signals.poll_kafka())
                        self.channel_offsets["kafka_signals"] = signals.kafka_offsets()
                    read = capture.next_read()
                    if read is not None:
                        self._dispatch(self.snapshot_reads.perform(capture, read))
                        opened = (read.snapshot, time.monotonic()) if capture.window is not None else None
                        self._commit()
                        continue
                event = next(events)
                if held and type(event) is not RowChange:  # written before the capture moves past them
                    self._dispatch(held)
                    held, held_bytes = [], 0
                emissions = capture.on_event(event)
                if distributed is not None and capture.awaits_staged_result:  # close marker before the read's end
                    emissions += distributed.poll(capture, wait=True)
                if opened is not None and capture.window is None:  # closed (or discarded) by this event
                    snapshot, since = opened
                    opened = None
                    capture.window_waited(time.monotonic() - since)
                    snapshot.updated_ms = now_ms()  # its rows count from now: `dblog status` rate
                if emissions:
                    if (len(emissions) == 1 and emissions[0] is event and type(event) is RowChange
                            and event.definition is None and event.table != signal_table):
                        held.append(event)  # a streamed change, passed through as it came
                        held_bytes += event.size
                        if len(held) < HELD_CHANGES and held_bytes < HELD_BYTES:
                            continue
                        emissions = []
                    if held:
                        self._dispatch(held)
                        held, held_bytes = [], 0
                    if emissions:
                        self._dispatch(emissions)
                kind = type(event)
                if kind is TransactionEnd or kind is Heartbeat:
                    if kind is TransactionEnd:
                        stats.transactions += 1
                        sink.transaction_ended(event)  # before the commit: its END is flushed with it
                    else:
                        stats.heartbeat(event)  # the reader is at the binlog's end: no lag
                    if distributed is not None and distributed.busy:
                        self._poll_distributed(capture)
                    if heartbeats is not None:
                        heartbeats.tick()
                    self._commit()
                elif kind is TransactionStart:
                    stats.transaction = event  # its source time against the clock: the lag (metrics)
                    sink.transaction_started(event)
            if held:
                self._dispatch(held)
            self._commit(force=True)
        finally:
            source.close()
            self.close()

    def _poll_distributed(self, capture: ChangeCapture) -> None:
        """The read by Spark tasks: its progress, and once it has ended its rows (between
        transactions: where its window may close)."""
        self._dispatch(self.distributed.poll(capture))
        current = capture.progress.current
        if current is not None and current.window_rows:
            current.updated_ms = now_ms()
            self._log_progress()

    @staticmethod
    def _stopping_point(capture: ChangeCapture) -> bool:
        """Whether a stop can commit here: the open window dropped, no transaction half read."""
        if capture.window is not None:
            capture.discard_window()
        return capture.checkpoint() is not None

    def _source_history(self, document: dict | None) -> TableHistory | None:
        """A schema history for an in-process BinlogSource, restored from `document`."""
        if document is None:
            return None
        history = TableHistory(TableDefinitions(self.schemas.session.run), self.server.executed_gtids,
                               lambda table: self.is_captured(table) or table == self.signal_table)  # rows decoded
        history.restore(document, self._positions_flavor())
        return history

    def _open_binlog(self, position: GtidSet, resume: GtidSet | None = None) -> BinlogSource | BinlogReaderProcess:
        """The binlog after `position` (read from `resume` when set, to hold prepared XA
        transactions again): read and decoded here, or in a reader process."""
        source = self.config.source
        # The source's own copy of the schema history, as of `position`: it moves it along as it
        # reads (ahead of the engine's) to decode table maps without column names
        history = self.table_history.history
        definitions = history.document() if history is not None and self.decodes_from_history else None
        if reader_process_wanted(source.reader_process):
            binlog = BinlogReaderProcess(
                self._connection_settings(), source.server_id, position, source, self.signal_table, self.schemas,
                source.heartbeat_seconds, flavor=self.flavor, resume_from=resume, definitions=definitions,
                offsets_path=str(self.store.path),
                binlog_identity=self.binlog_identity,
            )
        else:
            binlog = BinlogSource(
                self._connection_settings(),
                server_id=source.server_id,
                start=position,
                schema_of=self.schemas.schema,
                table_filter=lambda table: self.is_captured(table) or table == self.signal_table,
                heartbeat_seconds=source.heartbeat_seconds,
                max_reconnects=source.binlog_reconnects,
                resume_from=resume,
                max_held_rows=source.max_held_xa_rows,
                max_held_bytes=source.max_held_xa_bytes,
                history=self._source_history(definitions),
                before_reconnect=self._check_binlog_server,
                binlog_base=self._binlog_base(),
            )
        self.stats.binlog_opened(binlog)
        return binlog

    def _positions_flavor(self) -> str:
        """The flavour of the engine's positions: file-position mode's are MariaDB-form sets
        (dblog.core.file_positions) whatever the server."""
        return "mariadb" if self.binlog_identity is not None else self.flavor

    def _binlog_base(self) -> str | None:
        return self.binlog_identity.base_name if self.binlog_identity is not None else None

    def close(self) -> None:
        """Release the sink, the connections and the Kafka clients. Idempotent; what was not
        committed is dropped (a new engine replays it from the offsets)."""
        if self._table_commits is not None:
            self._table_commits.close()
            self._table_commits = None
        if self.distributed is not None:
            self.distributed.close()
        if self.heartbeats is not None:
            self.heartbeats.close()
        self.snapshot_reads.close()
        self.sink.close()
        if self.chunks is not self.source.chunks:
            self.chunks.close()
        self.source.close()
        kafka_signals = self.signals.kafka if self.signals is not None else None
        for channel in (kafka_signals, self.kafka_notifier):
            if channel is not None:
                channel.close()
        if self.signals is not None:
            self.signals.kafka = None
        self.kafka_notifier = None

    def _commit(self, force: bool = False) -> None:
        """Flush the sink and save the offsets when due (every commit interval, or early when
        the sink holds `sink.batch_rows`); `force`: now, and done when this returns. With a
        background-committing sink the commit runs on the committer thread and the loop goes
        on (dblog.runtime.table_commits), and its failure is raised here at the next cut. A
        failure is counted (`dblog_sink_commit_failures_total`) and raised."""
        try:
            self._commit_when_due(force)
        except Exception:
            self.stats.commit_failed()
            raise

    def _commit_when_due(self, force: bool) -> None:
        now = time.monotonic()
        due = now - self._last_commit >= self.config.commit_interval_seconds()
        full = self.sink.pending_rows >= self.config.sink.batch_rows
        if not (force or due or full):
            return
        if self._table_commits is None and self.sink.commits_per_table:
            self._table_commits = TableCommits(self.sink, self.store.save)
        background = self._table_commits
        if background is not None:
            background.raise_failure()
            if force:
                background.wait()  # every table's commit under way ends: the cut below takes all
            elif background.busy:
                if self.sink.pending_rows < 2 * self.config.sink.batch_rows:
                    return  # the next batch grows meanwhile
                background.wait()  # memory stays bounded
        checkpoint = self.capture.checkpoint()
        if checkpoint is None:
            return
        delivered = self.delivered
        offsets = Offsets(self.flavor, checkpoint.position, checkpoint.progress, self.channel_offsets,
                          checkpoint.resume, self.table_history.document(checkpoint.position),
                          # until that transaction has ended (a checkpoint lies between transactions)
                          delivered[1] if delivered is not None and delivered[0] == checkpoint.position else None,
                          self.binlog_identity)
        if background is not None:
            rows = self.stats.rows_since_last_cut()
            background.submit(offsets, lambda seconds: self.stats.committed(seconds, rows))
            self._last_commit = time.monotonic()  # from the cut: commits may run back to back
            if force:
                background.wait()
            return
        self.sink.flush(offsets)
        self.store.save(offsets)
        self._last_commit = time.monotonic()  # from the end of a commit: slow MERGEs never run back to back
        self.stats.committed(self._last_commit - now)
        self.sink.after_commit()  # e.g. Iceberg maintenance, only once the offsets are saved

    # --- what the capture emits ---------------------------------------------------------------

    def _dispatch(self, emissions: list[Emission]) -> None:
        """Row changes to the sink in order; a signal-table insert is acted upon where it stands
        (what it emits comes next, before the rest); notifications to the listeners; DDL to
        the sink, whose re-reads are queued."""
        changes: list[RowChange] = []
        # Per table, its change counts for the metrics, or False when it is not captured: one
        # lookup per row serves both (cheaper than the is_captured call it replaces).
        tables = self.stats.changes
        in_force = self.schemas.in_force  # tables whose rows are of an earlier definition than the server's
        pending = deque(emissions)
        while pending:
            item = pending.popleft()
            if isinstance(item, RowChange):
                # A row logged under an earlier definition than the server's: in force until the
                # next DDL (a chunk's rows, unstamped, are of the definition in force where the
                # stream is: a window across DDL on its table is discarded).
                definition = item.definition
                if definition is not None and in_force.get(item.table) is not definition:
                    self.sink.write(changes)  # written with the definition they came under
                    changes = []
                    self._redefine(item.table, definition)
                if item.table == self.signal_table:
                    if item.op == "c":
                        self.sink.write(changes)
                        changes = []
                        pending.extendleft(reversed(self.signals.on_signal_row(item.after or {})))
                    continue
                counts = tables.get(item.table)
                if counts is None:
                    counts = self.stats.table_counts(item.table, self.is_captured(item.table))
                if counts:
                    changes.append(item)
                    counts[OP_INDEX[item.op]] += 1
            elif isinstance(item, StagedSnapshot):
                self.sink.write(changes)
                changes = []
                self.sink.write_staged(item)
            elif isinstance(item, Notification):
                self._notify(item)
            elif isinstance(item, SchemaChange):
                self.sink.write(changes)
                changes = []
                if self._table_commits is not None:
                    try:
                        self._table_commits.wait()  # the sink commits what it holds before the DDL
                    except Exception:
                        self.stats.commit_failed()
                        raise
                self.schemas.forget_schema()
                self.table_history.schema_changed(item)  # the definitions as of the statement, for the sink
                # The DDL's own transaction is open: the capture's position is the cut before it.
                # The sink names the tables whose existing rows it cannot fix by itself. A DROP
                # DATABASE reaches it as a DROP TABLE of each known table of the database.
                resnapshot = []
                for ddl in self.known_tables.follow(classify_ddl(item.sql, item.db)):
                    resnapshot += self.sink.schema_changed(item, ddl, self.capture.position)
                requests = [TableSnapshot(table) for table in resnapshot if self.is_captured(table)]
                if requests:
                    pending.extendleft(reversed(self.capture.request_snapshot(requests, f"schema-change-{item.gtid}")))
        self.sink.write(changes)
        self.snapshot_reads.settle(self.capture)  # a signal may have stopped or paused a blocking read

    def _redefine(self, table: TableId, definition: TableSchema) -> None:
        """The stream's rows of `table` come under `definition` from here: logged before DDL the
        server has applied since, until the stream reaches it (`forget_schema` there). The sink
        drops what it derived from the other one (a reader process sends the same definition
        again with each batch: an equal one changes nothing for the sink)."""
        previous = self.schemas.in_force.get(table)
        self.schemas.redefine(table, definition)
        if previous != definition:
            log.info("rows of %s were logged under an earlier definition than the server's: written by it until the "
                     "binlog's next DDL", table)
            self.sink.table_redefined(table)

    def _log_progress(self) -> None:
        """Long snapshots say where they stand: rows, rate and ETA, every PROGRESS_LOG_SECONDS."""
        current = self.capture.progress.current
        now = time.monotonic()
        if current is None or now < self._next_progress_log:
            return
        self._next_progress_log = now + PROGRESS_LOG_SECONDS
        log.info("snapshot %s: %s", current.table, table_progress(current), extra=log_fields({
            "table": str(current.table), "rows": current.rows_scanned, "estimated_rows": current.estimated_rows,
            "chunks": current.chunks, "rate": current.rate(), "eta": current.eta_seconds(),
        }))

    def _notify(self, notification: Notification) -> None:
        level = logging.DEBUG if notification.type == "IN_PROGRESS" else logging.INFO
        if log.isEnabledFor(level):  # IN_PROGRESS comes with every chunk, mostly to a disabled debug level
            log.log(level, "%s %s", notification.type, json.dumps(notification.data, default=str),
                    extra=log_fields({"notification": notification.type, **notification.data}))
        if notification.type == "IN_PROGRESS":
            self._log_progress()
        self.stats.notified(notification)
        if self.kafka_notifier is not None:
            self.kafka_notifier.send(notification, now_ms())
        for listener in self._listeners:
            listener(notification)
