"""The engine drops what the tool it took over from already sent of the first transaction
(Offsets.delivered, dblog.core.delivered_cut): a real MariaDB's binlog, a cut placed inside a
rows event of a two-statement transaction, the engine started from it. What it sends is the
transaction's changes after the cut, then everything else; once the transaction has passed, the
offsets no longer hold the cut."""

from __future__ import annotations

import pymysql

from dblog.core.delivered_cut import DeliveredCut
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.jsonl.sink import read_json_lines


def test_the_engine_sends_the_transaction_from_the_cut_on(mariadb, database, tmp_path):
    from support.harness import EngineThread, make_config

    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t SELECT seq, seq FROM `{database}`.seq_1_to_10")
    connection = pymysql.connect(host=mariadb.host, port=mariadb.port, user=mariadb.user, password=mariadb.password,
                                 database=database, autocommit=False)
    with connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO t SELECT seq, seq FROM seq_101_to_110")
        cursor.execute("UPDATE t SET v = v + 1 WHERE id <= 5")
        connection.commit()
        cursor.execute("INSERT INTO t VALUES (500, 500)")
        connection.commit()
    (file, _), = [row[:2] for row in mariadb.execute("SHOW BINARY LOGS")][-1:]
    events = [row[1:] for row in mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'")]  # Pos, type, server, end, info
    starts = [index for index, event in enumerate(events) if event[1] == "Gtid"]
    begin = starts[-2]  # the two-statement transaction
    rows_events = [event for event in events[begin:starts[-1]] if event[1].endswith("_rows_v1")]
    assert [event[1] for event in rows_events] == ["Write_rows_v1", "Update_rows_v1"]
    position = mariadb.execute(f"SELECT BINLOG_GTID_POS('{file}', {events[begin][0]})")[0][0]
    config = make_config(mariadb, database, tmp_path, source={"include": [f"{database}\\.t"]})
    cut = DeliveredCut(file, events[begin][0], rows_events[0][3], 4)  # 4 of the 10 inserts sent
    OffsetStore(config.offsets.path).save(Offsets("mariadb", GtidSet.parse(position, "mariadb"), delivered=cut))
    engine = EngineThread(config)
    try:
        engine.until_caught_up()
    finally:
        engine.stop()
    sent = [(line["value"]["op"], (line["value"]["after"] or line["value"]["before"])["id"])
            for line in read_json_lines(config.sink.path) if line["value"] is not None and line["value"].get("op")]
    assert sent == [("c", key) for key in range(105, 111)] + [("u", key) for key in range(1, 6)] + [("c", 500)]
    assert OffsetStore(config.offsets.path).load().delivered is None
