"""A Debezium MySQL connector's configuration, turned into dblog's (`dblog run --debezium-config`,
`dblog convert-debezium`).

Every key of the connector's configuration is either mapped to a dblog key, ignored with a note
saying why (Kafka Connect plumbing that means nothing without Kafka Connect), or refused by name
with what to do instead. All refusals are reported together, so one run lists everything to fix.
docs/debezium.md has the table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dblog.mysql.schema import SYSTEM_SCHEMAS
from dblog.runtime import config_placeholders as placeholders
from dblog.runtime.config import Config, ConfigError, parse_config
from dblog.runtime.debezium_columns import convert_columns
from dblog.runtime.debezium_environment import read_env_file, server_settings
from dblog.runtime.debezium_key_answers import Ignored, Mapped, Refused, answer, at_default, debezium_default
from dblog.runtime.debezium_key_list import CONNECTOR_KEYS, DEBEZIUM_VERSION
from dblog.runtime.debezium_transforms import convert_transforms
from dblog.runtime.java_properties import PropertiesError, parse_properties
from dblog.runtime.watermark_modes import WATERMARK_MODES

CONNECTOR_CLASSES = ("io.debezium.connector.mysql.MySqlConnector", "io.debezium.connector.mariadb.MariaDbConnector")

# Keys mapped one to one: Debezium key -> (dblog key, type).
_DIRECT = {
    "database.hostname": ("source.host", str),
    "database.port": ("source.port", int),
    "database.user": ("source.user", str),
    "database.server.id": ("source.server_id", int),
    "topic.prefix": ("name", str),
    "incremental.snapshot.chunk.size": ("snapshot.chunk_size", int),
}

# snapshot.mode: Debezium's value -> dblog's snapshot.startup, or why there is none. The values are
# Debezium 3.6's (BinlogConnectorConfig.SnapshotMode): the snapshot-mode work (issue 39, item 3)
# turns refusals here into mappings.
_SNAPSHOT_MODES = {
    "initial": "initial",
    "no_data": "never",
}
_REMOVED_IN_3_3 = ("removed in Debezium 3.3: Debezium 3.6 does not start with it (its SnapshotMode has no such "
                   "value); ")
_SNAPSHOT_MODES_REFUSED = {
    "never": _REMOVED_IN_3_3 + "use no_data to stream from the present position, or initial to read the tables "
                               "first",
    "schema_only": _REMOVED_IN_3_3 + "no_data is its new name (stream from the present position): use no_data",
    "schema_only_recovery": _REMOVED_IN_3_3 + "recovery is its new name, which dblog does not run (it keeps its "
                                              "schema history with its offsets): use initial or no_data",
    "initial_only": "dblog streams after the snapshot; use initial and stop dblog when COMPLETED is logged",
    "when_needed": "dblog does not snapshot again by itself when its position is purged (it stops saying so); "
                   "use initial",
    "always": "dblog snapshots only on its first start; use initial, and an execute-snapshot signal to read again",
    "recovery": "dblog keeps no schema history topic to recover (its history is saved with its offsets); use "
                "initial or no_data",
    "configuration_based": "dblog does not run it yet; use initial or no_data",
    "custom": "a Java class loaded into Debezium; use initial or no_data",
}
_SIGNAL_CHANNELS = {"source", "kafka"}


# What dblog's validation errors call a key, said in Debezium's words (dotted keys only: `name`
# is also a word of the messages).
_DEBEZIUM_NAMES = {
    **{dblog_key: key for key, (dblog_key, _) in _DIRECT.items() if "." in dblog_key},
    "source.password": "database.password",
    "source.password_env": "database.password",
    "source.password_file": "database.password",
    "source.password_file_key": "database.password",
    "source.include": "database.include.list / table.include.list",
    "source.exclude": "database.exclude.list / table.exclude.list",
    "signals.table": "signal.data.collection",
    "signals.kafka_topic": "signal.kafka.topic",
    "kafka.bootstrap_servers": "signal.kafka.bootstrap.servers",
    "kafka.security_protocol": "signal.consumer.security.protocol",
    "kafka.sasl_mechanism": "signal.consumer.sasl.mechanism",
    "kafka.sasl_username": "signal.consumer.sasl.jaas.config",
    "kafka.sasl_password": "signal.consumer.sasl.jaas.config",
    "kafka.ssl_ca": "signal.consumer.ssl.truststore.location",
    "snapshot.startup": "snapshot.mode",
    "snapshot.watermarks": "incremental.snapshot.watermarking.strategy",
    "source.tls.mode": "database.ssl.mode",
    "sink.kafka.partitions": "topic.creation.default.partitions",
    "sink.kafka.replication_factor": "topic.creation.default.replication.factor",
    "sink.kafka.topic": "topic.delimiter",
    "sink.kafka.skipped_operations": "skipped.operations",
    "sink.kafka.message_key": "message.key.columns",
    "columns.include": "column.include.list",
    "columns.exclude": "column.exclude.list",
    "sink.kafka.schema_changes": "include.schema.changes",
    "sink.kafka.extended_headers": "extended.headers.enabled",
    "sink.kafka.transaction_metadata": "provide.transaction.metadata",
    "sink.kafka.transaction_topic": "topic.transaction",
    "sink.kafka.heartbeat_interval_ms": "heartbeat.interval.ms",
    "sink.kafka.heartbeat_topic": "topic.heartbeat.prefix",
    "sink.kafka.heartbeat_action_query": "heartbeat.action.query",
    "sink.kafka.linger_ms": "the producer's linger.ms",
    "sink.kafka.compression": "the producer's compression.type",
    "sink.kafka.max_request_size": "the producer's max.request.size",
    "sink.kafka.max_buffer_bytes": "the producer's buffer.memory",
    "sink.kafka.delivery_timeout_seconds": "the producer's delivery.timeout.ms",
    "sink.kafka.transforms": "transforms",
}


@dataclass
class Conversion:
    data: dict = field(default_factory=dict)  # dblog's configuration, as its TOML file holds it
    notes: list[str] = field(default_factory=list)  # what was ignored or decided, and why
    refused: list[str] = field(default_factory=list)  # "key: why and what to do"
    server: bool = False  # a Debezium Server application.properties
    worker: bool = False  # the Kafka Connect worker's configuration was given
    warnings: list[str] = field(default_factory=list)  # what was assumed that may be wrong
    renamed: dict[str, str] = field(default_factory=dict)  # a connector key -> as the file wrote it
    origins: dict[str, str] = field(default_factory=dict)  # a dblog key set by set_once -> from which key

    def set(self, dblog_key: str, value) -> None:
        section = self.data
        *parents, name = dblog_key.split(".")
        for part in parents:
            section = section.setdefault(part, {})
        section[name] = value

    def get(self, dblog_key: str):
        section = self.data
        for part in dblog_key.split("."):
            if not isinstance(section, dict) or part not in section:
                return None
            section = section[part]
        return section

    def set_once(self, dblog_key: str, value, debezium_key: str) -> None:
        """`[kafka]` serves every Kafka client of dblog: two Debezium keys that set one of its
        settings must agree (the refusal names both keys, never the values: they may be secrets)."""
        current = self.get(dblog_key)
        if current is None:
            self.set(dblog_key, value)
            self.origins[dblog_key] = debezium_key
        elif current != value:
            self.refused.append(f"{debezium_key}: differs from {self.origins.get(dblog_key, 'the command line')} "
                                f"(both set dblog's {dblog_key}); dblog's Kafka clients (the sink, signals, "
                                "notifications) share one cluster and one [kafka] section: make them agree")


def read_connector_config(path: str | Path) -> dict[str, str]:
    """The connector's settings from a `.properties` file, or from Kafka Connect's JSON (the body
    of `POST /connectors`, `{"name", "config": {…}}`, or the `config` object alone)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # what Properties.load(InputStream) assumes
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path} is not valid JSON: {error}") from None
        settings = document.get("config", document) if isinstance(document, dict) else None
        if not isinstance(settings, dict):
            raise ConfigError(f"{path}: expected a JSON object of connector settings")
        # Kafka Connect takes JSON numbers and booleans for its string settings: the same text.
        return {key: value if isinstance(value, str) else json.dumps(value) for key, value in settings.items()}
    try:
        return parse_properties(text)
    except PropertiesError as error:
        raise ConfigError(f"{path}: {error}") from None


def convert(settings: dict[str, str], origin: str = "the Debezium configuration",
            bootstrap_servers: str | None = None, worker: dict[str, str] | None = None) -> Conversion:
    """dblog's configuration for a Debezium MySQL connector's settings (a connector's, or Debezium
    Server's application.properties). The records go to Kafka, as Debezium's: `bootstrap_servers`
    is the Kafka Connect worker's cluster (`--bootstrap-servers`), which a connector's settings do
    not name. Raises ConfigError naming every key that cannot be converted."""
    conversion = Conversion()
    pending = dict(settings)
    worker_servers = _from_worker(worker, pending, conversion) if worker is not None else None
    _placeholders(pending, conversion)  # in every value but the secrets' (they become references)
    pending = _debezium_server(pending, conversion)  # each step takes its keys out; the rest is ignored or refused
    _connector_class(pending, conversion)
    _kafka_cluster(pending, conversion, bootstrap_servers or worker_servers)
    if worker_servers and not bootstrap_servers:  # errors name where the cluster came from
        conversion.origins["kafka.bootstrap_servers"] = "the worker's bootstrap.servers"
    for key, (dblog_key, kind) in _DIRECT.items():
        if key in pending:
            value = pending.pop(key).strip()
            if kind is int and not re.fullmatch(r"[+-]?\d+", value):
                conversion.refused.append(f"{key}: {value!r} is not a whole number")
                continue
            conversion.set(dblog_key, int(value) if kind is int else value)
    _secrets(pending, conversion)
    _table_filters(pending, conversion)
    convert_columns(pending, conversion, _regexes)
    _signals(pending, conversion)
    _notifications(pending, conversion)
    _snapshot(pending, conversion)
    _switches(pending, conversion)
    _value_modes(pending, conversion)
    _tls(pending, conversion)
    _record_format(pending, conversion)
    _transactions_and_heartbeats(pending, conversion)
    _topics(pending, conversion)
    _transforms(pending, conversion)
    _http_port(pending, conversion)
    _answer_the_rest(pending, conversion)
    if conversion.server or conversion.renamed:  # name the keys as the files have them
        renamed = {**({key: f"debezium.source.{key}" for key, _, _ in CONNECTOR_KEYS if "." in key}
                      if conversion.server else {}), **conversion.renamed}
        conversion.notes = [_as_written(line, renamed) for line in conversion.notes]
        conversion.refused = [_as_written(line, renamed) for line in conversion.refused]
    order = ("name", "source", "snapshot", "signals", "kafka", "sink", "columns")  # the TOML's sections, in reading order
    conversion.data = {key: conversion.data[key] for key in sorted(
        conversion.data, key=lambda key: order.index(key) if key in order else len(order))}
    if conversion.refused:
        raise ConfigError(f"{origin}: settings dblog cannot honour (docs/debezium.md):\n  "
                          + "\n  ".join(sorted(conversion.refused)))
    return conversion


# A Kafka Connect worker's settings that a connector inherits: its converters, and its producers'
# (`producer.*`, which the connector's `producer.override.*` override).
_WORKER_CONVERTERS = ("key.converter", "value.converter", "header.converter")


def _from_worker(worker: dict[str, str], pending: dict[str, str], conversion: Conversion) -> str | None:
    """The Kafka Connect worker's configuration (connect-distributed.properties) under the
    connector's: its converters, its producers' settings, its cluster (bootstrap.servers, unless
    --bootstrap-servers gives one, returned). The worker's other settings configure Kafka Connect
    itself."""
    conversion.worker = True
    taken = []
    for key, value in worker.items():
        if key.startswith(_WORKER_CONVERTERS) and key not in pending:
            pending[key] = value
            taken.append(key)
        elif key.startswith("producer.") and "producer.override." + key[9:] not in pending:
            pending["producer.override." + key[9:]] = value
            conversion.renamed["producer.override." + key[9:]] = f"{key} (the worker's)"
            taken.append(key)
    if taken:
        conversion.notes.append(f"from the Kafka Connect worker's configuration: {', '.join(sorted(taken))}")
    return worker.get("bootstrap.servers", "").strip() or None


def _answer_the_rest(pending: dict[str, str], conversion: Conversion) -> None:
    """The keys no step took, answered by dblog.runtime.debezium_key_answers: ignored with the
    reason, or refused with the reason and the remedy unless at Debezium's default."""
    for key in sorted(pending):
        value = pending[key].strip()
        found = answer(key)
        if isinstance(found, Ignored):
            conversion.notes.append(f"{key} ignored: {found.reason}")
        elif isinstance(found, Refused) and (at_default(key, value) or (not value and debezium_default(key) is None)):
            conversion.notes.append(f"{key} = {value!r} ignored: Debezium's default, what dblog does")
        elif isinstance(found, Refused):
            conversion.refused.append(f"{key}: {found.reason}; {found.remedy}")
        elif isinstance(found, Mapped):  # a step reads it, and left this one
            conversion.refused.append(f"{key}: {value!r} is not a value dblog can map to {found.to}; remove it")
        else:
            conversion.refused.append(f"{key}: not a key of Debezium {DEBEZIUM_VERSION}'s MySQL connector, Kafka "
                                      "Connect or Debezium Server that dblog knows (a misspelling?); remove it")


def _as_written(line: str, renamed: dict[str, str]) -> str:
    """`line` with each connector key it names as the file wrote it (Debezium Server's
    `debezium.source.…`, `debezium.transforms…`), the leading one and those in its reason."""
    def rename(match: re.Match) -> str:  # in the reason, dotted names only ("predicates" is also a word)
        name = match.group()
        return renamed.get(name, name) if match.start() == 0 or "." in name else name
    return re.sub(r"(?<![\w.\-])[\w.\-]*\w", rename, line)


def load_debezium_config(path: str | Path, bootstrap_servers: str | None = None,
                         environ: Mapping[str, str] | None = None,
                         worker_config: str | Path | None = None) -> tuple[Config, list[str]]:
    """The validated Config of a Debezium connector file (with Debezium Server's environment
    variables from `environ`), and the notes on what was ignored or assumed."""
    settings, notes = read_debezium_settings(path, environ)
    worker = read_connector_config(worker_config) if worker_config else None
    conversion = convert(settings, str(path), bootstrap_servers, worker=worker)
    return validated(conversion, str(path)), notes + conversion.notes + [f"{WARNING}{line}" for line in
                                                                        conversion.warnings]


WARNING = "warning: "  # the notes of load_debezium_config that the command logs as warnings


def read_debezium_settings(path: str | Path | None, environ: Mapping[str, str] | None = None,
                           env_files: tuple[str | Path, ...] = ()) -> tuple[dict[str, str], list[str]]:
    """The settings of a connector file (or none), with Debezium Server's settings from env files
    and then from `environ` over them (dblog.runtime.debezium_environment), as Debezium Server
    reads them. The process environment counts only for a Debezium Server file (or no file): a
    Kafka Connect connector's configuration is never read from it. Notes name each variable
    taken, never its value."""
    settings = read_connector_config(path) if path is not None else {}
    server_file = path is None or any(key.startswith("debezium.") for key in settings)
    sources = [(str(file), read_env_file(file)) for file in env_files]
    if environ is not None and server_file:
        sources.append(("the environment", dict(environ)))
    notes = []
    for where, variables in sources:
        for key, (value, name) in server_settings(variables).items():
            if key == "debezium.source.database.password" and where == "the environment":
                value = f"${{env:{name}}}"  # read when dblog connects: the converted file holds no password
            settings[key] = value
            notes.append(f"{key} from {name} ({where})")
    return settings, notes


def validated(conversion: Conversion, origin: str) -> Config:
    """parse_config of the converted data; its errors name the Debezium key beside dblog's."""
    if conversion.get("sink.type") == "kafka" and not conversion.get("kafka.bootstrap_servers"):
        raise ConfigError(
            f"{origin}: the records go to Kafka, as Debezium's, and the configuration does not name the cluster "
            "(a connector's configuration leaves it to the Kafka Connect worker's bootstrap.servers): give it with "
            "--bootstrap-servers HOST:PORT[,HOST:PORT]")
    try:
        return parse_config(conversion.data, origin=origin)
    except ConfigError as error:
        message = str(error)
        for dblog_key, debezium_key in sorted(_DEBEZIUM_NAMES.items(), key=lambda item: -len(item[0])):
            if conversion.server:
                debezium_key = _server_name(dblog_key, debezium_key)
            message = re.sub(rf"(?<![\w.]){re.escape(dblog_key)}(?![\w])", f"{debezium_key} (dblog's {dblog_key})",
                             message)
        raise ConfigError(message) from None


def _server_name(dblog_key: str, debezium_key: str) -> str:
    """What Debezium Server's application.properties calls the connector key(s) `debezium_key`
    (dblog's `dblog_key`): its source's under `debezium.source.`, its producer's under
    `debezium.sink.kafka.producer.`."""
    if dblog_key == "kafka.bootstrap_servers":  # the records' cluster: the producer's
        return "debezium.sink.kafka.producer.bootstrap.servers"
    if debezium_key.startswith("the producer's "):
        return "debezium.sink.kafka.producer." + debezium_key.removeprefix("the producer's ")
    if debezium_key.startswith("topic.creation."):  # Kafka Connect's: Debezium Server has none
        return f"{debezium_key} (Kafka Connect's; Debezium Server leaves topic creation to the broker)"
    if debezium_key.startswith("signal.consumer."):
        return f"debezium.sink.kafka.producer.{debezium_key.removeprefix('signal.consumer.')} / debezium.source.{debezium_key}"
    if debezium_key == "transforms":
        return "debezium.transforms"
    return " / ".join(f"debezium.source.{name}" for name in debezium_key.split(" / "))


# --- the groups of keys ---------------------------------------------------------------------


def _debezium_server(settings: dict[str, str], conversion: Conversion) -> dict[str, str]:
    """The connector's settings, taken from under `debezium.source.` when the file is Debezium
    Server's application.properties (`debezium.transforms`/`predicates` are Kafka Connect's);
    `debezium.sink.*` and `debezium.format.*` stay as they are."""
    if not any(key.startswith(("debezium.source.", "debezium.sink.")) for key in settings):
        return dict(settings)
    conversion.server = True
    connector = {}
    for key, value in settings.items():
        if key.startswith(("debezium.sink.", "debezium.format.")):
            connector[key] = value
        elif key.startswith("debezium.source.") or key.startswith(("debezium.transforms", "debezium.predicates")):
            name = key.removeprefix("debezium.source.") if key.startswith("debezium.source.") else key[9:]
            connector[name] = value
            conversion.renamed[name] = key
        else:  # Debezium Server's own (debezium.api.*, quarkus.*): answered by debezium_key_answers
            connector[key] = value
    return connector


# --- where the records go: Kafka ------------------------------------------------------------


def _servers(value: str) -> frozenset[str]:
    return frozenset(part.strip().lower() for part in value.split(",") if part.strip())


def _kafka_cluster(pending: dict[str, str], conversion: Conversion, bootstrap_servers: str | None) -> None:
    """The sink is Kafka, as Debezium's. Its cluster: `--bootstrap-servers`, else Debezium Server's
    producer's bootstrap.servers, else (Kafka Connect) the connector's producer override, its schema
    history's cluster or its signal topic's, with a note. The producer's security settings become
    `[kafka]`, its acks, linger and sizes `[sink.kafka]`."""
    conversion.set("sink.type", "kafka")
    producer = "debezium.sink.kafka.producer." if conversion.server else "producer.override."
    if conversion.server:
        kind = pending.pop("debezium.sink.type", None)
        if kind is None:
            conversion.refused.append("debezium.sink.type: missing (Debezium Server needs it); dblog writes to Kafka: "
                                      "set debezium.sink.type=kafka")
        elif kind.strip().lower() != "kafka":
            conversion.refused.append(
                f"debezium.sink.type: {kind.strip()!r}: dblog writes to Kafka (Debezium's records), or to Iceberg "
                "tables or JSON lines with its own TOML configuration; use kafka")
            for key in [key for key in pending if key.startswith(f"debezium.sink.{kind.strip().lower()}.")]:
                pending.pop(key)
                conversion.notes.append(f"{key} ignored: goes with debezium.sink.type = {kind.strip()}")
        delivery = pending.pop("debezium.sink.kafka.wait.message.delivery.timeout.ms", None)
        if delivery is not None:
            conversion.notes.append("debezium.sink.kafka.wait.message.delivery.timeout.ms ignored: dblog waits for "
                                    "every record's acknowledgement before it commits its offsets, up to "
                                    "sink.kafka.delivery_timeout_seconds (the producer's delivery.timeout.ms)")
    history = "schema.history.internal.kafka.bootstrap.servers"
    candidates = [producer + "bootstrap.servers"]
    if not conversion.server:
        candidates += [history, "signal.kafka.bootstrap.servers"]
    found = next(((key, pending[key].strip()) for key in candidates if pending.get(key, "").strip()), None)
    if bootstrap_servers:
        servers, origin = bootstrap_servers.strip(), "--bootstrap-servers"
    elif found:
        (origin, servers) = found
        if not conversion.server and origin != producer + "bootstrap.servers":
            conversion.notes.append(
                f"kafka.bootstrap_servers from {origin}: a connector's configuration does not name the Kafka Connect "
                "worker's cluster, where Debezium's records go; this one is taken for it (--bootstrap-servers to "
                "give the worker's)")
    else:
        servers = origin = None
    if producer + "bootstrap.servers" in pending:
        given = pending.pop(producer + "bootstrap.servers").strip()
        if servers and _servers(given) != _servers(servers):
            conversion.notes.append(f"{producer}bootstrap.servers ignored: --bootstrap-servers replaces it")
    if servers:
        conversion.set("kafka.bootstrap_servers", servers)
        conversion.origins["kafka.bootstrap_servers"] = origin
    _kafka_security(pending, conversion, producer)
    # The schema history's clients use the cluster's credentials: dblog takes them when it writes there too.
    if servers and not conversion.server and _servers(pending.get(history, "")) == _servers(servers):
        pending.pop(history)
        _kafka_security(pending, conversion, "schema.history.internal.producer.")
    _kafka_security(pending, conversion, _CONSUMER)
    _producer_settings(pending, conversion, producer)


_ACKS = {"all": "all", "-1": "all", "1": 1}
_COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")  # Kafka's compression.type values
# The producer's settings that change how, not what, it writes: dblog's producer keeps its own.
_PRODUCER_IGNORED = ("key.serializer", "value.serializer", "client.id", "batch.size",
                     "retries", "enable.idempotence", "max.in.flight.requests.per.connection",
                     "request.timeout.ms", "retry.backoff.ms", "max.block.ms", "metadata.max.age.ms",
                     "connections.max.idle.ms", "send.buffer.bytes", "receive.buffer.bytes")


def _producer_settings(pending: dict[str, str], conversion: Conversion, prefix: str) -> None:
    acks = pending.pop(prefix + "acks", None)
    if acks is not None:
        if acks.strip().lower() in _ACKS:
            conversion.set("sink.kafka.acks", _ACKS[acks.strip().lower()])
        else:
            conversion.refused.append(f"{prefix}acks: {acks.strip()!r}: dblog commits its offsets only once Kafka "
                                      "has acknowledged the records; use all or 1")
    compression = pending.pop(prefix + "compression.type", None)
    if compression is not None:
        if compression.strip().lower() in _COMPRESSIONS:
            conversion.set("sink.kafka.compression", compression.strip().lower())
        else:
            conversion.refused.append(f"{prefix}compression.type: {compression.strip()!r} is not a codec dblog's "
                                      f"producer has; use one of {', '.join(_COMPRESSIONS)}")
    for name, dblog_key, scale in (("linger.ms", "sink.kafka.linger_ms", None),
                                   ("max.request.size", "sink.kafka.max_request_size", None),
                                   ("buffer.memory", "sink.kafka.max_buffer_bytes", None),
                                   ("delivery.timeout.ms", "sink.kafka.delivery_timeout_seconds", 1000)):
        value = pending.pop(prefix + name, None)
        if value is None:
            continue
        if not re.fullmatch(r"\d+", value.strip()):
            conversion.refused.append(f"{prefix}{name}: {value.strip()!r} is not a whole number")
            continue
        conversion.set(dblog_key, int(value) / scale if scale else int(value))
    for name in _PRODUCER_IGNORED:
        if prefix + name in pending:
            pending.pop(prefix + name)
            conversion.notes.append(f"{prefix}{name} ignored: dblog's producer keeps its own (idempotent, "
                                    "one request in flight per broker); the records are the same")


def _connector_class(pending: dict[str, str], conversion: Conversion) -> None:
    connector = pending.pop("connector.class", None)
    if connector is not None and connector.strip() not in CONNECTOR_CLASSES:
        conversion.refused.append(
            f"connector.class: {connector.strip()!r} is not Debezium's MySQL or MariaDB connector; "
            "dblog reads MySQL and MariaDB only"
        )


# Debezium keys holding secrets, and dblog's setting for each (a secret setting of
# dblog.runtime.secrets). Their placeholders become references read when dblog connects.
_SECRETS = {
    "database.password": "source.password",
}
# Other keys that look like they hold a secret: their placeholders are never resolved into the
# converted configuration (such a key is refused, or mapped by its own step, by name only).
_SECRET_LOOKING = re.compile(r"password|passwd|secret|passphrase|credential|token|jaas|sasl", re.IGNORECASE)


def _placeholders(pending: dict[str, str], conversion: Conversion) -> None:
    """`${…}` placeholders (dblog.runtime.config_placeholders) in non-secret values are resolved
    now; secret keys keep theirs for _secrets."""
    for key, value in list(pending.items()):
        if key in _SECRETS or _SECRET_LOOKING.search(key):
            continue
        try:
            pending[key] = placeholders.resolve(value)
        except placeholders.PlaceholderError as error:
            del pending[key]
            conversion.refused.append(f"{key}: {error}")


def _secrets(pending: dict[str, str], conversion: Conversion) -> None:
    """A secret as it is (not trimmed): written literally, with a note; or one placeholder:
    dblog's `_env` / `_file` (+ `_file_key`) settings, so that the converted configuration does
    not hold the secret and dblog reads it when it connects."""
    for key, where in _SECRETS.items():
        if key not in pending:
            continue
        value = pending.pop(key)
        try:
            reference = placeholders.secret_reference(value, where)
        except placeholders.PlaceholderError as error:
            conversion.refused.append(f"{key}: {error.reason}")  # the value itself is never quoted
            continue
        if reference is None:
            conversion.set(where, value)
            if value:
                conversion.notes.append(f"{key} is written into the configuration as it is: keep it out with "
                                        "${env:NAME}, ${NAME} or ${file:PATH:KEY} (docs/configuration.md, Secrets)")
            continue
        settings, notes = reference
        section = where.rpartition(".")[0]
        for name, setting in settings.items():
            conversion.set(f"{section}.{name}", setting)
        conversion.notes += [f"{key}: {note}" for note in notes]


_CONSUMER = "signal.consumer."
_JAAS_MODULES = {"org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
                 "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM"}


def _secret(key: str, value: str, dblog_key: str, conversion: Conversion) -> None:
    """A secret as `dblog_key`, or `${env:NAME}` / `${NAME}` as `dblog_key`_env (the converted
    file then holds no secret that came as a placeholder)."""
    env = re.fullmatch(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
    if env:
        conversion.set_once(f"{dblog_key}_env", env.group(1), key)
    elif "${" in value:
        conversion.refused.append(f"{key}: a Kafka Connect config provider other than env; put the secret in an "
                                  "environment variable and write ${env:NAME}")
    else:
        conversion.set_once(dblog_key, value, key)


def _kafka_security(pending: dict[str, str], conversion: Conversion, prefix: str) -> None:
    """A Kafka client's security settings (`prefix` + Kafka's client properties: the signal
    consumer's, the producer's) → `[kafka]`, which dblog applies to every Kafka client it has."""
    def take(name: str) -> str | None:
        value = pending.pop(prefix + name, None)
        return value.strip() if value is not None else None

    def put(dblog_key: str, value, name: str) -> None:
        conversion.set_once(dblog_key, value, prefix + name)

    protocol = take("security.protocol")
    if protocol is not None:
        put("kafka.security_protocol", protocol.upper(), "security.protocol")
        conversion.notes.append(f"{prefix}security.protocol, sasl.*, ssl.*: dblog uses them for every Kafka "
                                "client (the sink, the signal topic, notifications), as [kafka]")
    mechanism = take("sasl.mechanism")
    if mechanism is not None:
        put("kafka.sasl_mechanism", mechanism.upper(), "sasl.mechanism")
    jaas = pending.pop(prefix + "sasl.jaas.config", None)
    if jaas is not None:
        module = re.match(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", jaas)
        options = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
        kind = _JAAS_MODULES.get(module.group(1)) if module else None
        if kind is None or "username" not in options or "password" not in options:
            conversion.refused.append(
                f"{prefix}sasl.jaas.config: dblog reads PlainLoginModule or ScramLoginModule with username=\"…\" "
                "password=\"…\"; set kafka.sasl_username and kafka.sasl_password (or _env / _file) instead")
        else:
            put("kafka.sasl_username", options["username"], "sasl.jaas.config")
            _secret(f"{prefix}sasl.jaas.config", options["password"].replace('\\"', '"'), "kafka.sasl_password",
                    conversion)
            if mechanism is None and kind == "PLAIN":
                put("kafka.sasl_mechanism", "PLAIN", "sasl.jaas.config")
    algorithm = take("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        put("kafka.ssl_check_hostname", algorithm.lower() == "https", "ssl.endpoint.identification.algorithm")
    for store, (location_key, what) in {"truststore": ("kafka.ssl_ca", "CA certificates"),
                                        "keystore": ("kafka.ssl_cert", "client certificate and key")}.items():
        kind, location = take(f"ssl.{store}.type"), take(f"ssl.{store}.location")
        inline = take(f"ssl.{store}.certificates") or take(f"ssl.{store}.key")
        password = take(f"ssl.{store}.password")
        if inline:
            conversion.refused.append(f"{prefix}ssl.{store}.certificates / key: PEM text inline; write it to a "
                                      f"file and set {location_key}")
        if location is None:
            continue
        if (kind or "JKS").upper() != "PEM":
            conversion.refused.append(
                f"{prefix}ssl.{store}.location: a {(kind or 'JKS').upper()} store; dblog reads PEM files: export "
                f"the {what} (keytool -exportcert -rfc, or openssl pkcs12 -nodes) and set {location_key}"
                + (" and kafka.ssl_key" if store == "keystore" else ""))
            continue
        put(location_key, location, f"ssl.{store}.location")
        if store == "keystore":  # Kafka's PEM keystore: the key and its certificate chain in one file
            put("kafka.ssl_key", location, f"ssl.{store}.location")
            if password:
                _secret(f"{prefix}ssl.keystore.password", password, "kafka.ssl_key_password", conversion)
    key_password = take("ssl.key.password")
    if key_password:
        _secret(f"{prefix}ssl.key.password", key_password, "kafka.ssl_key_password", conversion)


def _regexes(value: str | None) -> list[str]:
    """A comma-separated list of regexes as Debezium splits it: `\\,` is a comma inside one,
    each is trimmed, empty ones are dropped."""
    if value is None:
        return []
    parts, current, index = [], [], 0
    while index < len(value):
        if value[index] == "\\" and index + 1 < len(value):
            current.append(value[index:index + 2])
            index += 2
        elif value[index] == ",":
            parts.append("".join(current))
            current = []
            index += 1
        else:
            current.append(value[index])
            index += 1
    parts.append("".join(current))
    return [part.strip().replace("\\,", ",") for part in parts if part.strip()]


def _table_filters(pending: dict[str, str], conversion: Conversion) -> None:
    """Debezium matches database names and `db.table` names with whole-string, case-insensitive
    regexes; a table is captured when its database passes the database filter and it passes the
    table filter. dblog's patterns match whole `db.table` names, so each Debezium regex R becomes
    `(?i:R)` (over `db.table`), and a database regex D becomes `(?i:D)\\..+` (its tables). With
    both include lists, each table regex is guarded by a lookahead on the database part."""
    lists = {key: _regexes(pending.pop(key, None)) for key in (
        "database.include.list", "database.exclude.list", "table.include.list", "table.exclude.list")}
    for kind in ("database", "table"):
        if lists[f"{kind}.include.list"] and lists[f"{kind}.exclude.list"]:
            conversion.refused.append(f"{kind}.include.list and {kind}.exclude.list: Debezium takes one of them, "
                                      "not both; keep one")
    databases = lists["database.include.list"]
    include = []
    if lists["table.include.list"]:
        guard = "(?=(?:" + "|".join(f"(?i:{d})" for d in databases) + r")\.)" if databases else ""
        include = [f"{guard}(?i:{t})" for t in lists["table.include.list"]]
    elif databases:
        include = [rf"(?i:{d})\..+" for d in databases]
    exclude = [rf"(?i:{d})\..+" for d in lists["database.exclude.list"]]
    exclude += [f"(?i:{t})" for t in lists["table.exclude.list"]]
    if _boolean(pending, "table.ignore.builtin", conversion, default=True):
        # Debezium's default, written out (dblog never captures the system schemas anyway).
        exclude.append("(?i:" + "|".join(SYSTEM_SCHEMAS) + r")\..+")
    else:
        conversion.notes.append("table.ignore.builtin = false: dblog never captures the system databases ("
                                + ", ".join(SYSTEM_SCHEMAS) + "): rows of mysql.user and mysql.global_priv hold "
                                "password hashes (docs/operations.md, Security)")
    if include:
        conversion.set("source.include", include)
    if exclude:
        conversion.set("source.exclude", exclude)


def _signals(pending: dict[str, str], conversion: Conversion) -> None:
    """Debezium reads signals on the channels of signal.enabled.channels (default: source, the
    signal table); dblog reads the table whenever it has one, and Kafka when it is enabled."""
    channels = {c.strip().lower() for c in pending.pop("signal.enabled.channels", "source").split(",") if c.strip()}
    unsupported = sorted(channels - _SIGNAL_CHANNELS)
    if unsupported:
        conversion.refused.append(f"signal.enabled.channels: {', '.join(unsupported)}: dblog reads signals from "
                                  "the signal table (source) and Kafka (kafka) only; `dblog signal` sends either")
    table = pending.pop("signal.data.collection", "").strip()
    if table:
        conversion.set("signals.table", table)
        if "source" not in channels:
            conversion.notes.append("signal.data.collection: dblog also acts on signals inserted into the table, "
                                    "although signal.enabled.channels leaves out source")
    topic = pending.pop("signal.kafka.topic", "").strip()
    servers = pending.pop("signal.kafka.bootstrap.servers", "").strip()
    if "kafka" in channels:
        name = conversion.data.get("name", Config().name)
        conversion.set("signals.kafka_topic", topic or f"{name}-signal")  # Debezium's default topic
        known = conversion.get("kafka.bootstrap_servers")
        if servers and known and _servers(servers) != _servers(known):
            origin = conversion.origins.get("kafka.bootstrap_servers")
            conversion.refused.append(
                f"signal.kafka.bootstrap.servers: another cluster than the records' ({origin}); dblog's Kafka clients "
                "share one cluster: put the signal topic on the cluster the records go to")
        elif servers and not known:
            conversion.set("kafka.bootstrap_servers", servers)
    elif topic or servers:
        conversion.notes.append("signal.kafka.topic and signal.kafka.bootstrap.servers ignored: "
                                "signal.enabled.channels does not enable kafka (Debezium ignores them too)")


def _notifications(pending: dict[str, str], conversion: Conversion) -> None:
    """notification.enabled.channels: dblog logs every notification (Debezium's `log` channel)
    and, with notifications.kafka_topic, publishes it there in Debezium's format (its `sink`
    channel to notification.sink.topic.name)."""
    channels = {c.strip().lower() for c in pending.pop("notification.enabled.channels", "").split(",") if c.strip()}
    topic = pending.pop("notification.sink.topic.name", "").strip()
    if "sink" in channels:
        if topic:
            conversion.set("notifications.kafka_topic", topic)
        else:
            conversion.refused.append("notification.enabled.channels: sink without notification.sink.topic.name "
                                      "(Debezium refuses it too); give the topic")
    elif topic:
        conversion.notes.append("notification.sink.topic.name ignored: notification.enabled.channels does not enable "
                                "sink (Debezium ignores it too)")
    if "log" in channels:
        conversion.notes.append("notification.enabled.channels: log: dblog logs every notification anyway "
                                "(logger dblog.notifications)")
    others = sorted(channels - {"sink", "log"})
    if others:
        conversion.refused.append(f"notification.enabled.channels: {', '.join(others)}: dblog sends notifications to "
                                  "its log and to a Kafka topic only (no JMX); use sink with "
                                  "notification.sink.topic.name, or read the log")


def _http_port(pending: dict[str, str], conversion: Conversion) -> None:
    """Debezium Server's HTTP server (Quarkus) serves its health check at /q/health on
    quarkus.http.port (8080, every interface, by default): dblog's endpoint (http.*) serves
    /healthz, /readyz and /metrics, and is off unless given a port."""
    given = pending.pop("quarkus.http.port", None)
    host = pending.pop("quarkus.http.host", None)
    if given is None:
        if conversion.server:
            conversion.notes.append("no quarkus.http.port: Debezium Server serves its health check /q/health on 8080 "
                                    "by default; dblog's endpoint is off until given a port: set quarkus.http.port "
                                    "(→ http.port) or http.port")
        return
    if not re.fullmatch(r"\d+", given.strip()):
        conversion.refused.append(f"quarkus.http.port: {given.strip()!r} is not a port number")
        return
    conversion.set("http.port", int(given.strip()))
    conversion.set("http.host", (host or "0.0.0.0").strip())  # Quarkus listens on every interface by default
    conversion.notes.append(f"quarkus.http.port = {given.strip()}: dblog's health and metrics endpoint (http.port); "
                            "Debezium Server's /q/health is dblog's /healthz (alive) and /readyz (streaming and not "
                            "behind): point the probes there (docs/operations.md)")


def _snapshot(pending: dict[str, str], conversion: Conversion) -> None:
    mode = pending.pop("snapshot.mode", None)
    if mode is not None:
        mode = mode.strip().lower()
        if mode in _SNAPSHOT_MODES:
            conversion.set("snapshot.startup", _SNAPSHOT_MODES[mode])
            if mode == "initial":
                conversion.notes.append("snapshot.mode = initial: dblog reads the tables as an incremental snapshot "
                                        "while streaming (records op r, no locks), not a blocking one; its rows "
                                        "carry Debezium's initial-snapshot markers in source.snapshot "
                                        "(snapshot.initial_markers)")
        else:
            why = _SNAPSHOT_MODES_REFUSED.get(mode, "use initial or no_data")
            conversion.refused.append(f"snapshot.mode: {mode!r}: {why}")
    if mode is None or mode == "initial":  # Debezium's default: its initial snapshot's markers
        conversion.set("snapshot.initial_markers", True)
    strategy = pending.pop("incremental.snapshot.watermarking.strategy", None)
    read_only = _boolean(pending, "read.only", conversion, default=False)
    if read_only:
        # Without writes to the signal table the watermarks come from the binlog's GTIDs.
        conversion.set("snapshot.watermarks", "gtid")
        if strategy is not None:
            conversion.notes.append("incremental.snapshot.watermarking.strategy ignored: read.only = true "
                                    "writes no watermarks (dblog: snapshot.watermarks = \"gtid\")")
    elif strategy is not None:
        strategy = strategy.strip().lower()
        if strategy in WATERMARK_MODES and WATERMARK_MODES[strategy].writes_signal_rows:  # Debezium's strategies
            conversion.set("snapshot.watermarks", strategy)
        else:
            conversion.refused.append(f"incremental.snapshot.watermarking.strategy: {strategy!r}: "
                                      "use insert_insert or insert_delete (or read.only = true)")
    else:
        conversion.notes.append("no incremental.snapshot.watermarking.strategy: dblog's default "
                                "snapshot.watermarks = \"gtid\" writes nothing to the source (Debezium's default "
                                "insert_insert writes to the signal table)")


def _switches(pending: dict[str, str], conversion: Conversion) -> None:
    """Keys whose one value is what dblog does anyway (ignored), and whose others it cannot do."""
    if _boolean(pending, "include.schema.changes", conversion, default=True) is False:
        conversion.set("sink.kafka.schema_changes", False)  # no schema change topic, as Debezium
    else:
        _schema_change_scope(pending, conversion)
    skipped = pending.pop("skipped.operations", None)
    if skipped is not None:
        operations = {op.strip().lower() for op in skipped.split(",") if op.strip()}
        unknown = operations - {"c", "u", "d", "t", "none"}
        if unknown or ("none" in operations and len(operations) > 1):
            conversion.refused.append(f"skipped.operations: {skipped.strip()!r}: use none, or some of c, u, d, t "
                                      "(comma-separated)")
        elif operations != {"t"}:  # t: Debezium's default, and sink.kafka.skipped_operations'
            conversion.set("sink.kafka.skipped_operations", [op for op in ("c", "u", "d", "t") if op in operations])


# --- what the records look like: converters, topics ------------------------------------------

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_SCHEMA_REGISTRY = ("writes to a schema registry; dblog's Kafka sink writes JSON with the schema inline, as Kafka "
                    f"Connect's JsonConverter does: use {JSON_CONVERTER}")
_CONVERTERS_REFUSED = {
    "io.confluent.connect.avro.AvroConverter": _SCHEMA_REGISTRY,
    "io.apicurio.registry.utils.converter.AvroConverter": _SCHEMA_REGISTRY,
    "io.apicurio.registry.utils.converter.ExtJsonConverter": _SCHEMA_REGISTRY,
    "io.confluent.connect.json.JsonSchemaConverter": _SCHEMA_REGISTRY,
    "io.confluent.connect.protobuf.ProtobufConverter": _SCHEMA_REGISTRY,
    "io.debezium.converters.CloudEventsConverter": "CloudEvents envelopes; dblog writes Debezium's envelope with "
                                                  f"{JSON_CONVERTER}'s JSON only",
    "org.apache.kafka.connect.storage.StringConverter": "a Struct's toString(), which no consumer parses; dblog "
                                                       f"writes {JSON_CONVERTER}'s JSON",
    "org.apache.kafka.connect.converters.ByteArrayConverter": "takes bytes, and Debezium's keys and values are "
                                                             f"Structs; dblog writes {JSON_CONVERTER}'s JSON",
}
_FORMATS_REFUSED = {
    "avro": "Avro with a schema registry; dblog writes JSON only: debezium.format.key / debezium.format.value = json",
    "protobuf": "Protobuf with a schema registry; dblog writes JSON only: debezium.format.key / debezium.format.value "
                "= json",
    "cloudevents": "CloudEvents envelopes; dblog writes Debezium's envelope as JSON only",
    "simplestring": "a Struct's toString(); dblog writes JSON only",
    "binary": "raw bytes; dblog writes JSON only",
}
_CONVERTER_IGNORED = {
    "schemas.cache.size": "a cache of JsonConverter's; dblog keeps its own",
}


def _record_format(pending: dict[str, str], conversion: Conversion) -> None:
    """Kafka Connect's key and value converters (Debezium Server: `debezium.format.key/value`):
    JsonConverter only, its schemas.enable (default true) → sink.kafka.schemas; tombstones."""
    header = pending.pop("debezium.format.header", "json").strip().lower() if conversion.server else "json"
    if header != "json":
        conversion.refused.append(f"debezium.format.header: {header!r}: dblog writes its headers as JSON (json, "
                                  "Debezium Server's default) only; remove it")
    schemas = {}  # side -> (schemas.enable, the key that said so, or None for the default)
    replace_nulls = {}  # side -> replace.null.with.default as given
    for side in ("key", "value"):
        if conversion.server:
            converter, prefix = f"debezium.format.{side}", f"debezium.format.{side}."
            kind = pending.pop(converter, None)
            if kind is not None and kind.strip().lower() not in ("json", "jsonbytearray"):
                why = _FORMATS_REFUSED.get(kind.strip().lower(), "dblog writes JSON (json) only")
                conversion.refused.append(f"{converter}: {kind.strip()!r}: {why}")
        else:
            converter, prefix = f"{side}.converter", f"{side}.converter."
            kind = pending.pop(converter, None)
            if kind is not None and kind.strip() != JSON_CONVERTER:
                why = _CONVERTERS_REFUSED.get(kind.strip(), f"dblog's Kafka sink writes what {JSON_CONVERTER} "
                                                             "writes, and no other converter's format; use it")
                conversion.refused.append(f"{converter}: {kind.strip()!r}: {why}")
        refused = kind is not None and any(line.startswith(f"{converter}:") for line in conversion.refused)
        given = kind is not None or prefix + "schemas.enable" in pending
        enable = _boolean(pending, prefix + "schemas.enable", conversion, default=True)
        schemas[side] = (enable, prefix + "schemas.enable" if given else None)
        for key in sorted(key for key in pending if key.startswith(prefix)):
            name, value = key[len(prefix):], pending.pop(key).strip()
            if refused:
                conversion.refused.append(f"{key}: goes with {converter}, refused")
            elif name in _CONVERTER_IGNORED:
                conversion.notes.append(f"{key} ignored: {_CONVERTER_IGNORED[name]}")
            elif name == "replace.null.with.default" and value.lower() in ("true", "false"):
                replace_nulls[side] = (value.lower() == "true", key)
            elif name == "decimal.format" and value.upper() == "BASE64":
                pass  # JsonConverter's default
            elif name == "decimal.format":
                conversion.refused.append(f"{key}: {value!r}: dblog writes decimals as decimal.handling.mode says, "
                                          "with JsonConverter's default BASE64 for the precise mode; remove it")
            else:
                conversion.refused.append(f"{key}: not a JsonConverter setting dblog honours (schemas.enable, "
                                          "replace.null.with.default); remove it")
    if "value" in replace_nulls:  # the value converter's: what keys' nulls get is not dblog's to choose
        conversion.set("sink.kafka.replace_null_with_default", replace_nulls["value"][0])
    if "key" in replace_nulls and replace_nulls["key"][0] is False:
        conversion.notes.append(f"{replace_nulls['key'][1]} = false: dblog never writes a key column's default "
                                "for a null key value (the value converter's setting is "
                                "sink.kafka.replace_null_with_default)")
    (key_schemas, key_from), (value_schemas, value_from) = schemas["key"], schemas["value"]
    if key_from and value_from and None not in (key_schemas, value_schemas) and key_schemas != value_schemas:
        conversion.refused.append(
            f"{key_from} and {value_from}: differ; dblog's Kafka sink writes the schema part in both keys and "
            "values or in neither (sink.kafka.schemas): give both the same value")
        return
    chosen = value_schemas if value_from or not key_from else key_schemas
    if chosen is None:
        return  # not true or false: refused by _boolean
    conversion.set("sink.kafka.schemas", chosen)
    shape = ('{"schema", "payload"}, as JsonConverter writes them with schemas.enable = true (its default)'
             if chosen else "the payload alone (schemas.enable = false)")
    if not key_from and not value_from and conversion.server:
        conversion.notes.append(f"no debezium.format.*: json, Debezium Server's default; sink.kafka.schemas = "
                                f"{str(chosen).lower()}: each key and value is {shape}")
    elif not key_from and not value_from:
        where = ("the Kafka Connect worker's configuration sets no converters either" if conversion.worker else
                 "no key.converter / value.converter: Kafka Connect takes them from its worker's configuration, "
                 "which was not given (--worker-config FILE)")
        conversion.warnings.append(f"{where}: JsonConverter with schemas.enable = true assumed "
                                   f"(sink.kafka.schemas = {str(chosen).lower()}); each key and value is {shape}")
    else:
        conversion.notes.append(f"sink.kafka.schemas = {str(chosen).lower()}: each key and value is {shape}")
    if bool(key_from) != bool(value_from):
        given, other = (value_from, "key") if value_from else (key_from, "value")
        conversion.notes.append(f"{given} = {str(chosen).lower()} also for the {other}s: dblog's Kafka sink writes "
                                "the schema part in both or in neither")


def _transactions_and_heartbeats(pending: dict[str, str], conversion: Conversion) -> None:
    """provide.transaction.metadata and topic.transaction; heartbeat.interval.ms,
    topic.heartbeat.prefix and heartbeat.action.query (sink.kafka.*: docs/kafka.md). Topic names
    as Debezium's naming strategy makes them: `<topic.prefix><topic.delimiter><topic.transaction>`,
    `<topic.heartbeat.prefix><topic.delimiter><topic.prefix>`."""
    delimiter = pending.get("topic.delimiter", ".")  # _topics takes it
    metadata = _boolean(pending, "provide.transaction.metadata", conversion, default=False)
    if metadata:
        conversion.set("sink.kafka.transaction_metadata", True)
    suffix = (pending.pop("topic.transaction", None) or "transaction").strip()
    if metadata and (suffix, delimiter) != ("transaction", "."):
        conversion.set("sink.kafka.transaction_topic", f"{{name}}{delimiter}{suffix}")
    interval = pending.pop("heartbeat.interval.ms", None)
    milliseconds = 0
    if interval is not None:
        if re.fullmatch(r"\s*\d+\s*", interval):
            milliseconds = int(interval)
            if milliseconds:
                conversion.set("sink.kafka.heartbeat_interval_ms", milliseconds)
        else:
            conversion.refused.append(f"heartbeat.interval.ms: {interval.strip()!r} is not a whole number of "
                                      "milliseconds (0: no heartbeats)")
    prefix = (pending.pop("topic.heartbeat.prefix", None) or "__debezium-heartbeat").strip()
    name = (pending.pop("topic.heartbeat.name", None) or "").strip()  # the whole name: it wins over the prefix
    if milliseconds and name:
        conversion.set("sink.kafka.heartbeat_topic", name.replace("{", "{{").replace("}", "}}"))
    elif milliseconds and (prefix, delimiter) != ("__debezium-heartbeat", "."):
        conversion.set("sink.kafka.heartbeat_topic", f"{prefix}{delimiter}{{name}}")
    query = pending.pop("heartbeat.action.query", None)
    if query is not None and query.strip():
        if milliseconds:
            conversion.set("sink.kafka.heartbeat_action_query", query.strip())
        elif interval is None or re.fullmatch(r"\s*\d+\s*", interval):
            conversion.notes.append("heartbeat.action.query ignored: heartbeat.interval.ms is 0 (no heartbeats), and "
                                    "Debezium runs it with each heartbeat only")


_DEFAULT_NAMING = "io.debezium.schema.DefaultTopicNamingStrategy"  # the MySQL connector's default
_SCHEMA_NAMING = "io.debezium.schema.SchemaTopicNamingStrategy"


def _topics(pending: dict[str, str], conversion: Conversion) -> None:
    """Topic names (topic.prefix is `name`; topic.delimiter), tombstones, and which topics dblog
    creates: Kafka Connect's `topic.creation.default.*`; without them the broker creates them."""
    tombstones = _boolean(pending, "tombstones.on.delete", conversion, default=True)
    if tombstones is False:
        conversion.set("sink.kafka.tombstones", False)
    if _boolean(pending, "extended.headers.enabled", conversion, default=True) is False:
        conversion.set("sink.kafka.extended_headers", False)
    delimiter = pending.pop("topic.delimiter", None) or "."
    strategy = (pending.pop("topic.naming.strategy", None) or _DEFAULT_NAMING).strip()
    if strategy == _SCHEMA_NAMING:
        # A MySQL table id has a catalog (the database) and no schema: SchemaTopicNamingStrategy
        # names its topic <prefix>.<table> (checked against Debezium 3.6.3's class).
        conversion.set("sink.kafka.topic", f"{{name}}{delimiter}{{table}}")
        conversion.notes.append(f"topic.naming.strategy = SchemaTopicNamingStrategy: a MySQL table has no schema, so "
                                f"Debezium names its topic <topic.prefix>{delimiter}<table>, without the database; "
                                "so does dblog (sink.kafka.topic): tables of the same name in two databases share "
                                "a topic")
    elif strategy != _DEFAULT_NAMING:
        conversion.refused.append(f"topic.naming.strategy: {strategy!r}: dblog names topics as Debezium's "
                                  "DefaultTopicNamingStrategy (<topic.prefix>.<db>.<table>) or SchemaTopicNamingStrategy "
                                  "(<topic.prefix>.<table> for MySQL) does; use one of them, or sink.kafka.topic")
    elif delimiter != ".":
        conversion.set("sink.kafka.topic", f"{{name}}{delimiter}{{db}}{delimiter}{{table}}")
    creation = "topic.creation."
    groups = pending.pop(creation + "groups", None)
    if groups is not None:
        names = [name.strip() for name in groups.split(",") if name.strip()]
        conversion.refused.append(f"{creation}groups: {', '.join(names)}: dblog creates every topic with one set of "
                                  "settings (topic.creation.default.*); remove the groups")
        for key in [key for key in pending if any(key.startswith(f"{creation}{name}.") for name in names)]:
            pending.pop(key)
            conversion.refused.append(f"{key}: goes with {creation}groups, refused")
    defaults = {key[len(creation) + 8:]: pending.pop(key).strip()
                for key in sorted(pending) if key.startswith(creation + "default.")}
    if not defaults:
        conversion.set("sink.kafka.create_topics", False)
        who = "Debezium Server's Kafka sink" if conversion.server else "Kafka Connect (no topic.creation.default.*)"
        conversion.notes.append(f"sink.kafka.create_topics = false: as {who}, dblog leaves creating the topics to "
                                "the broker (auto.create.topics.enable, its num.partitions and default.replication."
                                "factor) or to you")
        return
    for name, dblog_key in (("partitions", "sink.kafka.partitions"),
                            ("replication.factor", "sink.kafka.replication_factor")):
        value = defaults.pop(name, None)
        if value is None:
            continue
        if value == "-1":
            broker = "num.partitions" if name == "partitions" else "default.replication.factor"
            conversion.refused.append(f"{creation}default.{name}: -1 (the broker's default): dblog creates topics "
                                      f"with a number; give it (the broker's {broker})")
        elif re.fullmatch(r"\d+", value):
            conversion.set(dblog_key, int(value))
        else:
            conversion.refused.append(f"{creation}default.{name}: {value!r} is not a whole number")
    for name in ("include", "exclude"):
        if defaults.pop(name, None) is not None:
            conversion.refused.append(f"{creation}default.{name}: the default group takes every topic; remove it")
    if defaults:  # the topics' own configuration: cleanup.policy, retention.ms, compression.type, …
        conversion.set("sink.kafka.topic_properties", defaults)


def _transforms(pending: dict[str, str], conversion: Conversion) -> None:
    """Kafka Connect's transforms → sink.kafka.transforms (dblog.runtime.debezium_transforms)."""
    transforms, notes, refused = convert_transforms(pending)
    if transforms:
        conversion.set("sink.kafka.transforms", transforms)
    if conversion.server:  # Debezium Server's keys are `debezium.transforms*`, `debezium.predicates*`
        notes, refused = ([f"debezium.{line}" for line in lines] for lines in (notes, refused))
    conversion.notes += notes
    conversion.refused += refused


# Debezium's value switches -> the Kafka sink's settings of the same names (dblog.sinks.kafka.debezium_values)
_VALUE_MODES = {
    "time.precision.mode": ("time_precision_mode", ("adaptive_time_microseconds", "adaptive", "connect", "isostring")),
    "decimal.handling.mode": ("decimal_handling_mode", ("precise", "double", "string")),
    "bigint.unsigned.handling.mode": ("bigint_unsigned_handling_mode", ("long", "precise")),
    "binary.handling.mode": ("binary_handling_mode", ("bytes", "base64", "base64-url-safe", "hex")),
}


def _value_modes(pending: dict[str, str], conversion: Conversion) -> None:
    """Debezium's value encodings become sink.kafka's settings of the same names (the Kafka sink
    writes Debezium's values; the JSON-lines sink writes dblog's normal form whatever they say)."""
    converted = []
    for key, (name, allowed) in _VALUE_MODES.items():
        value = pending.pop(key, None)
        if value is None:
            continue
        value = value.strip().lower()
        if value not in allowed:
            conversion.refused.append(f"{key}: {value!r}: use one of {', '.join(allowed)}")
            continue
        conversion.data.setdefault("sink", {}).setdefault("kafka", {})[name] = value
        converted.append(key)
    if converted:
        conversion.notes.append(f"{', '.join(converted)}: the Kafka sink's sink.kafka settings of the same names "
                                "(sink.type = \"kafka\"); the JSON-lines sink writes dblog's normal form")


_TLS_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
# Java key stores (JKS or PKCS#12) that Connector/J reads; dblog takes PEM files.
_KEY_STORES = {
    "database.ssl.keystore": "the client certificate and its key: export them as PEM files, e.g. "
                             "`keytool -importkeystore -srckeystore KEYSTORE -destkeystore client.p12 -deststoretype "
                             "PKCS12`, then `openssl pkcs12 -in client.p12 -clcerts -nokeys -out client-cert.pem` and "
                             "`openssl pkcs12 -in client.p12 -nocerts -out client-key.pem`, and set source.tls.cert "
                             "and source.tls.key (and source.tls.key_password_env if the key stays encrypted)",
    "database.ssl.truststore": "the CA certificates the server's must chain to: export them as a PEM file, e.g. "
                               "`keytool -exportcert -rfc -keystore TRUSTSTORE -alias ALIAS -file ca.pem`, and set "
                               "source.tls.ca",
}


def _tls(pending: dict[str, str], conversion: Conversion) -> None:
    """database.ssl.mode takes the MySQL client's values, as dblog's source.tls.mode does; the
    Java key and trust stores have no meaning outside a JVM: their contents go into PEM files."""
    mode = pending.pop("database.ssl.mode", None)
    if mode is not None:
        mode = mode.strip().lower()
        if mode in _TLS_MODES:
            conversion.set("source.tls", {"mode": mode})
        else:
            conversion.refused.append(f"database.ssl.mode: {mode!r}: use one of {', '.join(_TLS_MODES)}")
    for store, what in _KEY_STORES.items():
        given = [key for key in (store, f"{store}.password", f"{store}.type") if key in pending]
        for key in given:
            pending.pop(key)
        if given:
            conversion.refused.append(f"{' / '.join(given)}: a Java key store (JKS or PKCS#12), which dblog does not "
                                      f"read; it holds {what}")


_ONLY_CAPTURED = "schema.history.internal.store.only.captured."


def _schema_change_scope(pending: dict[str, str], conversion: Conversion) -> None:
    """Which statements Debezium's schema change topic holds with this file's switches (read,
    not consumed: the schema history's keys are ignored with their own note), where dblog's
    differs."""
    more = []
    if pending.get(_ONLY_CAPTURED + "tables.ddl", "false").strip().lower() != "true":
        more.append("the DDL of the captured databases' other tables")
    if pending.get(_ONLY_CAPTURED + "databases.ddl", "false").strip().lower() != "true":
        more.append("the statements of the server's other databases, their start-up records included")
    if more:
        conversion.notes.append(
            "schema change topic: dblog writes the statements of the captured tables (and DROP DATABASE of a database "
            f"holding some), as Debezium with {_ONLY_CAPTURED}tables.ddl and {_ONLY_CAPTURED}databases.ddl = true; "
            f"with this configuration Debezium also writes {' and '.join(more)} (docs/debezium.md, What still differs)")


def _boolean(pending: dict[str, str], key: str, conversion: Conversion, default: bool) -> bool | None:
    if key not in pending:
        return default
    value = pending.pop(key).strip().lower()
    if value not in ("true", "false"):
        conversion.refused.append(f"{key}: {value!r} is not true or false")
        return None
    return value == "true"
