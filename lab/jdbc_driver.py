"""The MariaDB JDBC driver (Connector/J) from Debian, for an Iceberg JDBC catalog on MariaDB.

`mariadb_jdbc_jar()` is the jar's path, installing the Debian package `libmariadb-java` first
when it is missing and this runs as root (as `dblog.demo.localstack` does for mariadb-server).
Connector/J 2.7 takes `jdbc:mariadb://` and `jdbc:mysql://` URLs. Users put the jar in
`[spark] jars` (see docs/iceberg.md, "Catalogs").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DEBIAN_PACKAGE = "libmariadb-java"
JAR = Path("/usr/share/java/mariadb-java-client.jar")


class DriverUnavailable(RuntimeError):
    """The driver jar is not installed and cannot be installed here."""


def mariadb_jdbc_jar(jar: Path = JAR) -> Path:
    if jar.is_file():
        return jar
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"dblog: {jar} not found; installing the Debian package {DEBIAN_PACKAGE}", file=sys.stderr, flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", DEBIAN_PACKAGE]
        if subprocess.run(install, env=env).returncode != 0:  # an old package list: update it once
            subprocess.run(["apt-get", "update"], check=True, env=env)
            subprocess.run(install, check=True, env=env)
        if jar.is_file():
            return jar
    raise DriverUnavailable(f"the MariaDB JDBC driver ({jar}) is not installed: "
                            f"sudo apt-get install -y {DEBIAN_PACKAGE}")
