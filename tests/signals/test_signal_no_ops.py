"""A valid signal that changes nothing is answered with a notification saying so (Debezium has
no type for it; before, dblog said nothing): NOTHING_TO_STOP, ALREADY_PAUSED, NOT_PAUSED, each
with the signal's id in `request`, a human `message` and the snapshot's `data_collections`.
Pure tests on the capture and its signal handling, then one through the real signal table."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.capture import ChangeCapture
from dblog.core.events import Notification, TableId
from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.runtime.signal_handling import SignalHandling
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table

pytestmark = pytest.mark.timeout(300)

ORDERS, CUSTOMERS = TableId("shop", "orders"), TableId("shop", "customers")


def handling(*queued: TableId) -> SignalHandling:
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), SnapshotProgress([TableSnapshot(t) for t in queued]),
                            chunk_size=3)
    return SignalHandling(capture, lambda: [ORDERS, CUSTOMERS], lambda table: ["id"], lambda table: True, None)


def answer(signals: SignalHandling, signal_id: str, signal_type: str, data: str = "{}") -> list[tuple[str, dict]]:
    return [(n.type, n.data) for n in signals.on_signal_row({"id": signal_id, "type": signal_type, "data": data})
            if isinstance(n, Notification)]


@pytest.mark.parametrize("data", ["{}", '{"data-collections": ["shop\\\\.orders"]}'])
def test_stop_with_no_snapshot_running(data):
    [(kind, fields)] = answer(handling(), "x1", "stop-snapshot", data)
    assert kind == "NOTHING_TO_STOP"
    assert fields == {"request": "x1", "data_collections": [],
                      "message": "stop-snapshot changed nothing: no snapshot is running"}


def test_stop_matching_no_queued_or_running_table():
    signals = handling(ORDERS, CUSTOMERS)
    [(kind, fields)] = answer(signals, "x2", "stop-snapshot", '{"data-collections": ["shop\\\\.order"]}')
    assert kind == "NOTHING_TO_STOP" and fields["request"] == "x2"
    assert fields["data_collections"] == ["shop.orders", "shop.customers"]  # what it could have stopped
    assert "no queued or running table matches ['shop\\\\.order']" in fields["message"]
    assert len(signals.capture.progress.queue) == 2
    # A stop that stops something is ABORTED, as before.
    assert [kind for kind, _ in answer(signals, "x3", "stop-snapshot", '{"data-collections": ["shop\\\\.orders"]}')] \
        == ["ABORTED"]


def test_pause_when_already_paused():
    signals = handling(ORDERS)
    assert [kind for kind, _ in answer(signals, "p1", "pause-snapshot")] == ["PAUSED"]
    [(kind, fields)] = answer(signals, "p2", "pause-snapshot")
    assert kind == "ALREADY_PAUSED" and fields["request"] == "p2" and fields["data_collections"] == ["shop.orders"]
    assert "already paused" in fields["message"] and signals.capture.progress.paused


def test_pause_with_nothing_running_is_a_change_and_says_what_it_does():
    """It holds the next snapshot requested until a resume (the Kafka tests rely on it): PAUSED."""
    signals = handling()
    [(kind, fields)] = answer(signals, "p1", "pause-snapshot")
    assert kind == "PAUSED" and "waits for resume-snapshot" in fields["message"]
    answer(signals, "s1", "execute-snapshot", '{"data-collections": ["shop\\\\.orders"]}')
    assert signals.capture.next_read() is None  # held


@pytest.mark.parametrize("queued, which", [((), "no snapshot is paused or running"),
                                           ((ORDERS,), "the snapshot is not paused: it is running")])
def test_resume_when_not_paused(queued, which):
    signals = handling(*queued)
    [(kind, fields)] = answer(signals, "r1", "resume-snapshot")
    assert kind == "NOT_PAUSED"
    assert fields == {"request": "r1", "data_collections": [str(t) for t in queued],
                      "message": f"resume-snapshot changed nothing: {which}"}
    # Paused, a resume is RESUMED, as before.
    answer(signals, "p1", "pause-snapshot")
    assert [kind for kind, _ in answer(signals, "r2", "resume-snapshot")] == ["RESUMED"]


def test_no_op_signals_through_the_signal_table(mariadb, database, tmp_path):
    """Each no-op answered in turn while a snapshot is paused mid-table and after it ends; the
    engine goes on: the snapshot completes and the sink equals the source."""
    db = f"`{database}`"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(f"INSERT INTO {db}.t SELECT seq, seq FROM mysql.seq_1_to_20000")
    table = TableId(database, "t")
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 10})
    engine = EngineThread(config)

    def answered(signal_id: str) -> Notification:
        engine.eventually(lambda: any(n.data.get("request") == signal_id for n in engine.notifications), 60,
                          message=f"an answer to {signal_id}")
        return next(n for n in engine.notifications if n.data.get("request") == signal_id)

    send_via_table(config, "stop-snapshot", {}, "stop-idle")
    send_via_table(config, "resume-snapshot", {}, "resume-idle")
    assert answered("stop-idle").type == "NOTHING_TO_STOP"
    assert answered("resume-idle").type == "NOT_PAUSED"
    send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.t"]}, "s1")
    engine.wait_for("IN_PROGRESS")
    send_via_table(config, "resume-snapshot", {}, "resume-running")  # acted upon before the pause
    send_via_table(config, "pause-snapshot", {}, "p1")
    engine.wait_for("PAUSED")
    assert engine.capture.progress.current is not None, "the snapshot ended before the pause: make t larger"
    assert answered("resume-running").data["message"].endswith("not paused: it is running")
    send_via_table(config, "pause-snapshot", {}, "p2")
    send_via_table(config, "stop-snapshot", {"data-collections": [f"{database}\\.other"]}, "stop-other")
    assert answered("p2").type == "ALREADY_PAUSED"
    stop_other = answered("stop-other")
    assert stop_other.type == "NOTHING_TO_STOP" and stop_other.data["data_collections"] == [str(table)]
    send_via_table(config, "resume-snapshot", {}, "r1")
    engine.wait_for("COMPLETED")
    engine.until_caught_up()
    assert [n.type for n in engine.notifications if n.type in ("NOTHING_TO_STOP", "NOT_PAUSED", "ALREADY_PAUSED")] \
        == ["NOTHING_TO_STOP", "NOT_PAUSED", "NOT_PAUSED", "ALREADY_PAUSED", "NOTHING_TO_STOP"]
    assert "ABORTED" not in engine.types() and "REJECTED" not in engine.types()
    result = compare(mariadb, config.sink.path, [table])
    assert result.equal, result.summary()


def test_every_signal_type_has_one_action_in_the_table():
    """Issue 37: signals are dispatched through one table (type -> action), as parsed through one
    (name -> parser); a parsed type without an action would fail at run time, so check here, and
    check that signal_handling keeps no isinstance chain over the signal types."""
    import ast
    import inspect

    import dblog.runtime.signal_handling as module
    from dblog.signals.model import _PARSERS

    parsed = {type(parser("s", {"data-collections": ["shop.orders"], "message": "m"})) for parser in _PARSERS.values()}
    assert parsed == set(module._ACTIONS)
    chains = [node for node in ast.walk(ast.parse(inspect.getsource(module)))
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"]
    assert not chains, "dispatch signals through _ACTIONS, not isinstance"
