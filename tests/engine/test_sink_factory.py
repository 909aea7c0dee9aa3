"""The sink factory (dblog.runtime.sink_factory) and the sinks' optional capabilities, without
a server: which sink a configuration builds, from which settings, and what a sink that cannot
take snapshot reads staged by Spark tasks says."""

from __future__ import annotations

import pytest

from dblog.core.events import TableId
from dblog.mysql.schema import Column, TableSchema
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.sink_factory import open_distributed_reads, open_sink
from dblog.sinks.null import NullSink
from dblog.sinks.jsonl.sink import JsonLinesSink

TABLE = TableId("shop", "orders")
SCHEMA = TableSchema(TABLE, [Column("id", "int", "int", nullable=False)], ("id",))


def _flavor() -> str:
    raise AssertionError("only the Iceberg sink asks for the flavor")


def test_null_and_json_lines_sinks_are_built_from_their_settings_without_asking_the_flavor(tmp_path):
    null = open_sink(parse_config({"sink": {"type": "null"}}), lambda table: SCHEMA, _flavor, lambda table: True)
    assert type(null) is NullSink
    path = tmp_path / "out" / "changes.jsonl"
    config = parse_config({"name": "shop", "sink": {"type": "jsonl", "path": str(path)}})
    sink = open_sink(config, lambda table: SCHEMA, _flavor, lambda table: True)
    try:
        assert isinstance(sink, JsonLinesSink) and sink.path == path
        assert sink._key_columns(TABLE) == ("id",)  # from the source's schema, looked up when asked
    finally:
        sink.close()


def test_a_sink_without_staging_refuses_a_distributed_snapshot_and_ignores_merge_reports():
    sink = NullSink()
    sink.report_merges(lambda table, seconds: pytest.fail("a NullSink has no MERGEs"))
    assert sink.snapshot_staging() is None
    config = parse_config({"sink": {"type": "null"}})
    with pytest.raises(ConfigError, match="needs the Iceberg sink"):
        open_distributed_reads(sink, config, {}, lambda: None, None, lambda *a: None, lambda *a: None)
