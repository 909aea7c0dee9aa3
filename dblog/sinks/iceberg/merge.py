"""One commit of a target's batch: MERGEd, written as a row delta, or appended (the sink's
theory of operation: `dblog.sinks.iceberg.sink`).

The MERGE (`merge_statement`) guards binlog changes by their sequence and always applies
snapshot reads. A batch holding no delete whose keys the table provably lacks is appended
instead (`TableWrites._can_append`); with `iceberg.write_mode = "upsert"` the others are row
deltas of equality deletes written without Spark (`direct_writes`). Snapshot reads staged by
Spark tasks are MERGEd (or appended) from their staging directory (`TableWrites.merge_staged`).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dblog.core.events import StagedSnapshot, TableId
from dblog.core.gtid import GtidSet
from dblog.core.sql import quote_identifier as quote
from dblog.mysql.schema import INTEGER_TYPES, TableSchema
from dblog.sinks.iceberg.arrow_batch import (Extremes, KeyBound, arrow_array, bounds_of, key_bounds, key_extremes,
                                             merge_extremes, seq_array)
from dblog.sinks.iceberg.direct_writes import DirectWrites
from dblog.sinks.iceberg.key_ranges import arrow_extremes, identity_span, key_identity
from dblog.sinks.iceberg.maintenance import MaintenanceSchedule, sql_string
from dblog.sinks.iceberg.positions import commit_properties
from dblog.sinks.iceberg.routing import SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN
from dblog.sinks.iceberg.session import iceberg_commit_properties
from dblog.sinks.iceberg.staging import AFTER_JSON_COLUMN, IDENTITY_COLUMN, StagingArea
from dblog.sinks.iceberg.targets import SEQ_COLUMN, HeldChange, Target
from dblog.sinks.iceberg.types import spark_type

log = logging.getLogger("dblog.spark")

OP_COLUMN = "_dblog_op"  # only in the MERGE source, never in a target table
PART_COLUMN = "_dblog_part"  # a spilled part's number: only in its file, never in the MERGE source
_RANK_COLUMN = "_dblog_rank"
SPILL_SLICE_ROWS = 16_384


@dataclass(frozen=True)
class SpilledPart:
    """Part of a target's pending batch written to the staging area as a Parquet file
    (`_batch_schema`'s columns, and PART_COLUMN), so that a batch larger than
    `iceberg.max_buffer_rows` is not held as Python objects until its commit. A part holds one
    row per key, as the batch in memory did when it was spilled; a key may be in several parts
    of one batch, and the part written last holds its last change. What the commit needs to
    know of the rows without reading them back is kept here."""

    name: str  # the file, in the staging area's spill directory
    rows: int
    number: int  # parts are numbered in the order they are written: the higher's row of a key wins
    sequence: int  # the highest binlog sequence of its changes (0: snapshot reads only)
    extremes: Extremes  # the key columns' (min, max) (`arrow_batch.key_extremes`)
    span: tuple | None  # the lowest and highest key identity of its changes but deletes (`_key_span`)
    deletes: bool
    only_reads: bool


class TableWrites:
    """Writes batches into their targets, one Iceberg commit each, and counts how."""

    def __init__(self, spark, flavor: str, staging: StagingArea, direct: DirectWrites, write_mode: str,
                 schedule: MaintenanceSchedule) -> None:
        self.spark = spark
        self._flavor = flavor
        self.staging = staging
        self.direct = direct  # appends and upserts without a Spark job
        self.write_mode = write_mode  # "merge" (Spark MERGE) or "upsert" (equality deletes, `_upsert`)
        self._schedule = schedule
        self.appended_batches = 0  # commits that appended instead of MERGEing (`_can_append`)
        self.upserted_batches = 0  # commits made as row deltas with equality deletes
        self.spilled_parts = 0  # parts of batches written to the staging area before their commit
        self._part_numbers = itertools.count(1)  # next() is atomic: spills and commits run at once

    def merge(self, target: Target, changes: dict[tuple, HeldChange], position: GtidSet | None) -> None:
        """One commit of the target's pending changes: the batch is staged as Parquet and
        MERGEd (see `merge_statement`), or appended when it holds no delete and the table
        provably lacks its keys (`_can_append`)."""
        held = list(changes.values())
        table, sequence = self._arrow_batch(target, held, target.sequence)
        bounds = key_bounds([c for c in target.columns if c.name in target.key_columns], table)
        properties = commit_properties(self._flavor, sequence, position)
        span = self._key_span(target, held, table)
        append = self._can_append(target, table, bounds, span)
        if append and self.direct.append(target.qualified, table.drop_columns([OP_COLUMN]), properties):
            self.appended_batches += 1
        elif not append and self.write_mode == "upsert" and self._upsert(target, table, properties):
            self.upserted_batches += 1
        else:
            frame, staged = self.staging.stage(table, _batch_schema(target), target.qualified)
            try:
                self._write(target, frame, bounds, append, properties)
            finally:
                self.staging.release(staged)
        self._committed(target, sequence, span, position)

    def _committed(self, target: Target, sequence: int, span: tuple[tuple, tuple] | None,
                   position: GtidSet | None) -> None:
        """What a commit of the target's batch leaves behind: its sequence, the key span it
        wrote, the position it carries, and when (for the commit schedule)."""
        target.sequence = sequence
        if target.written is not None and span is not None:
            target.written.add(*span)
        if position is not None:
            target.committed = position
        self._schedule.record_commit(target.qualified, time.monotonic())

    def spill(self, target: Target, changes: dict[tuple, HeldChange]) -> SpilledPart:
        """Write `changes` (one per key, as a pending batch holds them) to the staging area as
        the next part of the target's batch; called on the loop's thread while the table may be
        committing an earlier batch, so nothing of the target's commit state is read. Converted
        to Arrow `SPILL_SLICE_ROWS` at a time: the Arrow copy of a whole part would weigh about
        a third of what the held changes do, on top of them."""
        held = list(changes.values())
        key_columns = [c for c in target.columns if c.name in target.key_columns]
        number = next(self._part_numbers)
        sequences, extremes, spans, ops = [], [], [], set()

        def slices():
            for start in range(0, len(held), SPILL_SLICE_ROWS):
                part = held[start:start + SPILL_SLICE_ROWS]
                table, sequence = self._arrow_batch(target, part, 0)
                sequences.append(sequence)
                extremes.append(key_extremes(key_columns, table))
                span = self._key_span(target, part, table)
                if span is not None:
                    spans.append(span)
                ops.update(pc.unique(table.column(OP_COLUMN)).to_pylist())
                yield table.append_column(PART_COLUMN, pa.repeat(pa.scalar(number, pa.int64()), table.num_rows))

        name = self.staging.spill(slices(), target.qualified)
        self.spilled_parts += 1
        span = (min(low for low, _ in spans), max(high for _, high in spans)) if spans else None
        return SpilledPart(name, len(held), number, max(sequences), merge_extremes(extremes), span, "d" in ops,
                           ops == {"r"})

    def merge_parts(self, target: Target, parts: list[SpilledPart], changes: dict[tuple, HeldChange],
                    position: GtidSet | None) -> None:
        """One commit of a batch of which `parts` were spilled and `changes` came after: what
        `merge` does for a batch held in memory, with Spark reading every part back (the
        changes are spilled as the last part first). Of a key in several parts the row of the
        highest-numbered part, its last change, is kept. Appended when no part holds a delete,
        their key ranges are disjoint (no key twice) and the table provably lacks them all, as
        `_can_append` says for one batch; otherwise MERGEd, also in upsert mode."""
        if changes:
            parts = [*parts, self.spill(target, changes)]
        try:
            self._merge_parts(target, sorted(parts, key=lambda part: part.number), position)
        finally:
            for part in parts:
                self.staging.release_spilled(part.name)

    def _merge_parts(self, target: Target, parts: list[SpilledPart], position: GtidSet | None) -> None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        sequence = max(target.sequence, *(part.sequence for part in parts))
        properties = commit_properties(self._flavor, sequence, position)
        key_columns = [c for c in target.columns if c.name in target.key_columns]
        bounds = bounds_of(key_columns, merge_extremes([part.extremes for part in parts]))
        spans = sorted(part.span for part in parts if part.span is not None)
        span = (spans[0][0], max(high for _, high in spans)) if spans else None
        disjoint = len(spans) == len(parts) and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
        append = (span is not None and disjoint and not any(part.deletes for part in parts)
                  and ((target.written is not None and not target.written.overlaps(*span))
                       or (all(part.only_reads for part in parts) and bool(bounds)
                           and self._no_file_overlaps(target, bounds))))
        frame = self.staging.read_spilled([part.name for part in parts],
                                          f"{_batch_schema(target)}, {PART_COLUMN} BIGINT")
        if append:
            source = frame.drop(PART_COLUMN)
        else:
            latest = Window.partitionBy(*(F.col(quote(k)) for k in target.key_columns)) \
                .orderBy(F.col(PART_COLUMN).desc())
            source = (frame.withColumn(_RANK_COLUMN, F.row_number().over(latest))
                      .where(F.col(_RANK_COLUMN) == 1).drop(_RANK_COLUMN, PART_COLUMN))
        self._write(target, source, bounds, append, properties)
        log.info("%s: one commit of %d rows from %d spilled parts (%s)", target.qualified,
                 sum(part.rows for part in parts), len(parts), "appended" if append else "MERGEd")
        self._committed(target, sequence, span, position)

    def merge_staged(self, target: Target, staged: StagedSnapshot) -> float:
        """The staged rows less those whose key identity the log touched inside the window (an
        anti-join on `_dblog_identity`), as snapshot reads: appended when the table provably
        lacks their keys, else MERGEd like a batch of them. Its own Iceberg commit, carrying
        the position the table already holds: a crash before the batch's MERGE replays from
        there, and reads the window again. Returns the seconds its commit took."""
        ranges = staged.staged
        target.written = None  # its keys are known per column only: the metrics decide from now on
        names = set(ranges.columns)
        frame = self.staging.read_directory(ranges.directory, ranges.schema_ddl)
        dropped_file = None
        if staged.dropped:
            dropped, dropped_file = self.staging.stage(pa.table({IDENTITY_COLUMN: sorted(staged.dropped)}),
                                                        f"{IDENTITY_COLUMN} STRING", target.qualified)
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
        properties = commit_properties(self._flavor, target.sequence, target.committed)
        started = time.monotonic()
        try:
            self._write(target, source, bounds, bool(bounds) and self._no_file_overlaps(target, bounds), properties)
            if target.changelog is not None:
                self._append_staged_changelog(target, staged, frame)
        finally:
            if dropped_file is not None:
                self.staging.release(dropped_file)
        self.staging.remove_directory(ranges.directory)
        seconds = time.monotonic() - started
        log.info("snapshot of %s: %d rows staged by Spark tasks into %s, less the keys of %d changes inside the "
                 "window", staged.table, staged.rows, target.qualified, len(staged.dropped))
        return seconds

    def _upsert(self, target: Target, table: pa.Table, properties: dict[str, str]) -> bool:
        """`iceberg.write_mode = "upsert"`: the batch as one row delta, written without Spark
        (`direct_writes`): every key of it deleted by equality, and its rows but deletes added.
        What the MERGE does, but for two things the MERGE guards that this need not: a binlog
        change is applied only when newer than the row (every change reaching here is newer
        than anything the table holds: `positions.is_new`), and a snapshot read keeps the row's
        `_dblog_seq` (here its `_dblog_seq` is NULL, as on a row only ever read)."""
        rows = table.filter(pc.not_equal(table.column(OP_COLUMN), "d")).drop_columns([OP_COLUMN])
        return self.direct.upsert(target.qualified, rows, table.select(list(target.key_columns)), properties)

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
        properties = commit_properties(self._flavor, target.sequence, target.committed)
        with iceberg_commit_properties(self.spark, properties):
            rows.writeTo(target.changelog.qualified).append()

    def _write(self, target: Target, source, bounds: list[KeyBound], append: bool, properties: dict[str, str]) -> None:
        """One Iceberg commit of a MERGE source (`_batch_schema`'s columns) with `properties`:
        appended without its op column, or MERGEd (`merge_statement`)."""
        with iceberg_commit_properties(self.spark, properties):
            if append:
                source.drop(OP_COLUMN).writeTo(target.qualified).append()
                self.appended_batches += 1
                return
            view = f"batch_{uuid.uuid4().hex}"  # unique: tables MERGE at once
            source.createOrReplaceTempView(view)
            try:
                self.spark.sql(merge_statement(target, bounds, view))
            finally:
                self.spark.catalog.dropTempView(view)

    @staticmethod
    def _arrow_batch(target: Target, held: Sequence[HeldChange], sequence: int) -> tuple[pa.Table, int]:
        """Pending changes as an Arrow table (a row each, `_batch_schema`'s columns), and the
        highest binlog sequence among theirs and `sequence`."""
        sequences = [change.sequence for change in held]
        sequence = max(sequence, max(filter(None, sequences), default=0))
        columns = zip(*(change.values for change in held)) if held else [()] * len(target.columns)
        arrays = [arrow_array(column, values) for column, values in zip(target.columns, columns)]
        arrays += [seq_array(sequences), pa.array([change.op for change in held], pa.string())]
        names = [*target.column_names, SEQ_COLUMN, OP_COLUMN]
        return pa.Table.from_arrays(arrays, names=names), sequence

    def _can_append(self, target: Target, table: pa.Table, bounds: list[KeyBound], span) -> bool:
        """True when the batch holds no delete and the table holds none of its keys. Then an
        append writes what the MERGE would (every row NOT MATCHED, inserted with its sequence)
        without joining: a snapshot's reads of keys beyond what it read before, and inserts of
        keys beyond every key the table holds (an auto-increment key, an append-only table of
        events). The sink is the table's only writer, and commits one batch at a time.

        Either proof will do. When the sink knows where the table's keys can be (a table it
        created, or found without data files, or with a single integer key:
        `TargetTables._known_key_ranges`), it records the key range of every batch it commits
        (`key_ranges`), and the batch's [lowest, highest] key misses them all. Or, for snapshot
        reads, no data file can hold a key of it: the file's bounds (Iceberg's column metrics,
        `files` table) lie outside the batch's range in some key column. A file without bounds
        for a column counts as overlapping; string bounds Iceberg truncates still enclose the
        values."""
        ops = table.column(OP_COLUMN)
        if span is None or pc.any(pc.equal(ops, "d")).as_py():
            return False
        if target.written is not None and not target.written.overlaps(*span):
            return True
        # The metrics cost a query: worth it for a snapshot's reads, whose keys are new more
        # often than not; a streamed batch's would rarely pass, and it MERGEs at once.
        only_reads = not pc.any(pc.not_equal(ops, "r")).as_py()
        return only_reads and bool(bounds) and self._no_file_overlaps(target, bounds)

    @staticmethod
    def _key_span(target: Target, held: Sequence[HeldChange], table: pa.Table) -> tuple[tuple, tuple] | None:
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
                rows = pc.indices_nonzero(kept)  # `held` is in the order of the batch's rows (`_arrow_batch`)
                low, high = (held[rows[index].as_py()].key for index in found)
                return key_identity(low, sort_keys), key_identity(high, sort_keys)
        keys_by_source: dict[TableId, list[tuple]] = {}
        for change in held:
            if change.op != "d":
                keys_by_source.setdefault(change.source, []).append(change.key)
        spans = []
        for source, keys in keys_by_source.items():
            low, high = identity_span(keys, target.schemas[source].key_sort_keys)
            prefix = (source.db, source.table) if target.sharded else ()
            spans.append(((*prefix, *low), (*prefix, *high)))
        if not spans:
            return None
        return min(low for low, _ in spans), max(high for _, high in spans)

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


def _batch_schema(target: Target) -> str:
    """The MERGE source's schema (DDL): the target's columns, the sequence and the op."""
    ddl = ", ".join(f"{quote(c.name)} {spark_type(c)}" for c in target.columns)
    return f"{ddl}, {SEQ_COLUMN} DECIMAL(38,0), {OP_COLUMN} STRING"


def merge_statement(target: Target, bounds: list[KeyBound], view: str) -> str:
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


def _keys_ordered_in_arrow(schema: TableSchema) -> bool:
    """Whether every key column's Arrow values order as its keys' identities do: integers
    (Python ints, whatever their Arrow type), and strings (the normalized text itself)."""
    return all(column.data_type in INTEGER_TYPES or spark_type(column) == "STRING"
               for column in map(schema.column, schema.key_columns))
