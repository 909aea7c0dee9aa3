"""A private Apache Kafka broker (KRaft, one node that is broker and controller) for the tests.

The jars are Apache Kafka's own from Maven Central (`lab.maven`, set "kafka"); the broker runs in
a JVM of its own, with its log directories in a temporary folder that `stop()` removes. It is
ready once it answers a Kafka metadata request with its own cluster id.

`with ApacheKafka() as kafka:` … `kafka.bootstrap` is "127.0.0.1:<port>" (PLAINTEXT).
`extra_properties` are added to server.properties (listeners of other protocols, ACLs, …).
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from dblog.demo.localstack import _die_with_parent
from dblog.demo.localstack import _free_port as free_port
from lab import maven

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


class KafkaUnavailable(RuntimeError):
    pass


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        raise KafkaUnavailable("Apache Kafka needs Java 17 or newer: install a JDK or set JAVA_HOME")
    return found


class ApacheKafka:
    def __init__(self, startup_timeout: float = 60.0, stop_timeout: float = 10.0,
                 extra_properties: dict[str, str] | None = None) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_properties = dict(extra_properties or {})
        self.port = 0
        self.controller_port = 0
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.process: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise KafkaUnavailable("the broker is not started: call start() or use `with ApacheKafka() as kafka`")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

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
            "auto.create.topics.enable": "true",
            **self.extra_properties,
        }

    def java_command(self, main_class: str, *arguments: str) -> list[str]:
        """`java … main_class arguments` with Kafka's jars and this broker's log4j2 settings."""
        return [java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self._dir / 'log4j2.properties'}",
                "-cp", maven.classpath("kafka"), main_class, *arguments]

    def start(self) -> "ApacheKafka":
        if self.running:
            return self
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="dblog-kafka-"))
            (self._dir / "log4j2.properties").write_text(LOG4J2)
        deadline = time.monotonic() + self.startup_timeout
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        config = self._dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        if not (self._dir / "data" / "meta.properties").exists():
            self._format()
        self._log = open(self._dir / "broker.log", "ab")
        self.process = subprocess.Popen(
            self.java_command("kafka.Kafka", str(config)), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        atexit.register(self.close)
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

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after `stop_timeout`. The data stays: `start()`
        again is a broker restart that keeps its topics. Idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL: the broker dies as in a crash (its data stays for `start()`)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stop()

    def close(self) -> None:
        """Stop and remove the broker's folder."""
        self.stop()
        atexit.unregister(self.close)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> "ApacheKafka":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def log_tail(self, characters: int = 3000) -> str:
        path = self._dir / "broker.log" if self._dir else None
        if path is None or not path.exists():
            return ""
        return path.read_text(errors="replace")[-characters:]
