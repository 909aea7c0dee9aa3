"""Where change events go. A sink takes batches and makes them durable on `flush()`;
the engine commits offsets only after `flush()` returns, so a sink never loses an event that
the offsets claim was delivered (delivery is at-least-once: after a crash, events since the
last committed offset are written again, in an order whose replay is still correct).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, StagedSnapshot, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets


class SinkError(RuntimeError):
    """The sink cannot take a change without corrupting its target: the engine stops, with
    offsets left where they were, and the message says what to do."""


class SinkUnavailable(SinkError, ConnectionError):
    """The sink's target cannot be reached for now (e.g. Kafka brokers down): as a lost database,
    `dblog run` restarts the engine from the committed offsets after a wait (a ConnectionError to
    its supervisor) until `source.reconnect_timeout_seconds` of failures."""


MergeListener = Callable[[str, float], None]  # (the target table's name, seconds one MERGE took)


class SnapshotStaging(NamedTuple):
    """Where Spark tasks stage snapshot reads for a sink to take them from (`snapshot.distributed`):
    the sink's Spark session, its staging area (`dblog.sinks.iceberg.staging.StagingArea`) and
    whether the sink also keeps a changelog of each table (the staged rows then carry it too)."""

    spark: Any
    area: Any
    changelog: bool = False


class Sink:
    """Every hook the engine calls, with what a sink that needs nothing more does. Events
    handed to a sink are frozen: a sink keeps them as they are (batches, last change per key).

    Optional capabilities are methods here too, whose defaults say "not this sink"
    (`report_merges`, `snapshot_staging`): the engine asks, it does not probe attributes, and a
    wrapping sink forwards them like any other hook."""

    pending_rows: int = 0  # changes written and not yet flushed: the engine commits early when many
    # A sink whose commits are slow (Iceberg MERGEs) lets the engine commit each of its tables
    # on pool threads while its loop reads on: `detach(tables)` then `commit()` instead of
    # `flush()`, `pending_tables()` and `known_tables()` say which (dblog.runtime.table_commits).
    commits_per_table: bool = False

    def write(self, changes: list[RowChange]) -> None:
        raise NotImplementedError

    def write_staged(self, staged: StagedSnapshot) -> None:
        """Snapshot reads staged outside dblog (`snapshot.distributed`), in order with `write`."""
        raise SinkError(f"{type(self).__name__} cannot take snapshot reads staged by Spark tasks: "
                        "snapshot.distributed = true needs a sink whose plugin declares stages_snapshots")

    def flush(self, offsets: Offsets | None = None) -> None:
        """Return only once everything written so far survives a crash. `offsets` is the
        checkpoint about to be committed, for sinks that store it with their data."""

    def detach(self, tables: list | None = None) -> list:
        """Take what was written so far to `tables` (None: every table) as one batch per table
        (called on the engine's thread); what is written next goes into new batches. Only for
        `commits_per_table` sinks."""
        raise NotImplementedError

    def commit(self, batch: list, offsets: Offsets | None) -> None:
        """Make detached batches durable, as `flush` would have at the moment of `detach`.
        Called on a pool thread, each table's batches one at a time and in order, concurrently
        with `write`."""
        raise NotImplementedError

    def pending_tables(self) -> list:
        """The tables with something written and not yet detached (`commits_per_table`)."""
        raise NotImplementedError

    def known_tables(self) -> list:
        """Every table the sink holds state for (`commits_per_table`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the sink holds; what was not flushed may be dropped (a restart
        writes it again)."""

    def check_routes(self, tables: list[TableId]) -> None:
        """Called once at start with the captured tables: refuse (SinkError) a configuration
        under which they cannot be written, before anything is."""

    # Whether the sink describes tables by their definitions (the Kafka sink's schema-change
    # records and column defaults): the engine then keeps the schema history
    # (dblog.mysql.table_history) and saves it with the offsets.
    uses_definitions = False

    def first_start(self, tables: list[TableId], marked_rows_follow: bool = False) -> None:
        """The engine starts with no offsets and captures `tables`: a sink that writes a schema
        history (the Kafka sink: Debezium's snapshot records) writes its start records now, before
        any change; the first commit covers them, so they are written once (again only if the
        engine stops before that commit). `marked_rows_follow`: a startup snapshot whose rows carry
        Debezium's initial-snapshot markers comes next (its last row, not these, says `last`)."""

    def schema_changed(self, change: SchemaChange, ddl: DdlChange, position: GtidSet) -> list[TableId]:
        """DDL was read (`ddl`: what `classify_ddl` made of it; `position`: the cut just before
        it). Return the tables whose existing rows the sink cannot fix by itself: the engine
        snapshots them again."""
        return []

    def table_redefined(self, table: TableId) -> None:
        """`schema_of(table)` gives another definition from now on, without DDL here: the rows
        that follow were logged under an earlier one (DDL the server applied since, which the
        stream reaches later). Drop what was derived from the old one."""

    def transaction_started(self, start: TransactionStart) -> None:
        """A binlog transaction begins: its changes come next, until `transaction_ended`
        (for sinks that write Debezium's transaction metadata)."""

    def transaction_ended(self, end: TransactionEnd) -> None:
        """The transaction `transaction_started` named ends: each of its changes was written."""

    def heartbeat(self, ts_ms: int) -> None:
        """Debezium's heartbeat (at the interval the sink's plugin declares, `SinkPlugin.heartbeat`):
        the engine's clock says one is due; `ts_ms` is now. Sinks without a heartbeat record ignore it."""

    def after_commit(self) -> None:
        """The offsets of the last flush are saved: housekeeping that must not run before
        (e.g. Iceberg maintenance)."""

    def report_merges(self, listener: MergeListener) -> None:
        """Have `listener` told (target, seconds) after each MERGE, from the thread that made it
        (the engine's metrics). A sink without MERGEs worth timing ignores it."""

    def snapshot_staging(self) -> SnapshotStaging | None:
        """Where Spark tasks may stage snapshot reads that `write_staged` then takes; None:
        this sink cannot take them."""
        return None

