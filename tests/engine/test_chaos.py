"""The chaos run (issue 40; the slow tier: `python -m pytest --run-slow tests/engine/test_chaos.py -s`).

One topology, as production runs it: a private MariaDB primary, two GTID replicas with
log_slave_updates, and a TCP proxy of the tests' own (`lab.tcp_proxy`) that dblog connects
through — the address a virtual IP or a cloud endpoint would be. Writers write to whichever
server is the primary, dblog (`dblog run`'s supervisor, in a thread) captures through the proxy
into the JSON-lines sink, and a snapshot of both shop tables is in flight at every fault. Faults,
in order:

1. the source restarted;
2. the network cut for longer than the reconnect backoff;
3. the network stalled without closing (bytes stop, sockets stay open);
4. a failover to a caught-up replica (the primary gone, the replica promoted, the proxy switched);
5. a binlog purged while dblog is down (refused with the remedy; recovered by the remedy);
6. a failover to a lagging replica (it lacks transactions dblog delivered): refused, and not one
   row written from it; recovered by pointing dblog at the right server.

After each, once the writers stop, the sink equals the primary's tables: replayed with the last
change per key winning, a row lost or a stale row (a chunk's row older than a change emitted
before it) shows as a difference. Each fault's recovery time, from the fault's end until dblog
committed a transaction written on the primary after it, is printed (`-s` shows it) as
`chaos: …`; no assertion is made on it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from support import eventually, next_server_id
from support.fixtures.mariadb import purge_binlogs_before_the_newest
from support.harness import SupervisedEngine, compare, config_data

from dblog.core.gtid import GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.demo.localstack import LocalMariaDB
from dblog.demo.workload import WriteLoad, load, tables
from dblog.runtime.offset_store import OffsetStore
from lab.mariadb_replica import MariaDBReplica
from lab.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(1200)

ROWS = 20_000
CHUNK_ROWS = 25  # 800 chunks a table: the snapshot is still in flight at each fault
CUT_SECONDS = 8.0  # longer than the binlog reader's reconnects (2) and the supervisor's first backoffs


class Topology:
    """The primary of the moment (`primary`), its replicas, the proxy in front, the writers."""

    def __init__(self) -> None:
        self.primary = LocalMariaDB()
        self.replicas = [MariaDBReplica(self.primary, server_id=2), MariaDBReplica(self.primary, server_id=3)]
        self.proxy = TcpProxy(("127.0.0.1", self.primary.port))
        self.database = f"chaos_{uuid.uuid4().hex[:8]}"
        with self.primary.connect() as connection:
            connection.cursor().execute(f"CREATE DATABASE `{self.database}`")
            load(connection, self.database, ROWS)
            # one row per recovery measured: a transaction written after the fault's end
            connection.cursor().execute(f"CREATE TABLE `{self.database}`.chaos_marks "
                                        "(label VARCHAR(100) PRIMARY KEY)")
        self.writers: WriteLoad | None = None

    def write(self) -> None:
        self.writers = WriteLoad(lambda: self.primary.connect(), self.database, ROWS, writers=2, rate=50,
                                 reconnect=True).start()

    def stop_writing(self) -> None:
        if self.writers is not None:
            self.writers.stop()
            self.writers = None

    def executed(self, server: LocalMariaDB | None = None) -> GtidSet:
        return GtidSet.parse((server or self.primary).execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")

    def fail_over(self, replica: MariaDBReplica) -> None:
        """The primary is gone; `replica` is promoted, the proxy sends dblog there, and the other
        replicas replicate from it."""
        old = self.primary
        replica.promote()
        self.primary = replica.server
        self.proxy.switch(("127.0.0.1", replica.server.port))
        for other in self.replicas:
            if other is not replica and other.server.running:
                other.server.execute("STOP SLAVE")
                other.server.execute("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s",
                                     (replica.server.port,))
                other.primary = replica.server
                other.server.execute("START SLAVE")
        if old.running and old not in (r.server for r in self.replicas):
            old.stop()

    def close(self) -> None:
        self.stop_writing()
        self.proxy.close()
        for replica in self.replicas:
            replica.stop()
        self.primary.stop()


@pytest.fixture
def topology():
    built = Topology()
    try:
        yield built
    finally:
        built.close()


def _snapshot(topology: Topology, engine: SupervisedEngine, label: str) -> None:
    """Ask for a snapshot of both tables (a signal row on the primary) and wait until it reads."""
    request = {"data-collections": [f"{topology.database}\\.orders", f"{topology.database}\\.customers"]}
    topology.primary.execute(f"INSERT INTO `{topology.database}`.dblog_signal VALUES (%s, 'execute-snapshot', %s)",
                             (f"{label}-{uuid.uuid4().hex[:6]}", json.dumps(request)))
    engine.wait_until(lambda offsets: SnapshotProgress.from_json(offsets.snapshot).current is not None, 120)


def _recovered(topology: Topology, engine: SupervisedEngine, label: str, since: float) -> float:
    """Seconds from `since` (the fault's end) until dblog committed a transaction written on the
    primary at this call, after the fault."""
    topology.primary.execute(f"INSERT INTO `{topology.database}`.chaos_marks VALUES (%s)",
                             (f"{label} {uuid.uuid4().hex[:6]}",))
    target = topology.executed()
    engine.wait_until(lambda offsets: target.issubset(offsets.position), 300)
    took = time.monotonic() - since
    print(f"chaos: {label}: recovered in {took:.1f} s")
    return took


def _settled_equal(topology: Topology, engine: SupervisedEngine, sink: Path) -> None:
    """Writers stopped, the snapshot finished and everything delivered: the sink equals the primary."""
    topology.stop_writing()
    target = topology.executed()
    engine.wait_until(lambda offsets: target.issubset(offsets.position)
                      and SnapshotProgress.from_json(offsets.snapshot).current is None, 300)
    result = compare(topology.primary, sink, tables(topology.database))
    assert result.equal, result.summary()


def _in_flight(offsets) -> bool:
    return SnapshotProgress.from_json(offsets.snapshot).current is not None


def _quiet(sink: Path) -> bytes:
    """The sink's bytes once they stopped changing (dblog's connections stalled)."""
    seen: list[bytes] = [b"-"]

    def settled() -> bool:
        now = sink.read_bytes()
        same = now == seen[-1]
        seen.append(now)
        return same

    eventually(settled, 60, interval=1.0, message="the sink to stop growing while the network stalls")
    return seen[-1]


@pytest.mark.slow
def test_chaos_faults_under_writers_with_a_snapshot_in_flight(topology, tmp_path):
    sink = tmp_path / "changes.jsonl"
    data = config_data(topology.primary, topology.database, tmp_path,
                       snapshot={"startup": "never", "chunk_size": CHUNK_ROWS},
                       source={"port": topology.proxy.port, "binlog_reconnects": 2,
                               "reconnect_timeout_seconds": 300, "server_id": next_server_id()})
    engine = SupervisedEngine(data)
    try:
        engine.wait_until(lambda offsets: True, 60)

        # 1. the source restarted
        topology.write()
        _snapshot(topology, engine, "restart")
        topology.primary.restart(down_seconds=2)
        _recovered(topology, engine, "source restart", time.monotonic())
        _settled_equal(topology, engine, sink)

        # 2. the network cut for longer than the reconnect backoff
        topology.write()
        _snapshot(topology, engine, "cut")
        topology.proxy.cut()
        time.sleep(CUT_SECONDS)
        topology.proxy.restore()
        _recovered(topology, engine, f"network cut for {CUT_SECONDS:.0f} s", time.monotonic())
        _settled_equal(topology, engine, sink)

        # 3. the network stalled without closing
        topology.write()
        _snapshot(topology, engine, "stall")
        topology.proxy.stall()
        time.sleep(CUT_SECONDS)
        topology.proxy.resume()
        _recovered(topology, engine, f"network stalled for {CUT_SECONDS:.0f} s", time.monotonic())
        _settled_equal(topology, engine, sink)

        # 4. a failover to a caught-up replica
        topology.write()
        _snapshot(topology, engine, "failover")
        topology.stop_writing()  # the primary's last writes reach the replicas before it goes
        for replica in topology.replicas:
            replica.caught_up()
        topology.proxy.stall()  # dblog cut off from the old primary mid-snapshot, then the switch
        _quiet(sink)
        before = OffsetStore(data["offsets"]["path"]).load()
        assert _in_flight(before), "the snapshot must be in flight"
        started = time.monotonic()
        topology.fail_over(topology.replicas[0])
        topology.proxy.resume()
        # The new primary idle: the next chunks wait for what the reader read on the old one.
        # Compared with the old server's binlog coordinate, they waited 60 s (VisibilityTimeout).
        engine.wait_until(lambda offsets: offsets.snapshot != before.snapshot, 120)
        topology.write()
        _recovered(topology, engine, "failover to a caught-up replica", started)
        _settled_equal(topology, engine, sink)

        # 5. a binlog purged while dblog is down: refused, nothing moves; the remedy (a new
        # snapshot into a fresh sink, from no offsets) recovers
        engine.stop()
        stored = OffsetStore(data["offsets"]["path"]).load().position
        topology.primary.execute(f"UPDATE `{topology.database}`.customers SET balance = balance + 1 WHERE id <= 50")
        purge_binlogs_before_the_newest(topology.primary)
        engine = SupervisedEngine(data)
        eventually(lambda: engine.error is not None, 120, message="dblog to refuse the purged position")
        assert "purged" in str(engine.error), engine.error
        assert OffsetStore(data["offsets"]["path"]).load().position == stored
        started = time.monotonic()
        Path(data["offsets"]["path"]).unlink()
        sink = tmp_path / "after-purge.jsonl"
        data = {**data, "sink": {**data["sink"], "path": str(sink)},
                "snapshot": {**data["snapshot"], "startup": "initial"}}
        engine = SupervisedEngine(data)
        topology.write()
        _recovered(topology, engine, "purged binlog, re-snapshot into a new sink", started)
        _settled_equal(topology, engine, sink)

        # 6. a failover to a lagging replica: it misses transactions dblog delivered; its snapshot
        # is in flight, and the network stalls first so that what dblog wrote from the right
        # server is known before the switch
        lagging = topology.replicas[1]
        lagging.stop_replication()
        topology.write()
        time.sleep(2)
        topology.stop_writing()
        delivered = topology.executed()
        engine.wait_until(lambda offsets: delivered.issubset(offsets.position), 120)
        assert not delivered.issubset(topology.executed(lagging.server))
        _snapshot(topology, engine, "lagging")
        topology.proxy.stall()
        written = _quiet(sink)
        assert _in_flight(OffsetStore(data["offsets"]["path"]).load()), "the snapshot must be in flight"
        right = topology.primary
        topology.fail_over(lagging)
        topology.proxy.resume()
        eventually(lambda: engine.error is not None, 120, message="dblog to refuse the lagging replica")
        message = str(engine.error)
        assert "lacks transactions dblog already delivered" in message, message
        assert sink.read_bytes() == written, "rows were written from a server that lacks delivered transactions"
        started = time.monotonic()
        topology.primary = right  # the remedy: dblog pointed at the right server again
        topology.proxy.switch(("127.0.0.1", right.port))
        engine = SupervisedEngine(data)  # (an operator's restart: the refusal stopped dblog)
        topology.write()
        _recovered(topology, engine, "failover to a lagging replica refused, dblog pointed back", started)
        _settled_equal(topology, engine, sink)
    finally:
        engine.stop() if engine.error is None and engine.thread.is_alive() else None
