"""Periodic Iceberg table maintenance: compaction and snapshot expiry (config `[sink.maintenance]`).

Every MERGE dblog makes adds a snapshot, small data files and (merge-on-read, format v3)
deletion vectors; left alone, reads slow down and the warehouse grows. Three parts:

- `MaintenancePolicy`: the settings, validated (pydantic, unknown keys rejected).
- `MaintenanceSchedule`: which table needs which action when. Sans-IO: it never reads a
  clock; the caller passes `now` (seconds, e.g. `time.monotonic()`) to `record_commit`, `due`
  and `done`. Compaction is due after `compact_every_commits` dblog commits to a table, expiry
  `expire_every_seconds` after the table's last expiry (or its first commit), once it has had
  a commit since. Counters live in memory: a restart starts them again.
- `IcebergMaintenance`: runs the actions on one table through Spark.

What the actions do, per table (Iceberg 1.10.2, Spark 3.5):

- "compact": rewrite_data_files (bin-pack small files up to `target_file_size_bytes`; the
  deletion vectors of rewritten files are dropped with them; with `equality_deletes`, the
  tables of `iceberg.write_mode = "upsert"`, every data file some delete applies to is
  rewritten too, and delete files no data file needs any more are removed),
  rewrite_position_delete_files (on v3 tables this only converts leftover v2 position-delete
  files to deletion vectors and is a no-op otherwise), rewrite_manifests (skipped while the table has <= 2 manifests).
  These three run through Iceberg's Spark action API (`SparkActions`) rather than `CALL`,
  because their commits must carry dblog's offsets: dblog stores its binlog position in the
  snapshot summary (`dblog.*` properties) and reads it back from the newest snapshot of the
  table's `lineage` that has it. The `CALL` procedures commit "replace" snapshots with no way to
  add summary properties; the actions' `snapshotProperty` does, so each maintenance commit
  repeats the `dblog.*` properties of the newest ancestor that has them (a rewrite changes no
  rows, so the table still holds exactly that position). The equivalent procedures are
  `CALL cat.system.rewrite_data_files(table => '…', options => map('target-file-size-bytes', '…'))`,
  `CALL cat.system.rewrite_position_delete_files(table => '…')` and
  `CALL cat.system.rewrite_manifests(table => '…')`.
- "expire": `CALL cat.system.expire_snapshots(table => '…', older_than => TIMESTAMP '…',
  retain_last => N)` keeps every snapshot younger than `max_snapshot_age_seconds` and at least
  the newest N, with N = max(`keep_snapshots`, 1, the depth of the newest snapshot carrying
  `dblog.*` properties): the snapshot holding dblog's offsets is never expired. Then, when
  `orphan_file_age_seconds` is set, `CALL cat.system.remove_orphan_files(table => '…',
  older_than => TIMESTAMP '…')` deletes files no snapshot references (left by failed or killed
  writes) once they are that old; Iceberg refuses ages under 24 h, since a younger file may
  belong to a commit in progress.

Maintenance is best effort, deliberately: a failing step (missing table, a commit conflict,
an I/O error) is logged as a WARNING and recorded in the returned `MaintenanceResult.errors`;
`run` never raises it into the caller's data path, and the other steps still run. Iceberg
commits are atomic, so a failed step leaves the table as it was (at worst with unreferenced
files, which orphan removal collects). Not catching would stop replication because, say, a
compaction conflicted, while the data path itself is fine; a problem that keeps recurring
shows in every run's WARNING. `KeyboardInterrupt`/`SystemExit` are not caught.

Run maintenance from the thread that MERGEs into the table, between commits (the engine's
`after_commit` hook): the carried offsets are read just before the rewrite commits, and a
MERGE committing in between would leave the newer rewrite snapshot with older offsets.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from dblog.core.sql import quote_identifier  # Spark SQL quotes names with backticks too

log = logging.getLogger(__name__)

MIB = 1 << 20
CARRIED_PREFIX = "dblog."  # snapshot summary properties repeated in maintenance commits
COMMIT_ID_PROPERTY = "dblog.commit-id"  # names one commit (`direct_writes`): never carried
MIN_ORPHAN_AGE_SECONDS = 86_400  # remove_orphan_files refuses younger cut-offs
MANIFESTS_WORTH_REWRITING = 3  # rewrite_manifests only when the table has at least this many


class Action(StrEnum):
    COMPACT = "compact"
    EXPIRE = "expire"


# --- the policy ---------------------------------------------------------------------------------


class MaintenancePolicy(BaseModel):
    """`[sink.maintenance]`: periodic compaction and snapshot expiry of the Iceberg tables.

    0 for `compact_every_commits` or `expire_every_seconds` turns that action off;
    `enabled = false` turns both off.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    compact_every_commits: int = 50  # compact a table after this many dblog commits to it
    expire_every_seconds: float = 3600.0  # expire a table's old snapshots this often
    keep_snapshots: int = 10  # expiry keeps at least this many newest snapshots (>= 1)
    max_snapshot_age_seconds: float = 86_400.0  # and every snapshot younger than this
    target_file_size_bytes: int = 128 * MIB  # compaction's output file size
    orphan_file_age_seconds: float | None = 3 * 86_400.0  # after expiry, delete unreferenced files this old; None: off

    @field_validator("compact_every_commits")
    @classmethod
    def _commits(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"compact_every_commits must be >= 0 (0 turns compaction off), not {value}")
        return value

    @field_validator("expire_every_seconds", "max_snapshot_age_seconds")
    @classmethod
    def _seconds(cls, value: float, info) -> float:
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"{info.field_name} must be a finite number of seconds >= 0, not {value}")
        return value

    @field_validator("keep_snapshots")
    @classmethod
    def _keep(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"keep_snapshots must be at least 1, not {value}: dblog keeps its binlog offsets in the "
                "newest snapshot's summary, so expiry must never remove it"
            )
        return value

    @field_validator("target_file_size_bytes")
    @classmethod
    def _target(cls, value: int) -> int:
        if value < MIB:
            raise ValueError(f"target_file_size_bytes must be at least {MIB} (1 MiB), not {value}")
        return value

    @field_validator("orphan_file_age_seconds")
    @classmethod
    def _orphans(cls, value: float | None) -> float | None:
        if value is not None and not (MIN_ORPHAN_AGE_SECONDS <= value < float("inf")):
            raise ValueError(
                f"orphan_file_age_seconds must be at least {MIN_ORPHAN_AGE_SECONDS} (24 h; a younger file may belong "
                f"to a commit in progress) or unset to never remove orphan files, not {value}"
            )
        return value


# --- the schedule (sans-IO) ---------------------------------------------------------------------


@dataclass
class _TableState:
    commits_since_compact: int = 0
    commits_since_expire: int = 0
    last_expire: float = 0.0  # first commit time until the first expiry


class MaintenanceSchedule:
    """Which table needs which maintenance action, given the times the caller passes in.

        schedule.record_commit(table, now)          # after each dblog commit to `table`
        for table, action in schedule.due(now):     # e.g. after the offsets are saved
            maintenance.run(table, [action]); schedule.done(table, action, now)

    `table` is any hashable name (e.g. "lake.db.t" or a TableId). `due` only reports; an action
    stays due until `done` is called for it (call `done` after a failed run too, or it is
    retried at every `due`). Times are seconds on any clock that does not go back.
    """

    def __init__(self, policy: MaintenancePolicy) -> None:
        self.policy = policy
        self._tables: dict[Hashable, _TableState] = {}

    def record_commit(self, table: Hashable, now: float) -> None:
        state = self._tables.get(table)
        if state is None:
            state = self._tables[table] = _TableState(last_expire=now)
        state.commits_since_compact += 1
        state.commits_since_expire += 1

    def due(self, now: float) -> list[tuple[Hashable, Action]]:
        """The (table, action) pairs due at `now`: tables in first-commit order, compaction
        before expiry of the same table."""
        policy = self.policy
        if not policy.enabled:
            return []
        found: list[tuple[Hashable, Action]] = []
        for table, state in self._tables.items():
            if policy.compact_every_commits and state.commits_since_compact >= policy.compact_every_commits:
                found.append((table, Action.COMPACT))
            if (
                policy.expire_every_seconds
                and state.commits_since_expire > 0
                and now - state.last_expire >= policy.expire_every_seconds
            ):
                found.append((table, Action.EXPIRE))
        return found

    def done(self, table: Hashable, action: Action | str, now: float) -> None:
        """`action` ran on `table` at `now` (successfully or not): start its interval again."""
        state = self._tables.setdefault(table, _TableState(last_expire=now))
        action = Action(action)
        if action is Action.COMPACT:
            state.commits_since_compact = 0
        else:
            state.commits_since_expire = 0
            state.last_expire = now

    def commits_since(self, table: Hashable, action: Action | str) -> int:
        state = self._tables.get(table)
        if state is None:
            return 0
        return state.commits_since_compact if Action(action) is Action.COMPACT else state.commits_since_expire


# --- names ----------------------------------------------------------------------------------------


def qualified_name(parts: Sequence[str]) -> str:
    return ".".join(quote_identifier(part) for part in parts)


def sql_string(text: str) -> str:
    """A Spark SQL string literal (default parser settings: backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse_identifier(name: str) -> list[str]:
    """Split a multipart name the way Spark SQL does: dots separate parts, backticks quote a
    part (with `` for a backtick inside). "lake.`my db`.`a.b`" -> ["lake", "my db", "a.b"]."""
    parts: list[str] = []
    position, length = 0, len(name)
    while True:
        while position < length and name[position].isspace():
            position += 1
        if position < length and name[position] == "`":
            chars = []
            position += 1
            while True:
                if position >= length:
                    raise ValueError(f"unclosed backtick in table name {name!r}")
                if name[position] == "`":
                    if name[position + 1 : position + 2] == "`":
                        chars.append("`")
                        position += 2
                        continue
                    position += 1
                    break
                chars.append(name[position])
                position += 1
            part = "".join(chars)
            while position < length and name[position].isspace():
                position += 1
        else:
            end = position
            while end < length and name[end] not in ".`":
                end += 1
            part = name[position:end].strip()
            position = end
            if not part:
                raise ValueError(f"empty part in table name {name!r}")
        parts.append(part)
        if position == length:
            return parts
        if name[position] != ".":
            raise ValueError(f"unexpected {name[position]!r} in table name {name!r} at character {position}")
        position += 1


# --- running it -------------------------------------------------------------------------------


@dataclass
class MaintenanceResult:
    """What one `IcebergMaintenance.run` did to one table."""

    table: str  # quoted, fully qualified
    actions: tuple[str, ...]
    data_files_rewritten: int = 0
    data_files_added: int = 0
    delete_files_removed: int = 0  # deletion vectors / delete files dropped or rewritten
    manifests_rewritten: int = 0
    snapshots_expired: int = 0
    orphan_files_removed: int = 0
    carried: dict[str, str] = field(default_factory=dict)  # dblog.* properties repeated in rewrite commits
    errors: list[str] = field(default_factory=list)  # "step: message" of every failed step
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        done = []
        if Action.COMPACT in self.actions:
            done.append(
                f"{self.data_files_rewritten} data files rewritten into {self.data_files_added}, "
                f"{self.delete_files_removed} delete files removed, {self.manifests_rewritten} manifests rewritten"
            )
        if Action.EXPIRE in self.actions:
            done.append(f"{self.snapshots_expired} snapshots expired, {self.orphan_files_removed} orphan files removed")
        text = f"{self.table} {'+'.join(self.actions) or 'nothing'}: {'; '.join(done)} in {self.seconds:.1f}s"
        return text + (f"; {len(self.errors)} step(s) failed" if self.errors else "")


def _error_text(error: BaseException) -> str:
    """One line for the log: the Java exception's own text for Py4J errors, else the first line."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM may be gone; fall back to Python's text
            pass
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _timestamp_literal(epoch_seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_seconds, tz=datetime.timezone.utc)
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}+00:00'"


class IcebergMaintenance:
    """Compaction and snapshot expiry of Iceberg tables through a SparkSession (see the module
    docstring for what runs and why failures are only logged)."""

    def __init__(self, spark: Any, catalog: str, policy: MaintenancePolicy | None = None,
                 equality_deletes: bool = False) -> None:
        self.spark = spark
        self.catalog = catalog  # for names given without one
        self.policy = policy or MaintenancePolicy()
        self.equality_deletes = equality_deletes

    # --- names ---

    def table_parts(self, table: str | Sequence[str]) -> list[str]:
        """[catalog, namespace…, table]: a sequence is taken as the parts, a string is parsed as
        a SQL multipart name; either gets this catalog in front unless it starts with it."""
        parts = parse_identifier(table) if isinstance(table, str) else [str(part) for part in table]
        if len(parts) < 2 or parts[0] != self.catalog:
            parts = [self.catalog, *parts]
        if len(parts) < 3:
            raise ValueError(f"{table!r} is not a table name (catalog.namespace.table)")
        return parts

    # --- the entry points ---

    def run(
        self, table: str | Sequence[str], actions: Iterable[Action | str], now: float | None = None
    ) -> MaintenanceResult:
        """Run `actions` ("compact", "expire") on `table`; never raises a step's failure (it is
        logged and listed in `errors`). `now` is the wall-clock time (epoch seconds) that the
        snapshot and orphan-file ages are measured from; default: the current time."""
        wanted = [Action(action) for action in actions]
        started = time.monotonic()
        now = time.time() if now is None else now
        try:
            parts = self.table_parts(table)
        except ValueError as error:
            result = MaintenanceResult(str(table), tuple(wanted))
            self._failed(result, "name", error)
            return result
        result = MaintenanceResult(qualified_name(parts), tuple(a.value for a in wanted))
        if Action.COMPACT in wanted:
            self._compact(parts, result)
        if Action.EXPIRE in wanted:
            self._expire(parts, result, now)
        result.seconds = time.monotonic() - started
        if result.ok:
            log.info("Iceberg maintenance: %s", result.summary())
        else:
            log.warning("Iceberg maintenance: %s", result.summary())
        return result

    def run_due(self, schedule: MaintenanceSchedule, now: float) -> list[MaintenanceResult]:
        """Run every action `schedule` has due at `now` (its clock) and mark each done, failed or
        not (a failing table is tried again one interval later, not at every call)."""
        pending: dict[Hashable, list[Action]] = {}
        for table, action in schedule.due(now):
            pending.setdefault(table, []).append(action)
        results = []
        for table, actions in pending.items():
            results.append(self.run(table if isinstance(table, str) else _parts_of(table), actions))
            for action in actions:
                schedule.done(table, action, now)
        return results

    # --- steps ---

    def _step(self, result: MaintenanceResult, name: str, function, *args) -> Any:
        try:
            return function(*args)
        except Exception as error:  # noqa: BLE001 - maintenance is best effort (module docstring)
            self._failed(result, name, error)
            return None

    @staticmethod
    def _failed(result: MaintenanceResult, step: str, error: BaseException) -> None:
        text = _error_text(error)
        result.errors.append(f"{step}: {text}")
        log.warning(
            "Iceberg maintenance of %s: %s failed and was skipped (best effort; replication goes on): %s",
            result.table,
            step,
            text,
        )
        log.debug("%s failed", step, exc_info=error)

    def _compact(self, parts: list[str], result: MaintenanceResult) -> None:
        table = self._step(result, "load table", self._load, parts)
        if table is None:
            return
        carried = self._step(result, "read dblog properties", self._carried_properties, table) or {}
        result.carried = carried
        actions = self._jvm.org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)

        def rewrite_data_files() -> None:
            action = actions.rewriteDataFiles(table).option(
                "target-file-size-bytes", str(self.policy.target_file_size_bytes)
            )
            if self.equality_deletes:  # fold the equality deletes into the data: readers stop applying them
                action = action.option("delete-file-threshold", "1").option("remove-dangling-deletes", "true")
            outcome = self._with_properties(action, carried).execute()
            result.data_files_rewritten += outcome.rewrittenDataFilesCount()
            result.data_files_added += outcome.addedDataFilesCount()
            result.delete_files_removed += outcome.removedDeleteFilesCount()
            failed = outcome.failedDataFilesCount()
            if failed:
                raise RuntimeError(f"{failed} data files could not be rewritten")

        def rewrite_position_delete_files() -> None:
            outcome = self._with_properties(actions.rewritePositionDeletes(table), carried).execute()
            result.delete_files_removed += outcome.rewrittenDeleteFilesCount()

        def rewrite_manifests() -> None:
            table.refresh()
            snapshot = table.currentSnapshot()
            if snapshot is None or len(snapshot.allManifests(table.io())) < MANIFESTS_WORTH_REWRITING:
                return
            outcome = self._with_properties(actions.rewriteManifests(table), carried).execute()
            result.manifests_rewritten += len(list(outcome.rewrittenManifests()))

        self._step(result, "rewrite_data_files", rewrite_data_files)
        self._step(result, "rewrite_position_delete_files", rewrite_position_delete_files)
        self._step(result, "rewrite_manifests", rewrite_manifests)

    def _expire(self, parts: list[str], result: MaintenanceResult, now: float) -> None:
        table = self._step(result, "load table", self._load, parts)
        if table is None:
            return
        procedure_prefix = f"CALL {quote_identifier(parts[0])}.system"
        name = sql_string(qualified_name(parts))

        def expire_snapshots() -> None:
            table.refresh()
            before = len(table.snapshots())
            retain = max(1, self.policy.keep_snapshots, self._dblog_depth(table))
            older_than = _timestamp_literal(now - self.policy.max_snapshot_age_seconds)
            self._sql(
                f"{procedure_prefix}.expire_snapshots(table => {name}, older_than => {older_than}, "
                f"retain_last => {retain})"
            )
            table.refresh()
            result.snapshots_expired += max(0, before - len(table.snapshots()))

        def remove_orphan_files() -> None:
            older_than = _timestamp_literal(now - self.policy.orphan_file_age_seconds)
            rows = self._sql(f"{procedure_prefix}.remove_orphan_files(table => {name}, older_than => {older_than})")
            result.orphan_files_removed += len(rows)

        self._step(result, "expire_snapshots", expire_snapshots)
        if self.policy.orphan_file_age_seconds is not None:
            self._step(result, "remove_orphan_files", remove_orphan_files)

    # --- Spark and the Iceberg Java API ---

    @property
    def _jvm(self):
        return self.spark.sparkContext._jvm

    def _sql(self, statement: str) -> list:
        log.debug("Iceberg maintenance: %s", statement)
        return self.spark.sql(statement).collect()

    def _load(self, parts: list[str]):
        """The org.apache.iceberg.Table behind the Spark catalog (the catalog's cached instance,
        refreshed)."""
        table = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self.spark._jsparkSession, qualified_name(parts)
        )
        table.refresh()
        return table

    @staticmethod
    def _with_properties(action, properties: dict[str, str]):
        for key, value in properties.items():
            action = action.snapshotProperty(key, value)
        return action

    @staticmethod
    def _dblog_ancestors(table):
        """(depth, summary) of the current snapshot and its ancestors, newest first."""
        for depth, snapshot in enumerate(lineage(table)):
            yield depth, {str(k): str(v) for k, v in dict(snapshot.summary()).items()}

    def _carried_properties(self, table) -> dict[str, str]:
        """The `dblog.*` summary properties of the newest ancestor that has any."""
        for _, summary in self._dblog_ancestors(table):
            carried = {k: v for k, v in summary.items() if k.startswith(CARRIED_PREFIX) and k != COMMIT_ID_PROPERTY}
            if carried:
                return carried
        return {}

    def _dblog_depth(self, table) -> int:
        """How many snapshots, newest first, reach the newest one with `dblog.*` properties
        (0 when none has them): expiry retains at least that many."""
        for depth, summary in self._dblog_ancestors(table):
            if any(k.startswith(CARRIED_PREFIX) for k in summary):
                return depth + 1
        return 0


def lineage(table):
    """An Iceberg table's current snapshot, then its ancestors through their parent ids: the
    commits its current state was built from, newest first. Not the order of their timestamps:
    writers' clocks differ, and a rollback or cherry-pick makes an older snapshot current (the
    snapshots after it stay listed, but the table no longer holds their changes)."""
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None  # None once expired


def _parts_of(table: Hashable) -> list[str]:
    """A schedule key that is not a string: a TableId-like (db, table) or a sequence of parts."""
    if hasattr(table, "db") and hasattr(table, "table"):
        return [table.db, table.table]
    return [str(part) for part in table]  # type: ignore[union-attr]
