"""MySQL's transaction boundaries, as `BinlogSource` must read them: one test per shape of
transaction MySQL logs, named after the statement, fed as encoded events through the real
source and decoder (tests/support/scripted_binlog.py: no MySQL server is installable here).
Every stream must also keep the adapter's contract (tests/support/binlog_contract.py).

Where the shapes come from (MySQL 8.0 / 8.4 source):
* sql/rpl_trx_boundary_parser.cc (Transaction_boundary_parser::get_event_boundary_type,
  update_state): a GTID starts a transaction; `BEGIN` and `XA START` open a DML one; an XID,
  `COMMIT`, `ROLLBACK` or an XA_PREPARE event ends it; `XA ROLLBACK` ends an XA transaction;
  any other statement right after a GTID is a DDL, the whole transaction (implicit commit).
* libbinlogevents Xa_prepare_event: `one_phase`, then the XID; sql/log_event.cc prints it as
  `XA COMMIT ... ONE PHASE` or `XA PREPARE ...`. The decision of a prepared one is logged later
  as a query `XA COMMIT xid` / `XA ROLLBACK xid` under its own GTID (MySQL manual, "XA
  Transaction Restrictions": XA transactions are written to the binary log in two parts).
* sql/sql_show.cc (store_create_info): since 8.0.21 CREATE TABLE ... SELECT is logged as
  `CREATE TABLE ... ) START TRANSACTION ENGINE=...`, its rows and an XID, one transaction
  (WL#13355, atomic CTAS).
* TRANSACTION_PAYLOAD (binlog_transaction_compression, 8.0.20): every inner event carries the
  payload's position.
* Tagged GTIDs (8.3+, `SET gtid_next='AUTOMATIC:tag'`): a GTID_TAGGED_LOG_EVENT opens the
  transaction (Gtid_event, libs/mysql/binlog/event/control_events.cpp); each (UUID, tag) numbers
  its own transactions (WL#15294), so `uuid:5` and `uuid:tag:5` are two transactions.
"""

from __future__ import annotations

import pytest
from support import binlog_encoder as be
from support.binlog_contract import BinlogContract
from support.scripted_binlog import ScriptedPrimary

from dblog.core.events import RowChange, SchemaChange, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.mysql.binlog import BinlogError

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
TABLE = be.Table(12, "shop", "t", [be.int_("id", nullable=False), be.varchar("name", 20)], primary_key=(0,))
XID = "X'7831',X'',1"  # 'x1', as MySQL spells an XID in its XA statements (XID::serialize)


def gtid(n: int) -> Gtid:
    return Gtid.mysql(UUID, n)


def shape(events: list) -> list[str]:
    """Start:n, c:key@gtid, DDL, End:n(+commit)."""
    out = []
    for event in events:
        if isinstance(event, TransactionStart):
            out.append(f"Start:{event.gtid.seq}")
        elif isinstance(event, RowChange):
            out.append(f"{event.op}:{event.key[0]}@{Gtid.parse(event.source.gtid).seq}")
        elif isinstance(event, SchemaChange):
            out.append("DDL")
        elif isinstance(event, TransactionEnd):
            out.append(f"End:{event.gtid.seq}" + ("+commit" if event.commit else ""))
    return out


def read(primary: ScriptedPrimary, start: GtidSet | None = None, **options) -> list:
    events = primary.read(start, **options)
    BinlogContract(start).check_all(events)
    return events


def insert(log: be.BinlogWriter, *keys: int) -> None:
    log.table_map(TABLE)
    log.rows(TABLE, "c", [[key, f"n{key}"] for key in keys])


def prepare_xa(primary: ScriptedPrimary, n: int, *keys: int, one_phase: bool = False, gtrid: bytes = b"x1") -> None:
    xid = f"X'{gtrid.hex()}',X'',1"
    with primary.transaction(gtid(n)) as log:
        log.query(f"XA START {xid}", db="shop")
        insert(log, *keys)
        log.query(f"XA END {xid}", db="shop")
        log.add(be.XA_PREPARE, be.xa_prepare_body(gtrid, b"", one_phase=one_phase))


def commit_insert(primary: ScriptedPrimary, n: int, *keys: int) -> None:
    with primary.transaction(gtid(n)) as log:
        log.query("BEGIN", db="shop")
        insert(log, *keys)
        log.xid()


def test_begin_insert_commit():
    primary = ScriptedPrimary()
    commit_insert(primary, 1, 1, 2)
    assert shape(read(primary)) == ["Start:1", "c:1@1", "c:2@1", "End:1+commit"]


def test_tagged_and_untagged_transactions_of_one_server():
    primary = ScriptedPrimary()

    def batch(n: int) -> Gtid:
        return Gtid.mysql(UUID, n, "Batch")

    commit_insert(primary, 1, 1)
    for n, key in ((1, 2), (2, 3)):
        with primary.transaction(batch(n)) as log:
            log.query("BEGIN", db="shop")
            insert(log, key)
            log.xid()
    with primary.transaction(batch(3)) as log:
        log.query("ALTER TABLE t ADD COLUMN note TEXT", db="shop")
    commit_insert(primary, 2, 4)
    events = read(primary)
    assert [str(e.gtid) for e in events if isinstance(e, TransactionStart)] == [
        f"{UUID}:1", f"{UUID}:batch:1", f"{UUID}:batch:2", f"{UUID}:batch:3", f"{UUID}:2"]
    assert {e.key[0]: e.source.gtid for e in events if isinstance(e, RowChange)} == {
        1: f"{UUID}:1", 2: f"{UUID}:batch:1", 3: f"{UUID}:batch:2", 4: f"{UUID}:2"}
    assert [e.gtid for e in events if isinstance(e, SchemaChange)] == [batch(3)]

    # A restart from what was delivered: the untagged :2 is new although :batch:2 was delivered.
    delivered = GtidSet.parse(f"{UUID}:1:batch:1-2", "mysql")
    again = read(primary, delivered)
    assert primary.connections[-1] == delivered
    assert [str(e.gtid) for e in again if isinstance(e, TransactionStart)] == [f"{UUID}:batch:3", f"{UUID}:2"]


def test_create_table_implicitly_commits():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query("CREATE TABLE t2 (id INT PRIMARY KEY)", db="shop")
    commit_insert(primary, 2, 7)
    assert shape(read(primary)) == ["Start:1", "DDL", "End:1", "Start:2", "c:7@2", "End:2+commit"]


def test_create_table_select_logs_start_transaction_and_keeps_its_rows():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query("CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `name` varchar(20) DEFAULT NULL\n) START TRANSACTION "
                  "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci", db="shop")
        insert(log, 1, 2)
        log.xid()
    events = read(primary)
    assert shape(events) == ["Start:1", "DDL", "c:1@1", "c:2@1", "End:1+commit"]
    assert "START TRANSACTION" in events[1].sql


def test_a_column_named_start_does_not_open_a_transaction():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query("ALTER TABLE t ADD COLUMN `start transaction` INT", db="shop")
    commit_insert(primary, 2, 3)
    assert shape(read(primary)) == ["Start:1", "DDL", "End:1", "Start:2", "c:3@2", "End:2+commit"]


def test_gtid_then_rows_without_begin():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        insert(log, 5)
        log.xid()
    assert shape(read(primary)) == ["Start:1", "c:5@1", "End:1+commit"]


def test_begin_insert_into_a_non_transactional_table_then_commit_query():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN", db="shop")
        insert(log, 4)
        log.query("COMMIT", db="shop")
    assert shape(read(primary)) == ["Start:1", "c:4@1", "End:1"]


def test_xa_prepare_then_xa_commit_emits_the_rows_with_the_commit():
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1, 2)
    commit_insert(primary, 2, 3)
    with primary.transaction(gtid(3)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    events = read(primary)
    assert shape(events) == ["Start:1", "End:1", "Start:2", "c:3@2", "End:2+commit",
                             "Start:3", "c:1@3", "c:2@3", "End:3+commit"]
    ends = [event for event in events if isinstance(event, TransactionEnd)]
    assert ends[0].resume == GtidSet.empty("mysql") and ends[1].resume == GtidSet.empty("mysql"), \
        "while x1 is held, a new reader must start before its XA START"
    assert ends[2].resume is None
    released = [event for event in events if isinstance(event, RowChange) and event.key[0] in (1, 2)]
    assert [change.source.row for change in released] == [0, 1]
    assert all(change.source.pos == ends[2].commit.pos for change in released)


def test_xa_prepare_then_xa_rollback_emits_nothing():
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1)
    with primary.transaction(gtid(2)) as log:
        log.query(f"XA ROLLBACK {XID}", db="shop")
    commit_insert(primary, 3, 9)
    assert shape(read(primary)) == ["Start:1", "End:1", "Start:2", "End:2", "Start:3", "c:9@3", "End:3+commit"]


def test_xa_commit_one_phase():
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1, 2, one_phase=True)
    commit_insert(primary, 2, 3)
    events = read(primary)
    assert shape(events) == ["Start:1", "c:1@1", "c:2@1", "End:1+commit", "Start:2", "c:3@2", "End:2+commit"]
    assert all(event.resume is None for event in events if isinstance(event, TransactionEnd))


def test_xa_rollback_before_xa_prepare_keeps_what_a_non_transactional_table_did():
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query(f"XA START {XID}", db="shop")
        insert(log, 6)
        log.query(f"XA END {XID}", db="shop")
        log.query(f"XA ROLLBACK {XID}", db="shop")
    commit_insert(primary, 2, 7)
    assert shape(read(primary)) == ["Start:1", "c:6@1", "End:1", "Start:2", "c:7@2", "End:2+commit"]


def test_xa_commit_after_a_restart_between_prepare_and_commit():
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1)
    commit_insert(primary, 2, 2)
    first = read(primary)
    resume = [event for event in first if isinstance(event, TransactionEnd)][-1].resume
    delivered = GtidSet.parse(f"{UUID}:1-2", "mysql")
    with primary.transaction(gtid(3)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    again = read(primary, delivered, resume_from=resume)
    assert shape(again) == ["Start:3", "c:1@3", "End:3+commit"]
    assert primary.connections[-1] == resume, "the restarted reader reads again from before the XA START"


def test_xa_read_again_after_a_restart_yields_nothing_delivered_before():
    """x1 is held across the restart, so the new reader reads again from before it: the one-phase
    XA x2 and the XA ROLLBACK-before-PREPARE x3 after it were delivered already, and must not
    come again (their rows go through the held path too)."""
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1)
    prepare_xa(primary, 2, 2, one_phase=True, gtrid=b"x2")
    with primary.transaction(gtid(3)) as log:
        log.query("XA START X'7833',X'',1", db="shop")
        insert(log, 3)
        log.query("XA END X'7833',X'',1", db="shop")
        log.query("XA ROLLBACK X'7833',X'',1", db="shop")
    first = read(primary)
    assert shape(first) == ["Start:1", "End:1", "Start:2", "c:2@2", "End:2+commit", "Start:3", "c:3@3", "End:3"]
    resume = [event for event in first if isinstance(event, TransactionEnd)][-1].resume
    with primary.transaction(gtid(4)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    again = read(primary, GtidSet.parse(f"{UUID}:1-3", "mysql"), resume_from=resume)
    assert shape(again) == ["Start:4", "c:1@4", "End:4+commit"]


def test_xa_commit_of_a_transaction_prepared_before_the_start_is_refused():
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1)
    with primary.transaction(gtid(2)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    with pytest.raises(BinlogError, match="prepared before the position"):
        read(primary, GtidSet.parse(f"{UUID}:1", "mysql"))


@pytest.mark.parametrize("cut", range(1, 9))
def test_a_connection_lost_anywhere_inside_a_prepared_xa_yields_everything_once(cut):
    primary = ScriptedPrimary()
    prepare_xa(primary, 1, 1, 2)  # packets 2.. of the first connection (after rotate, format description)
    commit_insert(primary, 2, 3)
    with primary.transaction(gtid(3)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    primary.cut_after = [cut]
    assert shape(read(primary)) == ["Start:1", "End:1", "Start:2", "c:3@2", "End:2+commit",
                                    "Start:3", "c:1@3", "c:2@3", "End:3+commit"]
    assert len(primary.connections) == 2


@pytest.mark.parametrize("cut", range(3, 8))
def test_a_connection_lost_inside_a_transaction_yields_each_row_once(cut):
    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query("BEGIN", db="shop")
        insert(log, 1, 2)
        insert(log, 3)
        log.xid()
    primary.cut_after = [cut]
    assert shape(read(primary)) == ["Start:1", "c:1@1", "c:2@1", "c:3@1", "End:1+commit"]


def test_rows_of_a_compressed_transaction_have_unique_coordinates():
    primary = ScriptedPrimary()
    first_type, first = be.rows_event_body(TABLE, "c", [[1, "a"], [2, "b"]])
    second_type, second = be.rows_event_body(TABLE, "c", [[3, "c"], [4, "d"]])
    map_body = be.table_map_body(TABLE, flavor="mysql")
    inner = [be.inner_event(be.QUERY, be.query_body("BEGIN")), be.inner_event(be.TABLE_MAP, map_body),
             be.inner_event(first_type, first), be.inner_event(be.TABLE_MAP, map_body),
             be.inner_event(second_type, second), be.inner_event(be.XID, be.xid_body(9))]
    with primary.transaction(gtid(1)) as log:
        log.add(be.TRANSACTION_PAYLOAD, be.transaction_payload_body(inner))
    events = read(primary)
    rows = [event for event in events if isinstance(event, RowChange)]
    assert [(change.key[0], change.source.row) for change in rows] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert len({(change.source.file, change.source.pos, change.source.row) for change in rows}) == 4


def _spied_spills(monkeypatch) -> list[int]:
    """The changes in memory at each spill of a held transaction, from now on."""
    from dblog.mysql.binlog import held_changes

    spills: list[int] = []
    spill = held_changes.HeldChanges._spill
    monkeypatch.setattr(held_changes.HeldChanges, "_spill", lambda self: (spills.append(len(self._memory)),
                                                                           spill(self)))
    return spills


def _prepare_seven_rows(primary: ScriptedPrimary) -> None:
    """GTID 1: XA transaction XID inserting keys 1..7 in four rows events, prepared."""
    with primary.transaction(gtid(1)) as log:
        log.query(f"XA START {XID}", db="shop")
        for keys in ((1, 2), (3,), (4, 5, 6), (7,)):
            insert(log, *keys)
        log.query(f"XA END {XID}", db="shop")
        log.add(be.XA_PREPARE, be.xa_prepare_body(b"x1", b"", one_phase=False))


@pytest.mark.parametrize("cut", [None, *range(3, 12)])
def test_a_prepared_xa_larger_than_the_memory_bound_is_released_whole_and_in_order(cut, monkeypatch):
    """`source.max_held_xa_rows`: past it a held transaction waits in a temporary file; its XA
    COMMIT yields every change once, in order, restamped, a lost connection anywhere included."""
    spills = _spied_spills(monkeypatch)
    primary = ScriptedPrimary()
    _prepare_seven_rows(primary)
    commit_insert(primary, 2, 9)
    with primary.transaction(gtid(3)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    if cut is not None:
        primary.cut_after = [cut]
    events = read(primary, max_held_rows=2)
    assert shape(events) == ["Start:1", "End:1", "Start:2", "c:9@2", "End:2+commit",
                             "Start:3", *(f"c:{key}@3" for key in range(1, 8)), "End:3+commit"]
    released = [event for event in events if isinstance(event, RowChange) and event.key[0] < 9]
    assert [change.source.row for change in released] == list(range(7))
    assert spills and max(spills) < 2 + 3  # below the bound plus one rows event in memory


def test_a_prepared_xa_past_the_byte_bound_is_spilled_though_under_the_row_bound(monkeypatch):
    """`source.max_held_xa_bytes`: rows count by their share of their rows event; past the byte
    bound a held transaction spills, whatever its row count."""
    spills = _spied_spills(monkeypatch)
    primary = ScriptedPrimary()
    _prepare_seven_rows(primary)
    with primary.transaction(gtid(2)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    events = read(primary, max_held_rows=1000, max_held_bytes=20)
    released = [event for event in events if isinstance(event, RowChange)]
    assert [change.key[0] for change in released] == list(range(1, 8))
    assert all(0 < change.size < 20 for change in released)
    assert len(spills) >= 2  # the row bound alone (1000) would hold all seven


def test_held_changes_spill_past_their_byte_bound():
    """Three rows of 1,000 bytes fill a 3,000-byte bound: spilled, though far under the row bound;
    changes without a binlog size count by their values' lengths."""
    from dblog.core.events import SourceInfo, TableId
    from dblog.mysql.binlog.held_changes import HeldChangesStore

    table = TableId("shop", "t")
    store = HeldChangesStore(memory_rows=1000, memory_bytes=3000)
    held = store.hold()
    sized = [RowChange(table, "c", (n,), None, {"id": n}, SourceInfo(row=n), size=1000) for n in range(10)]
    for change in sized:
        held.extend([change])
        assert len(held._memory) <= 3 and store.bytes_in_memory <= 3000
    assert held.spilled == 9 and list(held) == sized
    held.close()
    held = store.hold()
    unsized = [RowChange(table, "c", (n,), None, {"id": n, "blob": b"x" * 1500}) for n in range(4)]
    held.extend(unsized)  # more than the whole budget: to the file as it comes
    assert held.spilled == 4 and list(held) == unsized
    held.close()


def test_held_changes_spill_past_their_bound_and_come_back_in_order():
    from dblog.core.events import SourceInfo, TableId
    from dblog.mysql.binlog.held_changes import HeldChangesStore

    table = TableId("shop", "t")
    held = HeldChangesStore(memory_rows=10).hold()
    changes = [RowChange(table, "c", (n,), None, {"id": n, "name": "x" * n}, SourceInfo(row=n)) for n in range(45)]
    for start in range(0, 45, 3):
        held.extend(changes[start:start + 3])
        assert len(held._memory) < 10
    assert len(held) == 45 and held.spilled == 36
    assert list(held) == changes
    held.close()
    assert len(held) == 0 and list(held) == []


KEYLESS = be.Table(13, "shop", "k", [be.int_("uid", nullable=False), be.varchar("note", 20)])


@pytest.mark.parametrize("altered_since", [False, True], ids=["same-definition", "logged-before-ddl"])
def test_rows_held_across_a_key_change_are_keyed_as_of_their_xa_commit(altered_since):
    """Issue 36, item 9. A table without a primary key is keyed by a signal's surrogate key
    (`SchemaCatalog.set_key`, then `key_changed`) between an XA PREPARE and its XA COMMIT: the
    rows the XA COMMIT releases are keyed by it, as rows decoded at the commit are (that is where
    they become visible and enter a window), not with the empty key of the PREPARE, which let a
    chunk's older row of the same key survive the window, gave Kafka `{}` keys and collapsed the
    rows in Iceberg. `altered_since`: the server's definition has moved on since the rows were
    logged (a column added), so the rows carry the definition of their time, which is keyed too.
    The source here reads in-process; the reader process keys the same way (test_binlog_process)."""
    from dblog.core.events import TableId
    from dblog.mysql.binlog import BinlogSource
    from dblog.mysql.schema import Column, TableSchema

    table = TableId("shop", "k")
    columns = [Column("uid", "int", "int(11)", nullable=False),
               Column("note", "varchar", "varchar(20)", char_length=20, charset="utf8mb4")]
    if altered_since:
        columns.append(Column("added", "int", "int(11)"))
    schemas = {table: TableSchema(table, columns, ())}  # the catalog: its schema, cached

    def schema_of(name: TableId) -> TableSchema:
        return schemas[name]

    primary = ScriptedPrimary()
    with primary.transaction(gtid(1)) as log:
        log.query(f"XA START {XID}", db="shop")
        log.table_map(KEYLESS)
        log.rows(KEYLESS, "c", [[1, "a"], [2, "b"]])
        log.rows(KEYLESS, "u", [([1, "a"], [1, "a2"]), ([2, "b"], [5, "b"])])  # 2 -> 5: a key change
        log.rows(KEYLESS, "d", [[5, "b"]])
        log.query(f"XA END {XID}", db="shop")
        log.add(be.XA_PREPARE, be.xa_prepare_body(b"x1", b"", one_phase=False))
    with primary.transaction(gtid(2)) as log:
        log.query(f"XA COMMIT {XID}", db="shop")
    source = BinlogSource({}, server_id=1, start=GtidSet.empty("mysql"), schema_of=schema_of,
                          table_filter=lambda name: True, flavor="mysql", connection_factory=primary.connect)
    released = []
    try:
        for event in source:
            if isinstance(event, TransactionEnd) and event.gtid == gtid(1):
                schemas[table] = TableSchema(table, columns, ("uid",))  # the surrogate key, set while x1 is prepared
                source.key_changed(table)
            elif isinstance(event, RowChange):
                released.append(event)
            elif isinstance(event, TransactionEnd) and event.gtid == gtid(2):
                break
    finally:
        source.close()
    assert [(change.op, change.key, change.before_key) for change in released] == [
        ("c", (1,), None), ("c", (2,), None), ("u", (1,), None), ("u", (5,), (2,)), ("d", (5,), None)]
    definitions = {id(change.definition): change.definition for change in released}
    if altered_since:
        (definition,) = definitions.values()  # one object for all: the engine redefines once
        assert definition.key_columns == ("uid",) and definition.column_names == ["uid", "note"]
    else:
        assert list(definitions.values()) == [None]


def test_prepared_xa_transactions_share_one_memory_budget_and_one_file():
    """Issue 36, item 12: `source.max_held_xa_rows` bounds the changes in memory of every
    prepared transaction together, and the spilled ones share one temporary file. 24 prepared
    at once, of 4 and 12 rows (every other one past the 10-row budget by itself), decided in
    another order: at every event the source yields, at most 10 held changes are in memory and
    at most one more file descriptor is open; each XA COMMIT releases its own rows, in order.
    Before, each held its own 10 rows (96 in memory here) and each one spilled its own open file."""
    import os

    count = 24
    xids = [f"X'{f'x{index}'.encode().hex()}',X'',1" for index in range(count)]
    primary = ScriptedPrimary()
    for index in range(count):
        with primary.transaction(gtid(index + 1)) as log:
            log.query(f"XA START {xids[index]}", db="shop")
            rows = 12 if index % 2 else 4
            for first in range(0, rows, 4):
                insert(log, *range(100 * index + first, 100 * index + first + 4))
            log.query(f"XA END {xids[index]}", db="shop")
            log.add(be.XA_PREPARE, be.xa_prepare_body(f"x{index}".encode(), b"", one_phase=False))
    order = [*range(1, count, 2), *range(0, count, 2)][::-1]
    for n, index in enumerate(order):
        with primary.transaction(gtid(count + 1 + n)) as log:
            log.query(f"XA COMMIT {xids[index]}", db="shop")
    source = primary.source(GtidSet.empty("mysql"), max_held_rows=10)
    fds = len(os.listdir("/proc/self/fd"))
    in_memory, extra_fds, released = [], [], {}
    try:
        for event in source:
            if isinstance(event, TransactionEnd) and event.gtid == gtid(2 * count):
                break
            held = [*source._held.values(), *([source._preparing] if source._preparing else [])]
            in_memory.append(sum(len(prepared.changes._memory) for prepared in held))
            extra_fds.append(len(os.listdir("/proc/self/fd")) - fds)
            if isinstance(event, RowChange):
                released.setdefault(Gtid.parse(event.source.gtid).seq, []).append(event.key[0])
    finally:
        source.close()
    assert max(in_memory) <= 10, f"{max(in_memory)} held changes in memory"
    assert max(extra_fds) <= 1, f"{max(extra_fds)} more files open"
    assert max(in_memory) > 0 and max(extra_fds) == 1  # it did hold and spill
    for n, index in enumerate(order):
        rows = 12 if index % 2 else 4
        assert released[count + 1 + n] == list(range(100 * index, 100 * index + rows))
