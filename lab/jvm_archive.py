"""Class-data-sharing archives: a Spark driver's classes, for every Spark JVM the tests start, and
the classes of the tests' Kafka broker and Kafka Connect worker, for theirs.

Why: the test run is CPU-bound on two cores, and a Spark JVM spends most of its start loading and
verifying some 20,000 classes. A dynamic AppCDS archive (JDK 13+: `-XX:ArchiveClassesAtExit` once,
then `-XX:SharedArchiveFile`) maps them pre-parsed instead: a session with an Iceberg MERGE took
25 s of JVM CPU here, 9 s with the archive. Classes change nothing in what the JVM computes.

`java_tool_options()` is the JAVA_TOOL_OPTIONS value the test run sets for itself and its children
(tests/conftest.py): C1 only (see there) and the archive's path. The archive is made once per
machine, keyed by the Java and pyspark installations, by `start_making()` in the background:
JVMs that start before it is in place, or whose class path differs from the driver's (Debezium,
Spark's launcher), run as without it — the JVM checks the class path itself, and the
`-Xlog` settings keep its notice about that quiet.

`ClassArchive(name, java, classpath)` is the same for the JVMs of one other class path (the Kafka
broker's, the Kafka Connect worker's: `lab.apache_kafka`, `lab.kafka_connect`), given on their
command line, where it wins over JAVA_TOOL_OPTIONS' Spark archive. Made by no extra JVM: the
first of them that finds no archive writes it when it exits by itself (it holds a lock meanwhile;
JVMs started before then run without it). A broker start took 2.9 s of JVM CPU here, 1.8 s with
it; a Connect worker's 3.1–4.1 s, 1.8–2.2 s.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dblog" / "cds"
BASE_OPTIONS = "-XX:TieredStopAtLevel=1"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# What the archive is made from: a Spark session with the Iceberg runtime, a table, an INSERT and
# a MERGE (the classes the sink's work loads), stopped so that the JVM exits and writes it.
_WORKLOAD = """
import sys, tempfile
from dblog.sinks.iceberg.session import iceberg_spark_session
spark = iceberg_spark_session(tempfile.mkdtemp(prefix="dblog-cds-"))
spark.sql("CREATE TABLE lake.cds.t (id INT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
spark.sql("INSERT INTO lake.cds.t VALUES (1, 'a'), (2, 'b')")
spark.sql("MERGE INTO lake.cds.t t USING (SELECT 1 AS id, 'c' AS v) s ON t.id = s.id "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
spark.sql("SELECT * FROM lake.cds.t").collect()
jvm = spark.sparkContext._gateway.proc  # spark-submit exec'd the driver: this is its JVM
spark.stop()
jvm.stdin.close()  # the driver exits when its Python's stdin closes, and then writes the archive
sys.exit(jvm.wait())
"""


def archive_path() -> Path | None:
    """Where this machine's archive is (or will be), or None without Java or pyspark."""
    java = shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    key = "\n".join([os.path.realpath(java), pyspark.__version__, BASE_OPTIONS,
                     *sorted(f"{jar.name}:{jar.stat().st_size}" for jar in jars.glob("*.jar"))])
    return CACHE / f"spark-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"


def java_tool_options() -> str:
    archive = archive_path()
    if archive is None:
        return BASE_OPTIONS
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}"


def start_making() -> threading.Thread | None:
    """Make the archive in a background thread if it is missing (once per machine: a lock keeps
    two test runs from both making it). Returns the thread, or None when there is nothing to do."""
    archive = archive_path()
    if archive is None or archive.exists():
        return None
    thread = threading.Thread(target=_make, args=(archive,), name="dblog-cds-archive", daemon=True)
    thread.start()
    return thread


def _make(archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another run is making it
        if archive.exists():
            return
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        env = {**os.environ, "JAVA_TOOL_OPTIONS": f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}"}
        result = subprocess.run([sys.executable, "-c", _WORKLOAD], env=env, capture_output=True, text=True)
        if result.returncode == 0 and partial.exists():
            os.replace(partial, archive)  # whole or absent: a JVM never maps a half-written one
        else:
            partial.unlink(missing_ok=True)
            print(f"dblog tests: no class-data archive for Spark (runs go on without it, slower):\n"
                  f"{result.stderr[-1500:]}", file=sys.stderr)


class ClassArchive:
    """The class-data archive of the JVMs of one class path, kept in CACHE and keyed by the Java
    installation and the class path's jars (the JVM also checks the class path itself)."""

    def __init__(self, name: str, java: str, classpath: str) -> None:
        jars = [Path(entry) for entry in classpath.split(os.pathsep) if entry]
        key = "\n".join([os.path.realpath(java), BASE_OPTIONS,
                         *(f"{jar}:{jar.stat().st_size if jar.exists() else -1}" for jar in jars)])
        self.path = CACHE / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"
        self._lock: IO | None = None  # held while this JVM makes the archive
        self._partial: Path | None = None

    @property
    def making(self) -> bool:
        return self._lock is not None

    def jvm_options(self) -> list[str]:
        """The options of a JVM about to start: map the archive, or (the first JVM without one, the
        lock taken) write it at exit, or nothing (another JVM is making it)."""
        if self.path.exists():
            return [f"-XX:SharedArchiveFile={self.path}", *QUIET.split()]
        if self.making:
            return [f"-XX:ArchiveClassesAtExit={self._partial}", *QUIET.split()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(self.path.with_suffix(".lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return []
        if self.path.exists():  # made while we waited for the lock
            lock.close()
            return self.jvm_options()
        for stale in self.path.parent.glob(f"{self.path.stem}.*.partial"):  # of a JVM that was killed
            stale.unlink(missing_ok=True)
        self._lock, self._partial = lock, self.path.with_suffix(f".{os.getpid()}.partial")
        return self.jvm_options()

    @staticmethod
    def environment() -> dict[str, str]:
        """The JVM's environment: JAVA_TOOL_OPTIONS without the Spark archive (the test run sets it
        for every JVM), which -XX:ArchiveClassesAtExit would take as its base archive."""
        options = [option for option in os.environ.get("JAVA_TOOL_OPTIONS", "").split()
                   if not option.startswith("-XX:SharedArchiveFile=")]
        return {**os.environ, "JAVA_TOOL_OPTIONS": " ".join(options)}

    def exited(self, returncode: int | None) -> None:
        """After the JVM exited: keep the archive it wrote if it exited by itself (a SIGKILLed one
        may have written part of it), and let the next JVM make it otherwise."""
        if not self.making:
            return
        if returncode is not None and returncode != -signal.SIGKILL and self._partial.exists():
            os.replace(self._partial, self.path)  # whole or absent
        else:
            self._partial.unlink(missing_ok=True)
        self._lock.close()  # releases the lock
        self._lock = self._partial = None
