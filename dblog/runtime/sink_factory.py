"""The sinks built from their settings: the one `sink.type` names, and the snapshot reads that
Spark tasks stage into it (`snapshot.distributed`).

Each sink takes its own settings (`[sink]`'s path, `[sink.kafka]`, `[spark]` and `[iceberg]`),
never the whole configuration: the sinks cannot import `dblog.runtime.config`, so their
settings types live beside them (`dblog.sinks.kafka_settings`, `dblog.sinks.iceberg.settings`)
and the configuration holds them as its sections. The Spark and Kafka sinks are imported only
when asked for: their clients are heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pymysql

from dblog.core.events import TableId
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import TableSchema
from dblog.runtime.config import Config, ConfigError
from dblog.runtime.secrets import SecretError, resolve_secret, resolve_setting
from dblog.sinks.base import NullSink, Sink
from dblog.sinks.jsonl import JsonLinesSink

if TYPE_CHECKING:
    from dblog.runtime.distributed_snapshot import DistributedReads
    from dblog.sinks.iceberg.settings import IcebergSettings
    from dblog.sinks.kafka.encoding import TableDescriptions


def open_sink(
    config: Config,
    schema_of: Callable[[TableId], TableSchema],
    flavor: Callable[[], str],
    captures: Callable[[TableId], bool],
    definitions: TableDescriptions | None = None,
) -> Sink:
    """The sink `sink.type` asks for. `flavor` is asked only by the sink that stores it (Iceberg);
    `definitions` (the Kafka sink's schema-change records and column defaults): the schema
    history (dblog.runtime.table_history)."""
    settings = config.sink
    if settings.type == "null":
        return NullSink()
    if settings.type == "iceberg":
        from dblog.sinks.iceberg.sink import open_iceberg_sink

        return open_iceberg_sink(config.spark, config.iceberg, schema_of, flavor(), captures,
                                 catalog_secrets(config.iceberg), config.columns)
    if settings.type == "kafka":
        from dblog.sinks.kafka.sink import KafkaSink

        return KafkaSink(config.kafka.bootstrap_servers, settings.kafka, config.name, schema_of, captures,
                         config.kafka.security(), config.columns, definitions)
    return JsonLinesSink(settings.path, lambda table: schema_of(table).key_columns, config.name, captures,
                         config.columns, schema_of)


def catalog_secrets(iceberg: IcebergSettings) -> dict[str, str]:
    """The Iceberg catalog's secret properties (`iceberg.jdbc_password` and
    `iceberg.catalog_properties_env` / `_file`), resolved now: {property: value}."""
    secrets: dict[str, str] = {}
    try:
        password = resolve_setting(iceberg, "jdbc_password", "iceberg.jdbc_password")
        if password is not None:
            secrets["jdbc.password"] = password
        for key, variable in iceberg.catalog_properties_env.items():
            secrets[key] = resolve_secret("iceberg.catalog_properties", None, variable, None) or ""
        for key, path in iceberg.catalog_properties_file.items():
            secrets[key] = resolve_secret("iceberg.catalog_properties", None, None, path) or ""
    except SecretError as error:
        raise ConfigError(str(error)) from None
    both = set(iceberg.catalog_properties_env) & set(iceberg.catalog_properties_file)
    if both:
        raise ConfigError(f"iceberg.catalog_properties_env and _file both set {sorted(both)}: give each one way only")
    return secrets


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
        raise ConfigError("snapshot.distributed = true needs the Iceberg sink: Spark tasks stage the rows "
                          "where it MERGEs them from")
    return DistributedReads(staging.spark, staging.area, config.snapshot, connection_settings, connect,
                            config.iceberg.changelog, signal_table, write_signal, delete_signal, config.name)
