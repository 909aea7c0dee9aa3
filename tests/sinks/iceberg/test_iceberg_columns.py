"""`[columns]` in the Iceberg sink: a table is created without the columns left out and holds the
masked, hashed and truncated values (its changelog table too), as the JSON-lines and Kafka sinks
write them; a rule that would leave out or change a key column is refused before anything is
written, since the sink keys the table's rows by it."""

from __future__ import annotations

import hashlib
import json

import pytest

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.column_options import ColumnSettings, HashRule, MaskRule, TruncateRule
from dblog.sinks.iceberg.sink import SinkError, SparkIcebergSink

pytestmark = pytest.mark.timeout(600)


def _change(table, op, key, before, after, pos):
    return RowChange(table, op, key, before, after, SourceInfo(gtid=f"0-1-{pos}", file="binlog.000001", pos=pos,
                                                               server_id=1))


def test_columns_left_out_masked_hashed_and_truncated_in_the_table_and_its_changelog(mariadb, database, spark):
    mariadb.execute(f"CREATE TABLE `{database}`.people (id INT PRIMARY KEY, email VARCHAR(100), phone VARCHAR(20), "
                    "bio TEXT, ssn CHAR(11), born DATE)")
    table = TableId(database, "people")
    prefix = rf"{database}\.people\."
    settings = ColumnSettings(
        exclude=[prefix + "ssn"],
        mask=[MaskRule(columns=[prefix + "phone"], chars=4)],
        hash=[HashRule(columns=[prefix + "email"], algorithm="SHA-256", salt="s4lt", version=2)],
        truncate=[TruncateRule(columns=[prefix + "bio"], chars=5)],
    )
    reader = SourceConnection(lambda: mariadb.connect())
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", changelog=True, columns=settings)
    sink.check_routes([table])
    ann = {"id": 1, "email": "ann@example.com", "phone": "555-0100", "bio": "héllo world", "ssn": "123-45-6789",
           "born": "1990-01-02"}
    bob = {"id": 2, "email": "bob@example.com", "phone": None, "bio": None, "ssn": "987-65-4321", "born": None}
    sink.write([
        RowChange(table, "r", (1,), None, ann, SourceInfo(snapshot=True)),
        _change(table, "c", (2,), None, bob, 200),
        _change(table, "u", (1,), ann, {**ann, "email": "ann@new.example"}, 300),
    ])
    sink.flush(Offsets("mariadb", GtidSet.parse("0-1-300", "mariadb")))

    def digest(value: str) -> str:  # Debezium's v2 hash: the salt's UTF-8 bytes, then the value's
        return hashlib.sha256(b"s4lt" + value.encode()).hexdigest()

    qualified = sink.target_name(table)
    assert [f.name for f in spark.table(qualified).schema.fields] == ["id", "email", "phone", "bio", "born",
                                                                       "_dblog_seq"]
    rows = {row.id: row.asDict() for row in spark.sql(f"SELECT * FROM {qualified}").collect()}
    assert {key: {name: value for name, value in row.items() if name not in ("_dblog_seq", "born")}
            for key, row in rows.items()} == {
        1: {"id": 1, "email": digest("ann@new.example"), "phone": "****", "bio": "héllo"},
        2: {"id": 2, "email": digest("bob@example.com"), "phone": "****", "bio": None},  # a mask masks NULL too
    }
    assert str(rows[1]["born"]) == "1990-01-02"
    logged = spark.sql(f"SELECT op, before, after FROM {qualified[:-1]}_changelog` ORDER BY binlog_pos NULLS FIRST")
    afters = [json.loads(row.after) for row in logged.collect()]
    assert all("ssn" not in after for after in afters)
    assert [after["email"] for after in afters] == [digest("ann@example.com"), digest("bob@example.com"),
                                                    digest("ann@new.example")]
    assert [after["phone"] for after in afters] == ["****"] * 3
    sink.close()
    reader.close()


@pytest.mark.parametrize("rule", ["exclude", "hash"])
def test_a_rule_on_a_key_column_is_refused_before_anything_is_written(rule, mariadb, database, spark):
    mariadb.execute(f"CREATE TABLE `{database}`.codes (code VARCHAR(10) PRIMARY KEY, v INT)")
    table = TableId(database, "codes")
    pattern = rf"{database}\.codes\.code"
    settings = (ColumnSettings(exclude=[pattern]) if rule == "exclude"
                else ColumnSettings(hash=[HashRule(columns=[pattern], algorithm="SHA-256", salt="x")]))
    reader = SourceConnection(lambda: mariadb.connect())
    sink = SparkIcebergSink(spark, "lake", reader.schemas.schema, "mariadb", columns=settings)
    with pytest.raises(SinkError, match=rf"\[columns\] leaves out or changes key column code of {database}.codes"):
        sink.check_routes([table])
    sink.close()
    reader.close()
