"""How the runtime meets the Iceberg sink (`sink.type = "iceberg"`): its settings are the
top-level `[spark]` and `[iceberg]` tables (dblog.sinks.iceberg.settings); it commits every 10 s
by default (each commit is one MERGE per changed table); it takes snapshot reads staged by Spark
tasks (`snapshot.distributed`); `dblog check` starts its Spark session and reaches its catalog."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from dblog.sinks.base import Sink
from dblog.sinks.checks import CheckResult, PreflightRun, reason
from dblog.sinks.iceberg.settings import IcebergSettings, SparkSettings
from dblog.sinks.registry import ConfigError, SecretResolver, SinkContext, SinkPlugin

log = logging.getLogger("dblog.check")


class IcebergPlugin(SinkPlugin):
    name = "iceberg"
    title = "the Iceberg sink"
    sections = {"spark": SparkSettings, "iceberg": IcebergSettings}
    commit_interval_seconds = 10.0
    stages_snapshots = True
    check_section = "Spark and Iceberg catalog"

    def build(self, context: SinkContext) -> Sink:
        from dblog.sinks.iceberg.sink import open_iceberg_sink

        config = context.config
        return open_iceberg_sink(config.spark, config.iceberg, context.schema_of, context.flavor(), context.captures,
                                 catalog_secrets(config.iceberg, context.resolve_secret), config.columns)

    def config_problem(self, config: Any, chosen: bool) -> str | None:
        if not chosen:
            return None
        if config.columns.propagate_source_type or config.columns.propagate_data_types:
            return ("columns.propagate_source_type / propagate_data_types add Kafka Connect schema parameters; "
                    "the Iceberg sink's tables carry Iceberg types, not Connect schemas: remove them")
        if config.columns.rewrites_rows and config.snapshot.distributed:
            return ("[columns] leaves out or masks columns, and snapshot.distributed has Spark tasks read snapshot "
                    "rows straight into the Iceberg sink's staging area, past those rules: remove snapshot.distributed "
                    "(the engine then reads the snapshot and applies [columns]), or remove [columns]")
        return None

    def check(self, run: PreflightRun) -> Iterator[CheckResult]:
        check = self.check_section
        if not run.spark:
            yield CheckResult(check, "skip", "not checked (--no-spark)")
            return
        from dblog.sinks.iceberg.catalog import catalog_namespaces

        spark = run.config.spark
        run.on_slow(f"starting a Spark session on {spark.master} to reach catalog {spark.catalog} "
                    "(slow: 10 s or more)")
        sink = None
        try:
            sink = run.open_sink(run.flavor or "mysql")  # stored with the sink's positions; unknown without the source
            session = sink.spark
            version = session.version
            listed = catalog_namespaces(session, spark.catalog)  # the sink's opening checked the catalog
            namespaces = f"{len(listed)} namespaces" if listed else "no namespace yet"
        except Exception as error:  # noqa: BLE001 - Py4J, Spark and Java errors alike end up here
            yield CheckResult(check, "fail", f"{spark.master}, catalog {spark.catalog}: {_java_reason(error)[:500]}",
                              "check [spark] (master, packages, conf) and [iceberg], that Java 17 is installed, "
                              "and that the catalog's service and warehouse are reachable from this machine")
            return
        finally:
            if sink is not None:
                try:
                    sink.close()
                    sink.spark.stop()
                except Exception as error:  # noqa: BLE001 - the check's result stands
                    log.debug("stopping the check's Spark session: %s", error)
        yield CheckResult(check, "ok", f"Spark {version} on {spark.master}; catalog {spark.catalog} answered "
                                       f"({namespaces})")


def catalog_secrets(iceberg: IcebergSettings, resolve_secret: SecretResolver) -> Mapping[str, str]:
    """The Iceberg catalog's secret properties (`iceberg.jdbc_password`, `iceberg.rest_credential` and
    `iceberg.catalog_properties_env` / `_file`), resolved now by `resolve_secret` (the runtime's,
    raising ConfigError): {property: value}."""
    secrets: dict[str, str] = {}
    password = resolve_secret("iceberg.jdbc_password", iceberg.jdbc_password, iceberg.jdbc_password_env,
                              iceberg.jdbc_password_file, iceberg.jdbc_password_file_key)
    if password is not None:
        secrets["jdbc.password"] = password
    credential = resolve_secret("iceberg.rest_credential", iceberg.rest_credential, iceberg.rest_credential_env,
                                iceberg.rest_credential_file, iceberg.rest_credential_file_key)
    if credential is not None:
        secrets["credential"] = credential
    for key, variable in iceberg.catalog_properties_env.items():
        secrets[key] = resolve_secret("iceberg.catalog_properties", None, variable, None) or ""
    for key, path in iceberg.catalog_properties_file.items():
        secrets[key] = resolve_secret("iceberg.catalog_properties", None, None, path) or ""
    both = set(iceberg.catalog_properties_env) & set(iceberg.catalog_properties_file)
    if both:
        raise ConfigError(f"iceberg.catalog_properties_env and _file both set {sorted(both)}: give each one way only")
    return secrets


def _java_reason(error: BaseException) -> str:
    """A Py4J error as its Java exception's one line (class: message), without the stack."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM is gone: fall back to the Python text
            pass
    return reason(error).split(" at ")[0]


PLUGIN = IcebergPlugin()
