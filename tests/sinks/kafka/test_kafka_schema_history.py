"""The Kafka sink describes each table as it was at each binlog position, from the schema history
the engine keeps (`dblog.core.definition_history`, saved with the offsets), not as the server has
it when the record is written:

* a backlog read after several ALTERs (dblog stopped across them, the server already at the last
  definition): each schema-change record carries the table as that statement left it, and each
  row's Connect schema the column defaults in force when the row was logged;
* a restart anywhere in that backlog (the history restored from the offsets) writes exactly what
  an uninterrupted run writes.

Against Debezium in Kafka Connect: test_connect_differential.py (the backlog test)."""

from __future__ import annotations

import json
import uuid

from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

from dblog.core.gtid import GtidSet


def _statements(db: str) -> list[str]:
    """Rows between ALTERs that add a column with a default, change defaults, retype, rename and
    drop columns, and rename the table."""
    return [
        f"INSERT INTO `{db}`.t (id, v) VALUES (1, 'x')",
        f"ALTER TABLE `{db}`.t ADD COLUMN w int(11) NOT NULL DEFAULT 7",
        f"INSERT INTO `{db}`.t (id) VALUES (2)",
        f"ALTER TABLE `{db}`.t ALTER COLUMN w SET DEFAULT 8",
        f"INSERT INTO `{db}`.t (id) VALUES (3)",
        f"ALTER TABLE `{db}`.t MODIFY COLUMN v varchar(9) DEFAULT 'b'",
        f"INSERT INTO `{db}`.t (id) VALUES (4)",
        f"ALTER TABLE `{db}`.t CHANGE COLUMN w w2 bigint(20) NOT NULL DEFAULT 9",
        f"INSERT INTO `{db}`.t (id) VALUES (5)",
        f"ALTER TABLE `{db}`.t RENAME COLUMN v TO vv",
        f"INSERT INTO `{db}`.t (id) VALUES (6)",
        f"ALTER TABLE `{db}`.t DROP COLUMN w2, ALTER COLUMN vv SET DEFAULT 'c'",
        f"INSERT INTO `{db}`.t (id) VALUES (7)",
        f"RENAME TABLE `{db}`.t TO `{db}`.t2",
        f"INSERT INTO `{db}`.t2 (id) VALUES (8)",
    ]


# Each ALTER's record: the table's (column, defaultValueExpression) after it
EXPECTED_TABLES = [
    [("id", None), ("v", "a"), ("w", "7")],
    [("id", None), ("v", "a"), ("w", "8")],
    [("id", None), ("v", "b"), ("w", "8")],
    [("id", None), ("v", "b"), ("w2", "9")],
    [("id", None), ("vv", "b"), ("w2", "9")],
    [("id", None), ("vv", "c")],
    [("id", None), ("vv", "c")],  # the rename: an ALTER of t2
]
# Each row's `after` fields with a default in its Connect schema, by key
EXPECTED_DEFAULTS = {
    1: {"v": "a"}, 2: {"v": "a", "w": 7}, 3: {"v": "a", "w": 8}, 4: {"v": "b", "w": 8},
    5: {"v": "b", "w2": 9}, 6: {"vv": "b", "w2": 9}, 7: {"vv": "c"}, 8: {"vv": "c"},
}


def _config(mariadb, broker, database, workdir, name):
    return make_config(mariadb, database, workdir, name=name, source={"include": [rf"{database}\.t2?"]},
                       snapshot={"startup": "never"}, kafka={"bootstrap_servers": broker.bootstrap},
                       sink={"type": "kafka", "kafka": {"schemas": True}})


def _records(broker, name: str, database: str, tables=("t", "t2")) -> dict[str, list]:
    """Each topic's (key, value) records as JSON, the schema change topic's without when they
    were written."""
    topics = {}
    for topic in (name, *(f"{name}.{database}.{table}" for table in tables)):
        records = []
        for record in topic_records(broker.bootstrap, topic)[0]:
            key, value = json.loads(record.key), json.loads(record.value) if record.value is not None else None
            if value is not None:
                payload = value["payload"]
                for field in ("ts_ms", "ts_us", "ts_ns"):
                    payload.pop(field, None)
                payload["source"] = {k: v for k, v in payload["source"].items() if not k.startswith("ts_")}
            records.append((key, value))
        topics[topic] = records
    return topics


def _defaults(value: dict) -> dict:
    after = next(field for field in value["schema"]["fields"] if field["field"] == "after")
    return {field["field"]: field["default"] for field in after["fields"] if "default" in field}


def _written_while_stopped(mariadb, broker, database, tmp_path, name: str) -> tuple[object, list[GtidSet]]:
    """A first start (its offsets and start-up records), then the statements while dblog is
    stopped; the config, and the server's executed GTID set after each statement."""
    config = _config(mariadb, broker, database, tmp_path / name, name)
    (tmp_path / name).mkdir()
    EngineThread(config).until_caught_up()
    return config


def _run_statements(mariadb, database) -> list[GtidSet]:
    positions = []
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for statement in _statements(database):
            cursor.execute(statement)
            cursor.execute("SELECT @@gtid_binlog_pos")
            positions.append(GtidSet.parse(cursor.fetchone()[0], "mariadb"))
    return positions


def _check(records: dict[str, list], name: str, database: str) -> None:
    schema_changes = [value["payload"] for _, value in records[name]
                      if value["payload"]["source"]["snapshot"] == "false"]
    tables = [change["tableChanges"][0]["table"] for change in schema_changes]
    assert [table and [(c["name"], c["defaultValueExpression"]) for c in table["columns"]]
            for table in tables] == EXPECTED_TABLES
    rows = [value for topic in (f"{name}.{database}.t", f"{name}.{database}.t2") for _, value in records[topic]]
    assert {value["payload"]["after"]["id"]: _defaults(value) for value in rows} == EXPECTED_DEFAULTS


def test_a_backlog_over_alters_is_described_as_of_each_statement(mariadb, broker, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id int(11) NOT NULL, v varchar(5) DEFAULT 'a', PRIMARY KEY (id))")
    name = f"h{uuid.uuid4().hex[:6]}"
    config = _written_while_stopped(mariadb, broker, database, tmp_path, name)
    _run_statements(mariadb, database)
    EngineThread(config).until_caught_up()  # the backlog, the server at its last definition
    _check(_records(broker, name, database), name, database)


def test_a_restart_anywhere_in_the_backlog_writes_what_an_uninterrupted_run_writes(mariadb, broker, database,
                                                                                   tmp_path):
    """Two engines over the same backlog: one reads it in one go, the other is stopped after a
    row, after an ALTER, and after the table's rename, and started again from its offsets (its
    schema history restored from them; the server at its last definition each time)."""
    mariadb.execute(f"CREATE TABLE `{database}`.t (id int(11) NOT NULL, v varchar(5) DEFAULT 'a', PRIMARY KEY (id))")
    whole, parts = f"w{uuid.uuid4().hex[:6]}", f"p{uuid.uuid4().hex[:6]}"
    config_whole = _written_while_stopped(mariadb, broker, database, tmp_path, whole)
    config_parts = _written_while_stopped(mariadb, broker, database, tmp_path, parts)
    positions = _run_statements(mariadb, database)
    EngineThread(config_whole).until_caught_up()
    for stop in (positions[2], positions[5], positions[13], None):  # after a row, an ALTER, the RENAME
        engine = EngineThread(config_parts)
        if stop is None:
            engine.until_caught_up()
        else:
            engine._target = stop
            engine._thread.join(120)
            assert not engine._thread.is_alive() and engine.error is None, engine.error
            assert engine.capture.position == stop  # stopped right there
    ours_whole, ours_parts = _records(broker, whole, database), _records(broker, parts, database)
    _check(ours_whole, whole, database)
    _check(ours_parts, parts, database)

    def renamed(records, name):
        text = json.dumps(records[name] + records[f"{name}.{database}.t"] + records[f"{name}.{database}.t2"])
        return json.loads(text.replace(name, "NAME"))

    assert renamed(ours_parts, parts) == renamed(ours_whole, whole)


def test_what_a_backlog_statement_does_not_say_is_read_from_the_server_and_said(mariadb, broker, database, tmp_path,
                                                                              caplog):
    """A TIMESTAMP column added without an explicit NULL (`explicit_defaults_for_timestamp`
    decides what the server made of it) is read from the server, which by then holds the next
    ALTER too: the first record describes the table with it (said in a warning when the stream
    reaches that ALTER, where the table is read again); the second is exact."""
    mariadb.execute(f"CREATE TABLE `{database}`.t (id int(11) NOT NULL, v varchar(5) DEFAULT 'a', PRIMARY KEY (id))")
    name = f"u{uuid.uuid4().hex[:6]}"
    config = _written_while_stopped(mariadb, broker, database, tmp_path, name)
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for statement in (f"ALTER TABLE `{database}`.t ADD COLUMN ts TIMESTAMP DEFAULT '2024-01-01 00:00:00'",
                          f"INSERT INTO `{database}`.t (id) VALUES (1)",
                          f"ALTER TABLE `{database}`.t ADD COLUMN z int(11) DEFAULT 5",
                          f"INSERT INTO `{database}`.t (id) VALUES (2)"):
            cursor.execute(statement)
    with caplog.at_level("INFO", logger="dblog"):
        EngineThread(config).until_caught_up()
    messages = [record.getMessage() for record in caplog.records]
    assert any("are read from the server (TIMESTAMP column 'ts'" in message for message in messages), messages
    assert any("whose definition was read from the server after it" in message for message in messages), messages
    records = _records(broker, name, database, ("t",))
    tables = [value["payload"]["tableChanges"][0]["table"] for _, value in records[name]
              if value["payload"]["source"]["snapshot"] == "false"]
    assert [[c["name"] for c in table["columns"]] for table in tables] == [["id", "v", "ts", "z"]] * 2
    rows = {value["payload"]["after"]["id"]: _defaults(value) for _, value in records[f"{name}.{database}.t"]}
    assert rows[2] == {"v": "a", "ts": "2024-01-01T00:00:00Z", "z": 5}


def test_offsets_without_a_history_start_from_the_servers_definitions_and_say_so(mariadb, broker, database,
                                                                                 tmp_path, caplog):
    """Offsets written by an earlier dblog (no `definitions_file`): the next start reads the
    captured tables from the server, with a warning, and goes on from there."""
    mariadb.execute(f"CREATE TABLE `{database}`.t (id int(11) NOT NULL, v varchar(5) DEFAULT 'a', PRIMARY KEY (id))")
    name = f"o{uuid.uuid4().hex[:6]}"
    config = _written_while_stopped(mariadb, broker, database, tmp_path, name)
    offsets = tmp_path / name / "offsets.json"
    document = json.loads(offsets.read_text())
    (tmp_path / name / document.pop("definitions_file")).unlink()
    offsets.write_text(json.dumps(document))
    mariadb.execute(f"INSERT INTO `{database}`.t (id) VALUES (1)")
    with caplog.at_level("WARNING", logger="dblog"):
        EngineThread(config).until_caught_up()
    assert any("hold no schema history" in record.getMessage() for record in caplog.records)
    assert "definitions_file" in json.loads(offsets.read_text())  # saved with them from now on
    (value,) = [value for _, value in _records(broker, name, database, ("t",))[f"{name}.{database}.t"]]
    assert _defaults(value) == {"v": "a"}
