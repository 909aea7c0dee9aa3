"""A private Iceberg REST catalog server for the tests, with OAuth2 client credentials enforced.

The server is Iceberg's own (the `RESTCatalogServer` backend and servlet that Iceberg's REST tests
run; jars from Maven Central, `lab.maven` set "rest-catalog") behind a Jakarta servlet filter of
ours, `lab/RestCatalogWithOAuth2.java`, since Iceberg's test server hands a token to any client
and asks none back: the filter answers `/v1/oauth/tokens` itself (the right client id and secret,
else 401 `invalid_client`) and lets through only requests that carry a token it issued. The Java
file is compiled once into the jar cache (keyed by its contents and the jar set).

Behind the server is Iceberg's JDBC catalog: in a SQLite file by default, or in any database
whose JDBC URL is given (a database of the run's MariaDB: its `iceberg_tables` rows are the
tables' current metadata, so a test can hold a row lock to stall a commit). Its tables are where
`warehouse` says; with `s3_endpoint`, on S3 through Iceberg's `S3FileIO` (credentials from the
AWS_* environment variables given in `environment`).

    with RestCatalog(warehouse="s3://lake/wh", s3_endpoint=s3.endpoint, environment=aws) as rest:
        rest.uri, rest.credential  # http://127.0.0.1:<port>, "<client id>:<secret>"
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from lab import maven
from lab.apache_kafka import free_port
from lab.java_process import JavaProcessRig, JavaUnavailable, java

SOURCE = Path(__file__).with_name("RestCatalogWithOAuth2.java")
MAIN_CLASS = "RestCatalogWithOAuth2"
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
S3_REGION = "us-east-1"


class RestCatalogUnavailable(JavaUnavailable):
    pass


def compiled_classes(jars: list[Path]) -> Path:
    """The folder holding the compiled `RestCatalogWithOAuth2` (javac once per source and jar set)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + "\n".join(jar.name for jar in jars).encode()).hexdigest()[:12]
    folder = maven.CACHE / f"rest-catalog-classes-{digest}"
    if (folder / f"{MAIN_CLASS}.class").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / f"{MAIN_CLASS}.class").exists():
            javac = shutil.which("javac") or os.path.join(os.path.dirname(java(RestCatalogUnavailable)), "javac")
            staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".classes-"))
            result = subprocess.run([javac, "-d", str(staging), "-cp", os.pathsep.join(map(str, jars)), str(SOURCE)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise RestCatalogUnavailable(f"javac {SOURCE.name} failed (a JDK 17 is needed):\n{result.stderr[-3000:]}")
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(staging, folder)
    return folder


class RestCatalog(JavaProcessRig):
    """Iceberg's REST catalog server on a free 127.0.0.1 port, for as long as the object lives
    (`close()`, or a `with`). `catalog_uri`: its backing JDBC catalog (default: a SQLite file in
    its temporary folder); `catalog_name`: that catalog's name (the `catalog_name` column of
    `iceberg_tables`); `properties`: more backend catalog properties (e.g. {"jdbc.user": …})."""

    folder_prefix = "dblog-rest-catalog-"
    log_name = "server.log"

    def __init__(self, warehouse: str, *, catalog_uri: str | None = None, catalog_name: str = "rest_backend",
                 properties: Mapping[str, str] | None = None, s3_endpoint: str | None = None,
                 environment: Mapping[str, str] | None = None, startup_timeout: float = 60.0) -> None:
        super().__init__(stop_timeout=10.0)
        self.warehouse = warehouse
        self.catalog_uri = catalog_uri
        self.catalog_name = catalog_name
        self.properties = dict(properties or {})
        self.s3_endpoint = s3_endpoint
        self.environment = dict(environment or {})
        self.startup_timeout = startup_timeout
        self.client_id = "dblog-" + secrets.token_hex(4)
        self.client_secret = "secret-" + secrets.token_hex(16)
        self.port = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def credential(self) -> str:
        """The OAuth2 client credentials as Iceberg's `credential` property takes them."""
        return f"{self.client_id}:{self.client_secret}"

    def backend_properties(self) -> dict[str, str]:
        properties = {
            "uri": self.catalog_uri or f"jdbc:sqlite:{self.folder() / 'catalog.db'}",
            "warehouse": self.warehouse,
            "catalog.name": self.catalog_name,
            "jdbc.schema-version": "V1",
        }
        if self.s3_endpoint:
            properties.update(self.s3_properties(self.s3_endpoint))
        properties.update(self.properties)
        return properties

    @staticmethod
    def s3_properties(endpoint: str) -> dict[str, str]:
        """The catalog properties of Iceberg's S3FileIO on an S3-compatible server (moto) at
        `endpoint`: the server's, and a client's (credentials: the AWS_* environment variables)."""
        return {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.endpoint": endpoint,
                "s3.path-style-access": "true", "client.region": S3_REGION}

    def start(self) -> RestCatalog:
        if self.running:
            return self
        jars = maven.resolve("rest-catalog")
        classes = compiled_classes(jars)
        self.port = free_port()
        environment = {key: value for key, value in os.environ.items() if not key.startswith("CATALOG_")}
        environment.update(self.environment)
        # RCKUtils' convention: CATALOG_ + the property, "." as "_" and "-" as "__"
        for key, value in self.backend_properties().items():
            environment["CATALOG_" + key.upper().replace("-", "__").replace(".", "_")] = value
        environment.update(CATALOG_REST_PORT=str(self.port), DBLOG_REST_CLIENT_ID=self.client_id,
                           DBLOG_REST_CLIENT_SECRET=self.client_secret, AWS_REGION=S3_REGION)
        classpath = os.pathsep.join([str(classes), *map(str, jars)])
        self.launch([java(RestCatalogUnavailable), *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS], environment)
        self._wait_until_ready(time.monotonic() + self.startup_timeout)
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RestCatalogUnavailable(f"the REST catalog server exited with code {self.process.returncode}:\n"
                                             f"{self.log_tail()}")
            try:
                status, _ = self.request("GET", "/v1/config")
            except OSError:
                time.sleep(0.1)
                continue
            if status == 401:  # up, and it asks for a token
                return
            raise RestCatalogUnavailable(f"GET /v1/config without a token answered {status}, not 401")
        raise RestCatalogUnavailable(f"the REST catalog server did not answer within {self.startup_timeout:.0f}s:\n"
                                     f"{self.log_tail()}")

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """One HTTP request to the server: (status, body), errors included."""
        request = urllib.request.Request(self.uri + path, data=body, method=method, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
