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
"""

from __future__ import annotations

import datetime
import json

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


class ChangelogTable:
    def __init__(self, spark, qualified: str, committed: GtidSet | None) -> None:
        self.spark = spark
        self.qualified = qualified
        self.committed = committed  # binlog transactions the table already holds
        self.pending: list[RowChange] = []

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

    def detach(self) -> list[RowChange]:
        """The changes added so far, for one `append`; the next go into a new list."""
        changes, self.pending = self.pending, []
        return changes

    def append(self, changes: list[RowChange], properties: dict[str, str], position: GtidSet | None) -> None:
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
        if position is not None:
            self.committed = position


def changelog_name(qualified_target: str) -> str:
    """`catalog`.`db`.`table` → `catalog`.`db`.`table_changelog` (names as quoted by the sink)."""
    head, _, last = qualified_target.rpartition(".")
    return f"{head}.{quote(last[1:-1].replace('``', '`') + SUFFIX)}"


def row_json(row: dict | None) -> str | None:
    """A row as the changelog's `before` / `after` hold it."""
    return None if row is None else json.dumps(row, ensure_ascii=False, separators=(",", ":"))
