"""Signals acted upon: rows inserted into the signal table (they arrive through the binlog)
and messages on the Kafka signal topic, parsed (`dblog.signals.model`), checked against the source
(which tables match, which columns a condition may name) and applied to the capture.

Every signal gets an answer: what the capture emits for it (STARTED, ALREADY_QUEUED, ABORTED,
PAUSED, …) or a REJECTED notification naming the problem; a bad signal never stops the engine.
A valid signal that changes nothing is answered too, as Debezium has no type for it:
NOTHING_TO_STOP (stop-snapshot: no queued or running table matches), ALREADY_PAUSED,
NOT_PAUSED (resume-snapshot), each with `request` (the signal's id), a `message` and the
snapshot's `data_collections`. A pause with nothing running is no such case: it holds the next
requested snapshot until a resume (PAUSED).
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Callable

from dblog.core.capture import ChangeCapture, Emission
from dblog.core.events import Notification, TableId
from dblog.core.progress import TableSnapshot
from dblog.signals.conditions import validate_condition
from dblog.signals.model import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    Signal,
    SignalError,
    StopSnapshot,
    parse_signal,
)

if TYPE_CHECKING:  # kafka-python is imported only when a Kafka channel is configured
    from dblog.signals.kafka_channel import KafkaSignalChannel

log = logging.getLogger("dblog")


class SignalHandling:
    """`existing_tables()`: the source's tables now; `columns_of(table)`: a table's column
    names; `is_captured(table)`: whether dblog captures it (include/exclude, not the signal
    table); `kafka`: the Kafka signal channel, if configured."""

    def __init__(self, capture: ChangeCapture, existing_tables: Callable[[], list[TableId]],
                 columns_of: Callable[[TableId], list[str]], is_captured: Callable[[TableId], bool],
                 signal_table: TableId | None, kafka: KafkaSignalChannel | None = None,
                 kafka_poll_interval_seconds: float = 1.0) -> None:
        self.capture = capture
        self.existing_tables = existing_tables
        self.columns_of = columns_of
        self.is_captured = is_captured
        self.signal_table = signal_table
        self.kafka = kafka
        self.kafka_poll_interval_seconds = kafka_poll_interval_seconds
        self._next_kafka_poll = 0.0

    def on_signal_row(self, row: dict) -> list[Emission]:
        """A row inserted into the signal table."""
        signal_id = str(row.get("id"))
        try:
            signal = parse_signal(signal_id, row.get("type"), row.get("data"))
            return [] if signal is None else self.apply(signal, signal_id)
        except SignalError as error:
            return [rejected(signal_id, str(error))]

    def poll_kafka(self) -> list[Emission]:
        """Signals from Kafka, at most every poll interval. Their topic offsets (`kafka_offsets`)
        are committed in the same offsets file as the binlog position and snapshot state, so
        each acts once."""
        if self.kafka is None or time.monotonic() < self._next_kafka_poll:
            return []
        self._next_kafka_poll = time.monotonic() + self.kafka_poll_interval_seconds
        out: list[Emission] = []
        for signal_id, signal_type, data in self.kafka.poll(0):
            if signal_type is None:
                out.append(rejected(signal_id, f"signal {signal_id!r}: the Kafka message value must be JSON "
                                               '{"type": "…", "data": {…}}, got ' + repr(str(data)[:200])))
            else:
                out.extend(self.on_signal_row({"id": signal_id, "type": signal_type, "data": data}))
        return out

    def kafka_offsets(self) -> dict[str, int]:
        return {str(partition): offset for partition, offset in self.kafka.offsets().items()} if self.kafka else {}

    def apply(self, signal: Signal, signal_id: str | None = None) -> list[Emission]:
        action = _ACTIONS.get(type(signal))
        if action is None:
            raise TypeError(f"unexpected signal {signal!r}")
        return action(self, signal, signal_id)

    def _execute_snapshot(self, signal: ExecuteSnapshot, signal_id: str | None) -> list[Emission]:
        tables, skipped = self._matching_tables(signal.data_collections, signal_id)
        requests = [
            TableSnapshot(table, condition=self._condition(signal, table, signal_id),
                          surrogate_key=signal.surrogate_key, blocking=signal.type == "blocking")
            for table in tables
        ]
        return self.capture.skipped(skipped) + self.capture.request_snapshot(requests, signal_id)

    # The capture emits nothing for a stop, pause or resume that changes nothing: say so.
    def _stop_snapshot(self, signal: StopSnapshot, signal_id: str | None) -> list[Emission]:
        capture = self.capture
        which = "no snapshot is running" if capture.progress.current is None else (
            f"no queued or running table matches {list(signal.data_collections or ())}")
        return capture.stop_snapshot(signal.data_collections) or [
            self._unchanged("NOTHING_TO_STOP", signal_id, f"stop-snapshot changed nothing: {which}")]

    def _pause_snapshot(self, signal: PauseSnapshot, signal_id: str | None) -> list[Emission]:
        return self.capture.pause() or [self._unchanged(
            "ALREADY_PAUSED", signal_id, "pause-snapshot changed nothing: the snapshot is already paused; "
                                         "resume-snapshot continues it")]

    def _resume_snapshot(self, signal: ResumeSnapshot, signal_id: str | None) -> list[Emission]:
        capture = self.capture
        which = "no snapshot is paused or running" if capture.progress.current is None else (
            "the snapshot is not paused: it is running")
        return capture.resume() or [self._unchanged(
            "NOT_PAUSED", signal_id, f"resume-snapshot changed nothing: {which}")]

    def _log(self, signal: LogSignal, signal_id: str | None) -> list[Emission]:
        log.info("signal %s: %s", signal_id, signal.message)
        return []

    def _unchanged(self, notification_type: str, signal_id: str | None, message: str) -> Notification:
        queued = [str(entry.table) for entry in self.capture.progress.queue]
        return Notification(notification_type, {"request": signal_id, "message": message, "data_collections": queued})

    def _condition(self, signal: ExecuteSnapshot, table: TableId, signal_id: str | None) -> str | None:
        """The validated `additional-conditions` filter for `table`, if one names it."""
        name = str(table)
        filters = [flt for pattern, flt in signal.additional_conditions if pattern == name or re.fullmatch(pattern, name)]
        if not filters:
            return None
        if len(filters) > 1:
            raise SignalError(f"signal {signal_id!r}: several 'additional-conditions' match {table}; give one")
        try:
            return validate_condition(filters[0], set(self.columns_of(table)))
        except SignalError as error:
            raise SignalError(f"signal {signal_id!r}: additional condition for {table}: {error}") from None

    def _matching_tables(self, patterns: tuple[str, ...], signal_id: str | None) -> tuple[list[TableId], list[TableId]]:
        """(captured tables matching the patterns, existing tables matching them that are not
        captured: those are reported SKIPPED, as Debezium does)."""
        compiled = [re.compile(pattern) for pattern in patterns]
        existing = [t for t in self.existing_tables() if any(p.fullmatch(str(t)) for p in compiled)]
        captured = [t for t in existing if self.is_captured(t)]
        skipped = [t for t in existing if not self.is_captured(t) and t != self.signal_table]
        if not captured and not skipped:
            raise SignalError(
                f"signal {signal_id!r}: no table matches {list(patterns)}; patterns are regular expressions "
                "over 'db.table' (escape the dot: 'shop\\\\.orders')"
            )
        return captured, skipped


# One action per signal type, as dblog.signals.model has one parser per type name.
_ACTIONS: dict[type, Callable[[SignalHandling, Signal, str | None], list[Emission]]] = {
    ExecuteSnapshot: SignalHandling._execute_snapshot,
    StopSnapshot: SignalHandling._stop_snapshot,
    PauseSnapshot: SignalHandling._pause_snapshot,
    ResumeSnapshot: SignalHandling._resume_snapshot,
    LogSignal: SignalHandling._log,
}


def rejected(signal_id: str, reason: str) -> Notification:
    log.warning("rejected signal: %s", reason)
    return Notification("REJECTED", {"id": signal_id, "reason": reason}, "Signal")
