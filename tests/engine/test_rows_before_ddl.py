"""Rows logged before DDL that the server applied while dblog was stopped, read after it: each
is keyed and written under the definition of its time (its binlog table map's), the JSON lines
sink's records included. (The Kafka sink's Connect schemas against Debezium's:
tests/sinks/kafka/test_connect_snapshot_differential.py.)"""

from __future__ import annotations

import pytest
from support.harness import EngineThread, make_config, position_taken

from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("reader_process", [False, True], ids=["in_process", "reader_process"])
def test_a_backlog_across_alters_is_keyed_and_written_by_the_definitions_of_its_time(
        mariadb, database, tmp_path, reader_process):
    """The primary key renamed, a column dropped, an INT made a VARCHAR, a decimal's scale
    changed, all while dblog is stopped: the row inserted before them is keyed by `id` (the
    server's key is `ident` by then: keyed by it, the row had no key value) and written with its
    own columns; rows after them by the new definition; the stream then goes on under it."""
    table = f"`{database}`.t"
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2), spent TIME(3), flag INT)")
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"},
                         source={"include": [rf"{database}\.t"], "reader_process": reader_process},
                         columns={"truncate": [{"columns": [rf"{database}\.t\.flag"], "chars": 2}]})
    position_taken(config)
    for statement in (f"INSERT INTO {table} VALUES (1, 1.25, '01:02:03.5', 7)",
                      f"ALTER TABLE {table} RENAME COLUMN id TO ident",
                      f"ALTER TABLE {table} DROP COLUMN spent",
                      f"UPDATE {table} SET amount = 1.5 WHERE ident = 1",
                      f"ALTER TABLE {table} MODIFY COLUMN flag VARCHAR(5), MODIFY COLUMN amount DECIMAL(12,3)",
                      f"INSERT INTO {table} VALUES (2, 2.5, 'yes')"):
        mariadb.execute(statement)
    engine = EngineThread(config)  # the backlog, under the server's last definition
    mariadb.execute(f"UPDATE {table} SET flag = 'no' WHERE ident = 1")
    engine.until_caught_up()
    rows = [(r["key"], r["value"]["op"], r["value"]["after"]) for r in read_json_lines(config.sink.path)
            if "op" in r["value"]]
    assert rows == [
        ({"id": 1}, "c", {"id": 1, "amount": "1.25", "spent": "01:02:03.500", "flag": 7}),
        ({"ident": 1}, "u", {"ident": 1, "amount": "1.50", "flag": 7}),
        ({"ident": 2}, "c", {"ident": 2, "amount": "2.500", "flag": "ye"}),  # truncated: a string now
        ({"ident": 1}, "u", {"ident": 1, "amount": "1.500", "flag": "no"}),
    ]
