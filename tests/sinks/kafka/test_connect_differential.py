"""The drop-in differential against Debezium in Kafka Connect: one connector JSON, given as it is
to a real Kafka Connect worker running Debezium 3.6's MySQL connector (`lab.kafka_connect`,
distributed mode, on the `connect_broker`), and to dblog through `dblog convert-debezium`'s
`convert` (run in this process, writing to `dblog_broker`, a broker of this module's own: the
run's broker is Connect's). Both have the same topic prefix, each on its own broker, so topic
names, schema names and `source.name` are compared as they are.

Both stream from the present position (`snapshot.mode=no_data`) through the same transactions:
inserts in a multi-table transaction, updates, a delete (its tombstone), a key change (delete,
tombstone, create with Debezium's `__debezium.newkey` / `oldkey` headers), a keyless table's
rows, `ALTER TABLE`, `CREATE TABLE`, rows after each, `TRUNCATE` (skipped by default, in both).

Compared, record by record in order, as a Kafka consumer reads them from each broker:

* every data topic: keys, values (with schemas: their whole Connect schemas), headers (the
  connector sets `header.converter` to the JsonConverter, so both write the key-change and
  context headers as JSON), tombstones;
* the schema change topic (`<prefix>`): keys and values whole, but for the fields in IGNORED;
* the heartbeat topic (`__debezium-heartbeat.<prefix>`): topic, key, value schema and fields, no
  headers; how many and when differ (IGNORED);
* the transaction topic (`<prefix>.transaction`, `provide.transaction.metadata=true`): Debezium's
  MySQL connector writes none on MariaDB (docs/debezium.md, "What still differs"), so Connect's
  topic must stay empty; dblog's BEGIN / END records are compared with Debezium's own
  TransactionMonitor by test_debezium_transaction_differential.py.

Parametrized with the converters' `schemas.enable` true (the worker's default) and false. A
second test streams the every-type table (tests/support/every_type.py) under Debezium's value
switches (`support.every_type.DEBEZIUM_SETTINGS`), a third Debezium's column options
(test_connect_snapshot_differential.py compares dblog's snapshot rows of both against the
connector's streamed creates, and Debezium's own snapshots). Another compares the schema change
topic over more DDL, from the connector's start-up (`snapshot.mode` no_data and initial: the
start-up records describing each captured table, a second database dropped whole) to a restart of dblog, which writes no start-up records again.
Another configures transform chains (`transforms.*`: ExtractNewRecordState, ByLogicalTableRouter,
RegexRouter) in the connector JSON: the worker applies them, dblog's Kafka sink applies what
`convert` makes of them (`sink.kafka.transforms`); every record of the routed topics is compared.
The last reads a backlog over ALTERs after a restart of both (the connector stopped and resumed
through Connect's REST API: Debezium's schema history is its `schema.history.internal.kafka.topic`).
One worker per test process (the session fixture `kafka_connect`: ~10-20 s to start), one
connector per case (5-15 s each; the schema change cases ~25 s).

Only two settings of the JSON are not the user's, each named where it is changed: the rig's
MariaDB fix (RIG_ONLY: Connect only) and the replica server id (dblog's own: both read the binlog
at once).
"""

from __future__ import annotations

import json
import uuid

import pytest
from support import eventually
from support.debezium_columns import CHANGES as COLUMN_CHANGES
from support.debezium_columns import EXPECTED as COLUMN_EXPECTED
from support.debezium_columns import INSERTS as COLUMN_INSERTS
from support.debezium_columns import TABLES as COLUMN_TABLES
from support.debezium_columns import options as column_options
from support.debezium_records import decoded_records
from support.differences import differences
from support.every_type import (DEBEZIUM_SETTINGS, insert_sql, debezium_columns, debezium_rows,
                                debezium_updates)
from support.fixtures.connect import dblog_config, debezium_connector, json_converters
from support.harness import EngineThread
from support.kafka_topics import topic_names, topic_records

from dblog.runtime.config import parse_config

pytestmark = pytest.mark.timeout(600)

# What is not compared, and why (docs/debezium.md, "What still differs"). Paths are of the payload.
IGNORED = {
    "ts_ms, ts_us, ts_ns": "when each wrote the record (their presence and types are compared)",
    "source.version": "dblog's version, not Debezium's",
    "source.ts_ms, ts_us, ts_ns of the schema change topic's start-up records": "when each read the schema (of "
                                                                               "streamed records: the binlog "
                                                                               "event's time in both, compared)",
    "source.gtid": "Debezium's MySQL connector writes null on MariaDB, dblog the MariaDB GTID (as Debezium's MariaDB "
                   "connector does)",
    "source.pos": "Debezium writes where the rows event starts, dblog where it ends (its header's log_pos)",
    "source.file of the schema change topic's start-up records": "where each found the binlog's end when it started",
    "transaction": "Debezium's MySQL connector writes null on MariaDB (no transaction metadata: it waits for a BEGIN "
                   "query where MariaDB logs a GTID event); dblog writes the block",
    "header __debezium.context.runId's value": "a new id at each start, in both",
    "heartbeats' count and payload ts_ms": "each writes its clock's time, Debezium at binlog events past the "
                                          "interval, dblog also when idle",
    "the schema change test's source fields but SCHEMA_CHANGE_SOURCE": "file, pos, gtid, ts_*: as above, of "
                                                                      "streamed DDL too (the streaming test "
                                                                      "compares its file)",
}

TABLES = {
    "orders": "id INT PRIMARY KEY, label VARCHAR(20), amount DECIMAL(8,2), at DATETIME(3), flag TINYINT(1), "
              "data VARBINARY(8)",
    "lines": "order_id INT NOT NULL, n INT NOT NULL, qty BIGINT UNSIGNED, PRIMARY KEY (order_id, n)",
    "notes": "body TEXT, stamp TIMESTAMP NULL",  # no key: null keys, no tombstones
}


def _workload(db: str) -> list[list[str]]:
    """Transactions (each a list of statements)."""
    return [
        [f"INSERT INTO `{db}`.orders VALUES (1, 'one', 1.50, '2024-01-02 03:04:05.678', 1, X'00ff'),"
         " (2, 'two', -2.25, NULL, 0, NULL), (3, 'three', NULL, '1970-01-01 00:00:00', NULL, X'')",
         f"INSERT INTO `{db}`.lines VALUES (1, 1, 18446744073709551615), (1, 2, 0), (2, 1, NULL)",
         f"INSERT INTO `{db}`.notes VALUES ('first', '2024-06-01 12:00:00'), (NULL, NULL)"],
        [f"UPDATE `{db}`.orders SET label = 'uno', amount = amount * 2 WHERE id = 1"],
        [f"DELETE FROM `{db}`.orders WHERE id = 2"],
        [f"UPDATE `{db}`.orders SET id = 30 WHERE id = 3"],  # a key change
        [f"UPDATE `{db}`.lines SET qty = qty + 1 WHERE order_id = 1 AND n = 2",
         f"DELETE FROM `{db}`.lines WHERE order_id = 2"],
        [f"UPDATE `{db}`.notes SET body = 'second' WHERE body IS NULL"],
        [f"DELETE FROM `{db}`.notes WHERE body = 'first'"],
        [f"ALTER TABLE `{db}`.orders ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'n/a' AFTER label"],
        [f"INSERT INTO `{db}`.orders (id, label) VALUES (4, 'four')"],
        [f"CREATE TABLE `{db}`.later (id BIGINT PRIMARY KEY, v ENUM('a','b') DEFAULT 'b')"],
        [f"INSERT INTO `{db}`.later (id) VALUES (1)", f"UPDATE `{db}`.orders SET note = 'x' WHERE id = 4"],
        [f"TRUNCATE TABLE `{db}`.lines"],  # skipped.operations=t (the default): no record in either
    ]


SCHEMAS = {"schemas": "true", "no-schemas": "false"}


def _connector_json(mariadb, bootstrap: str, prefix: str, database: str, schemas: str) -> dict[str, str]:
    """The connector's JSON, as a user writes it (and POSTs it to Kafka Connect)."""
    return debezium_connector(mariadb, bootstrap, prefix, **{
        "database.include.list": database,
        "snapshot.mode": "no_data",
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        "provide.transaction.metadata": "true",
        "heartbeat.interval.ms": "200",
        **json_converters(schemas),
    })


def _payload(document, schemas: bool):
    return document["payload"] if schemas and document is not None else document


def _normalised(document, schemas: bool, startup: bool = False):
    """`document` (a key or value) without the fields of IGNORED; its schema part, if any, whole."""
    if document is None:
        return None
    payload = _payload(document, schemas)
    if isinstance(payload, dict) and "source" in payload:
        payload = dict(payload)
        for name in ("ts_ms", "ts_us", "ts_ns"):
            if name in payload:
                payload[name] = type(payload[name]).__name__
        if "transaction" in payload:
            payload["transaction"] = "<ignored>"
        source = payload["source"] = dict(payload["source"])
        for name in ("version", "gtid", "pos", *(("file", "ts_ms", "ts_us", "ts_ns") if startup else ())):
            if name in source:
                source[name] = "<ignored>"
    return {"schema": document["schema"], "payload": payload} if schemas else payload


CONNECT = "Connect"  # the reference, as differences() names it


def _compare_topic(ours: list[tuple], theirs: list[tuple], schemas: bool, topic: str, startup=lambda value: False):
    problems = []
    if len(ours) != len(theirs):
        problems.append(f"{topic}: {len(ours)} records from dblog, {len(theirs)} from Connect:\n  dblog "
                        + "\n  dblog ".join(map(repr, ours)) + "\n  Connect " + "\n  Connect ".join(map(repr, theirs)))
    for index, ((our_key, our_value, our_headers), (their_key, their_value, their_headers)) in enumerate(
            zip(ours, theirs)):
        at = f"{topic}[{index}]"
        problems += differences(_normalised(our_key, schemas), _normalised(their_key, schemas), f"{at}.key", CONNECT)
        is_startup = startup(_payload(their_value, schemas))
        problems += differences(_normalised(our_value, schemas, is_startup),
                                _normalised(their_value, schemas, is_startup), f"{at}.value", CONNECT)
        problems += differences(our_headers, their_headers, f"{at}.headers", CONNECT)
    return problems


def _is_startup(payload) -> bool:
    source = payload.get("source") if isinstance(payload, dict) else None  # none in a row unwrap made
    return isinstance(source, dict) and source.get("snapshot") not in (None, "false")


def _run(mariadb, transactions: list[list[str]]) -> None:
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET sql_mode = ''")  # the every-type rows' zero dates and invalid ENUM member
        cursor.execute("SET time_zone = '+00:00'")
        for statements in transactions:
            cursor.execute("BEGIN")
            for statement in statements:
                cursor.execute(statement)
            cursor.execute("COMMIT")


class Run:
    """What one connector JSON made each side write: `ours` / `theirs` per topic (data topics and
    the schema change topic), and each side's heartbeats."""

    def __init__(self, ours: dict, theirs: dict, our_beats: list, their_beats: list) -> None:
        self.ours, self.theirs, self.our_beats, self.their_beats = ours, theirs, our_beats, their_beats



def _run_both(mariadb, database: str, broker, connect_broker, kafka_connect, tmp_path, connector: dict[str, str],
              tables: list[str], transactions: list[list[str]], topics: list[str] | None = None) -> Run:
    """Register `connector` with the Connect worker and run dblog on its conversion, both streaming
    from the present position; run `transactions`; read back the topics of `tables` (or `topics`,
    where transforms route them) and the schema change topic from each broker, once Connect has
    written as many records as dblog."""
    prefix = connector["topic.prefix"]
    name = f"{prefix}-connector"  # the connector's name, not its topic prefix, as users name them
    mariadb.execute(f"CREATE TABLE IF NOT EXISTS `{database}`.uncaptured_beat (n INT)")
    connector = {**connector, "table.exclude.list": rf"{database}\.uncaptured_beat"}
    kafka_connect.create(name, connector)
    engine = None
    try:
        kafka_connect.wait_running(name)
        eventually(lambda: prefix in topic_names(connect_broker.bootstrap)
                   and decoded_records(connect_broker.bootstrap, prefix),
                   message="Connect's start-up schema change records (its binlog position is taken)")
        engine = EngineThread(parse_config(dblog_config(connector, name, broker.bootstrap, tmp_path)))
        eventually(lambda: prefix in topic_names(broker.bootstrap) and decoded_records(broker.bootstrap, prefix),
                   message="dblog's start-up schema change records")

        _run(mariadb, transactions)

        def beat(bootstrap: str):
            topic = f"__debezium-heartbeat.{prefix}"
            if topic in topic_names(bootstrap):
                return decoded_records(bootstrap, topic)
            mariadb.execute(f"INSERT INTO `{database}`.uncaptured_beat VALUES (1)")  # an event to beat at
            return None

        their_beats = eventually(lambda: beat(connect_broker.bootstrap), message="a heartbeat from Connect")
        our_beats = eventually(lambda: beat(broker.bootstrap), message="a heartbeat from dblog")
        engine.until_caught_up()
        engine.stop()

        ours = {topic: decoded_records(broker.bootstrap, topic)
                for topic in [prefix, *(topics or (f"{prefix}.{database}.{table}" for table in tables))]}

        def counts(bootstrap: str) -> dict[str, int]:
            return {topic: len(decoded_records(bootstrap, topic)) for topic in ours if topic in topic_names(bootstrap)}

        def caught_up():
            present = topic_names(connect_broker.bootstrap)
            theirs = {topic: decoded_records(connect_broker.bootstrap, topic) for topic in ours if topic in present}
            return theirs if all(len(theirs.get(topic, [])) >= len(records) for topic, records in ours.items()) \
                else None

        theirs = eventually(caught_up, timeout=120, message=lambda: "Connect's records, as many as dblog's: "
                            f"{counts(broker.bootstrap)}; Connect's: {counts(connect_broker.bootstrap)}, "
                            f"its status: {kafka_connect.status(name)}")
    finally:
        if engine is not None:
            engine.stop()
        kafka_connect.delete(name)
    return Run(ours, theirs, our_beats, their_beats)


def _problems(run: Run, schemas: bool) -> list[str]:
    problems = []
    for topic in run.ours:
        problems += _compare_topic(run.ours[topic], run.theirs[topic], schemas, topic, startup=_is_startup)
    # heartbeats: key, value schema and fields, headers (none); not their count nor time
    (our_key, our_value, our_headers), (their_key, their_value, their_headers) = run.our_beats[0], run.their_beats[0]
    problems += differences(our_key, their_key, "heartbeat.key", CONNECT)
    if schemas:
        problems += differences(our_value["schema"], their_value["schema"], "heartbeat.value.schema", CONNECT)
    problems += differences(list(_payload(our_value, schemas)), list(_payload(their_value, schemas)),
                            "heartbeat.value.payload fields", CONNECT)
    problems += differences(our_headers, their_headers, "heartbeat.headers", CONNECT)
    return problems


@pytest.mark.parametrize("schemas", list(SCHEMAS))
def test_dblog_writes_what_debezium_in_kafka_connect_writes(schemas, mariadb, database, dblog_broker, connect_broker,
                                                            kafka_connect, tmp_path):
    with_schemas = SCHEMAS[schemas] == "true"
    prefix = f"p{uuid.uuid4().hex[:6]}"
    for table, columns in TABLES.items():
        mariadb.execute(f"CREATE TABLE `{database}`.{table} ({columns})")
    connector = _connector_json(mariadb, connect_broker.bootstrap, prefix, database, SCHEMAS[schemas])
    run = _run_both(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, connector,
                    [*TABLES, "later"], _workload(database))

    # a check of the check: the workload's records are there (3 tables + 1 created later)
    ours = run.ours
    assert sum(len(records) for topic, records in ours.items() if topic != prefix) >= 20
    assert any(value is None for _, value, _ in ours[f"{prefix}.{database}.orders"])  # tombstones
    assert any(h for _, _, headers in ours[f"{prefix}.{database}.orders"] for h in headers
               if h[0] == "__debezium.newkey")
    problems = _problems(run, with_schemas)
    assert not problems, "\n".join(problems)

    # transaction metadata: dblog writes BEGIN / END; Debezium's MySQL connector on MariaDB writes none
    transaction_topic = f"{prefix}.transaction"
    assert decoded_records(dblog_broker.bootstrap, transaction_topic), "dblog's BEGIN / END records"
    assert transaction_topic not in topic_names(connect_broker.bootstrap) \
        or not decoded_records(connect_broker.bootstrap, transaction_topic)


@pytest.mark.parametrize("configuration", list(DEBEZIUM_SETTINGS))
def test_every_type_as_debezium_in_kafka_connect_writes_it(configuration, mariadb, database, dblog_broker, connect_broker,
                                                           kafka_connect, tmp_path):
    """A column of every type Debezium's MySQL connector reads (tests/support/every_type.py), each
    type's edge values and NULLs inserted, updated, deleted, a key change and a TRUNCATE, streamed
    by both, with schemas."""
    prefix = f"v{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.v ({debezium_columns()})")
    connector = _connector_json(mariadb, connect_broker.bootstrap, prefix, database, "true")
    connector.update(DEBEZIUM_SETTINGS[configuration])
    table = f"`{database}`.v"
    transactions = [
        [insert_sql(table, key, row) for key, row in debezium_rows().items()],
        *([f"UPDATE {table} SET {', '.join(f'{c} = {v}' for c, v in row.items())} WHERE id = {key}"]
          for key, row in debezium_updates().items()),
        [f"DELETE FROM {table} WHERE id = 3"],
        [f"UPDATE {table} SET id = 60 WHERE id = 6"],  # a key change: delete, tombstone, create
        [f"TRUNCATE TABLE {table}"],
    ]
    run = _run_both(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, connector, ["v"],
                    transactions)
    assert len(run.ours[f"{prefix}.{database}.v"]) >= len(debezium_rows())  # a check of the check
    problems = _problems(run, schemas=True)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("configuration", ["defaults", "decimal-string-binary-base64"])
def test_column_options_as_debezium_in_kafka_connect_writes_them(configuration, mariadb, database, dblog_broker,
                                                                 connect_broker, kafka_connect, tmp_path):
    """Debezium's column options (tests/support/debezium_columns.py: exclusion, masks, hashes,
    truncation, the source type's parameters, message keys; the columns' defaults; zero dates) in
    the connector JSON, streamed by both, with schemas."""
    prefix = f"c{uuid.uuid4().hex[:6]}"
    for table, columns in COLUMN_TABLES.items():
        mariadb.execute(f"CREATE TABLE `{database}`.{table} ({columns})")
    connector = _connector_json(mariadb, connect_broker.bootstrap, prefix, database, "true")
    connector.update(column_options(database))
    if configuration == "decimal-string-binary-base64":
        connector.update({"decimal.handling.mode": "string", "binary.handling.mode": "base64"})
    statements = [statement.format(db=f"`{database}`") for statement in (*COLUMN_INSERTS, *COLUMN_CHANGES)]
    run = _run_both(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, connector,
                    list(COLUMN_TABLES), [[statement] for statement in statements])
    for table, counts in COLUMN_EXPECTED.items():  # a check of the check: every record is there
        assert len(run.ours[f"{prefix}.{database}.{table}"]) == sum(counts), table
    problems = _problems(run, schemas=True)
    assert not problems, "\n".join(problems)


# --- the schema change topic: start-up records, DDL, a restart -------------------------------------
#
# Compared record by record, in order, keys and values with their whole Connect schemas
# (`io.debezium.connector.mysql.SchemaChangeKey` / `SchemaChangeValue`, `...schema.Change`,
# `.Table`, `.Column`), and headers: the start-up records (`SET`, `DROP TABLE IF EXISTS`, `DROP
# DATABASE IF EXISTS`, `CREATE DATABASE`, `USE`, `CREATE TABLE` with the server's `SHOW CREATE
# TABLE` text and each table described column by column), then CREATE TABLE, ALTER TABLE ADD /
# MODIFY / DROP COLUMN, RENAME TABLE, DROP TABLE and DROP DATABASE read from the binlog, and the
# data records written between them on the renamed table's topics. A restart of dblog writes no
# start-up records again. Of a schema change's `source`, only SCHEMA_CHANGE_SOURCE is compared (the
# rest: IGNORED); of the data records between the DDL, key, value schema, `after` and `op` (the
# rest of them is the streaming test's above).
SCHEMA_CHANGE_SOURCE = ("connector", "name", "snapshot", "db", "sequence", "table", "server_id", "row", "thread",
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


def _ddl_statements(db: str) -> list[str]:
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


def _schema_change_comparable(record: dict | None) -> dict | None:
    if record is None:
        return None
    payload = record["payload"]
    if "tableChanges" not in payload:
        return record
    source = payload["source"]
    return {"schema": record["schema"], "fields": list(payload), "source fields": list(source),
            "source": {name: source[name] for name in SCHEMA_CHANGE_SOURCE},
            **{name: payload[name] for name in ("databaseName", "schemaName", "ddl", "tableChanges")}}


def _started(records_by_topic: dict[str, list[tuple]]) -> bool:
    """Whether the connector's start-up is over: a record says `last` (no_data: the last start-up
    schema change; initial: the snapshot's last row)."""
    return any(value is not None and value["payload"].get("source", {}).get("snapshot") == "last"
               for records in records_by_topic.values() for _, value, _ in records)


@pytest.mark.parametrize("snapshot_mode", ["no_data", "initial"])
def test_the_schema_change_topic_as_debezium_in_kafka_connect_writes_it(snapshot_mode, mariadb, database,
                                                                         dblog_broker, connect_broker, kafka_connect,
                                                                         tmp_path):
    # Another database on the server, as earlier tests leave them: neither writes its tables.
    mariadb.execute(f"CREATE DATABASE `{database}_other`")
    mariadb.execute(f"CREATE TABLE `{database}_other`.t (i int(11) NOT NULL, PRIMARY KEY (i))")
    try:
        _compare_schema_change_topics(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path,
                                      snapshot_mode)
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{database}_x`")
        mariadb.execute(f"DROP DATABASE IF EXISTS `{database}_other`")


def _compare_schema_change_topics(mariadb, database: str, broker, connect_broker, kafka_connect, tmp_path,
                                  snapshot_mode: str) -> None:
    prefix = f"s{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    mariadb.execute(f"CREATE TABLE `{database}`.items {ITEMS}")
    mariadb.execute(f"CREATE TABLE `{database}`.nokey (a int(11), b varchar(3))")
    # no primary key: keyed by its first unique index of NOT NULL columns
    mariadb.execute(f"CREATE TABLE `{database}`.uk (a int(11) DEFAULT NULL, b int(11) NOT NULL, c int(11) NOT NULL, "
                    "d int(11) NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ucb (c, b), UNIQUE KEY ud (d))")
    mariadb.execute(f"INSERT INTO `{database}`.items (name) VALUES ('one')")
    other = f"{database}_x"  # a second database, dropped whole
    mariadb.execute(f"CREATE DATABASE `{other}` CHARACTER SET latin1")
    mariadb.execute(f"CREATE TABLE `{other}`.o (i int(11) NOT NULL, PRIMARY KEY (i))")
    # Debezium's schema history (and so its start-up schema changes) holds every database of the
    # server unless told to keep the captured ones only, which is what dblog writes (IGNORED)
    connector = debezium_connector(mariadb, connect_broker.bootstrap, prefix, **{
        "database.include.list": f"{database},{other}",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        "snapshot.mode": snapshot_mode,
        **json_converters(),
    })
    topics = [prefix, *(f"{prefix}.{database}.{table}" for table in ("items", "t2", "t3"))]

    def read(bootstrap: str) -> dict[str, list[tuple]]:
        present = topic_names(bootstrap)
        return {topic: decoded_records(bootstrap, topic) for topic in topics if topic in present}

    kafka_connect.create(name, connector)
    try:
        kafka_connect.wait_running(name)
        eventually(lambda: _started(read(connect_broker.bootstrap)), timeout=120,
                   message="Connect's start-up records, the last marked `last`")
        config = parse_config(dblog_config(connector, name, broker.bootstrap, tmp_path))
        engine = EngineThread(config)
        try:
            with mariadb.connect() as connection, connection.cursor() as cursor:
                for statement in _ddl_statements(database):  # read as they come, or later: the history's
                    cursor.execute(statement)
            engine.until_caught_up()
        finally:
            engine.stop()
        engine = EngineThread(config)  # a restart writes no start-up records again
        try:
            engine.until_caught_up()
        finally:
            engine.stop()
        ours = read(broker.bootstrap)

        def caught_up():
            found = read(connect_broker.bootstrap)
            return found if all(len(found.get(topic, [])) >= len(records) for topic, records in ours.items()) else None

        def counts(side: dict) -> dict[str, int]:
            return {topic: len(records) for topic, records in side.items()}

        theirs = eventually(caught_up, timeout=120, message=lambda: f"Connect's records, as many as dblog's: "
                            f"{counts(ours)}; Connect's: {counts(read(connect_broker.bootstrap))}")
    finally:
        kafka_connect.delete(name)

    our_changes, their_changes = ours[prefix], theirs[prefix]
    assert len(our_changes) == len(their_changes), ([value["payload"]["ddl"] for _, value, _ in our_changes],
                                                    [value["payload"]["ddl"] for _, value, _ in their_changes])
    # the headers too: Debezium's context headers on every schema change (the run id its own)
    assert [headers for _, _, headers in our_changes] == [headers for _, _, headers in their_changes]
    problems = []
    for index, ((our_key, our_value, _), (their_key, their_value, _)) in enumerate(zip(our_changes, their_changes)):
        problems += differences({"key": our_key, "value": _schema_change_comparable(our_value)},
                                {"key": their_key, "value": _schema_change_comparable(their_value)},
                                f"schema change {index}", CONNECT)
    assert not problems, "\n".join(problems)
    keys = {change["id"]: change["table"]["primaryKeyColumnNames"] for _, value, _ in our_changes
            for change in value["payload"]["tableChanges"] if change["type"] == "CREATE"}
    assert keys[f'"{database}"."uk"'] == ["c", "b"] and keys[f'"{database}"."nokey"'] == []

    # The data records between the DDL, on t2's and t3's topics, by key, after-images and schemas.
    for table, expected in (("t2", 3), ("t3", 1)):
        topic = f"{prefix}.{database}.{table}"
        assert len(ours[topic]) == len(theirs[topic]) == expected
        for (our_key, our_value, _), (their_key, their_value, _) in zip(ours[topic], theirs[topic]):
            assert our_key == their_key
            problems = differences(our_value["schema"], their_value["schema"], topic, CONNECT)  # defaults included
            assert not problems, problems
            assert our_value["payload"]["after"] == their_value["payload"]["after"]
            assert our_value["payload"]["op"] == their_value["payload"]["op"]


# --- transforms: the connector's SMT chains --------------------------------------------------------
#
# The same `transforms.*` chain in the connector JSON: applied by the Connect worker (Debezium's
# ExtractNewRecordState and ByLogicalTableRouter from the connector's plugin folder, Kafka's
# RegexRouter from connect-transforms), and by dblog's Kafka sink to what `convert` makes of it
# (`sink.kafka.transforms`). Tables v and w of every type (tests/support/every_type.py), their
# rows, updates, deletes, a key change and a TRUNCATE; every record of their topics (routed or
# not), the schema change and heartbeat topics compared as in the tests above (a row unwrap made
# is compared whole: `__source_ts_ms` is the binlog event's time in both).
UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
LOGICAL_TABLE_ROUTER = "io.debezium.transforms.ByLogicalTableRouter"
TRANSFORMS = {
    "unwrap-defaults": {"transforms": "unwrap", "transforms.unwrap.type": UNWRAP},
    "unwrap-rewrite-add-fields-headers": {
        "transforms": "unwrap", "transforms.unwrap.type": UNWRAP,
        "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
        "transforms.unwrap.add.fields": "op,table,source.ts_ms", "transforms.unwrap.add.headers": "db",
        "skipped.operations": "none"},  # the truncate reaches unwrap, which drops it
    "logical-table-router-then-regex-router": {
        "transforms": "shards,rename",
        "transforms.shards.type": LOGICAL_TABLE_ROUTER,
        "transforms.shards.topic.regex": r"(.*)\.(v|w)$", "transforms.shards.topic.replacement": "$1.vw",
        "transforms.rename.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.rename.regex": r"([^.]+)\.([^.]+)\.vw", "transforms.rename.replacement": "$1.logical.$2"},
    "unwrap-delete-to-tombstone-headers": {
        "transforms": "unwrap", "transforms.unwrap.type": UNWRAP,
        "transforms.unwrap.delete.tombstone.handling.mode": "delete-to-tombstone",
        "transforms.unwrap.add.headers": "op,source.snapshot,id", "transforms.unwrap.add.headers.prefix": "cdc_"},
    "unwrap-rewrite-with-tombstone-then-logical-table-router": {
        "transforms": "unwrap,shards", "transforms.unwrap.type": UNWRAP,
        "transforms.unwrap.delete.tombstone.handling.mode": "rewrite-with-tombstone",
        "transforms.unwrap.add.headers": "op",
        "transforms.shards.type": LOGICAL_TABLE_ROUTER,
        "transforms.shards.topic.regex": r"(.*)\.(v|w)$", "transforms.shards.topic.replacement": "$1.vw",
        "transforms.shards.key.field.name": "shard", "transforms.shards.key.field.regex": r".*\.(v|w)$",
        "transforms.shards.key.field.replacement": "table_$1"},
}
# The topics of tables v and w, by chain (default: each table's own).
ROUTED = {"logical-table-router-then-regex-router": lambda prefix, database: [f"{prefix}.logical.{database}"],
          "unwrap-rewrite-with-tombstone-then-logical-table-router": lambda prefix, database: [
              f"{prefix}.{database}.vw"]}
TRANSFORMED_RECORDS = {  # a check of the check: rows of v, 2 of w, the updates, two deletes, a key change, a truncate
    # deletes as null payloads, tombstones dropped; the key change: delete (a null payload) + create
    "unwrap-defaults": lambda rows: rows + 2 + len(debezium_updates()) + 2 + 2,
    # deletes rewritten (__deleted), tombstones dropped, the truncate dropped
    "unwrap-rewrite-add-fields-headers": lambda rows: rows + 2 + len(debezium_updates()) + 2 + 2,
    # every record: deletes with their tombstones, the key change's three; the truncate skipped (the default)
    "logical-table-router-then-regex-router": lambda rows: rows + 2 + len(debezium_updates()) + 4 + 3,
    # deletes as tombstones, Debezium's tombstones dropped
    "unwrap-delete-to-tombstone-headers": lambda rows: rows + 2 + len(debezium_updates()) + 2 + 2,
    # deletes rewritten with their tombstones (the `op` header "d" only), the key change's three
    "unwrap-rewrite-with-tombstone-then-logical-table-router": lambda rows: rows + 2 + len(debezium_updates()) + 4 + 3,
}


@pytest.mark.parametrize("chain", list(TRANSFORMS))
def test_transforms_as_debezium_in_kafka_connect_applies_them(chain, mariadb, database, dblog_broker, connect_broker,
                                                              kafka_connect, tmp_path):
    prefix = f"t{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.v ({debezium_columns()})")
    mariadb.execute(f"CREATE TABLE `{database}`.w LIKE `{database}`.v")
    connector = _connector_json(mariadb, connect_broker.bootstrap, prefix, database, "true")
    connector.update(TRANSFORMS[chain])
    # unwrap's `id` header is the `transaction` block's id: Debezium's MySQL connector leaves the
    # block null on MariaDB (IGNORED), so neither writes it here
    connector["provide.transaction.metadata"] = "false"
    rows = debezium_rows()
    statements = [insert_sql(f"`{database}`.v", key, row) for key, row in rows.items()]
    statements += [insert_sql(f"`{database}`.w", key, row) for key, row in list(rows.items())[:2]]
    statements += [
        *(f"UPDATE `{database}`.v SET {', '.join(f'{c} = {v}' for c, v in row.items())} WHERE id = {key}"
          for key, row in debezium_updates().items()),
        f"DELETE FROM `{database}`.v WHERE id = 3",
        f"DELETE FROM `{database}`.w WHERE id = {list(rows)[0]}",
        f"UPDATE `{database}`.v SET id = 60 WHERE id = 6",  # a key change: delete, tombstone, create
        f"TRUNCATE TABLE `{database}`.v",
    ]
    topics = ROUTED.get(chain, lambda prefix, database: [f"{prefix}.{database}.v", f"{prefix}.{database}.w"])(
        prefix, database)
    run = _run_both(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, connector, ["v", "w"],
                    [[statement] for statement in statements], topics=topics)

    written = sum(len(run.ours[topic]) for topic in topics)
    assert written == TRANSFORMED_RECORDS[chain](len(rows)), {topic: len(run.ours[topic]) for topic in topics}
    # Connect wrote to no topic of the prefix dblog did not (its schema history topic is its own)
    read = {*run.ours, f"{prefix}.schema-history", f"__debezium-heartbeat.{prefix}", f"{prefix}.transaction"}
    others = sorted(topic for topic in topic_names(connect_broker.bootstrap) - read if prefix in topic)
    assert not others, f"Connect wrote to topics dblog did not: {others}"
    problems = _problems(run, schemas=True)
    assert not problems, "\n".join(problems)


# --- the schema history: a backlog over ALTERs, read after a restart -------------------------------
#
# Both start once (their start-up records, their binlog position) and are stopped: the connector
# by Connect (`PUT /connectors/NAME/stop`: its offsets committed to the worker's offsets topic, its
# schema history in its `schema.history.internal.kafka.topic`), dblog by its engine. The
# statements below run meanwhile: a column added with a DEFAULT, a DEFAULT changed, columns
# retyped (MODIFY, CHANGE), renamed, dropped, the table renamed, rows between each. Both start
# again (`PUT /connectors/NAME/resume`) and read them as a backlog, the server already at the last
# definition: each schema change must describe the table as its statement left it, each row's
# Connect schema the column defaults of its time, as Debezium's history gives them.
HISTORY_TABLE = """(id int(11) NOT NULL, v varchar(5) DEFAULT 'a', n int(11) DEFAULT 3,
  d datetime DEFAULT '2024-01-02 03:04:05', e enum('x','y') NOT NULL DEFAULT 'y', PRIMARY KEY (id))"""


def _backlog(db: str) -> list[str]:
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


BACKLOG_SCHEMA_CHANGES = 7  # six ALTERs and the RENAME
BACKLOG_DATA_RECORDS = {"t": 7, "t2": 2}


def test_a_backlog_over_alters_as_debezium_in_kafka_connect_reads_it_with_its_schema_history(
        mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t {HISTORY_TABLE}")
    mariadb.execute(f"INSERT INTO `{database}`.t (id) VALUES (0)")  # before both: read by neither
    prefix = f"h{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    connector = debezium_connector(mariadb, connect_broker.bootstrap, prefix, **{
        "database.include.list": database,
        "snapshot.mode": "no_data",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        **json_converters(),
    })
    topics = [prefix, f"{prefix}.{database}.t", f"{prefix}.{database}.t2"]

    def read(bootstrap: str) -> dict[str, list[tuple]]:
        present = topic_names(bootstrap)
        return {topic: decoded_records(bootstrap, topic) for topic in topics if topic in present}

    config = parse_config(dblog_config(connector, name, dblog_broker.bootstrap, tmp_path))
    kafka_connect.create(name, connector)
    try:
        # Both start once, then are stopped.
        kafka_connect.wait_running(name)
        eventually(lambda: _started(read(connect_broker.bootstrap)), timeout=120,
                   message="Connect's start-up records, the last marked `last`")
        kafka_connect.stop_connector(name)
        engine = EngineThread(config)
        try:
            engine.until_caught_up()
        finally:
            engine.stop()

        _run(mariadb, [[statement] for statement in _backlog(database)])

        # Both read the backlog, the server at its last definition.
        kafka_connect.resume_connector(name)
        engine = EngineThread(config)
        try:
            engine.until_caught_up()
        finally:
            engine.stop()
        ours = read(dblog_broker.bootstrap)

        def caught_up():
            found = read(connect_broker.bootstrap)
            return found if all(len(found.get(topic, [])) >= len(records) for topic, records in ours.items()) else None

        theirs = eventually(caught_up, timeout=120, message=lambda: "Connect's records, as many as dblog's: "
                            f"{ {t: len(r) for t, r in ours.items()} }; Connect's status: {kafka_connect.status(name)}")
        history = [json.loads(record.value) for record in topic_records(connect_broker.bootstrap,
                                                                          f"{prefix}.schema-history")[0]]
    finally:
        kafka_connect.delete(name)

    # a check of the check: Connect read the backlog through the history in its Kafka topic
    recorded = [entry["ddl"] for entry in history]
    assert all(any(statement.split(" ", 3)[3] in ddl for ddl in recorded)
               for statement in _backlog(database) if statement.startswith(("ALTER", "RENAME"))), recorded
    streamed_changes = [value for _, value, _ in ours[prefix] if not _is_startup(value["payload"])]
    assert len(streamed_changes) == BACKLOG_SCHEMA_CHANGES
    for table, count in BACKLOG_DATA_RECORDS.items():
        assert len(ours[f"{prefix}.{database}.{table}"]) == count, table
    # each row of t under the definition of its time: seven, not the server's last one
    assert len({json.dumps(value["schema"]) for _, value, _ in ours[f"{prefix}.{database}.t"]}) == 7
    problems = []
    for topic in topics:
        problems += _compare_topic(ours[topic], theirs[topic], True, topic, startup=_is_startup)
    assert not problems, "\n".join(problems)
