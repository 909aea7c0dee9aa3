"""Whether the source is a replica, and whether dblog can capture from it.

dblog reads the binlog of the server it connects to. On a replica, the transactions it applies
from its primary reach its own binlog only with `log_slave_updates` (MySQL ≥ 8.0.26:
`log_replica_updates`) ON; without it the binlog holds only what is written on the replica
itself, and dblog would capture none of the primary's changes — silently. So a replica without
it is refused at start, by name.

Whether the server replicates is what `SHOW SLAVE STATUS` (MySQL ≥ 8.0.22: `SHOW REPLICA STATUS`,
MariaDB: `SHOW ALL SLAVES STATUS`, one row per source) says. It needs REPLICATION CLIENT on MySQL
but SLAVE MONITOR on MariaDB ≥ 10.5, which dblog's user may lack; MariaDB then still tells, to
anyone, whether the server ever applied replicated transactions (`gtid_slave_pos`), and with
`log_slave_updates` OFF that is refused too, with both remedies (dblog cannot tell a replica from a
promoted one without the privilege).

Pure: the session reads the rows and variables (`ServerSession.replication_sources`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReplicationSource", "replication_sources", "replica_refusal", "replica_summary"]

# MySQL 8.0.22+ names the columns Replica_/Source_; MariaDB and older MySQL Slave_/Master_.
_RENAMED = (("Replica_", "Slave_"), ("Source_", "Master_"), ("_Source", "_Master"))


@dataclass(frozen=True)
class ReplicationSource:
    """One primary this server replicates from (a row of SHOW SLAVE STATUS)."""

    connection: str  # MariaDB's multi-source connection name ("" for the default one)
    host: str
    port: int
    io_running: str  # Yes / No / Connecting
    sql_running: str
    seconds_behind: int | None  # None: not replicating (a thread stopped)
    last_error: str

    @property
    def address(self) -> str:
        name = f" (connection {self.connection!r})" if self.connection else ""
        return f"{self.host}:{self.port}{name}"

    @property
    def running(self) -> bool:
        return self.io_running == "Yes" and self.sql_running == "Yes"


def replication_sources(rows: list[dict[str, object]]) -> list[ReplicationSource]:
    """The rows of SHOW SLAVE/REPLICA STATUS (column name → value), whatever the server names
    its columns."""
    sources = []
    for row in rows:
        value = {}
        for name, item in row.items():
            for new, old in _RENAMED:
                name = name.replace(new, old)
            value[name] = item
        if not value.get("Master_Host"):
            continue  # a connection that was reset: no source configured
        behind = value.get("Seconds_Behind_Master")
        sources.append(ReplicationSource(
            connection=str(value.get("Connection_name") or value.get("Channel_Name") or ""),
            host=str(value["Master_Host"]), port=int(value.get("Master_Port") or 0),
            io_running=str(value.get("Slave_IO_Running") or ""), sql_running=str(value.get("Slave_SQL_Running") or ""),
            seconds_behind=None if behind in (None, "") else int(behind),
            last_error=str(value.get("Last_IO_Error") or value.get("Last_SQL_Error") or value.get("Last_Error") or "")))
    return sources


def _setting(flavor: str) -> str:
    return "log_slave_updates" if flavor == "mariadb" else "log_replica_updates (log_slave_updates before 8.0.26)"


def replica_refusal(flavor: str, sources: list[ReplicationSource] | None, logs_replicated: bool,
                    applied_replicated: str) -> tuple[str, str] | None:
    """Why dblog cannot capture from this server, and the remedy; None when it can. `sources`:
    None when the user may not read them; `logs_replicated`: log_slave_updates/log_replica_updates;
    `applied_replicated`: MariaDB's gtid_slave_pos ("" when it never applied a replicated
    transaction)."""
    if logs_replicated:
        return None
    setting = _setting(flavor)
    remedy = (f"set {setting}=ON on it (in its configuration; a restart on MariaDB), or point dblog at the "
              "primary (source.host)")
    if sources:
        return (f"the source replicates from {', '.join(source.address for source in sources)} with {setting} "
                "OFF: what it applies from there never reaches its binlog, so dblog would capture none of "
                "those changes", remedy[0].upper() + remedy[1:])
    if sources is None and applied_replicated:
        return (f"the source applied replicated transactions (gtid_slave_pos {applied_replicated}) with {setting} "
                "OFF, and dblog's user may not read its replication status to tell whether it still replicates: "
                "if it does, dblog would capture none of what it applies",
                f"GRANT SLAVE MONITOR ON *.* to dblog's user (a promoted former replica then passes), or {remedy}")
    return None


def replica_summary(sources: list[ReplicationSource] | None, applied_replicated: str) -> tuple[str, str, str | None]:
    """`dblog check`'s line on the source's replication: (status, detail, remedy)."""
    if sources is None and not applied_replicated:
        return "ok", "not a replica (it never applied a replicated transaction: gtid_slave_pos is empty)", None
    if sources is None:
        return ("skip", "dblog's user may not read the replication status",
                "GRANT SLAVE MONITOR ON *.* (MariaDB ≥ 10.5; REPLICATION CLIENT on MySQL) to let dblog tell whether "
                "the source is a replica")
    if not sources:
        return "ok", "not a replica (no replication source configured)", None
    stopped = [source for source in sources if not source.running]
    if stopped:
        return ("warn", "a replica whose replication is stopped: " + "; ".join(
                    f"{source.address}: IO {source.io_running}, SQL {source.sql_running}"
                    + (f" ({source.last_error})" if source.last_error else "") for source in stopped),
                "dblog captures nothing new until replication runs again (START SLAVE / START REPLICA), and "
                "snapshot chunks read the replica's present, older state meanwhile")
    lag = max(source.seconds_behind or 0 for source in sources)
    return ("ok", f"a replica of {', '.join(source.address for source in sources)}, replicating, {lag} s behind "
                  "(dblog's records follow the replica: they lag the primary as much)", None)
