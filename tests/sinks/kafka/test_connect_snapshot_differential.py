"""dblog's snapshots against Debezium in Kafka Connect: one connector JSON registered with the real
Kafka Connect worker (Debezium 3.6's MySQL connector, `kafka_connect`, its topics on
`connect_broker`) and given to dblog through `dblog convert-debezium`'s `convert` (dblog's Kafka
sink writing to `dblog_broker`), as in test_connect_differential.py (the streamed changes, the
schema change, heartbeat and transaction topics, transforms). Both sides are read back as a Kafka
consumer reads them: keys, values (JsonConverter, schemas on), headers and tombstones.

* `test_the_startup_snapshot_is_debeziums_initial_snapshot`: dblog's start-up snapshot of
  `snapshot.mode=initial` (converted: `snapshot.startup = "initial"` with Debezium's markers) against
  Debezium's initial snapshot of the same tables (empty tables first, between and last, a table
  of one row, tables of several rows read in chunks of 2): the same records per topic, in the same
  order, `op: r` and `source.snapshot` `first` / `true` / `first_in_data_collection` /
  `last_in_data_collection` / `last` included; then both sides' records through Kafka Connect's
  JsonConverter (`toConnectData`, in the JVM: `lab.connect_converter`, the worker's jars): the same
  Connect schemas and Structs, Connect's logical types as the same Java objects.
* `test_a_blocking_start_up_with_a_table_without_a_key_is_debeziums_initial_snapshot`: the same
  with `snapshot.startup_reads = "blocking"` over tables of which two have no key.
* `test_an_incremental_snapshot_under_updates_matches_debeziums`: one `execute-snapshot` row in
  the connector's `signal.data.collection` (dblog's signal table, converted) starts both
  incremental snapshots while writers update, delete and insert rows: every row the writers left
  alone is read by both as the same `op: r` record (`source.snapshot = "incremental"`), and both
  topics replay to the table's final state (Connect's end seen on its notification topic,
  `notification.enabled.channels=sink`).
* `test_the_data_records_around_ddl_and_truncate_match_debeziums` and
  `test_rows_logged_before_ddl_read_after_it_match_debeziums` (in process and in the reader
  process): rows changed between ALTERs and around a TRUNCATE (`skipped.operations=none`), dblog
  following each statement, or stopped and reading them as a backlog under the server's last
  definition: the same records in the same order, each with the Connect schema of its time.
* `test_snapshot_rows_are_debeziums_streamed_creates` (the every-type table, tests/support/
  every_type.py; also on servers logging `binlog_row_metadata` MINIMAL and NO_LOG, and on one read
  without GTIDs) and `test_column_options_snapshot_rows_are_debeziums_streamed_creates`
  (tests/support/debezium_columns.py): Connect streams from the present position
  (`snapshot.mode=no_data`) and the rows are inserted after it has taken its position; dblog
  starts after them and reads them by its incremental snapshot (`op: r`) where Connect streamed
  creates (`op: c`): the same keys, after-images and Connect schemas prove that dblog encodes a
  snapshot row as Debezium encodes the streamed one (test_connect_differential.py compares those
  tables' streamed records under the same value switches and column options). The updates, a
  delete, a key change and the TRUNCATE after them are streamed by both, compared record by record.

Besides the replica server id (`dblog_config`), the settings dblog gets that are no part of the
connector JSON are DBLOG_ONLY, each set where a test needs it. What is not compared is in
MAY_DIFFER (docs/debezium.md, "What still differs").
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
from support.debezium_records import comparable_change, present_records, run_statements
from support.differences import differences
from support.every_type import (DEBEZIUM_SETTINGS, insert_sql, debezium_columns, debezium_rows,
                                debezium_updates)
from support.fixtures.connect import dblog_config, debezium_connector, json_converters
from support.harness import EngineThread, published

from dblog.runtime.config import parse_config
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL
from dblog.sinks.envelope import materialize

pytestmark = pytest.mark.timeout(600)

CONNECT = "Connect"  # the reference, as differences() names it

DBLOG_ONLY = {
    "snapshot.startup = initial": "the snapshot-row tests: dblog reads by its snapshot the rows Connect streamed",
    "snapshot.startup_reads = blocking": "the blocking start-up test (Debezium's initial snapshot always blocks)",
    "source.position_mode = file": "the server read without GTIDs (no setting of Debezium's MySQL connector "
                                   "converts to it)",
    "source.reader_process": "the reader-process case of the backlog test",
}

MAY_DIFFER = {
    "value.ts_ms, ts_us, ts_ns": "when each wrote the record (their types are compared)",
    "value.source.version": "dblog's version, not Debezium's",
    "value.source.ts_ms, ts_us, ts_ns": "a snapshot row's: when dblog read its chunk; Debezium's initial snapshot: "
                                        "when the snapshot started; its incremental snapshot: when the chunk was read",
    "value.source.file, pos of a snapshot row": "where the binlog reader was when the window closed (dblog); where "
                                                "the snapshot started (Debezium's initial snapshot) or the "
                                                "window closed (its incremental snapshot, another reader)",
    "value.source.pos, gtid of a streamed change": "Debezium writes where the rows event starts, dblog where it ends; "
                                                   "Debezium's MySQL connector writes no MariaDB GTID",
    "value.source.snapshot, server_id, file, pos, row of an inserted row (snapshot-row tests)":
        "dblog's incremental snapshot read it, Connect streamed it",
    "op of an inserted row (snapshot-row tests)": "r in dblog (its incremental snapshot read it), c in Connect",
    "the order of the rows inside an incremental snapshot's window": "both emit a window's rows in key order, but "
                                                                      "the windows' bounds differ (chunk sizes "
                                                                      "and when the log touched a row)",
    "op r records of rows the writers touched during an incremental snapshot": "a row the log changed inside "
                                                                                "a window is dropped from it: "
                                                                                "whether it is depends on when "
                                                                                "each reader's window was open",
    "header __debezium.context.runId's value": "a new id at each start, in both",
}
# `source` fields that differ (MAY_DIFFER); every other field of every record is compared.
SOURCE_MAY_DIFFER = ("version", "ts_ms", "ts_us", "ts_ns", "file", "pos")
STREAMED_SOURCE_MAY_DIFFER = ("version", "ts_ms", "ts_us", "ts_ns", "pos", "gtid")
ENVELOPE_MAY_DIFFER = ("ts_ms", "ts_us", "ts_ns")

COLUMNS = ("id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), day DATE, at DATETIME(3), "
           "spent TIME(3), flag TINYINT(1)")


def _row(key: int) -> str:
    return (f"({key}, 'row {key}', {key}.25, DATE_ADD('2024-02-28', INTERVAL {key} DAY), "
            f"TIMESTAMP('2024-06-01 12:00:00.125') + INTERVAL {key} SECOND, '01:02:03.5', {key % 2})")


def _connector(server, bootstrap: str, prefix: str, database: str, **settings: str) -> dict[str, str]:
    """The connector's JSON, as a user writes it: JsonConverter with schemas for keys, values and
    headers, the schema history of the captured tables only (the run's server holds other tests'
    databases)."""
    return debezium_connector(server, bootstrap, prefix, **{
        "database.include.list": database,
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        **json_converters(),
        **settings,
    })


def _streaming(kafka_connect, connect_broker, name: str, prefix: str) -> None:
    """Until the connector runs and has written its start-up schema changes (its binlog position
    is taken: what is executed next, it streams)."""
    kafka_connect.wait_running(name)
    eventually(lambda: present_records(connect_broker.bootstrap, [prefix]).get(prefix), timeout=120,
               message="Connect's start-up schema change records (its binlog position is taken)")


def _connect_records(kafka_connect, connect_broker, name: str, wanted: dict[str, int], done=None) -> dict:
    """Connect's records of the topics of `wanted`, once each holds at least its count (and `done`
    of them holds, if given); a topic never written is []."""
    def written():
        found = present_records(connect_broker.bootstrap, wanted)
        found = {topic: found.get(topic, []) for topic in wanted}
        complete = all(len(found[topic]) >= count for topic, count in wanted.items())
        return found if complete and (done is None or done(found)) else None

    return eventually(written, timeout=120, message=lambda: f"Connect's records {wanted}: "
                      f"{ {t: len(r) for t, r in present_records(connect_broker.bootstrap, wanted).items()} }, "
                      f"its status: {kafka_connect.status(name)}")


def _ours(dblog_broker, topics) -> dict[str, list[tuple]]:
    found = present_records(dblog_broker.bootstrap, topics)
    return {topic: found.get(topic, []) for topic in topics}


def _comparable(record: dict | None, source_may_differ: tuple[str, ...] = SOURCE_MAY_DIFFER) -> dict | None:
    """A record's value without what may differ (MAY_DIFFER); its schema whole."""
    if record is None:
        return None
    payload = dict(record["payload"])
    for name in ENVELOPE_MAY_DIFFER:
        payload[name] = type(payload[name]).__name__
    payload["source"] = {name: value for name, value in payload["source"].items() if name not in source_may_differ}
    return {"schema": record["schema"], "payload": payload}


def _record_differences(ours: list[tuple], theirs: list[tuple], where: str,
                        source_may_differ: tuple[str, ...] = SOURCE_MAY_DIFFER) -> list[str]:
    """Record by record (as many in each, else an AssertionError): keys, values but MAY_DIFFER, headers."""
    assert len(ours) == len(theirs), (where, len(ours), len(theirs))
    problems = []
    for index, ((our_key, our_value, our_headers), (their_key, their_value, their_headers)) in enumerate(
            zip(ours, theirs)):
        problems += differences({"key": our_key, "value": _comparable(our_value, source_may_differ),
                                 "headers": our_headers},
                                {"key": their_key, "value": _comparable(their_value, source_may_differ),
                                 "headers": their_headers}, f"{where}[{index}]", CONNECT)
    return problems


def _create(server, database: str, tables: dict[str, list[int]], keyless: tuple[str, ...] = ()) -> None:
    for name, keys in tables.items():
        columns = COLUMNS.replace(" PRIMARY KEY", "") if name in keyless else COLUMNS
        server.execute(f"CREATE TABLE `{database}`.`{name}` ({columns})")
        if keys:
            server.execute(f"INSERT INTO `{database}`.`{name}` VALUES {', '.join(_row(key) for key in keys)}")


# --- the start-up snapshot: Debezium's initial snapshot ----------------------------------------------

# name -> keys: an empty first table (no row says `first` then, in Debezium as in dblog), a
# table of one row (its row is its last), tables read in several chunks of 2, an empty table
# between them, and an empty last table (the last row of the table before it is the `last`).
SNAPSHOT_TABLES = {"a": [], "b": [1, 2, 3, 4, 5], "c": [7], "d": [], "e": [1, 2], "f": []}


def _initial_snapshots(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path,
                       tables=SNAPSHOT_TABLES, keyless=(), **snapshot) -> tuple[dict, dict]:
    """Both sides' start-up snapshot of `tables` (`keyless`: those without a primary key;
    `snapshot`: DBLOG_ONLY snapshot settings): {topic: [(key, value, headers)]} each."""
    _create(mariadb, database, tables, keyless)
    prefix = f"i{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    topics = {f"{prefix}.{database}.{table}": len(keys) for table, keys in tables.items()}
    # chunks of 2: dblog's start-up snapshot reads in incremental-snapshot chunks (Debezium's
    # initial snapshot ignores the setting)
    connector = _connector(mariadb, connect_broker.bootstrap, prefix, database, **{
        "snapshot.mode": "initial", "time.precision.mode": "connect", "incremental.snapshot.chunk.size": "2"})
    config = dblog_config(connector, name, dblog_broker.bootstrap, tmp_path)
    assert config["snapshot"]["startup"] == "initial" and config["snapshot"]["initial_markers"] is True
    config["snapshot"].update(snapshot)
    kafka_connect.create(name, connector)
    try:
        engine = EngineThread(parse_config(config))
        try:
            engine.wait_for("COMPLETED")
            engine.until_caught_up()
        finally:
            engine.stop()
        theirs = _connect_records(kafka_connect, connect_broker, name, topics)
    finally:
        kafka_connect.delete(name)
    return _ours(dblog_broker, topics), theirs


def _snapshot_differences(ours: dict, theirs: dict) -> list[str]:
    return [problem for topic in ours for problem in _record_differences(ours[topic], theirs[topic], topic)]


def _markers(side: dict) -> list[str]:
    return [value["payload"]["source"]["snapshot"] for records in side.values() for _, value, _ in records]


def _connect_comparable(described: dict) -> dict:
    """A record as Connect's JsonConverter read it, without what may differ (MAY_DIFFER)."""
    value = described["value"]["value"]
    if value is None:
        return described
    fields = dict(value["fields"])
    for name in ENVELOPE_MAY_DIFFER:
        fields[name] = fields[name]["class"]
    source = fields["source"]
    fields["source"] = {**source, "fields": {name: field for name, field in source["fields"].items()
                                             if name not in SOURCE_MAY_DIFFER}}
    return {"key": described["key"], "value": {"schema": described["value"]["schema"],
                                               "value": {**value, "fields": fields}}}


def _text(document) -> bytes | None:
    return None if document is None else json.dumps(document).encode()


def test_the_startup_snapshot_is_debeziums_initial_snapshot(mariadb, database, dblog_broker, connect_broker,
                                                            kafka_connect, tmp_path):
    """Record for record as JSON, then Struct for Struct as Kafka Connect reads them."""
    ours, theirs = _initial_snapshots(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path)
    problems = _snapshot_differences(ours, theirs)
    assert not problems, "\n".join(problems)
    assert _markers(ours) == ["first_in_data_collection", "true", "true", "true", "last_in_data_collection",
                              "last_in_data_collection", "first_in_data_collection", "last"]

    # Read back by Kafka Connect's own JsonConverter, in the JVM: the same schemas and Structs.
    from lab.connect_converter import connect_data

    records = [(topic, _text(key), _text(value)) for side in (ours, theirs) for topic in side
               for key, value, _ in side[topic]]
    described = connect_data(records, tmp_path / "connect")
    half = len(described) // 2
    for index, (our, their) in enumerate(zip(described[:half], described[half:])):
        problems += [f"Connect's record {index}{problem}"
                     for problem in differences(_connect_comparable(our), _connect_comparable(their))]
    assert not problems, "\n".join(problems)
    after = described[0]["value"]["value"]["fields"]["after"]["fields"]
    assert {name: after[name]["class"] for name in ("amount", "day", "at", "spent", "flag")} == {
        "amount": "java.math.BigDecimal", "day": "java.util.Date", "at": "java.util.Date", "spent": "java.util.Date",
        "flag": "java.lang.Short"}
    assert after["amount"]["value"] == "1.25" and after["at"]["value"] == 1717243201125


def test_a_blocking_start_up_with_a_table_without_a_key_is_debeziums_initial_snapshot(
        mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path):
    """`snapshot.startup_reads = "blocking"` (Debezium's way) over tables of which two have no
    key (one with a repeated row; one the last with rows): record for record Debezium's initial
    snapshot, markers included (a table without a key is read whole in both)."""
    tables = {"a": [1, 2, 3], "b": [4, 4, 5], "c": [], "d": [6, 7], "e": []}
    ours, theirs = _initial_snapshots(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path,
                                      tables, keyless=("b", "d"), startup_reads="blocking")
    problems = _snapshot_differences(ours, theirs)
    assert not problems, "\n".join(problems)
    assert _markers(ours) == ["first", "true", "last_in_data_collection", "first_in_data_collection", "true",
                              "last_in_data_collection", "first_in_data_collection", "last"]


# --- an incremental snapshot under writers -----------------------------------------------------------

INCREMENTAL_ROWS = 240
HOT = range(0, INCREMENTAL_ROWS + 1, 8)  # the keys the writers update, delete and insert again


class Writers:
    """Updates, deletes and re-inserts of the HOT keys (and inserts above the snapshot's keys)
    in a thread until stopped; the rest of the table stays as it was."""

    def __init__(self, mariadb, table: str) -> None:
        import threading

        self.mariadb, self.table = mariadb, table
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.writes = 0
        self.error: BaseException | None = None

    def _run(self) -> None:
        import random
        import time

        chooser = random.Random(7)
        try:
            with self.mariadb.connect() as connection, connection.cursor() as cursor:
                cursor.execute("SET time_zone = '+00:00'")
                while not self.done.is_set():
                    key = chooser.choice(HOT)
                    kind = chooser.random()
                    if kind < 0.6:
                        cursor.execute(f"UPDATE {self.table} SET name = %s, amount = amount + 1 WHERE id = %s",
                                       (f"v{self.writes}", key))
                    elif kind < 0.8:
                        cursor.execute(f"DELETE FROM {self.table} WHERE id = %s", (key,))
                    else:
                        cursor.execute(f"REPLACE INTO {self.table} VALUES {_row(key)}")
                    if self.writes % 25 == 0:
                        cursor.execute(f"INSERT INTO {self.table} VALUES {_row(INCREMENTAL_ROWS + 1 + self.writes)}")
                    connection.commit()
                    self.writes += 1
                    time.sleep(0.002)
        except BaseException as error:  # reported by stop()
            self.error = error

    def __enter__(self) -> "Writers":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        self.thread.join(30)
        assert self.error is None, self.error

    def __exit__(self, *exc_info) -> None:
        self.done.set()
        self.thread.join(30)


def _payloads(records: list[tuple]) -> list[dict]:
    """Decoded records as {"key", "value", "schema"} payloads (tombstones left out)."""
    return [{"key": key["payload"] if key is not None else None, "value": value["payload"], "schema": value["schema"]}
            for key, value, _ in records if value is not None]


def _reads(payloads: list[dict]) -> dict[tuple, dict]:
    """The snapshot reads (op r) by key, as {"schema", "payload"} values."""
    return {tuple(p["key"].values()): {"schema": p["schema"], "payload": p["value"]} for p in payloads
            if p["value"].get("op") == "r"}


def test_an_incremental_snapshot_under_updates_matches_debeziums(mariadb, database, dblog_broker, connect_broker,
                                                                 kafka_connect, tmp_path):
    _create(mariadb, database, {"t": list(range(1, INCREMENTAL_ROWS + 1))})
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dbz_signal"))
    prefix = f"n{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    topic = f"{prefix}.{database}.t"
    notifications = f"{prefix}-notifications"
    connector = _connector(mariadb, connect_broker.bootstrap, prefix, database, **{
        "snapshot.mode": "no_data", "time.precision.mode": "connect",
        "signal.data.collection": f"{database}.dbz_signal", "incremental.snapshot.chunk.size": "32",
        "notification.enabled.channels": "sink", "notification.sink.topic.name": notifications})
    config = dblog_config(connector, name, dblog_broker.bootstrap, tmp_path)
    assert config["signals"]["table"] == f"{database}.dbz_signal"  # one signal row starts both
    signal = json.dumps({"data-collections": [f"{database}.t"], "type": "incremental"})
    kafka_connect.create(name, connector)
    try:
        _streaming(kafka_connect, connect_broker, name, prefix)
        engine = EngineThread(parse_config(config))
        try:
            engine.eventually(lambda: (tmp_path / "offsets.json").exists(), 60,
                              message="dblog's first offsets (its binlog position)")
            with Writers(mariadb, f"`{database}`.t") as writers:
                engine.eventually(lambda: writers.writes >= 20, 30, message="the writers' first writes")
                before = writers.writes
                mariadb.execute(f"INSERT INTO `{database}`.dbz_signal VALUES ('snapshot-1', 'execute-snapshot', "
                                f"'{signal}')")
                engine.wait_for("COMPLETED")
                eventually(lambda: any(n["payload"]["type"] == "COMPLETED"
                                       for n in published(connect_broker.bootstrap, notifications)),
                           timeout=180, message="Connect's COMPLETED notification")
                during = writers.writes - before
                writers.stop()
            assert during >= 5, f"only {during} writes while the snapshots ran"
            engine.until_caught_up()
        finally:
            engine.stop()
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM `{database}`.t")
            keys = {(row[0],) for row in cursor.fetchall()}

        def caught_up(found) -> bool:
            return set(materialize(_payloads(found[topic])).get(f"{database}.t", {})) == keys

        theirs = _payloads(_connect_records(kafka_connect, connect_broker, name, {topic: 1}, caught_up)[topic])
    finally:
        kafka_connect.delete(name)
    ours = _payloads(_ours(dblog_broker, [topic])[topic])
    # The final state: both topics replay to the table's rows
    our_state, their_state = materialize(ours)[f"{database}.t"], materialize(theirs)[f"{database}.t"]
    assert set(our_state) == keys
    assert our_state == their_state
    # Every row the writers left alone is read by both, as the same record
    our_reads, their_reads = _reads(ours), _reads(theirs)
    cold = {(key,) for key in range(1, INCREMENTAL_ROWS + 1) if key not in HOT}
    assert cold <= set(our_reads) and cold <= set(their_reads)
    problems = []
    for key in sorted(cold):
        problems += differences(_comparable(our_reads[key]), _comparable(their_reads[key]), f"row {key}", CONNECT)
    assert not problems, "\n".join(problems)
    assert {our_reads[key]["payload"]["source"]["snapshot"] for key in our_reads} == {"incremental"}
    # A read of a key the writers touched is a version the key had: never one the log superseded
    # before the read (what the window guarantees), so replaying gives the final state (above).


# --- the data records around DDL and TRUNCATE --------------------------------------------------------

def _caught_up(engine: EngineThread, mariadb) -> None:
    """Until dblog's stream has consumed every transaction the server has executed."""
    from dblog.core.gtid import GtidSet

    executed = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.eventually(lambda: executed.issubset(engine.capture.position), 60, message=f"dblog to read {executed}")


def test_the_data_records_around_ddl_and_truncate_match_debeziums(mariadb, database, dblog_broker, connect_broker,
                                                                  kafka_connect, tmp_path):
    """Rows changed between ALTERs (a column added, retyped, dropped, renamed) and around a
    TRUNCATE (`skipped.operations=none`), streamed by both: the same records in the same order,
    each with the Connect schema of the table as it was then. (The schema change topic is
    test_connect_differential.py's.) dblog reads each statement before the next is run."""
    _ddl_records_match(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, follows=True)


@pytest.mark.parametrize("reader_process", [False, True], ids=["in_process", "reader_process"])
def test_rows_logged_before_ddl_read_after_it_match_debeziums(mariadb, database, dblog_broker, connect_broker,
                                                              kafka_connect, tmp_path, reader_process):
    """The same statements run while dblog is stopped, then read by dblog in one go (a restart
    replaying a backlog): the server already has the last definition, yet every row's record has
    the Connect schema of its time, as Debezium's schema history gives it (the table maps' own
    definitions: a dropped column still typed, the old decimal scale, the INT before it became a
    VARCHAR, the old name)."""
    _ddl_records_match(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, follows=False,
                       reader_process=reader_process)


def _ddl_records_match(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, follows: bool,
                       reader_process: bool = False) -> None:
    """`follows`: dblog runs along the statements, reading each before the next; else it is
    stopped (its position taken) before them and started again after the last."""
    _create(mariadb, database, {"t": []})
    prefix = f"l{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    topic = f"{prefix}.{database}.t"
    table = f"`{database}`.t"
    connector = _connector(mariadb, connect_broker.bootstrap, prefix, database, **{
        "snapshot.mode": "no_data", "time.precision.mode": "connect", "skipped.operations": "none"})
    config = dblog_config(connector, name, dblog_broker.bootstrap, tmp_path)
    config["source"]["reader_process"] = reader_process
    config = parse_config(config)
    statements = [
        f"INSERT INTO {table} VALUES {_row(1)}, {_row(2)}",
        f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20) NULL",
        f"UPDATE {table} SET note = 'x' WHERE id = 1",
        f"INSERT INTO {table} (id, name, note) VALUES (3, 'three', 'y')",
        f"ALTER TABLE {table} MODIFY COLUMN amount DECIMAL(12,3)",
        f"UPDATE {table} SET amount = 2.125 WHERE id = 2",
        f"ALTER TABLE {table} DROP COLUMN spent",
        f"DELETE FROM {table} WHERE id = 3",
        f"ALTER TABLE {table} MODIFY COLUMN flag VARCHAR(5)",
        f"UPDATE {table} SET flag = 'yes' WHERE id = 2",
        f"ALTER TABLE {table} RENAME COLUMN name TO title",
        f"UPDATE {table} SET title = 'one' WHERE id = 1",
        f"TRUNCATE TABLE {table}",
        f"INSERT INTO {table} (id, title) VALUES (4, 'four')",
        f"UPDATE {table} SET id = 5 WHERE id = 4",
    ]
    # 2 creates, update, create, update, delete + tombstone, update, update, truncate, create,
    # the key change's delete + tombstone + create
    expected = 14
    kafka_connect.create(name, connector)
    try:
        _streaming(kafka_connect, connect_broker, name, prefix)
        engine = EngineThread(config)
        try:
            engine.eventually(lambda: (tmp_path / "offsets.json").exists(), 60,
                              message="dblog's first offsets (its binlog position)")
            if not follows:
                engine.stop()
            with mariadb.connect() as connection, connection.cursor() as cursor:
                cursor.execute("SET time_zone = '+00:00'")
                for statement in statements:
                    cursor.execute(statement)
                    connection.commit()
                    if follows:
                        _caught_up(engine, mariadb)
            if not follows:
                engine = EngineThread(config)  # the backlog, under the server's last definition
            engine.until_caught_up()
        finally:
            engine.stop()
        theirs = _connect_records(kafka_connect, connect_broker, name, {topic: expected})[topic]
    finally:
        kafka_connect.delete(name)
    ours = _ours(dblog_broker, [topic])[topic]
    assert len(ours) == len(theirs) == expected, (len(ours), len(theirs))
    problems = _record_differences(ours, theirs, topic, STREAMED_SOURCE_MAY_DIFFER)
    assert not problems, "\n".join(problems)
    ops = [None if value is None else value["payload"]["op"] for _, value, _ in ours]
    assert ops == ["c", "c", "u", "c", "u", "d", None, "u", "u", "t", "c", "d", None, "c"]


# --- snapshot rows against Debezium's streamed creates ----------------------------------------------

def _snapshot_rows_and_changes(server, database: str, dblog_broker, connect_broker, kafka_connect, tmp_path,
                               settings: dict[str, str], tables: list[str], inserts: list[str], changes: list[str],
                               expected: dict[str, tuple[int, int]], source: dict | None = None) -> dict:
    """Connect streams `tables` from the present position; `inserts` run; dblog starts, reads
    their rows by its snapshot, then streams `changes` with Connect. `expected`: per table,
    (inserted rows, records of the changes). Returns {table: (ours, theirs)}, decoded records."""
    prefix = f"r{uuid.uuid4().hex[:6]}"
    name = f"{prefix}-connector"
    connector = _connector(server, connect_broker.bootstrap, prefix, database, **{
        "table.include.list": rf"{database}\.({'|'.join(tables)})", "snapshot.mode": "no_data", **settings})
    config = dblog_config(connector, name, dblog_broker.bootstrap, tmp_path)
    config["snapshot"]["startup"] = "initial"  # DBLOG_ONLY: it reads the inserted rows by snapshot
    config["source"].update(source or {})
    topics = {table: f"{prefix}.{database}.{table}" for table in expected}
    kafka_connect.create(name, connector)
    try:
        _streaming(kafka_connect, connect_broker, name, prefix)
        run_statements(server, inserts)
        engine = EngineThread(parse_config(config))
        try:
            engine.wait_for("COMPLETED")
            run_statements(server, changes)
            engine.until_caught_up()
        finally:
            engine.stop()
        theirs = _connect_records(kafka_connect, connect_broker, name,
                                  {topics[table]: sum(counts) for table, counts in expected.items()})
    finally:
        kafka_connect.delete(name)
    ours = _ours(dblog_broker, topics.values())
    return {table: (ours[topic], theirs[topic]) for table, topic in topics.items()}


def _row_key(key: dict) -> str:
    return repr(key["payload"])


def _snapshot_row_differences(table: str, ours: list[tuple], theirs: list[tuple], inserted: int) -> list[str]:
    """dblog's first `inserted` records (its snapshot rows) against Connect's (streamed creates),
    by key; the rest (streamed by both) record by record, in order, tombstones included. Headers
    record by record (an AssertionError if they differ, or the counts)."""
    assert len(ours) == len(theirs), (table, len(ours), len(theirs))
    assert [headers for *_, headers in ours] == [headers for *_, headers in theirs], table
    snapshot = {_row_key(key): comparable_change(key, value, streamed=False) for key, value, _ in ours[:inserted]}
    created = {_row_key(key): comparable_change(key, value, streamed=False) for key, value, _ in theirs[:inserted]}
    assert set(snapshot) == set(created), (table, sorted(snapshot), sorted(created))
    problems = []
    for key in sorted(created):
        our_key, our_value = snapshot[key]
        assert our_value["op"] == "r" and created[key][1]["op"] == "c", (table, key)
        our_value["op"] = "c"
        problems += differences((our_key, our_value), created[key], f"{table} row {key}", CONNECT)
    for index, ((our_key, our_value, _), (their_key, their_value, _)) in enumerate(
            zip(ours[inserted:], theirs[inserted:])):
        problems += differences(comparable_change(our_key, our_value), comparable_change(their_key, their_value),
                                f"{table} change {index}", CONNECT)
    return problems


# Debezium's value switches (support.every_type.DEBEZIUM_SETTINGS): every change streamed by both
# under each in test_connect_differential.py, every run. Here a snapshot row against the streamed
# create: the defaults every run, the two others in the scheduled slow tier (tests/README.md; both
# read paths give one normal form for every type: mysql/test_values.py).
def _every_type_changes(skipped: str) -> int:
    """The records of the streamed changes: an update each; a delete + tombstone; the key change's
    delete, tombstone, create (an update: skipped with u); the truncate."""
    operations = set(skipped.split(","))
    return ((0 if "u" in operations else len(debezium_updates()) + 3) + (0 if "d" in operations else 2)
            + (0 if "t" in operations else 1))


def _every_type(server, database, dblog_broker, connect_broker, kafka_connect, tmp_path, settings: dict[str, str],
                source: dict | None = None) -> None:
    server.execute(f"CREATE TABLE `{database}`.v ({debezium_columns()})")
    rows = debezium_rows()
    changes = [
        *(f"UPDATE `{database}`.v SET {', '.join(f'{c} = {v}' for c, v in row.items())} WHERE id = {key}"
          for key, row in debezium_updates().items()),
        f"DELETE FROM `{database}`.v WHERE id = 3",
        f"UPDATE `{database}`.v SET id = 60 WHERE id = 6",  # a key change: delete, tombstone, create
        f"TRUNCATE TABLE `{database}`.v",
    ]
    skipped = settings.get("skipped.operations", "t")
    sides = _snapshot_rows_and_changes(
        server, database, dblog_broker, connect_broker, kafka_connect, tmp_path, settings, ["v"],
        [insert_sql(f"`{database}`.v", key, row) for key, row in rows.items()], changes,
        {"v": (len(rows), _every_type_changes(skipped))}, source)
    ours, theirs = sides["v"]
    assert len(ours) == len(rows) + _every_type_changes(skipped)
    assert {tuple(key["payload"].values()) for key, _, _ in ours[:len(rows)]} == {(key,) for key in rows}
    if "u" not in skipped:  # the key change's headers, as a check of the check
        key_changes = sum(1 for *_, headers in ours if any(name.endswith(("newkey", "oldkey")) for name, _ in headers))
        assert key_changes == 3  # the delete, its tombstone, the create
    problems = _snapshot_row_differences("v", ours, theirs, len(rows))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("configuration", [
    "defaults", pytest.param("string-connect-none-skipped", marks=pytest.mark.slow),
    pytest.param("isostring-double-precise-urlsafe-skip-updates", marks=pytest.mark.slow)])
def test_snapshot_rows_are_debeziums_streamed_creates(configuration, mariadb, database, dblog_broker, connect_broker,
                                                      kafka_connect, tmp_path):
    _every_type(mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path,
                DEBEZIUM_SETTINGS[configuration])


@pytest.mark.parametrize("level", ["MINIMAL", "NO_LOG"])
def test_snapshot_rows_are_debeziums_streamed_creates_on_a_server_without_full_row_metadata(
        level, row_metadata_mariadb, dblog_broker, connect_broker, kafka_connect, tmp_path):
    """Issue 39: the same comparison (the defaults) on a server logging binlog_row_metadata=`level`:
    dblog decodes the streamed rows with its schema history, Debezium with its own."""
    server = row_metadata_mariadb(level)
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{database}`")
    _every_type(server, database, dblog_broker, connect_broker, kafka_connect, tmp_path, {})


def test_snapshot_rows_are_debeziums_streamed_creates_on_a_server_read_without_gtids(
        file_position_mariadb, dblog_broker, connect_broker, kafka_connect, tmp_path):
    """Issue 39: the same comparison (the defaults) on a MariaDB with gtid_strict_mode=OFF read by
    binlog file and position (`source.position_mode = "file"`), dblog's snapshot windows taking
    watermarks in the connector's signal table (`signal.data.collection`, converted), as Debezium
    reads a server without GTIDs."""
    server = file_position_mariadb()
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{database}`")
    server.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    _every_type(server, database, dblog_broker, connect_broker, kafka_connect, tmp_path,
                {"signal.data.collection": f"{database}.dblog_signal"}, source={"position_mode": "file"})


@pytest.mark.parametrize("configuration", [
    "defaults", pytest.param("decimal-string-binary-base64", marks=pytest.mark.slow)])
def test_column_options_snapshot_rows_are_debeziums_streamed_creates(configuration, mariadb, database, dblog_broker,
                                                                     connect_broker, kafka_connect, tmp_path):
    """Debezium's column options (tests/support/debezium_columns.py: exclusion, masks, hashes,
    truncation, the source type's parameters, message keys; the columns' defaults; zero dates) in
    the connector JSON: dblog's snapshot rows against Connect's streamed creates, then the changes
    streamed by both, per table."""
    for table, columns in COLUMN_TABLES.items():
        mariadb.execute(f"CREATE TABLE `{database}`.{table} ({columns})")
    settings = column_options(database)
    if configuration == "decimal-string-binary-base64":
        settings.update({"decimal.handling.mode": "string", "binary.handling.mode": "base64"})
    sides = _snapshot_rows_and_changes(
        mariadb, database, dblog_broker, connect_broker, kafka_connect, tmp_path, settings, list(COLUMN_TABLES),
        [statement.format(db=f"`{database}`") for statement in COLUMN_INSERTS],
        [statement.format(db=f"`{database}`") for statement in COLUMN_CHANGES], COLUMN_EXPECTED)
    problems = []
    for table, (inserted, changed) in COLUMN_EXPECTED.items():
        ours, theirs = sides[table]
        assert len(ours) == inserted + changed, (table, len(ours))
        problems += _snapshot_row_differences(table, ours, theirs, inserted)
    assert not problems, "\n".join(problems)
    # a check of the check: the options did something (a change of k's message key is a key change)
    assert any(name == "__debezium.newkey" for *_, headers in sides["k"][0] for name, _ in headers)
