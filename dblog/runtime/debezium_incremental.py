"""An incremental snapshot Debezium had in flight, continued by dblog as if it had run it itself.

What Debezium's offset holds of it (AbstractIncrementalSnapshotContext.store, written only while a
snapshot runs):
- `incremental_snapshot_collections`: the JSON list of the tables still to read, the one being
  read first, each `{"incremental_snapshot_collections_id": "db.table",
  "…_additional_condition": filter or null, "…_surrogate_key": column or null,
  "…_correlation_id": …}`;
- `incremental_snapshot_primary_key`: the key of the last row it emitted (null before the first),
  `incremental_snapshot_maximum_key`: the first table's maximum key, fixed when its read began;
  each the hex of a Java-serialized Object[] (dblog.runtime.java_key_array);
- `incremental_snapshot_correlation_id`: the execute-snapshot signal's id.

On restart Debezium reads the first table on from the chunk after that key, up to that maximum,
then the others (IncrementalSnapshotContext.init). dblog's snapshot progress holds the same: the
first table started with `max_key` and `last_key`, the others queued with their condition and
surrogate key. Pure: the offset in, a SnapshotProgress out.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from dblog.core.events import TableId
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.runtime.java_key_array import key_of_hex
from dblog.runtime.java_offset_file import JavaStreamError

COLLECTIONS = "incremental_snapshot_collections"
LAST_KEY = "incremental_snapshot_primary_key"
MAXIMUM_KEY = "incremental_snapshot_maximum_key"
CORRELATION_ID = "incremental_snapshot_correlation_id"
_ID, _CONDITION, _SURROGATE = (f"{COLLECTIONS}_id", f"{COLLECTIONS}_additional_condition",
                               f"{COLLECTIONS}_surrogate_key")


class SnapshotNotContinued(ValueError):
    """The snapshot in the offset cannot be continued exactly; the message says why."""


def _entries(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    try:
        entries = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:  # older releases: the ids joined by commas
        return [{_ID: part.strip()} for part in str(value).split(",") if part.strip()]
    if not isinstance(entries, list):
        raise SnapshotNotContinued(f"{COLLECTIONS} is not a list: {value!r}")
    return [entry if isinstance(entry, dict) else {_ID: str(entry)} for entry in entries]


def snapshot_collections(value: Any) -> list[str]:
    """The tables of `incremental_snapshot_collections`, the one being read first."""
    return [str(entry.get(_ID)) for entry in _entries(value)]


def _key(offset: dict[str, Any], field: str) -> tuple[Any, ...] | None:
    text = offset.get(field)
    if not text:
        return None
    try:
        return key_of_hex(str(text))
    except JavaStreamError as error:
        raise SnapshotNotContinued(f"its {field} cannot be read: {error}") from None


def snapshot_progress(offset: dict[str, Any]) -> SnapshotProgress | None:
    """dblog's snapshot progress continuing the incremental snapshot in Debezium's `offset`; None
    when none is in flight. SnapshotNotContinued when it cannot be continued exactly."""
    entries = _entries(offset.get(COLLECTIONS))
    if not entries:
        return None
    queue = []
    for entry in entries:
        try:
            table = TableId.parse(str(entry.get(_ID)))
        except ValueError as error:
            raise SnapshotNotContinued(f"its table {entry.get(_ID)!r} is not a db.table name ({error})") from None
        queue.append(TableSnapshot(table, condition=entry.get(_CONDITION) or None,
                                   surrogate_key=entry.get(_SURROGATE) or None))
    first = queue[0]
    first.max_key, first.last_key = _key(offset, MAXIMUM_KEY), _key(offset, LAST_KEY)
    if first.last_key is not None and first.max_key is None:
        raise SnapshotNotContinued(f"its {LAST_KEY} is set but not its {MAXIMUM_KEY}")
    if first.max_key is not None and first.last_key is not None and len(first.max_key) != len(first.last_key):
        raise SnapshotNotContinued(f"its keys have {len(first.last_key)} and {len(first.max_key)} columns")
    first.started = first.max_key is not None  # else dblog reads the maximum key itself, as Debezium would
    correlation = offset.get(CORRELATION_ID)
    return SnapshotProgress(queue=queue, snapshot_id=str(correlation) if correlation else None)


def check_key_width(progress: SnapshotProgress, key_columns: Callable[[TableId], tuple[str, ...]]) -> None:
    """SnapshotNotContinued unless the keys Debezium stored have as many columns as the key the
    table is read by here (its surrogate key, or `key_columns(table)`, its primary key)."""
    current = progress.current
    if current is None or current.max_key is None:
        return
    columns = (current.surrogate_key,) if current.surrogate_key else key_columns(current.table)
    if not columns:
        raise SnapshotNotContinued(f"{current.table} has no primary key on this server (or does not exist)")
    if len(columns) != len(current.max_key):
        raise SnapshotNotContinued(f"its keys have {len(current.max_key)} columns, {current.table}'s key here "
                                   f"({', '.join(columns)}) {len(columns)}")
