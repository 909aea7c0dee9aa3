"""The sinks built from their settings: the one `sink.type` names, by its plugin
(dblog.sinks.registry), and the snapshot reads that Spark tasks stage into it
(`snapshot.distributed`).

Each sink takes its own settings, never the whole configuration: its plugin picks them from the
configuration (the sinks cannot import `dblog.runtime.config`, so their settings types live in
their folders and the configuration's model is built from them). A plugin imports its sink only
when asked to build it: the Spark and Kafka clients are heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pymysql

from dblog.core.events import TableId
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import TableSchema
from dblog.runtime import secrets
from dblog.runtime.config import Config, ConfigError
from dblog.sinks.base import Sink
from dblog.sinks.registry import SinkContext, staging_sinks

if TYPE_CHECKING:
    from dblog.runtime.distributed_snapshot import DistributedReads
    from dblog.mysql.table_history import TableHistory


def open_sink(
    config: Config,
    schema_of: Callable[[TableId], TableSchema],
    flavor: Callable[[], str],
    captures: Callable[[TableId], bool],
    definitions: TableHistory | None = None,
) -> Sink:
    """The sink `sink.type` asks for, built by its plugin. `flavor` is asked only by a sink that
    stores it (Iceberg); `definitions` (the Kafka sink's schema-change records and column
    defaults): the schema history (dblog.mysql.table_history)."""
    return config.sink_plugin().build(SinkContext(config, schema_of, flavor, captures, resolve_secret, definitions))


def resolve_secret(where: str, literal, env: str | None, file: str | None, file_key: str | None = None) -> str | None:
    """`dblog.runtime.secrets.resolve_secret` for the sinks' plugins: a ConfigError naming the
    setting when it cannot be resolved."""
    try:
        return secrets.resolve_secret(where, literal, env, file, file_key)
    except secrets.SecretError as error:
        raise ConfigError(str(error)) from None


def open_distributed_reads(
    sink: Sink,
    config: Config,
    connection_settings: ConnectionSettings,
    connect: Callable[[], pymysql.Connection],
    signal_table: TableId | None,
    write_signal: Callable,
    delete_signal: Callable,
) -> DistributedReads:
    """Snapshot reads by Spark tasks (`snapshot.distributed`), staged where `sink` takes them
    from: refused (ConfigError) for a sink that cannot."""
    from dblog.runtime.distributed_snapshot import DistributedReads

    staging = sink.snapshot_staging()
    if staging is None:
        needs = " or ".join(plugin.title for plugin in staging_sinks())
        raise ConfigError(f"snapshot.distributed = true needs {needs}: Spark tasks stage the rows "
                          "where it MERGEs them from")
    return DistributedReads(staging.spark, staging.area, config.snapshot, connection_settings, connect,
                            staging.changelog, signal_table, write_signal, delete_signal, config.name)
