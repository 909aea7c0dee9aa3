"""The engine's configuration: a TOML file validated by pydantic.

pydantic gives every bad value an error naming its place (`source.port: Input should be a
valid integer`), and unknown keys are rejected, so a typo stops the engine instead of being
silently ignored. Every key and its default is listed in docs/configuration.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ByteSize, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator

from dblog.core.events import TableId
from dblog.runtime.secrets import SecretError, check_secrets, resolve_setting
from dblog.sinks.iceberg.routing import valid_table_patterns
from dblog.sinks.iceberg.settings import IcebergSettings, SparkSettings
from dblog.sinks.kafka_settings import KafkaSinkSettings


class ConfigError(ValueError):
    pass


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    reconnect_timeout_seconds: float = Field(300.0, ge=0)  # give up after this long unreachable
    # The binlog reader's own reconnects in a row (0.1 s, doubling to 2 s apart: ~13 s for 10)
    # before the engine stops and the supervisor restarts it from the committed offsets.
    binlog_reconnects: int = Field(10, ge=0)
    # Keys of tables without a primary key: {"db.table" = ["col", ...]}, unique NOT NULL columns.
    key_columns: dict[str, list[str]] = Field(default_factory=dict)
    # Read and decode the binlog in a second process (dblog.mysql.binlog.process): the engine's own
    # process then only unpickles the events. Needs a second core: in all it costs more CPU.
    # "auto": when this process may use at least two cores (affinity and cgroup quota).
    reader_process: bool | Literal["auto"] = "auto"

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

    def includes(self, table: TableId) -> bool:
        """Whether `include` names the table and `exclude` does not."""
        name = str(table)
        return any(re.fullmatch(p, name) for p in self.include) and not any(
            re.fullmatch(p, name) for p in self.exclude
        )


DEFAULT_MAX_CHUNK_SIZE = 65_536  # rows: 64 default chunks


class SnapshotConfig(_Section):
    startup: Literal["initial", "never"] = "initial"
    chunk_size: int = Field(1024, ge=1, le=1_000_000)
    # A chunk also stops once its rows take this many bytes on the wire ("64MiB", "1GB" or a
    # number): wide or multi-MB rows cannot make a chunk of gigabytes.
    chunk_bytes: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=1024)
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
    bootstrap_servers: str | None = None  # "host:port[,host:port]" of the user's Kafka


class NotificationsConfig(_Section):
    kafka_topic: str | None = None  # also publish notifications here (needs kafka.bootstrap_servers)


class SinkConfig(_Section):
    type: Literal["jsonl", "iceberg", "kafka", "null"] = "jsonl"
    path: str = "dblog-data/changes.jsonl"  # jsonl only
    batch_rows: int = Field(50_000, ge=1)  # commit (flush the sink) once this many changes wait
    kafka: KafkaSinkSettings = Field(default_factory=KafkaSinkSettings)  # [sink.kafka], type = "kafka" only


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


class Config(_Section):
    name: str = "dblog"  # the connector's name: Debezium's `source.name` and the Kafka signal key
    source: SourceConfig = Field(default_factory=SourceConfig)
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    signals: SignalsConfig = Field(default_factory=SignalsConfig)
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    sink: SinkConfig = Field(default_factory=SinkConfig)
    spark: SparkSettings = Field(default_factory=SparkSettings)  # the Iceberg sink's (dblog.sinks.iceberg.settings)
    iceberg: IcebergSettings = Field(default_factory=IcebergSettings)
    offsets: OffsetsConfig = Field(default_factory=OffsetsConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    # SIGTERM / SIGINT: how long `dblog run` may take to stop cleanly (finish the transaction
    # being read, flush the sink, commit the offsets) before it exits at once without committing.
    stop_timeout_seconds: float = Field(30.0, gt=0)

    def commit_interval_seconds(self) -> float:
        if self.offsets.commit_interval_seconds is not None:
            return self.offsets.commit_interval_seconds
        return 10.0 if self.sink.type == "iceberg" else 1.0

    def signal_table(self) -> TableId | None:
        return TableId.parse(self.signals.table) if self.signals.table else None

    def check_secrets(self) -> list[str]:
        """Every secret setting resolved once (dblog.runtime.secrets), before anything connects:
        the settings given; a ConfigError naming each unset variable or unreadable file."""
        try:
            return check_secrets(self)
        except SecretError as error:
            raise ConfigError(str(error)) from None


def load_config(path: str | os.PathLike) -> Config:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    return parse_config(data, origin=str(path))


def parse_config(data: dict, origin: str = "config") -> Config:
    try:
        config = Config.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        )
        raise ConfigError(f"{origin}: {problems}") from None
    if config.snapshot.watermarks != "gtid" and config.signals.table is None:
        raise ConfigError(
            f"{origin}: snapshot.watermarks = {config.snapshot.watermarks!r} writes watermark rows into the "
            "signal table: set signals.table"
        )
    if config.snapshot.distributed and config.sink.type != "iceberg":
        raise ConfigError(
            f"{origin}: snapshot.distributed = true has Spark tasks read the snapshot into the Iceberg sink's staging "
            f'area: it needs sink.type = "iceberg" (the sink is {config.sink.type!r}); remove snapshot.distributed'
        )
    uses_kafka = [
        name for name, topic in (("signals.kafka_topic", config.signals.kafka_topic),
                                 ("notifications.kafka_topic", config.notifications.kafka_topic),
                                 ('sink.type = "kafka"', config.sink.type == "kafka")) if topic
    ]
    if uses_kafka and not config.kafka.bootstrap_servers:
        verb = "needs" if len(uses_kafka) == 1 else "need"
        raise ConfigError(f"{origin}: {' and '.join(uses_kafka)} {verb} kafka.bootstrap_servers = \"host:port\"")
    return config
