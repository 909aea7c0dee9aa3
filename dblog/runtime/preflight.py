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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql

from dblog.core.events import TableId
from dblog.core.offsets import OffsetsError
from dblog.core.sql import quote_identifier
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.core.file_positions import FilePosition
from dblog.core.resume_verdict import describe_file_refusal, describe_refusal, judge_file_resume, judge_resume
from dblog.mysql.server_history import server_binlog, server_history
from dblog.mysql.schema import text_of
from dblog.mysql.server_errors import (
    CANNOT_REACH, ER_ACCESS_DENIED_ERROR, ER_CON_COUNT_ERROR, ER_NO_SUCH_TABLE, ER_SECURE_TRANSPORT_REQUIRED, error_code,
)
from dblog.mysql.server_requirements import (REQUIRED_VARIABLES, SEMI_SYNC_AFTER_SYNC, allowed_position_modes,
                                             checked_settings, position_mode, setting_notes, setting_problems)
from dblog.runtime.config import Config, ConfigError
from dblog.runtime.engine import Engine
from dblog.runtime.offset_store import OffsetStore
from dblog.runtime.secrets import secret_problems
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL
from dblog.runtime.snapshot_modes import plan_startup
from dblog.runtime.watermark_modes import WATERMARK_MODES
from dblog.sinks.base import Sink
from dblog.sinks.checks import CheckResult, listed, reason, writable

log = logging.getLogger("dblog.check")

_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_KAFKA_TOPIC_EXISTS = 36


class Preflight:
    """The checks of one configuration; `run()` yields their results. The sink's own checks are
    its plugin's (dblog.sinks.registry), each at its place: on the Kafka brokers, a section of
    its own, its local files; they see this run as a `dblog.sinks.checks.PreflightRun`."""

    def __init__(self, config: Config, *, spark: bool = True, timeout: float = 10.0,
                 on_slow: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.spark = spark
        self.timeout = timeout
        self.on_slow = on_slow or (lambda message: None)
        # The engine's wiring, unstarted: its connection settings and connect function, its
        # server session and schema catalog. Nothing connects before a check asks.
        self.engine = Engine(config, sink=Sink())  # a sink that takes nothing: the checks write no change
        self.server = self.engine.server
        self._chosen_position_mode: str | None = None
        self.plugin = config.sink_plugin()
        self.flavor: str | None = None
        self.account: str | None = None  # 'user'@'host' as the server sees it, for GRANT remedies
        self.captured: list[TableId] | None = None
        self.unresolved: dict[str, str] = {}  # secret setting -> why it cannot be resolved

    # --- running ------------------------------------------------------------------------------

    def run(self) -> Iterator[CheckResult]:
        sections = [("secrets", self._secrets), ("source connection", self._source), ("grants", self._grants),
                    ("server settings", self._server_settings), ("binlog position", self._binlog_position),
                    ("signal table", self._signal_table), ("Kafka", self._kafka),
                    (self.plugin.check_section or "sink", lambda: self.plugin.check(self)), ("paths", self._paths)]
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
            yield CheckResult(name, "fail", f"the check itself failed: {reason(error)}",
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
            yield CheckResult("source connection", "fail", f"{where}: {reason(error)}", _connection_remedy(error))
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
        mode = self._watermarks()
        for privilege in WATERMARK_MODES[mode].signal_table_privileges:
            yield self._signal_table_privilege(privilege, mode)

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
                               f"the server refused to register dblog as a replica: {reason(error)}",
                               f"{self._grant('REPLICATION SLAVE', '*.*')} (the binlog is read as a replica reads it)")
        return CheckResult("REPLICATION SLAVE", "ok", "registered as a replica (server_id "
                           f"{source.server_id}): the binlog can be read")

    def _replication_client(self) -> CheckResult:
        try:
            self.server.fetch("SHOW BINARY LOGS")
        except pymysql.err.MySQLError as error:
            also = " (BINLOG MONITOR on MariaDB >= 10.5)" if self.flavor == "mariadb" else ""
            return CheckResult("REPLICATION CLIENT", "fail", f"SHOW BINARY LOGS was refused: {reason(error)}",
                               f"{self._grant('REPLICATION CLIENT', '*.*')}{also}: dblog reads where the binlog ends")
        return CheckResult("REPLICATION CLIENT", "ok", "SHOW BINARY LOGS answered")

    def _select(self) -> CheckResult:
        try:
            self.captured = self.engine.captured_tables()
        except pymysql.err.MySQLError as error:
            return CheckResult("SELECT", "fail", f"cannot list the tables: {reason(error)}",
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
                first_error = first_error or reason(error)
        if denied:
            databases = sorted({TableId.parse(name).db for name in denied})
            return CheckResult(
                "SELECT", "fail", f"refused on {len(denied)} of {len(self.captured)} captured tables: {listed(denied)} "
                                  f"(first: {first_error})",
                "; ".join(self._grant("SELECT", f"{quote_identifier(db)}.*") for db in databases)
                + " (or on each table), or exclude them with source.exclude")
        return CheckResult("SELECT", "ok", f"on all {len(self.captured)} captured tables ({listed([str(t) for t in self.captured])})")

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
            if error_code(error) == ER_NO_SUCH_TABLE:
                return CheckResult(check, "skip", f"{table} does not exist (see the signal table's line)")
            return CheckResult(check, "fail", f"{privilege} on {table} was refused: {reason(error)}",
                               f'{self._grant(privilege, name)}: snapshot.watermarks = "{mode}" writes watermark '
                               "rows there")
        return CheckResult(check, "ok", f'{privilege} on {table} (snapshot.watermarks = "{mode}")')

    # --- server settings ----------------------------------------------------------------------

    def _server_settings(self) -> Iterator[CheckResult]:
        if self.flavor is None:
            yield CheckResult("server settings", "skip", "needs the source connection")
            return
        variables = self.server.global_variables(REQUIRED_VARIABLES)
        chosen = self._position_mode()
        problems = setting_problems(variables, self.flavor, chosen)
        notes = setting_notes(variables)
        for name in checked_settings(self.flavor):
            value = variables.get(name)
            shown = value if value not in (None, "") else "(not set)"
            problem = problems.get(name)
            if problem is None:
                yield CheckResult(name, "ok", notes[name] if name in notes else shown)
            else:
                yield CheckResult(name, "fail", shown, problem.partition(": ")[2] or problem)
        yield self._position_mode_line(variables, chosen)
        refusal, summary = self.server.replica_role()
        yield CheckResult("replication", "fail", *refusal) if refusal else CheckResult("replication", *summary)
        if self.flavor == "mysql" and WATERMARK_MODES[self._watermarks()].waits_for_visibility:
            if self.server.semi_sync_after_sync():
                yield CheckResult("semi-sync wait point", "fail", "AFTER_SYNC", SEMI_SYNC_AFTER_SYNC)
            else:
                yield CheckResult("semi-sync wait point", "ok", "no semi-sync AFTER_SYNC")

    def _position_mode(self) -> str:
        """The position mode `dblog run` chooses on this server (source.position_mode)."""
        if self._chosen_position_mode is None:
            variables = self.server.global_variables(REQUIRED_VARIABLES)
            self._chosen_position_mode = position_mode(variables, self.flavor, self.config.source.position_mode)
        return self._chosen_position_mode

    def _watermarks(self) -> str:
        """The watermark mode `dblog run` uses: signal-table ones in file-position mode."""
        configured = self.config.snapshot.watermarks
        if self.flavor is not None and self._position_mode() == "file" and \
                not WATERMARK_MODES[configured].writes_signal_rows and self.config.signal_table() is not None:
            return "insert_insert"
        return configured

    def _position_mode_line(self, variables: dict[str, str], chosen: str) -> CheckResult:
        check = "position mode"
        allowed = allowed_position_modes(variables, self.flavor)
        words = {"gtid": "GTIDs", "file": "binlog file and position"}
        said = (f"dblog uses {words[chosen]} (source.position_mode = {self.config.source.position_mode!r}); the server "
                f"allows {' or '.join(words[mode] for mode in allowed)}")
        if chosen not in allowed:
            return CheckResult(check, "fail", said, 'set source.position_mode = "file", or enable GTIDs (see above)')
        if chosen == "file":
            if WATERMARK_MODES[self._watermarks()].writes_signal_rows:
                watermarks = self._watermarks()
                return CheckResult(check, "ok", f'{said}; snapshot windows take signal-table watermarks '
                                                f'(snapshot.watermarks = "{watermarks}")')
            return CheckResult(check, "fail", f'{said}; snapshot.watermarks = "gtid" needs GTIDs',
                               'set signals.table (dblog writes its window markers there, with INSERT), or enable '
                               "GTIDs (MySQL: gtid_mode=ON, enforce_gtid_consistency=ON)")
        return CheckResult(check, "ok", said)

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
        source = self.config.source
        if offsets.position_mode != self._position_mode():
            yield CheckResult(check, "fail", f"{store.path} holds a {offsets.position_mode} position; dblog reads this "
                                             f"server by {self._position_mode()} position",
                              f"set source.position_mode = {offsets.position_mode!r}, or point offsets.path at a new "
                              "file (and snapshot the captured tables)")
            return
        if offsets.binlog is not None:
            yield self._file_position(offsets, store)
            return
        try:
            history = server_history(self.server, f"{source.host}:{source.port}")
        except pymysql.err.MySQLError as error:
            yield CheckResult(check, "fail", f"cannot tell whether {offsets.position or 'the start'} is still in the "
                                             f"binlog: {reason(error)}", "grant REPLICATION CLIENT (see its line)")
            return
        # The verdict `dblog run` gives at its start and at each reconnect (dblog.core.resume_verdict).
        verdict = judge_resume(offsets.position, history, offsets.resume)
        if verdict.kind == "purged":  # snapshot.startup = "when_needed" starts afresh instead
            plan = plan_startup(self.config.snapshot, True, lambda: True)
            if plan.fresh_position:
                yield CheckResult(check, "warn", f"the committed position {offsets.position or '(the start)'} is no "
                                                 f"longer in the binlog (the server purged the files holding it): "
                                                 f"{plan.note}",
                                  "keep binlogs longer than dblog may be stopped (binlog_expire_logs_seconds / "
                                  "expire_logs_days): changes made while it was stopped come as snapshot rows")
                return
        if not verdict.ok:
            detail, remedy = describe_refusal(verdict, offsets.position, history, str(store.path))
            yield CheckResult(check, "fail", detail, remedy)
            return
        yield CheckResult(check, "ok", f"{offsets.position or '(the start)'} from {store.path} is still in the binlog "
                                       f"of {history.identity}")

    def _file_position(self, offsets, store: OffsetStore) -> CheckResult:
        """The file-position verdict `dblog run` gives (dblog.core.resume_verdict.judge_file_resume)."""
        check, source = "binlog position", self.config.source
        at = FilePosition.of(offsets.resume if offsets.resume is not None else offsets.position,
                             offsets.binlog.base_name)
        try:
            binlog = server_binlog(self.server, f"{source.host}:{source.port}")
        except pymysql.err.MySQLError as error:
            return CheckResult(check, "fail", f"cannot tell whether {at} is still in the binlog: {reason(error)}",
                               "grant REPLICATION CLIENT (see its line)")
        verdict = judge_file_resume(at, offsets.binlog, binlog)
        if not verdict.ok:
            return CheckResult(check, "fail", *describe_file_refusal(verdict, at, binlog, str(store.path)))
        return CheckResult(check, "ok", f"{at} from {store.path} is still in the binlog of "
                                        f"{binlog.identity.describe()}")

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
        mode = WATERMARK_MODES[self._watermarks()]
        wanted = {"id": mode.longest_signal_id, "type": mode.longest_signal_type, "data": None}
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
        sink_checks = [(what, None) for what in self.plugin.broker_checks]  # the sink's, on the brokers
        if not self.plugin.uses_kafka_brokers and not topics:
            return
        bootstrap = config.kafka.bootstrap_servers
        unresolved = self._unresolved("kafka.")
        if unresolved:
            for what, _ in [("brokers", None), *sink_checks, *topics]:
                yield CheckResult(f"Kafka {what}", "skip", unresolved)
            return
        try:
            admin = self._kafka_admin()
            existing = set(admin.list_topics())
        except Exception as error:  # kafka-python raises KafkaError, and OSError for some failures
            yield CheckResult("Kafka brokers", "fail", f"{bootstrap}: {reason(error)}",
                              "check kafka.bootstrap_servers, that the brokers run and that nothing blocks their "
                              "ports, and the Kafka security settings (TLS, SASL user and password)")
            for what, _ in sink_checks + topics:
                yield CheckResult(f"Kafka {what}", "skip", "needs the Kafka brokers")
            return
        try:
            yield CheckResult("Kafka brokers", "ok", f"{bootstrap} answered ({len(existing)} topics visible)")
            yield from self.plugin.check_brokers(self, admin, existing)
            for what, topic in topics:
                yield self._control_topic(admin, existing, what, topic)
        finally:
            admin.close()

    def _kafka_admin(self):
        """An admin client on `kafka.bootstrap_servers`, as the Kafka sink builds its own: the one
        place the check connects to Kafka."""
        from kafka import KafkaAdminClient

        from dblog.runtime.kafka_access import kafka_failure_explained
        from dblog.sinks.kafka.security import client_options, quiet_client_logs

        quiet_client_logs()
        timeout_ms = int(self.timeout * 1000)
        bootstrap, security = self.config.kafka.bootstrap_servers, self.config.kafka.security()
        with kafka_failure_explained(bootstrap, security, "the preflight check"):  # names a TLS/SASL setting
            return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=f"dblog-{self.config.name}-check",
                                    request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                                    **client_options(security))

    def _control_topic(self, admin, existing: set[str], what: str, topic: str) -> CheckResult:
        check = f"Kafka {what}"
        setting = "signals.kafka_topic" if what == "signal topic" else "notifications.kafka_topic"
        if topic in existing:
            from dblog.sinks.kafka.acls import denied_topics, grant_lines  # the signal channel's brokers: Kafka's

            operation = "READ" if what == "signal topic" else "WRITE"
            if denied_topics(admin, [topic], operation):
                kafka = self.config.kafka
                return CheckResult(check, "fail", f"{topic} exists, and Kafka denies {operation} on it to this user",
                                   "grant it with " + grant_lines(operation, [topic], kafka.security(),
                                                                  kafka.bootstrap_servers))
            return CheckResult(check, "ok", f"{topic} exists (this user may {operation.lower()} it)")
        refusal = self.creation_refused(admin, [topic], 1, 1, {})
        if refusal:
            return CheckResult(check, "fail", f"{topic} does not exist, and Kafka would not create {refusal}",
                               f"create topic {topic} (or fix {setting}), and let dblog's user read and write it")
        effect = ("dblog waits for it and reads no Kafka signal until it exists" if what == "signal topic"
                  else "notifications are not published until it exists")
        return CheckResult(check, "warn", f"{topic} does not exist yet ({effect}); this user may create it",
                           f"create topic {topic} (a broker with auto.create.topics.enable creates it when first "
                           "written to)")

    def creation_refused(self, admin: Any, topics: list[str], partitions: int, replication: int,
                         configs: dict[str, str]) -> str | None:
        """Why Kafka would refuse to create `topics` (None: it would create them), asked with
        validate_only: a Kafka broker creates nothing then."""
        from kafka.errors import for_code

        try:
            answer = admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": replication, "configs": configs}
                 for topic in topics},
                validate_only=True, raise_errors=False)
        except Exception as error:  # noqa: BLE001 - reported as the refusal
            return f"{listed(topics)}: {reason(error)}"
        refused = []
        for result in answer.get("topics", []):
            if result["error_code"] not in (0, _KAFKA_TOPIC_EXISTS):
                message = result.get("error_message")
                refused.append(f"{result['name']} ({for_code(result['error_code']).__name__}"
                               f"{': ' + message if message else ''})")
        return listed(refused) if refused else None

    # --- the sink -----------------------------------------------------------------------------

    def open_sink(self, flavor: str) -> Sink:
        """The configured sink, as the engine opens it (a plugin's check that must reach its
        target); `flavor`: the source's, or a stand-in when it is unreachable."""
        from dblog.runtime.sink_factory import open_sink

        return open_sink(self.config, self.engine.schemas.schema, lambda: flavor, self.engine.is_captured)

    # --- local paths --------------------------------------------------------------------------

    def _paths(self) -> Iterator[CheckResult]:
        yield writable("offsets path", Path(self.config.offsets.path), "offsets.path")
        yield from self.plugin.check_paths(self)


def run_checks(config: Config, **options) -> Iterator[CheckResult]:
    """The results of every check of `config` (`Preflight`'s options), in order."""
    yield from Preflight(config, **options).run()


def _connection_remedy(error: pymysql.err.MySQLError) -> str:
    code = error_code(error)
    text = str(error).lower()
    if code == ER_ACCESS_DENIED_ERROR:
        return ("check source.user and source.password (or password_env / password_file), and that the server "
                "has this user for the host dblog connects from")
    if code == ER_SECURE_TRANSPORT_REQUIRED or "insecure transport" in text:
        return "the server requires TLS: configure TLS to the source (docs/configuration.md, [source])"
    if "ssl" in text or "tls" in text or "certificate" in text:
        return ("check the source's TLS settings (CA, client certificate, mode; docs/configuration.md) against the "
                "server's certificate")
    if code in CANNOT_REACH:
        return "check source.host and source.port, that the server runs and that nothing blocks the port"
    if code == ER_CON_COUNT_ERROR:
        return "the server has too many connections: raise max_connections or try again"
    return "see the server's message; docs/operations.md lists what dblog needs"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
