"""Batches appended to an Iceberg table without a Spark job.

Where the sink appends (`SparkIcebergSink._can_append`: no deletes, and keys no data file can
hold: a snapshot's reads, inserts beyond every key), Spark's append costs the JVM ~15 CPU-µs a
row on this machine, most of it the JIT compiling Spark's planning and writing code during the
first minutes of the process, while the snapshot's reader needs the same cores. Here pyarrow writes the batch as one Parquet data
file (C++, with Iceberg's field ids, in the table's own data location and codec), Iceberg's Java
API reads the file's column metrics from its footer (`ParquetUtil.fileMetrics`, as the table's
metrics settings ask), and one `AppendFiles` commits it with the commit's properties: a few
py4j calls instead of a job. Measured apart: a 90k-row commit in ~0.35 s and ~0.2 JVM CPU-s,
against ~1.2 s and ~2 CPU-s through Spark.

A table this path cannot write as Spark would (partitioned, not Parquet, a location pyarrow
cannot reach, a column Iceberg does not know) is appended through Spark, as before; `append`
says which.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

log = logging.getLogger("dblog.spark")

# Iceberg's write.parquet.compression-codec values → pyarrow's names
_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4", "brotli": "brotli",
           "uncompressed": "none"}


class DirectAppends:
    def __init__(self, spark) -> None:
        self.spark = spark
        self._refused: set[str] = set()  # tables already logged as appended through Spark
        self._lock = threading.Lock()

    def append(self, qualified: str, table: pa.Table, properties: dict[str, str]) -> bool:
        """Commit `table` (columns named as the Iceberg table's) as one new data file of
        `qualified`, with `properties` in the snapshot summary. False, with nothing written,
        when this table must be appended through Spark instead."""
        jvm = self.spark.sparkContext._jvm
        iceberg = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, qualified)
        iceberg.refresh()
        # the schema in one py4j call: field by field costs four round trips a column
        fields = {field["name"]: field for field in json.loads(
            jvm.org.apache.iceberg.SchemaParser.toJson(iceberg.schema()))["fields"]}
        reason = _unsupported(iceberg, fields, table)
        location = iceberg.locationProvider().newDataLocation(f"dblog-{uuid.uuid4().hex}.parquet")
        target = None if reason else _pyarrow_path(location)
        if target is None:
            self._refuse(qualified, reason or f"pyarrow cannot write to {location}")
            return False
        filesystem, path = target
        schema = _with_field_ids(fields, table.schema)
        iceberg_properties = iceberg.properties()
        codec = _CODECS.get(str(iceberg_properties.getOrDefault("write.parquet.compression-codec", "zstd")).lower())
        level = iceberg_properties.get("write.parquet.compression-level")
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)  # a new table has no data directory yet
        pq.write_table(table.cast(schema), path, filesystem=filesystem, compression=codec or "zstd",
                       compression_level=int(level) if level is not None else None)
        try:
            metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
                iceberg.io().newInputFile(location), jvm.org.apache.iceberg.MetricsConfig.forTable(iceberg))
            data_file = (jvm.org.apache.iceberg.DataFiles.builder(iceberg.spec()).withPath(location)
                         .withFormat("PARQUET").withFileSizeInBytes(filesystem.get_file_info(path).size)
                         .withMetrics(metrics).build())
            commit = iceberg.newAppend().appendFile(data_file)
            for key, value in properties.items():
                commit = commit.set(str(key), str(value))
            commit.commit()
        except BaseException:
            _delete_quietly(filesystem, path)  # never committed: no snapshot names it
            raise
        return True

    def _refuse(self, qualified: str, reason: str) -> None:
        with self._lock:
            if qualified in self._refused:
                return
            self._refused.add(qualified)
        log.info("appends to %s go through Spark: %s", qualified, reason)


def _unsupported(iceberg, fields: dict[str, dict], table: pa.Table) -> str | None:
    """Why this table's batch cannot be written here, or None."""
    if not iceberg.spec().isUnpartitioned():
        return "the table is partitioned"
    file_format = str(iceberg.properties().getOrDefault("write.format.default", "parquet")).lower()
    if file_format != "parquet":
        return f"write.format.default is {file_format}"
    unknown = [name for name in table.column_names if name not in fields]
    if unknown:
        return f"the table has no column {unknown}"
    return None


def _with_field_ids(fields: dict[str, dict], schema: pa.Schema) -> pa.Schema:
    """`schema` with each column's Iceberg field id (what Iceberg's reader maps by), and the
    table's required columns not nullable (`fields`: the Iceberg schema's, by name)."""
    return pa.schema([
        pa.field(field.name, field.type, nullable=not fields[field.name]["required"],
                 metadata={b"PARQUET:field_id": str(fields[field.name]["id"]).encode()})
        for field in schema
    ])


def _pyarrow_path(location: str) -> tuple[pafs.FileSystem, str] | None:
    """The pyarrow filesystem and path of an Iceberg data file location, if pyarrow has one."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return pafs.LocalFileSystem(), unquote(parsed.path)
    try:
        return pafs.FileSystem.from_uri(location)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return None


def _delete_quietly(filesystem: pafs.FileSystem, path: str) -> None:
    try:
        filesystem.delete_file(path)
    except OSError:
        pass
