"""Where a batch waits as a Parquet file for Spark to read it as the MERGE source.

pyarrow writes the file (local paths, and `s3://`, `gs://`, `hdfs://` URIs through
`pyarrow.fs`); Spark reads it with its own Parquet reader in the JVM, so no row passes through
Python on the way in. With a cluster the directory must be one every executor can read: by
default it sits beside the warehouse (`<warehouse>-staging`), which they read already. Each file
is deleted once its commit is done; a crash leaves at most the file of the batch in flight.

Batches larger than `iceberg.max_buffer_rows` are spilled here in parts while they are read
(`merge.SpilledPart`), into one directory per sink, `spill-<host>-<pid>-<random>`: a crash can
leave a large transaction's worth of them, so a sink starting removes the spill directories of
processes of its host that no longer run (`remove_dead_spills`).
"""

from __future__ import annotations

import itertools
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


IDENTITY_COLUMN = "_dblog_identity"  # a staged row's key identity (`dblog.core.window.identity_token`)
AFTER_JSON_COLUMN = "_dblog_after"  # a staged row as the changelog table writes it (with iceberg.changelog)


@dataclass(frozen=True)
class StagedRanges:
    """The staging files of a read made by Spark tasks: `directory` in the staging area, one
    file per key range; `schema_ddl`: their columns as Spark reads them (`columns`, the source
    table's, typed like the target; then IDENTITY_COLUMN, and AFTER_JSON_COLUMN with the
    changelog); `extremes`: the key columns' (min,
    max) over every row (`arrow_batch.key_extremes`)."""

    directory: str
    ranges: int
    schema_ddl: str
    columns: tuple[str, ...]
    extremes: dict


def default_staging_dir(warehouse: str) -> str:
    return warehouse.rstrip("/") + "-staging"


def filesystem(directory: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of `directory` (a local path, or a URI `pyarrow.fs` knows) and its path there."""
    if "://" in directory:
        fs, root = pafs.FileSystem.from_uri(directory)
        return fs, root.rstrip("/")
    return pafs.LocalFileSystem(), str(Path(directory).resolve())


class StagingArea:
    def __init__(self, spark, directory: str) -> None:
        self.spark = spark
        self._local = "://" not in directory
        self._fs, self._root = filesystem(directory)
        self._uri_root = Path(self._root).as_uri() if self._local else directory.rstrip("/")
        self._fs.create_dir(self._root, recursive=True)
        self._prefix = f"batch-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._numbers = itertools.count(1)  # next() is atomic: commits of several tables run at once
        host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())
        self._spill_prefix = f"spill-{host}-"
        self._spill_directory: str | None = None  # made at the first spill

    def spill(self, tables: Iterable[pa.Table]) -> str:
        """Write `tables` (one schema, at least one) as one Parquet file of this sink's spill
        directory, a row group each, holding one of them at a time; the file's name."""
        if self._spill_directory is None:
            self._spill_directory = self.new_directory(f"{self._spill_prefix}{os.getpid()}-")
        name = f"{self._spill_directory}/part-{next(self._numbers)}.parquet"
        writer = None
        try:
            for table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(f"{self._root}/{name}", table.schema, filesystem=self._fs,
                                              compression="none")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError("nothing to spill")
        return name

    def read_spilled(self, names: list[str], schema_ddl: str):
        """A Spark DataFrame over the spilled files `names`."""
        return self.spark.read.schema(schema_ddl).parquet(*(f"{self._uri_root}/{name}" for name in names))

    def release_spilled(self, name: str) -> None:
        self.release(name)

    def remove_spills(self) -> None:
        """Remove this sink's spill directory (closing: what was not committed is written again)."""
        if self._spill_directory is not None:
            self.remove_directory(self._spill_directory)
            self._spill_directory = None

    def remove_dead_spills(self) -> list[str]:
        """Remove the spill directories that processes of this host which no longer run left
        behind (a crash); the names removed."""
        removed = []
        for info in self._fs.get_file_info(pafs.FileSelector(self._root)):
            if info.type != pafs.FileType.Directory or not info.base_name.startswith(self._spill_prefix):
                continue
            pid = info.base_name[len(self._spill_prefix):].split("-", 1)[0]
            if pid.isdigit() and not _running(int(pid)):
                self.remove_directory(info.base_name)
                removed.append(info.base_name)
        return removed

    def stage(self, table: pa.Table, schema_ddl: str):
        """Write `table` as one Parquet file; return (Spark DataFrame over it, file name)."""
        name = f"{self._prefix}-{next(self._numbers)}.parquet"
        # no compression: the file lives for one commit and is read once, from near by
        pq.write_table(table, f"{self._root}/{name}", filesystem=self._fs, compression="none")
        return self.spark.read.schema(schema_ddl).parquet(f"{self._uri_root}/{name}"), name

    def release(self, name: str) -> None:
        try:
            self._fs.delete_file(f"{self._root}/{name}")
        except FileNotFoundError:
            pass

    def new_directory(self, prefix: str) -> str:
        """A new directory for the files of one read; its name in the area."""
        name = f"{prefix}{uuid.uuid4().hex}"
        self._fs.create_dir(f"{self._root}/{name}", recursive=True)
        return name

    def location(self, name: str) -> str:
        """Where executors write into directory `name`: a local path, or a URI."""
        return f"{self._root}/{name}" if self._local else f"{self._uri_root}/{name}"

    def read_directory(self, name: str, schema_ddl: str):
        """A Spark DataFrame over every file of directory `name`."""
        return self.spark.read.schema(schema_ddl).parquet(f"{self._uri_root}/{name}")

    def remove_directory(self, name: str) -> None:
        try:
            self._fs.delete_dir(f"{self._root}/{name}")
        except FileNotFoundError:
            pass

    def remove_directories(self, prefix: str) -> None:
        """Remove the directories whose name starts with `prefix` (a crashed run's reads)."""
        for info in self._fs.get_file_info(pafs.FileSelector(self._root)):
            if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix):
                self.remove_directory(info.base_name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
