"""The optional changelog table: every change, appended, for users who want history.

The MERGEd table holds each row's latest state; `<table>_changelog` beside it (same namespace)
holds every change that led there, in binlog order, one row per change: `op` (c, u, d, r),
`before` and `after` as JSON text of the normalized rows (`dblog.mysql.values`), where the change
came from (`source_db`, `source_table`, `gtid`, `binlog_file`, `binlog_pos`, `binlog_row`,
`source_ts_ms`, `snapshot`) and `committed_at`, the time dblog appended it. A key-changing update
is one `u` row with both images. Partitioned by day of `committed_at`.

Exactly once, as the MERGEd tables: each append commits the engine's GTID position in its
snapshot summary, and after a crash the binlog changes the changelog already holds are dropped.
Snapshot reads (`r`) after a restart are new reads of the table and are appended again.

Bounded memory, as the MERGEd tables' batches: when the sink spills a table's pending batch
(`iceberg.max_buffer_rows`) its changelog rows are spilled with it, as Arrow/Parquet in the
staging area (`spill`), and the append has Spark read them back.
"""

from __future__ import annotations

import datetime
import json

import pyarrow as pa

from dblog.core.events import RowChange
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.sql import quote_identifier as quote
from dblog.sinks.iceberg.session import iceberg_commit_properties

SCHEMA = (
    "op STRING, before STRING, after STRING, source_db STRING, source_table STRING, gtid STRING, "
    "binlog_file STRING, binlog_pos BIGINT, binlog_row INT, source_ts_ms BIGINT, snapshot BOOLEAN, "
    "committed_at TIMESTAMP"
)
SUFFIX = "_changelog"
# the spilled rows: SCHEMA without committed_at, which the append sets
_SPILLED = pa.schema([("op", pa.string()), ("before", pa.string()), ("after", pa.string()),
                      ("source_db", pa.string()), ("source_table", pa.string()), ("gtid", pa.string()),
                      ("binlog_file", pa.string()), ("binlog_pos", pa.int64()), ("binlog_row", pa.int32()),
                      ("source_ts_ms", pa.int64()), ("snapshot", pa.bool_())])


class ChangelogTable:
    def __init__(self, spark, qualified: str, committed: GtidSet | None) -> None:
        self.spark = spark
        self.qualified = qualified
        self.committed = committed  # binlog transactions the table already holds
        self.pending: list[RowChange] = []
        self.spilled: list[str] = []  # earlier pending rows, as files of the staging area (`spill`)

    @classmethod
    def create(cls, spark, qualified: str, table_properties: dict[str, str]) -> "ChangelogTable":
        properties = ", ".join(f"'{k}' = '{v}'" for k, v in table_properties.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {qualified} ({SCHEMA}) USING iceberg "
            f"PARTITIONED BY (days(committed_at)) TBLPROPERTIES ({properties})"
        )
        return cls(spark, qualified, None)

    def add(self, change: RowChange) -> None:
        gtid = change.source.gtid
        if change.op != "r" and gtid and self.committed is not None and Gtid.parse(gtid) in self.committed:
            return  # appended before a crash
        self.pending.append(change)

    def detach(self) -> tuple[list[RowChange], list[str]]:
        """The changes added so far and the files they were spilled to, for one `append`; the
        next go into a new list."""
        changes, spilled, self.pending, self.spilled = self.pending, self.spilled, [], []
        return changes, spilled

    def spill(self, staging) -> None:
        """Write the pending changes to the staging area (`StagingArea.spill`) and let them go."""
        if self.pending:
            self.spilled.append(_spill(staging, self.pending, self.qualified))
            self.pending = []

    def append(self, changes: list[RowChange], properties: dict[str, str], position: GtidSet | None,
               spilled: list[str] = (), staging=None) -> None:
        """One Iceberg commit of `changes`, and of the rows spilled before them to `spilled`."""
        if spilled:
            names = [*spilled, _spill(staging, changes, self.qualified)] if changes else list(spilled)
            self._append_spilled(names, properties, staging)
        else:
            self._append(changes, properties)
        if position is not None:
            self.committed = position

    def _append_spilled(self, names: list[str], properties: dict[str, str], staging) -> None:
        from pyspark.sql import functions as F

        try:
            ddl = ", ".join(f"{field.name} {_SPARK_TYPES[field.type]}" for field in _SPILLED)
            now = datetime.datetime.now(datetime.timezone.utc)
            frame = staging.read_spilled(names, ddl).withColumn("committed_at", F.lit(now).cast("timestamp"))
            with iceberg_commit_properties(self.spark, properties):
                frame.writeTo(self.qualified).append()
        finally:
            for name in names:
                staging.release_spilled(name)

    def _append(self, changes: list[RowChange], properties: dict[str, str]) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        rows = [
            (change.op, row_json(change.before), row_json(change.after), change.table.db, change.table.table,
             change.source.gtid, change.source.file, change.source.pos, change.source.row, change.source.ts_ms,
             change.source.snapshot, now)
            for change in changes
        ]
        frame = self.spark.createDataFrame(rows, SCHEMA)
        with iceberg_commit_properties(self.spark, properties):
            frame.writeTo(self.qualified).append()


_SPARK_TYPES = {pa.string(): "STRING", pa.int64(): "BIGINT", pa.int32(): "INT", pa.bool_(): "BOOLEAN"}


def _spill(staging, changes: list[RowChange], table: str) -> str:
    """`changes` as changelog rows (but committed_at) in one file of changelog table `table` in
    the staging area; its name."""
    columns = [
        [change.op for change in changes], [row_json(change.before) for change in changes],
        [row_json(change.after) for change in changes], [change.table.db for change in changes],
        [change.table.table for change in changes], [change.source.gtid for change in changes],
        [change.source.file for change in changes], [change.source.pos for change in changes],
        [change.source.row for change in changes], [change.source.ts_ms for change in changes],
        [change.source.snapshot for change in changes],
    ]
    return staging.spill([pa.Table.from_arrays([pa.array(values, field.type) for values, field in zip(columns, _SPILLED)],
                                               schema=_SPILLED)], table)


def changelog_name(qualified_target: str) -> str:
    """`catalog`.`db`.`table` → `catalog`.`db`.`table_changelog` (names as quoted by the sink)."""
    head, _, last = qualified_target.rpartition(".")
    return f"{head}.{quote(last[1:-1].replace('``', '`') + SUFFIX)}"


def row_json(row: dict | None) -> str | None:
    """A row as the changelog's `before` / `after` hold it."""
    return None if row is None else json.dumps(row, ensure_ascii=False, separators=(",", ":"))
