"""The runtime finds sinks only through the registry (dblog.sinks.registry): the engine, the
preflight, the configuration, the sink factory and the heartbeats name no sink, nor does the
sinks' common base (dblog.sinks.base). Scanned in their syntax trees: no string that is a
registered sink's name (`sink.type` compared or set) or names one in a message (a sink's own
setting, `sink.kafka.…`, or `sink.type = "iceberg"`), no import of a sink's modules, no read of a
sink's own settings (`config.sink.kafka`, `config.sink.path`, `config.iceberg`). Adding a sink is
then a change in its folder only."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from dblog.sinks.registry import sink_plugins

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNTIME = ["dblog/runtime/engine.py", "dblog/runtime/preflight.py", "dblog/runtime/config.py",
           "dblog/runtime/sink_factory.py", "dblog/runtime/heartbeats.py"]
SINK_NEUTRAL = ["dblog/sinks/base.py"]  # what every sink builds on
# The modules of a sink's folder the runtime may import: how every Kafka client connects, and
# what its ACLs let it do. `[kafka]` (the brokers, TLS, SASL, the user) is shared by the Kafka
# sink, the signal channel and the notifications producer, so the configuration, the engine and
# the preflight use them whatever the sink.
SHARED = {"dblog.sinks.kafka.security", "dblog.sinks.kafka.acls"}


def sink_mentions(source: str) -> list[str]:
    """Where `source` names a registered sink, one line each."""
    plugins = sink_plugins()
    names = {plugin.name for plugin in plugins}
    sink_keys = names | {key for plugin in plugins for key in plugin.sink_keys}  # config.sink.<these>
    sections = {section for plugin in plugins for section in plugin.sections}  # config.<these>
    # in messages: a sink's own setting (`sink.kafka.heartbeat_action_query`) or its quoted name
    # (`sink.type = "iceberg"`)
    mention = re.compile("|".join(rf'\bsink\.{re.escape(name)}\b|"{re.escape(name)}"' for name in sorted(names)))
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in names:
            found.append((node.lineno, f"the sink name {node.value!r}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (match := mention.search(node.value)):
            found.append((node.lineno, f"{match.group(0)!r} in a string"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {alias.name}") for alias in node.names if _of_a_sink(alias.name, names)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
            if node.module == "dblog.sinks":  # from dblog.sinks import jsonl
                modules += [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, f"import from {module}") for module in modules if _of_a_sink(module, names)]
        elif isinstance(node, ast.Attribute):
            if node.attr in sink_keys and _named(node.value) == "sink":
                found.append((node.lineno, f"sink.{node.attr}"))
            elif node.attr in sections and _named(node.value) == "config":
                found.append((node.lineno, f"config.{node.attr}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _of_a_sink(module: str, names: set[str]) -> bool:
    """A module of a sink's folder (`dblog.sinks.kafka.…`) or beside it (`dblog.sinks.kafka_sink`)."""
    parts = module.split(".")
    if parts[:2] != ["dblog", "sinks"] or len(parts) < 3 or module in SHARED:
        return False
    return any(parts[2] == name or parts[2].startswith(f"{name}_") for name in names)


def _named(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


@pytest.mark.parametrize("path", RUNTIME + SINK_NEUTRAL)
def test_the_runtime_names_no_sink(path):
    assert sink_mentions((ROOT / path).read_text()) == [], f"{path} names sinks: find them through the registry"


def test_the_scan_finds_each_way_of_naming_a_sink():
    """What the runtime did before the registry (issue 37), one line each: all found."""
    before = '''
from dblog.sinks.jsonl import JsonLinesSink
from dblog.sinks.kafka_sink import _quiet_client_logs
from dblog.sinks import iceberg
import dblog.sinks.null
if config.sink.type == "kafka" and config.sink.kafka.heartbeat_interval_ms:
    pass
interval = 10.0 if self.config.sink.type == "iceberg" else 1.0
path = self.config.sink.path
spark = config.spark
from dblog.sinks.kafka.security import client_options
from dblog.sinks.base import Sink
raise ConfigError(f"sink.kafka.heartbeat_action_query: the source refused it ({error})")
'''
    assert [line.split(":")[0] for line in sink_mentions(before)] == [
        "line 2", "line 3", "line 4", "line 5", "line 6", "line 6", "line 8", "line 9", "line 10", "line 13"]
