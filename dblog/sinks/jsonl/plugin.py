"""How the runtime meets the JSON-lines sink (`sink.type = "jsonl"`, the default): its file is
`sink.path`, a key of `[sink]` itself, and `dblog check` proves it can be written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dblog.sinks.base import Sink
from dblog.sinks.checks import CheckResult, PreflightRun, writable
from dblog.sinks.registry import SinkContext, SinkPlugin


class JsonLinesPlugin(SinkPlugin):
    name = "jsonl"
    title = "the JSON-lines sink"
    sink_keys = {"path": (str, "dblog-data/changes.jsonl")}  # jsonl only

    def build(self, context: SinkContext) -> Sink:
        from dblog.sinks.jsonl.sink import JsonLinesSink

        config, schema_of = context.config, context.schema_of
        return JsonLinesSink(config.sink.path, lambda table: schema_of(table).key_columns, config.name,
                             context.captures, config.columns, schema_of)

    def check_paths(self, run: PreflightRun) -> Iterator[CheckResult]:
        yield writable("sink path", Path(run.config.sink.path), "sink.path")


PLUGIN = JsonLinesPlugin()
