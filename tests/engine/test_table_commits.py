"""Commits per table: a table whose commit is slow does not hold the others back, each table's
batches commit in order, the offsets saved are those of the latest cut every table holds, a
failure reaches the loop's thread, housekeeping runs only while no table commits."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from dblog.core.capture import ChangeCapture
from dblog.core.events import TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.offsets import Offsets
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.runtime.table_commits import TableCommits
from dblog.sinks.base import Sink


@dataclass
class Batch:
    table_key: str
    rows: list[int]


class TablesSink(Sink):
    """Tables `a` and `b`; a table's commits wait for its gate; records what became durable."""

    commits_per_table = True

    def __init__(self) -> None:
        self.pending: dict[str, list[int]] = {"a": [], "b": []}
        self.durable: dict[str, list[list[int]]] = {"a": [], "b": []}
        self.gates = {"a": threading.Event(), "b": threading.Event()}
        self.fail: set[str] = set()
        self.housekeeping: list[dict[str, int]] = []
        self.committing: set[str] = set()

    def write_to(self, table: str, rows: list[int]) -> None:
        self.pending[table].extend(rows)

    def pending_tables(self) -> list[str]:
        return [table for table, rows in self.pending.items() if rows]

    def known_tables(self) -> list[str]:
        return list(self.pending)

    def detach(self, tables=None) -> list[Batch]:
        batches = [Batch(table, self.pending[table]) for table in tables or self.pending]
        for batch in batches:
            self.pending[batch.table_key] = []
        return batches

    def commit(self, batch, offsets) -> None:
        (one,) = batch
        self.committing.add(one.table_key)
        try:
            assert self.gates[one.table_key].wait(10)
            if one.table_key in self.fail:
                raise RuntimeError(f"commit of {one.table_key} failed")
            self.durable[one.table_key].append(one.rows)
        finally:
            self.committing.discard(one.table_key)

    def after_commit(self) -> None:
        assert not self.committing
        self.housekeeping.append({table: len(rows) for table, rows in self.durable.items()})


def offsets(n: int) -> Offsets:
    return Offsets("mariadb", GtidSet.parse(f"0-1-{n}", "mariadb"), None)


def eventually(predicate, seconds: float = 10) -> None:
    done = threading.Event()
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("not reached")


def test_a_slow_table_does_not_hold_another_and_offsets_wait_for_both():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    try:
        sink.gates["b"].set()  # b commits at once, a waits for the test
        sink.write_to("a", [1])
        sink.write_to("b", [2])
        commits.submit(offsets(2))
        eventually(lambda: sink.durable["b"] == [[2]])
        sink.write_to("a", [3])  # a is still committing: its rows wait for its next batch
        sink.write_to("b", [4])
        eventually(lambda: not commits.busy)  # b can start again (once its commit has returned)
        commits.submit(offsets(4))
        eventually(lambda: sink.durable["b"] == [[2], [4]])
        assert sink.durable["a"] == [] and saved == []  # a holds nothing yet: no offsets
        sink.gates["a"].set()
        eventually(lambda: sink.durable["a"] == [[1]])
        eventually(lambda: saved == ["0-1-2"])  # a holds the first cut, b both: the first cut
        commits.submit(offsets(5))  # a's second batch, its rows written during its first commit
        commits.wait()
        assert sink.durable["a"] == [[1], [3]] and saved == ["0-1-2", "0-1-5"]
    finally:
        for gate in sink.gates.values():
            gate.set()
        commits.close()


def test_a_table_with_nothing_waiting_does_not_hold_the_offsets_back():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    try:
        sink.gates["a"].set()
        sink.write_to("a", [1])  # b has nothing
        commits.submit(offsets(1))
        commits.wait()
        assert saved == ["0-1-1"]
        assert not commits.busy  # nothing waits: a cut still moves the offsets (the stream's position)
        commits.submit(offsets(9))
        assert saved == ["0-1-1", "0-1-9"]
    finally:
        for gate in sink.gates.values():
            gate.set()
        commits.close()


def test_a_failed_commit_is_raised_on_the_loops_thread_and_no_later_offsets_are_saved():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    try:
        sink.fail.add("a")
        sink.gates["a"].set()
        sink.gates["b"].set()
        sink.write_to("a", [1])
        sink.write_to("b", [2])
        commits.submit(offsets(2))
        with pytest.raises(RuntimeError, match="commit of a failed"):
            commits.wait()
        assert saved == []
    finally:
        commits.close()


def test_housekeeping_runs_only_while_no_table_commits():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    try:
        sink.gates["b"].set()
        sink.write_to("a", [1])
        sink.write_to("b", [2])
        commits.submit(offsets(2))
        eventually(lambda: sink.durable["b"] == [[2]])
        assert sink.housekeeping == []  # a is still committing
        sink.gates["a"].set()
        commits.wait()
        eventually(lambda: sink.housekeeping == [{"a": 1, "b": 1}])
    finally:
        for gate in sink.gates.values():
            gate.set()
        commits.close()


def test_a_table_the_sink_let_go_holds_no_offsets_back():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    try:
        sink.gates["a"].set()
        sink.write_to("a", [1])
        commits.submit(offsets(1))
        commits.wait()
        del sink.pending["b"]  # e.g. after DDL: the sink forgets the table
        sink.write_to("a", [2])
        commits.submit(offsets(2))
        commits.wait()
        assert saved == ["0-1-1", "0-1-2"]
    finally:
        for gate in sink.gates.values():
            gate.set()
        commits.close()


def test_close_lets_the_commits_under_way_finish():
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(str(o.position)))
    sink.write_to("a", [1])
    sink.write_to("b", [2])
    commits.submit(offsets(2))
    for gate in sink.gates.values():
        threading.Timer(0.2, gate.set).start()
    commits.close()
    assert sink.durable == {"a": [[1]], "b": [[2]]} and saved == ["0-1-2"]


def test_the_offsets_saved_for_a_cut_are_those_of_the_cut_not_of_what_the_loop_did_since():
    """Issue 36, item 8. The engine's cut (`Engine._commit_when_due`: the capture's checkpoint and
    its own `channel_offsets`, a dict it keeps updating) is saved only once the commits under
    way end, while the loop reads on: it polls a Kafka signal, queues its snapshot (STARTED has
    gone out), pauses, streams a transaction. A crash after the save must find the signal's
    topic offset only together with its effect: the document saved is the one of the cut."""
    sink, saved = TablesSink(), []
    commits = TableCommits(sink, lambda o: saved.append(json.dumps(o.to_json(), sort_keys=True)))
    capture = ChangeCapture(GtidSet.parse("0-1-5", "mariadb"), SnapshotProgress(), chunk_size=10)
    channel_offsets = {"kafka_signals": {"0": 3}}  # the engine's live dict
    try:
        sink.write_to("a", [1])
        checkpoint = capture.checkpoint()
        cut = Offsets("mariadb", checkpoint.position, checkpoint.progress, channel_offsets, checkpoint.resume)
        at_cut = json.dumps(cut.to_json(), sort_keys=True)
        commits.submit(cut)  # a's commit waits for its gate, and the offsets for a
        channel_offsets["kafka_signals"] = {"0": 4}  # as the loop stores each poll's offsets
        assert capture.request_snapshot([TableSnapshot(TableId("shop", "orders"))], "k-exec")[0].type == "STARTED"
        capture.pause()
        gtid = Gtid.mariadb(0, 1, 6)
        capture.on_event(TransactionStart(gtid))
        capture.on_event(TransactionEnd(gtid))
        channel_offsets["kafka_signals"]["0"] = 5  # and a change inside the stored structure
        assert saved == []
        sink.gates["a"].set()
        commits.wait()
        assert saved == [at_cut]
    finally:
        for gate in sink.gates.values():
            gate.set()
        commits.close()
