"""What the numbers were measured on: cores, CPU model, memory, load at the start, versions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("dblog", "pymysql", "mysql-replication", "pyspark")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def _java_version() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else None


def machine_info(server_version: str | None, with_java: bool) -> dict[str, Any]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "mariadb": server_version}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    if with_java:
        versions["java"] = _java_version()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "platform": platform.platform(),
        "versions": versions,
    }
