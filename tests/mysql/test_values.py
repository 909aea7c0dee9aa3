"""Both read paths give the same normalized value, for every column type, on a real server.

One table holds a column of every type; rows with extremes, NULLs, zero dates, emoji, 0x00
padding, negative fractional TIMEs and so on are inserted, updated and deleted. The same rows
are read with ChunkReader (SELECT) and decoded from the binlog with BinlogSource, and must be
equal row by row, and equal to the documented normal form (dblog.mysql.values' table). The whole test
runs under two process time zones to show TIMESTAMP handling does not depend on it.
"""

from __future__ import annotations

import os
import time

import pytest
from support.every_type import COLUMNS, ROWS, UPDATES, insert_sql

from dblog.core.events import RowChange, TableId, TransactionEnd
from dblog.mysql.chunk_reader import ChunkRequest

DELETES = (1, 3)

# The documented normal form (dblog.mysql.values), checked on both paths.
EXPECTED: dict[tuple[int, str], object] = {
    (1, "bi"): -9223372036854775808, (2, "biu"): 18446744073709551615, (2, "miu"): 16777215,
    (1, "dec_a"): "-99999999.99", (2, "dec_a"): "12.30", (3, "dec_a"): "0.00", (5, "dec_a"): "-0.50",
    (1, "dec_b"): "-99999999999999999999999999999999999.999999999999999999999999999999",
    (2, "dec_b"): "0.000000000000000000000000000001", (2, "dec_c"): "99999",
    (1, "f"): -3.4028235e38, (2, "f"): 16777216.0, (3, "f"): 0.1, (5, "f"): 3.14,
    (1, "d"): -1.7976931348623157e308, (2, "d"): 5e-324, (5, "d"): 0.30000000000000004,
    (1, "dte"): "1000-01-01", (3, "dte"): "0000-00-00",
    (1, "dt0"): "1000-01-01T00:00:00", (1, "dt3"): "1000-01-01T00:00:00.001", (2, "dt6"): "2024-01-02T03:04:05.000001",
    (3, "dt0"): "0000-00-00 00:00:00", (3, "dt3"): "0000-00-00 00:00:00.000", (3, "dt6"): "0000-00-00 00:00:00.000000",
    (1, "ts0"): "1970-01-01T00:00:01Z", (1, "ts6"): "2038-01-19T03:14:07.999999Z", (5, "ts6"): "2024-03-10T10:30:00.500000Z",
    (3, "ts0"): "0000-00-00 00:00:00", (3, "ts6"): "0000-00-00 00:00:00.000000",
    (1, "tm0"): "-838:59:59", (1, "tm1"): "-00:00:00.1", (1, "tm3"): "-12:34:56.789", (1, "tm6"): "-838:59:59.999999",
    (2, "tm1"): "00:00:00.9", (2, "tm3"): "-00:00:00.001", (2, "tm6"): "-00:00:00.000001", (5, "tm6"): "-01:02:03.000001",
    (1, "y"): 1901, (3, "y"): 0,
    (1, "c"): "😀", (2, "c"): "abc", (1, "vc"): "héllo 😀 wörld", (1, "tx"): "𝄞 music 🎵", (1, "latin"): "café",
    (1, "bn"): "AQIAAAAAAAA=", (2, "bn"): "AAAAAAAAAAA=", (1, "vb"): "AP8A", (1, "bl"): "AA==", (2, "bl"): "",
    (1, "e"): "small", (2, "e"): "", (1, "st"): "", (2, "st"): "read,admin", (3, "st"): "read,write,admin",
    (1, "b1"): 0, (2, "b1"): 1, (1, "b10"): 513, (2, "b64"): 18446744073709551615,
    (1, "j"): '{"a": [1, 2.50, "😀"]}',
    (1, "u"): "123e4567-e89b-12d3-a456-426614174000", (2, "u"): "00000000-0000-0000-0000-000000000000",
    (3, "u"): "ffffffff-ffff-ffff-ffff-ffffffffffff", (5, "u"): "6ccd780c-baba-1026-9564-5b8c656024db",
    (1, "ip6"): "::ffff:1.2.3.4", (2, "ip6"): "::", (3, "ip6"): "2001:db8::", (5, "ip6"): "fe80::1:0:0",
    (1, "ip4"): "10.0.0.0", (2, "ip4"): "0.0.0.0",
    (4, "ti"): None, (4, "u"): None, (4, "st"): None, (4, "dte"): None,
}



def _update_sql(table: str, row_id: int, literals: dict[str, str]) -> str:
    assignments = ", ".join(f"{name} = {literal}" for name, literal in literals.items())
    return f"UPDATE {table} SET {assignments} WHERE id = {row_id}"


@pytest.fixture(params=["Asia/Kolkata", "America/Los_Angeles"])
def process_tz(request):
    """Run under a non-UTC process time zone (restored afterwards)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        yield request.param
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def _select_all(source_connection, table: TableId) -> dict[int, dict]:
    schema = source_connection.schemas.schema(table)
    return {row["id"]: row for row in source_connection.chunks.read_chunk(ChunkRequest(schema, None, None, 1000))}


def test_select_and_binlog_agree_for_every_type(process_tz, mariadb, database, source_connection, open_binlog, binlog_reader):
    assert time.strftime("%z") not in ("+0000", "-0000")  # the process really is off UTC
    table = TableId(database, "every_type")
    name = f"`{database}`.`every_type`"
    writer = mariadb.connect(database)
    with writer.cursor() as cursor:
        cursor.execute("SET sql_mode = ''")  # zero dates and the invalid ENUM member
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"CREATE TABLE {name} ({COLUMNS})")
        start = source_connection.server.executed_gtids()
        for row_id, literals in ROWS.items():
            cursor.execute(insert_sql(name, row_id, literals))
        inserted = _select_all(source_connection, table)
        for row_id, literals in UPDATES.items():
            cursor.execute(_update_sql(name, row_id, literals))
        updated = _select_all(source_connection, table)
        for row_id in DELETES:
            cursor.execute(f"DELETE FROM {name} WHERE id = {row_id}")
        remaining = _select_all(source_connection, table)
    writer.close()
    end = source_connection.server.executed_gtids()

    source = open_binlog(start, table_filter=lambda t: t == table)
    events = binlog_reader(source, lambda event, _: isinstance(event, TransactionEnd) and end.issubset(source.position))
    changes = [event for event in events if isinstance(event, RowChange)]

    assert sorted(inserted) == [1, 2, 3, 4, 5]
    assert sorted(remaining) == [2, 4, 5]
    inserts = {change.key[0]: change for change in changes if change.op == "c"}
    updates = {change.key[0]: change for change in changes if change.op == "u"}
    deletes = {change.key[0]: change for change in changes if change.op == "d"}
    assert sorted(inserts) == sorted(ROWS) and sorted(updates) == sorted(UPDATES) and sorted(deletes) == list(DELETES)

    for row_id, selected in inserted.items():
        assert inserts[row_id].after == selected, f"row {row_id} inserted"
    for row_id in UPDATES:
        assert updates[row_id].before == inserted[row_id], f"row {row_id} before update"
        assert updates[row_id].after == updated[row_id], f"row {row_id} after update"
        assert updates[row_id].before_key is None
    for row_id in DELETES:
        assert deletes[row_id].before == updated[row_id], f"row {row_id} deleted"
        assert deletes[row_id].after is None

    for (row_id, column), expected in EXPECTED.items():
        for label, value in (("select", inserted[row_id][column]), ("binlog", inserts[row_id].after[column])):
            assert value == expected and type(value) is type(expected), (label, row_id, column, value)

    # a few updated values, on both paths
    for column, expected in {"f": 123456.79, "tm6": "-00:00:01.500000", "st": "write", "bn": "AQAAAAAAAAA=",
                             "ip6": "2001:db8::1:0:0:1", "u": "01234567-89ab-6def-8123-456789abcdef",
                             "y": 0, "ts0": "0000-00-00 00:00:00", "dec_b": "1.500000000000000000000000000000"}.items():
        assert updated[5][column] == expected == updates[5].after[column], column
    assert all(value is None for column, value in updated[2].items() if column in ROWS[2])


def test_column_defaults_in_normal_form():
    """MariaDB's COLUMN_DEFAULT read as Debezium states defaults (the values checked against
    Debezium 3.6 itself in test_connect_differential.py)."""
    from dblog.mysql.schema import Column
    from dblog.mysql.values import default_value

    def default(data_type, column_type, text, **kw):
        return default_value(Column("c", data_type, column_type, **kw), text)

    assert default("int", "int(11)", None) == (False, None)
    assert default("int", "int(11)", "NULL") == (False, None)
    assert default("int", "int(11)", "-3") == (True, -3)
    assert default("varchar", "varchar(10)", "'it''s'", charset="utf8mb4") == (True, "it''s")
    assert default("decimal", "decimal(10,2)", "1.5", numeric_precision=10, numeric_scale=2) == (True, "1.50")
    assert default("datetime", "datetime(3)", "'2020-01-02 03:04:05.250'", datetime_precision=3) == \
        (True, "2020-01-02T03:04:05.250")
    assert default("timestamp", "timestamp", "current_timestamp()") == (True, "1970-01-01T00:00:00Z")
    assert default("timestamp", "timestamp(3)", "'2019-12-31 22:00:00.500'", datetime_precision=3) == \
        (True, "2019-12-31T22:00:00.500Z")  # as a UTC session reads it
    assert default("date", "date", "'0000-00-00'", nullable=False) == (True, "1970-01-01")
    assert default("date", "date", "'0000-00-00'") == (False, None)
    assert default("time", "time(2)", "'-01:02:03.5'", datetime_precision=2) == (True, "-01:02:03.50")
    assert default("bit", "bit(3)", "b'101'", numeric_precision=3) == (True, 5)
    assert default("binary", "binary(3)", "'a'", char_length=3) == (True, "YQAA")
    assert default("varchar", "varchar(36)", "uuid()", charset="utf8mb4") == (False, None)  # an expression
