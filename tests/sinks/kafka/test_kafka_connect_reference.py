"""The reference rig itself (`lab.kafka_connect`): a Kafka Connect worker in distributed mode runs
Debezium's MySQL connector from its JSON config against the run's MariaDB, its records land in
the broker's topics, and its offsets topic reads back as Debezium's offsets per connector (the
offset hand-over from Debezium starts from them)."""

from __future__ import annotations

import json
import uuid

import pytest
from support import eventually
from support.fixtures.connect import debezium_connector
from support.kafka_topics import topic_records

from lab.kafka_connect import connector_offsets

pytestmark = pytest.mark.timeout(300)


def _rows(bootstrap: str, topic: str) -> list[tuple]:
    return [(None if r.key is None else json.loads(r.key), None if r.value is None else json.loads(r.value))
            for r in topic_records(bootstrap, topic)[0]]


def test_a_connector_captures_a_table_into_the_broker(mariadb, database, connect_broker, kafka_connect):
    name = f"c{uuid.uuid4().hex[:6]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, label VARCHAR(20))")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 'one'), (2, 'two')")
    kafka_connect.create(name, debezium_connector(mariadb, connect_broker.bootstrap, name,
                                                  **{"database.include.list": database}))
    try:
        kafka_connect.wait_running(name)
        topic = f"{name}.{database}.t"
        snapshot = eventually(lambda: len(rows := _rows(connect_broker.bootstrap, topic)) >= 2 and rows,
                              message=lambda: f"the snapshot's two rows on {topic}")
        assert [(key["payload"], value["payload"]["op"], value["payload"]["after"]) for key, value in snapshot] == [
            ({"id": 1}, "r", {"id": 1, "label": "one"}), ({"id": 2}, "r", {"id": 2, "label": "two"})]
        assert snapshot[0][1]["schema"]["name"] == f"{name}.{database}.t.Envelope"  # schemas.enable: the worker's default

        mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 1")
        streamed = eventually(lambda: len(rows := _rows(connect_broker.bootstrap, topic)) >= 4 and rows[2:],
                              message=lambda: f"the delete and its tombstone on {topic}")
        assert streamed[0][1]["payload"]["op"] == "d" and streamed[0][1]["payload"]["before"]["id"] == 1
        assert streamed[1] == ({"schema": snapshot[0][0]["schema"], "payload": {"id": 1}}, None)  # the tombstone

        # The offsets topic, read back: the connector's one source partition, at the delete, the last
        # record it wrote (Debezium's offset of a streamed row: where its event starts, its `row`, and
        # the binlog file; the server's binlog ends with the delete's transaction).
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SHOW MASTER STATUS")
            binlog_file, binlog_pos = cursor.fetchone()[:2]

        def committed():
            offsets = connector_offsets(connect_broker.bootstrap, kafka_connect.offsets_topic).get(name)
            return offsets if offsets and "row" in offsets[0]["offset"] else None  # streamed, past the snapshot

        offsets = eventually(committed, message=lambda: "the delete's offset in the offsets topic: "
                             f"{connector_offsets(connect_broker.bootstrap, kafka_connect.offsets_topic)}")
        assert [entry["partition"] for entry in offsets] == [{"server": name}]
        offset = offsets[0]["offset"]
        assert offset["file"] == binlog_file and 0 < offset["pos"] < binlog_pos and offset["row"] == 1, offset
        assert "snapshot" not in offset, offset
        # the worker's own reading of its offsets topic agrees (KIP-875's REST endpoint)
        assert kafka_connect.rest_offsets(name) == {"offsets": offsets}
    finally:
        kafka_connect.delete(name)
