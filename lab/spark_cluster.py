"""A private Spark standalone cluster (one master, two workers) for tests and benchmarks.

Why: `local[N]` runs every task inside the driver's JVM, so it cannot show what a real cluster
changes: tasks in other JVMs (executors) that fetch the Iceberg runtime jar from the driver,
write data files themselves and report back over the network, Python code (if any) in executor
processes, and a driver that must be reachable from them. This starts the real thing from
pyspark's own launcher, the same classes `start-master.sh` / `start-worker.sh` run:

    <pyspark>/bin/spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 ...
    <pyspark>/bin/spark-class org.apache.spark.deploy.worker.Worker ... spark://127.0.0.1:<port>

Every daemon binds 127.0.0.1 on free ports (RPC and web UI, so parallel runs never collide;
`spark.port.maxRetries = 0` so that a port taken in between makes the daemon exit instead of
silently moving to the next port, and the cluster is started again on new ports). Each worker
offers a bounded number of cores and memory (defaults: 3 virtual cores and 3 GiB, i.e. up to
three 1-core / 1 GiB executors at once: the test session, a `dblog run` child and one being
torn down); the master gives an application that does not say otherwise 2 cores
(`spark.deploy.defaultCores`), one executor on each worker. The cluster is ready once the
master's `/json` UI endpoint lists both workers ALIVE.

Typical use:

    with LocalSparkCluster() as cluster:
        spark = iceberg_spark_session(warehouse, master=cluster.master_url)

Everything lives in one temp directory (conf, logs, scratch space, the workers' work dirs with
the executors' logs and fetched jars), removed on exit (and by the next start, when its starter
was SIGKILLed). Each daemon runs in its own process group, and the executors (and
their Python workers) a worker launches stay in the worker's group: `stop()` sends SIGTERM to
every group, then SIGKILL to whatever is left in them, so no JVM outlives the cluster. It is
stopped by `stop()`, by leaving the `with` block, at interpreter exit (atexit), and, on Linux,
when the starting thread dies without running atexit (PR_SET_PDEATHSIG, as LocalMariaDB does).

`python -m lab.spark_cluster` starts one and prints its master URL until Ctrl-C.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from dblog.demo.localstack import _free_port
from dblog.demo.localstack import _die_with_parent, pid_alive

__all__ = ["LocalSparkCluster", "SparkClusterUnavailable", "java_executable", "spark_home"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"
JAVA_HINT = "install a Java 17 runtime (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
# The daemons' own settings (the master and workers read $SPARK_CONF_DIR/spark-defaults.conf).
DAEMON_DEFAULTS = {
    "spark.port.maxRetries": "0",  # a taken port is an error, not a silent move to the next port
    "spark.master.rest.enabled": "false",  # no REST submission server (it would need a port too)
    "spark.deploy.defaultCores": "2",  # an application that sets no spark.cores.max gets 2 cores
    "spark.worker.ui.retainedExecutors": "1000",  # keep every finished executor in the workers' /json
    "spark.deploy.retainedApplications": "1000",  # and every completed application in the master's
}


TEMP_PREFIX = "dblog-spark-cluster-"
OWNER_FILE = "owner.pid"  # the pid of the Python process that started the cluster


class SparkClusterUnavailable(RuntimeError):
    """The cluster could not be started (no Java, no pyspark, a daemon died, a timeout)."""


def spark_home() -> Path:
    """pyspark's installation directory: it holds bin/spark-class and the jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkClusterUnavailable("pyspark is not installed: pip install -c constraints.txt pyspark")
    home = Path(next(iter(spec.submodule_search_locations)))
    if not (home / "bin" / "spark-class").is_file():
        raise SparkClusterUnavailable(f"{home} holds no bin/spark-class: reinstall pyspark")
    return home


def java_executable(environ: dict[str, str] | None = None) -> str:
    """The java that spark-class will run: $JAVA_HOME/bin/java when JAVA_HOME is set, else
    `java` on PATH (spark-class's own rule). Raises SparkClusterUnavailable naming the fix."""
    environ = os.environ if environ is None else environ
    java_home = environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise SparkClusterUnavailable(
                f"Java not found: JAVA_HOME={java_home} has no executable bin/java; {JAVA_HINT}"
            )
        return str(java)
    java = shutil.which("java", path=environ.get("PATH", ""))
    if java is None:
        raise SparkClusterUnavailable(f"Java not found: no `java` on PATH and JAVA_HOME is not set; {JAVA_HINT}")
    return java


def _remove_abandoned_directories() -> None:
    """Delete the temp dirs of clusters whose starter was SIGKILLed (atexit never ran; its
    daemons got SIGTERM from the kernel, PR_SET_PDEATHSIG): the owner is gone and no process
    still runs from the directory. Directories without an owner file are left alone."""
    for candidate in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*"):
        try:
            owner = int((candidate / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(owner) and not _processes_using(candidate):
            shutil.rmtree(candidate, ignore_errors=True)


def _processes_using(directory: Path) -> bool:
    """Whether a live process has `directory` in its command line (a daemon or executor)."""
    needle = str(directory).encode()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            if entry.name.isdigit() and needle in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Daemon:
    """One master or worker JVM: its ports, log and process (the leader of its own group)."""

    name: str
    port: int
    webui_port: int
    log: Path
    process: subprocess.Popen | None = None
    pgid: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def died_message(self) -> str:
        code = self.process.returncode if self.process is not None else None
        return f"the Spark {self.name} exited with code {code} while starting; its log ({self.log}) ends:\n{_tail(self.log)}"


class LocalSparkCluster:
    """`with LocalSparkCluster() as cluster:` … `cluster.master_url` is "spark://127.0.0.1:<port>".

    `workers`: how many workers (2); `worker_cores` / `worker_memory`: what each offers
    (`--cores`, `--memory`, e.g. "3g"); `startup_timeout`: seconds until every worker must be
    registered; `daemon_memory`: each daemon JVM's heap (SPARK_DAEMON_MEMORY).
    """

    def __init__(
        self,
        workers: int = 2,
        worker_cores: int = 3,
        worker_memory: str = "3g",
        daemon_memory: str = "256m",
        startup_timeout: float = 90.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.directory: Path | None = None
        self.master: Daemon | None = None
        self.worker_daemons: list[Daemon] = []

    # --- life cycle -------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        if self.master is None:
            raise SparkClusterUnavailable("the cluster is not started: call start() or use `with LocalSparkCluster()`")
        return f"spark://{HOST}:{self.master.port}"

    @property
    def master_ui(self) -> str:
        """The master's web UI (its `/json/` is what `status()` reads)."""
        if self.master is None:
            raise SparkClusterUnavailable("the cluster is not started")
        return f"http://{HOST}:{self.master.webui_port}"

    @property
    def running(self) -> bool:
        return self.master is not None and all(d.alive for d in self.daemons())

    def daemons(self) -> list[Daemon]:
        return ([self.master] if self.master else []) + self.worker_daemons

    def start(self) -> Self:
        if self.running:
            return self
        home = spark_home()
        java = java_executable()
        _remove_abandoned_directories()
        self.directory = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (self.directory / OWNER_FILE).write_text(str(os.getpid()))
        atexit.register(self.stop)
        try:
            self._write_conf()
            deadline = time.monotonic() + self.startup_timeout
            for attempt in range(3):  # a free port can be taken before the daemon binds it
                try:
                    self._launch_all(home, java, deadline)
                    return self
                except SparkClusterUnavailable as error:
                    port_taken = "BindException" in str(error) or "Address already in use" in str(error)
                    self._stop_daemons()
                    if not port_taken or attempt == 2 or time.monotonic() >= deadline:
                        raise
        except BaseException:
            self.stop()
            raise
        return self

    def _write_conf(self) -> None:
        assert self.directory is not None
        conf = self.directory / "conf"
        conf.mkdir()
        (conf / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in DAEMON_DEFAULTS.items()))

    def _environment(self, home: Path) -> dict[str, str]:
        assert self.directory is not None
        env = dict(os.environ)
        for inherited in ("SPARK_CONF_DIR", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS", "SPARK_DAEMON_JAVA_OPTS",
                          "SPARK_ENV_LOADED", "SPARK_MASTER_HOST", "SPARK_PUBLIC_DNS"):
            env.pop(inherited, None)
        env.update({
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(self.directory / "conf"),  # nothing from a user's spark-env.sh / defaults
            "SPARK_LOCAL_IP": HOST,  # the web UIs and the executors' block managers bind 127.0.0.1 too
            "SPARK_LOG_DIR": str(self.directory / "logs"),
            # The workers' and executors' scratch space (shuffle files, fetched jars), not /tmp.
            "SPARK_LOCAL_DIRS": str(self.directory / "local"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            # Executors (and any Python worker they start) run this interpreter.
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON") or sys.executable,
        })
        return env

    def _launch_all(self, home: Path, java: str, deadline: float) -> None:
        assert self.directory is not None
        env = self._environment(home)
        spark_class = str(home / "bin" / "spark-class")
        logs = self.directory / "logs"
        logs.mkdir(exist_ok=True)
        master_port, master_ui = _free_port(), _free_port()
        self.master = Daemon("master", master_port, master_ui, logs / f"master-{master_port}.log")
        self._spawn(self.master, [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(master_port),
                                  "--webui-port", str(master_ui)], env)
        # Workers are started once the master's RPC port accepts connections: a worker that
        # finds no master retries only after 5-15 s.
        self._wait(lambda _: _accepts(HOST, master_port), deadline, "the master's RPC port to accept connections",
                   read_status=False)
        self.worker_daemons = []
        for number in range(1, self.workers + 1):
            work_dir = self.directory / f"worker-{number}"
            work_dir.mkdir(exist_ok=True)
            port, ui = _free_port(), _free_port()
            worker = Daemon(f"worker {number}", port, ui, logs / f"worker-{number}-{port}.log", extra={"work_dir": work_dir})
            self.worker_daemons.append(worker)
            self._spawn(worker, [spark_class, WORKER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(ui),
                                 "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                                 "--work-dir", str(work_dir), self.master_url], env)
        self._wait(lambda status: status is not None and len(self.alive_workers(status)) == self.workers, deadline,
                   f"{self.workers} workers to register with the master")

    def _spawn(self, daemon: Daemon, command: list[str], env: dict[str, str]) -> None:
        assert self.directory is not None
        with open(daemon.log, "ab") as log:
            daemon.process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: its executors are killed with it
                # prctl only, before exec; the cluster is started from one thread at a time
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
            )
        daemon.pgid = daemon.process.pid  # spark-class execs java: the pid stays the group's leader

    def _wait(self, ready, deadline: float, awaited: str, read_status: bool = True) -> None:
        status = None
        while True:
            for daemon in self.daemons():
                if not daemon.alive:
                    raise SparkClusterUnavailable(daemon.died_message())
            status = self.status(quiet=True) if read_status else None
            if ready(status):
                return
            if time.monotonic() >= deadline:
                logs = "\n".join(f"--- {d.name} ({d.log}):\n{_tail(d.log, 15)}" for d in self.daemons())
                raise SparkClusterUnavailable(
                    f"waited {self.startup_timeout:.0f} s for {awaited} ({self.master_ui}/json/); "
                    f"last status: {status!r}\n{logs}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop every daemon (and the executors they started) and remove the temp dir. Idempotent."""
        atexit.unregister(self.stop)
        self._stop_daemons()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def _stop_daemons(self) -> None:
        # Workers first (each kills its executors on SIGTERM), then the master.
        daemons = list(reversed(self.daemons()))
        for daemon in daemons:
            _signal_group(daemon.pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for daemon in daemons:
            if daemon.process is not None:
                try:
                    daemon.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        # Whatever is left in the groups (a daemon that ignored SIGTERM, an executor or Python
        # worker whose daemon is gone) is killed; then the group is waited empty.
        for daemon in daemons:
            _signal_group(daemon.pgid, signal.SIGKILL)
            if daemon.process is not None and daemon.process.poll() is None:
                daemon.process.wait(5)
        for daemon in daemons:
            _wait_group_empty(daemon.pgid, 10.0)
        self.master = None
        self.worker_daemons = []

    def process_groups(self) -> list[int]:
        """The process group ids of the daemons (each daemon's executors are in its group)."""
        return [d.pgid for d in self.daemons()]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.master_url if self.master else "-"
        return f"<LocalSparkCluster {where} workers={len(self.worker_daemons)} {state}>"

    # --- what the master and workers say ------------------------------------------------------

    def status(self, quiet: bool = False) -> dict | None:
        """The master's `/json/` document: workers, active and completed applications."""
        if self.master is None:
            raise SparkClusterUnavailable("the cluster is not started")
        return _get_json(f"{self.master_ui}/json/", quiet)

    def worker_status(self, number: int) -> dict | None:
        """Worker `number`'s (1-based) `/json/`: its running and finished executors."""
        worker = self.worker_daemons[number - 1]
        return _get_json(f"http://{HOST}:{worker.webui_port}/json/", quiet=False)

    def alive_workers(self, status: dict | None = None) -> list[dict]:
        """The workers the master lists as ALIVE, each a dict from its `/json/`."""
        status = self.status() if status is None else status
        return [w for w in (status or {}).get("workers", []) if w.get("state") == "ALIVE"]

    def executor_logs(self, app_id: str) -> list[Path]:
        """The stderr files of application `app_id`'s executors, in the workers' work dirs."""
        return sorted(p for d in self.worker_daemons for p in (d.extra["work_dir"] / app_id).glob("*/stderr"))


def _get_json(url: str, quiet: bool) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        if quiet:
            return None
        raise


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _signal_group(pgid: int, signum: int) -> None:
    if pgid:
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`, from /proc (Linux)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _wait_group_empty(pgid: int, timeout: float) -> None:
    if not pgid or not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.05)


def main() -> None:
    """`python -m lab.spark_cluster`: start a cluster, print its URLs, wait for Ctrl-C."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leaves the `with` block: the cluster stops
    with LocalSparkCluster() as cluster:
        print(f"master {cluster.master_url}   web UI {cluster.master_ui}   (Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
