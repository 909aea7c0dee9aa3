"""One autocommit connection to the source server, and what the server says about itself:
its flavour, its executed GTID set, where its binlog ends, and whether its read views see a
binlog coordinate yet (docs/algorithm.md, "Visibility").

Every query runs in autocommit mode on a session whose time_zone is '+00:00' and whose
character set is utf8mb4: each read must see the latest committed data, never a snapshot held
open by an earlier transaction, and TIMESTAMP values must come back in UTC like the binlog's.
A lost connection is replaced once per call (`run`); a second failure is raised.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import pymysql
import pymysql.cursors
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_exponential

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.events import TableId
from dblog.core.file_positions import FilePosition, base_name
from dblog.core.gtid import Flavor, GtidSet, flavor_of_version
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import text_of
from dblog.mysql.replica_role import ReplicationSource, replica_refusal, replica_summary, replication_sources
from dblog.mysql.server_errors import ER_ACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR, connection_lost
from dblog.mysql.values import SESSION_TIME_ZONE_SQL

log = logging.getLogger("dblog")


class VisibilityTimeout(RuntimeError):
    """Commits the binlog reader already read did not become visible to SELECTs in time."""


def _poll(missing: Callable[[], str | None], timeout: float, what: str) -> bool:
    """Call `missing` (what is not visible yet, None once it all is) until it returns None,
    pausing 0.5 ms, 1 ms, ... up to 100 ms between calls, for at most `timeout` seconds.
    Returns whether it had to wait (the first call found something missing)."""
    lacking = missing()
    if lacking is None:
        return False
    lacking = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.0005, max=0.1),
        retry=retry_if_result(lambda result: result is not None),
        retry_error_callback=lambda state: state.outcome.result(),
    )(missing)
    if lacking is not None:
        raise VisibilityTimeout(
            f"{what} did not become visible to SELECTs within {timeout:g} s ({lacking}). A semi-sync primary "
            "waiting for a replica's ACK holds commits back: check its replicas, or raise "
            "snapshot.visibility_timeout_seconds"
        )
    return True


def connect(settings: ConnectionSettings | Mapping[str, Any], program_name: str | None = None) -> pymysql.Connection:
    """A new autocommit utf8mb4 connection to the source, TLS as `settings` say
    (`ConnectionSettings`, or a pymysql-style dict: host, port, user, password)."""
    return ConnectionSettings.of(settings).connect(program_name=program_name)


def binlog_identity(conn: pymysql.Connection) -> BinlogIdentity:
    """The server on `conn`, as places in its binlog name it (dblog.core.binlog_identity): its
    server_id, host name and port, and MySQL's server_uuid."""
    with conn.cursor(pymysql.cursors.Cursor) as cursor:
        cursor.execute("SELECT @@server_id, @@hostname, @@port, VERSION()")
        server_id, host, port, version = cursor.fetchone()
        uuid = None
        if flavor_of_version(text_of(version)) == "mysql":
            cursor.execute("SELECT @@server_uuid")
            uuid = text_of(cursor.fetchone()[0])
    return BinlogIdentity(int(server_id), server_uuid=uuid, host=text_of(host), port=int(port))


def server_flavor(conn: pymysql.Connection) -> Flavor:
    """'mariadb' or 'mysql': what the server on `conn` is, from VERSION()."""
    with conn.cursor(pymysql.cursors.Cursor) as cursor:  # tuples, whatever the default
        cursor.execute("SELECT VERSION()")
        return flavor_of_version(str(cursor.fetchone()[0]))


class ServerSession:
    """`connect` makes a new pymysql connection; it is called again to replace a lost one."""

    def __init__(self, connect: Callable[[], pymysql.Connection]) -> None:
        self._connect = connect
        self._conn: pymysql.Connection | None = None
        self._flavor: str | None = None
        # The last coordinate a read view was seen to reach (forgotten with the connection:
        # the server behind it may be another one then).
        self._visible: BinlogCoordinate | None = None
        # Whose binlog this connection's coordinates are in (`binlog_identity`), read at connect.
        self._identity: BinlogIdentity | None = None
        # File-position mode (dblog.core.file_positions): the server's position is where its
        # binlog ends, in the engine's position form, not its GTIDs.
        self.file_positions = False

    # --- connection ---------------------------------------------------------------------------

    def connection(self) -> pymysql.Connection:
        if self._conn is None:
            conn = self._connect()
            try:
                if conn.charset != "utf8mb4":
                    conn.set_character_set("utf8mb4")  # 4-byte characters must survive
                conn.autocommit(True)
                with conn.cursor() as cursor:
                    cursor.execute(SESSION_TIME_ZONE_SQL)
                identity = binlog_identity(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._identity = conn, identity
        return self._conn

    def identity(self) -> BinlogIdentity:
        """The server this session's connection reaches (`binlog_identity`), connecting if needed."""
        self.connection()
        assert self._identity is not None
        return self._identity

    def files_identity(self) -> BinlogIdentity:
        """The server as its file positions name it (`BinlogIdentity.of_files`): its binlog files'
        base name, server_id and (MySQL) server_uuid."""
        return self.identity().of_files(base_name(self.binlog_end_position().file))

    def drop_connection(self) -> None:
        """Close the connection (e.g. results left unread on it); the next query opens a new one."""
        conn, self._conn = self._conn, None
        self._visible = None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def run(self, work: Callable[[pymysql.Connection], Any]) -> Any:
        for attempt in (1, 2):
            try:
                return work(self.connection())
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as error:
                self.drop_connection()
                if not connection_lost(error) or attempt == 2:
                    raise

    def fetch(self, sql: str, params: tuple = ()) -> tuple:
        def run(conn: pymysql.Connection) -> tuple:
            with conn.cursor(pymysql.cursors.Cursor) as cursor:  # tuples, whatever the default
                cursor.execute(sql, params)
                return cursor.fetchall()

        return self.run(run)

    def close(self) -> None:
        self.drop_connection()

    def __enter__(self) -> "ServerSession":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- server facts ---------------------------------------------------------------------------

    def flavor(self) -> str:
        """'mariadb' or 'mysql', from VERSION()."""
        if self._flavor is None:
            self._flavor = self.run(server_flavor)
        return self._flavor

    def executed_gtids(self) -> GtidSet:
        """The server's executed GTID set: a watermark (MariaDB @@gtid_binlog_pos, MySQL @@gtid_executed).
        In file-position mode every transaction before the binlog's end (`binlog_end_position`)."""
        if self.file_positions:
            return self.binlog_end_position().position()
        flavor = self.flavor()
        variable = "@@GLOBAL.gtid_binlog_pos" if flavor == "mariadb" else "@@GLOBAL.gtid_executed"
        text = self.fetch(f"SELECT {variable}")[0][0] or ""
        if isinstance(text, bytes):
            text = text.decode()
        return GtidSet.parse(text.replace("\n", ""), flavor=flavor)

    def visible_coordinate(self) -> BinlogCoordinate:
        """MariaDB: the binlog coordinate up to which a read view opened now sees every commit
        (`binlog_snapshot_file/position` of a consistent snapshot; see dblog.core.visibility).
        A read view opened later sees at least as much."""
        def run(conn: pymysql.Connection) -> dict[str, str]:
            with conn.cursor(pymysql.cursors.Cursor) as cursor:
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                try:
                    cursor.execute("SHOW SESSION STATUS LIKE 'binlog\\_snapshot\\_%'")
                    return {text_of(name).lower(): text_of(value) for name, value in cursor.fetchall()}
                finally:
                    cursor.execute("COMMIT")

        status = self.run(run)
        return BinlogCoordinate.of(status["binlog_snapshot_file"], status["binlog_snapshot_position"], self._identity)

    def binlog_end_position(self) -> FilePosition:
        """Where the binlog ends now (SHOW MASTER STATUS; SHOW BINARY LOG STATUS from MySQL 8.2,
        the only name in 8.4)."""
        try:
            rows = self.fetch("SHOW MASTER STATUS")
        except pymysql.err.ProgrammingError:
            rows = self.fetch("SHOW BINARY LOG STATUS")
        if not rows:
            raise RuntimeError("the server writes no binlog (SHOW MASTER STATUS is empty): start it with --log-bin")
        return FilePosition(text_of(rows[0][0]), int(rows[0][1]))

    def binlog_end(self) -> BinlogCoordinate | None:
        """MariaDB: where the binlog ends now (None on MySQL). Read right after
        `executed_gtids`, it lies past every commit of that set: MariaDB counts a commit in
        `@@gtid_binlog_pos` before a SELECT can see it, but writes the commit's GTID and events
        under the lock SHOW MASTER STATUS takes. A chunk that waits until read views reach it
        (`wait_until_visible`) sees the whole set."""
        if self.flavor() != "mariadb":
            return None
        file, pos = self.fetch("SHOW MASTER STATUS")[0][:2]
        return BinlogCoordinate.of(text_of(file), pos, self._identity)

    def wait_until_visible(self, position: GtidSet, must_see: BinlogCoordinate | None, timeout: float) -> bool:
        """Return once a SELECT started now sees every transaction the binlog reader consumed:
        MariaDB, every commit up to `must_see` (None: nothing to wait for);
        MySQL, `position` within `@@gtid_executed`. Usually at once; otherwise those commits
        are between the binlog and the storage engine (microseconds, or until a semi-sync
        replica's ACK), and this polls with a growing pause. Returns whether it had to wait.

        `must_see` in another server's binlog than this session's (the reader read it before a
        failover, or the two connections reach different servers behind one address): what
        must be visible is `position`. Once this server has logged all of it, its binlog's end
        read then lies past all of it, and the wait is for that (dblog.core.visibility)."""
        target = must_see

        def missing() -> str | None:
            nonlocal target
            if self.flavor() != "mariadb":
                if self.file_positions:
                    # MySQL without GTIDs has no read-view coordinate either: nothing tells when a
                    # read sees a commit (binlog_order_commits keeps commit order; semi-sync
                    # AFTER_SYNC is refused with GTID watermarks, the only ones that wait)
                    return None
                executed = self.executed_gtids()
                lacking = position - executed
                return f"@@gtid_executed lacks {lacking}" if lacking else None
            if target is None:
                return None  # nothing to wait for
            visible = self._visible
            if visible is not None and visible.same_binlog(target) and visible >= target:
                return None  # already seen visible
            seen = self._visible = self.visible_coordinate()
            if not seen.same_binlog(target):
                if position is not None and not position.issubset(logged := self.executed_gtids()):
                    return (f"this server ({seen.server}) has logged {logged}, not yet all the binlog reader read "
                            f"from {target.server} ({position})")
                target = self.binlog_end()
            return None if seen >= target else f"read views see the binlog up to {seen}, not {target}"

        return _poll(missing, timeout, "commits the binlog reader has already read")

    # --- tables -----------------------------------------------------------------------------------

    def global_variables(self, names: tuple[str, ...]) -> dict[str, str]:
        """The server's global variables of these names (lower case) that it has."""
        rows = self.fetch(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
        return {text_of(name).lower(): text_of(value) for name, value in rows}

    def replication_sources(self) -> list[ReplicationSource] | None:
        """The primaries this server replicates from (empty: it is no replica); None when this user
        may not read the replication status (MariaDB ≥ 10.5 wants SLAVE MONITOR)."""
        statement = "SHOW ALL SLAVES STATUS" if self.flavor() == "mariadb" else "SHOW REPLICA STATUS"

        def run(conn: pymysql.Connection) -> list[dict[str, object]]:
            with conn.cursor(pymysql.cursors.DictCursor) as cursor:
                try:
                    cursor.execute(statement)
                except pymysql.err.ProgrammingError:  # MySQL before 8.0.22: no SHOW REPLICA STATUS
                    cursor.execute("SHOW SLAVE STATUS")
                return list(cursor.fetchall())

        try:
            return replication_sources(self.run(run))
        except pymysql.err.OperationalError as error:
            if error.args and error.args[0] in (ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR):
                return None
            raise

    def replica_role(self) -> tuple[tuple[str, str] | None, tuple[str, str, str | None]]:
        """Whether dblog can capture from this server as a replica (dblog.mysql.replica_role): the
        refusal (what, remedy) or None, and `dblog check`'s line (status, detail, remedy)."""
        variables = self.global_variables(("log_slave_updates", "log_replica_updates", "gtid_slave_pos"))
        logs = variables.get("log_replica_updates", variables.get("log_slave_updates", "")).upper() in ("ON", "1")
        applied = variables.get("gtid_slave_pos", "")
        sources = self.replication_sources()
        return replica_refusal(self.flavor(), sources, logs, applied), replica_summary(sources, applied)

    def semi_sync_after_sync(self) -> bool:
        """Whether the server waits for a replica's ACK between writing a transaction to the
        binlog and making it visible (MariaDB rpl_semi_sync_master_*, MySQL 8 rpl_semi_sync_source_*)."""
        variables = self.global_variables((
            "rpl_semi_sync_master_enabled", "rpl_semi_sync_master_wait_point",
            "rpl_semi_sync_source_enabled", "rpl_semi_sync_source_wait_point"))
        settings = {name.replace("_source_", "_master_"): value.upper() for name, value in variables.items()}
        return (settings.get("rpl_semi_sync_master_enabled") == "ON"
                and settings.get("rpl_semi_sync_master_wait_point") == "AFTER_SYNC")

    def estimated_rows(self, table: TableId) -> int | None:
        """The server's row-count estimate (information_schema), for progress and ETA only."""
        return self.estimated_rows_of([table]).get(table)

    def estimated_rows_of(self, tables: list[TableId], batch: int = 500) -> dict[TableId, int | None]:
        """`estimated_rows` of many tables, one query per database and `batch` tables: each
        information_schema.TABLES lookup costs about as much as a chunk of a small table, so a
        snapshot of thousands of tables asks for the next ones together. A table that does not
        exist is left out."""
        by_db: dict[str, list[str]] = {}
        for table in dict.fromkeys(tables):
            by_db.setdefault(table.db, []).append(table.table)
        estimates: dict[TableId, int | None] = {}
        for db, names in by_db.items():
            for first in range(0, len(names), batch):
                part = names[first:first + batch]
                rows = self.fetch(
                    "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                    f"AND TABLE_NAME IN ({', '.join(['%s'] * len(part))})", (db, *part))
                for name, estimate in rows:
                    estimates[TableId(db, text_of(name))] = int(estimate) if estimate is not None else None
        return estimates
