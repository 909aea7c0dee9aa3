"""A sink defined outside dblog, as a third party would write one: its settings (`[sink.toy]`),
its sink, and its plugin, which `conftest.py` registers (`dblog.sinks.registry.register`) or an
entry point of group `dblog.sinks` names (`toy = toy_sink:PLUGIN`). Nothing of dblog is edited
to add it.

The sink keeps, per table, the last row of each key it was flushed, and counts the operations
and heartbeats it received: what the test compares with the source."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dblog.core.events import Key, Row, RowChange, TableId
from dblog.core.offsets import Offsets
from dblog.sinks.base import Sink
from dblog.sinks.registry import HeartbeatSettings, SinkContext, SinkPlugin


class ToySettings(BaseModel):
    """`[sink.toy]`."""

    model_config = ConfigDict(extra="forbid")

    label: str = "toy"
    heartbeat_interval_ms: int = Field(0, ge=0)


class ToySink(Sink):
    def __init__(self, settings: ToySettings, name: str) -> None:
        self.settings = settings
        self.name = name
        self.rows: dict[TableId, dict[Key, Row]] = {}  # flushed: the last row of each key
        self.ops: Counter[str] = Counter()
        self.beats = 0
        self.flushes = 0
        self._pending: list[RowChange] = []

    def write(self, changes: list[RowChange]) -> None:
        self._pending.extend(changes)
        self.pending_rows = len(self._pending)

    def flush(self, offsets: Offsets | None = None) -> None:
        for change in self._pending:
            rows = self.rows.setdefault(change.table, {})
            if change.before_key is not None:  # an update of the key: the old key's row is gone
                rows.pop(change.before_key, None)
            if change.op == "d":
                rows.pop(change.key, None)
            else:
                rows[change.key] = dict(change.after)
            self.ops[change.op] += 1
        self._pending.clear()
        self.pending_rows = 0
        self.flushes += 1

    def heartbeat(self, ts_ms: int) -> None:
        self.beats += 1


class ToyPlugin(SinkPlugin):
    name = "toy"
    title = "the toy sink"
    settings = ToySettings

    def build(self, context: SinkContext) -> Sink:
        return ToySink(context.config.sink.toy, context.config.name)

    def config_problem(self, config: Any, chosen: bool) -> str | None:
        if chosen and not config.sink.toy.label:
            return "sink.toy.label is empty: name the toy sink"
        return None

    def heartbeat(self, config: Any) -> HeartbeatSettings | None:
        interval = config.sink.toy.heartbeat_interval_ms
        return HeartbeatSettings(interval, None) if interval else None


PLUGIN = ToyPlugin()
