"""The Spark sink: change batches MERGEd into Apache Iceberg tables, exactly once.

Theory of operation
-------------------
Per source table (or per routed group of shard tables, `dblog.sinks.iceberg.routing`) there is one Iceberg
table, format v3, merge-on-read, with the source's columns (`dblog.sinks.iceberg.types`), its key
columns NOT NULL and declared as Iceberg identifier fields, and one bookkeeping column
`_dblog_seq`: the binlog position (file number, byte position, row) of the change that last
wrote the row.

`write()` keeps, per target table, the last change of each key in event order (a key-changing
update deletes its old key). `flush(offsets)` MERGEs each pending batch: deletes delete, the
rest upsert. Binlog changes carry a sequence guard (applied only when newer than the row's
`_dblog_seq`), so MERGEing a batch twice changes nothing. Snapshot reads (`op=r`) always
apply: the chunk was read after every change the table holds for its keys (a change between
the watermarks removed the key from the chunk), so a read row is never older than the target
row; it keeps the row's `_dblog_seq`.

Exactly once: each MERGE commits, in the same Iceberg snapshot, the binlog GTID position the
engine's checkpoint stands at (snapshot summary `dblog.position`). The engine saves its
offsets file only after every table's MERGE returned, so after a crash the file may be behind
some tables, never ahead. On start the sink reads each table's committed position (from the
newest dblog snapshot among the current snapshot and its ancestors: a rollback takes the
position back with the rows) and drops every binlog change whose transaction it already holds;
the engine replays from the offsets file, and each table takes exactly what it lacks. A crash
during an Iceberg commit leaves the old metadata (the catalog's commit is atomic) and the
table's old position; a commit whose outcome the catalog could not report keeps its files
(`direct_writes`), and the position read at the restart says whether it landed.

Binlog positions only grow on one server. If a change arrives with a position at or below one
a table already holds while its transaction is not in the table (a `RESET MASTER`, or a new
primary), the sink stops with an error instead of silently ignoring it (see the README).
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, StagedSnapshot, TableId
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.offsets import Offsets
from dblog.core.sql import quote_identifier as quote
from dblog.mysql.schema import INTEGER_TYPES, Column, TableSchema
from dblog.sinks.base import MergeListener, Sink, SinkError, SnapshotStaging
from dblog.sinks.iceberg.arrow_batch import KeyBound, arrow_array, bounds_of, key_bounds, seq_array
from dblog.sinks.iceberg.changelog import ChangelogTable, changelog_name
from dblog.sinks.iceberg.direct_writes import DirectWrites
from dblog.sinks.iceberg.key_ranges import KeyRanges, arrow_extremes, identity_span, key_identity, orderable
from dblog.sinks.iceberg.maintenance import (
    IcebergMaintenance,
    MaintenancePolicy,
    MaintenanceSchedule,
    lineage,
    sql_string,
)
from dblog.sinks.iceberg.routing import SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN, Router, RoutingError
from dblog.sinks.iceberg.session import iceberg_commit_properties
from dblog.sinks.iceberg.settings import IcebergSettings, SparkSettings
from dblog.sinks.iceberg.staging import AFTER_JSON_COLUMN, IDENTITY_COLUMN, StagingArea, default_staging_dir
from dblog.sinks.iceberg.types import can_widen, from_spark, spark_type

log = logging.getLogger("dblog.spark")

SEQ_COLUMN = "_dblog_seq"
OP_COLUMN = "_dblog_op"  # only in the MERGE source, never in a target table
COMMIT_THREADS = 4  # tables committed at once: a MERGE spends much of its time in planning and metadata I/O
POSITION_PROPERTY = "dblog.position"
FLAVOR_PROPERTY = "dblog.flavor"
SEQUENCE_PROPERTY = "dblog.sequence"  # the highest binlog sequence the table holds

TABLE_PROPERTIES = {
    "format-version": "3",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}

_SOURCE_COLUMNS = (
    Column(SOURCE_DB_COLUMN, "varchar", "varchar(64)", nullable=False),
    Column(SOURCE_TABLE_COLUMN, "varchar", "varchar(64)", nullable=False),
)
_FILE_NUMBER = re.compile(r"(\d+)$")


def binlog_sequence(change: RowChange) -> int:
    """A number that grows with the binlog position on one server: file number, byte
    position, row within the event."""
    source = change.source
    match = _FILE_NUMBER.search(source.file or "")
    file_number = int(match.group(1)) if match else 0
    return (file_number * 10**12 + (source.pos or 0)) * 10**6 + source.row


@dataclass
class Target:
    """One Iceberg table and what the sink knows about it."""

    table: TableId  # db.table inside the catalog
    qualified: str  # `catalog`.`db`.`table`, quoted
    sharded: bool  # rows carry _source_db/_source_table in their key
    columns: list[Column]  # data columns, in table order (source columns first)
    key_columns: tuple[str, ...]
    committed: GtidSet | None = None  # binlog transactions the table already holds
    sequence: int = 0  # highest binlog sequence the table holds
    pending: dict[tuple, RowChange] = field(default_factory=dict)  # last change per key
    staged: list[StagedSnapshot] = field(default_factory=list)  # snapshot reads staged by Spark tasks
    sources: set[TableId] = field(default_factory=set)  # source tables seen writing to it
    # their schemas, looked up on the loop's thread: commit threads must not query the source
    schemas: dict[TableId, TableSchema] = field(default_factory=dict)
    changelog: ChangelogTable | None = None  # with iceberg.changelog: every change, appended
    # Where its keys can be (key_ranges), when the sink knows it (`_known_key_ranges`); None: unknown
    written: KeyRanges | None = None

    def key_of(self, change: RowChange, key: tuple) -> tuple:
        return (change.table.db, change.table.table, *key) if self.sharded else key


@dataclass
class PendingBatch:
    """What one commit writes to one target: its last change per key, and its changelog rows."""

    target: Target
    changes: dict[tuple, RowChange]
    changelog: list[RowChange]
    staged: list[StagedSnapshot] = field(default_factory=list)

    @property
    def table_key(self) -> TableId:
        return self.target.table


class SparkIcebergSink(Sink):
    """The Sink (`dblog.sinks.base.Sink`) into Iceberg tables of one Spark catalog."""

    def __init__(
        self,
        spark,
        catalog: str,
        schema_of: Callable[[TableId], TableSchema],
        flavor: str,
        router: Router | None = None,
        table_properties: dict[str, str] | None = None,
        captures: Callable[[TableId], bool] = lambda table: True,
        maintenance: MaintenancePolicy | None = None,
        changelog: bool = False,
        staging_dir: str | None = None,
        write_mode: str = "merge",
    ) -> None:
        self.spark = spark
        self.catalog = catalog
        self._schema_of = schema_of
        self._flavor = flavor
        self.router = router or Router([])
        self._properties = {**TABLE_PROPERTIES, **(table_properties or {})}
        self._targets: dict[TableId, Target] = {}
        self._captures = captures
        self._with_changelog = changelog
        policy = maintenance or MaintenancePolicy(enabled=False)
        self._maintenance = (IcebergMaintenance(spark, catalog, policy, equality_deletes=write_mode == "upsert")
                             if policy.enabled else None)
        self._schedule = MaintenanceSchedule(policy)
        self.pending_rows = 0
        if staging_dir is None:
            warehouse = spark.conf.get(f"spark.sql.catalog.{catalog}.warehouse", None)
            staging_dir = default_staging_dir(warehouse) if warehouse else tempfile.mkdtemp(prefix="dblog-staging-")
        self.staging = StagingArea(spark, staging_dir)
        self._direct = DirectWrites(spark)  # appends and upserts without a Spark job
        self.write_mode = write_mode  # "merge" (Spark MERGE) or "upsert" (equality deletes, `_merge`)
        self.appended_batches = 0  # commits that appended instead of MERGEing (`_can_append`)
        self.upserted_batches = 0  # commits made as row deltas with equality deletes
        self._committers: ThreadPoolExecutor | None = None
        # Told (catalog.db.table of the target, seconds) after each MERGE, from the thread that
        # committed it: the engine's metrics (`report_merges`).
        self._on_merge: MergeListener | None = None

    # --- the Sink interface -----------------------------------------------------------------

    def write(self, changes: list[RowChange]) -> None:
        for change in changes:
            route = self.router.route(change.table)
            if route.ignores_op(change.op):
                continue
            target = self._target(route.target, change.table, route.sharded)
            if change.table not in target.schemas:
                target.sources.add(change.table)
                target.schemas[change.table] = self._schema_of(change.table)
            if target.changelog is not None:
                target.changelog.add(change)
            if change.op != "r" and not self._is_new(target, change):
                continue
            if change.before_key is not None:  # the old key disappears where the new one appears
                old = RowChange(change.table, "d", change.before_key, change.before, None, change.source)
                target.pending[target.key_of(change, change.before_key)] = old
            target.pending[target.key_of(change, change.key)] = change
            self.pending_rows += 1

    def flush(self, offsets: Offsets | None = None) -> None:
        """MERGE every pending batch, each commit carrying `offsets.position`."""
        self.commit(self.detach(), offsets)

    commits_per_table = True  # each table's commit carries its own position (dblog.runtime.table_commits)

    def detach(self, tables: list[TableId] | None = None) -> list[PendingBatch]:
        """The pending batches of `tables` (target names; None: every table)."""
        targets = self._targets.values() if tables is None else [self._targets[name] for name in tables]
        batches = [self._detach(target) for target in targets]
        self.pending_rows = sum(len(target.pending) + sum(s.rows for s in target.staged)
                                for target in self._targets.values())
        return [batch for batch in batches if batch.changes or batch.changelog or batch.staged]

    def pending_tables(self) -> list[TableId]:
        """The target tables with something to commit."""
        return [name for name, target in self._targets.items()
                if target.pending or target.staged or (target.changelog is not None and target.changelog.pending)]

    def known_tables(self) -> list[TableId]:
        return list(self._targets)

    @staticmethod
    def _detach(target: Target) -> PendingBatch:
        changelog = target.changelog.detach() if target.changelog is not None else []
        batch = PendingBatch(target, target.pending, changelog, target.staged)
        target.pending, target.staged = {}, []
        return batch

    def write_staged(self, staged: StagedSnapshot) -> None:
        """Snapshot reads that Spark tasks staged (`snapshot.distributed`): they join the
        pending batch of their target and are MERGEd first at its commit (`_merge_staged`).
        Before the changes written before them is as good as after: the log touched none of
        their keys inside the window, so for each of them the last change before holds the
        staged row's value. The changes written after come after, and win."""
        route = self.router.route(staged.table)
        if route.ignores_op("r"):
            self.staging.remove_directory(staged.staged.directory)
            return
        target = self._target(route.target, staged.table, route.sharded)
        target.sources.add(staged.table)
        target.staged.append(staged)
        self.pending_rows += staged.rows

    def commit(self, batch: list[PendingBatch], offsets: Offsets | None) -> None:
        """Each table's commit is its own Iceberg commit carrying the same position, so they
        may run side by side (one thread each; the commit properties are per thread). All have
        returned, or one raised, before this does: only then may the offsets be saved."""
        position = offsets.position if offsets else None
        if len(batch) <= 1:
            for pending in batch:
                self._commit(pending, position)
            return
        if self._committers is None:
            self._committers = ThreadPoolExecutor(COMMIT_THREADS, thread_name_prefix="dblog-iceberg")
        futures = [self._committers.submit(self._commit, pending, position) for pending in batch]
        wait(futures)
        for future in futures:
            future.result()  # the first failure, after every table's commit has ended

    def check_routes(self, tables: list[TableId]) -> None:
        """Refuse, before anything is written, routes under which two captured tables would
        overwrite each other's keys in one Iceberg table."""
        try:
            self.router.check_targets(tables)
        except RoutingError as error:
            raise SinkError(f"iceberg.routes: {error}") from None

    def report_merges(self, listener: MergeListener) -> None:
        self._on_merge = listener

    def snapshot_staging(self) -> SnapshotStaging:
        return SnapshotStaging(self.spark, self.staging)

    def after_commit(self) -> None:
        """Compaction and snapshot expiry when due: only between commits, once the engine's
        offsets are saved, from the thread that MERGEs (see dblog.sinks.iceberg.maintenance)."""
        if self._maintenance is not None:
            self._maintenance.run_due(self._schedule, time.monotonic())

    def close(self) -> None:
        if self._committers is not None:
            self._committers.shutdown()
            self._committers = None
        for target in self._targets.values():
            target.pending.clear()
            for staged in target.staged:
                self.staging.remove_directory(staged.staged.directory)
            target.staged.clear()
        self.pending_rows = 0

    def schema_changed(self, change: SchemaChange, ddl: DdlChange, position: GtidSet) -> list[TableId]:
        """DDL was read from the binlog (`ddl`: what `classify_ddl` made of it); `position` is
        the engine's cut just before it.

        Every pending change of the tables it touches is MERGEd first, with the schema it was
        read with; their targets are looked up (and evolved) again at their next change.
        TRUNCATE and DROP TABLE (and CREATE OR REPLACE) delete the table's rows from its target
        (unless the route ignores them): the target table stays, empty, for readers and for a
        table created again under the name. A rename is a DROP of the old name (route event
        `drop`) and a snapshot of the new one. Returns the tables to snapshot again: after ADD
        COLUMN, whose default the server wrote into every existing row without a row event,
        and the new names of renamed tables (their rows came without row events)."""
        touched = {table for table in ddl.tables if self._captures(table)}
        for target in list(self._targets.values()):
            if target.sources & touched or (not ddl.tables and any(s.db == change.db for s in target.sources)):
                self._commit(self._detach(target), position)
                del self._targets[target.table]
        self.pending_rows = sum(len(target.pending) for target in self._targets.values())
        if ddl.kind in ("truncate", "drop_table"):
            for table in touched:
                self._delete_rows_of(table, "truncate" if ddl.kind == "truncate" else "drop", change, position)
        resnapshot = set(touched) if ddl.kind == "add_column" else set()
        for old, new in ddl.renamed:
            if old in touched:
                self._delete_rows_of(old, "drop", change, position)
                resnapshot.discard(old)
            if self._captures(new):
                resnapshot.add(new)
        return sorted(resnapshot)

    def _delete_rows_of(self, source: TableId, event: str, change: SchemaChange, position: GtidSet) -> None:
        route = self.router.route(source)
        qualified = self._qualified(route.target)
        if route.ignores(event):
            log.info("%s of %s ignored by its route: %s keeps its rows", event.upper(), source, qualified)
            return
        if not self._exists(route.target):
            return
        holds = self._committed_in(qualified)
        if holds is not None and change.gtid in holds[0]:
            return  # applied before a crash: the rows there now are newer
        where = ""
        if route.sharded:
            where = (f" WHERE {quote(SOURCE_DB_COLUMN)} = {sql_string(source.db)}"
                     f" AND {quote(SOURCE_TABLE_COLUMN)} = {sql_string(source.table)}")
        properties = {POSITION_PROPERTY: str(position.with_gtid(change.gtid)), FLAVOR_PROPERTY: self._flavor,
                      SEQUENCE_PROPERTY: str(holds[1] if holds else 0)}
        with iceberg_commit_properties(self.spark, properties):
            self.spark.sql(f"DELETE FROM {qualified}{where}")
        log.info("%s of %s: deleted its rows from %s", event.upper(), source, qualified)

    # --- targets ----------------------------------------------------------------------------

    def target_name(self, table: TableId) -> str:
        """The quoted `catalog`.`db`.`table` that a source table's changes land in."""
        return self._qualified(self.router.route(table).target)

    def _qualified(self, table: TableId) -> str:
        return f"{quote(self.catalog)}.{quote(table.db)}.{quote(table.table)}"

    def _target(self, name: TableId, source: TableId, sharded: bool) -> Target:
        target = self._targets.get(name)
        if target is not None:
            return target
        schema = self._schema_of(source)
        if not schema.key_columns:
            raise SinkError(
                f"{source} has no primary key: an Iceberg target needs one to MERGE by. Give the table a primary key, "
                "or exclude it from capture (source.exclude)"
            )
        columns = [*(_SOURCE_COLUMNS if sharded else ()), *schema.columns]
        key_columns = (*((SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN) if sharded else ()), *schema.key_columns)
        qualified = self._qualified(name)
        target = Target(name, qualified, sharded, columns, key_columns)
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(self.catalog)}.{quote(name.db)}")
        if self._exists(name):
            self._evolve(target, source)
            self._read_committed(target)
            target.written = self._known_key_ranges(target)
        else:
            self._create(target)
            target.written = KeyRanges()
        if self._with_changelog:
            log_name = changelog_name(qualified)
            target.changelog = ChangelogTable.create(self.spark, log_name, self._properties)
            holds = self._committed_in(log_name)
            target.changelog.committed = holds[0] if holds else None
        self._targets[name] = target
        return target

    def _exists(self, name: TableId) -> bool:
        return bool(self.spark.catalog.tableExists(f"{self.catalog}.{name.db}.{name.table}"))

    def _create(self, target: Target) -> None:
        ddl = ", ".join(
            f"{quote(c.name)} {spark_type(c)}{' NOT NULL' if c.name in target.key_columns else ''}"
            for c in target.columns
        )
        properties = ", ".join(f"'{k}' = '{v}'" for k, v in self._properties.items())
        self.spark.sql(
            f"CREATE TABLE {target.qualified} ({ddl}, {SEQ_COLUMN} DECIMAL(38,0)) USING iceberg "
            f"TBLPROPERTIES ({properties})"
        )
        keys = ", ".join(quote(k) for k in target.key_columns)
        self.spark.sql(f"ALTER TABLE {target.qualified} SET IDENTIFIER FIELDS {keys}")
        log.info("created Iceberg table %s (key %s)", target.qualified, keys)

    def _evolve(self, target: Target, source: TableId) -> None:
        """Bring an existing table's columns in line with the source: add new columns, widen
        types Iceberg can widen; refuse anything else rather than write mixed data. Columns
        dropped in the source stay in the target (their values kept, NULL in new rows)."""
        existing = {f.name: f.dataType.simpleString().upper() for f in self.spark.table(target.qualified).schema.fields}
        identifier = self._identifier_fields(target)
        remedy = (f"drop the Iceberg table {target.qualified} and re-snapshot the source "
                  f"(dblog signal execute-snapshot --tables '{re.escape(str(source))}')")
        if identifier and identifier != set(target.key_columns):
            raise SinkError(
                f"the primary key of {source} is now {target.key_columns} but {target.qualified} is keyed by "
                f"{tuple(sorted(identifier))}: {remedy}"
            )
        for column in target.columns:
            wanted, current = spark_type(column), existing.get(column.name)
            if current is None:
                self.spark.sql(f"ALTER TABLE {target.qualified} ADD COLUMN {quote(column.name)} {wanted}")
                log.info("added column %s %s to %s", column.name, wanted, target.qualified)
            elif current != wanted:
                if not can_widen(current, wanted):
                    raise SinkError(
                        f"column {column.name} of {source} is now {column.column_type}, which maps to {wanted}, "
                        f"but {target.qualified} holds {current} and Iceberg cannot convert it: {remedy}"
                    )
                self.spark.sql(f"ALTER TABLE {target.qualified} ALTER COLUMN {quote(column.name)} TYPE {wanted}")
                log.info("widened column %s of %s from %s to %s", column.name, target.qualified, current, wanted)

    def _identifier_fields(self, target: Target) -> set[str]:
        return set(self._spark_table(target.qualified).schema().identifierFieldNames())

    def _read_committed(self, target: Target) -> None:
        holds = self._committed_in(target.qualified)
        if holds is not None:
            target.committed, target.sequence = holds
            log.info("%s holds the binlog up to %s", target.qualified, target.committed)

    def _committed_in(self, qualified: str) -> tuple[GtidSet, int] | None:
        """(position, sequence) of the newest snapshot dblog wrote among the current snapshot and
        its ancestors (`lineage`), not the newest by commit time: after a rollback the table holds
        the older snapshot's rows, so its position, and the changes after it are replayed.
        Maintenance carries them over to its own snapshots; other writers' snapshots have none."""
        table = self._spark_table(qualified)
        table.refresh()  # the catalog caches tables
        for snapshot in lineage(table):
            summary = snapshot.summary()  # a Java map: one round trip a lookup
            position = summary.get(POSITION_PROPERTY)
            if position is not None:
                flavor = summary.get(FLAVOR_PROPERTY) or self._flavor
                return GtidSet.parse(position, flavor), int(summary.get(SEQUENCE_PROPERTY) or 0)
        return None

    def _spark_table(self, name: str):
        """The org.apache.iceberg.Table behind a table name of the Spark catalog."""
        jvm = self.spark.sparkContext._jvm
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, name)

    def committed_position(self, table: TableId) -> GtidSet | None:
        """The binlog position the target of `table` holds (None before its first commit)."""
        target = self._targets.get(self.router.route(table).target)
        return target.committed if target else None

    def _is_new(self, target: Target, change: RowChange) -> bool:
        """False for a binlog change the table already holds (replayed after a crash)."""
        gtid = Gtid.parse(change.source.gtid) if change.source.gtid else None
        if gtid is not None and target.committed is not None and gtid in target.committed:
            return False
        sequence = binlog_sequence(change)
        if target.committed is not None and sequence <= target.sequence:
            raise SinkError(
                f"binlog change {change.source.gtid} at {change.source.file}:{change.source.pos} is not newer than "
                f"what {target.qualified} holds although its transaction is not in the table: the binlog was reset "
                "or dblog now reads another server. Drop the Iceberg tables and offsets and snapshot again"
            )
        return True

    # --- commits ----------------------------------------------------------------------------

    def _commit(self, batch: PendingBatch, position: GtidSet | None) -> None:
        """MERGE a target's batch (after the rows staged for it), then append it to its changelog."""
        target = batch.target
        # A scheduler pool per committing thread: Spark's FAIR mode then shares the executors
        # task by task between tables committing at once. In one pool jobs run first come,
        # first served, and a small table's MERGE waits for every task of a large one's scan.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", threading.current_thread().name)
        for staged in batch.staged:
            self._merge_staged(target, staged)
        if batch.changes:
            started = time.monotonic()
            self._merge(target, batch.changes, position)
            if self._on_merge is not None:
                self._on_merge(f"{self.catalog}.{target.table}", time.monotonic() - started)
        if batch.changelog:
            properties = {FLAVOR_PROPERTY: self._flavor, SEQUENCE_PROPERTY: str(target.sequence)}
            if position is not None:
                properties[POSITION_PROPERTY] = str(position)
            target.changelog.append(batch.changelog, properties, position)

    def _batch_schema(self, target: Target) -> str:
        """The MERGE source's schema (DDL): the target's columns, the sequence and the op."""
        ddl = ", ".join(f"{quote(c.name)} {spark_type(c)}" for c in target.columns)
        return f"{ddl}, {SEQ_COLUMN} DECIMAL(38,0), {OP_COLUMN} STRING"

    def _arrow_batch(self, target: Target, changes: dict[tuple, RowChange]) -> tuple[pa.Table, int]:
        """The pending changes as an Arrow table (one row per key, `_batch_schema`'s columns),
        and the highest binlog sequence the table holds once it is committed."""
        rows, sequences, ops = [], [], []
        sequence = target.sequence
        for key, change in changes.items():
            if change.op == "d":
                row = dict(zip(target.key_columns, key))
            elif target.sharded:
                row = {**change.after, SOURCE_DB_COLUMN: change.table.db, SOURCE_TABLE_COLUMN: change.table.table}
            else:
                row = change.after
            seq = None if change.op == "r" else binlog_sequence(change)
            if seq is not None and seq > sequence:
                sequence = seq
            rows.append(row)
            sequences.append(seq)
            ops.append(change.op)
        arrays = [arrow_array(c, [row.get(c.name) for row in rows]) for c in target.columns]
        arrays += [seq_array(sequences), pa.array(ops, pa.string())]
        names = [*(c.name for c in target.columns), SEQ_COLUMN, OP_COLUMN]
        return pa.Table.from_arrays(arrays, names=names), sequence

    def _merge(self, target: Target, changes: dict[tuple, RowChange], position: GtidSet | None) -> None:
        """One commit of the target's pending changes: the batch is staged as Parquet and
        MERGEd (see `_merge_statement`), or appended when it holds no delete and the table
        provably lacks its keys (`_can_append`)."""
        table, sequence = self._arrow_batch(target, changes)
        bounds = key_bounds([c for c in target.columns if c.name in target.key_columns], table)
        properties = {SEQUENCE_PROPERTY: str(sequence), FLAVOR_PROPERTY: self._flavor}
        if position is not None:
            properties[POSITION_PROPERTY] = str(position)
        span = self._key_span(target, changes, table)
        append = self._can_append(target, table, bounds, span)
        if append and self._direct.append(target.qualified, table.drop_columns([OP_COLUMN]), properties):
            self.appended_batches += 1
        elif not append and self.write_mode == "upsert" and self._upsert(target, table, properties):
            self.upserted_batches += 1
        else:
            frame, staged = self.staging.stage(table, self._batch_schema(target))
            try:
                self._write(target, frame, bounds, append, properties)
            finally:
                self.staging.release(staged)
        target.sequence = sequence
        if target.written is not None and span is not None:
            target.written.add(*span)
        if position is not None:
            target.committed = position
        self._schedule.record_commit(target.qualified, time.monotonic())

    def _upsert(self, target: Target, table: pa.Table, properties: dict[str, str]) -> bool:
        """`iceberg.write_mode = "upsert"`: the batch as one row delta, written without Spark
        (`direct_writes`): every key of it deleted by equality, and its rows but deletes added.
        What the MERGE does, but for two things the MERGE guards that this need not: a binlog
        change is applied only when newer than the row (every change reaching here is newer
        than anything the table holds: `_is_new`), and a snapshot read keeps the row's
        `_dblog_seq` (here its `_dblog_seq` is NULL, as on a row only ever read)."""
        rows = table.filter(pc.not_equal(table.column(OP_COLUMN), "d")).drop_columns([OP_COLUMN])
        return self._direct.upsert(target.qualified, rows, table.select(list(target.key_columns)), properties)

    def _merge_staged(self, target: Target, staged: StagedSnapshot) -> None:
        """The staged rows less those whose key identity the log touched inside the window (an
        anti-join on `_dblog_identity`), as snapshot reads: appended when the table provably
        lacks their keys, else MERGEd like a batch of them. Its own Iceberg commit, carrying
        the position the table already holds: a crash before the batch's MERGE replays from
        there, and reads the window again."""
        ranges = staged.staged
        target.written = None  # its keys are known per column only: the metrics decide from now on
        names = set(ranges.columns)
        frame = self.staging.read_directory(ranges.directory, ranges.schema_ddl)
        dropped_file = None
        if staged.dropped:
            dropped, dropped_file = self.staging.stage(pa.table({IDENTITY_COLUMN: sorted(staged.dropped)}),
                                                        f"{IDENTITY_COLUMN} STRING")
            frame = frame.join(dropped, on=IDENTITY_COLUMN, how="left_anti")
        columns = []
        for column in target.columns:
            if column.name in names:
                columns.append(f"{quote(column.name)}")
            elif target.sharded and column.name == SOURCE_DB_COLUMN:
                columns.append(f"{sql_string(staged.table.db)} AS {quote(column.name)}")
            elif target.sharded and column.name == SOURCE_TABLE_COLUMN:
                columns.append(f"{sql_string(staged.table.table)} AS {quote(column.name)}")
            else:  # a column the source no longer has
                columns.append(f"CAST(NULL AS {spark_type(column)}) AS {quote(column.name)}")
        source = frame.selectExpr(*columns, f"CAST(NULL AS DECIMAL(38,0)) AS {SEQ_COLUMN}", f"'r' AS {OP_COLUMN}")
        keys = [c for c in target.columns if c.name in target.key_columns and c.name in names]
        bounds = bounds_of(keys, ranges.extremes)
        properties = {SEQUENCE_PROPERTY: str(target.sequence), FLAVOR_PROPERTY: self._flavor}
        if target.committed is not None:
            properties[POSITION_PROPERTY] = str(target.committed)
        started = time.monotonic()
        try:
            self._write(target, source, bounds, bool(bounds) and self._no_file_overlaps(target, bounds), properties)
            if target.changelog is not None:
                self._append_staged_changelog(target, staged, frame)
        finally:
            if dropped_file is not None:
                self.staging.release(dropped_file)
        self.staging.remove_directory(ranges.directory)
        if self._on_merge is not None:
            self._on_merge(f"{self.catalog}.{target.table}", time.monotonic() - started)
        log.info("snapshot of %s: %d rows staged by Spark tasks into %s, less the keys of %d changes inside the "
                 "window", staged.table, staged.rows, target.qualified, len(staged.dropped))

    def _append_staged_changelog(self, target: Target, staged: StagedSnapshot, frame) -> None:
        """The staged rows the table took, as `r` rows of its changelog."""
        source = staged.source
        rows = frame.selectExpr(
            "'r' AS op", "CAST(NULL AS STRING) AS before", f"{AFTER_JSON_COLUMN} AS after",
            f"{sql_string(staged.table.db)} AS source_db", f"{sql_string(staged.table.table)} AS source_table",
            "CAST(NULL AS STRING) AS gtid",
            f"{sql_string(source.file) if source.file else 'CAST(NULL AS STRING)'} AS binlog_file",
            f"CAST({source.pos if source.pos is not None else 'NULL'} AS BIGINT) AS binlog_pos",
            "CAST(0 AS INT) AS binlog_row", "CAST(NULL AS BIGINT) AS source_ts_ms", "true AS snapshot",
            "current_timestamp() AS committed_at")
        properties = {FLAVOR_PROPERTY: self._flavor, SEQUENCE_PROPERTY: str(target.sequence)}
        if target.committed is not None:
            properties[POSITION_PROPERTY] = str(target.committed)
        with iceberg_commit_properties(self.spark, properties):
            rows.writeTo(target.changelog.qualified).append()

    def _write(self, target: Target, source, bounds: list[KeyBound], append: bool, properties: dict[str, str]) -> None:
        """One Iceberg commit of a MERGE source (`_batch_schema`'s columns) with `properties`:
        appended without its op column, or MERGEd (`_merge_statement`)."""
        with iceberg_commit_properties(self.spark, properties):
            if append:
                source.drop(OP_COLUMN).writeTo(target.qualified).append()
                self.appended_batches += 1
                return
            view = f"batch_{uuid.uuid4().hex}"  # unique: tables MERGE at once
            source.createOrReplaceTempView(view)
            try:
                self.spark.sql(self._merge_statement(target, bounds, view))
            finally:
                self.spark.catalog.dropTempView(view)

    def _merge_statement(self, target: Target, bounds: list[KeyBound], view: str) -> str:
        """Deletes delete, snapshot reads always apply, binlog changes apply when newer than
        the row (`_dblog_seq`). The ON clause also bounds each key column of the target to the
        batch's range: a row that matches a batch row lies inside it anyway, and the bound lets
        Iceberg skip every data file outside it (the files of earlier chunks) instead of
        joining the whole table each commit."""
        names = [c.name for c in target.columns]
        on = " AND ".join(
            [*(f"t.{quote(k)} = s.{quote(k)}" for k in target.key_columns),
             *(f"t.{quote(b.column)} BETWEEN {b.low} AND {b.high}" for b in bounds)]
        )
        data = ", ".join(f"t.{quote(n)} = s.{quote(n)}" for n in names)
        columns = ", ".join(quote(n) for n in [*names, SEQ_COLUMN])
        values = ", ".join(f"s.{quote(n)}" for n in [*names, SEQ_COLUMN])
        op, seq = f"s.{OP_COLUMN}", SEQ_COLUMN
        newer = f"(t.{seq} IS NULL OR s.{seq} > t.{seq})"
        return (
            f"MERGE INTO {target.qualified} t USING {view} s ON {on} "
            f"WHEN MATCHED AND {op} = 'd' AND {newer} THEN DELETE "
            f"WHEN MATCHED AND {op} = 'r' THEN UPDATE SET {data} "
            f"WHEN MATCHED AND {op} IN ('c', 'u') AND {newer} THEN UPDATE SET {data}, t.{seq} = s.{seq} "
            f"WHEN NOT MATCHED AND {op} <> 'd' THEN INSERT ({columns}) VALUES ({values})"
        )

    def _can_append(self, target: Target, table: pa.Table, bounds: list[KeyBound], span) -> bool:
        """True when the batch holds no delete and the table holds none of its keys. Then an
        append writes what the MERGE would (every row NOT MATCHED, inserted with its sequence)
        without joining: a snapshot's reads of keys beyond what it read before, and inserts of
        keys beyond every key the table holds (an auto-increment key, an append-only table of
        events). The sink is the table's only writer, and commits one batch at a time.

        Either proof will do. When the sink knows where the table's keys can be (a table it
        created, or found without data files, or with a single integer key: `_known_key_ranges`),
        it records the key range of every batch it commits (`key_ranges`), and the batch's
        [lowest, highest] key misses them all. Or, for snapshot reads, no data file can hold a
        key of it: the file's bounds (Iceberg's column metrics, `files` table) lie outside the
        batch's range in some key column. A file without bounds for a column counts as
        overlapping; string bounds Iceberg truncates still enclose the values."""
        ops = table.column(OP_COLUMN)
        if span is None or pc.any(pc.equal(ops, "d")).as_py():
            return False
        if target.written is not None and not target.written.overlaps(*span):
            return True
        # The metrics cost a query: worth it for a snapshot's reads, whose keys are new more
        # often than not; a streamed batch's would rarely pass, and it MERGEs at once.
        only_reads = not pc.any(pc.not_equal(ops, "r")).as_py()
        return only_reads and bool(bounds) and self._no_file_overlaps(target, bounds)

    def _key_span(
        self, target: Target, changes: dict[tuple, RowChange], table: pa.Table,
    ) -> tuple[tuple, tuple] | None:
        """The lowest and highest key identity (`key_ranges.identity_span`) of the batch's
        changes that are not deletes; None when it has none. Identities, not values: keys equal
        under the key's collation ("eu", "ÉU") must fall in one range, however their spellings
        sort. A routed table's keys are prefixed by their source's db and table. Found from the
        batch's Arrow columns where their types allow (`key_ranges.arrow_extremes`), else key
        by key."""
        schema = next(iter(target.schemas.values())) if len(target.schemas) == 1 else None
        if not target.sharded and schema is not None and _keys_ordered_in_arrow(schema):
            sort_keys = schema.key_sort_keys
            kept = pc.not_equal(table.column(OP_COLUMN), "d")
            keys = table.select(list(target.key_columns)).filter(kept)
            if keys.num_rows == 0:
                return None
            found = arrow_extremes(keys.columns, sort_keys)
            if found is not None:
                rows = pc.indices_nonzero(kept)
                values = list(changes.values())  # in the order of the batch's rows (`_arrow_batch`)
                low, high = (values[rows[index].as_py()].key for index in found)
                return key_identity(low, sort_keys), key_identity(high, sort_keys)
        keys_by_source: dict[TableId, list[tuple]] = {}
        for change in changes.values():
            if change.op != "d":
                keys_by_source.setdefault(change.table, []).append(change.key)
        spans = []
        for source, keys in keys_by_source.items():
            low, high = identity_span(keys, target.schemas[source].key_sort_keys)
            prefix = (source.db, source.table) if target.sharded else ()
            spans.append(((*prefix, *low), (*prefix, *high)))
        if not spans:
            return None
        return min(low for low, _ in spans), max(high for _, high in spans)

    def _known_key_ranges(self, target: Target) -> KeyRanges | None:
        """Where the keys of a table that existed before the sink saw it can be: nowhere when it
        has no data files; for a single integer key (an AUTO_INCREMENT's), between the lowest
        and highest bound of its files (column metrics, exact for integers, and in the order
        of key identities); otherwise unknown (None)."""
        key = [c for c in target.columns if c.name in target.key_columns]
        integer = not target.sharded and len(key) == 1 and spark_type(key[0]) in ("INT", "BIGINT")
        metric = f"readable_metrics.{quote(key[0].name)}" if integer else None
        bounds = f", min({metric}.lower_bound), max({metric}.upper_bound)" if metric else ""
        files, *extremes = self.spark.sql(
            f"SELECT count(*){bounds} FROM {target.qualified}.files WHERE content = 0").collect()[0]
        if files == 0:
            return KeyRanges()
        if not extremes or None in extremes:
            return None
        ranges = KeyRanges()
        ranges.add((orderable(extremes[0]),), (orderable(extremes[1]),))
        return ranges

    def _no_file_overlaps(self, target: Target, bounds: list[KeyBound]) -> bool:
        """No live data file of the table can hold a key within `bounds` (`_can_append`)."""
        overlapping = " AND ".join(
            f"(m.{quote(b.column)}.lower_bound IS NULL OR m.{quote(b.column)}.upper_bound IS NULL"
            f" OR (m.{quote(b.column)}.upper_bound >= {b.low} AND m.{quote(b.column)}.lower_bound <= {b.high}))"
            for b in bounds
        )
        query = (f"SELECT count(*) FROM (SELECT readable_metrics AS m FROM {target.qualified}.files"
                 f" WHERE content = 0) WHERE {overlapping}")
        return self.spark.sql(query).collect()[0][0] == 0


def _keys_ordered_in_arrow(schema: TableSchema) -> bool:
    """Whether every key column's Arrow values order as its keys' identities do: integers
    (Python ints, whatever their Arrow type), and strings (the normalized text itself)."""
    return all(column.data_type in INTEGER_TYPES or spark_type(column) == "STRING"
               for column in map(schema.column, schema.key_columns))


def read_target(spark, qualified: str, schema: TableSchema, sharded_source: TableId | None = None) -> dict[tuple, dict]:
    """An Iceberg table's rows in dblog's normalized form, keyed by the source's primary key
    (for a routed table: only the rows of `sharded_source`). Raises on a key seen twice."""
    normalizers = [(c.name, from_spark(c)) for c in schema.columns]
    query = f"SELECT * FROM {qualified}"
    if sharded_source is not None:
        query += (f" WHERE {quote(SOURCE_DB_COLUMN)} = {sql_string(sharded_source.db)}"
                  f" AND {quote(SOURCE_TABLE_COLUMN)} = {sql_string(sharded_source.table)}")
    rows: dict[tuple, dict] = {}
    for record in spark.sql(query).collect():
        values = record.asDict()
        row = {name: normalize(values[name]) for name, normalize in normalizers}
        key = schema.key_of(row)
        if key in rows:
            raise AssertionError(f"key {key} appears twice in {qualified}")
        rows[key] = row
    return rows




def open_iceberg_sink(
    spark: SparkSettings, iceberg: IcebergSettings, schema_of: Callable[[TableId], TableSchema], flavor: str,
    captures: Callable[[TableId], bool],
) -> SparkIcebergSink:
    """The sink `sink.type = "iceberg"` asks for: one Spark session for the engine's life
    (`spark`), tables, routes and upkeep as `iceberg` says."""
    from dblog.sinks.iceberg.session import iceberg_spark_session

    session = iceberg_spark_session(spark.warehouse, spark.catalog, spark.master, spark.conf, spark.packages)
    return SparkIcebergSink(
        session, spark.catalog, schema_of, flavor,
        router=Router(iceberg.routes),
        table_properties=iceberg.table_properties,
        captures=captures,
        maintenance=iceberg.maintenance,
        changelog=iceberg.changelog,
        staging_dir=iceberg.staging_dir,
        write_mode=iceberg.write_mode,
    )
