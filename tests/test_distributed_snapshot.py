"""Backfills read by the cluster (`snapshot.distributed = true`): Spark tasks read key ranges
from a real MariaDB into staging files while writers change the tables and the engine streams;
the Iceberg tables must equal the source exactly, in every watermark mode; a task that dies is
read again without duplicating or losing rows; progress and `dblog status` follow the read."""

from __future__ import annotations

import logging
import re

import pytest
from harness import EngineThread, iceberg_config

from dblog.lab.verify import source_rows
from dblog.lab.workload import tables
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.iceberg.sink import read_target

pytestmark = [pytest.mark.timeout(900), pytest.mark.spark]


def _distributed(**extra) -> dict:
    # One task at a time over many small ranges: a window lasts seconds, and commits every
    # 0.3 s bring the writers' changes inside it into Iceberg before it closes, so a staged row
    # read before such a change would overwrite it if the window did not drop its key.
    return {"chunk_size": 500, "distributed": True, "distributed_tasks": 1, "distributed_range_rows": 250,
            "distributed_window_rows": 6_000, **extra}


def _rows_dropped(caplog) -> int:
    """Rows the sink left out of staged reads because the log touched their keys (its log)."""
    return sum(int(match.group(1)) for record in caplog.records
               if (match := re.search(r"(\d+) dropped for changes inside the window", record.getMessage())))


def _assert_iceberg_equals_source(mariadb, database, spark, sink) -> None:
    reader = SourceConnection(lambda: mariadb.connect())
    try:
        for table in tables(database):
            schema = reader.schemas.schema(table)
            expected = source_rows(reader, table)
            got = read_target(spark, sink.target_name(table), schema)  # raises on a duplicate key
            assert got.keys() == expected.keys(), table
            assert got == expected, table
    finally:
        reader.close()


@pytest.mark.parametrize("watermarks", ["gtid", "insert_insert", "insert_delete"])
def test_a_distributed_snapshot_under_writers_lands_exactly(mariadb, database, tmp_path, spark, loaded, write_load,
                                                            watermarks, caplog):
    caplog.set_level(logging.INFO, logger="dblog.spark")
    rows = 8_000
    loaded(rows)
    config = iceberg_config(mariadb, database, tmp_path, spark, snapshot=_distributed(watermarks=watermarks),
                            offsets={"commit_interval_seconds": 0.3})
    workload = write_load(rows, writers=3, seed=7, rate=150)
    try:
        engine = EngineThread(config)
        sink = engine.engine.sink
        engine.wait_for("COMPLETED", timeout=600)
    finally:
        workload.stop()
    engine.until_caught_up(timeout=600)
    completed = [n for n in engine.notifications if n.type == "TABLE_SCAN_COMPLETED"]
    assert {n.data["status"] for n in completed} == {"SUCCEEDED"}
    orders = next(n for n in completed if n.data["data_collection"].endswith(".orders"))
    assert orders.data["total_rows_scanned"] >= rows
    assert _rows_dropped(caplog) > 0  # the writers did change keys inside windows
    _assert_iceberg_equals_source(mariadb, database, spark, sink)
