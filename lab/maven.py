"""Jars from Maven Central, by coordinates, for the test rigs (Apache Kafka, Kafka Connect with
Debezium, the Iceberg REST catalog server).

`resolve("kafka", ["org.apache.kafka:kafka_2.13:4.1.1", …])` (group:artifact:version[:classifier]) returns the jars of those artifacts
and of their runtime dependencies, the way a Maven user gets them: Maven (`mvn`, on the machines
this project runs on) resolves them from Maven Central into ~/.m2 and copies them into a cache
folder named after the coordinates. The second call, in any process, only lists that folder.

Offline: `DBLOG_LAB_JARS=/some/dir` makes every `resolve` read `/some/dir/<name>/*.jar` instead
(fill it once with `python -m lab.maven DIR`, which resolves every set the rigs use).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dblog" / "jars"
OFFLINE_ENV = "DBLOG_LAB_JARS"
DONE = ".resolved"  # written last: a folder without it is a resolution that was cut short

# Every jar set the rigs use, by name (`python -m lab.maven DIR` fills an offline folder with them).
KAFKA_VERSION = "4.1.1"
CONNECT_VERSION = "4.3.0"
DEBEZIUM_VERSION = "3.6.1.Final"
# Iceberg's REST server: 1.10.1, the newest 1.10 whose iceberg-core, -api and -aws-bundle Maven Central serves
# here (404 for their 1.10.2; the Spark runtime, 1.10.2, talks to the server over the REST protocol)
ICEBERG_REST_VERSION = "1.10.1"
SETS: dict[str, tuple[str, ...]] = {
    # the broker (kafka.Kafka), its storage formatter and admin tools; log4j2 as its logger
    "kafka": (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
              "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3"),
    # a Kafka Connect worker (ConnectDistributed), of the Kafka Debezium 3.6.1 is built with
    # (`version.kafka` in io.debezium:debezium-build-parent:3.6.1.Final's pom); slf4j 2 for log4j2
    "connect": (f"org.apache.kafka:connect-runtime:{CONNECT_VERSION}", f"org.apache.kafka:connect-json:{CONNECT_VERSION}",
                "org.slf4j:slf4j-api:2.0.17", "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3"),
    # the plugin of that worker: Debezium's MySQL connector and its dependencies
    "debezium-mysql": (f"io.debezium:debezium-connector-mysql:{DEBEZIUM_VERSION}",),
    # Iceberg's own REST catalog server (RESTCatalogServer and its servlet, from the test jars Iceberg's
    # REST tests run), its tables' S3FileIO (iceberg-aws + the AWS SDK bundle), Jetty 11 (Jakarta servlets),
    # Hadoop's client (the catalog's Configuration), SQLite and MariaDB for its JDBC catalog
    "rest-catalog": (f"org.apache.iceberg:iceberg-open-api:{ICEBERG_REST_VERSION}:test-fixtures",
                     f"org.apache.iceberg:iceberg-core:{ICEBERG_REST_VERSION}:tests",
                     f"org.apache.iceberg:iceberg-core:{ICEBERG_REST_VERSION}", f"org.apache.iceberg:iceberg-aws:{ICEBERG_REST_VERSION}",
                     f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_REST_VERSION}",
                     "org.eclipse.jetty:jetty-servlet:11.0.25",
                     "org.apache.hadoop:hadoop-client-api:3.4.1", "org.apache.hadoop:hadoop-client-runtime:3.4.1",
                     "org.xerial:sqlite-jdbc:3.50.3.0", "org.mariadb.jdbc:mariadb-java-client:3.5.6",
                     "org.slf4j:slf4j-simple:2.0.17"),
}


class JarsUnavailable(RuntimeError):
    pass


def resolve(name: str, coordinates: Sequence[str] | None = None) -> list[Path]:
    """The jars of `coordinates` (default: `SETS[name]`) with their runtime dependencies."""
    coordinates = tuple(coordinates or SETS[name])
    offline = os.environ.get(OFFLINE_ENV)
    if offline:
        folder = Path(offline) / name
        jars = sorted(folder.glob("*.jar"))
        if not jars:
            raise JarsUnavailable(f"{OFFLINE_ENV}={offline} holds no jars in {folder}: fill it with "
                                  f"`python -m lab.maven {offline}` on a machine that reaches Maven Central")
        return jars
    digest = hashlib.sha256("\n".join(coordinates).encode()).hexdigest()[:12]
    folder = CACHE / f"{name}-{digest}"
    if not (folder / DONE).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f"{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two test workers resolve one set once
            if not (folder / DONE).exists():
                _copy_dependencies(coordinates, folder)
    return sorted(folder.glob("*.jar"))


def classpath(name: str, coordinates: Sequence[str] | None = None) -> str:
    return os.pathsep.join(map(str, resolve(name, coordinates)))


def _copy_dependencies(coordinates: Sequence[str], folder: Path) -> None:
    if shutil.which("mvn") is None:
        raise JarsUnavailable("Maven (`mvn`) is needed to fetch the test rigs' jars from Maven Central: "
                              "apt-get install maven, or point DBLOG_LAB_JARS at a folder of them")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "pom.xml").write_text(_pom(coordinates))
    result = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(folder / "pom.xml"), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={folder}"],
        capture_output=True, text=True)
    if result.returncode != 0:
        raise JarsUnavailable(f"mvn could not resolve {', '.join(coordinates)} from Maven Central:\n"
                              f"{(result.stdout + result.stderr)[-3000:]}")
    (folder / DONE).write_text("\n".join(coordinates) + "\n")


def _pom(coordinates: Sequence[str]) -> str:
    dependencies = []
    for coordinate in coordinates:
        group, artifact, version, *classifier = coordinate.split(":")  # group:artifact:version[:classifier]
        dependencies.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>" + "".join(f"<classifier>{c}</classifier>" for c in classifier)
            + "</dependency>")
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>dblog.lab</groupId><artifactId>jars</artifactId><version>1</version>"
            "<packaging>pom</packaging><dependencies>" + "".join(dependencies) + "</dependencies></project>\n")


if __name__ == "__main__":  # python -m lab.maven DIR: an offline folder of every set
    target = Path(sys.argv[1])
    for set_name in SETS:
        (target / set_name).mkdir(parents=True, exist_ok=True)
        for jar in resolve(set_name):
            shutil.copy2(jar, target / set_name / jar.name)
        print(f"{set_name}: {len(list((target / set_name).glob('*.jar')))} jars in {target / set_name}")
