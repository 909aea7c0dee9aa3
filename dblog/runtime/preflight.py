"""`dblog check`: a preflight of a configuration, one result per requirement, each failure with
its remedy, before the first `dblog run`.

Every connection goes the way the engine's own go: the source through an `Engine`'s
connection settings and connect function (so TLS settings apply as they do to the engine), the
sinks through `open_sink`. What the engine would refuse at start is refused here with the same
rule (`dblog.mysql.server_requirements`). Nothing is written: grants are proved by trying
statements that change nothing (a SELECT of no rows, an INSERT or DELETE of no rows in a
transaction that is rolled back, a replica registration without a binlog dump), Kafka topic
creation is asked with `validate_only`.

Results come one by one (`run_checks` is a generator), so a slow check (Spark) does not hold the
lines before it back. A check that cannot run because an earlier one failed is skipped, naming
the one it needs.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import pymysql

from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import OffsetsError
from dblog.core.sql import quote_identifier
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.mysql.binlog_retention import purged_gtids
from dblog.mysql.schema import text_of
from dblog.mysql.server_errors import error_code
from dblog.mysql.server_requirements import (REQUIRED_VARIABLES, SEMI_SYNC_AFTER_SYNC, checked_settings,
                                             setting_problems)
from dblog.runtime.config import Config, ConfigError
from dblog.runtime.engine import Engine
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.secrets import secret_problems
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL
from dblog.sinks.base import NullSink

log = logging.getLogger("dblog.check")

Status = Literal["ok", "fail", "warn", "skip"]

# What dblog writes into the signal table's columns at most: `dblog signal` ids are UUIDs (36),
# watermark ids a hex UUID plus "-close" (38); watermark types "snapshot-window-close" (21).
_ID_LENGTH = {"gtid": 36, "insert_insert": 38, "insert_delete": 38}
_TYPE_LENGTH = {"gtid": len("execute-snapshot"), "insert_insert": 21, "insert_delete": 21}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_ER_NO_SUCH_TABLE = 1146
_KAFKA_UNKNOWN_TOPIC = 3
_KAFKA_TOPIC_EXISTS = 36
_SHOWN = 5  # names listed in a line before "and N more"


@dataclass(frozen=True)
class CheckResult:
    check: str  # what was checked, e.g. "REPLICATION SLAVE" or "binlog_format"
    status: Status
    detail: str  # what was found
    remedy: str | None = None  # what to do (failures and warnings)

    def to_json(self) -> dict:
        return asdict(self)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"


def _reason(error: BaseException) -> str:
    """An error as one line: the server's or client's message (never a password: pymysql's and
    kafka-python's messages hold none)."""
    if isinstance(error, pymysql.err.MySQLError) and len(error.args) >= 2:
        return f"({error.args[0]}) {error.args[1]}"
    text = " ".join(str(error).split())
    name = type(error).__name__
    return text if name in text else f"{name}: {text}" if text else name


class Preflight:
    """The checks of one configuration; `run()` yields their results."""

    def __init__(self, config: Config, *, spark: bool = True, timeout: float = 10.0,
                 on_slow: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.spark = spark
        self.timeout = timeout
        self.on_slow = on_slow or (lambda message: None)
        # The engine's wiring, unstarted: its connection settings and connect function, its
        # server session and schema catalog. Nothing connects before a check asks.
        self.engine = Engine(config, sink=NullSink())
        self.server = self.engine.server
        self.flavor: str | None = None
        self.account: str | None = None  # 'user'@'host' as the server sees it, for GRANT remedies
        self.captured: list[TableId] | None = None
        self.unresolved: dict[str, str] = {}  # secret setting -> why it cannot be resolved

    # --- running ------------------------------------------------------------------------------

    def run(self) -> Iterator[CheckResult]:
        sections = [("secrets", self._secrets), ("source connection", self._source), ("grants", self._grants),
                    ("server settings", self._server_settings), ("binlog position", self._binlog_position),
                    ("signal table", self._signal_table), ("Kafka", self._kafka),
                    ("Spark and Iceberg catalog", self._iceberg), ("paths", self._paths)]
        try:
            for name, section in sections:
                yield from self._guarded(name, section)
        finally:
            self.server.close()

    def _guarded(self, name: str, section: Callable[[], Iterator[CheckResult]]) -> Iterator[CheckResult]:
        """The section's results; an error it did not expect (e.g. the server went away midway)
        becomes a failed line of its own instead of ending the other checks."""
        try:
            yield from section()
        except Exception as error:  # noqa: BLE001 - reported as a failed check
            yield CheckResult(name, "fail", f"the check itself failed: {_reason(error)}",
                              "run it again; if it fails the same way, run with --log-level debug and report it")
            log.debug("check %s failed", name, exc_info=True)

    def _need_source(self, check: str) -> CheckResult | None:
        if self.flavor is None:
            return CheckResult(check, "skip", "needs the source connection")
        return None

    def _unresolved(self, section: str) -> str | None:
        """The unresolvable secret settings of `section` ("source.", "kafka."), for a skip line."""
        names = [where for where in self.unresolved if where.startswith(section)]
        if not names:
            return None
        return f"needs {' and '.join(names)} (see {'its line' if len(names) == 1 else 'their lines'})"

    # --- secrets ------------------------------------------------------------------------------

    def _secrets(self) -> Iterator[CheckResult]:
        """Every secret setting resolved once, as `dblog run` does before it connects: one ✗
        line per setting whose variable, file or key cannot be read (the message names them,
        never a value); the connections that need it are skipped."""
        given, self.unresolved = secret_problems(self.config)
        for where, problem in self.unresolved.items():
            yield CheckResult(where, "fail", problem,
                              f"{where} comes one way: the value, {where}_env (a variable set where dblog runs) or "
                              f"{where}_file (+ {where}_file_key); docs/configuration.md, Secrets")
        if not self.unresolved:
            yield CheckResult("secrets", "ok", f"resolved: {', '.join(given)}" if given else "none set")

    # --- the source ---------------------------------------------------------------------------

    def _source(self) -> Iterator[CheckResult]:
        source = self.config.source
        where = f"{source.user}@{source.host}:{source.port}"
        unresolved = self._unresolved("source.")
        if unresolved:
            yield CheckResult("source connection", "skip", unresolved)
            return
        try:
            self.flavor = self.server.flavor()
            version, account = (text_of(value) for value in self.server.fetch("SELECT VERSION(), CURRENT_USER()")[0])
        except ConfigError as error:  # e.g. a [source.tls] file that cannot be read
            yield CheckResult("source connection", "fail", f"{where}: {error}", "fix the setting it names")
            return
        except pymysql.err.MySQLError as error:
            self.server.drop_connection()
            yield CheckResult("source connection", "fail", f"{where}: {_reason(error)}", _connection_remedy(error))
            return
        user, _, host = account.rpartition("@")
        self.account = f"'{user}'@'{host}'"  # the account the server matched, as GRANT names it
        yield CheckResult("source connection", "ok", f"{where} as {self.account}: {version}")
        yield self._tls()

    def _tls(self) -> CheckResult:
        status = dict((text_of(name).lower(), text_of(value) or "") for name, value in
                      self.server.fetch("SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')"))
        cipher, version = status.get("ssl_cipher", ""), status.get("ssl_version", "")
        if cipher:
            return CheckResult("source TLS", "ok", f"encrypted: {version or 'TLS'}, cipher {cipher}")
        if _is_loopback(self.config.source.host):
            return CheckResult("source TLS", "ok", "not encrypted (a loopback connection: nothing crosses a network)")
        return CheckResult(
            "source TLS", "warn", "not encrypted: the password and every row cross the network in clear",
            "configure TLS to the source (docs/configuration.md, [source]) and require it on the server "
            "(require_secure_transport = ON, or REQUIRE SSL on dblog's user)")

    # --- grants -------------------------------------------------------------------------------

    def _grant(self, privilege: str, on: str) -> str:
        return f"GRANT {privilege} ON {on} TO {self.account or quote_identifier(self.config.source.user)}"

    def _grants(self) -> Iterator[CheckResult]:
        for check in ("REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT"):
            skipped = self._need_source(check)
            if skipped:
                yield skipped
        if self.flavor is None:
            return
        yield self._replication_slave()
        yield self._replication_client()
        yield self._select()
        mode = self.config.snapshot.watermarks
        if mode != "gtid":
            yield self._signal_table_privilege("INSERT", mode)
            if mode == "insert_delete":
                yield self._signal_table_privilege("DELETE", mode)

    def _replication_slave(self) -> CheckResult:
        """Proved by registering as a replica (what the binlog reader does first), without a dump."""
        source = self.config.source
        binlog = BinlogConnection(self.engine._connection_settings(), source.server_id, source.heartbeat_seconds,
                                  self.flavor)
        try:
            with self.engine._connect() as conn:
                binlog.register_on(conn)
        except pymysql.err.MySQLError as error:
            return CheckResult("REPLICATION SLAVE", "fail",
                               f"the server refused to register dblog as a replica: {_reason(error)}",
                               f"{self._grant('REPLICATION SLAVE', '*.*')} (the binlog is read as a replica reads it)")
        return CheckResult("REPLICATION SLAVE", "ok", "registered as a replica (server_id "
                           f"{source.server_id}): the binlog can be read")

    def _replication_client(self) -> CheckResult:
        try:
            self.server.fetch("SHOW BINARY LOGS")
        except pymysql.err.MySQLError as error:
            also = " (BINLOG MONITOR on MariaDB >= 10.5)" if self.flavor == "mariadb" else ""
            return CheckResult("REPLICATION CLIENT", "fail", f"SHOW BINARY LOGS was refused: {_reason(error)}",
                               f"{self._grant('REPLICATION CLIENT', '*.*')}{also}: dblog reads where the binlog ends")
        return CheckResult("REPLICATION CLIENT", "ok", "SHOW BINARY LOGS answered")

    def _select(self) -> CheckResult:
        try:
            self.captured = self.engine.captured_tables()
        except pymysql.err.MySQLError as error:
            return CheckResult("SELECT", "fail", f"cannot list the tables: {_reason(error)}",
                               "grant SELECT on the captured databases")
        if not self.captured:
            return CheckResult(
                "SELECT", "warn",
                "no table this user can see matches source.include / source.exclude: nothing would be snapshotted "
                "(tables created later are still streamed)",
                "check source.include and source.exclude; a table the user has no privilege on is invisible to "
                f"it: {self._grant('SELECT', '`db`.*')}")
        denied: list[str] = []
        first_error = ""
        for table in self.captured:
            name = f"{quote_identifier(table.db)}.{quote_identifier(table.table)}"
            try:
                self.server.fetch(f"SELECT * FROM {name} LIMIT 0")  # every column, as chunk reads select them
            except pymysql.err.MySQLError as error:
                denied.append(str(table))
                first_error = first_error or _reason(error)
        if denied:
            databases = sorted({TableId.parse(name).db for name in denied})
            return CheckResult(
                "SELECT", "fail", f"refused on {len(denied)} of {len(self.captured)} captured tables: {_listed(denied)} "
                                  f"(first: {first_error})",
                "; ".join(self._grant("SELECT", f"{quote_identifier(db)}.*") for db in databases)
                + " (or on each table), or exclude them with source.exclude")
        return CheckResult("SELECT", "ok", f"on all {len(self.captured)} captured tables ({_listed([str(t) for t in self.captured])})")

    def _signal_table_privilege(self, privilege: str, mode: str) -> CheckResult:
        check = f"{privilege} on the signal table"
        table = self.config.signal_table()
        name = f"{quote_identifier(table.db)}.{quote_identifier(table.table)}"
        statement = (f"INSERT INTO {name} (id, type, data) SELECT NULL, NULL, NULL FROM DUAL WHERE 1 = 0"
                     if privilege == "INSERT" else f"DELETE FROM {name} WHERE 1 = 0")

        def attempt(conn: pymysql.Connection) -> None:  # changes no row, and is rolled back
            with conn.cursor() as cursor:
                cursor.execute("START TRANSACTION")
                try:
                    cursor.execute(statement)
                finally:
                    cursor.execute("ROLLBACK")

        try:
            self.server.run(attempt)
        except pymysql.err.MySQLError as error:
            if error_code(error) == _ER_NO_SUCH_TABLE:
                return CheckResult(check, "skip", f"{table} does not exist (see the signal table's line)")
            return CheckResult(check, "fail", f"{privilege} on {table} was refused: {_reason(error)}",
                               f'{self._grant(privilege, name)}: snapshot.watermarks = "{mode}" writes watermark '
                               "rows there")
        return CheckResult(check, "ok", f'{privilege} on {table} (snapshot.watermarks = "{mode}")')

    # --- server settings ----------------------------------------------------------------------

    def _server_settings(self) -> Iterator[CheckResult]:
        if self.flavor is None:
            yield CheckResult("server settings", "skip", "needs the source connection")
            return
        variables = self.server.global_variables(REQUIRED_VARIABLES)
        problems = setting_problems(variables, self.flavor)
        for name in checked_settings(self.flavor):
            value = variables.get(name)
            shown = value if value not in (None, "") else "(not set)"
            problem = problems.get(name)
            if problem is None:
                yield CheckResult(name, "ok", shown)
            else:
                yield CheckResult(name, "fail", shown, problem.partition(": ")[2] or problem)
        if self.flavor == "mysql" and self.config.snapshot.watermarks == "gtid":
            if self.server.semi_sync_after_sync():
                yield CheckResult("semi-sync wait point", "fail", "AFTER_SYNC", SEMI_SYNC_AFTER_SYNC)
            else:
                yield CheckResult("semi-sync wait point", "ok", "no semi-sync AFTER_SYNC")

    # --- the committed position ---------------------------------------------------------------

    def _binlog_position(self) -> Iterator[CheckResult]:
        check = "binlog position"
        store = OffsetStore(self.config.offsets.path)
        try:
            offsets = store.load()
        except OffsetsError as error:
            yield CheckResult(check, "fail", str(error).partition(";")[0], str(error).partition("; ")[2] or None)
            return
        if offsets is None:
            yield CheckResult(check, "ok", f"no offsets at {store.path} yet: the first start begins at the server's "
                                           "current position")
            return
        skipped = self._need_source(check)
        if skipped:
            yield skipped
            return
        if offsets.flavor != self.flavor:
            yield CheckResult(check, "fail", f"{store.path} was written for a {offsets.flavor} server; the source is "
                                             f"{self.flavor}", "point offsets.path at a new file")
            return
        needed: GtidSet = offsets.resume if offsets.resume is not None else offsets.position
        try:
            purged = purged_gtids(self.server)
            executed = self.server.executed_gtids()
        except pymysql.err.MySQLError as error:
            yield CheckResult(check, "fail", f"cannot tell whether {needed or 'the start'} is still in the binlog: "
                                             f"{_reason(error)}", "grant REPLICATION CLIENT (see its line)")
            return
        lost = purged - needed
        if lost:
            yield CheckResult(
                check, "fail",
                f"the committed position {needed or '(the start)'} is no longer in the binlog: the server purged the "
                f"files up to {purged}",
                "changes since were lost to dblog: move the offsets file away and start again (with "
                'snapshot.startup = "initial" every captured table is snapshotted), or keep it and send '
                "execute-snapshot for the tables you need; keep binlogs longer than dblog may be stopped "
                "(binlog_expire_logs_seconds / expire_logs_days)")
            return
        unknown = needed - executed
        if unknown:
            yield CheckResult(
                check, "fail", f"the committed position {needed} holds transactions this server never logged (its binlog "
                              f"ends at {executed or 'its start'})",
                "the offsets were written against another server, or its binlog was reset (RESET MASTER): point "
                "offsets.path at a new file")
            return
        yield CheckResult(check, "ok", f"{needed or '(the start)'} from {store.path} is still in the binlog")

    # --- the signal table ---------------------------------------------------------------------

    def _signal_table(self) -> Iterator[CheckResult]:
        table = self.config.signal_table()
        if table is None:
            return
        check = "signal table"
        skipped = self._need_source(check)
        if skipped:
            yield skipped
            return
        rows = self.server.fetch(
            "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (table.db, table.table))
        ddl = SIGNAL_TABLE_DDL.format(table=f"{quote_identifier(table.db)}.{quote_identifier(table.table)}")
        if not rows:
            yield CheckResult(check, "fail", f"{table} does not exist (or this user has no privilege on it)",
                              f"{ddl}; or point signals.table at the existing one")
            return
        columns = {text_of(name).lower(): (text_of(kind).lower(), length) for name, kind, length in rows}
        mode = self.config.snapshot.watermarks
        wanted = {"id": _ID_LENGTH[mode], "type": _TYPE_LENGTH[mode], "data": None}
        problems = []
        for name, length in wanted.items():
            if name not in columns:
                problems.append(f"no column {name}")
                continue
            kind, actual = columns[name]
            if kind not in _TEXT_TYPES:
                problems.append(f"{name} is {kind}, not a text column")
            elif length is not None and actual is not None and int(actual) < length:
                problems.append(f"{name} holds {actual} characters, dblog writes up to {length}")
        if problems:
            yield CheckResult(check, "fail", f"{table}: {'; '.join(problems)}",
                              f"give it Debezium's signal table columns: {ddl}")
            return
        yield CheckResult(check, "ok", f"{table} has the columns id, type, data")

    # --- Kafka --------------------------------------------------------------------------------

    def _kafka(self) -> Iterator[CheckResult]:
        config = self.config
        topics = [(what, topic) for what, topic in (("signal topic", config.signals.kafka_topic),
                                                    ("notification topic", config.notifications.kafka_topic)) if topic]
        if config.sink.type != "kafka" and not topics:
            return
        bootstrap = config.kafka.bootstrap_servers
        unresolved = self._unresolved("kafka.")
        if unresolved:
            data = [("data topics", None)] if config.sink.type == "kafka" else []
            for what, _ in [("brokers", None), *data, *topics]:
                yield CheckResult(f"Kafka {what}", "skip", unresolved)
            return
        try:
            admin = self._kafka_admin()
            existing = set(admin.list_topics())
        except Exception as error:  # kafka-python raises KafkaError, and OSError for some failures
            yield CheckResult("Kafka brokers", "fail", f"{bootstrap}: {_reason(error)}",
                              "check kafka.bootstrap_servers, that the brokers run and that nothing blocks their "
                              "ports, and the Kafka security settings (TLS, SASL user and password)")
            for what, _ in ([("data topics", None)] if config.sink.type == "kafka" else []) + topics:
                yield CheckResult(f"Kafka {what}", "skip", "needs the Kafka brokers")
            return
        try:
            yield CheckResult("Kafka brokers", "ok", f"{bootstrap} answered ({len(existing)} topics visible)")
            if config.sink.type == "kafka":
                yield self._data_topics(admin, existing)
            for what, topic in topics:
                yield self._control_topic(admin, existing, what, topic)
        finally:
            admin.close()

    def _kafka_admin(self):
        """An admin client on `kafka.bootstrap_servers`, as the sink builds its own
        (dblog.sinks.kafka.topics): the one place the check connects to Kafka."""
        from kafka import KafkaAdminClient

        from dblog.runtime.kafka_access import kafka_failure_explained
        from dblog.sinks.kafka.delivery import quiet_client_logs
        from dblog.sinks.kafka_security import client_options

        quiet_client_logs()
        timeout_ms = int(self.timeout * 1000)
        bootstrap, security = self.config.kafka.bootstrap_servers, self.config.kafka.security()
        with kafka_failure_explained(bootstrap, security, "the preflight check"):  # names a TLS/SASL setting
            return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=f"dblog-{self.config.name}-check",
                                    request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                                    **client_options(security))

    def _data_topics(self, admin, existing: set[str]) -> CheckResult:
        from dblog.sinks.kafka_settings import TopicNameError

        check = "Kafka data topics"
        settings = self.config.sink.kafka
        name = self.config.name
        try:
            wanted = [settings.table_topic(name, table) for table in self.captured or ()]
            if settings.schema_changes:
                wanted.append(settings.schema_topic(name))
            wanted = [settings.routed_topic(topic) for topic in wanted]  # where sink.kafka.transforms route them
        except TopicNameError as error:
            return CheckResult(check, "fail", str(error), "fix sink.kafka.topic or the connector's name")
        wanted = list(dict.fromkeys(wanted))
        missing = [topic for topic in wanted if topic not in existing]
        tables = "" if self.captured is not None else " (captured tables unknown: the source is unreachable)"
        if not missing:
            return CheckResult(check, "ok", f"all {len(wanted)} exist{tables}")
        if not settings.create_topics:  # as Kafka Connect without topic.creation.*: the broker's auto-create
            return CheckResult(check, "warn", f"missing: {_listed(missing)}{tables}",
                               "a broker with auto.create.topics.enable (Kafka's default) creates them when dblog "
                               "first writes to them, with its num.partitions and default.replication.factor; "
                               "else create them, or set sink.kafka.create_topics = true")
        refusal = self._creation_refused(admin, missing, settings.partitions, settings.replication_factor,
                                         dict(settings.topic_properties))
        if refusal:
            return CheckResult(check, "fail", f"Kafka would not create {refusal}",
                               "grant this user CREATE on the cluster or on these topics (ACLs), or create them "
                               "yourself; or fix sink.kafka.partitions / replication_factor / topic_properties")
        return CheckResult(check, "ok", f"{len(wanted) - len(missing)} exist, {len(missing)} to be created at start "
                                        f"(this user may create them): {_listed(missing)}{tables}")

    def _control_topic(self, admin, existing: set[str], what: str, topic: str) -> CheckResult:
        check = f"Kafka {what}"
        setting = "signals.kafka_topic" if what == "signal topic" else "notifications.kafka_topic"
        if topic in existing:
            return CheckResult(check, "ok", f"{topic} exists")
        refusal = self._creation_refused(admin, [topic], 1, 1, {})
        if refusal:
            return CheckResult(check, "fail", f"{topic} does not exist, and Kafka would not create {refusal}",
                               f"create topic {topic} (or fix {setting}), and let dblog's user read and write it")
        effect = ("dblog waits for it and reads no Kafka signal until it exists" if what == "signal topic"
                  else "notifications are not published until it exists")
        return CheckResult(check, "warn", f"{topic} does not exist yet ({effect}); this user may create it",
                           f"create topic {topic} (a broker with auto.create.topics.enable creates it when first "
                           "written to)")

    def _creation_refused(self, admin, topics: list[str], partitions: int, replication: int,
                          configs: dict[str, str]) -> str | None:
        """Why Kafka would refuse to create `topics` (None: it would create them), asked with
        validate_only: a Kafka broker creates nothing then (tansu, a test broker, ignores it)."""
        from kafka.errors import for_code

        try:
            answer = admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": replication, "configs": configs}
                 for topic in topics},
                validate_only=True, raise_errors=False)
        except Exception as error:  # noqa: BLE001 - reported as the refusal
            return f"{_listed(topics)}: {_reason(error)}"
        refused = []
        for result in answer.get("topics", []):
            if result["error_code"] not in (0, _KAFKA_TOPIC_EXISTS):
                message = result.get("error_message")
                refused.append(f"{result['name']} ({for_code(result['error_code']).__name__}"
                               f"{': ' + message if message else ''})")
        return _listed(refused) if refused else None

    # --- Spark and Iceberg --------------------------------------------------------------------

    def _iceberg(self) -> Iterator[CheckResult]:
        if self.config.sink.type != "iceberg":
            return
        check = "Spark and Iceberg catalog"
        if not self.spark:
            yield CheckResult(check, "skip", "not checked (--no-spark)")
            return
        from dblog.runtime.sink_factory import open_sink
        from dblog.sinks.iceberg.catalog import catalog_namespaces

        spark = self.config.spark
        self.on_slow(f"starting a Spark session on {spark.master} to reach catalog {spark.catalog} "
                     "(slow: 10 s or more)")
        sink = None
        try:
            flavor = self.flavor or "mysql"  # stored with the sink's positions; unknown without the source
            sink = open_sink(self.config, self.engine.schemas.schema, lambda: flavor, self.engine.is_captured)
            session = sink.spark
            version = session.version
            listed = catalog_namespaces(session, spark.catalog)  # the sink's opening checked the catalog
            namespaces = f"{len(listed)} namespaces" if listed else "no namespace yet"
        except Exception as error:  # noqa: BLE001 - Py4J, Spark and Java errors alike end up here
            yield CheckResult(check, "fail", f"{spark.master}, catalog {spark.catalog}: {_java_reason(error)[:500]}",
                              "check [spark] (master, packages, conf) and [iceberg], that Java 17 is installed, "
                              "and that the catalog's service and warehouse are reachable from this machine")
            return
        finally:
            if sink is not None:
                try:
                    sink.close()
                    sink.spark.stop()
                except Exception as error:  # noqa: BLE001 - the check's result stands
                    log.debug("stopping the check's Spark session: %s", error)
        yield CheckResult(check, "ok", f"Spark {version} on {spark.master}; catalog {spark.catalog} answered "
                                       f"({namespaces})")

    # --- local paths --------------------------------------------------------------------------

    def _paths(self) -> Iterator[CheckResult]:
        yield _writable("offsets path", Path(self.config.offsets.path), "offsets.path")
        if self.config.sink.type == "jsonl":
            yield _writable("sink path", Path(self.config.sink.path), "sink.path")


def run_checks(config: Config, **options) -> Iterator[CheckResult]:
    """The results of every check of `config` (`Preflight`'s options), in order."""
    yield from Preflight(config, **options).run()


def _java_reason(error: BaseException) -> str:
    """A Py4J error as its Java exception's one line (class: message), without the stack."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM is gone: fall back to the Python text
            pass
    return _reason(error).split(" at ")[0]


def _connection_remedy(error: pymysql.err.MySQLError) -> str:
    code = error_code(error)
    text = str(error).lower()
    if code == 1045:
        return ("check source.user and source.password (or password_env / password_file), and that the server "
                "has this user for the host dblog connects from")
    if code == 3159 or "insecure transport" in text:
        return "the server requires TLS: configure TLS to the source (docs/configuration.md, [source])"
    if "ssl" in text or "tls" in text or "certificate" in text:
        return ("check the source's TLS settings (CA, client certificate, mode; docs/configuration.md) against the "
                "server's certificate")
    if code in (2002, 2003, 2005, 2006, 2013):
        return "check source.host and source.port, that the server runs and that nothing blocks the port"
    if code == 1040:
        return "the server has too many connections: raise max_connections or try again"
    return "see the server's message; docs/operations.md lists what dblog needs"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _writable(check: str, path: Path, setting: str) -> CheckResult:
    """Whether dblog can create and replace `path` (a temp file beside it, then renamed)."""
    if path.is_dir():
        return CheckResult(check, "fail", f"{path} is a directory", f"point {setting} at a file")
    directory = path.parent
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return CheckResult(check, "fail", f"{existing} is a file, so {directory} cannot be created",
                           f"point {setting} at a path in a directory")
    if existing != directory:
        if not os.access(existing, os.W_OK | os.X_OK):
            return CheckResult(check, "fail", f"{directory} does not exist and {existing} is not writable",
                               f"create {directory} for dblog's user, or point {setting} elsewhere")
        return CheckResult(check, "ok", f"{path} ({directory} will be created)")
    try:
        handle, temp = tempfile.mkstemp(prefix=".dblog-check-", dir=directory)
        os.close(handle)
        os.unlink(temp)
    except OSError as error:
        return CheckResult(check, "fail", f"cannot create files in {directory}: {error.strerror or error}",
                           f"make {directory} writable for dblog's user, or point {setting} elsewhere")
    if path.exists() and not os.access(path, os.W_OK):
        return CheckResult(check, "fail", f"{path} is not writable", f"make it writable, or point {setting} elsewhere")
    return CheckResult(check, "ok", str(path))
