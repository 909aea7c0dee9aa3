"""Schemas of many tables loaded at once (`load_schemas`, `SchemaCatalog.preload`: what a
snapshot of thousands of tables does, issue 29) are exactly those `load_schema` reads table by
table, against a real MariaDB with a few hundred tables of every key shape; and an engine's
snapshot of all of them by one signal lands every row."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.events import RowChange, TableId, TransactionEnd
import dblog.mysql.schema_catalog
from dblog.mysql import schema as schema_module
from dblog.mysql.binlog import rows as rows_module
from dblog.mysql.schema import TableNotFound, load_schema, load_schemas
from dblog.mysql.server_session import ServerSession
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.snapshot_reads import PRELOAD_TABLES
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table

pytestmark = pytest.mark.timeout(300)

TABLES = 250
BATCH = 100  # SCHEMA_BATCH in these tests: three batches
# One shape per table in turn: every kind of key, collated and binary strings, ENUM/SET, and a
# name in mixed case.
SHAPES = [
    ("t{n}", "id INT NOT NULL PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2), at DATETIME(6)"),
    ("t{n}", "region VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, id BIGINT UNSIGNED NOT NULL, "
             "e ENUM('a','b''c') NULL, s SET('x','y'), PRIMARY KEY (id, region)"),
    ("t{n}", "code VARCHAR(8) CHARACTER SET latin1 NOT NULL, b VARBINARY(4), UNIQUE KEY (code)"),
    ("t{n}", "a INT, b TEXT"),
    ("Mixed{n}", "k CHAR(4) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, j JSON, u UUID, bl BLOB"),
]


def _create(mariadb, database: str, count: int) -> list[TableId]:
    tables = []
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for n in range(count):
            name, columns = SHAPES[n % len(SHAPES)]
            table = TableId(database, name.format(n=n))
            cursor.execute(f"CREATE TABLE `{table.table}` ({columns})")
            tables.append(table)
    return tables


def _same(batch, single) -> None:
    assert batch == single  # table, columns (every field), key columns
    assert {name: collation.name for name, collation in batch.collations.items()} == \
        {name: collation.name for name, collation in single.collations.items()}


def test_schemas_loaded_in_batches_are_those_loaded_one_by_one(mariadb, database, monkeypatch):
    monkeypatch.setattr(schema_module, "SCHEMA_BATCH", BATCH)
    tables = _create(mariadb, database, TABLES)
    missing = TableId(database, "no_such_table")
    with mariadb.connect() as connection:
        batch = load_schemas(connection, [*tables, missing, tables[0]])
        assert list(batch) == tables  # each once, the missing one left out, in the order asked
        for table in tables:
            _same(batch[table], load_schema(connection, table))
        assert any(schema.collations for schema in batch.values())  # collated keys were compared
        without = load_schemas(connection, tables[:10], collations=False)
        assert all(not schema.collations for schema in without.values())
        assert without[tables[1]].key_columns == ("id", "region")
        with pytest.raises(TableNotFound):
            load_schema(connection, missing)
    with SourceConnection(mariadb.connect) as source:  # row estimates, asked for together likewise
        estimates = source.server.estimated_rows_of([*tables, missing], batch=BATCH)
        assert set(estimates) == set(tables)
        assert estimates == {table: source.server.estimated_rows(table) for table in tables}


def test_preloaded_catalog_answers_as_before_keys_given_included(mariadb, database):
    tables = _create(mariadb, database, 20)
    keyless = tables[2]  # UNIQUE (code), no primary key
    not_unique = tables[3]  # neither
    given = {keyless: ("code",), not_unique: ("a",)}
    with SourceConnection(mariadb.connect, given) as preloaded, SourceConnection(mariadb.connect, given) as single:
        loaded = preloaded.schemas.preload([*tables, TableId(database, "no_such_table")])
        assert loaded == len(tables) - 1  # the table whose given key cannot serve is left to schema()
        assert preloaded.schemas.cached(keyless) and not preloaded.schemas.cached(not_unique)
        for table in tables:
            if table == not_unique:
                continue
            _same(preloaded.schemas.schema(table), single.schemas.schema(table))
        assert preloaded.schemas.schema(keyless).key_columns == ("code",)
        assert preloaded.schemas.preload(tables[:5]) == 0  # cached: no query


def test_a_snapshot_of_hundreds_of_tables_by_one_signal_lands_every_row(mariadb, database, tmp_path, monkeypatch):
    count = 200
    one_by_one = []  # tables whose schema the engine's catalog loaded alone (not preloaded)
    single = dblog.mysql.schema_catalog.load_schema
    monkeypatch.setattr(dblog.mysql.schema_catalog, "load_schema",
                        lambda conn, table, *args: one_by_one.append(table) or single(conn, table, *args))
    estimated = []  # the tables of each row-estimate query
    batch_of = ServerSession.estimated_rows_of
    monkeypatch.setattr(ServerSession, "estimated_rows_of",
                        lambda self, tables, *args: estimated.append(tables) or batch_of(self, tables, *args))
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    tables = [TableId(database, f"s{n:03d}") for n in range(count)]
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for n, table in enumerate(tables):
            cursor.execute(f"CREATE TABLE {table.table} (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)")
            cursor.execute(f"INSERT INTO {table.table} VALUES (1, 'a{n}'), (2, 'b{n}'), (3, 'c{n}')")
        connection.commit()
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never"})
    engine = EngineThread(config)
    try:
        send_via_table(config, "execute-snapshot", {"data-collections": [f"{database}\\.s[0-9]+"]}, "all")
        engine.wait_for("COMPLETED", timeout=200)
        # Their schemas were loaded in batches as the snapshot went (PRELOAD_TABLES at a time).
        assert not set(one_by_one) & set(tables)
        assert count < PRELOAD_TABLES and len(estimated) == 1  # the first table's, with all queued after it
        engine.until_caught_up()
    finally:
        engine.stop()
    scanned = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert len(scanned) == count and all(n.data["status"] == "SUCCEEDED" for n in scanned)
    comparison = compare(mariadb, tmp_path / "changes.jsonl", tables)
    assert comparison.equal and sum(comparison.rows.values()) == 3 * count, comparison.summary()


def test_a_catalog_missing_many_tables_loads_the_wanted_ones_in_batches(mariadb, database, monkeypatch):
    monkeypatch.setattr(dblog.mysql.schema_catalog, "MISSES_ALONE", 5)
    monkeypatch.setattr(dblog.mysql.schema_catalog, "MISSES_BATCH", 40)
    one_by_one = []
    single = dblog.mysql.schema_catalog.load_schema
    monkeypatch.setattr(dblog.mysql.schema_catalog, "load_schema",
                        lambda conn, table, *args: one_by_one.append(table) or single(conn, table, *args))
    tables = _create(mariadb, database, 100)
    unwanted = {table for n, table in enumerate(tables) if n % 10 == 7}
    with SourceConnection(mariadb.connect) as batched, SourceConnection(mariadb.connect) as alone:
        batched.schemas.wanted = lambda table: table not in unwanted
        order = [table for table in reversed(tables) if table not in unwanted]  # as a stream might touch them
        for table in order:
            _same(batched.schemas.schema(table), alone.schemas.schema(table))
        assert not any(batched.schemas.cached(table) for table in unwanted)
        loaded_alone = [table for table in one_by_one if table in set(order)]
        # Alone, the first 5 of the stream (and each of them again in the other catalog); then
        # batches of 40: two of them cover the other 85.
        assert len(loaded_alone) == 5 + len(order), len(loaded_alone)
        batched.schemas.forget_schema()
        assert not batched.schemas.cached(order[0])
        _same(batched.schemas.schema(order[0]), alone.schemas.schema(order[0]))  # a batch again: misses counted


def test_tables_of_one_shape_share_their_compiled_row_reader(mariadb, database, source_connection, open_binlog,
                                                            binlog_reader):
    shards = [TableId(database, f"shard{n}") for n in range(30)]
    other = TableId(database, "other_shape")
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for table in shards:
            cursor.execute(f"CREATE TABLE {table.table} (id INT NOT NULL PRIMARY KEY, v VARCHAR(9), d DECIMAL(6,2))")
        cursor.execute(f"CREATE TABLE {other.table} (id BIGINT NOT NULL PRIMARY KEY, at DATETIME(3))")
        connection.commit()
    start = source_connection.server.executed_gtids()
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for n, table in enumerate(shards):
            cursor.execute(f"INSERT INTO {table.table} VALUES (%s, %s, %s)", (n, f"v{n}", n / 4))
        cursor.execute(f"INSERT INTO {other.table} VALUES (7, '2026-01-02 03:04:05.678')")
        connection.commit()
    end = source_connection.server.executed_gtids()
    compiled_before = set(rows_module._COMPILED)
    source = open_binlog(start)
    events = binlog_reader(source, lambda event, _: isinstance(event, TransactionEnd) and end.issubset(source.position))
    changes = [event for event in events if isinstance(event, RowChange)]
    assert [(change.table, change.after) for change in changes] == [
        *((table, {"id": n, "v": f"v{n}", "d": f"{n / 4:.2f}"}) for n, table in enumerate(shards)),
        (other, {"id": 7, "at": "2026-01-02T03:04:05.678"}),
    ]
    assert len(set(rows_module._COMPILED) - compiled_before) <= 2  # one per shape, not one per table
