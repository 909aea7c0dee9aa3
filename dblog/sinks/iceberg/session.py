"""A local Spark session with an Apache Iceberg catalog.

`iceberg_spark_session(warehouse)` returns a SparkSession (pyspark 4.0 or 3.5) with an Iceberg catalog
(Hadoop catalog type, tables as directories under `warehouse`) and the Iceberg SQL extensions
(MERGE INTO, `ALTER TABLE … SET IDENTIFIER FIELDS`, …). Starting a session takes several seconds
(3–9 s here, plus ~1 s once to build the jar): keep one per process. Later calls return the running session
(`SparkSession.builder.getOrCreate`): they may add catalogs and runtime SQL settings, but
process-wide settings (jars, extensions, driver memory) stay those of the first call.

Where does the Iceberg runtime come from? On a Spark line other than the wheel's (Spark 4), Spark
resolves `iceberg_runtime_package()` from Maven itself. On Spark 3.5, users with Maven access pass
`packages="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"` (Spark downloads it).
Offline, the only copy on the registries reachable here is inside the PyPI wheel
`snowpark-connect-deps-iceberg==1.0.3`, and that copy lacks its relocated Jackson classes:
Iceberg's own classes refer to `org/apache/iceberg/shaded/com/fasterxml/jackson/...` but no such
class is in the jar (`CREATE TABLE` fails with NoClassDefFoundError JsonFactoryBuilder).
`iceberg_runtime_jar()` repairs it once and caches the result: the Jackson classes are rebuilt
from pyspark's own jackson jars, relocated the way maven-shade relocates (every class name,
descriptor, signature and string constant naming `com/fasterxml/jackson/...` or
`com.fasterxml.jackson....` is rewritten in each class file's constant pool, and resource paths
and service files follow). `ClassFile` below is the small constant-pool rewriter that does it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import struct
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dblog.sinks.iceberg.catalog import CatalogSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WHEEL = "snowpark-connect-deps-iceberg"
WHEEL_PIN = "snowpark-connect-deps-iceberg==1.0.3"
WHEEL_MODULE = "snowpark_connect_deps_iceberg"
ICEBERG_VERSION = "1.10.2"
SPARK_LINE = "3.5"  # the Spark line of the wheel's runtime jar; other lines resolve it from Maven
REPAIR_REVISION = "dblog1"  # bump when the repair below changes: old cached jars are not reused
MAVEN_PACKAGE = f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_LINE}_{{scala}}:{ICEBERG_VERSION}"
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
JACKSON_MODULES = ("core", "databind", "annotations", "datatype-jsr310")
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


# --- the class-file constant-pool rewriter --------------------------------------------------

UTF8 = 1
# Bytes after the tag of every other constant kind (JVMS §4.4); long and double take two slots.
_FIXED_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 16: 2, 19: 2, 20: 2, 9: 4, 10: 4, 11: 4, 12: 4, 17: 4, 18: 4, 15: 3}
_CLASS = 7


@dataclass
class ClassFile:
    """A class file split into header, constant pool and the rest (kept as bytes).

    `constants[i]` is entry i of the pool (index 0 and the slot after a long/double are None):
    the raw bytes (modified UTF-8, as stored) for Utf8 entries, or `(tag, raw)`
    for every other kind with `raw` the bytes after the tag, copied unchanged.
    """

    header: bytes  # magic, minor and major version
    constants: list[bytes | tuple[int, bytes] | None]
    rest: bytes  # access flags onwards, untouched

    @classmethod
    def parse(cls, data: bytes) -> ClassFile:
        if data[:4] != b"\xca\xfe\xba\xbe":
            raise ValueError("not a class file (bad magic)")
        (count,) = struct.unpack_from(">H", data, 8)
        constants: list[bytes | tuple[int, bytes] | None] = [None]
        pos = 10
        while len(constants) < count:
            tag = data[pos]
            pos += 1
            if tag == UTF8:
                (length,) = struct.unpack_from(">H", data, pos)
                constants.append(data[pos + 2 : pos + 2 + length])
                pos += 2 + length
            elif tag in _FIXED_SIZES:
                size = _FIXED_SIZES[tag]
                constants.append((tag, data[pos : pos + size]))
                pos += size
                if tag in (5, 6):
                    constants.append(None)
            else:
                raise ValueError(f"unknown constant pool tag {tag} at byte {pos - 1}")
        if pos > len(data):
            raise ValueError("truncated class file")
        return cls(data[:8], constants, data[pos:])

    def to_bytes(self) -> bytes:
        out = [self.header, struct.pack(">H", len(self.constants))]
        for entry in self.constants[1:]:
            if entry is None:
                continue
            if isinstance(entry, bytes):
                if len(entry) > 0xFFFF:
                    raise ValueError("Utf8 constant longer than 65535 bytes")
                out.append(struct.pack(">BH", UTF8, len(entry)))
                out.append(entry)
            else:
                tag, raw = entry
                out.append(bytes((tag,)))
                out.append(raw)
        out.append(self.rest)
        return b"".join(out)

    def utf8(self, index: int) -> str:
        entry = self.constants[index]
        if not isinstance(entry, bytes):
            raise ValueError(f"constant {index} is not Utf8")
        return decode_modified_utf8(entry)

    def class_names(self) -> list[str]:
        """The internal names of every CONSTANT_Class entry (`com/x/Y`, or `[Lcom/x/Y;`)."""
        names = []
        for entry in self.constants:
            if isinstance(entry, tuple) and entry[0] == _CLASS:
                (name_index,) = struct.unpack(">H", entry[1])
                names.append(self.utf8(name_index))
        return names

    @property
    def this_class(self) -> str:
        (index,) = struct.unpack_from(">H", self.rest, 2)
        entry = self.constants[index]
        assert isinstance(entry, tuple) and entry[0] == _CLASS
        return self.utf8(struct.unpack(">H", entry[1])[0])


def decode_modified_utf8(raw: bytes) -> str:
    """Modified UTF-8 (JVMS §4.4.7) to str; supplementary characters stay as surrogate pairs."""
    return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Relocation:
    """Move a package prefix, like maven-shade's `<relocation>`: `com/fasterxml/jackson/` (and
    its dotted form) becomes `org/apache/iceberg/shaded/com/fasterxml/jackson/`.

    A prefix is replaced where a name starts: at the start of a constant, after a character
    that cannot be part of a name, or after the `L` of a descriptor (`(IJLcom/…;)V`). So an
    already relocated name (`…/shaded/com/fasterxml/…`) is left alone. Every byte of a multi-byte
    (modified) UTF-8 sequence is >= 0x80, so replacing ASCII byte strings is encoding-safe.
    """

    source: str
    target: str

    def __post_init__(self) -> None:
        for prefix in (self.source, self.target):
            if not prefix.endswith("/") or "." in prefix:
                raise ValueError(f"relocation prefixes are slashed package paths ending in '/': {prefix!r}")

    @cached_property
    def _patterns(self) -> list[tuple[re.Pattern[bytes], bytes]]:
        start = rb"(?:(?<![A-Za-z0-9_$/.])|(?<=L))"
        pairs = [(self.source, self.target), (self.source.replace("/", "."), self.target.replace("/", "."))]
        return [(re.compile(start + re.escape(s.encode())), t.encode()) for s, t in pairs]

    def text(self, raw: bytes) -> bytes:
        """Relocate every slashed and dotted occurrence in a byte string."""
        for pattern, replacement in self._patterns:
            raw = pattern.sub(replacement, raw)
        return raw

    def class_file(self, data: bytes) -> bytes:
        """The class file with every Utf8 constant relocated; everything else byte for byte."""
        parsed = ClassFile.parse(data)
        parsed.constants = [self.text(c) if isinstance(c, bytes) else c for c in parsed.constants]
        return parsed.to_bytes()

    def path(self, name: str) -> str | None:
        """The relocated jar entry name, or None when the entry is not under the package.

        `com/…/X.class` and `META-INF/versions/N/com/…/X.class` move; a service file
        `META-INF/services/com.fasterxml…` is renamed by the dotted form.
        """
        versioned = re.match(r"(META-INF/versions/\d+/)(.*)", name)
        prefix, rest = versioned.groups() if versioned else ("", name)
        if rest.startswith(self.source):
            return prefix + self.target + rest[len(self.source) :]
        services = "META-INF/services/"
        dotted = self.source.replace("/", ".")
        if name.startswith(services + dotted):
            return services + self.target.replace("/", ".") + name[len(services + dotted) :]
        return None


JACKSON_RELOCATION = Relocation("com/fasterxml/jackson/", "org/apache/iceberg/shaded/com/fasterxml/jackson/")
_MISSING_CLASS = "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class"


def add_relocated(out: zipfile.ZipFile, jar: Path, relocation: Relocation) -> int:
    """Append the classes and service files of `jar`, relocated, to `out`; return how many.

    Skipped: directories, module-info (shaded code is not a module), manifests, licences, poms.
    """
    present = set(out.namelist())
    added = 0
    with zipfile.ZipFile(jar) as source:
        for info in source.infolist():
            name = info.filename
            if info.is_dir() or name.endswith("module-info.class"):
                continue
            target = relocation.path(name)
            if target is None:
                continue
            data = source.read(info)
            if name.endswith(".class"):
                data = relocation.class_file(data)
            elif name.startswith("META-INF/services/"):
                data = relocation.text(data)
            if target in present:
                raise ValueError(f"{target} is already in the jar")
            entry = zipfile.ZipInfo(target, date_time=info.date_time)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = info.external_attr
            out.writestr(entry, data)
            present.add(target)
            added += 1
    return added


# --- finding and repairing the runtime jar --------------------------------------------------


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
    """The installed pyspark's Spark line: "4.0" for pyspark 4.0.1, "3.5" for 3.5.9."""
    major, minor = importlib.metadata.version("pyspark").split(".")[:2]
    return f"{major}.{minor}"


def iceberg_runtime_package() -> str:
    """The Maven coordinates of the Iceberg runtime for the installed pyspark: its Spark line
    and Scala version (`iceberg-spark-runtime-4.0_2.13` for pyspark 4.0, `-3.5_2.12` for 3.5)."""
    return f"org.apache.iceberg:iceberg-spark-runtime-{spark_line()}_{scala_version()}:{ICEBERG_VERSION}"


def jackson_jars() -> list[Path]:
    """pyspark's own jackson-{core,databind,annotations,datatype-jsr310} jars."""
    found = []
    for module in JACKSON_MODULES:
        jars = sorted(pyspark_jars_dir().glob(f"jackson-{module}-2.*.jar"))
        if len(jars) != 1:
            raise RuntimeError(f"expected one jackson-{module} jar in {pyspark_jars_dir()}, found {jars}")
        found.append(jars[0])
    return found


def wheel_runtime_jar() -> Path:
    """The (unrepaired) runtime jar shipped in the `snowpark-connect-deps-iceberg` wheel."""
    name = f"iceberg-spark-runtime-{SPARK_LINE}_{scala_version()}-{ICEBERG_VERSION}.jar"
    spec = importlib.util.find_spec(WHEEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"The Iceberg Spark runtime is not available offline: `pip install {WHEEL_PIN}`, "
            f"or, with Maven access, pass packages={MAVEN_PACKAGE.format(scala=scala_version())!r}."
        )
    for location in spec.submodule_search_locations:
        jar = Path(location) / "jars" / name
        if jar.is_file():
            return jar
    raise RuntimeError(f"{name} is not in the installed {WHEEL} package; install {WHEEL_PIN}")


def cache_dir() -> Path:
    """`$DBLOG_CACHE_DIR`, else `$XDG_CACHE_HOME/dblog`, else `~/.cache/dblog`."""
    if os.environ.get("DBLOG_CACHE_DIR"):
        return Path(os.environ["DBLOG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dblog"


def iceberg_runtime_jar(cache: Path | None = None) -> Path:
    """The Iceberg Spark runtime jar, repaired (see the module docstring), as a local path.

    Built once into `cache` (default `cache_dir()`) in about a second, atomically (temp file and
    rename, so concurrent builders are safe), and reused afterwards.
    """
    source = wheel_runtime_jar()
    target = (cache or cache_dir()) / f"{source.stem}-{REPAIR_REVISION}.jar"
    if target.is_file():
        return target
    with zipfile.ZipFile(source) as jar:
        if _MISSING_CLASS in jar.NameToInfo:
            return source  # a complete jar: nothing to repair
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as original:
            while chunk := original.read(1 << 20):
                out.write(chunk)
        with zipfile.ZipFile(temp, "a") as out:
            for jar in jackson_jars():
                add_relocated(out, jar, JACKSON_RELOCATION)
            if _MISSING_CLASS not in out.NameToInfo:
                raise RuntimeError(f"repairing {source.name} did not produce {_MISSING_CLASS}")
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


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


def iceberg_spark_conf(
    warehouse: str,
    catalog: str = "lake",
    master: str = "local[2]",
    extra_conf: dict[str, str] | None = None,
    packages: str | None = None,
    jars: Sequence[str] = (),
    catalog_spec: CatalogSpec | None = None,
) -> dict[str, str]:
    """The Spark settings `iceberg_spark_session` starts with (see there); never the catalog's
    secrets (`CatalogSpec.secret_conf`)."""
    conf = {
        "spark.sql.extensions": EXTENSIONS,
        **(catalog_spec or CatalogSpec()).conf(catalog, warehouse_location(warehouse)),
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
    # them, e.g. a JDBC catalog's driver. The wheel's repaired jar is a Spark 3.5 one: another
    # Spark line's runtime is resolved by Spark from Maven.
    if not packages and spark_line() != SPARK_LINE:
        packages = iceberg_runtime_package()
    if packages:
        conf["spark.jars.packages"] = packages
        if jars:
            conf["spark.jars"] = ",".join(jars)
    else:
        conf["spark.jars"] = ",".join([str(iceberg_runtime_jar()), *jars])
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
    a cluster of several machines). The runtime jar (`spark.jars`) is shipped to executors by
    the driver itself. With `packages` (Maven coordinates, e.g.
    "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2") Spark downloads the runtime
    itself; otherwise, on Spark 3.5 the repaired offline jar is used (`iceberg_runtime_jar()`), on
    another line the runtime of its Spark line and Scala version (`iceberg_runtime_package()`).

    `jars` (local paths or URLs) join the runtime jar in `spark.jars`: a JDBC catalog's driver.
    They, like every process-wide setting, count only when the call starts the session. The
    catalog's secrets are set on the running session, never passed to the JVM's command line.

    The first call takes several seconds (~5 s with the jar cached, ~1 s more to build it);
    later calls return the running session (getOrCreate), adding their catalog to it (as long as
    the catalog's name was not used before in this session: Spark keeps a catalog once loaded).
    """
    from pyspark.sql import SparkSession

    conf = iceberg_spark_conf(warehouse, catalog, master, extra_conf, packages, jars, catalog_spec)
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
    return session


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
