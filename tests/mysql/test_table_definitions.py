"""`definition_in_force`: the definition a TABLE_MAP describes, when it disagrees with the
server's (rows logged before DDL the server has applied since). Pure; the end-to-end proof
against Debezium's schema history is tests/sinks/kafka/test_connect_snapshot_differential.py
(`test_rows_logged_before_ddl_read_after_it_match_debeziums`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dblog.core.events import TableId
from dblog.mysql.binlog.definitions import column_agrees, definition_in_force
from dblog.mysql.binlog.rows import (
    BLOB, DATETIME2, ENUM, LONG, LONGLONG, NEWDECIMAL, SET, STRING, TIME2, TINY, VARCHAR, MapColumn, TableMap,
)
from dblog.mysql.schema import Column, TableSchema

UTF8MB4, BINARY, LATIN1 = 45, 63, 8
TABLE = TableId("shop", "t")

ID = Column("id", "int", "int(11)", numeric_precision=10, numeric_scale=0, nullable=False)
NAME = Column("name", "varchar", "varchar(20)", char_length=20, charset="utf8mb4", collation="utf8mb4_general_ci")
AMOUNT = Column("amount", "decimal", "decimal(12,3)", numeric_precision=12, numeric_scale=3)
TITLE = Column("title", "varchar", "varchar(20)", char_length=20, charset="utf8mb4", collation="utf8mb4_general_ci")
FLAG = Column("flag", "varchar", "varchar(5)", char_length=5, charset="utf8mb4", collation="utf8mb4_general_ci")

MAP_ID = MapColumn(0, LONG, 0, False, "id")
MAP_NAME = MapColumn(1, VARCHAR, 80, True, "name", collation=UTF8MB4)


def _map(*columns: MapColumn, key: tuple[int, ...] = (0,)) -> TableMap:
    return TableMap(7, TABLE.db, TABLE.table, tuple(columns), key, True)


def test_a_map_that_agrees_with_the_server_definition_gives_none():
    schema = TableSchema(TABLE, [ID, NAME, AMOUNT], ("id",))
    assert definition_in_force(_map(MAP_ID, MAP_NAME, MapColumn(2, NEWDECIMAL, 12 << 8 | 3, True, "amount")),
                               schema) is None


def test_rows_before_a_scale_change_a_drop_a_retype_and_a_rename_get_their_own_definition():
    """The server has `id, title, amount DECIMAL(12,3), flag VARCHAR(5)`; the rows were logged
    under `id, name, amount DECIMAL(10,2), spent TIME(3), flag INT UNSIGNED`."""
    server = TableSchema(TABLE, [ID, TITLE, AMOUNT, FLAG], ("id",))
    logged = _map(MAP_ID, MAP_NAME, MapColumn(2, NEWDECIMAL, 10 << 8 | 2, True, "amount"),
                  MapColumn(3, TIME2, 3, True, "spent"), MapColumn(4, LONG, 0, True, "flag", unsigned=True))
    definition = definition_in_force(logged, server)
    assert definition is not None
    assert definition.column_names == ["id", "name", "amount", "spent", "flag"]
    assert definition.column("id") is ID  # agreeing columns are the server's own (lengths, collation)
    amount, spent, flag, name = (definition.column(n) for n in ("amount", "spent", "flag", "name"))
    assert (amount.data_type, amount.numeric_precision, amount.numeric_scale) == ("decimal", 10, 2)
    assert (spent.data_type, spent.datetime_precision) == ("time", 3)
    assert (flag.data_type, flag.unsigned, flag.column_type) == ("int", True, "int unsigned")
    assert (name.data_type, name.char_length, name.charset) == ("varchar", 20, "utf8mb4")
    assert definition.key_columns == ("id",)
    # What the engine hands the in-process source next: it agrees with the map, so is kept.
    assert definition_in_force(logged, definition) is None


def test_the_key_is_the_servers_unless_a_column_of_it_is_not_in_the_map():
    """A key column renamed since: the rows had the map's primary key. A map naming a NOT NULL
    UNIQUE key as the primary key of a table without one (MariaDB does) changes nothing."""
    server = TableSchema(TABLE, [Column("key", "int", "int(11)", nullable=False), NAME], ("key",))
    definition = definition_in_force(_map(MapColumn(0, LONG, 0, False, "id"), MAP_NAME), server)
    assert definition is not None and definition.key_columns == ("id",)
    assert definition_in_force(_map(MAP_ID, MAP_NAME), TableSchema(TABLE, [ID, NAME], ())) is None
    renamed = TableSchema(TABLE, [ID, TITLE], ())
    assert definition_in_force(_map(MAP_ID, MAP_NAME), renamed).key_columns == ()


def test_enum_members_signedness_and_nullability_count():
    colour = Column("colour", "enum", "enum('red','green')", enum_values=("red", "green"), charset="utf8mb4",
                    collation="utf8mb4_general_ci")
    server = TableSchema(TABLE, [ID, colour], ("id",))
    same = MapColumn(1, ENUM, 1, True, "colour", collation=UTF8MB4, members=(b"red", b"green"))
    assert definition_in_force(_map(MAP_ID, same), server) is None
    more = MapColumn(1, ENUM, 1, True, "colour", collation=UTF8MB4, members=(b"red", b"green", b"blue"))
    assert definition_in_force(_map(MAP_ID, more), server).column("colour").enum_values == ("red", "green", "blue")
    assert not column_agrees(MapColumn(0, LONG, 0, False, "id", unsigned=True), ID)
    assert not column_agrees(MapColumn(0, LONG, 0, True, "id"), ID)


def test_types_the_map_stores_otherwise_agree():
    """MariaDB's UUID is BINARY(16) in a table map, its JSON LONGTEXT, geometry subtypes GEOMETRY."""
    assert column_agrees(MapColumn(0, STRING, 16, True, "u", collation=BINARY), Column("u", "uuid", "uuid"))
    assert column_agrees(MapColumn(0, BLOB, 4, True, "j", collation=UTF8MB4),
                         Column("j", "longtext", "longtext", charset="utf8mb4"))


_MAP_COLUMNS = st.one_of(
    st.builds(lambda t, unsigned: MapColumn(0, t, 0, True, "c", unsigned=unsigned), st.sampled_from([TINY, LONG, LONGLONG]),
              st.booleans()),
    st.builds(lambda p, s, unsigned: MapColumn(0, NEWDECIMAL, p << 8 | min(s, p), True, "c", unsigned=unsigned),
              st.integers(1, 65), st.integers(0, 30), st.booleans()),
    st.builds(lambda t, fsp: MapColumn(0, t, fsp, False, "c"), st.sampled_from([TIME2, DATETIME2]), st.integers(0, 6)),
    st.builds(lambda length, collation: MapColumn(0, VARCHAR, length, True, "c", collation=collation),
              st.integers(1, 65535), st.sampled_from([UTF8MB4, BINARY, LATIN1])),
    st.builds(lambda size, collation: MapColumn(0, BLOB, size, True, "c", collation=collation),
              st.integers(1, 4), st.sampled_from([UTF8MB4, BINARY])),
    st.builds(lambda t, members: MapColumn(0, t, 1, True, "c", collation=UTF8MB4, members=tuple(members)),
              st.sampled_from([ENUM, SET]), st.lists(st.text("abc'é", min_size=1, max_size=4).map(str.encode),
                                                     min_size=1, max_size=5, unique=True)),
)


@given(_MAP_COLUMNS, _MAP_COLUMNS)
def test_a_derived_definition_agrees_with_its_map(logged, current):
    """Whatever the server has now, the definition derived from a map agrees with that map: the
    source keeps it (no flip-flop between the two definitions row after row)."""
    server = TableSchema(TABLE, [ID, definition_in_force(_map(MAP_ID, current), TableSchema(TABLE, [ID], ("id",)))
                                 .column("c")], ("id",))
    table_map = _map(MAP_ID, logged)
    definition = definition_in_force(table_map, server) or server
    assert definition_in_force(table_map, definition) is None
