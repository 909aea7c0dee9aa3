"""`[columns]` through the engine on the real MariaDB, into the JSON-lines sink: snapshot rows and
streamed rows alike lose the excluded columns (a primary key column stays in the key) and carry
the masks, hashes and truncations; a column added later that the exclude list names never shows.
(The Kafka sink's records are compared with Debezium's own in
tests/sinks/kafka/test_connect_differential.py.)"""

from __future__ import annotations

import hashlib

import pytest
from support.harness import EngineThread, make_config

from dblog.sinks.column_options import java_serialized_string
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)

COLUMNS = {
    "exclude": [r".*\.people\.(ID|ssn.*)"],
    "mask": [{"columns": [r".*\.people\.phone"], "chars": 3}],
    "hash": [{"columns": [r".*\.people\.email"], "algorithm": "SHA-256", "salt": "pepper"}],
    "truncate": [{"columns": [r".*\.people\.(bio|photo)"], "chars": 4}],
}


def _hash(value: str) -> str:
    return hashlib.sha256(b"pepper" + java_serialized_string(value)).hexdigest()


def test_excluded_masked_and_truncated_columns_in_snapshot_and_streamed_rows(mariadb, database, tmp_path):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.people (id INT PRIMARY KEY, email VARCHAR(100), phone VARCHAR(20), "
                    "ssn CHAR(11), bio TEXT, photo BLOB)")
    mariadb.execute(f"INSERT INTO {db}.people VALUES (1, 'ann@example.com', '555-1234', '123-45-6789', "
                    "'a long biography', x'0001020304050607'), (2, NULL, NULL, NULL, NULL, NULL)")
    config = make_config(mariadb, database, tmp_path, columns=COLUMNS)
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED")
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.people SET email = 'bob@example.com', bio = 'ok' WHERE id = 1")
            cursor.execute(f"ALTER TABLE {db}.people ADD COLUMN ssn_last4 CHAR(4), ADD COLUMN city VARCHAR(20)")
            cursor.execute(f"INSERT INTO {db}.people VALUES (3, 'c@x', '1', '000-00-0000', 'bio3', x'ff', '0000', 'Oslo')")
            cursor.execute(f"UPDATE {db}.people SET id = 30 WHERE id = 3")
            cursor.execute(f"DELETE FROM {db}.people WHERE id = 2")
        engine.until_caught_up()
    finally:
        engine.stop()

    records = [record for record in read_json_lines(config.sink.path) if record["value"].get("op")]
    rows = [row for record in records for row in (record["value"]["before"], record["value"]["after"]) if row]
    assert {record["value"]["op"] for record in records} == {"r", "u", "c", "d"}
    assert all(not {"id", "ssn", "ssn_last4"} & set(row) for row in rows), rows
    assert all(set(record["key"]) == {"id"} for record in records)  # the key keeps the excluded id
    first = [r["value"]["after"] for r in records if r["value"]["op"] == "r" and r["key"] == {"id": 1}][0]
    assert first == {"email": _hash("ann@example.com"), "phone": "***", "bio": "a lo", "photo": "AAECAw=="}
    nulls = [r["value"]["after"] for r in records if r["value"]["op"] == "r" and r["key"] == {"id": 2}][0]
    assert nulls == {"email": None, "phone": "***", "bio": None, "photo": None}  # a mask writes NULL masked
    update = [r["value"] for r in records if r["value"]["op"] == "u"][0]
    assert update["before"]["email"] == _hash("ann@example.com") and update["after"]["email"] == _hash("bob@example.com")
    added = [r["value"]["after"] for r in records if r["value"]["op"] == "c" and r["key"] == {"id": 3}][0]
    assert added == {"email": _hash("c@x"), "phone": "***", "bio": "bio3", "photo": "/w==", "city": "Oslo"}
    # replayed, the records still give one row per key: the key is whole
    state = materialize(read_json_lines(config.sink.path))[f"{database}.people"]
    assert set(state) == {(1,), (30,)}
