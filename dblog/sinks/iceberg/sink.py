"""The Spark sink: change batches MERGEd into Apache Iceberg tables, exactly once.

Theory of operation
-------------------
Per source table (or per routed group of shard tables, `dblog.sinks.iceberg.routing`) there is one Iceberg
table, format v3, merge-on-read, with the source's columns (`dblog.sinks.iceberg.types`), its key
columns NOT NULL and declared as Iceberg identifier fields, and one bookkeeping column
`_dblog_seq`: the binlog position (file number, byte position, row) of the change that last
wrote the row (`dblog.sinks.iceberg.targets`).

`write()` keeps, per target table, the last change of each key in event order (a key-changing
update deletes its old key). `flush(offsets)` MERGEs each pending batch: deletes delete, the
rest upsert (`dblog.sinks.iceberg.merge`, which also appends a batch whose keys the table
provably lacks). Binlog changes carry a sequence guard (applied only when newer than the row's
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
the engine replays from the offsets file, and each table takes exactly what it lacks
(`dblog.sinks.iceberg.positions`). A crash during an Iceberg commit leaves the old metadata (the catalog's commit is atomic) and the
table's old position; a commit whose outcome the catalog could not report keeps its files
(`direct_writes`), and the position read at the restart says whether it landed.

TRUNCATE, DROP TABLE and RENAME delete a source table's rows from its target, one DELETE per
source table; the snapshot records the DDL's GTID and the source (`dblog.delete-gtid`,
`dblog.delete-source`). One statement can drop several sources of one shared target (`DROP TABLE
a, b`, `DROP DATABASE`), so holding the GTID does not mean this source's rows went: a replay
skips the DELETE only when the lineage shows this source's DELETE or a write after the statement
(`CommittedPositions.deleted_before`, positions.py).

Binlog positions only grow on one server. If a change arrives with a position at or below one
a table already holds while its transaction is not in the table (a `RESET MASTER`, or a new
primary), the sink stops with an error instead of silently ignoring it (see docs/iceberg.md, "Batches and exactly once").

Bounded memory: a batch is held as Python objects (the last change per key) only up to
`iceberg.max_buffer_rows` changes, and `iceberg.max_buffer_bytes` of them as the binlog carried
them (`change_bytes`), across all tables; past either the largest batches are
spilled to the staging area as Parquet parts (`merge.SpilledPart`), and the commit has Spark
read every part back, keep each key's last change (the highest part) and write them as one
Iceberg commit, as if the batch had stayed in memory. So a transaction of any size, which the
engine cannot commit before its end (checkpoints exist only between transactions), still
lands in one commit per table with its position: readers never see part of it, and the
exactly-once rule above is unchanged.

`SparkIcebergSink` coordinates: it routes changes to their targets, keeps their pending
batches, and runs each table's commit (side by side on a few threads) and the DDL.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Callable

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, StagedSnapshot, TableId, change_bytes
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.core.sql import quote_identifier as quote
from dblog.mysql.schema import TableSchema
from dblog.sinks.base import MergeListener, Sink, SinkError, SnapshotStaging
from dblog.sinks.column_options import ColumnSettings, TableColumns
from dblog.sinks.iceberg.catalog import CatalogSpec, check_catalog
from dblog.sinks.iceberg.direct_writes import DirectWrites
from dblog.sinks.iceberg.maintenance import IcebergMaintenance, MaintenancePolicy, MaintenanceSchedule, sql_string
from dblog.sinks.iceberg.merge import SpilledPart, TableWrites
from dblog.sinks.iceberg.positions import CommittedPositions, commit_properties, delete_properties, is_new
from dblog.sinks.iceberg.routing import SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN, Router, RoutingError
from dblog.sinks.iceberg.session import iceberg_commit_properties
from dblog.sinks.iceberg.settings import IcebergSettings, SparkSettings
from dblog.sinks.iceberg.staging import StagingArea, default_staging_dir
from dblog.sinks.iceberg.targets import TABLE_PROPERTIES, HeldChange, Target, TargetTables
from dblog.sinks.iceberg.types import from_spark

log = logging.getLogger("dblog.spark")

COMMIT_THREADS = 4  # tables committed at once: a MERGE spends much of its time in planning and metadata I/O
MAX_BUFFER_ROWS = 100_000  # iceberg.max_buffer_rows: changes held as Python objects before spilling
MAX_BUFFER_BYTES = 64 * 1024 * 1024  # iceberg.max_buffer_bytes: and their bytes (change_bytes)


@dataclass
class PendingBatch:
    """What one commit writes to one target: its last change per key, and its changelog rows."""

    target: Target
    changes: dict[tuple, HeldChange]
    changelog: list[RowChange]
    staged: list[StagedSnapshot] = field(default_factory=list)
    spilled: list[SpilledPart] = field(default_factory=list)  # earlier parts of `changes`, in the staging area
    changelog_spilled: list[str] = field(default_factory=list)  # earlier changelog rows, in the staging area

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
        max_buffer_rows: int = MAX_BUFFER_ROWS,
        max_buffer_bytes: int = MAX_BUFFER_BYTES,
        columns: ColumnSettings | None = None,
    ) -> None:
        """`columns` (`[columns]`): the columns the tables hold and their masks, in dblog's
        normal form (dblog.sinks.column_options); a table's key columns are never left out or
        masked (they key its rows)."""
        self.spark = spark
        self.catalog = catalog
        self._schema_of = schema_of
        self._column_settings = columns if columns is not None and columns.rewrites_rows else None
        self._table_columns: dict[TableId, TableColumns] = {}
        self._flavor = flavor
        self._changelog = changelog
        self.router = router or Router([])
        self._targets: dict[TableId, Target] = {}
        self._captures = captures
        self._positions = CommittedPositions(spark, flavor)
        self._tables = TargetTables(spark, catalog, schema_of, self._positions,
                                    {**TABLE_PROPERTIES, **(table_properties or {})}, changelog,
                                    (lambda schema: self._columns(schema.table).columns)
                                    if self._column_settings is not None else None)
        policy = maintenance or MaintenancePolicy(enabled=False)
        self._maintenance = (IcebergMaintenance(spark, catalog, policy, equality_deletes=write_mode == "upsert")
                             if policy.enabled else None)
        self._schedule = MaintenanceSchedule(policy)
        self.pending_rows = 0
        self.max_buffer_rows = max_buffer_rows
        self.max_buffer_bytes = max_buffer_bytes
        self._buffered = 0  # changes stored in pending batches since the last count: at least what they hold
        self._buffered_bytes = 0  # and their bytes (Target.pending_bytes, summed)
        if staging_dir is None:
            warehouse = spark.conf.get(f"spark.sql.catalog.{catalog}.warehouse", None)
            staging_dir = default_staging_dir(warehouse) if warehouse else tempfile.mkdtemp(prefix="dblog-staging-")
        try:
            self.staging = StagingArea(spark, staging_dir)
        except (ValueError, OSError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise SinkError(f"pyarrow cannot write the staging directory {staging_dir} ({error}); set "
                            "iceberg.staging_dir to a local path (local[N]) or an s3://, gs:// or hdfs:// URI "
                            "every executor reaches (s3a:// is Hadoop's name, unknown to pyarrow)") from None
        removed = self.staging.remove_abandoned()
        if removed:
            log.info("removed %d files from the staging area left by dblog runs that stopped (%s%s)", len(removed),
                     ", ".join(removed[:5]), ", …" if len(removed) > 5 else "")
        self._direct = DirectWrites(spark)  # appends and upserts without a Spark job
        self._writes = TableWrites(spark, flavor, self.staging, self._direct, write_mode, self._schedule)
        self._committers: ThreadPoolExecutor | None = None
        # Told (catalog.db.table of the target, seconds) after each MERGE, from the thread that
        # committed it: the engine's metrics (`report_merges`).
        self._on_merge: MergeListener | None = None

    @property
    def write_mode(self) -> str:
        """"merge" (Spark MERGE) or "upsert" (row deltas of equality deletes)."""
        return self._writes.write_mode

    @property
    def appended_batches(self) -> int:
        """Commits that appended instead of MERGEing (`TableWrites._can_append`)."""
        return self._writes.appended_batches

    @property
    def upserted_batches(self) -> int:
        """Commits made as row deltas with equality deletes."""
        return self._writes.upserted_batches

    # --- the Sink interface -----------------------------------------------------------------

    def write(self, changes: list[RowChange]) -> None:
        column_settings = self._column_settings
        for change in changes:
            if column_settings is not None:
                change = self._columns(change.table).rewrite(change)
            route = self.router.route(change.table)
            if route.ignores_op(change.op):
                continue
            target = self._target(route.target, change.table, route.sharded)
            if change.table not in target.schemas:
                target.sources.add(change.table)
                target.schemas[change.table] = self._schema_of(change.table)
            size = change_bytes(change)
            if target.changelog is not None:
                target.changelog.add(change)
                target.pending_bytes += size
                self._buffered_bytes += size
            if change.op != "r" and not is_new(target, change):
                continue
            if change.before_key is not None:  # the old key disappears where the new one appears
                target.hold(change, "d", change.before_key)
                self._buffered += 1
            target.hold(change, change.op, change.key)
            self.pending_rows += 1
            self._buffered += 1
            if target.changelog is None:  # else counted once above, for the change and its changelog row
                target.pending_bytes += size
                self._buffered_bytes += size
        if self._buffered >= self.max_buffer_rows or self._buffered_bytes >= self.max_buffer_bytes:
            self._spill()

    def _spill(self) -> None:
        """Keep at most `max_buffer_rows` changes and `max_buffer_bytes` in memory: spill the
        largest pending batches (`TableWrites.spill`; the largest against the bounds) until half
        of each is left. On the loop's thread, between two writes: a batch's parts are in the
        order of its changes."""
        def weight(target: Target) -> float:
            return max(_held(target) / self.max_buffer_rows, target.pending_bytes / self.max_buffer_bytes)

        held = sorted(self._targets.values(), key=weight, reverse=True)
        buffered = sum(_held(target) for target in held)
        buffered_bytes = sum(target.pending_bytes for target in held)
        for target in held:
            if buffered <= self.max_buffer_rows // 2 and buffered_bytes <= self.max_buffer_bytes // 2:
                break
            if not weight(target):
                break
            buffered -= _held(target)
            buffered_bytes -= target.pending_bytes
            target.pending_bytes = 0
            if target.pending:
                part = self._writes.spill(target, target.pending)
                target.spilled.append(part)
                target.pending = {}
                log.debug("spilled %d changes of %s to the staging area (part %d)", part.rows, target.qualified,
                          len(target.spilled))
            if target.changelog is not None:  # its rows of the same changes go with them
                target.changelog.spill(self.staging)
        self._buffered, self._buffered_bytes = buffered, buffered_bytes

    def flush(self, offsets: Offsets | None = None) -> None:
        """MERGE every pending batch, each commit carrying `offsets.position`."""
        self.commit(self.detach(), offsets)

    commits_per_table = True  # each table's commit carries its own position (dblog.runtime.table_commits)

    def detach(self, tables: list[TableId] | None = None) -> list[PendingBatch]:
        """The pending batches of `tables` (target names; None: every table)."""
        targets = self._targets.values() if tables is None else [self._targets[name] for name in tables]
        batches = [self._detach(target) for target in targets]
        self._count_pending()
        return [batch for batch in batches
                if batch.changes or batch.changelog or batch.staged or batch.spilled or batch.changelog_spilled]

    def _count_pending(self) -> None:
        targets = self._targets.values()
        self._buffered = sum(_held(target) for target in targets)
        self._buffered_bytes = sum(target.pending_bytes for target in targets)
        self.pending_rows = sum(len(target.pending) + sum(s.rows for s in target.staged)
                                + sum(part.rows for part in target.spilled) for target in targets)

    def pending_tables(self) -> list[TableId]:
        """The target tables with something to commit."""
        return [name for name, target in self._targets.items()
                if target.pending or target.staged or target.spilled
                or (target.changelog is not None and (target.changelog.pending or target.changelog.spilled))]

    def known_tables(self) -> list[TableId]:
        return list(self._targets)

    @staticmethod
    def _detach(target: Target) -> PendingBatch:
        changelog, changelog_spilled = target.changelog.detach() if target.changelog is not None else ([], [])
        batch = PendingBatch(target, target.pending, changelog, target.staged, target.spilled, changelog_spilled)
        target.pending, target.staged, target.spilled = {}, [], []
        target.pending_bytes = 0
        return batch

    def write_staged(self, staged: StagedSnapshot) -> None:
        """Snapshot reads that Spark tasks staged (`snapshot.distributed`): they join the
        pending batch of their target and are MERGEd first at its commit (`TableWrites.merge_staged`).
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
        overwrite each other's keys in one Iceberg table, and `[columns]` rules that would
        leave out or mask a key column."""
        try:
            self.router.check_targets(tables)
        except RoutingError as error:
            raise SinkError(f"iceberg.routes: {error}") from None
        if self._column_settings is not None:
            for table in tables:
                self._columns(table)

    def _columns(self, table: TableId) -> TableColumns:
        """The `[columns]` options of a source table, as its definition in force has them."""
        columns = self._table_columns.get(table)
        if columns is None:
            columns = TableColumns(self._schema_of(table), self._column_settings)
            touched = columns.rewritten_key_columns()
            if touched:
                raise SinkError(
                    f"[columns] leaves out or changes key column{'s' if len(touched) > 1 else ''} "
                    f"{', '.join(touched)} of {table}: the Iceberg sink keys the rows of its table by them. "
                    "Narrow the rule's patterns so that they miss the key columns")
            self._table_columns[table] = columns
        return columns

    def table_redefined(self, table: TableId) -> None:
        self._table_columns.pop(table, None)

    def report_merges(self, listener: MergeListener) -> None:
        self._on_merge = listener

    def snapshot_staging(self) -> SnapshotStaging:
        return SnapshotStaging(self.spark, self.staging, self._changelog)

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
            target.pending_bytes = 0
            for staged in target.staged:
                self.staging.remove_directory(staged.staged.directory)
            target.staged.clear()
            target.spilled.clear()
            if target.changelog is not None:
                target.changelog.pending, target.changelog.spilled = [], []
        self.staging.close()
        self.pending_rows = self._buffered = self._buffered_bytes = 0

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
        self._table_columns.clear()  # the tables' columns may have changed
        touched = {table for table in ddl.tables if self._captures(table)}
        for target in list(self._targets.values()):
            if target.sources & touched or (not ddl.tables and any(s.db == change.db for s in target.sources)):
                self._commit(self._detach(target), position)
                del self._targets[target.table]
        self._count_pending()
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
        qualified = self._tables.qualified(route.target)
        if route.ignores(event):
            log.info("%s of %s ignored by its route: %s keeps its rows", event.upper(), source, qualified)
            return
        if not self._tables.exists(route.target):
            return
        holds = self._positions.committed_in(qualified)
        if holds is not None and change.gtid in holds[0] and self._positions.deleted_before(qualified, source, change.gtid):
            log.info("%s of %s: %s already holds it", event.upper(), source, qualified)
            return  # applied before a crash: the rows there now are newer
        where = ""
        if route.sharded:
            where = (f" WHERE {quote(SOURCE_DB_COLUMN)} = {sql_string(source.db)}"
                     f" AND {quote(SOURCE_TABLE_COLUMN)} = {sql_string(source.table)}")
        properties = commit_properties(self._flavor, holds[1] if holds else 0, position.with_gtid(change.gtid))
        properties.update(delete_properties(change.gtid, source))
        with iceberg_commit_properties(self.spark, properties):
            self.spark.sql(f"DELETE FROM {qualified}{where}")
        log.info("%s of %s: deleted its rows from %s", event.upper(), source, qualified)

    # --- targets ----------------------------------------------------------------------------

    def target_name(self, table: TableId) -> str:
        """The quoted `catalog`.`db`.`table` that a source table's changes land in."""
        return self._tables.qualified(self.router.route(table).target)

    def _target(self, name: TableId, source: TableId, sharded: bool) -> Target:
        target = self._targets.get(name)
        if target is None:
            target = self._targets[name] = self._tables.open(name, source, sharded)
            # this run writes the table: on object storage, staging files of it that this run
            # did not make are garbage (staging.py, "Ownership"), whatever its commits stage
            self.staging.claim(target.qualified)
            if target.changelog is not None:
                self.staging.claim(target.changelog.qualified)
        return target

    def committed_position(self, table: TableId) -> GtidSet | None:
        """The binlog position the target of `table` holds (None before its first commit)."""
        target = self._targets.get(self.router.route(table).target)
        return target.committed if target else None

    # --- commits ----------------------------------------------------------------------------

    def _commit(self, batch: PendingBatch, position: GtidSet | None) -> None:
        """MERGE a target's batch (after the rows staged for it), then append it to its changelog."""
        target = batch.target
        self._tables.create(target)
        # A scheduler pool per committing thread: Spark's FAIR mode then shares the executors
        # task by task between tables committing at once. In one pool jobs run first come,
        # first served, and a small table's MERGE waits for every task of a large one's scan.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", threading.current_thread().name)
        for staged in batch.staged:
            seconds = self._writes.merge_staged(target, staged)
            if self._on_merge is not None:
                self._on_merge(f"{self.catalog}.{target.table}", seconds)
        if batch.spilled:
            started = time.monotonic()
            self._writes.merge_parts(target, batch.spilled, batch.changes, position)
            if self._on_merge is not None:
                self._on_merge(f"{self.catalog}.{target.table}", time.monotonic() - started)
        elif batch.changes:
            started = time.monotonic()
            self._writes.merge(target, batch.changes, position)
            if self._on_merge is not None:
                self._on_merge(f"{self.catalog}.{target.table}", time.monotonic() - started)
        if batch.changelog or batch.changelog_spilled:
            properties = commit_properties(self._flavor, target.sequence, position)
            target.changelog.append(batch.changelog, properties, position, batch.changelog_spilled, self.staging)


def _held(target: Target) -> int:
    """The changes a target's pending batch holds in memory (its changelog's included)."""
    return max(len(target.pending), len(target.changelog.pending) if target.changelog is not None else 0)


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
    captures: Callable[[TableId], bool], catalog_secrets: Mapping[str, str] | None = None,
    columns: ColumnSettings | None = None,
) -> SparkIcebergSink:
    """The sink `sink.type = "iceberg"` asks for: one Spark session for the engine's life
    (`spark`), its catalog, tables, routes and upkeep as `iceberg` says. `catalog_secrets`: the
    catalog's secret properties, resolved by the caller (e.g. {"jdbc.password": …})."""
    from dblog.sinks.iceberg.session import iceberg_spark_session

    catalog = catalog_spec(iceberg, catalog_secrets or {})
    session = iceberg_spark_session(spark.warehouse, spark.catalog, spark.master, spark.conf, spark.packages,
                                    spark.jars, catalog, spark.jars_dir)
    check_catalog(session, spark.catalog, catalog)
    return SparkIcebergSink(
        session, spark.catalog, schema_of, flavor,
        router=Router(iceberg.routes),
        table_properties=iceberg.table_properties,
        captures=captures,
        maintenance=iceberg.maintenance,
        changelog=iceberg.changelog,
        staging_dir=iceberg.staging_dir,
        write_mode=iceberg.write_mode,
        max_buffer_rows=iceberg.max_buffer_rows,
        max_buffer_bytes=iceberg.max_buffer_bytes,
        columns=columns,
    )


def catalog_spec(iceberg: IcebergSettings, secrets: Mapping[str, str]) -> CatalogSpec:
    """The catalog `[iceberg]` describes, with its resolved secret properties."""
    properties = dict(iceberg.catalog_properties)
    if iceberg.jdbc_user:
        properties["jdbc.user"] = iceberg.jdbc_user
    return CatalogSpec(iceberg.catalog_type, iceberg.catalog_uri, properties, dict(secrets))
