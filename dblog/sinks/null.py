"""The null sink (`sink.type = "null"`): discards every change (benchmarks: the engine without a
sink's cost). Its plugin is here too: it has no settings and nothing to check."""

from __future__ import annotations

from dblog.core.events import RowChange
from dblog.sinks.base import Sink
from dblog.sinks.registry import SinkContext, SinkPlugin


class NullSink(Sink):
    """Discards everything (benchmarks: measures the engine without a sink's cost)."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, changes: list[RowChange]) -> None:
        self.count += len(changes)


class NullPlugin(SinkPlugin):
    name = "null"
    title = "the null sink"

    def build(self, context: SinkContext) -> Sink:
        return NullSink()


PLUGIN = NullPlugin()
