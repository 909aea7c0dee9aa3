"""Tables without a primary key: keyed by `source.key_columns` or by a signal's surrogate key
(a unique NOT NULL column), else read whole in one consistent snapshot ahead of the stream
(tests/engine/test_blocking_snapshot.py checks that read under writes) while streaming goes on."""

from __future__ import annotations

import json
import random
import threading

import pytest
from support.harness import EngineThread, make_config, snapshot_under_writes

from dblog.core.events import TableId
from dblog.demo.verify import compare_sink_with_source
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.config import ConfigError
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(300)


def _keyless(mariadb, database: str, name: str, rows: int) -> TableId:
    db = f"`{database}`"
    mariadb.execute(f"CREATE TABLE {db}.{name} (uid INT NOT NULL, v VARCHAR(20), n INT NULL, UNIQUE KEY (uid))")
    mariadb.execute(f"INSERT INTO {db}.{name} SELECT seq, CONCAT('v', seq), NULL FROM {db}.seq_1_to_{rows}")
    return TableId(database, name)


class Writer:
    """Inserts, updates (also of the unique column) and deletes on one table until stopped."""

    def __init__(self, mariadb, table: TableId, rows: int) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(mariadb, table, rows), daemon=True)
        self._thread.start()

    def _run(self, mariadb, table, rows) -> None:
        rng, name = random.Random(5), f"`{table.db}`.`{table.table}`"
        with mariadb.connect() as connection, connection.cursor() as cursor:
            while not self._stop.wait(0.005):
                uid = rng.randint(1, rows + 200)
                action = rng.random()
                if action < 0.3:
                    cursor.execute(f"INSERT IGNORE INTO {name} VALUES (%s, 'new', 1)", (uid,))
                elif action < 0.6:
                    cursor.execute(f"UPDATE {name} SET v = 'upd', n = n + 1 WHERE uid = %s", (uid,))
                elif action < 0.7:
                    cursor.execute(f"UPDATE IGNORE {name} SET uid = uid + 100000 WHERE uid = %s", (uid,))
                else:
                    cursor.execute(f"DELETE FROM {name} WHERE uid = %s", (uid,))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _equal(mariadb, config, table: TableId, path=None) -> None:
    reader = SourceConnection(lambda: mariadb.connect(), {table: ("uid",)})
    try:
        result = compare_sink_with_source(path or config.sink.path, reader, [table])
    finally:
        reader.close()
    assert result.equal and result.rows[str(table)] > 0, result.summary()


def test_configured_key_columns_snapshot_a_keyless_table_under_writes(mariadb, database, tmp_path):
    table = _keyless(mariadb, database, "events", 5_000)
    config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 300},
                         source={"key_columns": {str(table): ["uid"]}})
    writer = Writer(mariadb, table, 5_000)
    engine, _ = snapshot_under_writes(writer, lambda: EngineThread(config))
    statuses = [n.data["status"] for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert "SUCCEEDED" in statuses
    _equal(mariadb, config, table)


@pytest.mark.parametrize("reader_process", [False, True], ids=["in-process", "reader-process"])
def test_surrogate_key_or_no_primary_key(mariadb, database, tmp_path, reader_process):
    """With a reader process (source.reader_process) the key reaches changes the child decoded
    without it: the engine re-keys them (BinlogReaderProcess.key_changed)."""
    keyless = _keyless(mariadb, database, "plain", 2_000)
    mariadb.execute(f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY)")
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 50},
                         source={"reader_process": reader_process})
    engine = EngineThread(config)
    # No key at all: the table is read whole (no chunks by key), streaming goes on.
    send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.plain"]}, "no-key")
    engine.wait_for("COMPLETED")
    [done] = [n.data for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert done["status"] == "SUCCEEDED" and done["total_rows_scanned"] == 2_000
    mariadb.execute(f"INSERT INTO `{database}`.other VALUES (1)")
    # With a surrogate key, under writes: the key dedupes the binlog's changes too. The writes
    # start once the snapshot has keyed the table (changes before that carry an empty key).
    send_via_table(config, "execute-snapshot",
                   {"data-collections": [rf"{database}\.plain"], "surrogate-key": "uid"}, "surrogate")
    def keyed() -> bool:  # the snapshot keyed the table when it captured its maximum key
        current = engine.capture.progress.current
        return engine.types().count("COMPLETED") >= 2 or (
            current is not None and current.surrogate_key == "uid" and current.started)

    engine.eventually(keyed, 60, interval=0.002, message="the snapshot to key the table by uid")
    writer = Writer(mariadb, keyless, 2_000)
    try:
        engine.eventually(lambda: engine.types().count("COMPLETED") >= 2, 120,
                          message="the surrogate-key snapshot COMPLETED")
    finally:
        writer.stop()
    engine.until_caught_up()
    statuses = [n.data["status"] for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert statuses == ["SUCCEEDED", "SUCCEEDED"]
    # The rows read whole carry no key (as the table's changes until the surrogate key keyed it):
    # the table keyed by uid is replayed from the surrogate-key snapshot's records.
    keyed = tmp_path / "keyed.jsonl"
    keyed.write_text("".join(json.dumps(record) + "\n" for record in read_json_lines(config.sink.path)
                             if record.get("key")))
    _equal(mariadb, config, keyless, keyed)


def test_a_key_that_cannot_serve_is_refused_at_start(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.dup (a INT NOT NULL, b INT)")
    config = make_config(mariadb, database, tmp_path, source={"key_columns": {f"{database}.dup": ["a"]}})
    with pytest.raises(ConfigError, match="no UNIQUE index"):
        EngineThread(config)


def test_a_keyless_table_larger_than_the_memory_bound_is_refused_naming_the_remedies(mariadb, database, tmp_path):
    """A table without a key is held whole until emitted: past snapshot.keyless_max_bytes on the
    wire its read stops (rows no longer kept) and the table ends NO_PRIMARY_KEY with the
    remedies, nothing of it emitted; streaming goes on, and a table under the bound is read."""
    _keyless(mariadb, database, "wide", 2_000)  # ~2,000 rows of ~15 bytes: past 1 KiB
    _keyless(mariadb, database, "narrow", 20)
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "keyless_max_bytes": 1024})
    engine = EngineThread(config)
    send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.wide", rf"{database}\.narrow"]},
                   "bounded")
    engine.wait_for("COMPLETED")
    mariadb.execute(f"INSERT INTO `{database}`.narrow VALUES (999, 'streamed', 1)")
    engine.until_caught_up()
    done = {n.data["data_collection"].rpartition(".")[2]: n.data for n in engine.notifications
            if n.type == "TABLE_SCAN_COMPLETED"}
    assert {table: data["status"] for table, data in done.items()} == {"wide": "NO_PRIMARY_KEY",
                                                                      "narrow": "SUCCEEDED"}, done
    records = list(read_json_lines(config.sink.path))
    assert not [r for r in records if r["value"]["source"]["table"] == "wide"]
    assert [r["value"]["after"]["v"] for r in records if r["value"]["op"] == "c"] == ["streamed"]
    reasons = [n.data for n in engine.notifications if "keyless_max_bytes" in json.dumps(n.data)]
    assert reasons and "surrogate-key" in json.dumps(reasons[0]) and "source.key_columns" in json.dumps(reasons[0])
