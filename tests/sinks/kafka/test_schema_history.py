"""The schema-change topic's table descriptions and records (`dblog.sinks.schema_history`), pure;
and `schema_changes = false` (Debezium's `include.schema.changes=false`) writing no schema change
topic at all. Against Debezium itself: test_connect_differential.py (the schema change topic test)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from support.harness import EngineThread, make_config

from dblog.core.ddl import DdlChange, classify_ddl
from dblog.core.events import SourceInfo, TableId
from dblog.mysql.table_definitions import ColumnDefinition, TableDefinition, mariadb_default
from dblog.sinks.schema_history import (debezium_column, default_value_expression, dropped_database, quoted_id,
                                        streamed_changes, streamed_records)


def column(column_type: str, **details) -> ColumnDefinition:
    return ColumnDefinition(**{"name": "c", "position": 1, "column_type": column_type, "charset": None,
                               "nullable": True, "default": None, "extra": "", "comment": "", **details})


@pytest.mark.parametrize("column_type, expected", [
    # (typeName, jdbcType, length, scale, enumValues), as Debezium's parser reads SHOW CREATE TABLE
    ("int(10) unsigned", ("INT UNSIGNED", 4, 10, None, None)),
    ("int(10) unsigned zerofill", ("INT UNSIGNED ZEROFILL", 4, 10, None, None)),
    ("bigint(20) unsigned", ("BIGINT UNSIGNED", -5, 20, None, None)),
    ("tinyint(1)", ("TINYINT", 5, 1, None, None)),
    ("decimal(10,2)", ("DECIMAL", 3, 10, 2, None)),
    ("double(8,3)", ("DOUBLE", 8, 8, 3, None)),
    ("double", ("DOUBLE", 8, None, None, None)),
    ("bit(1)", ("BIT", -7, 1, None, None)),
    ("timestamp(6)", ("TIMESTAMP", 2014, 6, None, None)),
    ("datetime", ("DATETIME", 93, None, None, None)),
    ("year(4)", ("YEAR", 4, 4, None, None)),
    ("varbinary(16)", ("VARBINARY", -3, 16, None, None)),
    ("longblob", ("LONGBLOB", 2004, None, None, None)),
    ("point", ("POINT", 1111, None, None, None)),
    ("uuid", ("UUID", 1111, None, None, None)),  # MariaDB's, unknown to Debezium's parser
    ("enum('a','b,c','it''s')", ("ENUM", 1, 1, None, ["'a'", "'b,c'", "'it''s'"])),
    ("set('x','y)','z')", ("SET", 1, 5, None, ["'x'", "'y)'", "'z'"])),  # members and commas
])
def test_a_column_is_described_as_debezium_parses_it(column_type, expected):
    described = debezium_column(column(column_type))
    assert (described["typeName"], described["jdbcType"], described["length"], described["scale"],
            described["enumValues"]) == expected
    assert described["typeExpression"] == described["typeName"]


@pytest.mark.parametrize("default, expected", [
    (None, None), ("NULL", None), ("'x'", "x"), ("'it''s'", "it''s"), ("''", ""), ("1.50", "1.50"), ("-3", "-3"),
    ("1e3", "1e3"), ("current_timestamp()", "1970-01-01 00:00:00"), ("current_timestamp(3)", "1970-01-01 00:00:00"),
    ("b'101'", "101"), ("curdate()", None), ("(1 + 1)", None), ("'NULL'", "NULL"),
])
def test_defaults_are_debeziums_expressions(default, expected):
    assert default_value_expression(default) == expected


@pytest.mark.parametrize("mysql, extra, expected", [
    (None, "", None), ("x", "", "x"), ("it's", "", "it''s"), ("1.5", "", "1.5"), ("b'101'", "", "101"),
    ("NULL", "", "NULL"),  # the string 'NULL' (MySQL's SQL NULL is None)
    ("CURRENT_TIMESTAMP", "DEFAULT_GENERATED", "1970-01-01 00:00:00"), ("(now() + 1)", "DEFAULT_GENERATED", None),
])
def test_mysql_defaults_are_read_as_mariadbs(mysql, extra, expected):
    """MySQL writes COLUMN_DEFAULT unquoted: taken into MariaDB's form, the same expression."""
    assert default_value_expression(mariadb_default(mysql, extra)) == expected


def test_auto_increment_and_on_update_columns_are_generated():
    assert debezium_column(column("int(11)", extra="auto_increment"))["generated"] is True
    on_update = debezium_column(column("timestamp", extra="on update current_timestamp()"))
    assert on_update["autoIncremented"] is on_update["generated"] is True
    virtual = debezium_column(column("int(11)", extra="VIRTUAL GENERATED"))  # Debezium: not "generated"
    assert virtual["autoIncremented"] is virtual["generated"] is False


def test_a_statement_is_one_record_per_table_it_changes():
    a, b, c = TableId("shop", "a"), TableId("shop", "b"), TableId("other", "c")
    captured = {a, b, TableId("shop", "b2")}.__contains__
    def changes(sql: str, db: str = "") -> list:
        return streamed_changes(sql, classify_ddl(sql, db), captured)

    assert changes("RENAME TABLE shop.a TO shop.a2, shop.b TO shop.b2", "shop") == [
        ("ALTER", TableId("shop", "a2")), ("ALTER", TableId("shop", "b2"))]
    assert changes("CREATE OR REPLACE TABLE shop.a (i int)") == [("CREATE", a)]
    assert changes("DROP TABLE shop.a, other.c") == [("DROP", a)]
    assert changes("CREATE INDEX i ON shop.a (i)") == [("ALTER", a)]
    for sql in ("TRUNCATE shop.a", "ANALYZE TABLE shop.a", "optimize table shop.a", "REPAIR TABLE shop.a"):
        assert changes(sql) == [], sql
    assert streamed_changes("ALTER TABLE other.c ADD x int", DdlChange("add_column", (c,)), captured) == []

    definition = TableDefinition(b, (column("int(11)", nullable=False),), ("c",), "latin1", "")
    records = streamed_records("DROP TABLE IF EXISTS shop.a, shop.b /* generated by server */",
                               [("DROP", a), ("DROP", b)], {b: definition},
                               SourceInfo(gtid="0-1-5", file="binlog.000001", pos=400, server_id=1, ts_ms=1000),
                               "pfx", 5_000_000_000)
    assert [record["value"]["ddl"] for record in records] == [  # Debezium's own statement per dropped table
        "DROP TABLE IF EXISTS `shop`.`a`", "DROP TABLE IF EXISTS `shop`.`b`"]
    assert [record["value"]["tableChanges"] for record in records] == [
        [{"type": "DROP", "id": quoted_id(a), "table": None}], [{"type": "DROP", "id": '"shop"."b"', "table": None}]]
    source = records[0]["value"]["source"]
    assert (source["db"], source["table"], source["snapshot"], source["ts_ms"], source["row"]) == (
        "shop", "a", "false", 1000, 0)
    (altered,) = streamed_records("ALTER TABLE b ADD c int", [("ALTER", b)], {b: definition}, SourceInfo(), "pfx", 0)
    assert altered["key"] == {"databaseName": "shop"}
    assert altered["value"]["tableChanges"][0]["table"]["defaultCharsetName"] == "latin1"
    assert altered["value"]["tableChanges"][0]["table"]["primaryKeyColumnNames"] == ["c"]
    assert dropped_database("DROP SCHEMA IF EXISTS `shop`", "") == "shop"
    assert dropped_database("DROP TABLE shop.a", "") is None


def test_no_schema_change_topic_with_schema_changes_false(mariadb, broker, database, tmp_path):
    name = f"n{database[-8:]}"
    mariadb.execute(f"CREATE TABLE `{database}`.t (id int PRIMARY KEY)")
    config = make_config(mariadb, database, tmp_path, name=name, kafka={"bootstrap_servers": broker.bootstrap},
                         sink={"type": "kafka", "kafka": {"schema_changes": False}})
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED")
        mariadb.execute(f"ALTER TABLE `{database}`.t ADD COLUMN v int")
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 2)")
        engine.until_caught_up()
    finally:
        engine.stop()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        topics = set(admin.list_topics())
    finally:
        admin.close()
    assert f"{name}.{database}.t" in topics and name not in topics
