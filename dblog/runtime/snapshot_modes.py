"""Debezium's snapshot modes (`snapshot.startup`): what a start does with the offsets it finds.

Each mode answers, as Debezium 3.6's `Snapshotter` of that name does (`shouldSnapshotData`,
`shouldSnapshotSchema`, `shouldStream`, `shouldSnapshotOnDataError`,
`shouldSnapshotOnSchemaError`), four questions at start:

- read every captured table (the start-up snapshot)?
- stream from the present instead of the offsets' position (Debezium's `always` does not use
  the offsets it has; `when_needed` cannot when the binlog no longer holds them)?
- read the table definitions (the schema history) from the server instead of the saved ones?
- stream once the start-up snapshot is done, or stop (`initial_only`)?

| mode | no offsets | offsets |
|---|---|---|
| `initial` | snapshot, stream | resume |
| `never` (Debezium's `no_data`) | stream from the present | resume |
| `when_needed` | snapshot, stream | resume; purged from the binlog: snapshot from the present |
| `initial_only` | snapshot, stop | finish a snapshot under way, stop |
| `always` | snapshot, stream | snapshot from the present, stream |
| `recovery` | stream from the present | resume, definitions read from the server |
| `configuration_based` | as its keys say (`[snapshot.configuration_based]`, Debezium's) | as its keys say |

`plan_startup` is pure: it asks whether the offsets' position is purged (`position_purged`, a
query) only when the mode depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pymysql

from dblog.core.events import TableId
from dblog.core.file_positions import FilePosition
from dblog.core.offsets import Offsets
from dblog.core.progress import TableSnapshot
from dblog.mysql.binlog_retention import binlog_files, purged_gtids
from dblog.mysql.server_session import ServerSession
from dblog.runtime.config import ConfigError, SnapshotConfig


@dataclass(frozen=True)
class StartupPlan:
    read_tables: bool  # queue every captured table's snapshot
    fresh_position: bool  # leave the offsets' position: start as a first start does, from the present
    rebuild_history: bool  # the table definitions read from the server, not the saved history
    stream: bool  # False: stop once the start-up snapshot is done
    rebuild_on_schema_error: bool  # a saved history that cannot be read is read again from the server
    note: str  # what this start does, and why (logged)


def plan_startup(settings: SnapshotConfig, has_offsets: bool, position_purged: Callable[[], bool]) -> StartupPlan:
    """The plan for `settings.startup`; `has_offsets`: the offsets file exists;
    `position_purged()`: the server's binlog no longer holds the offsets' position (asked only
    when the mode depends on it)."""
    mode = settings.startup

    def plan(read: bool, fresh: bool = False, rebuild: bool = False, stream: bool = True,
             on_schema_error: bool = False, note: str = "") -> StartupPlan:
        return StartupPlan(read, fresh, rebuild, stream, on_schema_error, f"snapshot.startup = {mode!r}: {note}")

    if mode == "initial":
        return plan(not has_offsets, note="first start: every captured table is snapshotted" if not has_offsets
                    else "resuming from the offsets")
    if mode == "never":
        return plan(False, note="streaming from the present" if not has_offsets else "resuming from the offsets")
    if mode == "when_needed":
        if not has_offsets:
            return plan(True, note="no offsets: every captured table is snapshotted")
        if position_purged():
            return plan(True, fresh=True, note="the offsets' position is no longer in the server's binlog: every "
                                                "captured table is snapshotted again, streaming from the present")
        return plan(False, note="resuming from the offsets (still in the binlog)")
    if mode == "initial_only":
        return plan(not has_offsets, stream=False,
                    note="every captured table is snapshotted, then dblog stops without streaming on"
                    if not has_offsets else "a start-up snapshot under way is finished, then dblog stops")
    if mode == "always":
        return plan(True, fresh=has_offsets, note="every captured table is snapshotted at each start"
                    + (", streaming from the present (the offsets' position is not used)" if has_offsets else ""))
    if mode == "recovery":
        if not has_offsets:
            return plan(False, on_schema_error=True, note="no offsets: streaming from the present")
        return plan(False, rebuild=True, on_schema_error=True,
                    note="resuming from the offsets; the schema history is rebuilt from the server's definitions")
    if mode == "configuration_based":
        rules = settings.configuration_based
        read = rules.snapshot_data
        fresh = has_offsets and read
        why = []
        if has_offsets and not read and rules.snapshot_on_data_error and position_purged():
            read = fresh = True
            why.append("the offsets' position is no longer in the binlog (snapshot_on_data_error)")
        why.append("every captured table is snapshotted" if read else "no table is snapshotted")
        if has_offsets and rules.snapshot_schema:
            why.append("the schema history is rebuilt from the server (snapshot_schema)")
        why.append("then streaming" if rules.start_stream else "then dblog stops (start_stream = false)")
        return plan(read, fresh=fresh, rebuild=has_offsets and rules.snapshot_schema, stream=rules.start_stream,
                    on_schema_error=rules.snapshot_on_schema_error, note="; ".join(why))
    raise ValueError(f"unknown snapshot.startup {mode!r}")


def incremental_startup_note(settings: SnapshotConfig) -> str | None:
    """The note logged when the start-up snapshot is dblog's incremental one, where Debezium's
    is blocking: what differs, and the setting that makes it Debezium's."""
    if settings.startup_reads != "incremental":
        return None
    return ("the start-up snapshot is incremental: tables are read chunk by chunk while the binlog streams (no locks; "
            "changes streamed meanwhile may come before a table's last snapshot row). Debezium's initial snapshot is "
            "blocking: set snapshot.startup_reads = \"blocking\" to read every table first with streaming paused, "
            "then stream on from where it paused")


def startup_tables(settings: SnapshotConfig, captured: list[TableId]) -> list[TableSnapshot]:
    """The start-up snapshot's reads: every captured table, in order, with Debezium's markers
    (`initial_markers`), read with streaming paused (`startup_reads = "blocking"`), and from
    the SELECT its `select_overrides` entry gives."""
    markers = settings.initial_markers
    blocking = settings.startup_reads == "blocking"
    return [TableSnapshot(table, initial_order=order if markers else None, blocking=blocking,
                          select=settings.select_overrides.get(str(table)))
            for order, table in enumerate(captured, 1)]


def position_purged(server: ServerSession, offsets: Offsets | None) -> bool:
    """Whether the server's binlog no longer holds what the offsets need (Debezium's
    `when_needed` checks the same: its GTID set against `gtid_purged`)."""
    if offsets is None:
        return False
    needed = offsets.resume if offsets.resume is not None else offsets.position
    try:
        if offsets.binlog is not None:  # a binlog file and position: is its file still there?
            at = FilePosition.of(needed, offsets.binlog.base_name)
            files = binlog_files(server)
            return bool(files) and (at.file not in files and at.coordinate < FilePosition(files[-1], 4).coordinate)
        return bool(purged_gtids(server) - needed)
    except pymysql.err.MySQLError as error:
        raise ConfigError(f"snapshot.startup: cannot tell whether the binlog still holds {needed or 'the start'} "
                          f"({error}); grant REPLICATION CLIENT (BINLOG MONITOR on MariaDB >= 10.5), which lists the "
                          "binlog files") from error
