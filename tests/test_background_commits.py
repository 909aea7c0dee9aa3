"""The committer thread: the loop goes on while a batch commits, offsets are saved only after
their batch is durable and in order, a failure reaches the loop's thread."""

from __future__ import annotations

import threading

import pytest

from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.runtime.background_commits import BackgroundCommits
from dblog.sinks.base import Sink


class GatedSink(Sink):
    """Commits wait for the test to open the gate; records what became durable."""

    commits_in_background = True

    def __init__(self) -> None:
        self.written: list[int] = []
        self.durable: list[list[int]] = []
        self.gate = threading.Event()
        self.fail = False

    def write(self, changes) -> None:
        self.written.extend(changes)

    def detach(self) -> list[int]:
        batch, self.written = self.written, []
        return batch

    def commit(self, batch, offsets) -> None:
        assert self.gate.wait(10)
        if self.fail:
            raise RuntimeError("commit failed")
        self.durable.append(batch)


def offsets(n: int) -> Offsets:
    return Offsets("mariadb", GtidSet.parse(f"0-1-{n}", "mariadb"), None)


def test_the_loop_goes_on_while_a_batch_commits_and_offsets_follow_it():
    sink, saved = GatedSink(), []
    commits = BackgroundCommits(sink, lambda o: saved.append((str(o.position), list(sink.durable))))
    try:
        sink.write([1, 2])
        commits.submit(offsets(2))  # returns at once: the commit waits on the gate
        assert commits.busy and saved == []
        sink.write([3])  # the next batch grows meanwhile
        assert sink.written == [3]
        sink.gate.set()
        commits.wait()
        assert saved == [("0-1-2", [[1, 2]])]  # saved after its batch was durable
        commits.submit(offsets(3))
        commits.wait()
        assert [position for position, _ in saved] == ["0-1-2", "0-1-3"] and sink.durable == [[1, 2], [3]]
    finally:
        sink.gate.set()
        commits.close()


def test_a_failed_commit_is_raised_on_the_loops_thread_and_its_offsets_not_saved():
    sink, saved = GatedSink(), []
    commits = BackgroundCommits(sink, saved.append)
    try:
        sink.fail = True
        sink.gate.set()
        sink.write([1])
        commits.submit(offsets(1))
        with pytest.raises(RuntimeError, match="commit failed"):
            commits.wait()
        assert saved == []
    finally:
        commits.close()


def test_close_lets_the_commit_under_way_finish():
    sink, saved = GatedSink(), []
    commits = BackgroundCommits(sink, saved.append)
    sink.write([1])
    commits.submit(offsets(1))
    threading.Timer(0.2, sink.gate.set).start()
    commits.close()
    assert sink.durable == [[1]] and len(saved) == 1
