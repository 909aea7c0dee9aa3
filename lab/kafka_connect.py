"""A real Kafka Connect worker, in distributed mode, with Debezium's MySQL connector on its plugin
path: what Debezium users run, and the reference of dblog's drop-in differential tests.

The worker is Apache Kafka's own `connect-runtime` (`ConnectDistributed`), the connector
`io.debezium:debezium-connector-mysql` with its dependencies, both from Maven Central
(`lab.maven`, sets "connect" and "debezium-mysql"). connect-runtime's version is the Kafka
Debezium 3.6.1 was built with (`version.kafka` in its debezium-build-parent pom: 4.3.0); the
broker may be any Kafka (the tests': `lab.apache_kafka`). The worker keeps its configs, offsets
and statuses in topics of that broker, and answers its REST API on a free port:

    with KafkaConnect(kafka.bootstrap) as connect:
        connect.create("shop", {"connector.class": MYSQL_CONNECTOR, ...})  # PUT /connectors/shop/config
        connect.wait_running("shop")
        ...
        connect.stop_connector("shop"); connect.resume_connector("shop")  # a restart from its offsets
        connect.delete("shop")
    connector_offsets(kafka.bootstrap, connect.offsets_topic)  # {"shop": {partition: offset}}

MariaDB: the tests' server is MariaDB, and the connector is the MySQL one (the one dblog is a
drop-in for, whose configuration `dblog convert-debezium` reads). Debezium 3.6's MySQL connector
needs one fix to run on MariaDB 10.11, the query interceptor of `lab.debezium_reference`; its
classes go into the connector's plugin folder as a jar, compiled against the Connector/J jar
the connector brings, and `MARIADB_FIX` (`driver.propertiesTransform`) is the connector setting
that turns it on.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

from lab import maven
from lab.apache_kafka import JVM_OPTIONS, LOG4J2, free_port
from lab.debezium_reference import CONNECTOR as MYSQL_CONNECTOR
from lab.debezium_reference import interceptor_classes, interceptor_setting
from lab.java_process import JavaProcessRig, JavaUnavailable, java
from lab.jvm_archive import ClassArchive

__all__ = ["KafkaConnect", "ConnectUnavailable", "MYSQL_CONNECTOR", "connector_offsets", "mariadb_fix"]

PLUGIN = "debezium-connector-mysql"
# Left out of the plugin folder, as from Debezium's own plugin archive: the worker has them.
WORKER_PROVIDED = ("connect-api-", "kafka-clients-", "slf4j-api-")


class ConnectUnavailable(JavaUnavailable):
    """The worker did not start, or a connector did not reach RUNNING; the message says why."""


def mariadb_fix() -> dict[str, str]:
    """The connector setting that makes Debezium's MySQL connector run on MariaDB 10.11."""
    return interceptor_setting()


def _plugin_folder(root: Path) -> Path:
    """plugin.path/debezium-connector-mysql: the connector's jars (links) and the MariaDB fix's jar."""
    folder = root / PLUGIN
    folder.mkdir(parents=True)
    jars = maven.resolve("debezium-mysql")
    for jar in jars:
        if not jar.name.startswith(WORKER_PROVIDED):
            (folder / jar.name).symlink_to(jar)
    driver = next((jar for jar in jars if jar.name.startswith("mysql-connector-j-")), None)
    if driver is None:
        raise ConnectUnavailable(f"no Connector/J jar among Debezium's MySQL connector's: {[j.name for j in jars]}")
    classes = interceptor_classes(driver=driver)
    with zipfile.ZipFile(folder / "dblog-lab-mariadb-fix.jar", "w") as fix:
        for path in sorted(classes.rglob("*.class")):
            fix.write(path, path.relative_to(classes).as_posix())
    return folder


class KafkaConnect(JavaProcessRig):
    folder_prefix = "dblog-connect-"
    log_name = "worker.log"

    def __init__(self, bootstrap: str, startup_timeout: float = 120.0, stop_timeout: float = 20.0) -> None:
        super().__init__(stop_timeout)
        self.bootstrap = bootstrap
        self.startup_timeout = startup_timeout
        group = f"connect-{uuid.uuid4().hex[:8]}"  # its own topics: several workers may share a broker
        self.group_id = group
        self.config_topic, self.offsets_topic, self.status_topic = (f"{group}-configs", f"{group}-offsets",
                                                                     f"{group}-status")
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_properties(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offsets_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            # the worker's defaults; a connector's JSON may override them (`key.converter`, …)
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.flush.interval.ms": "500",  # 60 s by default: the offsets topic is read back by tests
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "plugin.path": str(self._dir / "plugins"),
            "plugin.discovery": "service_load",  # Debezium's jars carry their ServiceLoader manifests
            "scheduled.rebalance.max.delay.ms": "0",
            "task.shutdown.graceful.timeout.ms": "5000",
        }

    def start(self) -> "KafkaConnect":
        if self.running:
            return self
        started = time.monotonic()
        folder = self.folder()
        if not (folder / "plugins").exists():  # a restart keeps its plugin folder
            (folder / "log4j2.properties").write_text(LOG4J2)
            _plugin_folder(folder / "plugins")
        self.port = free_port()
        config = folder / "worker.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.worker_properties().items()))
        classpath = maven.classpath("connect")
        binary = java(ConnectUnavailable)
        self._archive = ClassArchive("kafka-connect", binary, classpath)  # its runtime's classes (not the plugin's)
        self.launch([binary, *JVM_OPTIONS, *self._archive.jvm_options(),
                     f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
                     "-cp", classpath, "org.apache.kafka.connect.cli.ConnectDistributed", str(config)],
                    ClassArchive.environment())
        self._wait(lambda: MYSQL_CONNECTOR in {p["class"] for p in self._request("GET", "/connector-plugins")},
                   started + self.startup_timeout, "the worker's REST API lists Debezium's MySQL connector")
        self.start_seconds = time.monotonic() - started
        return self

    # --- the REST API -------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(self.url + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def create(self, name: str, config: dict[str, str]) -> None:
        """Create (or reconfigure) connector `name` from its JSON config, as a Debezium user does."""
        try:
            self._request("PUT", f"/connectors/{name}/config", {"name": name, **config})
        except urllib.error.HTTPError as error:
            raise ConnectUnavailable(f"Kafka Connect refused connector {name}: {error.read().decode()}") from None

    def status(self, name: str) -> dict:
        return self._request("GET", f"/connectors/{name}/status")

    def wait_running(self, name: str, timeout: float = 120.0) -> None:
        """Until the connector and its task are RUNNING; ConnectUnavailable with the trace if one FAILED."""
        def running() -> bool:
            try:
                status = self.status(name)
            except urllib.error.HTTPError:
                return False  # not known yet
            states = [status["connector"], *status["tasks"]]
            failed = [state.get("trace", "") for state in states if state["state"] == "FAILED"]
            if failed:
                raise ConnectUnavailable(f"connector {name} FAILED:\n{failed[0][-3000:]}")
            return bool(status["tasks"]) and all(state["state"] == "RUNNING" for state in states)

        self._wait(running, time.monotonic() + timeout, f"connector {name} is RUNNING")

    def stop_connector(self, name: str, timeout: float = 60.0) -> None:
        """PUT /connectors/NAME/stop (KIP-875): its task stops and commits its offsets; the
        connector stays, STOPPED, until `resume_connector`."""
        self._request("PUT", f"/connectors/{name}/stop")
        self._wait(lambda: self.status(name)["connector"]["state"] == "STOPPED" and not self.status(name)["tasks"],
                   time.monotonic() + timeout, f"connector {name} is STOPPED")

    def resume_connector(self, name: str, timeout: float = 120.0) -> None:
        """PUT /connectors/NAME/resume: a stopped connector starts again from its offsets."""
        self._request("PUT", f"/connectors/{name}/resume")
        self.wait_running(name, timeout)

    def delete(self, name: str) -> None:
        """Delete the connector; returns once the worker no longer lists it."""
        self._request("DELETE", f"/connectors/{name}")
        self._wait(lambda: name not in self._request("GET", "/connectors"), time.monotonic() + 60,
                   f"connector {name} is deleted")

    def rest_offsets(self, name: str) -> dict:
        """GET /connectors/NAME/offsets (KIP-875): the worker's own reading of the offsets topic."""
        return self._request("GET", f"/connectors/{name}/offsets")

    def _wait(self, condition, deadline: float, what: str) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise ConnectUnavailable(f"the Kafka Connect worker exited ({self.process.returncode}) "
                                         f"before {what}:\n{self.log_tail()}")
            try:
                if condition():
                    return
            except (OSError, urllib.error.URLError, ValueError) as error:  # not listening yet
                last_error = error
            time.sleep(0.2)
        raise ConnectUnavailable(f"timed out waiting until {what} (last error: {last_error!r}):\n{self.log_tail()}")

    def log_tail(self, characters: int = 4000) -> str:
        """The worker's last ERROR and exception lines, then the end of its log."""
        text = self.log_text()
        errors = [line for line in text.splitlines() if " ERROR " in line or "Exception" in line]
        return ("\n".join(errors[-20:]) + "\n---\n" if errors else "") + text[-characters:]


def connector_offsets(bootstrap: str, offsets_topic: str, timeout: float = 30.0) -> dict[str, list[dict]]:
    """What a Connect worker's offsets topic holds, per connector: `{name: [{"partition": {…},
    "offset": {…}}]}`, the last offset written for each source partition (Debezium's MySQL
    connector has one, `{"server": topic.prefix}`; its offset: `file`, `pos`, `gtids`, `row`,
    `event`, `snapshot`…). A record's key is the JSON `[connector name, partition]`, its value the
    offset (JsonConverter, schemas off, as the worker writes them); a null value (a tombstone)
    removes the partition's offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout
        while not (partitions := consumer.partitions_for_topic(offsets_topic)):
            if time.monotonic() > deadline:
                raise ConnectUnavailable(f"the offsets topic {offsets_topic} does not exist")
            time.sleep(0.1)
        parts = [TopicPartition(offsets_topic, p) for p in sorted(partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        latest: dict[tuple[str, str], dict | None] = {}
        while any(consumer.position(part) < ends[part] for part in parts):
            if time.monotonic() > deadline:
                raise ConnectUnavailable(f"could not read {offsets_topic} to its end within {timeout:.0f}s")
            for batch in consumer.poll(200).values():
                for record in batch:
                    if record.key is None:
                        continue
                    name, partition = json.loads(record.key)
                    value = None if record.value is None else json.loads(record.value)
                    latest[(name, json.dumps(partition, sort_keys=True))] = value
    finally:
        consumer.close()
    offsets: dict[str, list[dict]] = {}
    for (name, partition), offset in latest.items():
        if offset is not None:
            offsets.setdefault(name, []).append({"partition": json.loads(partition), "offset": offset})
    return offsets
