"""ChunkQuery's SQL text, and keyset paging against a real server."""

from __future__ import annotations

import datetime

import pytest

from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.mysql.chunk_reader import ChunkQuery, ChunkReader, ChunkRequest
from dblog.mysql.schema import Column, TableSchema, list_tables


def _schema(key: tuple[str, ...], columns=None, table=TableId("db", "t")) -> TableSchema:
    columns = columns or [Column(name, "int", "int(11)") for name in (*key, "v")]
    return TableSchema(table, columns, key)


# --- ChunkQuery: pure ---------------------------------------------------------------------------


def test_single_column_key():
    sql, params = ChunkQuery(_schema(("id",)), 100, after_key=(5,), max_key=(90,)).build()
    assert sql == (
        "SELECT `id`, `v` FROM `db`.`t` WHERE ((`id` > %s)) AND ((`id` < %s) OR (`id` = %s)) "
        "ORDER BY `id` LIMIT 100"
    )
    assert params == (5, 90, 90)


def test_two_column_key_uses_expanded_comparisons():
    sql, params = ChunkQuery(_schema(("a", "b")), 7, after_key=(1, 2), max_key=(8, 9)).build()
    assert sql == (
        "SELECT `a`, `b`, `v` FROM `db`.`t` WHERE "
        "((`a` > %s) OR (`a` = %s AND `b` > %s)) AND "
        "((`a` < %s) OR (`a` = %s AND `b` < %s) OR (`a` = %s AND `b` = %s)) "
        "ORDER BY `a`, `b` LIMIT 7"
    )
    assert params == (1, 1, 2, 8, 8, 9, 8, 9)


def test_three_column_key():
    sql, params = ChunkQuery(_schema(("a", "b", "c")), 3, after_key=(1, 2, 3), max_key=(7, 8, 9)).build()
    assert sql == (
        "SELECT `a`, `b`, `c`, `v` FROM `db`.`t` WHERE "
        "((`a` > %s) OR (`a` = %s AND `b` > %s) OR (`a` = %s AND `b` = %s AND `c` > %s)) AND "
        "((`a` < %s) OR (`a` = %s AND `b` < %s) OR (`a` = %s AND `b` = %s AND `c` < %s) "
        "OR (`a` = %s AND `b` = %s AND `c` = %s)) "
        "ORDER BY `a`, `b`, `c` LIMIT 3"
    )
    assert params == (1, 1, 2, 1, 2, 3, 7, 7, 8, 7, 8, 9, 7, 8, 9)


def test_first_chunk_without_bounds_and_with_condition():
    sql, params = ChunkQuery(_schema(("id",)), 10, condition="v LIKE 'a%' OR v IS NULL").build()
    # the condition is parenthesized, and % doubled because pymysql %-formats the statement
    assert sql == "SELECT `id`, `v` FROM `db`.`t` WHERE (v LIKE 'a%%' OR v IS NULL) ORDER BY `id` LIMIT 10"
    assert params == ()
    sql, _ = ChunkQuery(_schema(("id",)), 10).build()
    assert sql == "SELECT `id`, `v` FROM `db`.`t` ORDER BY `id` LIMIT 10"


def test_identifiers_with_backticks_are_quoted():
    columns = [Column("k`ey", "int", "int(11)"), Column("va`l", "int", "int(11)")]
    schema = _schema(("k`ey",), columns, TableId("my`db", "t`able"))
    sql, params = ChunkQuery(schema, 2, after_key=(1,)).build()
    assert sql == "SELECT `k``ey`, `va``l` FROM `my``db`.`t``able` WHERE ((`k``ey` > %s)) ORDER BY `k``ey` LIMIT 2"
    assert params == (1,)


def test_max_key_query():
    sql, params = ChunkQuery.max_key_query(_schema(("a", "b")), condition="v > 3")
    assert sql == "SELECT `a`, `b` FROM `db`.`t` WHERE (v > 3) ORDER BY `a` DESC, `b` DESC LIMIT 1"
    assert params == ()


def test_float_columns_are_read_as_double_and_keys_bound_back():
    columns = [
        Column("k", "binary", "binary(4)", char_length=4),
        Column("at", "datetime", "datetime(6)", datetime_precision=6),
        Column("size", "enum", "enum('s','m','l')", enum_values=("s", "m", "l")),
        Column("f", "float", "float"),
    ]
    schema = _schema(("k", "at", "size"), columns)
    sql, params = ChunkQuery(schema, 5, after_key=("AQIDBA==", "2024-01-02T03:04:05.000006", "m")).build()
    assert "CAST(`f` AS DOUBLE) AS `f`" in sql
    assert params[-3:] == (b"\x01\x02\x03\x04", datetime.datetime(2024, 1, 2, 3, 4, 5, 6), 2)


def test_a_table_without_primary_key_cannot_be_chunked():
    with pytest.raises(ValueError, match="no primary key"):
        ChunkQuery(_schema(()), 10)
    with pytest.raises(ValueError, match="limit"):
        ChunkQuery(_schema(("id",)), 0)


# --- against the server -------------------------------------------------------------------------


FIRST_KEYS = ["alpha", "Beta", "gamma", "Zeta", "éclair", "😀x", "", "a b", "a`b"]


@pytest.fixture
def composite_table(mariadb, database):
    """A table keyed by (VARCHAR, INT, DATETIME(6)), columns declared out of key order."""
    table = TableId(database, "events")
    mariadb.execute(
        f"CREATE TABLE `{database}`.`events` (payload VARCHAR(20), at DATETIME(6), n INT, name VARCHAR(20), "
        "PRIMARY KEY (name, n, at))"
    )
    rows = []
    base = datetime.datetime(2024, 1, 1)
    for i, name in enumerate(FIRST_KEYS):
        for n in (-3, 0, 2):
            for micro in (0, 1, 999999):
                at = base + datetime.timedelta(days=i, microseconds=micro)
                rows.append((f"p{len(rows)}", at, n, name))
    conn = mariadb.connect(database)
    with conn.cursor() as cursor:
        cursor.executemany("INSERT INTO events (payload, at, n, name) VALUES (%s, %s, %s, %s)", rows)
    conn.close()
    return table, len(rows)


def _page(reader: ChunkReader, schema, max_key, limit=7, condition=None):
    keys, after = [], None
    for _ in range(10_000):  # bounded: a paging bug must fail, not hang
        rows = reader.chunks.read_chunk(ChunkRequest(schema, after, max_key, limit, condition))
        assert len(rows) <= limit
        if not rows:
            return keys
        keys.extend(schema.key_of(row) for row in rows)
        after = schema.key_of(rows[-1])
    pytest.fail("paging did not end")


def test_schema_reads_key_in_key_order(source_connection, composite_table):
    table, _ = composite_table
    schema = source_connection.schemas.schema(table)
    assert schema.key_columns == ("name", "n", "at")
    assert schema.column_names == ["payload", "at", "n", "name"]
    assert schema.column("at").datetime_precision == 6
    assert table in list_tables(source_connection.server.connection())
    assert source_connection.schemas.schema(table) is schema  # cached
    source_connection.schemas.forget_schema(table)
    assert source_connection.schemas.schema(table) is not schema


def test_paging_visits_every_row_once_in_server_order(mariadb, database, source_connection, composite_table):
    table, count = composite_table
    schema = source_connection.schemas.schema(table)
    max_key = source_connection.chunks.max_key(schema)
    keys = _page(source_connection, schema, max_key)

    server_order = source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 10_000))
    assert len(server_order) == count
    assert keys == [schema.key_of(row) for row in server_order]
    assert len(set(keys)) == count
    assert keys[-1] == max_key
    assert max_key == ("😀x", 2, "2024-01-06T00:00:00.999999")  # utf8mb4_general_ci sorts the emoji last


def test_rows_above_the_captured_max_key_are_not_read(mariadb, database, source_connection, composite_table):
    table, count = composite_table
    schema = source_connection.schemas.schema(table)
    max_key = source_connection.chunks.max_key(schema)
    mariadb.execute(
        f"INSERT INTO `{database}`.`events` (payload, at, n, name) VALUES "
        "('late', '2030-01-01', 99, '😀x'), ('late', '2030-01-01', 1, '😀y')"
    )
    keys = _page(source_connection, schema, max_key)
    assert len(keys) == count
    assert ("😀x", 99, "2030-01-01T00:00:00.000000") not in keys
    assert not any(name == "😀y" for name, _, _ in keys)
    assert source_connection.chunks.max_key(schema) != max_key  # the new rows are there


def test_condition_filters_rows(mariadb, database, source_connection, composite_table):
    table, _ = composite_table
    schema = source_connection.schemas.schema(table)
    condition = "n % 2 = 0 AND name LIKE '%a%'"
    max_key = source_connection.chunks.max_key(schema, condition)
    keys = _page(source_connection, schema, max_key, limit=4, condition=condition)
    expected = mariadb.execute(f"SELECT COUNT(*) FROM `{database}`.`events` WHERE {condition}")[0][0]
    assert len(keys) == expected > 0
    assert all(n % 2 == 0 and "a" in name.lower() for name, n, _ in keys)
    assert max_key == keys[-1]


def test_empty_table_has_no_max_key(mariadb, database, source_connection):
    mariadb.execute(f"CREATE TABLE `{database}`.`empty` (id INT PRIMARY KEY)")
    schema = source_connection.schemas.schema(TableId(database, "empty"))
    assert source_connection.chunks.max_key(schema) is None
    assert source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 10)) == []


def test_flavor_gtids_and_reconnect(mariadb, database, source_connection):
    assert source_connection.server.flavor() == "mariadb"
    mariadb.execute(f"CREATE TABLE `{database}`.`t` (id INT PRIMARY KEY)")
    before = source_connection.server.executed_gtids()
    assert isinstance(before, GtidSet) and before.flavor == "mariadb"
    mariadb.execute(f"INSERT INTO `{database}`.`t` VALUES (1)")
    after = source_connection.server.executed_gtids()
    assert before.issubset(after) and after != before

    # a killed connection is replaced once, transparently
    own_id = source_connection.server.connection().thread_id()
    mariadb.execute(f"KILL {own_id}")
    schema = source_connection.schemas.schema(TableId(database, "t"))
    assert source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 10)) == [{"id": 1}]
    assert source_connection.server.connection().thread_id() != own_id
    # and the replacement is set up like the first: UTC, autocommit
    assert source_connection.server.fetch("SELECT @@session.time_zone, @@autocommit") == (("+00:00", 1),)


def test_a_select_override_is_read_as_a_derived_table_with_the_key_bounds_order_and_limit():
    """snapshot.select_overrides: keyset chunking over the user's SELECT (its `%` doubled for
    pymysql's formatting), the max key read from it too."""
    source = "SELECT `id`, `v` FROM (SELECT * FROM `db`.`t` WHERE v LIKE 'a%') AS `dblog_override`"
    sql, params = ChunkQuery(_schema(("id",)), 10, after_key=(5,), max_key=(90,), condition="`v` > 1",
                             source=source).build()
    assert sql == (
        "SELECT `id`, `v` FROM (SELECT `id`, `v` FROM (SELECT * FROM `db`.`t` WHERE v LIKE 'a%%') AS "
        "`dblog_override`) AS `dblog_source` WHERE ((`id` > %s)) AND ((`id` < %s) OR (`id` = %s)) AND (`v` > 1) "
        "ORDER BY `id` LIMIT 10")
    assert params == (5, 90, 90)
    sql, _ = ChunkQuery.max_key_query(_schema(("id",)), None, source)
    assert sql.startswith("SELECT `id` FROM (SELECT `id`, `v` FROM (") and sql.endswith(
        "AS `dblog_source` ORDER BY `id` DESC LIMIT 1")
