"""The life cycle every JVM rig of `lab` shares (the Kafka broker, the Connect worker, the REST
catalog server): a private folder, the JVM's output in a log file there, a stop that asks
(SIGTERM) and then forces (SIGKILL), and a `close` that removes the folder.

A rig never outlives the test run: `close` is registered with `atexit` at each start (and
unregistered by `close`), and on Linux the JVM is killed when the Python process that started it
dies. A subclass prepares its folder and command in `start()` and hands them to `launch`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from dblog.demo.localstack import _die_with_parent
from lab.jvm_archive import ClassArchive


class JavaUnavailable(RuntimeError):
    """No Java to run a rig with; each rig's own error (it did not start) derives from it."""


def java(unavailable: type[JavaUnavailable] = JavaUnavailable) -> str:
    """The `java` of JAVA_HOME, else of the PATH; none raises `unavailable` (the rig's own error)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        raise unavailable("Apache Kafka, Kafka Connect and the REST catalog need Java 17 or newer: install a JDK "
                          "or set JAVA_HOME")
    return found


class JavaProcessRig:
    """One JVM of a test rig. `folder_prefix` names its temporary folder, `log_name` its log file
    there; `stop_timeout`: how long a SIGTERM has before the SIGKILL."""

    folder_prefix = "dblog-java-"
    log_name = "java.log"

    def __init__(self, stop_timeout: float) -> None:
        self.stop_timeout = stop_timeout
        self.process: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._log = None
        self._archive: ClassArchive | None = None  # the class-data archive the JVM uses, if any

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def folder(self) -> Path:
        """The rig's private folder: made at first use, kept across `stop()` and `start()` (a
        restart keeps its data), removed by `close()`."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=self.folder_prefix))
        return self._dir

    def start(self) -> JavaProcessRig:
        raise NotImplementedError

    def launch(self, command: Sequence[str], environment: Mapping[str, str]) -> None:
        """Start the JVM: its output appended to the log file, in a session of its own."""
        self._log = open(self.folder() / self.log_name, "ab")
        self.process = subprocess.Popen(
            list(command), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=dict(environment), start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        atexit.register(self.close)

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after `stop_timeout`. The folder stays.
        Idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            making_archive = self._archive is not None and self._archive.making
            try:  # a JVM that writes the class-data archive at exit takes seconds more
                process.wait(max(self.stop_timeout, 60) if making_archive else self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and self._archive is not None:
            self._archive.exited(process.returncode)
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL: the JVM dies as in a crash (its folder stays for `start()`)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stop()

    def close(self) -> None:
        """Stop and remove the rig's folder."""
        self.stop()
        atexit.unregister(self.close)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def log_text(self) -> str:
        path = self._dir / self.log_name if self._dir else None
        if path is None or not path.exists():
            return ""
        return path.read_text(errors="replace")

    def log_tail(self, characters: int = 3000) -> str:
        return self.log_text()[-characters:]
