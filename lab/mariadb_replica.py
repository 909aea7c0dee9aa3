"""A private MariaDB replica of a private MariaDB primary (both `dblog.demo.localstack.LocalMariaDB`),
replicating by GTID, for the tests of capture from replicas and of failover.

    primary = LocalMariaDB()
    replica = MariaDBReplica(primary)           # read_only, log_slave_updates, replicating
    replica.caught_up()                         # the replica applied all the primary logged
    replica.stop_replication(); replica.promote()

The replica starts from an empty `gtid_slave_pos`, so it applies the primary's whole binlog: give
it a primary whose binlog was never purged (a fresh one). Replication uses the primary's root
account over 127.0.0.1, as every test connection does.
"""

from __future__ import annotations

from collections.abc import Sequence

from dblog.demo.localstack import LocalMariaDB

__all__ = ["MariaDBReplica", "ReplicationBroken"]


class ReplicationBroken(RuntimeError):
    """The replica stopped replicating (its SQL or IO thread's error), or did not catch up."""


class MariaDBReplica:
    """`server`: the replica itself (a LocalMariaDB with its own id, read-only by default)."""

    def __init__(self, primary: LocalMariaDB, *, server_id: int = 2, log_slave_updates: bool = True,
                 read_only: bool = True, extra_args: Sequence[str] = ()) -> None:
        self.primary = primary
        options = [f"--server-id={server_id}", f"--log-slave-updates={'ON' if log_slave_updates else 'OFF'}",
                   f"--read-only={'ON' if read_only else 'OFF'}", *extra_args]
        self.server = LocalMariaDB(extra_args=options)
        try:
            self.server.execute(
                "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
                (primary.host, primary.port, primary.user, primary.password))
            self.start_replication()
        except BaseException:
            self.server.stop()
            raise

    def start_replication(self) -> None:
        self.server.execute("START SLAVE")

    def stop_replication(self) -> None:
        self.server.execute("STOP SLAVE")

    def status(self) -> dict[str, object]:
        """SHOW SLAVE STATUS as a dict (empty once the replica was promoted)."""
        connection = self.server.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SHOW SLAVE STATUS")
                row = cursor.fetchone()
                return dict(zip([column[0] for column in cursor.description], row)) if row else {}
        finally:
            connection.close()

    def caught_up(self, timeout: float = 60.0) -> None:
        """Return once the replica applied every transaction the primary has logged so far."""
        (position,), = self.primary.execute("SELECT @@gtid_binlog_pos")
        (waited,), = self.server.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout))
        if waited != 0:
            status = self.status()
            raise ReplicationBroken(
                f"the replica did not reach the primary's {position} in {timeout:.0f}s (it is at "
                f"{self.server.execute('SELECT @@gtid_slave_pos')[0][0]}; IO: {status.get('Slave_IO_Running')} "
                f"{status.get('Last_IO_Error')!r}, SQL: {status.get('Slave_SQL_Running')} "
                f"{status.get('Last_SQL_Error')!r})")

    def promote(self) -> None:
        """Make the replica a primary: replication stopped and forgotten, writes allowed."""
        self.server.execute("STOP SLAVE")
        self.server.execute("RESET SLAVE ALL")
        self.server.execute("SET GLOBAL read_only = OFF")

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> "MariaDBReplica":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
