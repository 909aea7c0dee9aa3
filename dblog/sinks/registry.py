"""The sinks the runtime knows, each by one `SinkPlugin`: the runtime finds a sink only here, by
its `sink.type`, and asks the plugin for everything that differs between sinks.

A plugin lives in its sink's folder (`dblog/sinks/jsonl/plugin.py`, `dblog/sinks/kafka/plugin.py`,
`dblog/sinks/iceberg/plugin.py`, `dblog/sinks/null.py`) and says:

- its name, the value of `sink.type`;
- its settings: the `[sink.<name>]` table (`settings`), keys of `[sink]` itself (`sink_keys`,
  the JSON-lines sink's `path`) and top-level tables it owns (`sections`, the Iceberg sink's
  `[spark]` and `[iceberg]`); the configuration's model is built from them
  (dblog.runtime.config), so unknown keys are still refused where they stand;
- how it is built (`build`, from a `SinkContext`);
- its configuration cross-checks (`config_problem`) and its `dblog check` lines (`check_brokers`,
  `check`, `check_paths`);
- the capabilities the runtime decides on before a sink exists: heartbeat records
  (`heartbeat`), snapshot reads staged by Spark tasks (`stages_snapshots`), the `[kafka]` brokers
  (`uses_kafka_brokers`), the default commit interval. What a built sink does (MERGE reports,
  its staging area) the engine asks the sink itself (`Sink.report_merges`,
  `Sink.snapshot_staging`), so that a wrapping sink forwards it.

Where plugins come from, in this order: the built-in sinks (`BUILT_IN`); the entry points of
group `dblog.sinks` of every installed distribution (`importlib.metadata`), each naming a
plugin object (`my_sink.plugin:PLUGIN`); and `register(plugin)`, for a plugin defined in the
process (tests). Plugin modules are imported when the registry is first asked, so they import
only what describing the sink needs (pydantic models), never the sink's client libraries.

The plugins see the engine's configuration (dblog.runtime.config.Config) as a value: the sinks
cannot import the runtime (the layers point down), which is why `ConfigError` is defined here
and the runtime's checks reach the plugins through the protocols of `dblog.sinks.checks`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from dblog.core.events import TableId
from dblog.sinks.base import Sink

if TYPE_CHECKING:
    from dblog.mysql.schema import TableSchema
    from dblog.sinks.checks import CheckResult, PreflightRun

log = logging.getLogger("dblog.sinks")

ENTRY_POINT_GROUP = "dblog.sinks"
# The built-in plugins, "module:attribute", in the order `sink.type`'s error lists them.
BUILT_IN = ("dblog.sinks.jsonl.plugin:PLUGIN", "dblog.sinks.iceberg.plugin:PLUGIN", "dblog.sinks.kafka.plugin:PLUGIN",
            "dblog.sinks.null:PLUGIN")
DEFAULT_SINK = "jsonl"  # `sink.type` when the configuration names none


class ConfigError(ValueError):
    """A configuration dblog refuses; the message names the setting and what to do.
    (`dblog.runtime.config.ConfigError`: defined here so that sink plugins can raise it.)"""


class HeartbeatSettings(NamedTuple):
    """Debezium's heartbeats a sink writes: every `interval_ms`, and the action query run on the
    source with each (dblog.runtime.heartbeats)."""

    interval_ms: int
    action_query: str | None


SecretResolver = Callable[..., "str | None"]  # dblog.runtime.secrets.resolve_secret, raising ConfigError


@dataclass(frozen=True)
class SinkContext:
    """What a plugin builds its sink from: the engine's configuration and the runtime's views of
    the source. `flavor()` asks the source (only a sink that stores it should call it);
    `definitions`: the schema history (dblog.mysql.table_history) for sinks that describe
    tables by their definitions; `resolve_secret(where, literal, env, file, file_key=None)`:
    a secret given as a value, a variable or a file (dblog.runtime.secrets)."""

    config: Any
    schema_of: Callable[[TableId], TableSchema]
    flavor: Callable[[], str]
    captures: Callable[[TableId], bool]
    resolve_secret: SecretResolver
    definitions: Any = None


class SinkPlugin:
    """One sink, as the runtime sees it. The defaults are what a sink that needs nothing more
    says: subclass, set `name` and `build`, override what differs."""

    name: str = ""  # the value of `sink.type`
    title: str = ""  # as messages name it: "the Iceberg sink"
    settings: type[BaseModel] | None = None  # the `[sink.<name>]` table
    sink_keys: Mapping[str, tuple[Any, Any]] = {}  # keys of `[sink]` itself: {key: (type, default or Field)}
    sections: Mapping[str, type[BaseModel]] = {}  # top-level tables of its own: {name: model}
    commit_interval_seconds: float = 1.0  # offsets.commit_interval_seconds when unset
    stages_snapshots: bool = False  # takes snapshot reads staged by Spark tasks (snapshot.distributed)
    uses_kafka_brokers: bool = False  # writes to `[kafka]`'s brokers (needs kafka.bootstrap_servers)
    broker_checks: tuple[str, ...] = ()  # what `check_brokers` checks ("data topics"), for its skip lines
    check_section: str = ""  # the name of `check`'s section in `dblog check`, for a line if it fails

    def build(self, context: SinkContext) -> Sink:
        raise NotImplementedError

    def config_problem(self, config: Any, chosen: bool) -> str | None:
        """What is wrong with `config` for this sink (`chosen`: it is `sink.type`'s), a message
        naming the settings and the remedy; None: nothing."""
        return None

    def heartbeat(self, config: Any) -> HeartbeatSettings | None:
        """The heartbeats this sink writes under `config`, the chosen sink's; None: none."""
        return None

    def setting(self, key: str) -> str:
        """How messages name this sink's setting `key`: in its `[sink.<name>]` table."""
        return f"sink.{self.name}.{key}"

    def check_brokers(self, run: PreflightRun, admin: Any, existing: set[str]) -> Iterator[CheckResult]:
        """`dblog check` on the `[kafka]` brokers (`uses_kafka_brokers`): kafka-python's admin
        client and the topics it lists; one result per name of `broker_checks`."""
        return iter(())

    def check(self, run: PreflightRun) -> Iterator[CheckResult]:
        """`dblog check`'s own section for this sink (after Kafka's), e.g. reaching its catalog."""
        return iter(())

    def check_paths(self, run: PreflightRun) -> Iterator[CheckResult]:
        """`dblog check` of the local files this sink writes (after the offsets file's)."""
        return iter(())


@dataclass
class _Registry:
    plugins: dict[str, SinkPlugin] = field(default_factory=dict)
    loaded: bool = False
    generation: int = 0  # changes with every registration: what the configuration's model is built from


_registry = _Registry()


def register(plugin: SinkPlugin) -> None:
    """Make `plugin` known by its name; a name, or a table of its own, that another registered
    plugin has is refused (ValueError)."""
    _load()
    _add(plugin)


def unregister(name: str) -> None:
    """Forget the plugin of sink `name` (a test's own sink, at its end)."""
    del _registry.plugins[name]
    _registry.generation += 1


def sink_plugins() -> list[SinkPlugin]:
    """Every registered plugin: the built-in ones first, in `BUILT_IN`'s order."""
    _load()
    return list(_registry.plugins.values())


def sink_plugin(name: str) -> SinkPlugin:
    """The plugin of `sink.type = name`; a ConfigError listing the registered ones if none."""
    _load()
    plugin = _registry.plugins.get(name)
    if plugin is None:
        known = ", ".join(repr(known) for known in _registry.plugins)
        raise ConfigError(f"sink.type = {name!r} names no registered sink (registered: {known}); a sink outside "
                          f"dblog registers through the {ENTRY_POINT_GROUP!r} entry point group")
    return plugin


def registry_generation() -> int:
    _load()
    return _registry.generation


def staging_sinks() -> list[SinkPlugin]:
    """The plugins whose sinks take snapshot reads staged by Spark tasks (`snapshot.distributed`)."""
    return [plugin for plugin in sink_plugins() if plugin.stages_snapshots]


def _add(plugin: SinkPlugin) -> None:
    if not plugin.name:
        raise ValueError(f"{type(plugin).__name__} has no name: set its `name` (the value of sink.type)")
    for other in _registry.plugins.values():
        if other.name == plugin.name:
            raise ValueError(f"sink {plugin.name!r} is registered already (by {type(other).__module__})")
        tables = (set(other.sections) | set(other.sink_keys)) & (set(plugin.sections) | set(plugin.sink_keys))
        if tables:
            raise ValueError(f"sink {plugin.name!r}: {sorted(tables)} belong to sink {other.name!r} already")
    _registry.plugins[plugin.name] = plugin
    _registry.generation += 1


def _load() -> None:
    if _registry.loaded:
        return
    _registry.loaded = True
    for reference in BUILT_IN:
        module, _, attribute = reference.partition(":")
        _add(getattr(importlib.import_module(module), attribute))
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            plugin = point.load()
        except Exception as error:  # noqa: BLE001 - a broken third-party plugin must not hide the others
            log.error("sink plugin %s (%s) cannot be loaded: %s", point.name, point.value, error)
            continue
        if plugin.name != point.name:
            log.error("sink plugin %s (%s) is named %r: the entry point's name must be its sink.type",
                      point.name, point.value, plugin.name)
            continue
        try:
            _add(plugin)
        except ValueError as error:
            log.error("sink plugin %s (%s) is not registered: %s", point.name, point.value, error)
