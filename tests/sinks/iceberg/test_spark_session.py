"""The offline Iceberg runtime (the relocating repair) and a real Spark + Iceberg session:
CREATE TABLE v3 merge-on-read, identifier fields, MERGE INTO, snapshot summary properties."""

from __future__ import annotations

import datetime
import decimal
import struct
import sys
import threading
import zipfile

import pytest

import dblog.sinks.iceberg.session
from dblog.sinks.iceberg.session import (
    JACKSON_RELOCATION,
    SPARK_LINE,
    WHEEL_PIN,
    ClassFile,
    Relocation,
    iceberg_commit_properties,
    iceberg_runtime_jar,
    iceberg_runtime_package,
    iceberg_spark_conf,
    iceberg_spark_session,
    jackson_jars,
    runs_on_this_machine,
    scala_version,
    spark_line,
)

OLD = "com/fasterxml/jackson/"
NEW = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
GROWTH = len(NEW) - len(OLD)  # bytes added per relocated occurrence
CATALOG = "session_test"
# The wheel's runtime jar is a Spark 3.5 / Scala 2.12 one: repaired and used on that line only.
on_the_wheels_spark_line = pytest.mark.skipif(spark_line() != SPARK_LINE,
                                              reason=f"the wheel's jar is for Spark {SPARK_LINE}")


# --- the constant-pool rewriter -------------------------------------------------------------


def _jackson_core() -> zipfile.ZipFile:
    (core,) = [jar for jar in jackson_jars() if jar.name.startswith("jackson-core-")]
    return zipfile.ZipFile(core)


def test_relocating_a_real_jackson_class_renames_every_class_reference():
    with _jackson_core() as jar:
        original = jar.read("com/fasterxml/jackson/core/JsonFactory.class")
    before = ClassFile.parse(original)
    relocated = JACKSON_RELOCATION.class_file(original)
    after = ClassFile.parse(relocated)

    assert before.this_class == "com/fasterxml/jackson/core/JsonFactory"
    assert after.this_class == "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactory"
    jackson_before = [n for n in before.class_names() if OLD in n]
    assert len(jackson_before) > 20
    names_after = after.class_names()
    assert len(names_after) == len(before.class_names())
    for old, new in zip(before.class_names(), names_after):
        assert new == (old.replace(OLD, NEW) if OLD in old else old)
    assert not any(n.startswith(OLD) or f"L{OLD}" in n for n in names_after)
    # descriptors, signatures and string constants follow too: no unrelocated name is left
    utf8 = [c for c in after.constants if isinstance(c, bytes)]
    assert not [c for c in utf8 if c.startswith(OLD.encode()) or b"L" + OLD.encode() in c]

    occurrences = original.count(OLD.encode()) + original.count(OLD.replace("/", ".").encode())
    assert len(relocated) - len(original) == GROWTH * occurrences
    # only Utf8 entries changed: the other constants and everything after the pool are identical
    assert after.rest == before.rest and after.header == before.header
    assert [c for c in after.constants if not isinstance(c, bytes)] == [
        c for c in before.constants if not isinstance(c, bytes)
    ]


def test_parsing_and_writing_back_every_jackson_class_is_byte_identical():
    with _jackson_core() as jar:
        classes = [jar.read(n) for n in jar.namelist() if n.endswith(".class")]
    assert len(classes) > 100
    for data in classes:
        assert ClassFile.parse(data).to_bytes() == data


def _synthetic_class() -> bytes:
    """A class file using every constant kind, a two-slot long/double and modified UTF-8."""
    pool = [
        b"\x01" + struct.pack(">H", 30) + b"com/fasterxml/jackson/core/Foo",  # 1 Utf8
        b"\x07\x00\x01",  # 2 Class #1
        b"\x05" + struct.pack(">q", -2),  # 3 Long (and 4)
        b"\x06" + struct.pack(">d", 1.5),  # 5 Double (and 6)
        b"\x03" + struct.pack(">i", 7),  # 7 Integer
        b"\x04" + struct.pack(">f", 0.5),  # 8 Float
        b"\x08\x00\x0a",  # 9 String #10
        None,  # 10 Utf8, below
        b"\x0c\x00\x0c\x00\x0d",  # 11 NameAndType #12 #13
        b"\x01\x00\x01x",  # 12 Utf8 "x"
        b"\x01" + struct.pack(">H", 32) + b"Lcom/fasterxml/jackson/core/Foo;",  # 13 Utf8
        b"\x09\x00\x02\x00\x0b",  # 14 Fieldref
        b"\x0a\x00\x02\x00\x0b",  # 15 Methodref
        b"\x0b\x00\x02\x00\x0b",  # 16 InterfaceMethodref
        b"\x0f\x01\x00\x0e",  # 17 MethodHandle
        b"\x10\x00\x0d",  # 18 MethodType
        b"\x11\x00\x00\x00\x0b",  # 19 Dynamic
        b"\x12\x00\x00\x00\x0b",  # 20 InvokeDynamic
        b"\x13\x00\x0c",  # 21 Module
        b"\x14\x00\x0c",  # 22 Package
    ]
    text = "é\x00 com.fasterxml.jackson.core.Foo \ud83d\ude00"  # NUL and a surrogate pair
    modified = text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")
    pool[7] = b"\x01" + struct.pack(">H", len(modified)) + modified
    rest = struct.pack(">HHHHHHHH", 0x21, 2, 0, 0, 0, 0, 0, 0)
    return b"\xca\xfe\xba\xbe" + struct.pack(">HHH", 0, 61, 23) + b"".join(pool) + rest


def test_every_constant_kind_parses_and_only_utf8_entries_change():
    data = _synthetic_class()
    parsed = ClassFile.parse(data)
    assert len(parsed.constants) == 23 and parsed.constants[4] is None and parsed.constants[6] is None
    assert parsed.to_bytes() == data
    relocated = ClassFile.parse(JACKSON_RELOCATION.class_file(data))
    assert relocated.this_class == NEW + "core/Foo"
    assert relocated.utf8(13) == f"L{NEW}core/Foo;"
    assert relocated.utf8(10) == "é\x00 org.apache.iceberg.shaded.com.fasterxml.jackson.core.Foo \ud83d\ude00"
    assert relocated.utf8(12) == "x"
    changed = [i for i, (a, b) in enumerate(zip(parsed.constants, relocated.constants)) if a != b]
    assert changed == [1, 10, 13]
    assert len(JACKSON_RELOCATION.class_file(data)) - len(data) == 3 * GROWTH


def test_relocation_matches_names_only_where_they_start():
    text = JACKSON_RELOCATION.text
    assert text(b"(IJLcom/fasterxml/jackson/core/JsonParser;[Lcom/fasterxml/jackson/A;)V") == (
        b"(IJLorg/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonParser;"
        b"[Lorg/apache/iceberg/shaded/com/fasterxml/jackson/A;)V"
    )
    assert text(b"Ljava/util/List<+Lcom/fasterxml/jackson/B;>;") == (
        b"Ljava/util/List<+Lorg/apache/iceberg/shaded/com/fasterxml/jackson/B;>;"
    )
    assert text(b"com.fasterxml.jackson.databind.ext.DOMSerializer") == (
        b"org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ext.DOMSerializer"
    )
    for untouched in (
        NEW.encode() + b"X",
        b"org.apache.iceberg.shaded.com.fasterxml.jackson.X",
        b"xcom/fasterxml/jackson/Y",
        b"com/fasterxml/jacksonX",
    ):
        assert text(untouched) == untouched
    path = JACKSON_RELOCATION.path
    assert path("com/fasterxml/jackson/core/JsonFactory.class") == NEW + "core/JsonFactory.class"
    assert path("META-INF/versions/11/com/fasterxml/jackson/core/io/X.class") == (
        "META-INF/versions/11/" + NEW + "core/io/X.class"
    )
    assert path("META-INF/services/com.fasterxml.jackson.core.JsonFactory") == (
        "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory"
    )
    assert path("META-INF/LICENSE") is None
    with pytest.raises(ValueError):
        Relocation("com.fasterxml.jackson.", NEW)


# --- the repaired runtime jar ---------------------------------------------------------------


def _assert_repaired(path):
    with zipfile.ZipFile(path) as jar:
        names = set(jar.namelist())
        assert NEW + "core/JsonFactoryBuilder.class" in names
        assert NEW + "databind/ObjectMapper.class" in names
        assert NEW + "datatype/jsr310/JavaTimeModule.class" in names
        assert "org/apache/iceberg/spark/SparkCatalog.class" in names  # the original entries stay
        service = "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.databind.Module"
        module = b"org.apache.iceberg.shaded.com.fasterxml.jackson.datatype.jsr310.JavaTimeModule"
        assert jar.read(service).strip() == module
        assert jar.testzip() is None


@on_the_wheels_spark_line
def test_runtime_jar_is_built_once_then_reused(tmp_path):
    first = iceberg_runtime_jar(tmp_path)
    assert first == tmp_path / "iceberg-spark-runtime-3.5_2.12-1.10.2-dblog1.jar"
    _assert_repaired(first)
    stat = first.stat()
    second = iceberg_runtime_jar(tmp_path)
    assert second == first
    assert (second.stat().st_ino, second.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp file left behind


@on_the_wheels_spark_line
def test_default_cache_is_reused():
    first = iceberg_runtime_jar()
    stat = first.stat()
    assert iceberg_runtime_jar() == first
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


@on_the_wheels_spark_line
def test_a_missing_wheel_names_what_to_install(monkeypatch):
    real = dblog.sinks.iceberg.session.importlib.util.find_spec
    monkeypatch.setattr(
        dblog.sinks.iceberg.session.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "snowpark_connect_deps_iceberg" else real(name, *a),
    )
    with pytest.raises(RuntimeError) as raised:
        iceberg_runtime_jar()
    assert f"pip install {WHEEL_PIN}" in str(raised.value)
    assert "packages='org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2'" in str(raised.value)


def test_settings_for_a_standalone_master_on_this_machine_and_for_remote_clusters(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    here = iceberg_spark_conf("wh", master="spark://127.0.0.1:7077")
    assert here["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")  # executors run elsewhere
    assert here["spark.driver.host"] == here["spark.driver.bindAddress"] == "127.0.0.1"
    assert here["spark.pyspark.python"] == sys.executable
    assert (here["spark.executor.cores"], here["spark.executor.memory"], here["spark.cores.max"]) == ("1", "1g", "2")
    _assert_ships_the_runtime(here)  # the driver serves it to the executors
    tuned = iceberg_spark_conf("/w", master="spark://localhost:7077", extra_conf={"spark.cores.max": "4"})
    assert tuned["spark.cores.max"] == "4" and tuned["spark.sql.catalog.lake.warehouse"] == "/w"
    for master, warehouse in [("spark://spark-master.internal:7077", "s3a://bucket/lake"),
                              ("yarn", "hdfs:///lake"), ("k8s://https://10.0.0.1:6443", "file:/mnt/shared/lake")]:
        remote = iceberg_spark_conf(warehouse, master=master)
        assert remote["spark.sql.catalog.lake.warehouse"] == warehouse  # URIs are kept as given
        assert not {"spark.driver.host", "spark.pyspark.python", "spark.executor.cores", "spark.cores.max"} & set(remote)
        _assert_ships_the_runtime(remote)
    assert runs_on_this_machine("local[*]") and runs_on_this_machine("spark://localhost:1,127.0.0.1:2")
    assert not runs_on_this_machine("spark://127.0.0.1:1,other:2") and not runs_on_this_machine("yarn")


def _assert_ships_the_runtime(conf: dict[str, str]) -> None:
    if spark_line() == SPARK_LINE:
        assert conf["spark.jars"].endswith("-dblog1.jar")
    else:
        assert conf["spark.jars.packages"] == iceberg_runtime_package()


@pytest.mark.parametrize(("pyspark", "scala", "runtime"), [
    ("4.0.1", "2.13", "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.2"),
    ("3.5.9", "2.12", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"),
    ("3.5.3", "2.13", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.13:1.10.2"),  # a Scala 2.13 build of 3.5
])
def test_the_runtime_matches_the_spark_line_and_scala_version(monkeypatch, pyspark, scala, runtime):
    monkeypatch.setattr(dblog.sinks.iceberg.session.importlib.metadata, "version",
                        lambda name: pyspark if name == "pyspark" else pytest.fail(name))
    monkeypatch.setattr(dblog.sinks.iceberg.session, "scala_version", lambda: scala)
    assert iceberg_runtime_package() == runtime
    if pyspark.startswith(SPARK_LINE):
        monkeypatch.setattr(dblog.sinks.iceberg.session, "iceberg_runtime_jar", lambda: "/cache/repaired.jar")
        assert iceberg_spark_conf("/w")["spark.jars"] == "/cache/repaired.jar"
    else:  # no offline jar for this line: Spark resolves the runtime from Maven
        assert iceberg_spark_conf("/w")["spark.jars.packages"] == runtime


def test_the_installed_pyspark_s_scala_version():
    assert scala_version() == {"3": "2.12", "4": "2.13"}[spark_line()[0]]


def test_with_maven_packages_no_offline_jar_is_used(monkeypatch):
    monkeypatch.setattr(dblog.sinks.iceberg.session, "iceberg_runtime_jar", lambda: pytest.fail("offline jar used"))
    package = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
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
