"""The schema history (`dblog.core.definition_history`), pure: definitions as of each statement,
saved and restored at any point (a restart) with the same results as an uninterrupted run, the
reads' brackets (a statement a read may already hold is read again, and reported), which tables
are kept, and absent captured tables."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dblog.core.definition_history import DefinitionHistory
from dblog.core.events import TableId
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.table_definition import ColumnDefinition, TableDefinition

DB = "shop"


def T(name: str) -> TableId:
    db, _, table = name.rpartition(".")
    return TableId(db or DB, table)


def captures(table: TableId) -> bool:
    return table.db == DB and not table.table.startswith("_")


def gtid(seq: int) -> Gtid:
    return Gtid.mariadb(0, 1, seq)


def position(seq: int) -> GtidSet:
    return GtidSet.parse(f"0-1-{seq}", "mariadb") if seq else GtidSet.empty("mariadb")


def definition(table: str, *names: str) -> TableDefinition:
    columns = tuple(ColumnDefinition(name, position, "int(11)", None, position != 1, None if position == 1 else "NULL",
                                     "", "") for position, name in enumerate(names, 1))
    return TableDefinition(T(table), columns, (names[0],), "utf8mb4", "", (("PRIMARY", (names[0],)),))


def started(*definitions: TableDefinition, at: int = 0) -> DefinitionHistory:
    history = DefinitionHistory(captures, "latin1")
    history.adopt({d.table: d for d in definitions}, position(at), position(at), databases={DB: "utf8mb4"})
    return history


def names(history: DefinitionHistory, table: str) -> list[str]:
    return [column.name for column in history.definition(T(table)).columns]


def test_each_statement_changes_the_definitions_as_of_it():
    history = started(definition("t", "id", "v"))
    history.apply("ALTER TABLE t ADD COLUMN w INT DEFAULT 7", DB, gtid(1))
    assert names(history, "t") == ["id", "v", "w"] and history.definition(T("t")).columns[2].default == "7"
    applied = history.apply("ALTER TABLE t ALTER COLUMN w SET DEFAULT 8, RENAME TO u", DB, gtid(2))
    assert applied.tables[T("t")] is None and applied.tables[T("u")].columns[2].default == "8"
    assert history.holds(T("t")) and history.definition(T("t")) is None  # a captured table, known absent
    assert history.apply("CREATE TABLE IF NOT EXISTS t (a INT)", DB, gtid(3)).tables[T("t")] is not None


def test_a_statement_a_read_may_hold_already_is_read_again():
    """Read between GTIDs 5 and 7: statement 6 may be in what was read (applying ADD COLUMN
    twice would be wrong), statement 8 is not; once the stream passed 7 the read is exact."""
    history = DefinitionHistory(captures, "latin1")
    history.adopt({T("t"): definition("t", "id", "v")}, position(5), position(7), databases={DB: "utf8mb4"})
    applied = history.apply("ALTER TABLE t ADD COLUMN w INT", DB, gtid(6))
    assert applied.ahead == [T("t")] and list(applied.unresolved) == [T("t")] and not applied.tables
    assert not history.holds(T("t"))  # until read again
    history.adopt({T("t"): definition("t", "id", "v", "w")}, position(7), position(7))
    applied = history.apply("ALTER TABLE t ADD COLUMN x INT", DB, gtid(8))
    assert not applied.ahead and names(history, "t") == ["id", "v", "w", "x"]
    assert history.read_brackets() == {}  # a statement past the read: the read is behind it
    history.adopt({T("o"): definition("o", "id")}, position(8), position(9))
    history.passed(position(8))
    assert T("o") in history.read_brackets()
    history.passed(position(9))
    assert history.read_brackets() == {}


def test_statements_it_cannot_apply_leave_captured_tables_to_read_and_forget_others():
    history = started(definition("t", "id"), definition("_t_tmp", "id"))
    applied = history.apply("ALTER TABLE t FROBNICATE", DB, gtid(1))
    assert list(applied.unresolved) == [T("t")] and not history.holds(T("t"))  # until read from the server
    applied = history.apply("ALTER TABLE _t_tmp FROBNICATE", DB, gtid(2))
    assert applied.unresolved == {} and not history.holds(T("_t_tmp"))  # not captured: forgotten


def test_tables_of_a_database_holding_a_captured_one_are_kept_others_not():
    history = started(definition("t", "id", "v"))
    history.apply("CREATE TABLE `_t_gho` LIKE t", DB, gtid(1))
    history.apply("ALTER TABLE `_t_gho` ADD COLUMN w INT", DB, gtid(2))
    history.apply("CREATE TABLE elsewhere.x (a INT)", DB, gtid(3))
    assert history.holds(T("_t_gho")) and not history.holds(T("elsewhere.x"))
    history.apply("RENAME TABLE t TO `_t_del`, `_t_gho` TO t", DB, gtid(4))
    assert names(history, "t") == ["id", "v", "w"]
    history.apply("DROP TABLE `_t_del`", DB, gtid(5))
    assert not history.holds(T("_t_del"))  # not captured: not kept as absent either


# --- restart: the history saved with the offsets and restored, anywhere --------------------

COLUMN_NAMES = ["a", "b", "c", "d"]


@st.composite
def statements(draw) -> list[str]:
    """Statements over tables t, u, _g of `shop` (some of them refused by a server, or not
    understood: the history must behave alike either way)."""
    result = []
    for _ in range(draw(st.integers(1, 12))):
        table = draw(st.sampled_from(["t", "u", "_g"]))
        column = draw(st.sampled_from(COLUMN_NAMES))
        other = draw(st.sampled_from(["t", "u", "_g"]))
        result.append(draw(st.sampled_from([
            f"CREATE TABLE {table} (id INT PRIMARY KEY, {column} VARCHAR(3) DEFAULT 'x')",
            f"CREATE TABLE {table} LIKE {other}",
            f"ALTER TABLE {table} ADD COLUMN {column} INT DEFAULT 1",
            f"ALTER TABLE {table} DROP COLUMN {column}",
            f"ALTER TABLE {table} MODIFY {column} BIGINT NOT NULL DEFAULT 2",
            f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT 3",
            f"ALTER TABLE {table} ADD UNIQUE ({column})",
            f"RENAME TABLE {table} TO {other}",
            f"DROP TABLE {table}",
            f"ALTER TABLE {table} FROBNICATE",
            "CREATE DATABASE other CHARACTER SET latin1",
        ])))
    return result


@given(statements(), st.data())
def test_a_restart_anywhere_goes_on_as_an_uninterrupted_run(sql, data):
    """The document saved with the offsets (through JSON, as the offset store writes it) and
    restored: the same definitions and the same answers to every later statement."""
    uninterrupted = started(definition("t", "id", "v"), at=0)
    restarted = started(definition("t", "id", "v"), at=0)
    cuts = set(data.draw(st.lists(st.integers(0, len(sql)), max_size=3)))
    for seq, statement in enumerate(sql, 1):
        if seq - 1 in cuts:
            document = json.loads(json.dumps(restarted.document()))
            restarted = DefinitionHistory.from_document(document, captures, "mariadb")
            assert restarted == uninterrupted
        expected = uninterrupted.apply(statement, DB, gtid(seq))
        got = restarted.apply(statement, DB, gtid(seq))
        assert (got.tables, got.unresolved, got.ahead) == (expected.tables, expected.unresolved, expected.ahead)
        for table in expected.unresolved:  # read from the server: the same answer to both
            read = {table: definition(table.table, "id", "read")}
            uninterrupted.adopt(read, position(seq), position(seq + 1))
            restarted.adopt(read, position(seq), position(seq + 1))
        assert restarted == uninterrupted
    assert DefinitionHistory.from_document(json.loads(json.dumps(restarted.document())), captures,
                                           "mariadb") == uninterrupted


def test_the_document_is_one_object_until_a_change():
    history = started(definition("t", "id"))
    document = history.document()
    assert history.document() is document
    history.apply("TRUNCATE TABLE t", DB, gtid(1))
    assert history.document() is document  # a statement that defines nothing
    history.apply("ALTER TABLE t ADD COLUMN x INT", DB, gtid(2))
    assert history.document() is not document
