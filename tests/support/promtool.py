"""Prometheus' `promtool`, to check and unit-test the example alerting rules (tests/ops/test_dashboards.py).

`promtool()` is the binary's path: `promtool` on PATH if there is one, else the one from Debian's
`prometheus` package, fetched once with `apt-get download` and unpacked with `dpkg-deb -x` into
dblog's cache directory. The package is not installed: its maintainer scripts would start a
Prometheus server as a service. None when neither works (no apt-get, no network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

DEBIAN_PACKAGE = "prometheus"


def promtool() -> Path | None:
    found = shutil.which("promtool")
    if found:
        return Path(found)
    from dblog.sinks.iceberg.session import cache_dir

    target = cache_dir() / "prometheus"
    binary = target / "usr" / "bin" / "promtool"
    if binary.is_file():
        return binary
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with tempfile.TemporaryDirectory(dir=target.parent) as download:
        fetch = ["apt-get", "download", "-o", "APT::Sandbox::User=root", DEBIAN_PACKAGE]
        if subprocess.run(fetch, cwd=download, env=env, capture_output=True).returncode != 0:
            # an old or missing package list: update it once (as root)
            if subprocess.run(["apt-get", "update"], env=env, capture_output=True).returncode != 0:
                return None
            if subprocess.run(fetch, cwd=download, env=env, capture_output=True).returncode != 0:
                return None
        (package,) = Path(download).glob(f"{DEBIAN_PACKAGE}_*.deb")
        unpacked = Path(download) / "root"
        subprocess.run(["dpkg-deb", "-x", str(package), str(unpacked)], check=True)
        try:
            os.rename(unpacked, target)  # atomic: a concurrent fetcher finds a whole tree or none
        except OSError:
            if not binary.is_file():
                raise
    return binary if binary.is_file() else None
