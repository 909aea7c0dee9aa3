"""Parallel chunk reads: the parts' join (pure, hypothesis) and the engine reading with several
connections under concurrent writes (real MariaDB)."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, compare, make_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support import hold_chunk_read

from dblog.demo.workload import tables
from dblog.mysql.chunk_reader import ChunkRows
from dblog.mysql.parallel_read import ParallelChunkReads, combine_parts, plan_parts

KEYS = st.integers(0, 60)


def _boundaries(keys: list[int], after: int | None, max_key: int, part_limit: int, count: int) -> list[tuple]:
    """What `ChunkReader.boundary` finds, one part after another."""
    found, start = [], after
    for _ in range(count):
        following = [k for k in keys if (start is None or k > start) and k <= max_key]
        if len(following) < part_limit:
            break
        start = following[part_limit - 1]
        found.append((start,))
    return found


@settings(max_examples=500)
@given(
    data=st.data(),
    before=st.sets(KEYS, min_size=1),
    inserted=st.sets(KEYS),
    deleted=st.sets(KEYS),
    parallelism=st.integers(2, 4),
    limit=st.integers(1, 12),
)
def test_parts_join_with_no_gap(data, before, inserted, deleted, parallelism, limit):
    """Boundaries are found on the table as of the low watermark (`before`); the parts are
    read later, after inserts and deletes (whose binlog events the window sees). Whatever the
    changes and wherever the byte bound cuts a part: no row that existed before and still
    exists is skipped up to the last row returned, and a result that does not say "cut short"
    with fewer rows than asked covers everything up to the max key."""
    after = data.draw(st.none() | st.integers(-1, max(before)))
    max_key = max(before)
    part_limit = -(-limit // parallelism)
    boundaries = _boundaries(sorted(before), after, max_key, part_limit, parallelism - 1)
    parts = plan_parts(None if after is None else (after,), boundaries, (max_key,), part_limit)
    now = sorted((before - deleted) | inserted)
    results = []
    for part in parts:
        low = None if part.after_key is None else part.after_key[0]
        keys = [k for k in now if (low is None or k > low) and k <= part.upto[0]][:part.limit]
        rows = ChunkRows((k,) for k in keys)
        cut = data.draw(st.none() | st.integers(1, max(1, len(keys))))
        if cut is not None and cut < len(keys):  # the byte bound kept the first `cut` rows
            rows = ChunkRows(rows[:cut])
            rows.cut_short = True
        results.append(rows)
    combined = combine_parts(parts, results)
    got = [row[0] for row in combined]
    assert got == sorted(set(got)), "rows out of key order or twice"
    survivors = [k for k in sorted(before - deleted) if (after is None or k > after) and k <= max_key]
    if got:
        assert [k for k in survivors if k <= got[-1]] == [k for k in got if k in survivors], "a row skipped"
    if not combined.cut_short and len(got) < limit:
        assert set(survivors) <= set(got), "the table ended early"
    if not inserted and not deleted and not any(rows.cut_short for rows in results):
        assert got == survivors[:parallelism * part_limit], "a quiet table's parts were not all kept"


@pytest.mark.parametrize("parallelism", [2, 4])
def test_parallel_snapshot_under_concurrent_writes_equals_source(mariadb, database, tmp_path, loaded, write_load,
                                                                monkeypatch, parallelism):
    rows = 40_000
    orders = loaded(rows)[0]
    workload = write_load(rows, writers=2, seed=parallelism, rate=400)
    try:
        config = make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 300, "parallel_reads": parallelism})
        before = sum(workload.writes)
        # The second window of orders waits for 20 writes: the snapshot runs under writes
        # however fast the engine reads.
        hold_chunk_read(monkeypatch, orders, 2, lambda: sum(workload.writes) - before >= 20,
                        message="20 writes during the snapshot", reader_class=ParallelChunkReads)
        engine = EngineThread(config)
        engine.wait_for("COMPLETED", timeout=300)
        during = sum(workload.writes) - before
    finally:
        workload.stop()
    engine.until_caught_up()
    assert during >= 20, f"only {during} writes while the snapshot ran"
    result = compare(mariadb, tmp_path / "changes.jsonl", tables(database))
    assert result.equal, result.summary()
    scanned = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert all(n.data["status"] == "SUCCEEDED" for n in scanned)


def test_a_part_connection_reaching_another_server_is_not_read(mariadb, database, row_metadata_mariadb):
    """After a failover behind one address, a part's connection opened later may reach another
    server than the engine's session, whose read views the window waited for; one that lags
    would give older rows. Such a window is read whole on the engine's connection instead."""
    from dblog.core.events import TableId
    from dblog.mysql.chunk_reader import ChunkReader, ChunkRequest
    from dblog.mysql.schema_catalog import SchemaCatalog
    from dblog.mysql.server_session import ServerSession

    other = row_metadata_mariadb("FULL")  # another private server: the "lagging replica"
    for server, count in ((mariadb, 40), (other, 10)):
        server.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        server.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
        server.execute(f"INSERT INTO `{database}`.t VALUES " + ", ".join(f"({n}, {n})" for n in range(count)))
    session = ServerSession(mariadb.connect)
    reads = ParallelChunkReads(ChunkReader(session), lambda: other.connect(), 4)
    try:
        schema = SchemaCatalog(session).schema(TableId(database, "t"))
        rows = reads.read_chunk(ChunkRequest(schema, None, (39,), 40, parallel_reads=4))
    finally:
        reads.close()
        session.drop_connection()
    assert [row["id"] for row in rows] == list(range(40))
