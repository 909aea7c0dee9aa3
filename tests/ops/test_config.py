"""Bad configuration stops with a message naming the key, and a non-zero exit."""

import subprocess
import sys

import pytest

from dblog.core.events import TableId
from dblog.runtime.config import ConfigError, parse_config


def test_commit_interval_defaults_to_ten_seconds_for_iceberg():
    assert parse_config({}).commit_interval_seconds() == 1.0
    assert parse_config({"sink": {"type": "iceberg"}}).commit_interval_seconds() == 10.0
    assert parse_config({"sink": {"type": "iceberg"}, "offsets": {"commit_interval_seconds": 3}}).commit_interval_seconds() == 3


def test_defaults_and_table_patterns():
    config = parse_config({"source": {"include": [r"shop\..*"], "exclude": [r"shop\.tmp_.*"]}})
    assert config.snapshot.chunk_size == 1024 and config.snapshot.startup == "initial"
    assert config.snapshot.chunk_bytes == 64 * 1024 * 1024
    assert parse_config({"snapshot": {"chunk_bytes": "16MiB"}}).snapshot.chunk_bytes == 16 * 1024 * 1024
    assert config.snapshot.max_chunk_size is None and config.snapshot.chunk_rows_cap() == 65_536
    assert config.snapshot.max_chunk_seconds == 0.5
    assert parse_config({"snapshot": {"chunk_size": 100_000}}).snapshot.chunk_rows_cap() == 100_000
    fixed = parse_config({"snapshot": {"chunk_size": 500, "max_chunk_size": 500, "max_chunk_seconds": 2}}).snapshot
    assert (fixed.chunk_rows_cap(), fixed.max_chunk_seconds) == (500, 2.0)
    assert config.source.includes(TableId("shop", "orders"))
    assert not config.source.includes(TableId("shop", "tmp_x"))
    assert not config.source.includes(TableId("other", "orders"))
    # The system schemas never, whatever the patterns: mysql.user / mysql.global_priv rows hold
    # password hashes (issue 36, item 7; Debezium's table.ignore.builtin).
    every_table = parse_config({"source": {"include": [r".*\..*", r"mysql\.global_priv"]}}).source
    assert every_table.includes(TableId("shop", "orders"))
    for table in ("mysql.global_priv", "mysql.user", "MySQL.user", "sys.sys_config", "performance_schema.threads",
                  "information_schema.TABLES"):
        assert not every_table.includes(TableId.parse(table)), table


@pytest.mark.parametrize(
    "data, message",
    [
        ({"source": {"port": "abc"}}, "source.port"),
        ({"source": {"prot": 3306}}, "source.prot"),
        ({"snapshot": {"chunk_size": 0}}, "snapshot.chunk_size"),
        ({"snapshot": {"chunk_bytes": "12 parsecs"}}, "snapshot.chunk_bytes"),
        ({"snapshot": {"chunk_bytes": 100}}, "snapshot.chunk_bytes"),
        ({"snapshot": {"startup": "sometimes"}}, "snapshot.startup"),
        ({"snapshot": {"max_chunk_size": 100}}, "snapshot.max_chunk_size: 100 is smaller than snapshot.chunk_size"),
        ({"snapshot": {"max_chunk_size": 0}}, "snapshot.max_chunk_size"),
        ({"snapshot": {"max_chunk_seconds": 0}}, "snapshot.max_chunk_seconds"),
        ({"snapshot": {"max_chunk_seconds": "nan"}}, "snapshot.max_chunk_seconds"),
        ({"snapshot": {"max_chunk_seconds": "fast"}}, "snapshot.max_chunk_seconds"),
        ({"source": {"include": ["shop\\.(orders"]}}, "not a valid regular expression"),
        ({"signals": {"table": "nodot"}}, "database.table"),
        ({"snapshot": {"watermarks": "insert_insert"}}, "set signals.table"),
        ({"snapshot": {"initial_markers": True, "startup": "never"}},
         'snapshot.initial_markers = true marks the rows of the startup snapshot, but snapshot.startup = "never"'),
        ({"snapshot": {"initial_markers": "sometimes"}}, "snapshot.initial_markers"),
        ({"sink": {"type": "iceberg"}, "snapshot": {"distributed": True, "initial_markers": True}},
         "snapshot.initial_markers = true marks the rows of the startup snapshot, but snapshot.distributed"),
        ({"iceberg": {"routes": [{"tables": ["a\\.b"], "ignore": ["upsert"]}]}}, "iceberg.routes.0.ignore"),
        ({"iceberg": {"routes": [{"tables": ["a\\.b"], "target": "no_dot"}]}}, "iceberg.routes.0.target"),
        ({"iceberg": {"maintenance": {"keep_snapshots": 0}}}, "iceberg.maintenance.keep_snapshots"),
        ({"iceberg": {"changelog": "yes please"}}, "iceberg.changelog"),
        ({"iceberg": {"write_mode": "replace"}}, "iceberg.write_mode"),
        ({"sink": {"type": "parquet"}}, "sink.type"),
        ({"sink": {"type": "kafka"}}, 'sink.type = "kafka" needs kafka.bootstrap_servers'),
        ({"sink": {"kafka": {"topic": "{name}.{db}"}}}, "sink.kafka.topic: '{name}.{db}' has no {table}"),
        ({"sink": {"kafka": {"topic": "{name}.{schema}.{table}"}}}, "unknown placeholder {schema}"),
        ({"sink": {"kafka": {"topic": "{name}/{db}.{table}"}}}, "holds '/'"),
        ({"sink": {"kafka": {"topic": "{table!r}"}}}, "unknown placeholder {table}"),
        ({"sink": {"kafka": {"topic": "{table"}}}, "not a valid pattern"),
        ({"sink": {"kafka": {"schema_change_topic": "{name}.{db}"}}}, "sink.kafka.schema_change_topic"),
        ({"sink": {"kafka": {"schema_change_topic": ""}}}, "set schema_changes = false"),
        ({"sink": {"kafka": {"acks": 0}}}, "sink.kafka.acks"),
        ({"sink": {"kafka": {"partitions": 0}}}, "sink.kafka.partitions"),
        ({"sink": {"kafka": {"delivery_timeout_seconds": 0}}}, "sink.kafka.delivery_timeout_seconds"),
        ({"sink": {"kafka": {"tombstone": False}}}, "sink.kafka.tombstone"),
    ],
)
def test_bad_values_are_named(data, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_config(data)


def test_password_from_environment(monkeypatch):
    config = parse_config({"source": {"password_env": "DBLOG_TEST_PW"}})
    with pytest.raises(ConfigError, match="DBLOG_TEST_PW"):
        config.source.resolved_password()
    monkeypatch.setenv("DBLOG_TEST_PW", "s3cret")
    assert config.source.resolved_password() == "s3cret"
    assert "s3cret" not in repr(config)


def test_cli_exits_non_zero_with_the_message(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[snapshot]\nchunk_size = -5\n")
    result = subprocess.run(
        [sys.executable, "-m", "dblog.cli", "run", "--config", str(bad)], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "snapshot.chunk_size" in result.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "dblog.cli", "run", "--config", str(tmp_path / "none.toml")],
        capture_output=True, text=True,
    )
    assert missing.returncode != 0 and "does not exist" in missing.stderr


def test_kafka_sink_defaults_follow_debezium_and_name_topics_like_it():
    config = parse_config({"name": "shop", "kafka": {"bootstrap_servers": "k:9092"}, "sink": {"type": "kafka"}})
    kafka = config.sink.kafka
    assert (kafka.schemas, kafka.tombstones, kafka.schema_changes, kafka.acks) == (False, True, True, "all")
    assert kafka.table_topic(config.name, TableId("inventory", "orders")) == "shop.inventory.orders"
    assert kafka.table_topic(config.name, TableId("my db", "ördérs")) == "shop.my_db._rd_rs"  # as Debezium sanitizes
    assert kafka.schema_topic(config.name) == "shop"
    custom = parse_config({"sink": {"kafka": {"topic": "cdc-{db}_{table}", "schema_change_topic": "{name}.ddl"}}})
    assert custom.sink.kafka.table_topic("x", TableId("a", "b")) == "cdc-a_b"
    assert custom.sink.kafka.schema_topic("x") == "x.ddl"
