"""The Kafka sink's runs as the tests drive and check them: its configuration in dblog's normal
form, its topics replayed into rows and compared with the source (`compare_topics`), and the
kill -9 run whose topics must replay to the source (`kill_9_restarts_replay_to_the_source`, on a
plain and on a secured broker). Shared by tests/sinks/kafka/test_kafka_sink.py and
test_kafka_security.py."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from support.harness import EngineProcess, config_data
from support.kafka_topics import decode, topic_records

from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.verify import Comparison, compare_with_source
from dblog.demo.workload import WriteLoad, load, tables
from dblog.mysql.source_connection import SourceConnection


def replay(partitions: dict[int, list], schemas: bool = False) -> dict[tuple, dict]:
    """A topic applied in order, partition by partition (a key lives on one partition): the last
    `after` per key; a delete or a tombstone removes the key, a truncate empties the table."""
    rows: dict[tuple, dict] = {}
    for records in partitions.values():
        for record in records:
            key, value = decode(record, schemas)
            if value is None:
                rows.pop(tuple(key.values()), None)
            elif value["op"] == "t":
                rows.clear()
            elif value["op"] == "d":
                rows.pop(tuple(key.values()), None)
            else:
                rows[tuple(key.values())] = value["after"]
    return rows


def compare_topics(mariadb, bootstrap: str, connector: str, source_tables: list[TableId],
                   **client_options) -> Comparison:
    replayed = {str(table): replay(topic_records(bootstrap, f"{connector}.{table}", **client_options))
                for table in source_tables}
    with SourceConnection(lambda: mariadb.connect()) as reader:
        return compare_with_source(reader, source_tables, lambda table: replayed[str(table)],
                                   Comparison(subject="Kafka topics replayed"))


# The tests that replay topics into rows and compare them with `SELECT *` have the sink write
# dblog's normal form (`values = "dblog"`), the form the comparison reads; Debezium's encodings of
# the same values are checked against Debezium itself (test_connect_differential.py).
NORMAL_FORM = {"values": "dblog"}


def kafka_config_data(mariadb, database: str, workdir: Path, bootstrap: str, name: str, **sink) -> dict:
    return config_data(mariadb, database, workdir, name=name, kafka={"bootstrap_servers": bootstrap},
                       sink={"type": "kafka", "kafka": {**NORMAL_FORM, **sink}})


def executed(mariadb) -> GtidSet:
    return GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")


def snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


def kill_9_restarts_replay_to_the_source(mariadb, database, tmp_path, kafka: dict, **client_options) -> None:
    """`dblog run` killed mid-snapshot and while streaming, under writes, then caught up: the topics
    replayed equal the source. `kafka`: the config's [kafka] section; `client_options`: how the
    test reads the topics back (TLS and SASL for a secured broker)."""
    rows = 4_000
    with mariadb.connect() as connection:
        load(connection, database, rows)
    name = f"c{uuid.uuid4().hex[:6]}"
    data = kafka_config_data(mariadb, database, tmp_path, kafka["bootstrap_servers"], name)
    data["kafka"] = dict(kafka)
    data["snapshot"]["chunk_size"] = 200
    # Commits every 50 ms, so that one lands mid-snapshot: at the default 1 s the whole snapshot
    # (about 1.5 s here) can finish between two commits and the wait below would never see it.
    data["offsets"]["commit_interval_seconds"] = 0.05
    engine = EngineProcess(data, tmp_path)
    writers = WriteLoad(lambda: mariadb.connect(), database, rows, writers=2, seed=11, rate=100).start()
    try:
        engine.start()
        engine.wait_until(lambda o: snapshot_done(o) or sum(
            e.rows_scanned for e in SnapshotProgress.from_json(o.snapshot).queue) >= 1000)
        engine.kill()  # mid-snapshot
        engine.start()
        engine.wait_until(snapshot_done)
        time.sleep(1)
        engine.kill()  # streaming
        engine.start()
        time.sleep(1)
    finally:
        writers.stop()
    target = executed(mariadb)
    engine.wait_until(lambda o: snapshot_done(o) and target.issubset(o.position))
    engine.terminate()
    result = compare_topics(mariadb, kafka["bootstrap_servers"], name, tables(database), **client_options)
    assert result.equal, result.summary()
