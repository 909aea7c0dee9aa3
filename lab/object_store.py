"""S3-compatible object storage for tests: a private S3 server.

`LocalS3`: moto's S3 server (PyPI `moto[server]`, in the `test` extra) on a free 127.0.0.1
port, objects in memory; any access key is accepted. Spark reaches it through Hadoop's S3A
connector, `hadoop-aws` of pyspark's Hadoop from Maven Central
(`dblog.sinks.iceberg.session.s3a_package()`, with its AWS SDK bundle as its dependency).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request


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
