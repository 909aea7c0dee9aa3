"""How a batch reaches Iceberg: staged as Parquet, appended only when no row of the table can
hold one of its keys, MERGEd (with the batch's key range in the ON clause) otherwise."""

from __future__ import annotations

import pytest

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.schema import Column, TableSchema
from dblog.sinks.iceberg.sink import SparkIcebergSink, read_target

pytestmark = pytest.mark.timeout(600)

COLUMNS = [
    Column("region", "varchar", "varchar(16)", char_length=16),
    Column("order_id", "bigint", "bigint unsigned", unsigned=True),
    Column("amount", "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
    Column("placed_at", "datetime", "datetime(6)", datetime_precision=6),
    Column("note", "varchar", "varchar(200)", char_length=200),
]


@pytest.fixture
def orders(spark, request):
    table = TableId("batches", request.node.name[:40].replace("[", "_").replace("]", ""))
    schema = TableSchema(table, COLUMNS, ("region", "order_id"))
    sink = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb")
    yield sink, table, schema
    spark.sql(f"DROP TABLE IF EXISTS {sink.target_name(table)}")


def row(region: str, order_id: int, note: str = "read") -> dict:
    return {"region": region, "order_id": order_id, "amount": f"{order_id % 1000}.25",
            "placed_at": f"2026-01-01T00:00:00.{order_id % 1000000:06d}", "note": note}


def read(table: TableId, region: str, order_id: int, note: str = "read") -> RowChange:
    return RowChange(table, "r", (region, order_id), None, row(region, order_id, note), SourceInfo(snapshot=True))


def insert(table: TableId, region: str, order_id: int, gtid: str, pos: int) -> RowChange:
    return RowChange(table, "c", (region, order_id), None, row(region, order_id, "streamed"),
                     SourceInfo(gtid=gtid, file="bin.000001", pos=pos))


def commit(sink: SparkIcebergSink, gtids: str = "0-1-1") -> None:
    sink.flush(Offsets("mariadb", GtidSet.parse(gtids, "mariadb"), None))


def test_snapshot_reads_of_keys_beyond_every_file_are_appended(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, "eu", n) for n in range(1, 101)])
    commit(sink)
    sink.write([read(table, "eu", n) for n in range(101, 201)])
    commit(sink)
    assert sink.appended_batches == 2
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == [("eu", n) for n in range(1, 201)]


def test_snapshot_reads_over_a_key_the_table_holds_are_merged(orders, spark):
    sink, table, schema = orders
    sink.write([insert(table, "eu", 50, "0-1-1", 100)])
    commit(sink, "0-1-1")
    assert sink.appended_batches == 1  # an insert into an empty table
    sink.write([read(table, "eu", n) for n in range(1, 101)])
    commit(sink, "0-1-1")
    assert sink.appended_batches == 1  # an append would have written key 50 twice
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == [("eu", n) for n in range(1, 101)]
    assert got[("eu", 50)]["note"] == "read"  # a snapshot read replaces the row
    sequence = spark.sql(f"SELECT _dblog_seq FROM {sink.target_name(table)} WHERE order_id = 50").collect()
    assert sequence[0][0] is not None  # and keeps the sequence of the change that wrote it


def test_one_disjoint_key_column_is_enough_to_append(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, region, n) for region in ("apac", "us") for n in range(1, 11)])
    commit(sink)
    # regions overlap the file's ('apac'..'us'), order ids do not: no key can match
    sink.write([read(table, "eu", n) for n in range(11, 21)])
    commit(sink)
    assert sink.appended_batches == 2
    # order ids overlap and regions overlap: merged
    sink.write([read(table, "eu", 5, "again"), read(table, "us", 5, "again")])
    commit(sink)
    assert sink.appended_batches == 2
    got = read_target(spark, sink.target_name(table), schema)
    assert len(got) == 31 and got[("us", 5)]["note"] == "again" and got[("eu", 5)]["note"] == "again"


def test_inserts_beyond_every_key_are_appended_and_the_rest_merged(orders, spark):
    # An append-only table (keys from AUTO_INCREMENT): each batch of inserts lies beyond the
    # keys the table holds, and is appended without a Spark job, its sequences kept.
    sink, table, schema = orders
    sink.write([insert(table, "eu", n, f"0-1-{n}", 100 * n) for n in range(1, 101)])
    commit(sink, "0-1-100")
    sink.write([insert(table, "eu", n, f"0-1-{n}", 100 * n) for n in range(101, 201)])
    commit(sink, "0-1-200")
    assert sink.appended_batches == 2
    assert all("spark.app.id" not in summary for summary in _summaries(spark, sink, table))
    # a delete, even of a key beyond every other, is MERGEd, and so is an insert among the keys
    sink.write([insert(table, "eu", 300, "0-1-300", 30_000),
                RowChange(table, "d", ("eu", 300), row("eu", 300), None,
                          SourceInfo(gtid="0-1-301", file="bin.000001", pos=30_100))])
    commit(sink, "0-1-301")
    sink.write([RowChange(table, "d", ("eu", 150), row("eu", 150), None,
                          SourceInfo(gtid="0-1-302", file="bin.000001", pos=30_200))])
    commit(sink, "0-1-302")
    sink.write([insert(table, "eu", 150, "0-1-303", 30_300)])
    commit(sink, "0-1-303")
    assert sink.appended_batches == 2
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == [("eu", n) for n in range(1, 201)] and got[("eu", 150)]["note"] == "streamed"
    sequences = dict(spark.sql(f"SELECT order_id, _dblog_seq FROM {sink.target_name(table)}").collect())
    assert sequences[7] == (1 * 10**12 + 700) * 10**6 and sequences[150] == (1 * 10**12 + 30_300) * 10**6


def test_a_batch_with_binlog_changes_is_merged_and_bounded_merges_find_every_match(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, "eu", n) for n in range(1, 1001)])
    commit(sink)
    # updates spread over the table, and one key far outside: every existing key matches
    updates = [RowChange(table, "u", ("eu", n), row("eu", n), row("eu", n, "updated"),
                         SourceInfo(gtid=f"0-1-{10 + n}", file="bin.000001", pos=1000 + n)) for n in (1, 500, 1000)]
    sink.write([*updates, insert(table, "eu", 10**6, "0-1-2000", 99_000)])
    commit(sink, "0-1-2000")
    assert sink.appended_batches == 1
    got = read_target(spark, sink.target_name(table), schema)
    assert len(got) == 1001
    assert [got[("eu", n)]["note"] for n in (1, 2, 500, 1000, 10**6)] == ["updated", "read", "updated", "updated",
                                                                        "streamed"]


def test_tables_committed_side_by_side_each_get_their_own_batch(spark):
    tables = [TableId("batches", f"side_by_side_{n}") for n in range(3)]
    schemas = {table: TableSchema(table, COLUMNS, ("region", "order_id")) for table in tables}
    sink = SparkIcebergSink(spark, "lake", schemas.__getitem__, "mariadb")
    try:
        for round_number in range(2):  # the second round MERGEs: its keys overlap the first's
            for n, table in enumerate(tables):
                sink.write([read(table, "eu", k, f"{table.table}-{round_number}") for k in range(1, 101 + n)])
            commit(sink)
        for n, table in enumerate(tables):
            got = read_target(spark, sink.target_name(table), schemas[table])
            assert len(got) == 100 + n and {r["note"] for r in got.values()} == {f"{table.table}-1"}
    finally:
        sink.close()
        for table in tables:
            spark.sql(f"DROP TABLE IF EXISTS {sink.target_name(table)}")


def _summaries(spark, sink: SparkIcebergSink, table: TableId) -> list[dict]:
    return [row.summary for row in spark.sql(
        f"SELECT summary FROM {sink.target_name(table)}.snapshots ORDER BY committed_at").collect()]


def test_snapshot_read_batches_are_committed_without_a_spark_job_and_keep_their_metrics(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, "eu", n) for n in range(1, 101)])
    commit(sink, "0-1-5")
    sink.write([read(table, "eu", n) for n in range(101, 201)])
    commit(sink, "0-1-6")
    summaries = _summaries(spark, sink, table)
    assert len(summaries) == 2 and sink.appended_batches == 2
    assert all("spark.app.id" not in summary for summary in summaries)  # a Spark write would name its app
    assert [summary["dblog.position"] for summary in summaries] == ["0-1-5", "0-1-6"]
    bounds = spark.sql(f"SELECT readable_metrics.order_id AS m FROM {sink.target_name(table)}.files "
                       "ORDER BY readable_metrics.order_id.lower_bound").collect()
    assert [(int(r.m.lower_bound), int(r.m.upper_bound)) for r in bounds] == [(1, 100), (101, 200)]
    # the footer's metrics are what the next batch's overlap check reads: a key inside is MERGEd
    sink.write([read(table, "eu", 150, note="again"), read(table, "eu", 201)])
    commit(sink, "0-1-7")
    assert sink.appended_batches == 2
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == [("eu", n) for n in range(1, 202)] and got[("eu", 150)]["note"] == "again"
    assert got[("eu", 7)] == {**row("eu", 7), "placed_at": got[("eu", 7)]["placed_at"]}


def test_a_partitioned_table_gets_its_snapshot_reads_appended_through_spark(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, "eu", n) for n in range(1, 11)])
    commit(sink)
    spark.sql(f"ALTER TABLE {sink.target_name(table)} ADD PARTITION FIELD region")
    sink.write([read(table, "us", n) for n in range(1, 11)])
    commit(sink, "0-1-2")
    last = _summaries(spark, sink, table)[-1]
    assert "spark.app.id" in last and last["dblog.position"] == "0-1-2"
    assert sink.appended_batches == 2
    assert sorted(read_target(spark, sink.target_name(table), schema)) == sorted(
        [("eu", n) for n in range(1, 11)] + [("us", n) for n in range(1, 11)])


def test_batches_crossing_the_first_key_column_still_append_the_keys_after_them(orders, spark):
    # Column metrics alone would MERGE every batch after the crossing one: its file's region
    # bounds cover "eu" and its order_id bounds cover every id.
    sink, table, schema = orders
    sink.write([read(table, "ap", n) for n in range(1, 1001, 10)] + [read(table, "eu", n) for n in range(1, 11)])
    commit(sink)
    sink.write([read(table, "eu", n) for n in range(11, 21)])
    commit(sink, "0-1-2")
    assert sink.appended_batches == 2
    sink.write([read(table, "eu", 5, note="again")])  # inside what the table holds: MERGEd
    commit(sink, "0-1-3")
    assert sink.appended_batches == 2
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == sorted([("ap", n) for n in range(1, 1001, 10)] + [("eu", n) for n in range(1, 21)])
    assert got[("eu", 5)]["note"] == "again"


def test_a_table_that_held_rows_before_the_sink_saw_it_is_checked_by_its_file_metrics(orders, spark):
    sink, table, schema = orders
    sink.write([read(table, "eu", n) for n in range(1, 11)])
    commit(sink)
    again = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb")  # e.g. after a restart
    again.write([read(table, "eu", 5, note="again"), read(table, "eu", 11)])
    commit(again, "0-1-2")
    assert again.appended_batches == 0  # the file's bounds hold key 5: MERGEd
    again.write([read(table, "eu", n) for n in range(20, 30)])
    commit(again, "0-1-3")
    assert again.appended_batches == 1
    got = read_target(spark, sink.target_name(table), schema)
    assert sorted(got) == [("eu", n) for n in [*range(1, 12), *range(20, 30)]] and got[("eu", 5)]["note"] == "again"


def test_after_a_restart_an_integer_key_is_ranged_by_its_files_and_updates_cost_no_metrics_query(spark):
    table = TableId("batches", "restart_integer_key")
    schema = TableSchema(table, [Column("id", "int", "int"), Column("note", "varchar", "varchar(20)", char_length=20)],
                         ("id",))

    def insert_ids(sink, ids, first_pos):
        sink.write([RowChange(table, "c", (n,), None, {"id": n, "note": "streamed"},
                              SourceInfo(gtid=f"0-1-{first_pos + n}", file="bin.000001", pos=first_pos + n))
                    for n in ids])

    first = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb")
    try:
        insert_ids(first, range(1, 11), 100)
        commit(first, "0-1-110")
        again = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb")  # e.g. after a restart
        insert_ids(again, range(11, 21), 200)  # beyond the files' bounds 1..10
        commit(again, "0-1-220")
        assert again.appended_batches == 1
        queries = []
        again._writes._no_file_overlaps = lambda *args: queries.append(args) or False
        again.write([RowChange(table, "u", (5,), {"id": 5, "note": "streamed"}, {"id": 5, "note": "updated"},
                               SourceInfo(gtid="0-1-300", file="bin.000001", pos=300))])
        commit(again, "0-1-300")
        assert again.appended_batches == 1 and queries == []  # an update MERGEs without asking the metrics
        got = read_target(spark, again.target_name(table), schema)
        assert sorted(got) == [(n,) for n in range(1, 21)] and got[(5,)]["note"] == "updated"
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {first.target_name(table)}")


def test_keys_are_ranged_by_their_collation_as_the_snapshot_reads_them(mariadb, database, spark):
    # Under utf8mb4_general_ci "ÉU-nord" sorts between "eu" and "latam", where the snapshot reads
    # it; by code point it sorts after "latam", and a batch eu..ÉU-nord..latam would seem to span
    # all of latam, MERGEing the rest of it.
    from dblog.mysql.source_connection import SourceConnection

    mariadb.execute(f"CREATE TABLE `{database}`.regions (region VARCHAR(16) NOT NULL, order_id BIGINT NOT NULL, "
                    "note VARCHAR(20), PRIMARY KEY (region, order_id)) CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_general_ci")
    reader = SourceConnection(lambda: mariadb.connect())
    table = TableId(database, "regions")
    schema = reader.schemas.schema(table)
    reader.close()
    sink = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb")

    def reads(region, numbers):
        return [RowChange(table, "r", (region, n), None, {"region": region, "order_id": n, "note": "read"},
                          SourceInfo(snapshot=True)) for n in numbers]

    try:
        sink.write(reads("eu", range(1, 5)) + reads("ÉU-nord", range(1, 5)) + reads("latam", [1]))
        commit(sink)
        sink.write(reads("latam", range(2, 6)))
        commit(sink, "0-1-2")
        assert sink.appended_batches == 2
        # latam 1 came with the first batch, whose range must reach it: read again, it is MERGEd
        sink.write(reads("latam", [1]))
        commit(sink, "0-1-3")
        assert sink.appended_batches == 2
        got = read_target(spark, sink.target_name(table), schema)
        assert len(got) == 13
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {sink.target_name(table)}")


def _change(table: TableId, op: str, n: int, pos: int, note: str = "streamed") -> RowChange:
    before = row("eu", n) if op in ("u", "d") else None
    after = None if op == "d" else row("eu", n, note)
    source = SourceInfo(snapshot=True) if op == "r" else SourceInfo(gtid=f"0-1-{pos}", file="bin.000001", pos=pos)
    return RowChange(table, op, ("eu", n), before, after, source)


def _delete_files(spark, sink: SparkIcebergSink, table: TableId) -> int:
    return spark.sql(f"SELECT count(*) FROM {sink.target_name(table)}.files WHERE content = 2").first()[0]


def test_upsert_mode_commits_changes_as_equality_deletes_and_rows_without_a_spark_job(spark):
    from dblog.sinks.iceberg.maintenance import IcebergMaintenance

    table = TableId("batches", "upserts")
    schema = TableSchema(table, COLUMNS, ("region", "order_id"))
    sink = SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb", write_mode="upsert")
    try:
        sink.write([_change(table, "c", n, n) for n in range(1, 101)])
        commit(sink, "0-1-100")
        # updates and a delete among the keys, an insert beyond them: one row delta
        sink.write([_change(table, "u", 5, 200, "updated"), _change(table, "u", 50, 201, "updated"),
                    _change(table, "d", 7, 202), _change(table, "c", 150, 203)])
        commit(sink, "0-1-203")
        # a snapshot read replaces a row; a key inserted and deleted in one batch is not there
        sink.write([_change(table, "r", 5, 0, "read"), _change(table, "c", 300, 300), _change(table, "d", 300, 301),
                    _change(table, "d", 150, 302)])
        commit(sink, "0-1-302")
        assert (sink.appended_batches, sink.upserted_batches) == (1, 2)
        assert all("spark.app.id" not in summary for summary in _summaries(spark, sink, table))
        assert _delete_files(spark, sink, table) == 2
        expected = sorted(("eu", n) for n in range(1, 101) if n != 7)
        got = read_target(spark, sink.target_name(table), schema)
        assert sorted(got) == expected
        assert got[("eu", 5)]["note"] == "read" and got[("eu", 50)]["note"] == "updated"
        assert got[("eu", 6)]["note"] == "streamed"
        # compaction folds the equality deletes into the data: readers no longer apply them
        result = IcebergMaintenance(spark, "lake", equality_deletes=True).run(sink.target_name(table), ["compact"])
        assert result.ok and result.data_files_rewritten == 3
        entries = spark.sql(f"SELECT sequence_number AS seq, data_file.content AS content FROM "
                            f"{sink.target_name(table)}.entries WHERE status < 2").collect()
        oldest_data = min(e.seq for e in entries if e.content == 0)
        # an equality delete applies to data committed before it: none is left that applies, and
        # the older one is removed (the last one has the rewritten data's sequence number: kept)
        assert all(e.seq <= oldest_data for e in entries if e.content == 2)
        assert _delete_files(spark, sink, table) == 1
        assert read_target(spark, sink.target_name(table), schema) == got
        sink.write([_change(table, "d", 6, 400)])  # deletes only: a row delta without a data file
        commit(sink, "0-1-400")
        assert sink.upserted_batches == 3
        assert sorted(read_target(spark, sink.target_name(table), schema)) == [k for k in expected if k != ("eu", 6)]
    finally:
        sink.close()
        spark.sql(f"DROP TABLE IF EXISTS {sink.target_name(table)}")
