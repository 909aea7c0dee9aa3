"""A backlog across ADD, RENAME, DROP and MODIFY COLUMN, read by the engine after it: each row
must come out with the names and types of its moment, keyed by the key of its moment, and the
stream go on under the last definition. Run on the servers whose binlog says least about it:
table maps without column names (engine/test_minimal_row_metadata.py) and capture by binlog file
and position (engine/test_file_positions.py)."""

from __future__ import annotations

import uuid

from support.harness import EngineThread, make_config, position_taken

from dblog.sinks.jsonl.sink import read_json_lines


def decode_a_column_change_backlog(server, tmp_path, **source) -> list[dict]:
    """dblog's position taken, then rows written between the column changes with dblog stopped,
    then dblog started (`source`: more source settings) and one more row written: asserts the rows
    as above; returns the sink's records (their values), the statements' included."""
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{database}`")
    table = f"`{database}`.t"
    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2), spent TIME(3), flag INT)")
    # not captured, but its rows are decoded too (signals): read from the server, not the history
    server.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data TEXT NULL)")
    config = make_config(server, database, tmp_path, snapshot={"startup": "never"},
                         source={**source, "include": [rf"{database}\.t"]})
    position_taken(config)
    for statement in (f"INSERT INTO {table} VALUES (1, 1.25, '01:02:03.5', 7)",
                      f"ALTER TABLE {table} ADD COLUMN size ENUM('s', 'm') NOT NULL DEFAULT 'm' AFTER id",
                      f"INSERT INTO {table} VALUES (3, 's', -3.5, '00:00:01', -7)",
                      f"ALTER TABLE {table} RENAME COLUMN id TO ident",
                      f"ALTER TABLE {table} DROP COLUMN spent",
                      f"UPDATE {table} SET amount = 1.5 WHERE ident = 1",
                      f"ALTER TABLE {table} MODIFY COLUMN flag VARCHAR(5), MODIFY COLUMN amount DECIMAL(12,3)",
                      f"INSERT INTO `{database}`.dblog_signal VALUES ('s1', 'log', '{{\"message\": \"hi\"}}')",
                      f"INSERT INTO {table} VALUES (2, 's', 2.5, 'yes')"):
        server.execute(statement)
    engine = EngineThread(config)  # the backlog, under the server's last definition
    server.execute(f"UPDATE {table} SET flag = 'no' WHERE ident = 1")
    engine.until_caught_up()
    records = list(read_json_lines(config.sink.path))
    rows = [(r["key"], r["value"]["op"], r["value"]["after"]) for r in records if "op" in r["value"]]
    assert rows == [
        ({"id": 1}, "c", {"id": 1, "amount": "1.25", "spent": "01:02:03.500", "flag": 7}),
        ({"id": 3}, "c", {"id": 3, "size": "s", "amount": "-3.50", "spent": "00:00:01.000", "flag": -7}),
        ({"ident": 1}, "u", {"ident": 1, "size": "m", "amount": "1.50", "flag": 7}),
        ({"ident": 2}, "c", {"ident": 2, "size": "s", "amount": "2.500", "flag": "yes"}),
        ({"ident": 1}, "u", {"ident": 1, "size": "m", "amount": "1.500", "flag": "no"}),
    ]
    return [r["value"] for r in records]
