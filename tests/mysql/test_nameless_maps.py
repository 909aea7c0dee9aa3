"""Table maps without column names (binlog_row_metadata MINIMAL, MariaDB's NO_LOG) completed from
the schema history's definition: `dblog.mysql.binlog.nameless_maps`.

The maps are built to MySQL's byte layout for each level (tests/support/binlog_encoder.py,
`table_map_body(minimal=True)`: MySQL 8.4 sql/log_event.cc, Table_map_log_event::
init_metadata_fields logs SIGNEDNESS, DEFAULT_CHARSET / COLUMN_CHARSET and GEOMETRY_TYPE under
MINIMAL; names, ENUM/SET members and charsets, the primary key only under FULL;
`metadata=False`: nothing optional, as MariaDB's NO_LOG). The rows they describe must decode
exactly as with a FULL map, and any disagreement between the map and the definition must stop
decoding, naming the table and the column."""

from __future__ import annotations

import dataclasses

import pytest
from support import binlog_encoder as be
from support.binlog_transactions import decode

from dblog.core.events import TableId
from dblog.core.table_definition import ColumnDefinition, TableDefinition
from dblog.mysql.binlog.nameless_maps import DefinitionMismatch, map_with_definition
from dblog.mysql.binlog.decoder import decode_rows

COLUMNS = [
    # (encoder column, COLUMN_TYPE, CHARACTER_SET_NAME)
    (be.int_("id", nullable=False), "int(11)", None),
    (be.int_("big", unsigned=True), "int(10) unsigned", None),
    (be.varchar("name", 20), "varchar(20)", "utf8mb4"),
    (be.varchar("old", 10, be.LATIN1), "varchar(10)", "latin1"),
    (be.decimal("price", 10, 2), "decimal(10,2)", None),
    (be.datetime2("at", 3), "datetime(3)", None),
    (be.enum("size", ["s", "m", "l'x"]), "enum('s','m','l''x')", "utf8mb4"),
    (be.set_("tags", ["a", "b", "café"], be.LATIN1), "set('a','b','café')", "latin1"),
    (be.blob("data", 2), "blob", None),
    (be.blob("note", 2, be.UTF8MB4), "text", "utf8mb4"),
]
ROWS = [
    [1, 4_000_000_000, "één", "café", ("12.50", False), (2024, 5, 6, 7, 8, 9, 123000), 3, 0b101, b"\x00\x01", "ok"],
    [2, None, None, None, None, None, None, None, None, None],
]


def _table(columns=COLUMNS) -> be.Table:
    return be.Table(77, "shop", "t", [column for column, _, _ in columns], primary_key=(0,))


def _definition(columns=COLUMNS, **changes) -> TableDefinition:
    defined = tuple(
        ColumnDefinition(column.name, position, column_type, charset, column.nullable, None, "", "")
        for position, (column, column_type, charset) in enumerate(columns, 1))
    definition = TableDefinition(TableId("shop", "t"), defined, ("id",), "utf8mb4", "")
    return dataclasses.replace(definition, **changes)


def _records(flavor: str, **map_options):
    table = _table()
    writer = be.BinlogWriter(flavor)
    writer.format_description()
    writer.table_map(table, **map_options)
    writer.rows(table, "c", ROWS)
    _, records = decode(writer.packets, flavor)
    return records[0]


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
@pytest.mark.parametrize("level", ["minimal", "no_log"])
def test_rows_of_a_nameless_map_decode_as_with_a_full_map(flavor, level):
    full = _records(flavor)
    expected = full.rows().images
    nameless = _records(flavor, **({"names": False, "minimal": True} if level == "minimal" else {"metadata": False}))
    assert not nameless.table_map.has_names
    named = map_with_definition(nameless.table_map, _definition())
    nameless.table_map = named
    assert decode_rows(nameless, {}).images == expected
    assert named.primary_key == (0,) and [c.name for c in named.columns] == [c.name for c, _, _ in COLUMNS]
    assert expected[0]["size"] == "l'x" and expected[0]["tags"] == "a,café" and expected[0]["big"] == 4_000_000_000


def _mismatch(definition: TableDefinition, flavor: str = "mysql", **map_options) -> str:
    record = _records(flavor, **(map_options or {"names": False, "minimal": True}))
    with pytest.raises(DefinitionMismatch) as raised:
        map_with_definition(record.table_map, definition)
    return str(raised.value)


def _changed(name: str, column_type: str | None = None, **changes) -> TableDefinition:
    columns = []
    for column, declared, charset in COLUMNS:
        if column.name == name:
            column = dataclasses.replace(column, **changes)
            declared = column_type or declared
        columns.append((column, declared, charset))
    return _definition(columns)


@pytest.mark.parametrize("definition, named", [
    (_changed("price", "decimal(12,2)"), "price decimal(12,2)"),  # precision
    (_changed("at", "datetime(6)"), "at datetime(6)"),  # fraction digits
    (_changed("name", "varchar(40)"), "name varchar(40)"),  # length
    (_changed("name", "int(11)"), "name int(11)"),  # type
    (_changed("note", "mediumtext"), "note mediumtext"),  # length bytes
    (_changed("id", nullable=True), "id int(11) NULL"),  # nullability
    (_changed("big", "int(11)"), "big int(11)"),  # signedness, logged under MINIMAL
    (_changed("size", "enum('s','m','l''x'," + ",".join(f"'{n}'" for n in range(300)) + ")"), "size enum"),  # width
])
def test_a_definition_that_does_not_describe_the_map_stops_decoding_naming_the_column(definition, named):
    message = _mismatch(definition)
    assert "shop.t" in message and named in message, message


def test_a_charset_logged_under_minimal_is_checked():
    columns = [(c, d, "utf8mb4" if c.name == "old" else s) for c, d, s in COLUMNS]
    message = _mismatch(_definition(columns))
    assert "old varchar(10)" in message and "character set latin1" in message, message


def test_a_column_count_that_differs_stops_decoding():
    message = _mismatch(_definition(COLUMNS[:-1]), flavor="mariadb", metadata=False)
    assert "shop.t" in message and "10 columns" in message and "9 (" in message, message


def test_a_renamed_column_takes_the_definitions_name():
    """What the map cannot check: the history's name is the name (its DDL moved it)."""
    columns = [(dataclasses.replace(c, name="label") if c.name == "name" else c, d, s) for c, d, s in COLUMNS]
    record = _records("mysql", names=False, minimal=True)
    record.table_map = map_with_definition(record.table_map, _definition(columns))
    assert decode_rows(record, {}).images[0]["label"] == "één"


class _ServerDefinitions:
    """What TableHistory reads from a server, for a scripted MySQL primary: fixed definitions."""

    def __init__(self, definitions: dict) -> None:
        self.definitions = definitions

    def load(self, tables):
        return {table: self.definitions[table] for table in tables if table in self.definitions}

    def charsets(self):
        return "utf8mb4", {"shop": "utf8mb4"}


def test_a_mysql_source_decodes_minimal_maps_across_a_rename_with_its_history():
    """BinlogSource on MySQL-layout events (a scripted primary): rows logged before and after a
    RENAME COLUMN, each under a MINIMAL table map, come out named as of their moment: the source
    applies the DDL it reads to its own history."""
    from support.scripted_binlog import ScriptedPrimary

    from dblog.core.events import RowChange, TransactionEnd
    from dblog.core.gtid import Gtid, GtidSet
    from dblog.mysql.binlog import BinlogSource
    from dblog.mysql.schema import Column, TableSchema
    from dblog.mysql.table_history import TableHistory

    table = TableId("shop", "t")
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    before = be.Table(30, "shop", "t", [be.int_("id", nullable=False), be.varchar("name", 20)], primary_key=(0,))
    after = be.Table(31, "shop", "t", [be.int_("id", nullable=False), be.varchar("label", 20)], primary_key=(0,))
    defined = TableDefinition(table, (
        ColumnDefinition("id", 1, "int", None, False, None, "", ""),
        ColumnDefinition("name", 2, "varchar(20)", "utf8mb4", True, "NULL", "", "")), ("id",), "utf8mb4", "")
    history = TableHistory(_ServerDefinitions({table: defined}), lambda: GtidSet.empty("mysql"), lambda t: t == table)
    history.seed([table])
    primary = ScriptedPrimary("mysql")
    with primary.transaction(Gtid(uuid, 1)) as log:
        log.query("BEGIN", db="shop")
        log.table_map(before, names=False, minimal=True)
        log.rows(before, "c", [[1, "a"]])
        log.xid()
    with primary.transaction(Gtid(uuid, 2)) as log:
        log.query("ALTER TABLE t RENAME COLUMN name TO label", db="shop")
    with primary.transaction(Gtid(uuid, 3)) as log:
        log.query("BEGIN", db="shop")
        log.table_map(after, names=False, minimal=True)
        log.rows(after, "c", [[2, "b"]])
        log.xid()
    present = TableSchema(table, [Column("id", "int", "int(11)", nullable=False),
                                  Column("label", "varchar", "varchar(20)", char_length=20, charset="utf8mb4")],
                          ("id",))
    source = BinlogSource({}, server_id=1, start=GtidSet.empty("mysql"), schema_of=lambda name: present,
                          table_filter=lambda name: name == table, flavor="mysql", connection_factory=primary.connect,
                          history=history)
    rows = []
    try:
        for event in source:
            if isinstance(event, RowChange):
                rows.append((event.key, event.after))
            elif isinstance(event, TransactionEnd) and event.gtid == Gtid(uuid, 3):
                break
    finally:
        source.close()
    assert rows == [((1,), {"id": 1, "name": "a"}), ((2,), {"id": 2, "label": "b"})]


def test_a_trailing_bigint_is_a_hash_column_only_for_a_long_unique_key():
    """MariaDB logs a long UNIQUE key's hidden DB_ROW_HASH_<n> after the columns; a trailing
    BIGINT the history lacks is taken for one only when the definition has such a key."""
    columns = [(be.int_("id", nullable=False), "int(11)", None), (be.blob("b", 2), "blob", None)]
    table = be.Table(78, "shop", "t", [c for c, _, _ in columns] + [be.bigint("hash", unsigned=True)], primary_key=(0,))
    writer = be.BinlogWriter("mariadb")
    writer.format_description()
    writer.table_map(table, names=False, minimal=True)
    writer.rows(table, "c", [[1, b"x", 857]])
    _, records = decode(writer.packets, "mariadb")
    record = records[0]
    plain = _definition(columns)
    with pytest.raises(DefinitionMismatch, match="3 columns"):
        map_with_definition(record.table_map, plain)
    long_unique = dataclasses.replace(plain, unique_keys=(("PRIMARY", ("id",)), ("b", ("b",))))
    record.table_map = map_with_definition(record.table_map, long_unique)
    assert decode_rows(record, {}).images == [{"id": 1, "b": "eA==", "DB_ROW_HASH_1": 857}]
