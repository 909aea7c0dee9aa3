"""S3-compatible object storage for tests: a private S3 server, and the jars Spark needs for it.

- `LocalS3`: moto's S3 server (PyPI `moto[server]`, in the `test` extra) on a free 127.0.0.1
  port, objects in memory; any access key is accepted.
- `s3a_jars()`: Hadoop's S3A connector for Spark, `hadoop-aws-3.3.1.jar` and its AWS SDK v1
  `aws-java-sdk-bundle-1.11.901.jar`. Neither PyPI wheels nor Debian 12 packages carry them (nor
  Iceberg's `iceberg-aws-bundle` for `S3FileIO`); the one copy on the registries reached here is
  inside the sdist of `sagemaker-pyspark` 1.4.5 (181 MB), fetched once with `pip download
  --no-deps` (the package itself is not installed: it would pin another pyspark) and the two
  jars kept in dblog's cache directory. Hadoop 3.3.1's S3A runs on pyspark 3.5's Hadoop 3.3.4
  client: tables on `s3a://` with the Hadoop and JDBC catalogs, MERGE included, were written
  and read back here through it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

SDIST = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


def s3a_jars(cache: Path | None = None) -> list[Path]:
    """The S3A connector jars (see the module docstring), downloaded once into the cache."""
    from dblog.sinks.iceberg.session import cache_dir

    target = (cache or cache_dir()) / "s3a"
    jars = [target / name for name in JARS]
    if all(jar.is_file() for jar in jars):
        return jars
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", download, SDIST],
                       check=True)
        (sdist,) = Path(download).glob("sagemaker_pyspark-*.tar.gz")
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if name in JARS:
                    source = archive.extractfile(member)
                    assert source is not None
                    temp = target / f".{name}.tmp"
                    temp.write_bytes(source.read())
                    os.replace(temp, target / name)  # atomic: a concurrent builder sees whole jars
    missing = [jar.name for jar in jars if not jar.is_file()]
    if missing:
        raise RuntimeError(f"{SDIST} did not hold {missing}")
    return jars


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalS3:
    """moto's S3 server on 127.0.0.1 for as long as the object lives (`stop()`, or a `with`)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto's S3 server did not start (pip install 'moto[server]')") from None
                time.sleep(0.1)

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The object keys under `prefix` (first 1,000)."""
        import xml.etree.ElementTree as ElementTree

        url = f"{self.endpoint}/{bucket}?list-type=2&prefix={prefix}"
        with urllib.request.urlopen(url, timeout=10) as response:
            tree = ElementTree.fromstring(response.read())
        return [element.text or "" for element in tree.iter() if element.tag.endswith("Key")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalS3:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def spark_conf(self) -> dict[str, str]:
        """Spark settings for S3A on this server (credentials: AWS_ACCESS_KEY_ID and
        AWS_SECRET_ACCESS_KEY in the environment, which S3A's default providers read)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        }
