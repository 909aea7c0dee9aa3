"""What each Iceberg table holds of the binlog, and which changes it still lacks.

Each commit of the sink carries, in its Iceberg snapshot's summary, the binlog GTID position
the engine's checkpoint stands at (`dblog.position`), the source's flavor, and the highest
binlog sequence (`binlog_sequence`) the table holds (`dblog.sequence`). On start the sink
reads them back (`CommittedPositions.committed_in`) from the newest dblog snapshot among the
current snapshot and its ancestors (`lineage`: a rollback takes the position back with the
rows), and drops every binlog change whose transaction the table already holds (`is_new`).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from dblog.core.events import RowChange, TableId
from dblog.core.sql import quote_identifier as quote
from dblog.core.gtid import Gtid, GtidSet
from dblog.sinks.base import SinkError
from dblog.sinks.iceberg.maintenance import lineage
from dblog.sinks.iceberg.session import iceberg_table

if TYPE_CHECKING:
    from dblog.sinks.iceberg.targets import Target

POSITION_PROPERTY = "dblog.position"
FLAVOR_PROPERTY = "dblog.flavor"
SEQUENCE_PROPERTY = "dblog.sequence"  # the highest binlog sequence the table holds
# Set by the DELETE of a TRUNCATE/DROP/RENAME: its DDL transaction and whose rows it deleted
DELETE_GTID_PROPERTY = "dblog.delete-gtid"
DELETE_SOURCE_PROPERTY = "dblog.delete-source"  # `db`.`table` of the source table

_FILE_NUMBER = re.compile(r"(\d+)$")


def binlog_sequence(change: RowChange) -> int:
    """A number that grows with the binlog position on one server: file number, byte
    position, row within the event."""
    source = change.source
    return (_file_number(source.file or "") * 10**12 + (source.pos or 0)) * 10**6 + source.row


@functools.lru_cache(maxsize=64)
def _file_number(file: str) -> int:
    """mariadb-bin.000042 → 42 (every change of a file asks: a regex search each was measurable)."""
    match = _FILE_NUMBER.search(file)
    return int(match.group(1)) if match else 0


def commit_properties(flavor: str, sequence: int, position: GtidSet | None) -> dict[str, str]:
    """The snapshot summary of one commit (`iceberg_commit_properties`): the sequence and
    flavor, and the position when there is one."""
    properties = {SEQUENCE_PROPERTY: str(sequence), FLAVOR_PROPERTY: flavor}
    if position is not None:
        properties[POSITION_PROPERTY] = str(position)
    return properties


def delete_properties(gtid: Gtid, source: TableId) -> dict[str, str]:
    """What a DELETE of `source`'s rows for DDL transaction `gtid` adds to its snapshot summary."""
    return {DELETE_GTID_PROPERTY: str(gtid), DELETE_SOURCE_PROPERTY: _source_name(source)}


def _source_name(table: TableId) -> str:
    return f"{quote(table.db)}.{quote(table.table)}"


def is_new(target: Target, change: RowChange) -> bool:
    """False for a binlog change the table already holds (replayed after a crash). A change
    at or below the table's sequence whose transaction it lacks stops the sink: binlog
    positions only grow on one server (a `RESET MASTER`, or a new primary)."""
    gtid = Gtid.parse(change.source.gtid) if change.source.gtid else None
    if gtid is not None and target.committed is not None and gtid in target.committed:
        return False
    sequence = binlog_sequence(change)
    if gtid is None and target.committed is not None:
        # Read by binlog file and position (no GTIDs, dblog.core.file_positions): the coordinate
        # names the change; the engine checked at start that the server is the one it names.
        return sequence > target.sequence
    if target.committed is not None and sequence <= target.sequence:
        raise SinkError(
            f"binlog change {change.source.gtid} at {change.source.file}:{change.source.pos} is not newer than "
            f"what {target.qualified} holds although its transaction is not in the table: the binlog was reset "
            "or dblog now reads another server. Drop the Iceberg tables and offsets and snapshot again"
        )
    return True


class CommittedPositions:
    """Reads the positions the sink's commits left in the tables of one Spark session."""

    def __init__(self, spark, flavor: str) -> None:
        self.spark = spark
        self.flavor = flavor  # of positions written before dblog stored one

    def committed_in(self, qualified: str) -> tuple[GtidSet, int] | None:
        """(position, sequence) of the newest snapshot dblog wrote among the current snapshot and
        its ancestors (`lineage`), not the newest by commit time: after a rollback the table holds
        the older snapshot's rows, so its position, and the changes after it are replayed.
        Maintenance carries them over to its own snapshots; other writers' snapshots have none."""
        table = iceberg_table(self.spark, qualified)
        table.refresh()  # the catalog caches tables
        for snapshot in lineage(table):
            summary = snapshot.summary()  # a Java map: one round trip a lookup
            position = summary.get(POSITION_PROPERTY)
            if position is not None:
                flavor = summary.get(FLAVOR_PROPERTY) or self.flavor
                return GtidSet.parse(position, flavor), int(summary.get(SEQUENCE_PROPERTY) or 0)
        return None

    def deleted_before(self, qualified: str, source: TableId, gtid: Gtid) -> bool:
        """Whether a table that holds the DDL's transaction needs no DELETE of `source`'s rows.

        One statement may drop several source tables of one shared target (`DROP TABLE a, b`,
        `DROP DATABASE`, a RENAME of several): one DELETE each, every one recording the
        statement's GTID in the position. So the GTID alone does not say that this source's
        rows went. The lineage, newest first, back to the first snapshot holding the GTID:
        - a snapshot this statement's DELETE of `source` wrote (or maintenance carried over): done;
        - a snapshot holding the GTID that no DELETE of this statement wrote: something written
          after the statement landed, so the statement was applied whole before a crash; deleting
          now could delete rows written after it;
        - only DELETEs of this statement's other tables: the crash came between two of them and
          nothing was written since, so `source`'s rows there are older than the DROP: delete them."""
        name = _source_name(source)
        for snapshot in lineage(iceberg_table(self.spark, qualified)):
            summary = snapshot.summary()
            position = summary.get(POSITION_PROPERTY)
            if position is None:
                continue  # another writer's snapshot
            if gtid not in GtidSet.parse(position, summary.get(FLAVOR_PROPERTY) or self.flavor):
                return False  # before the statement
            if summary.get(DELETE_GTID_PROPERTY) != str(gtid):
                return True  # after the statement
            if summary.get(DELETE_SOURCE_PROPERTY) == name:
                return True
        return False  # the statement's first snapshots expired: deleting again only deletes older rows
