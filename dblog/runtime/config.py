"""The engine's configuration: a TOML file validated by pydantic.

pydantic gives every bad value an error naming its place (`source.port: Input should be a
valid integer`), and unknown keys are rejected, so a typo stops the engine instead of being
silently ignored. Every key and its default is listed in docs/configuration.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from dblog.core.events import TableId, valid_table_patterns
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import SYSTEM_SCHEMAS
from dblog.mysql.tls import TlsSettings
from dblog.runtime.secrets import SecretError, check_secrets, resolve_setting
from dblog.runtime.watermark_modes import WATERMARK_MODES
from dblog.sinks.column_options import ColumnSettings
from dblog.sinks.kafka.security import KafkaSecurity, SaslMechanism, SecurityProtocol, check_files
# ConfigError is defined with the registry, so that the sinks' plugins raise the one dblog reports.
from dblog.sinks.registry import (DEFAULT_SINK, ConfigError, SinkPlugin, registry_generation, sink_plugin,
                                  sink_plugins, staging_sinks)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TlsConfig(_Section):
    """`[source.tls]`: TLS to the source on every connection dblog opens (dblog.mysql.tls)."""

    # The MySQL client's --ssl-mode and Debezium's database.ssl.mode: disabled, preferred (TLS
    # when the server offers it, unverified), required (TLS, unverified), verify_ca (the issuer),
    # verify_identity (the issuer and the host name).
    mode: Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"] = "preferred"
    ca: str | None = None  # PEM file of the CA(s) the server's certificate must chain to (verify_*)
    cert: str | None = None  # PEM file of the client certificate (accounts that REQUIRE X509)
    key: str | None = None  # PEM file of its private key
    key_password: SecretStr | None = None  # the key's passphrase, or key_password_env / key_password_file
    key_password_env: str | None = None
    key_password_file: str | None = None
    key_password_file_key: str | None = None  # key_password_file is a properties file: this key's value
    min_version: Literal["TLSv1.2", "TLSv1.3"] = "TLSv1.2"

    @model_validator(mode="after")
    def _consistent(self) -> TlsConfig:
        if self.ca and self.mode not in ("verify_ca", "verify_identity"):
            raise ValueError(f'ca is only used to verify the server, and mode = "{self.mode}" does not: set '
                             'mode = "verify_ca" (the issuer) or "verify_identity" (the issuer and the host name)')
        if self.key and not self.cert:
            raise ValueError("key is set without cert: give the client certificate too")
        if self.mode == "disabled" and (self.cert or self.key):
            raise ValueError('cert and key are not used with mode = "disabled": remove them or choose a TLS mode')
        return self

    def settings(self) -> TlsSettings:
        """The settings a connection is made with: the files read now (PEM texts), the key's
        passphrase resolved."""
        try:
            password = resolve_setting(self, "key_password", "source.tls.key_password")
        except SecretError as error:
            raise ConfigError(str(error)) from None
        return TlsSettings(mode=self.mode, ca=_pem_file("source.tls.ca", self.ca),
                           cert=_pem_file("source.tls.cert", self.cert), key=_pem_file("source.tls.key", self.key),
                           key_password=password, min_version=self.min_version)


def _pem_file(where: str, path: str | None) -> str | None:
    if path is None:
        return None
    try:
        text = Path(path).expanduser().read_bytes().decode("ascii", errors="replace")
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(f"{where}: cannot read {path}: {reason}; check the path and that dblog's user may read "
                          "it") from None
    if "-----BEGIN " not in text:
        raise ConfigError(f"{where}: {path} is not a PEM file (no -----BEGIN line); convert it, e.g. "
                          "`openssl x509 -inform DER -in FILE -out FILE.pem` for a certificate")
    return text


class SourceConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(3306, ge=1, le=65535)
    user: str = "root"
    password: SecretStr = SecretStr("")  # or password_env / password_file (dblog.runtime.secrets)
    password_env: str | None = None  # name of an environment variable holding the password
    password_file: str | None = None  # a file holding the password (a mounted secret)
    password_file_key: str | None = None  # password_file is a properties file: the password is this key's value
    server_id: int = Field(5401, ge=1, le=2**32 - 1)  # our id as a replica: unique among the server's replicas
    include: list[str] = Field(default_factory=lambda: [r"[^.]+\..+"])  # regexes over db.table
    exclude: list[str] = Field(default_factory=list)
    heartbeat_seconds: float = Field(1.0, gt=0)
    # Give up after this long unreachable; "forever": never (a failover or maintenance window of
    # any length; /readyz and dblog_source_waiting_since_seconds say since when it waits).
    reconnect_timeout_seconds: Annotated[float, Field(ge=0)] | Literal["forever"] = 300.0
    # The binlog reader's own reconnects in a row (0.1 s, doubling to 2 s apart: ~13 s for 10)
    # before the engine stops and the supervisor restarts it from the committed offsets.
    binlog_reconnects: int = Field(10, ge=0)
    # Changes of prepared XA transactions kept in memory until their XA COMMIT / ROLLBACK, all of
    # them together, by count and by their bytes in the binlog ("64MiB", "1GB" or a number); past
    # either the largest wait in one temporary file (dblog.mysql.binlog.held_changes).
    max_held_xa_rows: int = Field(100_000, ge=1)
    max_held_xa_bytes: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=1)
    # Keys of tables without a primary key: {"db.table" = ["col", ...]}, unique NOT NULL columns.
    key_columns: dict[str, list[str]] = Field(default_factory=dict)
    # Read and decode the binlog in a second process (dblog.mysql.binlog.process): the engine's own
    # process then only unpickles the events. Needs a second core: in all it costs more CPU.
    # "auto": when this process may use at least two cores (affinity and cgroup quota).
    reader_process: bool | Literal["auto"] = "auto"
    # How the binlog position is kept (dblog.core.file_positions): "gtid" (GTID sets), "file" (binlog
    # file and offset, as Debezium without GTIDs; snapshots then take signal-table watermarks), or
    # "auto": "file" on MySQL unless gtid_mode=ON (its default is OFF), "gtid" on MariaDB.
    position_mode: Literal["auto", "gtid", "file"] = "auto"
    tls: TlsConfig = Field(default_factory=TlsConfig)  # [source.tls]

    @field_validator("key_columns")
    @classmethod
    def _qualified_tables(cls, keys: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, columns in keys.items():
            TableId.parse(name)
            if not columns:
                raise ValueError(f"{name}: give at least one column")
        return keys

    @field_validator("include", "exclude")
    @classmethod
    def _valid_patterns(cls, patterns: list[str]) -> list[str]:
        return valid_table_patterns(patterns)

    def resolved_password(self) -> str:
        try:
            return resolve_setting(self, "password", "source.password") or ""
        except SecretError as error:
            raise ConfigError(str(error)) from None

    def connection_settings(self) -> ConnectionSettings:
        """How every connection to the source is made: address, credentials and TLS, secrets and
        certificate files read now."""
        return ConnectionSettings(self.host, self.port, self.user, self.resolved_password(), self.tls.settings())

    def includes(self, table: TableId) -> bool:
        """Whether `include` names the table and `exclude` does not. The system schemas (`mysql`,
        `sys`, …) never are, whatever the patterns (as Debezium's `table.ignore.builtin`): rows of
        `mysql.user` / `mysql.global_priv` hold password hashes."""
        if table.db.lower() in SYSTEM_SCHEMAS:
            return False
        name = str(table)
        return any(re.fullmatch(p, name) for p in self.include) and not any(
            re.fullmatch(p, name) for p in self.exclude
        )


DEFAULT_MAX_CHUNK_SIZE = 65_536  # rows: 64 default chunks


class ConfigurationBasedStartup(_Section):
    """`[snapshot.configuration_based]`: what `snapshot.startup = "configuration_based"` does,
    Debezium's snapshot.mode.configuration.based.* keys (all false by default, as Debezium's)."""

    snapshot_data: bool = False  # read every captured table at each start
    snapshot_schema: bool = False  # read the table definitions from the server at each start
    start_stream: bool = False  # stream after the start-up snapshot (false: stop once it is done)
    snapshot_on_schema_error: bool = False  # a saved schema history that is not valid: read it again from the server
    snapshot_on_data_error: bool = False  # offsets the binlog no longer holds: snapshot again from the present


# snapshot.startup: Debezium's snapshot modes (dblog.runtime.snapshot_modes); "never" is no_data.
StartupMode = Literal["initial", "never", "when_needed", "initial_only", "always", "recovery", "configuration_based"]


class SnapshotConfig(_Section):
    startup: StartupMode = "initial"
    # How the start-up snapshot reads the tables: "incremental" (dblog's default: chunk by chunk
    # under watermark windows while streaming, no locks) or "blocking" (Debezium's initial
    # snapshot: streaming waits until every table is read, then resumes where it paused).
    startup_reads: Literal["incremental", "blocking"] = "incremental"
    configuration_based: ConfigurationBasedStartup = Field(default_factory=ConfigurationBasedStartup)
    # Debezium's snapshot.select.statement.overrides: {"db.table" = "SELECT …"}, the source of
    # the start-up snapshot's reads of that table (dblog.runtime.select_overrides).
    select_overrides: dict[str, str] = Field(default_factory=dict)
    # The startup snapshot's rows say `source.snapshot` as Debezium's initial snapshot does
    # (first, true, first_in_data_collection, last_in_data_collection, last) instead of
    # "incremental" (`dblog convert-debezium` sets it for snapshot.mode = initial).
    initial_markers: bool = False
    chunk_size: int = Field(1024, ge=1, le=1_000_000)
    # A chunk also stops once its rows take this many bytes on the wire ("64MiB", "1GB" or a
    # number): wide or multi-MB rows cannot make a chunk of gigabytes.
    chunk_bytes: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=1024)
    # A table without a key is read whole in one consistent snapshot and held until emitted:
    # one whose rows take more than this on the wire is refused (NO_PRIMARY_KEY, naming the
    # remedies) rather than read into memory past it (about twice this, in Python).
    keyless_max_bytes: ByteSize = Field(ByteSize(256 * 1024 * 1024), ge=1024)
    # Consecutive chunks read at once on this many connections, between one pair of watermarks.
    parallel_reads: int = Field(1, ge=1, le=16)
    # While windows wait for a lagging binlog reader, the next chunks ask for more rows
    # (`dblog.core.capture.next_chunk_size`): at most this many (unset: 65,536, or chunk_size if
    # larger; = chunk_size keeps chunks fixed) ...
    max_chunk_size: int | None = Field(None, ge=1, le=100_000_000)
    # ... and at most what the table's last chunk read rate gets through in this time: how long
    # one chunk read may pause streaming.
    max_chunk_seconds: float = Field(0.5, gt=0, allow_inf_nan=False)
    watermarks: Literal["gtid", "insert_insert", "insert_delete"] = "gtid"
    # GTID watermarks: how long a chunk waits for commits the binlog reader has already read to
    # become visible to SELECTs (microseconds usually; a semi-sync replica's ACK under AFTER_SYNC).
    visibility_timeout_seconds: float = Field(60.0, gt=0)
    # Backfills read by the cluster (sink.type = "iceberg"): one window covers many key ranges
    # that Spark tasks read from the source into staging files (dblog.runtime.distributed_snapshot).
    distributed: bool = False
    distributed_tasks: int | None = Field(None, ge=1, le=4096)  # ranges read at once (unset: Spark's default parallelism)
    distributed_range_rows: int = Field(50_000, ge=1)  # rows per key range, one task each
    distributed_window_rows: int = Field(1_000_000, ge=1)  # rows one window's ranges cover at most
    distributed_attempts: int = Field(4, ge=1, le=100)  # reads of a range before the snapshot fails

    @field_validator("max_chunk_size")
    @classmethod
    def _not_below_chunk_size(cls, value: int | None, info: ValidationInfo) -> int | None:
        chunk_size = info.data.get("chunk_size")  # absent if it was invalid itself
        if value is not None and chunk_size is not None and value < chunk_size:
            raise ValueError(f"{value} is smaller than snapshot.chunk_size ({chunk_size}); "
                             "set it to chunk_size to keep chunks at a fixed size")
        return value

    def chunk_rows_cap(self) -> int:
        """Rows one chunk may grow to while windows wait (`max_chunk_size`, resolved)."""
        if self.max_chunk_size is not None:
            return self.max_chunk_size
        return max(DEFAULT_MAX_CHUNK_SIZE, self.chunk_size)


class SignalsConfig(_Section):
    table: str | None = None  # "db.table" of the signal table, Debezium's id/type/data schema
    kafka_topic: str | None = None  # topic of Debezium signal messages (needs kafka.bootstrap_servers)
    kafka_poll_interval_seconds: float = Field(0.5, gt=0)

    @field_validator("table")
    @classmethod
    def _qualified(cls, value: str | None) -> str | None:
        if value is not None:
            TableId.parse(value)
        return value


class KafkaConfig(_Section):
    """`[kafka]`: the brokers and how every Kafka client of dblog connects to them (the data sink,
    the signal channel, the notifications, `dblog signal --via kafka`): `security()`."""

    bootstrap_servers: str | None = None  # "host:port[,host:port]" of the user's Kafka
    security_protocol: SecurityProtocol = "PLAINTEXT"  # SSL, SASL_PLAINTEXT, SASL_SSL: Kafka's security.protocol
    sasl_mechanism: SaslMechanism | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SASL_* protocols)
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None  # or sasl_password_env / sasl_password_file (dblog.runtime.secrets)
    sasl_password_env: str | None = None
    sasl_password_file: str | None = None
    sasl_password_file_key: str | None = None  # sasl_password_file is a properties file: this key's value
    ssl_ca: str | None = None  # PEM file of the CA(s) to trust (SSL, SASL_SSL); unset: the system's trust store
    ssl_cert: str | None = None  # PEM client certificate, for brokers that require one (mutual TLS) ...
    ssl_key: str | None = None  # ... and its PEM private key
    ssl_key_password: SecretStr | None = None  # the key's passphrase, if it is encrypted (or _env / _file)
    ssl_key_password_env: str | None = None
    ssl_key_password_file: str | None = None
    ssl_key_password_file_key: str | None = None  # ssl_key_password_file is a properties file: this key's value
    ssl_check_hostname: bool = True  # the broker's certificate must name the host dblog connects to

    @model_validator(mode="after")
    def _consistent(self) -> "KafkaConfig":
        protocol = self.security_protocol
        sasl = protocol.startswith("SASL_")
        tls = protocol in ("SSL", "SASL_SSL")
        if sasl:
            missing = [f"kafka.{key}" for key in ("sasl_mechanism", "sasl_username") if not getattr(self, key)]
            if not (self.sasl_password or self.sasl_password_env or self.sasl_password_file):
                missing.append("kafka.sasl_password (or sasl_password_env / sasl_password_file)")
            if missing:
                raise ValueError(f"security_protocol = {protocol!r} logs in with SASL: set {', '.join(missing)}")
        else:
            given = [f"kafka.{key}" for key in ("sasl_mechanism", "sasl_username", "sasl_password",
                                                  "sasl_password_env", "sasl_password_file") if getattr(self, key)]
            if given:
                raise ValueError(f"{', '.join(given)} set, but security_protocol = {protocol!r} does not log in: "
                                 'set kafka.security_protocol = "SASL_SSL" (or "SASL_PLAINTEXT"), or remove them')
        if not tls:
            given = [f"kafka.{key}" for key in ("ssl_ca", "ssl_cert", "ssl_key", "ssl_key_password",
                                                  "ssl_key_password_env", "ssl_key_password_file") if getattr(self, key)]
            if given:
                raise ValueError(f"{', '.join(given)} set, but security_protocol = {protocol!r} does not use TLS: "
                                 'set kafka.security_protocol = "SSL" or "SASL_SSL", or remove them')
        if bool(self.ssl_cert) != bool(self.ssl_key):
            raise ValueError("kafka.ssl_cert and kafka.ssl_key go together (a client certificate and its key): "
                             "set both or neither")
        return self

    def security(self) -> KafkaSecurity:
        """The settings with their secrets resolved, for `dblog.sinks.kafka.security.client_options`;
        ConfigError naming the setting if a secret or a certificate file cannot be read."""
        try:
            password = resolve_setting(self, "sasl_password", "kafka.sasl_password")
            key_password = resolve_setting(self, "ssl_key_password", "kafka.ssl_key_password")
        except SecretError as error:
            raise ConfigError(str(error)) from None
        security = KafkaSecurity(
            protocol=self.security_protocol, sasl_mechanism=self.sasl_mechanism, sasl_username=self.sasl_username,
            sasl_password=password, ssl_ca=self.ssl_ca, ssl_cert=self.ssl_cert, ssl_key=self.ssl_key,
            ssl_key_password=key_password, ssl_check_hostname=self.ssl_check_hostname,
        )
        try:
            check_files(security)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return security


class NotificationsConfig(_Section):
    kafka_topic: str | None = None  # also publish notifications here (needs kafka.bootstrap_servers)


class SinkConfig(_Section):
    """`[sink]`: which sink (`type`, one the registry knows: dblog.sinks.registry) and when it
    commits. `config_model()` adds each registered sink's keys and `[sink.<name>]` table."""

    type: str = DEFAULT_SINK
    batch_rows: int = Field(50_000, ge=1)  # commit (flush the sink) once this many changes wait


class OffsetsConfig(_Section):
    path: str = "dblog-data/offsets.json"
    # How often offsets are committed (and the sink flushed); default 1 s, 10 s for Iceberg,
    # where each commit is one MERGE per changed table (about a second each).
    commit_interval_seconds: float | None = Field(None, ge=0)


class HttpConfig(_Section):
    """The metrics and health endpoint (dblog.runtime.http_endpoint): off unless `port` is set."""

    port: int | None = Field(None, ge=0, le=65535)  # 0: any free port (the log says which)
    host: str = "127.0.0.1"  # the address it listens on: "0.0.0.0" or "::" for every interface
    # /readyz answers 503 when the stream is further behind the source than this
    ready_max_lag_seconds: float = Field(60.0, gt=0, allow_inf_nan=False)
    # also serve the series Debezium's JMX-exporter dashboards query (debezium_metrics_*), where
    # dblog has an equivalent (docs/operations.md, "Debezium's metric names")
    debezium_metrics: bool = True


class ConfigMethods(_Section):
    """What a configuration answers, whichever sinks are registered (`Config` and the model
    `config_model()` builds from it)."""

    def sink_plugin(self) -> SinkPlugin:
        """The plugin of the sink `sink.type` names (dblog.sinks.registry)."""
        return sink_plugin(self.sink.type)

    def commit_interval_seconds(self) -> float:
        if self.offsets.commit_interval_seconds is not None:
            return self.offsets.commit_interval_seconds
        return self.sink_plugin().commit_interval_seconds

    def signal_table(self) -> TableId | None:
        return TableId.parse(self.signals.table) if self.signals.table else None

    def check_secrets(self) -> list[str]:
        """Every secret setting resolved once (dblog.runtime.secrets), before anything connects:
        the settings given; a ConfigError naming each unset variable or unreadable file."""
        try:
            return check_secrets(self)
        except SecretError as error:
            raise ConfigError(str(error)) from None


class Config(ConfigMethods):
    """The sections every configuration has. `parse_config` validates with `config_model()`:
    these, in this order, with the registered sinks' settings added."""

    name: str = "dblog"  # the connector's name: Debezium's `source.name` and the Kafka signal key
    source: SourceConfig = Field(default_factory=SourceConfig)
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    signals: SignalsConfig = Field(default_factory=SignalsConfig)
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    sink: SinkConfig = Field(default_factory=SinkConfig)
    # Debezium's column filters and masks, for the JSON-lines and Kafka sinks (dblog.sinks.column_options)
    columns: ColumnSettings = Field(default_factory=ColumnSettings)
    # (the sinks' own top-level tables, e.g. the Iceberg sink's [spark] and [iceberg]: config_model())
    offsets: OffsetsConfig = Field(default_factory=OffsetsConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    # SIGTERM / SIGINT: how long `dblog run` may take to stop cleanly (finish the transaction
    # being read, flush the sink, commit the offsets) before it exits at once without committing.
    stop_timeout_seconds: float = Field(30.0, gt=0)


def load_config(path: str | os.PathLike) -> Config:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    return parse_config(data, origin=str(path))


def config_model() -> type[ConfigMethods]:
    """`Config`'s sections, with the registered sinks' settings added: `sink.type` one of their names, each one's
    keys of `[sink]` and `[sink.<name>]` table, and its top-level tables (the Iceberg sink's
    `[spark]` and `[iceberg]`). Built again when a sink is registered."""
    return _config_model(registry_generation())


@cache
def _config_model(generation: int) -> type[ConfigMethods]:
    plugins = sink_plugins()
    sink_fields: dict = {"type": (Literal[tuple(plugin.name for plugin in plugins)], DEFAULT_SINK)}
    sections: dict = {}
    for plugin in plugins:
        sink_fields.update(plugin.sink_keys)
        if plugin.settings is not None:
            sink_fields[plugin.name] = (plugin.settings, Field(default_factory=plugin.settings))
        for name, model in plugin.sections.items():
            sections[name] = (model, Field(default_factory=model))
    sink = create_model("SinkConfig", __base__=SinkConfig, **sink_fields)
    fields: dict = {}
    for name, field in Config.model_fields.items():  # in Config's order, the sinks' tables after [columns]
        fields[name] = (sink, Field(default_factory=sink)) if name == "sink" else (field.annotation, field)
        if name == "columns":
            fields.update(sections)
    return create_model("Config", __base__=ConfigMethods, __doc__=Config.__doc__, **fields)


def parse_config(data: dict, origin: str = "config") -> Config:
    try:
        config = config_model().model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        )
        raise ConfigError(f"{origin}: {problems}") from None
    if WATERMARK_MODES[config.snapshot.watermarks].writes_signal_rows and config.signals.table is None:
        raise ConfigError(
            f"{origin}: snapshot.watermarks = {config.snapshot.watermarks!r} writes watermark rows into the "
            "signal table: set signals.table"
        )
    chosen = config.sink_plugin()
    if config.snapshot.distributed and not chosen.stages_snapshots:
        stagers = staging_sinks()
        into = " or ".join(f"{plugin.title}'s" for plugin in stagers)
        needs = " or ".join(f'sink.type = "{plugin.name}"' for plugin in stagers)
        raise ConfigError(
            f"{origin}: snapshot.distributed = true has Spark tasks read the snapshot into {into} staging area: "
            f"it needs {needs} (the sink is {config.sink.type!r}); remove snapshot.distributed"
        )
    for plugin in sink_plugins():  # each sink's own cross-checks
        problem = plugin.config_problem(config, plugin is chosen)
        if problem:
            raise ConfigError(f"{origin}: {problem}")
    if config.snapshot.initial_markers and (config.snapshot.distributed or config.snapshot.startup in ("never",
                                                                                                      "recovery")):
        why = ("snapshot.distributed stages the rows outside dblog, which writes no source block for them"
               if config.snapshot.distributed else f'snapshot.startup = "{config.snapshot.startup}" reads no '
                                                   'startup snapshot')
        raise ConfigError(f"{origin}: snapshot.initial_markers = true marks the rows of the startup snapshot, but "
                          f"{why}; remove snapshot.initial_markers")
    uses_kafka = [
        name for name, topic in (("signals.kafka_topic", config.signals.kafka_topic),
                                 ("notifications.kafka_topic", config.notifications.kafka_topic),
                                 (f'sink.type = "{config.sink.type}"', chosen.uses_kafka_brokers)) if topic
    ]
    if uses_kafka and not config.kafka.bootstrap_servers:
        verb = "needs" if len(uses_kafka) == 1 else "need"
        raise ConfigError(f"{origin}: {' and '.join(uses_kafka)} {verb} kafka.bootstrap_servers = \"host:port\"")
    return config
