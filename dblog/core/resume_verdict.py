"""Whether a server can continue dblog's stream: the one verdict `dblog run` (at every start
and reconnect, before it reads anything) and `dblog check` both give.

dblog's position is the set of transactions it has delivered. A server can continue from it
only when it holds every one of them in its binlog. After a failover the new server may not:

- it is *behind*: it has not logged them yet (a lagging replica); it may catch up;
- it *diverged*: in a domain it logged other transactions numbered at or past dblog's (MariaDB:
  the new primary's own writes), so it never will; sequence numbers alone do not tell this
  apart from "holds it": MariaDB's `@@gtid_binlog_state` (the last GTID of each domain *and
  server id* ever logged) does, and the server itself refuses the position by that same rule
  (sql/sql_repl.cc, check_slave_start_position: "which is not in the master's binlog");
- it applied them without logging them (a replica without `log_slave_updates`: its
  `@@gtid_current_pos` holds them, its binlog does not): it cannot send what follows them;
- it *purged* binlog files dblog still needs (its own message and remedy, as before).

Reading anything from such a server (a snapshot chunk included) would write rows of a state that
is not the one dblog delivered from: the engine stops before it does.

Without GTIDs (file-position mode, `dblog.core.file_positions`) the position is a binlog file and
offset, which mean something only on the server that wrote them: `judge_file_resume` refuses
another server (its server_uuid or server_id differs: a failover, or a server rebuilt), a file
purged since, and a position past the end of the server's binlog (a `RESET MASTER`, or files
restored from elsewhere). There is nothing to wait for in any of these: no GTIDs tell a lagging
replica from a diverged one.

Pure code: the facts come from `dblog.mysql.server_history`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import Flavor, Gtid, GtidError, GtidSet

__all__ = ["PURGED_REMEDY", "RIGHT_SERVER", "WAIT", "ResumeVerdict", "ServerBinlog", "ServerHistory",
           "describe_file_refusal", "describe_missing", "describe_refusal", "judge_file_resume", "judge_resume",
           "last_gtids", "refusal_text", "resnapshot_choice"]

Kind = Literal["ok", "behind", "diverged", "not_logged", "purged", "undecidable", "other_server", "beyond_end"]


@dataclass(frozen=True)
class ServerHistory:
    """What a server says about the transactions it holds."""

    flavor: Flavor
    identity: str  # e.g. "server_id 2 at 127.0.0.1:3307" (MySQL: with its server_uuid)
    logged: GtidSet  # MariaDB @@gtid_binlog_pos, MySQL @@gtid_executed
    purged: GtidSet  # no longer in any binlog file
    # MariaDB only: @@gtid_binlog_state, the last GTID of each (domain, server id) ever logged
    logged_per_server: tuple[Gtid, ...] = ()
    # MariaDB only: @@gtid_current_pos, what it applied (logged or replicated)
    applied: GtidSet | None = None


@dataclass(frozen=True)
class ResumeVerdict:
    kind: Kind
    missing: GtidSet | None = None  # delivered transactions the server's binlog lacks
    lost: GtidSet | None = None  # purged transactions dblog has not delivered
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def last_gtids(position: GtidSet) -> tuple[Gtid, ...]:
    """A MariaDB position's last GTID per domain, with its server id (GtidError when the
    position has no MariaDB spelling)."""
    return tuple(Gtid.parse(piece) for piece in str(position).split(",") if piece)


def judge_resume(delivered: GtidSet, server: ServerHistory, read_from: GtidSet | None = None) -> ResumeVerdict:
    """Whether `server` can continue after `delivered`, reading its binlog from `read_from`
    (default: `delivered`; earlier to read prepared XA transactions again). Divergence is judged
    before purging: a purged file does not matter when the server lacks what dblog delivered."""
    missing = delivered - server.logged
    if server.flavor == "mariadb":
        try:
            verdict = _judge_mariadb(delivered, server, missing)
        except GtidError as error:
            return ResumeVerdict("undecidable", detail=str(error))
    else:
        verdict = ResumeVerdict("behind", missing=missing) if missing else None
    if verdict is not None:
        return verdict
    lost = server.purged - (delivered if read_from is None else read_from)
    if lost:
        return ResumeVerdict("purged", lost=lost)
    return ResumeVerdict("ok")


def _judge_mariadb(delivered: GtidSet, server: ServerHistory, missing: GtidSet) -> ResumeVerdict | None:
    held = {(gtid.source, gtid.server_id): gtid.seq for gtid in server.logged_per_server}
    diverged = []
    for gtid in last_gtids(delivered):
        if held.get((gtid.source, gtid.server_id), 0) >= gtid.seq:
            continue  # the server logged this very transaction (and what precedes it)
        if (server.logged.last(gtid.source) or 0) >= gtid.seq:
            diverged.append(gtid)  # numbered past it, by other servers: never this one
    if diverged:
        return ResumeVerdict("diverged", missing=missing,
                             detail=", ".join(str(gtid) for gtid in diverged))
    if not missing:
        return None
    if server.applied is not None and not (delivered - server.applied):
        return ResumeVerdict("not_logged", missing=missing)
    return ResumeVerdict("behind", missing=missing)


def _spelled(position: GtidSet) -> str:
    try:
        return str(position)
    except GtidError:  # a MariaDB set that is not a prefix per domain
        return repr(position)


def describe_missing(missing: GtidSet, delivered: GtidSet) -> str:
    """The delivered transactions a server lacks. MariaDB spells a position by its last GTID per
    domain; what is missing is a range of a domain (3..5), named with the delivered GTID that ends it."""
    if missing.flavor != "mariadb":
        return str(missing)
    last = {gtid.source: gtid for gtid in last_gtids(delivered)}
    parts = []
    for domain in sorted(missing.sources(), key=int):
        for first, end in missing.intervals(domain):
            gtid = last[domain]
            named = f"{domain}-{gtid.server_id}-{end}"
            parts.append(named if first == end else f"domain {domain} seq {first} to {end} (up to {named})")
    return ", ".join(parts)


PURGED_REMEDY = ("move the offsets file away and start again (with snapshot.startup = \"initial\" every captured "
                 "table is snapshotted from the current position; snapshot.startup = \"when_needed\" does that by "
                 "itself), or keep the offsets and send execute-snapshot "
                 "for the tables you need; and keep binlogs longer than dblog may be stopped")
RIGHT_SERVER = "point source.host/source.port at the server that holds them"
WAIT = "wait for it to catch up (dblog check shows when it holds them; run dblog again then)"


def resnapshot_choice(offsets_path: str) -> str:
    return (f"resume from this server and snapshot the captured tables again: move {offsets_path} away and start "
            "with snapshot.startup = \"initial\" (dblog never does this by itself: rows it delivered that this "
            "server never had stay in the sink until you remove them)")


def describe_refusal(verdict: ResumeVerdict, delivered: GtidSet, server: ServerHistory,
                     offsets_path: str) -> tuple[str, str]:
    """The one error that stops dblog, as (what diverged and what it means, the choices): one
    sentence for `dblog run` (`refusal_text`), a line and its remedy for `dblog check`."""
    position = _spelled(delivered) if delivered else "(the start)"
    resnapshot, right_server = resnapshot_choice(offsets_path), RIGHT_SERVER
    if verdict.kind == "purged":
        return (f"the server ({server.identity}) cannot send the binlog from dblog's position {position}: the binlog "
                f"files up to {server.purged} were purged (expire_logs_days / binlog_expire_logs_seconds or PURGE "
                "BINARY LOGS). Changes made since are lost to dblog", PURGED_REMEDY)
    if verdict.kind == "undecidable":
        return (f"dblog cannot tell whether the server ({server.identity}) holds every transaction it delivered "
                f"(position {position}): {verdict.detail}. dblog read nothing from it", f"{right_server}; or {resnapshot}")
    missing = describe_missing(verdict.missing, delivered) if verdict.missing else verdict.detail
    if verdict.kind == "diverged":
        what = (f"the server ({server.identity}) diverged from the history dblog delivered: it never logged "
                f"{verdict.detail} (its binlog: {server.logged or 'empty'}; per server id: "
                f"{', '.join(str(gtid) for gtid in server.logged_per_server) or 'none'}), and it logged other "
                "transactions numbered past them, so waiting cannot help")
        choices = f"{right_server}; or {resnapshot}"
    elif verdict.kind == "not_logged":
        what = (f"the server ({server.identity}) applied the transactions dblog delivered ({missing}) but did not "
                "log them to its binlog (a replica without log_slave_updates), so it cannot send what follows them")
        choices = (f"turn log_slave_updates on and wait until the server logs new transactions past them; "
                   f"{right_server}; or {resnapshot}")
    else:
        what = (f"the server ({server.identity}) lacks transactions dblog already delivered: {missing} (its "
                f"binlog ends at {server.logged or 'its start'})")
        choices = f"{WAIT}; {right_server}; or {resnapshot}"
    return (f"{what}. These are transactions dblog delivered that this server never had: reading from it would "
            f"write rows of another history, so dblog read nothing from it (position {position})", choices)


def refusal_text(verdict: ResumeVerdict, delivered: GtidSet, server: ServerHistory, offsets_path: str) -> str:
    what, choices = describe_refusal(verdict, delivered, server, offsets_path)
    return f"{what}. {'Remedy' if verdict.kind == 'purged' else 'Choices'}: {choices}"


@dataclass(frozen=True)
class ServerBinlog:
    """What a server says about its binlog files (file-position mode)."""

    identity: BinlogIdentity
    address: str
    files: tuple[tuple[str, int], ...]  # SHOW BINARY LOGS: (name, size), oldest first; () unknown (no privilege)


def judge_file_resume(at: FilePosition, written_by: BinlogIdentity, server: ServerBinlog) -> ResumeVerdict:
    """Whether `server` can continue from `at`, a position in the binlog of `written_by`."""
    if not written_by.same_binlog(server.identity):
        return ResumeVerdict("other_server", detail=f"the offsets point into the binlog of {written_by.describe()}")
    if not server.files:
        return ResumeVerdict("ok")  # the binlog list is hidden: the dump itself reports a purged file
    sizes = dict(server.files)
    wanted = at.coordinate
    first, last = (FilePosition(name, 4).coordinate for name in (server.files[0][0], server.files[-1][0]))
    if wanted.sequence < first.sequence:
        return ResumeVerdict("purged", detail=f"its oldest binlog file is {server.files[0][0]}")
    if wanted.sequence > last.sequence or (at.file in sizes and at.pos > sizes[at.file]):
        end = f"{server.files[-1][0]}:{server.files[-1][1]}"
        return ResumeVerdict("beyond_end", detail=f"its binlog ends at {end}")
    if at.file not in sizes:
        return ResumeVerdict("purged", detail=f"it has no file {at.file} (its files: "
                                              f"{server.files[0][0]} to {server.files[-1][0]})")
    return ResumeVerdict("ok")


def describe_file_refusal(verdict: ResumeVerdict, at: FilePosition, server: ServerBinlog,
                          offsets_path: str) -> tuple[str, str]:
    """As `describe_refusal`, for a file position."""
    who = f"the server ({server.identity.describe()} at {server.address})"
    resnapshot = resnapshot_choice(offsets_path)
    if verdict.kind == "purged":
        return (f"{who} cannot send the binlog from dblog's position {at}: {verdict.detail}; the files holding it "
                "were purged (expire_logs_days / binlog_expire_logs_seconds or PURGE BINARY LOGS). Changes made "
                "since are lost to dblog", PURGED_REMEDY)
    if verdict.kind == "other_server":
        what = (f"{who} is not the server whose binlog dblog's position {at} points into: {verdict.detail}. A binlog "
                "file and offset mean nothing on another server (without GTIDs no other server can continue dblog's "
                "stream), so dblog read nothing from it")
    else:
        what = (f"{who} has no binlog position {at}: {verdict.detail} (was RESET MASTER run, or the server rebuilt?). "
                "dblog read nothing from it")
    return what, f"{RIGHT_SERVER}; or {resnapshot}"
