"""The Iceberg sink's "already holds it" for changes read by binlog file and position (no GTIDs,
dblog.core.file_positions): a change replayed after a crash carries no GTID, so its binlog
coordinate names it. Before, a replayed change without a GTID stopped the sink ("not newer than
what ... holds although its transaction is not in the table")."""

from __future__ import annotations

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.sinks.iceberg.positions import binlog_sequence, is_new
from dblog.sinks.iceberg.targets import Target


def _change(pos: int) -> RowChange:
    return RowChange(TableId("shop", "t"), "c", (1,), None, {"id": 1}, SourceInfo(None, "binlog.000004", pos, 0, 1, 0))


def test_a_replayed_change_without_a_gtid_is_recognised_by_its_binlog_coordinate():
    held = _change(500)
    target = Target(TableId("shop", "t"), "`lake`.`shop`.`t`", False, [], (),
                    committed=GtidSet.parse("0-0-100", "mariadb"), sequence=binlog_sequence(held))
    assert not is_new(target, held)
    assert not is_new(target, _change(400))
    assert is_new(target, _change(600))
