"""Sending signals the way a user would by hand: a plain INSERT into the signal table, or a
plain Kafka message keyed by the connector's name."""

from __future__ import annotations

import json

import pymysql
import pymysql.cursors

from dblog.core.events import TableId
from dblog.core.sql import quote_identifier
from dblog.runtime.config import Config, ConfigError


def send_signal(config: Config, via: str, signal_type: str, data: dict, signal_id: str) -> str:
    if via == "kafka":
        if not config.signals.kafka_topic or not config.kafka.bootstrap_servers:
            raise ConfigError("no Kafka signal topic configured: set signals.kafka_topic and kafka.bootstrap_servers")
        from dblog.runtime.kafka_access import kafka_failure_explained
        from dblog.sinks.kafka.security import client_options
        from dblog.signals.kafka_channel import send_signal as send_kafka

        bootstrap, security = config.kafka.bootstrap_servers, config.kafka.security()
        with kafka_failure_explained(bootstrap, security, f"the signal topic {config.signals.kafka_topic!r}"):
            send_kafka(bootstrap, config.signals.kafka_topic, config.name, signal_type, data, signal_id,
                       client_options=client_options(security))
        return signal_id
    return send_via_table(config, signal_type, data, signal_id)


def send_via_table(config: Config, signal_type: str, data: dict, signal_id: str) -> str:
    table = config.signal_table()
    if table is None:
        raise ConfigError("no signal table configured: set signals.table = \"db.table\" in the config")
    connection = config.source.connection_settings().connect(program_name="dblog-signal")
    try:
        with connection.cursor() as cursor:
            insert_signal(cursor, table, signal_id, signal_type, data)
    finally:
        connection.close()
    return signal_id


def insert_signal(cursor: pymysql.cursors.Cursor, table: TableId, signal_id: str, signal_type: str, data: dict) -> None:
    """One row of the signal table (`SIGNAL_TABLE_DDL`): a user's signal, or the engine's own
    watermark markers (`SnapshotReads.write_signal`)."""
    cursor.execute(
        f"INSERT INTO {quote_identifier(table.db)}.{quote_identifier(table.table)} (id, type, data) VALUES (%s, %s, %s)",
        (signal_id, signal_type, json.dumps(data)),
    )


SIGNAL_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} "
    "(id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL)"
)
