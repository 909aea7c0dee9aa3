"""The facts `dblog.core.resume_verdict` judges, read from a server: its logged, purged and
(MariaDB) per-server-id and applied GTID state, and who it is. Needs REPLICATION CLIENT (BINLOG
MONITOR on MariaDB >= 10.5) for the binlog list, as `dblog check` does."""

from __future__ import annotations

import pymysql

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.resume_verdict import (
    ServerBinlog, ServerHistory, describe_file_refusal, judge_file_resume, judge_resume, refusal_text,
)
from dblog.mysql.binlog import BinlogPurged, SourceDiverged
from dblog.mysql.binlog_retention import purged_gtids
from dblog.mysql.schema import text_of
from dblog.mysql.server_errors import ER_SPECIFIC_ACCESS_DENIED_ERROR, error_code
from dblog.mysql.server_session import ServerSession

__all__ = ["refuse_unless_resumable", "refuse_unless_resumable_at",
           "server_binlog", "server_history"]


def server_history(server: ServerSession, address: str, binlog_list_optional: bool = False) -> ServerHistory:
    """`binlog_list_optional`: without REPLICATION CLIENT, take nothing as purged (`dblog
    check` says what is missing instead)."""
    flavor = server.flavor()
    try:
        purged = purged_gtids(server)
    except pymysql.err.MySQLError as error:
        if not binlog_list_optional or error_code(error) != ER_SPECIFIC_ACCESS_DENIED_ERROR:
            raise
        # Without REPLICATION CLIENT the binlog list is hidden: a purged position is then
        # reported by the binlog dump itself (BinlogPurged), as before this check existed.
        purged = GtidSet.empty(flavor)
    if flavor == "mysql":
        executed, uuid, server_id = server.fetch("SELECT @@GLOBAL.gtid_executed, @@server_uuid, @@server_id")[0]
        return ServerHistory("mysql", f"server_uuid {text_of(uuid)}, server_id {server_id} at {address}",
                             GtidSet.parse(text_of(executed or "").replace("\n", ""), "mysql"), purged)
    logged, state, current, server_id = server.fetch(
        "SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_binlog_state, @@GLOBAL.gtid_current_pos, @@server_id")[0]
    per_server = tuple(Gtid.parse(piece) for piece in text_of(state or "").replace("\n", "").split(",") if piece)
    return ServerHistory("mariadb", f"server_id {server_id} at {address}",
                         GtidSet.parse(text_of(logged or ""), "mariadb"), purged, per_server,
                         GtidSet.parse(text_of(current or ""), "mariadb"))


def refuse_unless_resumable(server: ServerSession, address: str, delivered: GtidSet, offsets_path: str,
                            read_from: GtidSet | None = None) -> None:
    """Raise SourceDiverged (or BinlogPurged) with the one message that says what and the
    choices, unless the server can continue after `delivered`."""
    history = server_history(server, address, binlog_list_optional=True)
    verdict = judge_resume(delivered, history, read_from)
    if verdict.ok:
        return
    message = refusal_text(verdict, delivered, history, offsets_path)
    raise (BinlogPurged if verdict.kind == "purged" else SourceDiverged)(message)


def server_binlog(server: ServerSession, address: str) -> ServerBinlog:
    """The server's identity and binlog files (none listed without REPLICATION CLIENT)."""
    identity = server.files_identity()
    try:
        files = tuple((text_of(row[0]), int(row[1])) for row in server.fetch("SHOW BINARY LOGS"))
    except pymysql.err.MySQLError as error:
        if error_code(error) != ER_SPECIFIC_ACCESS_DENIED_ERROR:
            raise
        files = ()
    return ServerBinlog(identity, address, files)


def refuse_unless_resumable_at(server: ServerSession, address: str, at: FilePosition, written_by: BinlogIdentity,
                               offsets_path: str) -> None:
    """File-position mode: raise SourceDiverged (or BinlogPurged) unless the server is the one
    whose binlog `at` points into and still holds it."""
    binlog = server_binlog(server, address)
    verdict = judge_file_resume(at, written_by, binlog)
    if verdict.ok:
        return
    what, choices = describe_file_refusal(verdict, at, binlog, offsets_path)
    purged = verdict.kind == "purged"
    raise (BinlogPurged if purged else SourceDiverged)(f"{what}. {'Remedy' if purged else 'Choices'}: {choices}")
