"""Issue 36, item 11: staging files of a run that died are removed by the next, judged by who
owns them rather than by a process id (`dblog.sinks.iceberg.staging`, "Ownership"). A container's
dblog is pid 1 after every restart, so a dead run's pid is a live process's: before, spill
directories were removed only when their pid ran no more (never, in a container), and the batch
file of a commit in flight was never removed at all.

Local filesystem: each run holds a `flock` on its lock file for its life; a `kill -9` of a run
while it spills (and with the batch file of a commit written) frees it, and the next start removes
that run's files and lock, but not a live run's; the same holds for a dead run of the very same
pid. Object storage (moto's S3): no lock; the run that writes a table owns every staging file of
it and removes the others' when it first writes that table, leaving other tables' files alone.
No Spark: the files are written and removed by pyarrow (Spark only reads them)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lab.object_store import LocalS3
from dblog.sinks.iceberg.staging import StagingArea

ORDERS, CUSTOMERS, ITEMS = "`lake`.`shop`.`orders`", "`lake`.`shop`.`customers`", "`lake`.`shop`.`items`"

# A run that writes the batch file of a commit, then spills a part and stays inside that spill
# (its Parquet writer open) until killed; or, with "idle", stays alive after both.
_RUN = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    from dblog.sinks.iceberg.staging import StagingArea

    area = StagingArea(None, sys.argv[1])
    print(area.write_batch(pa.table({"id": [1, 2, 3]}), %(orders)r), flush=True)

    def parts():
        yield pa.table({"id": list(range(1000))})
        print("spilling", flush=True)
        while True:
            time.sleep(1)

    if sys.argv[2] == "idle":
        print(area.spill([pa.table({"id": [4]})], %(orders)r), flush=True)
        print("spilling", flush=True)
        while True:
            time.sleep(1)
    area.spill(parts(), %(orders)r)
""") % {"orders": ORDERS}


def _start_run(directory: Path, mode: str) -> tuple[subprocess.Popen, list[str]]:
    process = subprocess.Popen([sys.executable, "-c", _RUN, str(directory), mode], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    lines = []
    while not lines or lines[-1] != "spilling":
        line = process.stdout.readline().strip()
        assert line, f"the run ended early ({process.wait()})"
        lines.append(line)
    return process, lines[:-1]


def _files(directory: Path) -> set[str]:
    return {str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()}


def test_a_run_killed_9_while_it_spills_is_cleaned_by_the_next_start_and_a_live_one_is_not(tmp_path):
    staging = tmp_path / "staging"
    killed, killed_files = _start_run(staging, "spill")
    live, live_files = _start_run(staging, "idle")
    try:
        on_disk = _files(staging)
        spilled = [name for name in on_disk if name.endswith(".parquet") and name not in killed_files + live_files]
        assert killed_files[0] in on_disk and spilled, on_disk  # the commit's batch file, the spill under way
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        # A dblog of the old layout that was pid 1 in a container before its restart: the pid of
        # its spill directory is a live process's (here this test's own, the new run's pid).
        host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())
        old_dead = staging / f"spill-{host}-{os.getpid()}-{uuid.uuid4().hex}"
        old_live = staging / f"spill-{host}-{live.pid}-{uuid.uuid4().hex}"  # an old layout's live run
        for directory in (old_dead, old_live):
            directory.mkdir()
            (directory / "part-1.parquet").write_bytes(b"PAR1")

        restarted = StagingArea(None, str(staging))
        removed = restarted.remove_abandoned()
        left = _files(staging)
        assert killed_files[0] not in left and not set(spilled) & left, left
        assert not old_dead.exists() and old_dead.name in removed
        assert set(live_files) <= left and old_live.exists(), "a live run's files were removed"
        assert sum(name.startswith("run-") and name.endswith(".lock") for name in left) == 2  # live, restarted
        restarted.close()
        assert sum(name.startswith("run-") and name.endswith(".lock") for name in _files(staging)) == 1
    finally:
        for process in (killed, live):
            process.kill()
            process.wait()
    StagingArea(None, str(staging)).remove_abandoned()  # the live run is dead now
    assert not [name for name in _files(staging) if name.endswith(".parquet")]


def test_a_dead_run_of_the_same_pid_is_cleaned_and_a_live_one_of_the_same_process_is_not(tmp_path):
    """Process ids play no part: a run of this very process whose lock the kernel dropped (what
    a process's end does: its descriptor closed, not `close()`d) is dead to the next run of the
    same pid, while another run alive in this process keeps its files."""
    dead = StagingArea(None, str(tmp_path))
    dead_files = [dead.write_batch(pa.table({"id": [1]}), ORDERS), dead.spill([pa.table({"id": [2]})], ORDERS)]
    dead._lock.close()  # its lock's descriptor closed, as at the process's end, however it ends
    alive = StagingArea(None, str(tmp_path))
    alive_file = alive.write_batch(pa.table({"id": [3]}), ORDERS)
    restarted = StagingArea(None, str(tmp_path))
    removed = restarted.remove_abandoned()
    assert set(dead_files) <= set(removed) and not any((tmp_path / name).exists() for name in dead_files)
    assert (tmp_path / alive_file).exists() and alive_file not in removed
    for area in (alive, restarted):
        area.close()


@pytest.fixture(scope="module")
def s3():
    with LocalS3() as server:
        server.create_bucket("lake")
        yield server


def test_on_object_storage_a_tables_writer_removes_the_files_of_its_table_other_runs_left(s3, monkeypatch):
    """A run that died with a commit of `orders` in flight and a spilled part of it, and a batch
    of `customers`; another run alive, writing `items`. A new run's first change of `orders`
    removes the dead run's `orders` files (no pending commit of the table's one writer names
    them); the `customers` file waits for its table's writer, the live run's `items` file stays."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dblog-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dblog-test-secret")
    prefix = f"staging-{uuid.uuid4().hex[:8]}"
    uri = f"s3://lake/{prefix}?endpoint_override=127.0.0.1:{s3.port}&scheme=http&region=us-east-1"

    def keys() -> set[str]:
        fs, root = pafs.FileSystem.from_uri(uri)
        return {info.path[len(root) + 1:] for info in fs.get_file_info(pafs.FileSelector(root, recursive=True))
                if info.type == pafs.FileType.File}

    crashed = StagingArea(None, uri)
    in_flight = crashed.write_batch(pa.table({"id": [1, 2]}), ORDERS)
    spilled = crashed.spill([pa.table({"id": [3]})], ORDERS)
    customers = crashed.write_batch(pa.table({"id": [4]}), CUSTOMERS)
    live = StagingArea(None, uri)
    items = live.write_batch(pa.table({"id": [5]}), ITEMS)
    assert {in_flight, spilled, customers, items} <= keys()

    restarted = StagingArea(None, uri)
    assert restarted.remove_abandoned() == []  # no lock on S3: judged table by table
    assert {in_flight, spilled} <= keys()
    restarted.claim(ORDERS)  # its first change of orders (the sink's first use of the table)
    left = keys()
    assert in_flight not in left and spilled not in left, left
    assert {customers, items} <= left
    mine = restarted.write_batch(pa.table({"id": [6]}), ORDERS)
    again = restarted.write_batch(pa.table({"id": [7]}), ORDERS)  # its own files stay
    assert {mine, again} <= keys()
    for name in (mine, again):
        restarted.release(name)


def test_the_iceberg_sink_claims_a_table_on_object_storage_at_its_first_change(s3, spark, mariadb, database,
                                                                                monkeypatch):
    """The sink side: a sink staging on S3 removes the files a dead run left for a table when it
    meets that table's first change (whatever its commit will stage: an append or an upsert stages
    nothing), and only that table's."""
    from dblog.core.events import RowChange, SourceInfo, TableId
    from dblog.mysql.source_connection import SourceConnection
    from dblog.sinks.iceberg.sink import SparkIcebergSink

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dblog-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dblog-test-secret")
    uri = f"s3://lake/staging-{uuid.uuid4().hex[:8]}?endpoint_override=127.0.0.1:{s3.port}&scheme=http&region=us-east-1"
    for name in ("kv", "other"):
        mariadb.execute(f"CREATE TABLE `{database}`.{name} (id INT PRIMARY KEY, v VARCHAR(10))")
    reader = SourceConnection(lambda: mariadb.connect())
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", staging_dir=uri)
    try:
        kv, other = TableId(database, "kv"), TableId(database, "other")
        crashed = StagingArea(None, uri)
        left_for_kv = crashed.write_batch(pa.table({"id": [1]}), sink.target_name(kv))
        left_for_other = crashed.write_batch(pa.table({"id": [2]}), sink.target_name(other))
        fs, root = pafs.FileSystem.from_uri(uri)
        exists = lambda name: fs.get_file_info(f"{root}/{name}").type == pafs.FileType.File  # noqa: E731
        assert exists(left_for_kv) and exists(left_for_other)
        sink.write([RowChange(kv, "c", (1,), None, {"id": 1, "v": "a"}, SourceInfo("0-1-1", "binlog.000001", 4, 0, 1))])
        assert not exists(left_for_kv) and exists(left_for_other)
    finally:
        sink.close()
        reader.close()
