"""The Iceberg tables the sink writes: one `Target` per table (the sink's theory of operation:
`dblog.sinks.iceberg.sink`).

`TargetTables.open` creates a target's table (the source's columns, its key as identifier
fields, and `_dblog_seq`), or brings an existing one in line with its source (new columns
added, types widened where Iceberg can; anything else refused) and reads what it holds: its
committed position (`dblog.sinks.iceberg.positions`) and where its keys can be.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from dblog.core.events import RowChange, StagedSnapshot, TableId
from dblog.core.gtid import GtidSet
from dblog.core.sql import quote_identifier as quote
from dblog.mysql.schema import Column, TableSchema
from dblog.sinks.base import SinkError
from dblog.sinks.iceberg.changelog import ChangelogTable, changelog_name
from dblog.sinks.iceberg.key_ranges import KeyRanges, orderable
from dblog.sinks.iceberg.positions import CommittedPositions, binlog_sequence
from dblog.sinks.iceberg.routing import SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN
from dblog.sinks.iceberg.session import iceberg_table
from dblog.sinks.iceberg.types import can_widen, spark_type

log = logging.getLogger("dblog.spark")

SEQ_COLUMN = "_dblog_seq"

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


class HeldChange(NamedTuple):
    """The last change of one key in a pending batch, kept as its commit needs it. Holding the
    RowChange itself (its row dict and source block) costs about 1.2 KB a change of a six-column
    row, this about 0.7 KB: what `iceberg.max_buffer_rows` held changes weigh (issue 29)."""

    op: str
    sequence: int | None  # `binlog_sequence`; None for snapshot reads, which always apply
    source: TableId
    key: tuple  # the source table's key (not prefixed by the source, as a routed target's keys are)
    values: tuple  # the row in `Target.columns` order; a delete's: its key columns, the others None


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
    pending: dict[tuple, HeldChange] = field(default_factory=dict)  # last change per key
    # what the changes added to `pending` (and its changelog's) since it was last let go weigh
    # (`change_bytes`): at least what they hold, a key's earlier changes counted too
    pending_bytes: int = 0
    staged: list[StagedSnapshot] = field(default_factory=list)  # snapshot reads staged by Spark tasks
    # earlier parts of the pending batch, spilled to the staging area as Parquet (`merge.SpilledPart`)
    spilled: list = field(default_factory=list)
    sources: set[TableId] = field(default_factory=set)  # source tables seen writing to it
    # their schemas, looked up on the loop's thread: commit threads must not query the source
    schemas: dict[TableId, TableSchema] = field(default_factory=dict)
    changelog: ChangelogTable | None = None  # with iceberg.changelog: every change, appended
    # Where its keys can be (key_ranges), when the sink knows it (`known_key_ranges`); None: unknown
    written: KeyRanges | None = None
    # False until its first commit creates the table (`TargetTables.create`): on a commit thread,
    # so that a snapshot of many new tables does not wait on the loop for one catalog commit each
    created: bool = True

    def __post_init__(self) -> None:
        self.column_names = [c.name for c in self.columns]
        self._key_indexes = [self.column_names.index(name) for name in self.key_columns]

    def key_of(self, change: RowChange, key: tuple) -> tuple:
        return (change.table.db, change.table.table, *key) if self.sharded else key

    def hold(self, change: RowChange, op: str, key: tuple) -> None:
        """Keep `change` as the last change of `key` (its own key, or the old key an update
        moved away from, deleted: `op` "d")."""
        held_key = self.key_of(change, key)
        if op == "d":
            values = [None] * len(self.column_names)
            for index, value in zip(self._key_indexes, held_key):
                values[index] = value
            row = tuple(values)
        else:
            after = change.after
            if self.sharded:
                after = {**after, SOURCE_DB_COLUMN: change.table.db, SOURCE_TABLE_COLUMN: change.table.table}
            row = tuple(map(after.get, self.column_names))
        sequence = None if op == "r" else binlog_sequence(change)
        self.pending[held_key] = HeldChange(op, sequence, change.table, key, row)


class TargetTables:
    """The target tables of one Spark catalog: named, created, evolved and opened."""

    def __init__(
        self,
        spark,
        catalog: str,
        schema_of: Callable[[TableId], TableSchema],
        positions: CommittedPositions,
        properties: dict[str, str],
        changelog: bool,
        columns_of: Callable[[TableSchema], list[Column]] | None = None,
    ) -> None:
        """`columns_of`: the columns of a source's table its target holds (`[columns]`); None: all."""
        self.spark = spark
        self.catalog = catalog
        self._schema_of = schema_of
        self._positions = positions
        self._properties = properties  # of every table created
        self._with_changelog = changelog
        self._columns_of = columns_of or (lambda schema: schema.columns)
        self._namespaces: set[str] = set()  # made (or found) already: one statement per database, not per table

    def qualified(self, table: TableId) -> str:
        return f"{quote(self.catalog)}.{quote(table.db)}.{quote(table.table)}"

    def exists(self, name: TableId) -> bool:
        return bool(self.spark.catalog.tableExists(f"{self.catalog}.{name.db}.{name.table}"))

    def open(self, name: TableId, source: TableId, sharded: bool) -> Target:
        """The target `name` for changes of `source`: its table created, or evolved and read."""
        schema = self._schema_of(source)
        if not schema.key_columns:
            raise SinkError(
                f"{source} has no primary key: an Iceberg target needs one to MERGE by. Give the table a primary key, "
                "or exclude it from capture (source.exclude)"
            )
        columns = [*(_SOURCE_COLUMNS if sharded else ()), *self._columns_of(schema)]
        key_columns = (*((SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN) if sharded else ()), *schema.key_columns)
        qualified = self.qualified(name)
        target = Target(name, qualified, sharded, columns, key_columns)
        if name.db not in self._namespaces:
            self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(self.catalog)}.{quote(name.db)}")
            self._namespaces.add(name.db)
        if self.exists(name):
            self._evolve(target, source)
            self._read_committed(target)
            target.written = self._known_key_ranges(target)
        else:
            target.created = False
            target.written = KeyRanges()
        if self._with_changelog:
            log_name = changelog_name(qualified)
            target.changelog = ChangelogTable.create(self.spark, log_name, self._properties)
            holds = self._positions.committed_in(log_name)
            target.changelog.committed = holds[0] if holds else None
        return target

    def create(self, target: Target) -> None:
        """Create the table of a target `open` found missing, before its first commit (on that
        commit's thread: a table's commits run one at a time)."""
        if not target.created:
            self._create(target)
            target.created = True

    def _create(self, target: Target) -> None:
        """Through the catalog's Java API, in one metadata commit with its identifier fields
        (Spark SQL needs a CREATE TABLE and an ALTER TABLE … SET IDENTIFIER FIELDS, two commits:
        over a thousand tables created at their first rows, that second commit was a third of
        the time). The schema is Spark's, converted as Spark's CREATE TABLE converts it."""
        ddl = ", ".join(
            f"{quote(c.name)} {spark_type(c)}{' NOT NULL' if c.name in target.key_columns else ''}"
            for c in target.columns
        )
        jvm = self.spark.sparkContext._jvm
        struct = jvm.org.apache.spark.sql.types.StructType.fromDDL(f"{ddl}, {quote(SEQ_COLUMN)} DECIMAL(38,0)")
        converted = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(struct)
        identifiers = jvm.java.util.HashSet()
        for key in target.key_columns:
            identifiers.add(converted.findField(key).fieldId())
        schema = jvm.org.apache.iceberg.Schema(converted.columns(), identifiers)
        properties = jvm.java.util.HashMap()
        for key, value in self._properties.items():
            properties.put(key, value)
        catalog = self.spark._jsparkSession.sessionState().catalogManager().catalog(self.catalog).icebergCatalog()
        names = self.spark.sparkContext._gateway.new_array(jvm.java.lang.String, 2)  # of(String...)
        names[0], names[1] = target.table.db, target.table.table
        identifier = jvm.org.apache.iceberg.catalog.TableIdentifier.of(names)
        catalog.buildTable(identifier, schema).withProperties(properties).create()
        log.info("created Iceberg table %s (key %s)", target.qualified, ", ".join(target.key_columns))

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
        return set(iceberg_table(self.spark, target.qualified).schema().identifierFieldNames())

    def _read_committed(self, target: Target) -> None:
        holds = self._positions.committed_in(target.qualified)
        if holds is not None:
            target.committed, target.sequence = holds
            log.info("%s holds the binlog up to %s", target.qualified, target.committed)

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
