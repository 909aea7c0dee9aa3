"""The binlog events the reader process pickles (as constructor calls: `_dumps`) come back whole."""

import pickle

from dblog.core.events import (Heartbeat, RowChange, SchemaChange, SourceInfo, TableId, TransactionEnd,
                               TransactionStart)
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.binlog.process import _dumps

SOURCE = SourceInfo(gtid="0-1-7", file="mariadb-bin.000002", pos=4711, row=3, server_id=1, ts_ms=1_764_000_000_000,
                    snapshot=True, initial_marker="last")
EVENTS = [
    SOURCE,
    RowChange(TableId("shop", "orders"), "u", (2,), {"id": 1, "note": "é"}, {"id": 2, "note": None}, SOURCE,
              before_key=(1,), size=181, definition=("an", "adapter's", "definition")),
    TransactionStart(Gtid("0", 7, server_id=1), 1, 1_764_000_000_000, "mariadb-bin.000002", 4000),
    TransactionEnd(Gtid("0", 7), BinlogCoordinate(2, 4800, "mariadb-bin.000002"), GtidSet.parse("0-1-6")),
    SchemaChange(Gtid("0", 8), "shop", "ALTER TABLE orders ADD note TEXT", SOURCE),
    Heartbeat("mariadb-bin.000002", 4900),
]


def test_every_field_survives_a_round_trip():
    for event in EVENTS:
        copy = pickle.loads(_dumps(event))
        assert type(copy) is type(event)
        for name in event.__slots__:  # compare=False fields (size, definition) too
            assert getattr(copy, name) == getattr(event, name), (type(event).__name__, name)
