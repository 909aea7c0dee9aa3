"""A private, throw-away MariaDB server for tests and for `dblog demo`.

dblog has to be proven against a real server (no mock stands in for a database),
and the binlog settings it depends on (ROW format, FULL row image, FULL row metadata, GTID
strict mode) are exactly the ones a stock server does not have. So every test session starts its
own server, in its own directory, on its own port, with `--no-defaults` so that nothing in
/etc/mysql can change its behaviour, and kills it again when it is done, even when the test run
dies (atexit, plus a parent-death signal on Linux).

Typical use:

    with LocalMariaDB() as db:
        db.execute("CREATE DATABASE shop")
        conn = db.connect("shop")
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import pymysql

__all__ = ["LocalMariaDB", "MariaDBUnavailable"]

# Debian puts the server binaries in /usr/sbin, which is not on a normal user's PATH.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")
_DEBIAN_PACKAGE = "mariadb-server"


class MariaDBUnavailable(RuntimeError):
    """The MariaDB server could not be installed, initialised or started."""


def _which(program: str) -> str | None:
    path = os.environ.get("PATH", "")
    return shutil.which(program, path=os.pathsep.join([path, *_EXTRA_BIN_DIRS]))


def _ensure_installed() -> tuple[str, str]:
    """Paths of (mariadb-install-db, mariadbd); installs the Debian package when run as root."""
    install_db, server = _which("mariadb-install-db"), _which("mariadbd")
    if install_db and server:
        return install_db, server
    if hasattr(os, "geteuid") and os.geteuid() == 0 and _which("apt-get"):
        print(
            f"dblog: mariadbd not found; installing the Debian package {_DEBIAN_PACKAGE} "
            "(apt-get update && apt-get install -y mariadb-server)",
            file=sys.stderr,
            flush=True,
        )
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", _DEBIAN_PACKAGE]):
            subprocess.run(command, check=True, env=env)
        install_db, server = _which("mariadb-install-db"), _which("mariadbd")
        if install_db and server:
            return install_db, server
    raise MariaDBUnavailable(
        "MariaDB is not installed (no mariadbd / mariadb-install-db found). Install the Debian "
        f"package '{_DEBIAN_PACKAGE}': sudo apt-get update && sudo apt-get install -y {_DEBIAN_PACKAGE}"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM the server if this process dies.

    This is what saves us when the test process is SIGKILLed and atexit never runs. Linux
    sends it when the *thread* that started the server ends: start it from the main thread or
    another long-lived one.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


_TEMP_PREFIX = "dblog-mariadb-"
_OWNER_FILE = "owner.pid"  # the pid of the Python process that made a temporary datadir


def _alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return False
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _remove_abandoned_datadirs() -> None:
    """Delete temporary datadirs (~110 MB each) left by test runs that were SIGKILLed: their
    owner and their server are both gone. Directories without an owner file are left alone."""
    for candidate in Path(tempfile.gettempdir()).glob(_TEMP_PREFIX + "*"):
        owner = candidate / _OWNER_FILE
        if owner.is_file() and not _alive(owner) and not _alive(candidate / "p.pid"):
            shutil.rmtree(candidate, ignore_errors=True)


def _owned_temporary_directory() -> Path:
    """A new directory under the system's temp dir holding this process's pid as its owner: it
    is removed by `stop`, or by a later run's `_remove_abandoned_datadirs` once the owner is gone."""
    directory = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX))
    # written whole then renamed: another run's cleanup must never read it empty
    # (an empty owner file reads as a dead owner, and the directory would be deleted)
    (directory / (_OWNER_FILE + ".tmp")).write_text(str(os.getpid()))
    (directory / (_OWNER_FILE + ".tmp")).rename(directory / _OWNER_FILE)
    return directory


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no error log)"


class LocalMariaDB:
    """Start a private MariaDB with the binlog settings dblog needs (`_launch`) on a free
    127.0.0.1 port.

    `datadir`: where the server keeps its files. None means a fresh temporary directory that
    `stop()` deletes; a given directory is kept, and initialised only if it holds no database yet.
    `extra_args`: more `mariadbd` options, e.g. ("--general-log=ON", "--general-log-file=/tmp/g").
    """

    user = "root"
    password = ""
    host = "127.0.0.1"

    def __init__(
        self,
        datadir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        autostart: bool = True,
        ssl_ca: str | os.PathLike[str] | None = None,
        ssl_cert: str | os.PathLike[str] | None = None,
        ssl_key: str | os.PathLike[str] | None = None,
        require_secure_transport: bool = False,
        performance_schema: bool = False,
    ) -> None:
        self._requested_datadir = Path(datadir) if datadir is not None else None
        self._requested_port = port
        # TLS (PEM files; MariaDB offers TLS only with a certificate and key), TCP clients refused
        # without it, and performance_schema (e.g. each thread's Ssl_cipher in status_by_thread).
        options = [f"--{name}={value}" for name, value in
                   (("ssl-ca", ssl_ca), ("ssl-cert", ssl_cert), ("ssl-key", ssl_key)) if value is not None]
        if require_secure_transport:
            options.append("--require-secure-transport=ON")
        if performance_schema:
            options.append("--performance-schema=ON")
        self.extra_args = (*options, *extra_args)
        self.startup_timeout = startup_timeout
        self.datadir: Path | None = None
        self.tmpdir: Path | None = None  # the server's --tmpdir, a directory of its own
        self.port: int = 0
        self._owns_datadir = False
        self._process: subprocess.Popen | None = None
        self._admin: pymysql.Connection | None = None
        if autostart:
            self.start()

    # --- life cycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def error_log(self) -> Path:
        assert self.datadir is not None
        return self.datadir / "error.log"

    def start(self) -> "LocalMariaDB":
        if self.running:
            return self
        install_db, server = _ensure_installed()
        _remove_abandoned_datadirs()
        if self._requested_datadir is None:
            self.datadir = _owned_temporary_directory()
            self._owns_datadir = True
        else:
            self.datadir = self._requested_datadir.resolve()
            self.datadir.mkdir(parents=True, exist_ok=True)
        # The server's own temporary files (not /tmp, shared with every other server and process
        # of the machine: a bootstrap once failed deleting its temp table there). Not inside the
        # datadir, where a directory is a database.
        self.tmpdir = _owned_temporary_directory()
        atexit.register(self.stop)
        try:
            if not (self.datadir / "mysql").is_dir():
                self._install(install_db)
            # A port picked free can be taken before the server binds it: try a few.
            attempts = 1 if self._requested_port else 3
            for attempt in range(attempts):
                self.port = self._requested_port or _free_port()
                try:
                    self._launch(server)
                    return self
                except MariaDBUnavailable:
                    port_taken = "Address already in use" in _tail(self.error_log)
                    self._terminate()
                    if not port_taken or attempt == attempts - 1:
                        raise
        except BaseException:
            self.stop()
            raise
        return self

    def _install(self, install_db: str) -> None:
        command = [
            install_db,
            "--no-defaults",
            "--user=root",
            f"--datadir={self.datadir}",
            f"--tmpdir={self.tmpdir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.datadir)
        if done.returncode != 0:
            raise MariaDBUnavailable(
                f"mariadb-install-db failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )

    def _launch(self, server: str) -> None:
        d = self.datadir
        command = [
            server,
            "--no-defaults",
            "--user=root",
            f"--datadir={d}",
            f"--tmpdir={self.tmpdir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={d}/s.sock",
            f"--pid-file={d}/p.pid",
            f"--log-bin={d}/binlog",
            "--server-id=1",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--gtid-strict-mode=ON",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--character-set-server=utf8mb4",
            *self.extra_args,
        ]
        # The server logs errors to stderr when --log-error is not given: keep them in a file.
        with open(self.error_log, "ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=d,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not the server's
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise MariaDBUnavailable(
                    f"mariadbd exited with code {code} while starting; error log tail:\n{_tail(self.error_log)}"
                )
            try:
                pymysql.connect(
                    host=self.host, port=self.port, user=self.user, password=self.password, connect_timeout=1
                ).close()
                return
            except pymysql.MySQLError as error:
                last_error = error
                time.sleep(0.05)
        raise MariaDBUnavailable(
            f"mariadbd did not accept connections on {self.host}:{self.port} within "
            f"{self.startup_timeout:.0f}s (last error: {last_error}); error log tail:\n{_tail(self.error_log)}"
        )

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()  # SIGTERM: a clean shutdown
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    def _close_admin(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:
                pass
            self._admin = None

    def restart(self, down_seconds: float = 0.0, crash: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL with `crash`) and start it again on the same port
        and data directory after `down_seconds`: for tests of a lost database."""
        self._close_admin()
        if crash and self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=5)
        self._terminate()
        time.sleep(down_seconds)
        self._launch(_ensure_installed()[1])

    def stop(self) -> None:
        """Stop the server and delete its directory if it was a temporary one. Idempotent."""
        self._close_admin()
        self._terminate()
        if self._owns_datadir and self.datadir is not None:
            shutil.rmtree(self.datadir, ignore_errors=True)
            self._owns_datadir = False
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> "LocalMariaDB":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalMariaDB {self.host}:{self.port} {state} datadir={self.datadir}>"

    # --- using it ---------------------------------------------------------------------------

    @property
    def connection_settings(self) -> dict[str, Any]:
        """Keyword arguments for pymysql.connect / BinLogStreamReader."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}

    def connect(self, database: str | None = None, **kw: Any) -> pymysql.Connection:
        """A new autocommit utf8mb4 connection (as root unless `user`/`password` are given)."""
        options: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": database,
            "autocommit": True,
            "charset": "utf8mb4",
        }
        options.update(kw)
        return pymysql.connect(**options)

    def execute(self, sql: str, params: Any = None) -> tuple:
        """Run one statement as root on a kept connection; returns the fetched rows."""
        if self._admin is not None:
            try:
                self._admin.ping(False)
            except pymysql.MySQLError:
                self._admin.close()
                self._admin = None
        if self._admin is None:
            self._admin = self.connect()
        with self._admin.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def create_user(self, name: str, password: str, grants: Sequence[str]) -> None:
        """CREATE USER name@'%' and name@'localhost' with `grants`, e.g.
        ["SELECT ON shop.*", "REPLICATION SLAVE, REPLICATION CLIENT ON *.*"].

        Both hosts, so an anonymous ''@localhost account could never shadow the new user.
        """
        for host in ("%", "localhost"):
            self.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (name, host, password))
            for grant in grants:
                self.execute(f"GRANT {grant} TO %s@%s", (name, host))
