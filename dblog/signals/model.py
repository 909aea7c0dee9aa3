"""Debezium-compatible signals: the model and its validation.

A signal is `(id, type, data)` — a row of the signal table (`id VARCHAR(42) PRIMARY KEY,
type VARCHAR(32) NOT NULL, data TEXT NULL`) or a Kafka message `{"type": …, "data": {…}}`.
`parse_signal` turns one into a typed value or raises `SignalError` with a message that names
the field and says how to fix it; the engine turns that into a rejection notification and
keeps running.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# execute-snapshot's types, as Debezium's: "incremental" reads the tables in chunks while
# streaming; "blocking" pauses streaming while they are read, then streams on from there.
SNAPSHOT_TYPES = ("incremental", "blocking")

# Rows the engine itself writes as watermarks (Debezium's names); never acted upon.
WATERMARK_TYPES = frozenset({"snapshot-window-open", "snapshot-window-close"})


class SignalError(ValueError):
    pass


@dataclass(frozen=True)
class ExecuteSnapshot:
    data_collections: tuple[str, ...]  # regular expressions over "db.table"
    additional_conditions: tuple[tuple[str, str], ...] = ()  # (data-collection regex, predicate)
    surrogate_key: str | None = None
    type: str = "incremental"  # or "blocking" (SNAPSHOT_TYPES)


@dataclass(frozen=True)
class StopSnapshot:
    data_collections: tuple[str, ...] | None = None  # None: stop everything


@dataclass(frozen=True)
class PauseSnapshot:
    pass


@dataclass(frozen=True)
class ResumeSnapshot:
    pass


@dataclass(frozen=True)
class LogSignal:
    message: str


Signal = ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot | LogSignal


def parse_signal(signal_id: str, signal_type: str, data: str | dict | None) -> Signal | None:
    """Returns None for the engine's own watermark rows."""
    if not isinstance(signal_type, str) or not signal_type:
        raise SignalError(f"signal {signal_id!r}: 'type' is missing; use one of {', '.join(_PARSERS)}")
    if signal_type in WATERMARK_TYPES:
        return None
    parser = _PARSERS.get(signal_type)
    if parser is None:
        raise SignalError(
            f"signal {signal_id!r}: unknown type {signal_type!r}; use one of {', '.join(_PARSERS)}"
        )
    return parser(signal_id, _data_object(signal_id, data))


def _data_object(signal_id: str, data: str | dict | None) -> dict:
    if data is None or data == "":
        return {}
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as error:
            raise SignalError(f"signal {signal_id!r}: 'data' is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise SignalError(f"signal {signal_id!r}: 'data' must be a JSON object, got {type(data).__name__}")
    return data


def _collections(signal_id: str, data: dict, required: bool) -> tuple[str, ...] | None:
    value = data.get("data-collections")
    if value is None:
        if required:
            raise SignalError(
                f"signal {signal_id!r}: 'data-collections' is required: a list of regular expressions "
                'over "db.table", e.g. ["shop\\\\.orders"]'
            )
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise SignalError(f"signal {signal_id!r}: 'data-collections' must be a non-empty list of strings")
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as error:
            raise SignalError(
                f"signal {signal_id!r}: 'data-collections' entry {pattern!r} is not a valid regular "
                f"expression ({error})"
            ) from None
    return tuple(value)


def _execute_snapshot(signal_id: str, data: dict) -> ExecuteSnapshot:
    kind = data.get("type", "incremental")
    if not isinstance(kind, str) or kind.lower() not in SNAPSHOT_TYPES:
        raise SignalError(
            f"signal {signal_id!r}: snapshot type {kind!r} is not supported; use \"incremental\" (read while "
            "streaming) or \"blocking\" (streaming paused while the tables are read)"
        )
    conditions = []
    for entry in data.get("additional-conditions") or []:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("data-collection"), str)
            or not isinstance(entry.get("filter"), str)
        ):
            raise SignalError(
                f"signal {signal_id!r}: each 'additional-conditions' entry must be "
                '{"data-collection": "db.table", "filter": "<predicate>"}'
            )
        try:
            re.compile(entry["data-collection"])
        except re.error as error:
            raise SignalError(
                f"signal {signal_id!r}: 'additional-conditions' data-collection {entry['data-collection']!r} "
                f"is not a valid regular expression ({error})"
            ) from None
        conditions.append((entry["data-collection"], entry["filter"]))
    surrogate = data.get("surrogate-key")
    if surrogate is not None and (not isinstance(surrogate, str) or not surrogate):
        raise SignalError(f"signal {signal_id!r}: 'surrogate-key' must be a column name")
    return ExecuteSnapshot(_collections(signal_id, data, True), tuple(conditions), surrogate, kind.lower())


def _stop_snapshot(signal_id: str, data: dict) -> StopSnapshot:
    return StopSnapshot(_collections(signal_id, data, False))


def _log(signal_id: str, data: dict) -> LogSignal:
    message = data.get("message")
    if not isinstance(message, str):
        raise SignalError(f"signal {signal_id!r}: a 'log' signal needs data {{\"message\": \"…\"}}")
    return LogSignal(message)


_PARSERS = {
    "execute-snapshot": _execute_snapshot,
    "stop-snapshot": _stop_snapshot,
    "pause-snapshot": lambda signal_id, data: PauseSnapshot(),
    "resume-snapshot": lambda signal_id, data: ResumeSnapshot(),
    "log": _log,
}
