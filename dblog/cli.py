"""The `dblog` command (click: subcommands, typed options and `--help` for free)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid

import click
import pymysql

from dblog.core.offsets import OffsetsError
from dblog.runtime.config import Config, ConfigError, load_config
from dblog.runtime.graceful_stop import GracefulStop
from dblog.runtime.log_format import HUMAN_FORMAT, JsonLogFormatter
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.base import SinkError

log = logging.getLogger("dblog.cli")


def _setup_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(HUMAN_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])
    if log_format == "json":
        logging.captureWarnings(True)  # Python warnings become JSON lines too, not raw text



def _load(path: str, secrets: bool = False) -> Config:
    """The configuration at `path`; with `secrets`, for a command that connects: every secret
    setting is resolved once, so an unset variable or unreadable file stops it before it starts."""
    try:
        config = load_config(path)
        if secrets:
            config.check_secrets()
        return config
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def _load_debezium(path: str, bootstrap_servers: str | None, worker_config: str | None) -> Config:
    from dblog.runtime.debezium_config import WARNING, load_debezium_config

    try:
        config, notes = load_debezium_config(path, bootstrap_servers, os.environ, worker_config)
        for note in notes:
            (log.warning if note.startswith(WARNING) else log.info)("%s: %s", path, note)
        config.check_secrets()
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    return config


def _BOOTSTRAP_SERVERS(command):  # noqa: N802 (an option decorator, as click's)
    command = click.option(
        "--worker-config", "worker_config", type=click.Path(dir_okay=False), default=None,
        help="With a Debezium connector's configuration: the Kafka Connect worker's (connect-distributed.properties), "
             "whose converters, producer.* settings and bootstrap.servers the connector inherits.")(command)
    return click.option(
        "--bootstrap-servers", "bootstrap_servers", metavar="HOST:PORT[,HOST:PORT]", default=None,
        help="With --debezium-config: the Kafka cluster the records go to, the Kafka Connect worker's "
             "bootstrap.servers (a connector's configuration does not name it; docs/debezium.md).")(command)


def _DEBEZIUM_OFFSETS(command):  # noqa: N802 (an option decorator, as click's)
    command = click.option(
        "--replace-offsets", is_flag=True,
        help="With --debezium-offsets: replace dblog's own offsets file if there is one (else refused).")(command)
    return click.option(
        "--debezium-offsets", "debezium_offsets", metavar="FILE|topic:NAME",
        help="Start where Debezium's MySQL connector stopped: its offsets from Debezium Server's or the embedded "
             "engine's offset file, or from a Kafka Connect offsets topic (topic:NAME, on kafka.bootstrap_servers); "
             "the connector whose topic.prefix is dblog's `name` (docs/debezium.md).")(command)


def _replace_only_with_debezium_offsets(debezium_offsets: str | None, replace_offsets: bool) -> None:
    if replace_offsets and debezium_offsets is None:
        raise click.UsageError("--replace-offsets goes with --debezium-offsets")


def _take_over(config: Config, debezium_offsets: str | None, replace_offsets: bool) -> None:
    if debezium_offsets is None:
        return
    from dblog.runtime.debezium_offsets import take_over

    try:
        take_over(config, debezium_offsets, replace_offsets)
    except OffsetsError as error:
        raise click.ClickException(str(error)) from None
    except pymysql.MySQLError as error:
        raise click.ClickException(f"the source database failed while checking Debezium's offsets: {error}") from None


def _only_with_debezium(config_path: str | None, bootstrap_servers: str | None, worker_config: str | None) -> None:
    for given, option in ((bootstrap_servers, "--bootstrap-servers"), (worker_config, "--worker-config")):
        if config_path and given:
            raise click.UsageError(f"{option} goes with --debezium-config; with --config set "
                                   "kafka.bootstrap_servers and sink.kafka.schemas in the TOML")


class _Commands(click.Group):
    """With --log-format json, an error that ends a command is a JSON log line too, so that
    every line on stderr parses."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.ClickException as error:
            if ctx.params.get("log_format") != "json":
                raise
            log.error("%s", error.format_message())
            raise click.exceptions.Exit(error.exit_code) from None


@click.group(cls=_Commands)
@click.version_option(package_name="dblog", message="dblog %(version)s")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.option("--log-format", default="text", show_default=True, type=click.Choice(["text", "json"]),
              help="text: one readable line per record; json: one JSON object per line (time, level, logger, "
                   "message, and the notification or progress fields as keys).")
def main(log_level: str, log_format: str) -> None:
    """dblog: stream MySQL/MariaDB changes, with lock-free incremental snapshots."""
    _setup_logging(log_level, log_format)


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="TOML configuration file (keys and defaults: docs/configuration.md).")
@click.option("--debezium-config", "debezium_path", type=click.Path(dir_okay=False),
              help="A Debezium MySQL connector's configuration (.properties, Kafka Connect's JSON, or Debezium "
                   "Server's application.properties) instead (docs/debezium.md).")
@_BOOTSTRAP_SERVERS
@_DEBEZIUM_OFFSETS
def run(config_path: str | None, debezium_path: str | None, bootstrap_servers: str | None,
        worker_config: str | None, debezium_offsets: str | None, replace_offsets: bool) -> None:
    """Stream changes (and run snapshots) until interrupted."""
    if (config_path is None) == (debezium_path is None):
        raise click.UsageError("give either --config FILE or --debezium-config FILE")
    _only_with_debezium(config_path, bootstrap_servers, worker_config)
    _replace_only_with_debezium_offsets(debezium_offsets, replace_offsets)
    config = (_load(config_path, secrets=True) if config_path
              else _load_debezium(debezium_path, bootstrap_servers, worker_config))
    _take_over(config, debezium_offsets, replace_offsets)
    from dblog.mysql.binlog import BinlogError
    from dblog.runtime.supervisor import Supervisor

    supervisor = Supervisor(config)
    endpoint = _serve_http(config, supervisor)
    graceful = GracefulStop(supervisor.stop, config.stop_timeout_seconds)
    graceful.install()
    try:
        supervisor.run()
    except (ConfigError, OffsetsError, SinkError, BinlogError) as error:
        raise click.ClickException(str(error)) from None
    except pymysql.MySQLError as error:
        raise click.ClickException(f"the source database failed: {error}") from None
    finally:
        graceful.finished()
        if endpoint is not None:
            endpoint.close()
    if supervisor.stopped:
        log.info("stopped cleanly: offsets committed")


def _serve_http(config: Config, supervisor):
    """The metrics and health endpoint, when `http.port` is set (docs/operations.md, "Metrics and health")."""
    if config.http.port is None:
        return None
    from dblog.runtime.http_endpoint import serve
    from dblog.runtime.metrics import Metrics

    metrics = Metrics.of_supervisor(supervisor, config.http.ready_max_lag_seconds)
    try:
        return serve(metrics, config.http.host, config.http.port)
    except OSError as error:
        raise click.ClickException(str(error)) from None


_MARKS = {"ok": ("✔", "green"), "fail": ("✗", "red"), "warn": ("!", "yellow"), "skip": ("-", None)}


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The TOML configuration `dblog run` will use.")
@click.option("--debezium-config", "debezium_path", type=click.Path(dir_okay=False),
              help="Or the Debezium connector configuration `dblog run --debezium-config` will use.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one line per check (✔ ✗ ! -) and the remedy under each failure; json: one object.")
@click.option("--no-spark", is_flag=True, help="Skip the Spark session and Iceberg catalog check (it takes 10 s or more).")
@click.option("--timeout", type=click.FloatRange(min=0.5), default=10.0, show_default=True,
              help="Seconds to wait for the Kafka brokers.")
@_BOOTSTRAP_SERVERS
def check(config_path: str | None, debezium_path: str | None, output_format: str, no_spark: bool,
          timeout: float, bootstrap_servers: str | None, worker_config: str | None) -> None:
    """Check a configuration before the first start: the connection to the source and its TLS,
    each grant dblog needs, the server settings, the committed position still in the binlog,
    the signal table, Kafka, Spark and the Iceberg catalog, the local paths. Exit code 1 on any ✗."""
    from dblog.runtime.preflight import CheckResult, run_checks

    def slow(message: str) -> None:
        if output_format == "text":
            click.echo(f"  … {message}", err=True)

    if (config_path is None) == (debezium_path is None):
        raise click.UsageError("give either --config FILE or --debezium-config FILE")
    _only_with_debezium(config_path, bootstrap_servers, worker_config)
    try:
        if config_path:
            config = load_config(config_path)
        else:
            from dblog.runtime.debezium_config import load_debezium_config

            config, notes = load_debezium_config(debezium_path, bootstrap_servers, os.environ, worker_config)
            for note in notes:
                log.info("%s: %s", debezium_path, note)
    except ConfigError as error:
        results = [CheckResult("configuration", "fail", str(error), "fix the setting it names "
                               "(every key: docs/configuration.md)")]
    else:
        results = run_checks(config, spark=not no_spark, timeout=timeout, on_slow=slow)
    seen = []
    for result in results:
        seen.append(result)
        if output_format == "text":
            mark, colour = _MARKS[result.status]
            click.echo(f"{click.style(mark, fg=colour, bold=True)} {result.check}: {result.detail}")
            if result.remedy and result.status in ("fail", "warn"):
                click.echo(f"    → {result.remedy}")
    failed = [result for result in seen if result.status == "fail"]
    if output_format == "json":
        click.echo(json.dumps({"ok": not failed, "checks": [result.to_json() for result in seen]}, indent=2,
                              ensure_ascii=False))
    else:
        counts = {status: sum(result.status == status for result in seen) for status in _MARKS}
        click.echo(", ".join(f"{counts[status]} {word}" for status, word in
                             (("ok", "passed"), ("fail", "failed"), ("warn", "warned"), ("skip", "skipped"))
                             if counts[status] or status == "fail"))
    sys.exit(1 if failed else 0)


@main.command("convert-debezium")
@click.argument("connector_config", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the TOML here (a new file) instead of to stdout.")
@click.option("--env-file", "env_files", type=click.Path(dir_okay=False), multiple=True,
              help="Debezium Server's settings as NAME=value lines (DEBEZIUM_SOURCE_DATABASE_HOSTNAME=…), as its "
                   "container takes them; over the file's, under the environment's.")
@click.option("--no-environment", is_flag=True,
              help="Do not read Debezium Server's settings from the environment (DEBEZIUM_*, QUARKUS_*).")
@_BOOTSTRAP_SERVERS
@_DEBEZIUM_OFFSETS
def convert_debezium(connector_config: str | None, output: str | None, env_files: tuple[str, ...],
                     no_environment: bool, bootstrap_servers: str | None, worker_config: str | None,
                     debezium_offsets: str | None, replace_offsets: bool) -> None:
    """Write dblog's TOML configuration for a Debezium MySQL connector's configuration (a
    connector's .properties or Kafka Connect JSON, or Debezium Server's application.properties
    and its DEBEZIUM_* / QUARKUS_* environment variables). With --debezium-offsets, also dblog's
    offsets file (its offsets.path) from the connector's offsets, checked against the source."""
    import tomli_w

    from dblog.runtime.debezium_config import convert, read_connector_config, read_debezium_settings, validated

    _replace_only_with_debezium_offsets(debezium_offsets, replace_offsets)
    origin = connector_config or "the environment"
    if connector_config is None and not env_files and no_environment:
        raise click.UsageError("give a connector configuration file, --env-file, or Debezium Server's environment")
    try:
        settings, notes = read_debezium_settings(connector_config, None if no_environment else os.environ, env_files)
        worker = read_connector_config(worker_config) if worker_config else None
        conversion = convert(settings, origin, bootstrap_servers, worker=worker)
        config = validated(conversion, origin)  # never write a file that `dblog run` would refuse
        if debezium_offsets is not None:
            config.check_secrets()
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    conversion.notes[:0] = notes
    for note in conversion.notes:
        log.info("%s: %s", origin, note)
    for warning in conversion.warnings:
        log.warning("%s: %s", origin, warning)
    connector_config = origin
    header = [f"# dblog configuration converted from {connector_config} by `dblog convert-debezium`.",
              *(f"# {note}" for note in conversion.notes), *(f"# WARNING: {line}" for line in conversion.warnings)]
    text = "\n".join(header) + "\n\n" + tomli_w.dumps(conversion.data)
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            with open(output, "x") as file:  # "x": an existing configuration is not overwritten
                file.write(text)
        except FileExistsError:
            raise click.ClickException(f"{output} exists; remove it or choose another --output") from None
        log.info("wrote %s", output)
    _take_over(config, debezium_offsets, replace_offsets)


@main.command()
@click.option("--rows", default=20_000, show_default=True, help="Rows loaded into shop.orders before the snapshot.")
@click.option("--writers", default=4, show_default=True, help="Concurrent writer threads during the snapshot.")
@click.option("--chunk-size", default=1024, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0), default=None,
              help="Writes per second per writer [default: 50 with iceberg, 200 with jsonl; 0: full speed].")
@click.option("--sink", type=click.Choice(["iceberg", "jsonl"]), default="iceberg", show_default=True,
              help="iceberg: MERGE into Iceberg tables through a local Spark session; jsonl: a JSON-lines file.")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Keep the demo's files (Iceberg warehouse or JSON-lines file, offsets) in this new directory.")
@click.pass_context
def demo(ctx: click.Context, rows: int, writers: int, chunk_size: int, rate: float | None, sink: str,
         keep: str | None) -> None:
    """Run everything on embedded defaults: private MariaDB, writers, a snapshot, a final check."""
    from dblog.demo.run import DemoError, run_demo
    from dblog.demo.localstack import MariaDBUnavailable

    if ctx.parent.get_parameter_source("log_level") is click.core.ParameterSource.DEFAULT:
        logging.getLogger().setLevel(logging.WARNING)  # the progress display says what INFO would

    try:
        ok = run_demo(rows=rows, writers=writers, chunk_size=chunk_size, keep=keep, sink=sink, rate=rate)
    except DemoError as error:
        raise click.ClickException(str(error)) from None
    except (MariaDBUnavailable, subprocess.CalledProcessError) as error:
        # The reason, and only the server's [ERROR] lines of its log tail (not 40 lines of notes).
        first, _, tail = str(error).partition("\n")
        server_errors = [line.strip() for line in tail.splitlines() if "[ERROR]" in line][-3:]
        reason = "\n".join([first.removesuffix("; error log tail:"), *server_errors])
        raise click.ClickException(f"the demo could not start its private MariaDB: {reason}") from None
    sys.exit(0 if ok else 1)


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the raw snapshot state as JSON.")
def status(config_path: str, as_json: bool) -> None:
    """Where every snapshot stands, from the committed offsets; with http.port set, the running
    engine's state too (waiting for its source, and since when)."""
    from dblog.runtime.status import ask_engine, describe

    config = _load(config_path)
    try:
        offsets = OffsetStore(config.offsets.path).load()
    except OffsetsError as error:
        raise click.ClickException(str(error)) from None
    if offsets is None:
        raise click.ClickException(f"no offsets at {config.offsets.path}: the engine has not run yet")
    if as_json:
        click.echo(json.dumps(offsets.to_json(definitions=False), indent=2))
    else:
        click.echo(describe(offsets))
        if config.http.port:  # (0: a free port the log names, unknown here)
            click.echo(ask_engine(config.http.host, config.http.port))


@main.group()
def signal() -> None:
    """Send a signal through the signal table or the Kafka signal topic."""


_config_option = click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
_via_option = click.option(
    "--via", type=click.Choice(["table", "kafka"]), default="table", show_default=True,
    help="table: INSERT into signals.table; kafka: a message on signals.kafka_topic keyed by the connector name.",
)


def _send(config_path: str, via: str, signal_type: str, data: dict) -> None:
    import pymysql

    from dblog.runtime.signal_client import send_signal
    from dblog.signals.kafka_channel import KafkaSignalChannelError

    config = _load(config_path, secrets=True)
    try:
        signal_id = send_signal(config, via, signal_type, data, str(uuid.uuid4()))
    except (ConfigError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    except (KafkaSignalChannelError, pymysql.err.MySQLError) as error:
        # The broker or the database is unreachable: one line, no traceback.
        reason = " ".join(str(error).split()) or type(error).__name__
        raise click.ClickException(f"{signal_type} was not sent via {via}: {reason}") from None
    click.echo(f"sent {signal_type} as signal {signal_id} via {via}")


def _conditions(values: tuple[str, ...]) -> list[dict]:
    conditions = []
    for value in values:
        table, sep, predicate = value.partition("=")
        if not sep or not table.strip() or not predicate.strip():
            raise click.BadParameter(f"{value!r}: write TABLE=PREDICATE, e.g. 'shop.orders=amount > 100'",
                                     param_hint="--condition")
        conditions.append({"data-collection": table.strip(), "filter": predicate.strip()})
    return conditions


@signal.command("execute-snapshot")
@_config_option
@_via_option
@click.option("--tables", "tables", multiple=True, required=True,
              help="Regular expression over db.table (repeat for several).")
@click.option("--condition", "conditions", multiple=True,
              help="TABLE=PREDICATE: snapshot only the rows of TABLE matching PREDICATE (repeatable).")
@click.option("--surrogate-key", default=None, help="Column to page by instead of the primary key.")
def execute_snapshot(config_path: str, via: str, tables: tuple[str, ...], conditions: tuple[str, ...],
                     surrogate_key: str | None) -> None:
    """Snapshot the tables matching --tables, while streaming goes on."""
    data: dict = {"data-collections": list(tables), "type": "incremental"}
    if conditions:
        data["additional-conditions"] = _conditions(conditions)
    if surrogate_key:
        data["surrogate-key"] = surrogate_key
    _send(config_path, via, "execute-snapshot", data)


@signal.command("stop")
@_config_option
@_via_option
@click.option("--tables", "tables", multiple=True, help="Only these tables (regexes); default: all.")
def stop_snapshot(config_path: str, via: str, tables: tuple[str, ...]) -> None:
    """Stop the running snapshot, or remove some tables from it."""
    data = {"data-collections": list(tables)} if tables else {}
    _send(config_path, via, "stop-snapshot", data)


@signal.command("pause")
@_config_option
@_via_option
def pause_snapshot(config_path: str, via: str) -> None:
    """Pause chunk reads (streaming goes on; the pause survives restarts)."""
    _send(config_path, via, "pause-snapshot", {})


@signal.command("resume")
@_config_option
@_via_option
def resume_snapshot(config_path: str, via: str) -> None:
    """Resume a paused snapshot from its last key."""
    _send(config_path, via, "resume-snapshot", {})


@signal.command("log")
@_config_option
@_via_option
@click.argument("message")
def log_signal(config_path: str, via: str, message: str) -> None:
    """Have the engine write MESSAGE to its log (checks that signals get through)."""
    _send(config_path, via, "log", {"message": message})


if __name__ == "__main__":
    main()
