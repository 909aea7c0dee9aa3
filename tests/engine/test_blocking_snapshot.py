"""Debezium's blocking snapshot: an `execute-snapshot` signal of `"type": "blocking"` pauses
streaming while the chosen tables are read in full, emits their rows as snapshot records, then
streams on from where it paused; and tables without a key, which the start-up (and any)
snapshot reads whole in one consistent snapshot ahead of the stream, dropping the streamed
changes that snapshot already holds (`ChangeCapture.read_whole`)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from support.harness import EngineThread, compare, make_config
from support.replay import strict_replay

from dblog.core.events import TableId
from dblog.mysql.chunk_reader import ChunkReader
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)


class Writer:
    """Random inserts, updates and deletes on the given tables until stopped."""

    def __init__(self, mariadb, statements: list[str]) -> None:
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(mariadb, statements), daemon=True)
        self._thread.start()

    def _run(self, mariadb, statements) -> None:
        rng = random.Random(39)
        try:
            with mariadb.connect() as connection, connection.cursor() as cursor:
                while not self._stop.wait(0.002):
                    cursor.execute(rng.choice(statements).format(n=rng.randint(1, 4000)))
        except BaseException as error:  # reported by stop()
            self.error = error

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.error:
            raise self.error


def _changes(config) -> list[dict]:
    return [record["value"] for record in read_json_lines(Path(config.sink.path)) if "op" in record["value"]]


def test_a_blocking_snapshot_pauses_streaming_while_it_reads_then_streams_on(mariadb, database, tmp_path):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, amount INT)")
    mariadb.execute(f"INSERT INTO {db}.orders SELECT seq, seq FROM {db}.seq_1_to_3000")
    mariadb.execute(f"CREATE TABLE {db}.events (id INT PRIMARY KEY, n INT)")
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 150})
    engine = EngineThread(config)
    writer = Writer(mariadb, [f"REPLACE INTO {db}.events VALUES ({{n}}, {{n}})",
                              f"UPDATE {db}.orders SET amount = amount + 1 WHERE id = {{n}}",
                              f"DELETE FROM {db}.orders WHERE id = {{n}}",
                              f"INSERT IGNORE INTO {db}.orders VALUES ({{n}} + 3000, 0)"])
    try:
        send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.orders"], "type": "blocking"},
                       "blocking-1")
        engine.wait_for("COMPLETED")
    finally:
        writer.stop()
    engine.until_caught_up()
    changes = _changes(config)
    reads = [index for index, change in enumerate(changes) if change["op"] == "r"]
    assert len(reads) > 2000
    # Streaming was paused: no change of any table between the blocking read's first and last row
    between = changes[reads[0]:reads[-1] + 1]
    assert [change["op"] for change in between] == ["r"] * len(between)
    assert any(change["op"] != "r" for change in changes[reads[-1]:])  # then the stream went on
    # The rows are as of one consistent snapshot, and the stream goes on exactly after it (MariaDB):
    # no change they already hold comes again.
    strict_replay(changes[reads[0]:], "orders")
    started = [n.data for n in engine.notifications if n.type == "STARTED"]
    assert started and started[-1]["data_collections"] == [f"{database}.orders"]
    result = compare(mariadb, config.sink.path, [TableId(database, "orders"), TableId(database, "events")])
    assert result.equal, result.summary()


def _multiset(changes: list[dict], table: str) -> Counter:
    """A table without a key replayed: r and c add a row, d removes one equal to `before`, u
    replaces one."""
    rows: Counter = Counter()
    for change in changes:
        if change["source"]["table"] != table:
            continue
        if change["op"] in ("d", "u"):
            before = tuple(sorted(change["before"].items()))
            assert rows[before] > 0, f"{change['op']} of a row the replay does not hold: {before}"
            rows[before] -= 1
        if change["op"] in ("r", "c", "u"):
            rows[tuple(sorted(change["after"].items()))] += 1
    return +rows


def _server_multiset(mariadb, database: str, table: str) -> Counter:
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM `{database}`.`{table}`")
        names = [column[0] for column in cursor.description]
        return Counter(tuple(sorted(zip(names, row))) for row in cursor.fetchall())


@pytest.mark.parametrize("reads", ["incremental", "blocking"])
def test_the_start_up_snapshot_reads_a_keyless_table_whole_at_an_exact_position(mariadb, database, tmp_path,
                                                                                 monkeypatch, reads):
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.log (a INT, b VARCHAR(10))")  # no key at all, duplicates too
    mariadb.execute(f"INSERT INTO {db}.log SELECT seq % 50, CONCAT('v', seq % 7) FROM {db}.seq_1_to_2000")
    mariadb.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, amount INT)")
    mariadb.execute(f"INSERT INTO {db}.orders SELECT seq, seq FROM {db}.seq_1_to_1000")
    # Commits after the stream's position and before the consistent snapshot: in the rows read,
    # and streamed afterwards; the stream must drop them (else the inserts count twice).
    original = getattr(ChunkReader, "read_whole", None)  # (absent before tables without a key were read)

    def read_whole(self, schema, condition=None, source=None, max_bytes=None):
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {db}.log VALUES (999, 'ahead'), (999, 'ahead')")
            cursor.execute(f"DELETE FROM {db}.log WHERE a = 1 LIMIT 1")
            cursor.execute(f"UPDATE {db}.log SET b = 'moved' WHERE a = 2 LIMIT 1")
        return original(self, schema, condition, source, max_bytes)

    monkeypatch.setattr(ChunkReader, "read_whole", read_whole, raising=False)
    writer = Writer(mariadb, [f"INSERT INTO {db}.log VALUES ({{n}} % 60, 'w')",
                              f"DELETE FROM {db}.log WHERE a = {{n}} % 60 LIMIT 1",
                              f"UPDATE {db}.log SET b = 'u' WHERE a = {{n}} % 60 LIMIT 1",
                              f"UPDATE {db}.orders SET amount = amount + 1 WHERE id = {{n}} % 1000 + 1"])
    snapshot = {"startup": "initial", "chunk_size": 100}
    if reads == "blocking":  # (incremental: the default)
        snapshot["startup_reads"] = reads
    config = make_config(mariadb, database, tmp_path, snapshot=snapshot)
    try:
        engine = EngineThread(config)
        engine.wait_for("COMPLETED")
    finally:
        writer.stop()
    engine.until_caught_up()
    done = {n.data["data_collection"]: n.data for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"}
    assert done[f"{database}.log"]["status"] == "SUCCEEDED"
    changes = _changes(config)
    assert sum(1 for change in changes if change["op"] == "r" and change["source"]["table"] == "log") > 1000
    assert _multiset(changes, "log") == _server_multiset(mariadb, database, "log")
    result = compare(mariadb, config.sink.path, [TableId(database, "orders")])
    assert result.equal, result.summary()
    assert not engine.capture.progress.read_ahead  # the stream has passed the read: nothing left to drop
