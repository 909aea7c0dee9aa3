"""How the differential tests read and compare Debezium's records and dblog's: a change
envelope's comparable parts, headers and JSON parsed, a topic's records so decoded, statements
run as the tests run them. Shared by test_connect_differential.py,
test_connect_snapshot_differential.py (Kafka Connect) and
test_debezium_transaction_differential.py (Debezium embedded, `lab.debezium_reference`)."""

from __future__ import annotations

import json

from support.kafka_topics import topic_names, topic_records

RUN_ID_HEADER = "__debezium.context.runId"  # a new id at each start, in both: its value is not compared
# `source` fields compared for every record, and for the streamed changes only.
SOURCE_ALWAYS = ("connector", "name", "db", "table", "sequence", "thread", "query")
SOURCE_STREAMED = ("snapshot", "server_id", "file", "row")


def run_statements(mariadb, statements: list[str]) -> None:
    """Each statement on its own (autocommit), in a session that accepts the every-type rows."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET sql_mode = ''")  # zero dates and the invalid ENUM member
        cursor.execute("SET time_zone = '+00:00'")
        for statement in statements:
            cursor.execute(statement)


def comparable_change(key, value, streamed: bool = True) -> tuple:
    """The parts of a change record both must write alike (the tests' MAY_DIFFER says what not):
    the key, the value's whole Connect schema, its fields' names, before, after, transaction, op
    and the `source` fields of SOURCE_ALWAYS (and SOURCE_STREAMED for a streamed change)."""
    if value is None:
        return key, None
    payload, schema = value["payload"], value["schema"]
    source = payload["source"]
    compared = SOURCE_ALWAYS + (SOURCE_STREAMED if streamed else ())
    return key, {
        "schema": schema,
        "fields": list(payload),
        "source fields": list(source),
        "before": payload["before"],
        "after": payload["after"],
        "transaction": payload["transaction"],
        "op": payload["op"],
        "source": {name: source[name] for name in compared},
        "timestamps": [type(payload[name]).__name__ for name in ("ts_ms", "ts_us", "ts_ns")],
    }


def parsed_headers(headers) -> list[tuple[str, object]]:
    """The headers (name, JSON text or bytes), parsed, in order; the run id's value replaced."""
    return [(name, "<run id>" if name == RUN_ID_HEADER else json.loads(value)) for name, value in headers]


def parsed_json(data: bytes | None):
    """A key or value as JsonConverter wrote it; None for a tombstone (or a null key)."""
    return None if data is None else json.loads(data)


def decoded(record) -> tuple:
    """A consumer record as (key, value, headers), each parsed as JsonConverter wrote it."""
    return parsed_json(record.key), parsed_json(record.value), parsed_headers(record.headers)


def decoded_records(bootstrap: str, topic: str) -> list[tuple]:
    """Every record of `topic` (one partition), `decoded`."""
    return [decoded(record) for record in topic_records(bootstrap, topic)[0]]


def present_records(bootstrap: str, topics) -> dict[str, list[tuple]]:
    """`decoded_records` of each of `topics` that exists (a topic no record was written to may not)."""
    present = topic_names(bootstrap)
    return {topic: decoded_records(bootstrap, topic) for topic in topics if topic in present}
