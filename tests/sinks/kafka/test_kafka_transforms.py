"""sink.kafka.transforms on the private Apache Kafka broker and MariaDB, where the differential test
against Debezium (schemas on, fixed topics) does not reach: records without the schema part
(unwrap's null payload is JSON `null`, not a tombstone, as Kafka Connect's JsonConverter writes
it), schema-change records through the chain, topics chosen by a column (route_by_field) created
as they come, a routed topic name Kafka would refuse."""

from __future__ import annotations

import json
import uuid

import pytest
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

from dblog.sinks.kafka.encoding import CONTEXT_HEADER

pytestmark = pytest.mark.timeout(300)


def _engine(mariadb, broker, database, tmp_path, name, transforms, **kafka):
    config = make_config(mariadb, database, tmp_path, name=name, snapshot={"startup": "never"},
                         source={"include": [f"{database}\\.(orders|items)"]},
                         kafka={"bootstrap_servers": broker.bootstrap},
                         sink={"type": "kafka", "kafka": {"transforms": transforms, **kafka}})
    return EngineThread(config)


def test_unwrap_without_schemas_and_a_router_sharing_one_topic(mariadb, broker, database, tmp_path):
    name = f"x{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    mariadb.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, note VARCHAR(20))")
    transforms = [{"type": "unwrap", "add_headers": "op,table"},
                  {"type": "regex_router", "regex": rf"{name}\.([^.]+)\.(orders|items)", "replacement": f"{name}.$1.all"}]
    engine = _engine(mariadb, broker, database, tmp_path, name, transforms, skipped_operations="none")
    try:
        mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (1, 'a'), (2, 'b')")
        mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1, 'i')")
        mariadb.execute(f"DELETE FROM `{database}`.orders WHERE id = 2")
        mariadb.execute(f"TRUNCATE TABLE `{database}`.items")
        mariadb.execute(f"ALTER TABLE `{database}`.orders ADD COLUMN extra INT")
        engine.until_caught_up()
    finally:
        engine.stop()
    records = topic_records(broker.bootstrap, f"{name}.{database}.all")[0]
    got = [(json.loads(r.key), r.value, {k: json.loads(v) for k, v in r.headers if not k.startswith(CONTEXT_HEADER)})
           for r in records]
    assert all(name.startswith(CONTEXT_HEADER) for r in records for name, _ in r.headers[:4])  # then unwrap's
    assert got == [
        ({"id": 1}, b'{"id":1,"note":"a"}', {"__op": "c", "__table": "orders"}),
        ({"id": 2}, b'{"id":2,"note":"b"}', {"__op": "c", "__table": "orders"}),
        ({"id": 1}, b'{"id":1,"note":"i"}', {"__op": "c", "__table": "items"}),
        # the delete: a null payload (Kafka Connect's JsonConverter writes `null`); its tombstone
        # and the truncate are dropped
        ({"id": 2}, b"null", {"__op": "d", "__table": "orders"}),
    ]
    # the schema change passes unwrap unchanged, on the schema change topic (the router does not match it)
    # (after the start-up records of Debezium's snapshot, which pass it too)
    changes = [json.loads(r.value) for r in topic_records(broker.bootstrap, name)[0]]
    assert changes[0]["ddl"].startswith("SET character_set_server=")
    assert [change["ddl"] for change in changes if change["source"]["snapshot"] == "false"] == [
        f"ALTER TABLE `{database}`.orders ADD COLUMN extra INT"]


def test_route_by_field_creates_the_topics_a_column_names(mariadb, broker, database, tmp_path):
    name = f"r{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY, region VARCHAR(40))")
    eu, us = f"{name}-eu", f"{name}-us"
    transforms = [{"type": "unwrap", "route_by_field": "region", "delete_tombstone_handling_mode": "rewrite"}]
    engine = _engine(mariadb, broker, database, tmp_path, name, transforms, schemas=True)
    try:
        mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (1, '{eu}'), (2, '{us}'), (3, NULL)")
        mariadb.execute(f"DELETE FROM `{database}`.orders WHERE id = 1")
        engine.until_caught_up()
    finally:
        engine.stop()

    def rows(topic):
        return [json.loads(r.value)["payload"] for r in topic_records(broker.bootstrap, topic)[0]]

    assert rows(eu) == [{"id": 1, "region": eu, "__deleted": "false"}, {"id": 1, "region": eu, "__deleted": "true"}]
    assert rows(us) == [{"id": 2, "region": us, "__deleted": "false"}]
    assert rows(f"{name}.{database}.orders") == [{"id": 3, "region": None, "__deleted": "false"}]  # null: stays


def test_route_by_field_on_a_column_that_is_no_string_stops_dblog_even_on_a_null(mariadb, broker, database,
                                                                                 tmp_path):
    """Debezium's Struct.getString checks the field's type before its value: a null in an INT
    column fails too (the schema is consulted even without sink.kafka.schemas)."""
    mariadb.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY, region INT)")
    engine = _engine(mariadb, broker, database, tmp_path, f"n{uuid.uuid4().hex[:6]}",
                     [{"type": "unwrap", "route_by_field": "region"}])
    try:
        mariadb.execute(f"INSERT INTO `{database}`.orders VALUES (1, NULL)")
        engine.eventually(lambda: engine.error is not None or not engine._thread.is_alive(), timeout=60)
    finally:
        engine.stop()
    assert "route_by_field 'region' is not a string column" in str(engine.error)


def test_a_routed_topic_kafka_would_refuse_stops_dblog_before_writing(mariadb, broker, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.orders (id INT PRIMARY KEY)")
    transforms = [{"type": "regex_router", "regex": "(.*)", "replacement": "$1/bad"}]
    config = make_config(mariadb, database, tmp_path, name="bad", snapshot={"startup": "never"},
                         source={"include": [f"{database}\\.orders"]}, kafka={"bootstrap_servers": broker.bootstrap},
                         sink={"type": "kafka", "kafka": {"transforms": transforms}})
    from dblog.runtime.engine import Engine
    from dblog.sinks.base import SinkError

    with pytest.raises(SinkError, match=r"routed by sink.kafka.transforms would be .*'/'"):
        Engine(config).start()
