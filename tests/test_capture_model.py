"""Model-based test of the watermark algorithm (DESIGN.md §5: model first).

A small in-memory database (tables of `key -> row`, a commit-ordered log of transactions)
and the real `ChangeCapture` are driven by hypothesis through arbitrary interleavings of
writes (inserts, updates, deletes, delete-then-reinsert, key-changing updates), partial binlog
reads, chunk reads with writes between the low watermark, the SELECT and the high watermark,
commits that are in the binlog (and in the server's executed GTID set) before a SELECT can see
them, as MariaDB's are (dblog.core.visibility), heartbeats, checkpoints, crashes (losing an arbitrary part of the sink written after the last
checkpoint) and restarts, snapshot requests, pause and resume. Chunk reads and window waits
take arbitrary times (0 s to a day), so chunk limits vary over their whole range
(`next_chunk_size`: chunk_size up to max_chunk_size), and none of the checks may notice.

Checked:
* replaying the emitted events gives exactly the final tables;
* no snapshot read (`op=r`) is ever older than an event already emitted for its key;
* the reverse: no binlog event emitted after a snapshot read of its key is older than (or as
  old as) the state that read carried, so emitted versions never go back (outside the
  re-delivery after a crash, which restarts from the last checkpoint);
* a checkpoint is only ever a consistent cut (it restarts into the same guarantees).
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from dblog.core.capture import ChangeCapture, ChunkRead, ChunkResult, MaxKeyRead
from dblog.core.events import Heartbeat, RowChange, SourceInfo, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.visibility import BinlogCoordinate
from dblog.core.window import GtidWatermarks, SignalWatermarks

TABLES = (TableId("shop", "a"), TableId("shop", "b"))
SIGNALS = TableId("shop", "dblog_signal")
KEYS = st.integers(min_value=0, max_value=12)
# How long a chunk read or a window's wait took: none, a blink, seconds, a day.
SECONDS = st.just(0.0) | st.floats(1e-7, 1e-2) | st.floats(1e-2, 10.0) | st.floats(10.0, 86_400.0)


class Database:
    """Tables plus the binlog: a flat list of events, transactions in commit order."""

    def __init__(self, flavor: str) -> None:
        self.flavor = flavor
        self.tables: dict[TableId, dict[tuple, dict]] = {table: {} for table in TABLES}
        self.tables[SIGNALS] = {}
        self.log: list = []
        self.transactions = 0
        # The tables after each transaction; SELECTs see them after the first `visible` ones:
        # the storage engine makes commits visible in binlog order, some time after logging them.
        self.history: list[dict[TableId, dict[tuple, dict]]] = [self.copy()]
        self.visible = 0
        self.version = 0  # bumped by every row write; stored in the row as "v"

    def gtid(self, seq: int) -> Gtid:
        if self.flavor == "mysql":
            return Gtid.mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562", seq)
        return Gtid.mariadb(0, 1, seq)

    def copy(self) -> dict[TableId, dict[tuple, dict]]:
        return {table: dict(rows) for table, rows in self.tables.items()}

    def executed(self) -> GtidSet:
        position = GtidSet.empty(self.flavor)
        if self.transactions:
            if self.flavor == "mysql":
                return GtidSet.parse(f"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-{self.transactions}")
            position = position.with_gtid(self.gtid(self.transactions))
        return position

    def coordinate(self, transactions: int) -> BinlogCoordinate:
        """Where the `transactions`-th commit ends in the binlog."""
        return BinlogCoordinate.of("binlog.000001", transactions)

    def make_visible(self, transactions: int) -> None:
        self.visible = max(self.visible, min(transactions, self.transactions))

    def log_transaction(self, events: list) -> None:
        self.log.extend(events)
        self.history.append(self.copy())

    def commit(self, operations: list[tuple[TableId, str, tuple, tuple | None]]) -> None:
        """operations: (table, op, key, new_key-for-key-changing-update)."""
        self.transactions += 1
        gtid = self.gtid(self.transactions)
        self.log.append(TransactionStart(gtid))
        for row_index, (table, op, key, new_key) in enumerate(operations):
            rows = self.tables[table]
            self.version += 1
            source = SourceInfo(gtid=str(gtid), row=row_index, pos=self.version)
            if op == "c":
                after = {"id": key[0], "v": self.version}
                rows[key] = after
                self.log.append(RowChange(table, "c", key, None, after, source))
            elif op == "u":
                before = rows.pop(key)
                target = new_key or key
                after = {"id": target[0], "v": self.version}
                rows[target] = after
                self.log.append(
                    RowChange(table, "u", target, before, after, source, before_key=key if new_key else None)
                )
            else:
                before = rows.pop(key)
                self.log.append(RowChange(table, "d", key, before, None, source))
        self.log_transaction([TransactionEnd(gtid, self.coordinate(self.transactions))])

    def random_write(self, data: st.DataObject, table: TableId) -> None:
        rows = self.tables[table]
        operations = []
        staged = dict(rows)
        for _ in range(data.draw(st.integers(1, 3))):
            key = (data.draw(KEYS),)
            if key not in staged:
                operations.append((table, "c", key, None))
                staged[key] = True
            elif data.draw(st.booleans()):
                new_key = (data.draw(KEYS),)
                if new_key in staged and new_key != key:
                    new_key = None
                operations.append((table, "u", key, new_key if new_key != key else None))
                staged[new_key or key] = staged.pop(key)
            else:
                operations.append((table, "d", key, None))
                del staged[key]
        self.commit(operations)

    def select(self, request: ChunkRead) -> tuple[list, int, bool]:
        """The chunk reader's contract: (rows, bytes they took, cut short by the byte bound)."""
        table, after = request.snapshot.table, request.after_key
        visible = self.history[self.visible][table]
        keys = sorted(k for k in visible if (after is None or k > after) and k <= request.max_key)
        rows, size = [], 0
        for key in keys[:request.limit]:
            if request.max_bytes is not None and size >= request.max_bytes:
                return rows, size, True
            rows.append((key, dict(visible[key])))
            size += row_bytes(rows[-1][1])
        return rows, size, False

    def transactions_in(self, position: GtidSet) -> int:
        return sum(1 for n in range(1, self.transactions + 1) if self.gtid(n) in position)

    def first_event_after(self, position: GtidSet) -> int:
        for index, event in enumerate(self.log):
            if isinstance(event, TransactionStart) and event.gtid not in position:
                return index
        return len(self.log)


def row_bytes(row: dict) -> int:
    """A row's size in the model: rows of one table differ, as real ones do."""
    return 1 + row["v"] % 4


def event_version(change: RowChange) -> int:
    """Binlog events carry their write's version in `source.pos`; snapshot rows in `v`."""
    return change.after["v"] if change.op == "r" else change.source.pos


def replay(events: list[RowChange]) -> dict[TableId, dict[tuple, dict]]:
    state: dict[TableId, dict[tuple, dict]] = {table: {} for table in TABLES}
    for change in events:
        rows = state[change.table]
        if change.before_key is not None:
            rows.pop(change.before_key, None)
        if change.op == "d":
            rows.pop(change.key, None)
        else:
            rows[change.key] = change.after
    return state


class CaptureMachine(RuleBasedStateMachine):
    @initialize(
        data=st.data(),
        flavor=st.sampled_from(["mariadb", "mysql"]),
        signal_mode=st.sampled_from([None, "insert_insert", "insert_delete"]),
        chunk_size=st.integers(1, 5),
        chunk_bytes=st.none() | st.integers(1, 8),
        growth=st.integers(1, 8),
        max_chunk_seconds=st.sampled_from([1e-6, 0.5, 1e6]),
    )
    def setup(self, data, flavor, signal_mode, chunk_size, chunk_bytes, growth, max_chunk_seconds):
        self.db = Database(flavor)
        self.signal_mode = signal_mode
        self.chunk_size = chunk_size
        self.chunk_bytes = chunk_bytes
        self.max_chunk_size = chunk_size * growth  # 1: fixed chunks
        self.max_chunk_seconds = max_chunk_seconds
        # Rows written before capture starts: only the snapshot can deliver them.
        for table in TABLES:
            for _ in range(data.draw(st.integers(0, 4))):
                self.db.random_write(data, table)
        self.db.make_visible(data.draw(st.integers(0, self.db.transactions)))
        self.output: list[RowChange] = []
        self.latest_version: dict[tuple, int] = {}  # (table, key) -> version of the last emitted event
        self.read_version: dict[tuple, int] = {}  # (table, key) -> version of the newest `r` emitted
        # Reads a checkpoint of the run that emitted them covers: after a crash they still bound
        # what the replay may emit. Reads a crashed run emitted after its last checkpoint do not
        # (the replay from that checkpoint may legitimately re-emit older events behind them).
        self.checkpointed_reads: dict[tuple, int] = {}
        # A first start takes the server's executed set, commits not yet visible included.
        self.committed = (self.db.executed(), SnapshotProgress().to_json(), 0)
        self.start_engine()
        self.handle(self.capture.request_snapshot([TableSnapshot(table) for table in TABLES], "initial"))
        self.checkpoint()  # as the engine does on its first start, before reading anything
        self.markers = 0

    def start_engine(self) -> None:
        position, progress, _ = self.committed
        self.capture = ChangeCapture(position, SnapshotProgress.from_json(progress), self.chunk_size, self.chunk_bytes,
                                     self.max_chunk_size, self.max_chunk_seconds)
        self.cursor = self.db.first_event_after(position)
        # The first chunk must see the binlog up to its end at start (`ServerSession.binlog_end`).
        self.capture.must_see = self.db.coordinate(self.db.transactions)

    def handle(self, emissions) -> None:
        for item in emissions:
            if not isinstance(item, RowChange) or item.table == SIGNALS:
                continue
            slot = (item.table, item.key)
            version = event_version(item)
            if item.op == "r":
                assert version >= self.latest_version.get(slot, 0), f"snapshot read of {slot} older than an emitted event"
                self.read_version[slot] = max(self.read_version.get(slot, 0), version)
            else:
                # The read carried the state of the last write before the chunk's SELECT; that
                # write's event came before the window opened, or it dropped the key from the
                # buffer. So every binlog event after the read is strictly newer.
                for key in (item.key, item.before_key):
                    if key is not None:
                        floor = self.read_version.get((item.table, key), 0)
                        assert version > floor, (
                            f"binlog event v{version} for {(item.table, key)} emitted after a snapshot read of v{floor}"
                        )
            self.remember(item)
            self.output.append(item)

    def remember(self, change: RowChange) -> None:
        for key in (change.key, change.before_key):
            if key is not None:
                slot = (change.table, key)
                self.latest_version[slot] = max(self.latest_version.get(slot, 0), event_version(change))

    # --- writes -----------------------------------------------------------------------

    @rule(data=st.data(), table=st.sampled_from(TABLES))
    def write(self, data, table):
        self.db.random_write(data, table)

    @rule(commits=st.integers(1, 4))
    def storage_engine_commits(self, commits):
        self.db.make_visible(self.db.visible + commits)

    # --- the binlog reader ------------------------------------------------------------

    @rule(steps=st.integers(1, 12), data=st.data())
    def read_binlog(self, steps, data):
        for _ in range(steps):
            if self.cursor >= len(self.db.log):
                self.on_event(Heartbeat(), lambda: data.draw(SECONDS))
                return
            event = self.db.log[self.cursor]
            self.cursor += 1
            self.on_event(event, lambda: data.draw(SECONDS))

    @rule(data=st.data())
    def catch_up(self, data):
        """The reader consumes the whole binlog: an open window closes, so the snapshot moves."""
        while self.cursor < len(self.db.log):
            self.cursor += 1
            self.on_event(self.db.log[self.cursor - 1], lambda: data.draw(SECONDS))

    def on_event(self, event, waited) -> None:
        """As the engine does: an event that closes (or discards) the open window reports how
        long the window waited for the reader, before its output goes to the sink."""
        was_open = self.capture.window is not None
        emissions = self.capture.on_event(event)
        if was_open and self.capture.window is None:
            self.capture.window_waited(waited())
        self.handle(emissions)

    # --- chunk reads ------------------------------------------------------------------

    @rule(data=st.data(), reads=st.integers(1, 3))
    def read_chunk(self, data, reads):
        # Up to `reads` reads in a row, as the loop does when nothing stands between them (a
        # max key, then the first chunk; a window that closed at once, then the next chunk).
        for _ in range(reads):
            request = self.capture.next_read()
            if isinstance(request, MaxKeyRead):
                keys = self.db.tables[request.snapshot.table]
                self.handle(self.capture.max_key_read(request, max(keys) if keys else None))
            elif isinstance(request, ChunkRead):
                self.handle(self.chunk(data, request))
            else:
                return

    def check_limit(self, request: ChunkRead, when: str) -> None:
        assert 1 <= request.limit <= self.max_chunk_size
        assert self.chunk_bytes is not None or request.limit >= self.chunk_size
        event(f"{when}: a chunk limit {'above' if request.limit > self.chunk_size else 'at most'} chunk_size")

    def chunk(self, data, request: ChunkRead):
        self.check_limit(request, "rules")
        read_seconds = data.draw(SECONDS)

        def concurrent_writes():
            for _ in range(data.draw(st.integers(0, 2))):
                self.db.random_write(data, data.draw(st.sampled_from(TABLES)))

        if self.signal_mode is None:
            self.wait_until_visible(request)
            concurrent_writes()
            self.db.make_visible(self.db.visible + data.draw(st.integers(0, 2)))
            rows, size, cut_short = self.db.select(request)
            concurrent_writes()
            return self.capture.chunk_read(request, ChunkResult(rows, GtidWatermarks(request.position, self.db.executed()),
                                           bytes_read=size, cut_short=cut_short, read_seconds=read_seconds))
        self.markers += 1
        open_id, close_id = f"w{self.markers}-open", f"w{self.markers}-close"
        self.signal_write("c", open_id)
        concurrent_writes()
        rows, size, cut_short = self.db.select(request)
        concurrent_writes()
        if self.signal_mode == "insert_insert":
            self.signal_write("c", close_id)
            marks = SignalWatermarks(SIGNALS, open_id, close_id)
        else:
            self.signal_write("d", open_id)
            marks = SignalWatermarks(SIGNALS, open_id, None)
        return self.capture.chunk_read(request, ChunkResult(rows, marks, bytes_read=size, cut_short=cut_short,
                                       read_seconds=read_seconds))

    def wait_until_visible(self, request: ChunkRead) -> None:
        """`ServerSession.wait_until_visible`: MariaDB waits for the coordinate, MySQL for the
        GTIDs the loop consumed (storage-engine commits happen meanwhile)."""
        if self.db.flavor == "mariadb":
            assert request.must_see is not None
            self.db.make_visible(request.must_see.pos)
        else:
            self.db.make_visible(self.db.transactions_in(request.position))

    def signal_write(self, op: str, marker: str) -> None:
        self.db.transactions += 1
        gtid = self.db.gtid(self.db.transactions)
        row = {"id": marker, "type": "snapshot-window-open"}
        change = RowChange(SIGNALS, op, (marker,), row if op == "d" else None, row if op == "c" else None)
        self.db.log.append(TransactionStart(gtid))
        self.db.log_transaction([change, TransactionEnd(gtid, self.db.coordinate(self.db.transactions))])
        # The engine's INSERT returns once committed: every earlier commit is visible too.
        self.db.make_visible(self.db.transactions)

    # --- control ----------------------------------------------------------------------

    @rule(table=st.sampled_from(TABLES))
    def request_snapshot(self, table):
        self.handle(self.capture.request_snapshot([TableSnapshot(table)]))

    @rule()
    def pause(self):
        self.handle(self.capture.pause())

    @rule()
    def resume(self):
        self.handle(self.capture.resume())

    # --- durability -------------------------------------------------------------------

    @rule()
    def checkpoint(self):
        cp = self.capture.checkpoint()
        if cp is not None:
            # The sink flushed everything emitted so far, then the offsets were committed.
            self.committed = (cp.position, cp.progress, len(self.output))
            self.checkpointed_reads = dict(self.read_version)

    @rule(data=st.data())
    def crash_and_restart(self, data):
        durable = self.committed[2]
        kept = data.draw(st.integers(durable, len(self.output)))
        del self.output[kept:]
        self.latest_version = {}
        for change in self.output:  # what the sink still holds
            self.remember(change)
        # The restarted engine re-reads the binlog from the checkpoint, so events after it may
        # come again behind reads emitted after it; only reads its run checkpointed bound them.
        self.read_version = dict(self.checkpointed_reads)
        self.start_engine()

    @invariant()
    def checkpoint_only_between_transactions(self):
        cp = self.capture.checkpoint()
        if cp is not None:
            assert self.capture.window is None

    def teardown(self):
        if not hasattr(self, "capture"):
            return
        self.handle(self.capture.resume())
        for _ in range(10_000):
            request = self.capture.next_read()
            if request is None and self.cursor >= len(self.db.log):
                break
            if request is not None:
                self.read_chunk_without_writes(request)
            if self.cursor < len(self.db.log):
                self.cursor += 1
                self.on_event(self.db.log[self.cursor - 1], lambda: 1.0)
        else:
            raise AssertionError("the engine never finished")
        assert self.capture.progress.current is None
        expected = {table: self.db.tables[table] for table in TABLES}
        assert replay(self.output) == expected

    def read_chunk_without_writes(self, request):
        if isinstance(request, MaxKeyRead):
            keys = self.db.tables[request.snapshot.table]
            self.handle(self.capture.max_key_read(request, max(keys) if keys else None))
            return
        self.check_limit(request, "teardown")
        if self.signal_mode is None:
            self.wait_until_visible(request)
            rows, size, cut_short = self.db.select(request)
            marks = GtidWatermarks(request.position, self.db.executed())
        else:
            self.markers += 1
            open_id = f"w{self.markers}-open"
            self.signal_write("c", open_id)
            rows, size, cut_short = self.db.select(request)
            self.signal_write("d", open_id)
            marks = SignalWatermarks(SIGNALS, open_id, None)
        self.handle(self.capture.chunk_read(request, ChunkResult(rows, marks, bytes_read=size, cut_short=cut_short,
                                            read_seconds=0.001)))


CaptureMachine.TestCase.settings = settings(
    max_examples=1000,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCapture = CaptureMachine.TestCase


class GrowthProbe(CaptureMachine):
    """The machine above, failing as soon as a chunk asks for more than chunk_size rows."""

    def chunk(self, data, request: ChunkRead):
        if request.limit > self.chunk_size:  # only chunks read by the rules, with writes around them
            raise ChunkGrew(f"{request.limit} > {self.chunk_size}")
        return super().chunk(data, request)


class ChunkGrew(Exception):
    pass


def test_the_model_reads_chunks_above_chunk_size():
    """TestCapture would prove nothing about varying chunk sizes if its chunks never grew:
    hypothesis finds runs where they do (with fixed chunks this test fails)."""
    with pytest.raises(ChunkGrew):
        run_state_machine_as_test(GrowthProbe, settings=settings(
            max_examples=2000, stateful_step_count=60, deadline=None, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck)))
