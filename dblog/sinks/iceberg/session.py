"""A local Spark session with an Apache Iceberg catalog, its jars from Maven Central.

`iceberg_spark_session(warehouse)` returns a SparkSession with an Iceberg catalog (Hadoop
catalog type, tables as directories under `warehouse`) and the Iceberg SQL extensions
(MERGE INTO, `ALTER TABLE … SET IDENTIFIER FIELDS`, …). Starting a session takes several seconds:
keep one per process. Later calls return the running session (`SparkSession.builder.getOrCreate`):
they may add catalogs and runtime SQL settings, but process-wide settings (jars, extensions,
driver memory) stay those of the first call.

Where does the Iceberg runtime come from? As users get it: by its Maven coordinates
(`runtime_package()`: `org.apache.iceberg:iceberg-spark-runtime-<Spark line>_<Scala>:<version>`,
chosen from the installed pyspark) in `spark.jars.packages`; Spark's Ivy downloads it from Maven
Central once into Ivy's cache (~/.ivy2.5.2 for Spark 4, ~/.ivy2 for 3.5) and later starts only
check that cache (well under a second). Offline: `jars_dir`, a directory of jars (e.g. a copy of
that cache's jars/ after one start with the network),
all put in `spark.jars`, and no package is resolved.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from dblog.sinks.iceberg.catalog import CatalogSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_VERSION = "1.10.2"
# Hadoop's S3A connector, for warehouses on s3a://: hadoop-aws of the Hadoop version inside
# pyspark's jars (hadoop-client-api-<version>.jar); Ivy brings its AWS SDK bundle with it.
HADOOP_AWS = "org.apache.hadoop:hadoop-aws:{hadoop}"
# The AWS SDK (v2) of Iceberg's own S3FileIO (`io-impl = org.apache.iceberg.aws.s3.S3FileIO`, the class
# is in the runtime jar): iceberg-aws-bundle. 1.10.1: Maven Central, as reached from here
# (Nov 2026), answers 404 for 1.10.2 of it (and of iceberg-api/-core), though it serves the 1.10.2 runtime.
ICEBERG_AWS_BUNDLE = "org.apache.iceberg:iceberg-aws-bundle:1.10.1"
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DRIVER_MEMORY = "2g"
# A log4j2 profile that lets only errors through (Spark's default prints WARNs and notes at
# start); pass it with -Dlog4j2.configurationFile in spark.driver.extraJavaOptions.
QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
logger.spark.name = org.apache.spark
logger.spark.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


# --- the runtime's coordinates ----------------------------------------------------------


def pyspark_jars_dir() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed")
    return Path(spec.origin).parent / "jars"


def scala_version() -> str:
    """The Scala binary version pyspark was built with ("2.12" for pyspark 3.5 on PyPI)."""
    cores = sorted(pyspark_jars_dir().glob("spark-core_*.jar"))
    if not cores:
        raise RuntimeError(f"no spark-core jar in {pyspark_jars_dir()}")
    return cores[0].name.split("_", 1)[1].split("-", 1)[0]


def spark_line() -> str:
    """The installed pyspark's Spark line ("3.5", "4.0"), as Iceberg's runtime artifacts name it."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def hadoop_version() -> str:
    """The Hadoop version of pyspark's own client jars ("3.3.4" for pyspark 3.5.9)."""
    jars = sorted(pyspark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not jars:
        raise RuntimeError(f"no hadoop-client-api jar in {pyspark_jars_dir()}")
    return jars[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def runtime_package(line: str | None = None, scala: str | None = None) -> str:
    """The Iceberg Spark runtime's Maven coordinates for a Spark line and Scala version (default:
    the installed pyspark's), e.g. org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2."""
    return f"org.apache.iceberg:iceberg-spark-runtime-{line or spark_line()}_{scala or scala_version()}:{ICEBERG_VERSION}"


def s3a_package(hadoop: str | None = None) -> str:
    """hadoop-aws for pyspark's Hadoop (its AWS SDK bundle comes as its dependency)."""
    return HADOOP_AWS.format(hadoop=hadoop or hadoop_version())


def cache_dir() -> Path:
    """`$DBLOG_CACHE_DIR`, else `$XDG_CACHE_HOME/dblog`, else `~/.cache/dblog`."""
    if os.environ.get("DBLOG_CACHE_DIR"):
        return Path(os.environ["DBLOG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dblog"


def jars_in(directory: str | os.PathLike[str]) -> list[str]:
    """Every jar in `directory` (the offline mode's `jars_dir`), sorted; an error if none."""
    jars = sorted(str(jar) for jar in Path(directory).expanduser().glob("*.jar"))
    if not jars:
        raise RuntimeError(f"spark.jars_dir = {str(directory)!r} holds no jar: copy the resolved jars there "
                           "(Ivy's jars/, ~/.ivy2.5.2/jars for Spark 4, after one start with Maven Central reachable; "
                           "see docs/iceberg.md)")
    return jars


# --- the session ----------------------------------------------------------------------------


_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # s3a:, hdfs:, file:, …
# Executor sizes for a standalone cluster on this machine (lab.spark_cluster's, or one
# started by hand on a laptop): two 1-core executors of 1 GiB. A real cluster sizes its own.
SMALL_CLUSTER_EXECUTORS = {"spark.executor.cores": "1", "spark.executor.memory": "1g", "spark.cores.max": "2"}


def runs_on_this_machine(master: str) -> bool:
    """True for `local[...]` and for a standalone master on the loopback interface
    (`spark://127.0.0.1:7077`, `spark://localhost:7077`, or a list of such masters): then
    the driver, every executor and a local-directory warehouse are all on this machine."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [address.rsplit(":", 1)[0] for address in master[len("spark://"):].split(",")]
    return all(host in _LOOPBACK_HOSTS for host in hosts)


def warehouse_location(warehouse: str) -> str:
    """`warehouse` with a plain relative path made absolute. Executors run in their workers'
    work directories: a relative path would put their data files there, not under the
    warehouse the driver's metadata names. URIs (s3a://…, hdfs://…, file:/…) are kept."""
    warehouse = str(warehouse)
    if _URI_SCHEME.match(warehouse) or os.path.isabs(warehouse):
        return warehouse
    return os.path.abspath(warehouse)


def _catalog_warehouse(warehouse: str, spec: CatalogSpec | None) -> str:
    """A REST catalog's warehouse as given (the service reads it: a location, or the name of one of
    its warehouses); the other catalogs' as a location (`warehouse_location`)."""
    return str(warehouse) if spec is not None and spec.type == "rest" else warehouse_location(warehouse)


def iceberg_spark_conf(
    warehouse: str,
    catalog: str = "lake",
    master: str = "local[2]",
    extra_conf: dict[str, str] | None = None,
    packages: str | None = None,
    jars: Sequence[str] = (),
    catalog_spec: CatalogSpec | None = None,
    jars_dir: str | None = None,
) -> dict[str, str]:
    """The Spark settings `iceberg_spark_session` starts with (see there); never the catalog's
    secrets (`CatalogSpec.secret_conf`)."""
    conf = {
        "spark.sql.extensions": EXTENSIONS,
        **(catalog_spec or CatalogSpec()).conf(catalog, _catalog_warehouse(warehouse, catalog_spec)),
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": DRIVER_MEMORY,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Jobs share the executors task by task: a backfill read by Spark tasks (its own pool,
        # dblog.runtime.distributed_snapshot) does not hold the sink's MERGEs back for its length.
        "spark.scheduler.mode": "FAIR",
    }
    if runs_on_this_machine(master):
        # The executors (a standalone cluster's, on this machine) reach the driver on 127.0.0.1,
        # and any Python they run is this interpreter, with dblog's packages.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        if not os.environ.get("PYSPARK_PYTHON"):
            conf["spark.pyspark.python"] = sys.executable
        if master.startswith("spark://"):
            conf.update(SMALL_CLUSTER_EXECUTORS)
    # Added to the driver's classpath and served by the driver to every executor, which adds
    # them to its own classpath (the executors write the Iceberg data files). `jars`: more of
    # them, e.g. a JDBC catalog's driver.
    if jars_dir:
        if packages:
            raise ValueError("give spark.packages (resolved from Maven Central) or spark.jars_dir (offline), not both")
        jars = [*jars_in(jars_dir), *jars]
    else:
        conf["spark.jars.packages"] = packages or runtime_package()
    if jars:
        conf["spark.jars"] = ",".join(jars)
    conf.update(extra_conf or {})
    return conf


def iceberg_spark_session(
    warehouse: str,
    catalog: str = "lake",
    master: str = "local[2]",
    extra_conf: dict[str, str] | None = None,
    packages: str | None = None,
    jars: Sequence[str] = (),
    catalog_spec: CatalogSpec | None = None,
    jars_dir: str | None = None,
) -> SparkSession:
    """A SparkSession with the Iceberg catalog `catalog`: a Hadoop catalog in `warehouse`, or
    the one `catalog_spec` describes (`dblog.sinks.iceberg.catalog`), its warehouse `warehouse`.

    Defaults: the Iceberg SQL extensions, `spark.sql.shuffle.partitions=4`, 2 GB driver memory,
    no UI or console progress bar, WARN logs, session time zone UTC, a relative warehouse path
    made absolute, and when the master runs on this machine (`local[N]`, or a standalone
    `spark://127.0.0.1:…` as `lab.spark_cluster` starts) the driver bound to 127.0.0.1
    and Python workers running this interpreter; on such a standalone master two executors of
    1 core and 1 GiB. `extra_conf` overrides any of these.

    `master` is any Spark master URL: dblog's process is the driver (client mode), so the
    executors must be able to reach it, and they must reach the warehouse (shared storage on
    a cluster of several machines). The jars are shipped to executors by the driver itself.
    `packages` (Maven coordinates, comma-separated; default `runtime_package()`, the Iceberg
    runtime for the installed Spark) are resolved by Spark's Ivy from Maven Central and cached
    (~/.ivy2.5.2 for Spark 4, ~/.ivy2 for 3.5). Offline, `jars_dir` names a directory whose jars
    are used instead (no package).

    `jars` (local paths or URLs) join them in `spark.jars`: a JDBC catalog's driver.
    They, like every process-wide setting, count only when the call starts the session. The
    catalog's secrets are set on the running session, never passed to the JVM's command line.

    The first call takes several seconds (the first on a machine also downloads the packages);
    later calls return the running session (getOrCreate), adding their catalog to it (as long as
    the catalog's name was not used before in this session: Spark keeps a catalog once loaded).
    """
    from pyspark.sql import SparkSession

    conf = iceberg_spark_conf(warehouse, catalog, master, extra_conf, packages, jars, catalog_spec, jars_dir)
    if runs_on_this_machine(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else a WARN about the hostname
    builder = SparkSession.builder.master(master).appName("dblog")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if EXTENSIONS not in (session.conf.get("spark.sql.extensions", "") or ""):
        raise RuntimeError(
            "a SparkSession without the Iceberg extensions is already running in this process; "
            "stop it before calling iceberg_spark_session"
        )
    for key, value in (catalog_spec or CatalogSpec()).secret_conf(catalog).items():
        session.conf.set(key, value)
    if not master.startswith("local"):
        ship_resolved_packages(session)
    return session


def ship_resolved_packages(session: SparkSession) -> None:
    """Give the executors the jars of `spark.jars.packages` too. spark-submit merges the resolved
    packages into `spark.jars`, but pyspark then sets the builder's `spark.jars` (a JDBC driver,
    `jars`) over that list: the packages stay on the driver's classpath (`spark.repl.local.jars`)
    and no executor gets them (ClassNotFoundException for Iceberg's writer classes on a cluster).
    `ADD JAR` adds each missing one to the context's jars, which executors fetch before a task."""
    context = session.sparkContext
    conf = context.getConf()
    shipped = {jar.rsplit("/", 1)[-1] for jar in (conf.get("spark.jars", "") or "").split(",")}
    for jar in filter(None, (conf.get("spark.repl.local.jars", "") or "").split(",")):
        if jar.rsplit("/", 1)[-1] not in shipped:
            session.sql(f"ADD JAR '{jar.removeprefix('file://')}'")


def iceberg_table(spark: SparkSession, name: str):
    """The org.apache.iceberg.Table behind a table name of the Spark catalog."""
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)


@contextmanager
def iceberg_commit_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    """Put `properties` into the snapshot summary of every Iceberg commit this thread makes in
    the block: MERGE INTO, INSERT, DELETE, UPDATE, DataFrame writes. The data and the properties
    land in one atomic commit; read them back from `<table>.snapshots` (`summary` map).

        with iceberg_commit_properties(spark, {"dblog.position": "..."}):
            spark.sql("MERGE INTO lake.db.t t USING changes s ON ...")

    Iceberg 1.10 has no session setting for this (there is no
    `spark.sql.iceberg.commit.snapshot-property.*`; the write option `snapshot-property.<key>`
    exists but SQL MERGE cannot pass write options). What Iceberg offers is
    `CommitMetadata.withCommitProperties(map, callable, …)`, a Java thread-local read at commit
    time; a Python callable cannot run inside it on the same JVM thread, so this sets the same
    thread-local directly. It relies on pyspark's pinned-thread mode (the default), where each
    Python thread drives its own JVM thread: call Spark from the thread that entered the block.
    """
    from py4j.clientserver import ClientServer

    context = spark.sparkContext
    if not isinstance(context._gateway, ClientServer):
        raise RuntimeError("iceberg_commit_properties needs pinned-thread mode (PYSPARK_PIN_THREAD=true)")
    jvm = context._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    metadata = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
    field = metadata.getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    holder = field.get(None)  # ThreadLocal<Map<String, String>>
    values = jvm.java.util.HashMap()
    for key, value in properties.items():
        values.put(str(key), str(value))
    previous = holder.get()
    holder.set(values)
    try:
        yield
    finally:
        holder.set(previous)
