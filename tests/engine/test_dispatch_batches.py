"""The engine hands the sink a transaction's streamed changes together (`Engine.run`'s held
changes): bounded in changes and bytes, in binlog order, a signal row acted upon where it stands."""

from __future__ import annotations

from support.harness import EngineThread, make_config

from dblog.core.gtid import Gtid
from dblog.runtime import engine as engine_module
from dblog.sinks.jsonl.sink import JsonLinesSink, read_json_lines


class CallRecordingSink(JsonLinesSink):
    """JSON lines, and what each `write` call held: (table, id) per change."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[list[tuple[str, int]]] = []
        self.capture = None
        self.written_after_their_position: list[str] = []

    def write(self, changes):
        super().write(changes)
        for change in changes:  # the capture's position never covers a change the sink has not had
            gtid = Gtid.parse(change.source.gtid)
            if self.capture is not None and self.capture.position.with_gtid(gtid) == self.capture.position:
                self.written_after_their_position.append(change.source.gtid)
        if changes:
            self.calls.append([(change.table.table, (change.after or change.before)["id"]) for change in changes])


def test_a_transactions_changes_reach_the_sink_together_bounded_and_in_order(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.rows_t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.blobs (id INT PRIMARY KEY, b LONGBLOB)")
    mariadb.execute(f"CREATE TABLE `{database}`.dblog_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32), "
                    "data TEXT)")
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"})
    sink = CallRecordingSink(config.sink.path, lambda table: ("id",), config.name)
    engine = EngineThread(config, sink=sink)
    sink.capture = engine.capture
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{database}`.rows_t VALUES (0, 0)")  # one change, alone
        connection.commit()
        cursor.execute(f"INSERT INTO `{database}`.rows_t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 601)))
        connection.commit()
        cursor.execute("START TRANSACTION")
        for i in range(10):  # 10 changes of ~0.6 MiB: the byte bound cuts them
            cursor.execute(f"INSERT INTO `{database}`.blobs VALUES (%s, REPEAT('x', 600000))", (i,))
        connection.commit()
        # a signal row inside a transaction: the changes before it reach the sink before it is acted on
        cursor.execute("START TRANSACTION")
        cursor.execute(f"UPDATE `{database}`.rows_t SET v = v + 1 WHERE id BETWEEN 1 AND 3")
        cursor.execute(f"INSERT INTO `{database}`.dblog_signal VALUES ('s1', 'log', '{{\"message\": \"here\"}}')")
        cursor.execute(f"UPDATE `{database}`.rows_t SET v = v + 1 WHERE id BETWEEN 4 AND 5")
        connection.commit()
    engine.until_caught_up()

    calls, held = sink.calls, engine_module.HELD_CHANGES
    assert calls[0] == [("rows_t", 0)]
    assert [len(call) for call in calls[1:4]] == [held, held, 600 - 2 * held]
    assert calls[1:4] == [[("rows_t", i) for i in range(first, min(first + held, 601))] for first in (1, 257, 513)]
    blob_calls = calls[4:-2]  # ~600 KB each in the binlog: 7 of them pass HELD_BYTES (4 MiB)
    assert [len(call) for call in blob_calls] == [7, 3]
    assert [change for call in blob_calls for change in call] == [("blobs", i) for i in range(10)]
    assert calls[-2:] == [[("rows_t", 1), ("rows_t", 2), ("rows_t", 3)], [("rows_t", 4), ("rows_t", 5)]]
    assert not sink.written_after_their_position
    written = [(record["value"]["source"]["table"], record["key"]["id"]) for record in read_json_lines(config.sink.path)]
    assert written == [change for call in calls for change in call]  # the file holds them in the calls' order
