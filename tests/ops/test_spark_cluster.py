"""The Iceberg sink on a real Spark standalone cluster (lab.spark_cluster), not only local[N].

A process has one SparkContext, and the run's `spark` fixture holds it (local[2] by default). So
the cluster-mode tests run in a child pytest: `test_iceberg_tests_pass_on_a_standalone_cluster`
starts a cluster (a master and two workers from pyspark's own launcher), runs a representative
subset of the Iceberg tests against it with `--spark-master=spark://…` (the child's session and
every `dblog run` it starts are applications on that cluster), then checks from outside what the
master and the workers saw, and that stopping the cluster leaves no process and no file behind.
`test_the_sessions_work_runs_in_the_clusters_executors` is part of that subset: it runs only on a
cluster and proves the tasks ran in executor JVMs (and Python in executor processes). The whole
Iceberg suite on a cluster: `python -m pytest --spark-master=cluster -m spark` (tests/README.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support.harness import process_alive
from support import eventually

from lab.spark_cluster import (
    OWNER_FILE,
    TEMP_PREFIX,
    LocalSparkCluster,
    SparkClusterUnavailable,
    _remove_abandoned_directories,
    group_members,
)

REPO = Path(__file__).resolve().parents[2]

# What runs on the cluster in the default run: the proof that executors did the work; the sink
# end to end (snapshot under writers, MERGEs); exactly once across restarts (replayed batches and
# a restarted sink; a `kill -9` of `dblog run` while executors write a MERGE, then a restart: one
# of the 6 kills the local test makes, since each start costs a Spark application); schema
# evolution while streaming; every mapped type written by executors; a backfill whose key
# ranges the executors read from MariaDB, and one of whose tasks dies (Spark retries it).
CLUSTER_SUBSET = [
    "tests/ops/test_spark_cluster.py::test_the_sessions_work_runs_in_the_clusters_executors",
    "tests/sinks/iceberg/test_spark_sink.py::test_snapshot_under_concurrent_writes_lands_exactly_in_iceberg",
    "tests/sinks/iceberg/test_spark_sink.py::test_replays_change_nothing_and_a_restarted_sink_skips_what_a_table_holds",
    "tests/sinks/iceberg/test_spark_sink.py::test_dblog_run_on_a_standalone_cluster_killed_during_a_merge",
    "tests/sinks/iceberg/test_spark_sink.py::test_add_column_truncate_and_an_incompatible_type_change_while_streaming",
    "tests/sinks/iceberg/test_spark_sink.py::test_type_mapping_round_trips_every_type",
    "tests/engine/test_distributed_snapshot.py::test_a_distributed_snapshot_under_writers_lands_exactly[gtid]",
    "tests/engine/test_distributed_snapshot.py::test_a_spark_task_killed_while_reading_its_range_is_read_again",
]


def _cluster_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("dblog-spark-cluster-*"))


def test_missing_java_is_named_with_the_fix(monkeypatch, tmp_path):
    before = _cluster_dirs()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    with pytest.raises(SparkClusterUnavailable, match="Java not found: no `java` on PATH.*openjdk-17"):
        LocalSparkCluster().start()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(SparkClusterUnavailable, match=r"JAVA_HOME=.*jdk has no executable bin/java"):
        LocalSparkCluster().start()
    assert _cluster_dirs() <= before  # nothing was started, no temp dir made


def test_directories_of_clusters_whose_starter_died_are_removed():
    dead = subprocess.Popen(["true"])
    dead.wait()
    abandoned = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    (abandoned / OWNER_FILE).write_text(str(dead.pid))
    (abandoned / "worker-1").mkdir()
    owned = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    (owned / OWNER_FILE).write_text(str(os.getpid()))  # its starter is alive: kept
    try:
        _remove_abandoned_directories()
        assert not abandoned.exists() and owned.exists()
    finally:
        shutil.rmtree(abandoned, ignore_errors=True)
        shutil.rmtree(owned, ignore_errors=True)


def test_a_daemon_that_dies_on_start_is_reported_with_its_log(tmp_path):
    cluster = LocalSparkCluster(daemon_memory="lots")  # -Xmxlots: the master's JVM refuses to start
    with pytest.raises(SparkClusterUnavailable) as raised:
        cluster.start()
    message = str(raised.value)
    assert "the Spark master exited with code" in message
    assert "Invalid maximum heap size: -Xmxlots" in message  # the tail of its log
    assert cluster.directory is None and cluster.master is None  # cleaned up


@pytest.mark.slow  # a cluster and a child run of the Iceberg subset: the scheduled slow tier
@pytest.mark.timeout(3600)
def test_iceberg_tests_pass_on_a_standalone_cluster(tmp_path):
    started = time.monotonic()
    with LocalSparkCluster() as cluster:
        status = cluster.status()
        assert status["url"] == cluster.master_url and re.fullmatch(r"spark://127\.0\.0\.1:\d+", cluster.master_url)
        workers = cluster.alive_workers(status)
        assert len(workers) == 2 and {w["cores"] for w in workers} == {3} and {w["memory"] for w in workers} == {3072}
        ports = [p for d in cluster.daemons() for p in (d.port, d.webui_port)]
        assert len(set(ports)) == 6  # every daemon on its own free RPC and UI ports
        groups, directory = cluster.process_groups(), cluster.directory
        up = time.monotonic() - started

        log = tmp_path / "cluster-run.log"
        with open(log, "w") as out:
            child = subprocess.run(
                [sys.executable, "-m", "pytest", "-n", "0", f"--spark-master={cluster.master_url}", "-p", "no:cacheprovider",
                 "--run-slow",  # the subset names its tests: some are the default run's repeats (support/slow_tier.py)
                 "-q", "--durations=0", *CLUSTER_SUBSET],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])},
            )
        output = log.read_text()
        assert child.returncode == 0, output[-6000:]
        assert f"{len(CLUSTER_SUBSET)} passed" in output, output[-3000:]

        # The master saw the child's session and each `dblog run` of the kill -9 test (1 killed,
        # 1 run to the end) as applications; every one ended with its driver.
        def all_ended() -> dict | None:
            current = cluster.status()
            return None if current["activeapps"] else current

        status = eventually(all_ended, 60, message="every application to end with its driver")
        apps = status["completedapps"]
        assert len(apps) == 3, [a["id"] for a in apps]
        assert {a["name"] for a in apps} == {"dblog"}
        # Each worker ran executors (1 core, 1 GiB) of every application, and the session's
        # executors' logs show the tasks they finished. (A set: the master may start a second
        # executor for the killed driver's application before it sees the driver gone.)
        for number in (1, 2):
            executors = cluster.worker_status(number)["finishedexecutors"]
            assert {e["appid"] for e in executors} == {a["id"] for a in apps}, number
            assert {(e["memory"], e["appdesc"]["cores"]) for e in executors} == {(1024, 2)}
        session_app = min(apps, key=lambda a: a["starttime"])["id"]
        logs = cluster.executor_logs(session_app)
        assert len(logs) == 2 and all("Finished task" in p.read_text(errors="replace") for p in logs), logs
        durations = output[output.find("slowest durations"):output.find("short test summary")]
        print(f"cluster up in {up:.1f} s; subset on the cluster in {time.monotonic() - started - up:.1f} s; {durations}")

    # Nothing outlives the cluster: no process in the daemons' groups (executors included),
    # no daemon, no temp dir.
    assert all(not group_members(g) for g in groups), {g: group_members(g) for g in groups}
    assert not any(process_alive(g) for g in groups)
    assert not directory.exists()


def test_the_sessions_work_runs_in_the_clusters_executors(spark):
    """On a standalone master: the session has two executors (one per worker, 1 core each),
    a MERGE's tasks run there and none in the driver, and Python runs in executor processes
    with this interpreter. Needs --spark-master (the cluster test above runs it so)."""
    context = spark.sparkContext
    if not context.master.startswith("spark://"):
        pytest.skip("runs on a standalone cluster: --spark-master=cluster (run by the cluster test in the default run)")

    def executors() -> dict[str, tuple[str, int, int]]:
        summaries = context._jsc.sc().statusStore().executorList(True)
        return {(s := summaries.apply(i)).id(): (s.hostPort(), s.totalCores(), s.completedTasks())
                for i in range(summaries.size())}

    # The session is up before its executors have registered.
    def registered() -> dict | None:
        current = executors()
        return current if len(current) == 3 else None

    before = eventually(registered, 120, message="two executors to register")
    assert sorted(before) == ["0", "1", "driver"], before
    # (an executor's port shows once its block manager has registered)
    assert all(host.split(":")[0] == "127.0.0.1" and cores == 1 for e, (host, cores, _) in before.items() if e != "driver"), before

    table = "lake.cluster_proof.t"
    spark.sql(f"CREATE TABLE {table} (id INT NOT NULL, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='3', 'write.merge.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {table} SELECT id, CAST(id AS STRING) FROM range(1000)")
    spark.createDataFrame([(n, f"new {n}") for n in range(500, 1500)], "id INT, v STRING").createOrReplaceTempView("c")
    spark.sql(f"MERGE INTO {table} t USING c s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert spark.sql(f"SELECT COUNT(*), SUM(CASE WHEN v LIKE 'new%' THEN 1 ELSE 0 END) FROM {table}").collect()[0] == (1500, 1000)

    after = executors()
    assert after["driver"][2] == 0, "the driver ran no task"
    assert all(after[e][2] > before[e][2] for e in ("0", "1")), (before, after)

    def where(_):
        import os
        import sys
        from pathlib import Path

        pid, chain = os.getpid(), []
        while pid > 1:
            chain.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        yield os.path.realpath(sys.executable), any("CoarseGrainedExecutorBackend" in c for c in chain)

    ran = context.parallelize(range(4), 4).mapPartitions(where).collect()
    assert ran == [(os.path.realpath(sys.executable), True)] * 4, ran
