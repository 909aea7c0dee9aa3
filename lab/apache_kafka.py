"""A private Apache Kafka broker (KRaft, one node that is broker and controller) for the tests.

The jars are Apache Kafka's own from Maven Central (`lab.maven`, set "kafka"); the broker runs in
a JVM of its own (`lab.java_process`), with its log directories in a temporary folder that
`close()` removes (`stop()` keeps it: a restart keeps the topics). It is ready once it answers a
Kafka metadata request with its own cluster id.

`with ApacheKafka() as kafka:` … `kafka.bootstrap` is "127.0.0.1:<port>" (PLAINTEXT).
`extra_properties` are added to server.properties (listeners of other protocols, ACLs, …).
"""

from __future__ import annotations

import base64
import socket
import time
import uuid

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from dblog.demo.localstack import _free_port as free_port
from lab import maven
from lab.java_process import JavaProcessRig, JavaUnavailable, java
from lab.jvm_archive import ClassArchive

JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
               "-Djava.awt.headless=true")
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
"""


class KafkaUnavailable(JavaUnavailable):
    pass


class ApacheKafka(JavaProcessRig):
    folder_prefix = "dblog-kafka-"
    log_name = "broker.log"

    def __init__(self, startup_timeout: float = 60.0, stop_timeout: float = 10.0,
                 extra_properties: dict[str, str] | None = None) -> None:
        super().__init__(stop_timeout)
        self.startup_timeout = startup_timeout
        self.extra_properties = dict(extra_properties or {})
        self.port = 0
        self.controller_port = 0
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise KafkaUnavailable("the broker is not started: call start() or use `with ApacheKafka() as kafka`")
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._dir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",  # 50 by default: each is a log to create at first use
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # no no-op record in the metadata log every 500 ms: half the CPU of a broker at rest
            # (0.59 -> 0.33 s in 30 s here), which it is most of a test run
            "metadata.max.idle.interval.ms": "0",
            "auto.create.topics.enable": "true",
            **self.extra_properties,
        }

    def java_command(self, main_class: str, *arguments: str) -> list[str]:
        """`java … main_class arguments` with Kafka's jars, their class-data archive and this broker's
        log4j2 settings."""
        classpath = maven.classpath("kafka")
        binary = java(KafkaUnavailable)
        self._archive = self._archive or ClassArchive("kafka", binary, classpath)
        return [binary, *JVM_OPTIONS, *self._archive.jvm_options(),
                f"-Dlog4j2.configurationFile={self._dir / 'log4j2.properties'}", "-cp", classpath, main_class,
                *arguments]

    def start(self) -> "ApacheKafka":
        if self.running:
            return self
        log4j2 = self.folder() / "log4j2.properties"
        if not log4j2.exists():
            log4j2.write_text(LOG4J2)
        deadline = time.monotonic() + self.startup_timeout
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        config = self._dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        if not (self._dir / "data" / "meta.properties").exists():
            self._format()
        self.launch(self.java_command("kafka.Kafka", str(config)), ClassArchive.environment())
        self._wait_until_ready(deadline)
        return self

    def _format(self) -> None:
        """What `kafka-storage format` writes, without its JVM (seconds on a loaded machine): the
        log directory's meta.properties. With no bootstrap.checkpoint beside it, the controller
        starts the cluster at the newest metadata version, which is what the formatter picks."""
        data = self._dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        (data / "meta.properties").write_text(f"version=1\ndirectory.id={directory_id}\nnode.id=1\n"
                                              f"cluster.id={self.cluster_id}\n")

    def admin_options(self) -> dict:
        """kafka-python options of the broker's own clients (PLAINTEXT here)."""
        return {}

    def _wait_until_ready(self, deadline: float) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise KafkaUnavailable(f"Apache Kafka exited with code {self.process.returncode} while starting:\n"
                                       f"{self.log_tail()}")
            if not self._accepts_connections():  # no client yet: kafka-python backs off up to seconds
                time.sleep(0.05)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=2000,
                                         bootstrap_timeout_ms=2000, **self.admin_options())
                try:
                    cluster_id = admin.describe_cluster().get("cluster_id")
                finally:
                    admin.close()
                if cluster_id != self.cluster_id:
                    raise KafkaUnavailable(f"port {self.port} is served by another Kafka broker ({cluster_id!r})")
                return
            except (OSError, KafkaError) as error:
                last_error = error
                time.sleep(0.1)
        raise KafkaUnavailable(f"Apache Kafka did not answer on {self.bootstrap} within {self.startup_timeout:.0f}s "
                               f"(last error: {last_error!r}):\n{self.log_tail()}")

    def _accepts_connections(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False
