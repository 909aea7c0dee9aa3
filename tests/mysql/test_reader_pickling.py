"""The binlog events the reader process pickles (as constructor calls: `_dumps`) come back whole."""

import dataclasses
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
    TransactionEnd(Gtid("0", 7, server_id=1), BinlogCoordinate(2, 4800, "mariadb-bin.000002"), GtidSet.parse("0-1-6")),
    SchemaChange(Gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562", 8), "shop", "ALTER TABLE orders ADD note TEXT", SOURCE),
    TransactionEnd(Gtid.mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562", 9, "batch"), None,
                   GtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-8:batch:1-8")),
    Heartbeat("mariadb-bin.000002", 4900),
]


def assert_same(copy, original, path):
    """Equal field by field, recursively, compare=False fields (size, definition, a Gtid's
    server_id) included: the reducers spell the fields out by hand."""
    assert type(copy) is type(original), path
    if dataclasses.is_dataclass(original):
        for field in dataclasses.fields(original):
            assert_same(getattr(copy, field.name), getattr(original, field.name), f"{path}.{field.name}")
    else:
        assert copy == original, path


def test_every_field_survives_a_round_trip():
    for event in EVENTS:
        assert_same(pickle.loads(_dumps(event)), event, type(event).__name__)


def test_a_gtid_comes_back_usable():
    gtid = Gtid("0", 7, server_id=1)
    start, end = TransactionStart(gtid, 1), TransactionEnd(gtid)  # as the decoder yields them
    copy = pickle.loads(_dumps([start, end]))
    assert copy[0].gtid is copy[1].gtid  # one object shared, pickled once
    gtid = copy[1].gtid
    assert (hash(gtid), str(gtid), gtid.flavor) == (hash(end.gtid), "0-1-7", "mariadb")
    assert GtidSet.parse("0-1-6").with_gtid(gtid) == GtidSet.parse("0-1-7")


def test_a_tagged_gtid_comes_back_usable():
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    end = TransactionEnd(Gtid.mysql(uuid, 9, "batch"))
    gtid = pickle.loads(_dumps(end)).gtid
    assert (hash(gtid), str(gtid), gtid.flavor) == (hash(end.gtid), f"{uuid}:batch:9", "mysql")
    assert gtid != Gtid.mysql(uuid, 9)
    assert GtidSet.parse(f"{uuid}:1-9:batch:1-8").with_gtid(gtid) == GtidSet.parse(f"{uuid}:1-9:batch:1-9")
