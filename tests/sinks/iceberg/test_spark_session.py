"""The Iceberg runtime's coordinates, the offline jar directory, and a real Spark + Iceberg session:
CREATE TABLE v3 merge-on-read, identifier fields, MERGE INTO, snapshot summary properties."""

from __future__ import annotations

import datetime
import decimal
import sys
import threading

import pytest

from dblog.sinks.iceberg.session import (
    ICEBERG_VERSION,
    iceberg_commit_properties,
    iceberg_spark_conf,
    iceberg_spark_session,
    pyspark_jars_dir,
    runs_on_this_machine,
    runtime_package,
    s3a_package,
    scala_version,
)

CATALOG = "session_test"


# --- the runtime's coordinates and the offline directory -----------------------------------


def test_the_runtime_is_chosen_by_the_installed_spark_line_and_scala_version():
    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    assert runtime_package() == f"org.apache.iceberg:iceberg-spark-runtime-{line}_{scala_version()}:{ICEBERG_VERSION}"
    assert runtime_package("4.0", "2.13") == f"org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:{ICEBERG_VERSION}"
    assert s3a_package("3.4.1") == "org.apache.hadoop:hadoop-aws:3.4.1"
    (client,) = (pyspark_jars_dir()).glob("hadoop-client-api-*.jar")
    assert s3a_package() == f"org.apache.hadoop:hadoop-aws:{client.name.removeprefix('hadoop-client-api-')[:-4]}"
    conf = iceberg_spark_conf("/w")
    assert conf["spark.jars.packages"] == runtime_package() and "spark.jars" not in conf


@pytest.mark.parametrize(("pyspark", "jars", "runtime"), [
    ("4.0.1", ["spark-core_2.13-4.0.1.jar"], "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:"),
    ("3.5.9", ["spark-core_2.12-3.5.9.jar"], "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:"),
])
def test_each_spark_line_gets_its_own_runtime(monkeypatch, tmp_path, pyspark, jars, runtime):
    """What a pyspark 4.0 or 3.5 installation is given, from its version and its spark-core jar."""
    import dblog.sinks.iceberg.session as session

    for jar in jars:
        (tmp_path / jar).write_bytes(b"")
    monkeypatch.setattr("pyspark.__version__", pyspark)
    monkeypatch.setattr(session, "pyspark_jars_dir", lambda: tmp_path)
    assert runtime_package() == runtime + ICEBERG_VERSION
    assert iceberg_spark_conf("/w")["spark.jars.packages"] == runtime + ICEBERG_VERSION


def test_an_offline_directory_replaces_the_packages(tmp_path):
    (tmp_path / "b.jar").write_bytes(b"")
    (tmp_path / "a.jar").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a jar")
    conf = iceberg_spark_conf("/w", jars_dir=str(tmp_path), jars=["/usr/share/java/driver.jar"])
    assert "spark.jars.packages" not in conf
    assert conf["spark.jars"] == f"{tmp_path / 'a.jar'},{tmp_path / 'b.jar'},/usr/share/java/driver.jar"
    with pytest.raises(ValueError, match="not both"):
        iceberg_spark_conf("/w", jars_dir=str(tmp_path), packages=runtime_package())
    with pytest.raises(RuntimeError, match="holds no jar"):
        iceberg_spark_conf("/w", jars_dir=str(tmp_path / "empty"))


def test_settings_for_a_standalone_master_on_this_machine_and_for_remote_clusters(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    here = iceberg_spark_conf("wh", master="spark://127.0.0.1:7077")
    assert here["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")  # executors run elsewhere
    assert here["spark.driver.host"] == here["spark.driver.bindAddress"] == "127.0.0.1"
    assert here["spark.pyspark.python"] == sys.executable
    assert (here["spark.executor.cores"], here["spark.executor.memory"], here["spark.cores.max"]) == ("1", "1g", "2")
    assert here["spark.jars.packages"] == runtime_package()  # the driver serves the jars to the executors
    tuned = iceberg_spark_conf("/w", master="spark://localhost:7077", extra_conf={"spark.cores.max": "4"})
    assert tuned["spark.cores.max"] == "4" and tuned["spark.sql.catalog.lake.warehouse"] == "/w"
    for master, warehouse in [("spark://spark-master.internal:7077", "s3a://bucket/lake"),
                              ("yarn", "hdfs:///lake"), ("k8s://https://10.0.0.1:6443", "file:/mnt/shared/lake")]:
        remote = iceberg_spark_conf(warehouse, master=master)
        assert remote["spark.sql.catalog.lake.warehouse"] == warehouse  # URIs are kept as given
        assert not {"spark.driver.host", "spark.pyspark.python", "spark.executor.cores", "spark.cores.max"} & set(remote)
        assert remote["spark.jars.packages"] == runtime_package()
    assert runs_on_this_machine("local[*]") and runs_on_this_machine("spark://localhost:1,127.0.0.1:2")
    assert not runs_on_this_machine("spark://127.0.0.1:1,other:2") and not runs_on_this_machine("yarn")


def test_packages_given_replace_the_default_runtime():
    package = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2,org.apache.hadoop:hadoop-aws:3.3.4"
    conf = iceberg_spark_conf("/w", catalog="c", packages=package, extra_conf={"spark.driver.memory": "4g"})
    assert conf["spark.jars.packages"] == package and "spark.jars" not in conf
    assert conf["spark.sql.catalog.c.warehouse"] == "/w" and conf["spark.driver.memory"] == "4g"


# --- a real Spark session -------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark, tmp_path_factory):
    """The test run's session (conftest's `spark`) with this module's catalog added to it:
    `iceberg_spark_session` returns the process's one session, with one more catalog."""
    session = iceberg_spark_session(str(tmp_path_factory.mktemp("warehouse")), catalog=CATALOG)
    assert session is spark
    return session


def _create(spark, table: str) -> None:
    spark.sql(
        f"CREATE TABLE {table} (id INT NOT NULL, name STRING, seq DECIMAL(38,0), at TIMESTAMP_NTZ) "
        "USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
    )
    spark.sql(f"ALTER TABLE {table} SET IDENTIFIER FIELDS id")


CHANGES_SCHEMA = "id INT, name STRING, seq DECIMAL(38,0), at TIMESTAMP_NTZ, op STRING"


def _merge(spark, table: str, changes: list[tuple]) -> None:
    spark.createDataFrame(changes, CHANGES_SCHEMA).createOrReplaceTempView("changes")
    spark.sql(
        f"""MERGE INTO {table} t USING changes s ON t.id = s.id
        WHEN MATCHED AND s.op = 'd' THEN DELETE
        WHEN MATCHED AND s.seq > t.seq THEN UPDATE SET t.name = s.name, t.seq = s.seq, t.at = s.at
        WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (id, name, seq, at) VALUES (s.id, s.name, s.seq, s.at)"""
    )


def _rows(spark, table: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, name, seq, at FROM {table} ORDER BY id").collect()]


def test_session_settings(spark, tmp_path):
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert "IcebergSparkSessionExtensions" in spark.conf.get("spark.sql.extensions")
    assert spark.conf.get(f"spark.sql.catalog.{CATALOG}.type") == "hadoop"
    assert spark.sparkContext.uiWebUrl is None
    assert spark.sparkContext.getConf().get("spark.driver.memory") == "2g"
    # one session per process: a second call returns it, with one more catalog
    assert iceberg_spark_session(str(tmp_path), catalog="second") is spark
    assert spark.conf.get("spark.sql.catalog.second.warehouse") == str(tmp_path)


def test_v3_merge_on_read_table_with_identifier_fields(spark):
    table = f"{CATALOG}.db.created"
    _create(spark, table)
    properties = dict(spark.sql(f"SHOW TBLPROPERTIES {table}").collect())
    assert properties["format-version"] == "3"
    assert properties["identifier-fields"] == "[id]"
    for mode in ("delete", "update", "merge"):
        assert properties[f"write.{mode}.mode"] == "merge-on-read"
    schema = spark.table(table).schema
    assert not schema["id"].nullable and schema["name"].nullable


def test_merge_deletes_updates_and_inserts(spark):
    table = f"{CATALOG}.db.merged"
    _create(spark, table)
    at = datetime.datetime(2024, 2, 29, 23, 59, 59, 999999)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 1, NULL), (2, 'b', 1, NULL), (3, 'c', 5, NULL)")
    d = decimal.Decimal
    _merge(
        spark,
        table,
        [
            (1, None, d(2), None, "d"),  # delete
            (2, "B", d(2), at, "u"),  # update: newer position
            (3, "stale", d(4), None, "u"),  # no update: older than the row
            (4, "D", d(12345678901234567890123456789012345678), None, "c"),  # insert, 38 digits
            (9, None, d(2), None, "d"),  # delete of a missing key: nothing
        ],
    )
    assert _rows(spark, table) == [
        (2, "B", d(2), at),
        (3, "c", d(5), None),
        (4, "D", d(12345678901234567890123456789012345678), None),
    ]
    snapshots = spark.sql(f"SELECT operation FROM {table}.snapshots ORDER BY committed_at").collect()
    operations = [r.operation for r in snapshots]
    assert operations == ["append", "overwrite"]
    # merge-on-read: the MERGE wrote delete files instead of rewriting the data file
    kinds = {r.content for r in spark.sql(f"SELECT content FROM {table}.files").collect()}
    assert kinds == {0, 1}  # data files and position deletes (deletion vectors in v3)


def _summaries(spark, table: str) -> list[dict[str, str]]:
    rows = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at").collect()
    return [dict(r.summary) for r in rows]


def test_commit_properties_land_in_the_merge_snapshot(spark):
    table = f"{CATALOG}.db.checkpointed"
    _create(spark, table)
    d = decimal.Decimal
    with iceberg_commit_properties(spark, {"dblog.position": "0-1-7", "dblog.checkpoint": '{"a": 1}'}):
        _merge(spark, table, [(1, "a", d(1), None, "c"), (2, "b", d(1), None, "c")])
    with iceberg_commit_properties(spark, {"dblog.position": "0-1-9"}):
        _merge(spark, table, [])  # an empty batch still commits a snapshot carrying the position
    spark.sql(f"INSERT INTO {table} VALUES (3, 'c', 1, NULL)")  # after the block: no property

    def merge_in_thread():
        with iceberg_commit_properties(spark, {"dblog.position": "0-1-12"}):
            _merge(spark, table, [(1, None, d(2), None, "d")])

    worker = threading.Thread(target=merge_in_thread)
    worker.start()
    worker.join()

    summaries = _summaries(spark, table)
    assert [s.get("dblog.position") for s in summaries] == ["0-1-7", "0-1-9", None, "0-1-12"]
    assert summaries[0]["dblog.checkpoint"] == '{"a": 1}' and summaries[0]["added-records"] == "2"
    assert "dblog.checkpoint" not in summaries[1]
    assert [r[0] for r in _rows(spark, table)] == [2, 3]


def test_dataframe_writer_v2_snapshot_property_option(spark):
    table = f"{CATALOG}.db.appended"
    _create(spark, table)
    rows = spark.createDataFrame([(1, "a", decimal.Decimal(1), None)], CHANGES_SCHEMA.rsplit(",", 1)[0])
    rows.writeTo(table).option("snapshot-property.dblog.position", "0-1-3").append()
    assert _summaries(spark, table)[-1]["dblog.position"] == "0-1-3"


# A fresh driver started from a jar directory alone, with Maven Central and the caches out of
# reach: every proxy points at a closed port and the JVM's home (Ivy's ~/.ivy2*, its local
# Maven repository ~/.m2) is an empty directory, so any resolution would fail.
OFFLINE_CHILD = """
import sys
from dblog.sinks.iceberg.session import iceberg_spark_session
warehouse, jars_dir = sys.argv[1], sys.argv[2] or None  # "": by coordinates, the default
spark = iceberg_spark_session(warehouse, catalog="offline", jars_dir=jars_dir)
assert spark.conf.get("spark.jars.packages", None) is None
spark.sql("CREATE TABLE offline.db.t (id INT NOT NULL, v STRING) USING iceberg TBLPROPERTIES ('format-version'='3')")
spark.sql("MERGE INTO offline.db.t t USING (SELECT 1 AS id, 'a' AS v UNION ALL SELECT 2, 'b') s ON t.id = s.id "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
print(sorted(tuple(row) for row in spark.table("offline.db.t").collect()))
spark.stop()
"""


def test_a_driver_started_from_an_offline_jar_directory_writes_iceberg_tables(spark, tmp_path):
    import os
    import shutil
    import subprocess

    # The run's session resolved the runtime by its coordinates: its jar (on the driver's
    # classpath, spark.repl.local.jars) is what a user copies from Ivy's cache.
    (runtime,) = [jar for jar in spark.sparkContext.getConf().get("spark.repl.local.jars").split(",")
                  if "iceberg-spark-runtime" in jar]
    jars_dir = tmp_path / "jars"
    jars_dir.mkdir()
    shutil.copy(runtime.removeprefix("file://"), jars_dir)
    dead_proxy = " ".join(f"-D{scheme}.proxyHost=127.0.0.1 -D{scheme}.proxyPort=9" for scheme in ("http", "https"))
    java_options = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {dead_proxy} -Duser.home={tmp_path / 'home'}"
    env = {**os.environ, "JAVA_TOOL_OPTIONS": java_options.strip()}

    def driver(jars: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", OFFLINE_CHILD, str(tmp_path / "warehouse"), jars],
                              env=env, capture_output=True, text=True, timeout=300)

    by_coordinates = driver("")  # the control: here, resolving the runtime fails
    assert by_coordinates.returncode != 0 and "iceberg-spark-runtime" in by_coordinates.stderr
    offline = driver(str(jars_dir))
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert offline.stdout.strip().splitlines()[-1] == "[(1, 'a'), (2, 'b')]"
