"""Where a batch waits as a Parquet file for Spark to read it as the MERGE source.

pyarrow writes the file (local paths, and `s3://`, `gs://`, `hdfs://` URIs through
`pyarrow.fs`); Spark reads it with its own Parquet reader in the JVM, so no row passes through
Python on the way in. With a cluster the directory must be one every executor can read: by
default it sits beside the warehouse (`<warehouse>-staging`), which they read already. Each file
is deleted once its commit is done. Batches larger than `iceberg.max_buffer_rows` are spilled
here in parts while they are read (`merge.SpilledPart`), deleted at their commit.

Ownership. Every file belongs to one Iceberg table and one run of a sink: it is
`t-<table>/<run>-<kind><n>.parquet`, `<run>` a random id per `StagingArea`. A crash (kill -9, a
container restarted) leaves the files of the commit in flight and of the spilled batches; they
are removed as soon as no live run owns them, judged without process ids (a container's dblog
is pid 1 after every restart, so a dead run's pid is a live process's):

* On a local filesystem, a run holds an exclusive `flock` on `run-<run>.lock` for its life
  (taken before its first file: made under a temporary name, locked, then renamed into place).
  The kernel drops the lock when the process ends however it ends (kill -9 included; pid reuse
  changes nothing), so a sink starting takes each other run's lock without waiting: taken, that
  run is dead, and its files and lock file are removed (`remove_abandoned`); refused, it lives.
  (`flock`, not POSIX `lockf`: those do not conflict within one process, where several sinks may
  run.) Lock files need a local filesystem (NFS emulates `flock` with POSIX locks).
* On object storage (S3, GCS) and HDFS no such lock exists; there the table's committed state
  decides. An Iceberg table is written by one sink only (its committed position is the offsets
  of that one writer: two writers would break exactly once), so the run that commits to a table
  owns every staging file of it: files of the table that it did not write belong to no pending
  commit of its own, hence to a dead run (or to one it replaced), and their commits either
  landed or will be made again from the offsets. The run removes them when it first writes the
  table (`claim`: at its first change of it). Files of a table no run writes any more stay.

Files of dblog versions before this layout: their spill directories (`spill-<host>-<pid>-…`) of
this host are removed when their pid is this process's own (which this version never writes) or
runs no more; their `batch-<pid>-….parquet` files, whose names say no host, are not touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


IDENTITY_COLUMN = "_dblog_identity"  # a staged row's key identity (`dblog.core.window.identity_token`)
AFTER_JSON_COLUMN = "_dblog_after"  # a staged row as the changelog table writes it (with iceberg.changelog)

log = logging.getLogger("dblog.spark")


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
        self._lockable = isinstance(self._fs, pafs.LocalFileSystem)  # a local filesystem: see "Ownership"
        self._uri_root = Path(self._root).as_uri() if self._local else directory.rstrip("/")
        self._fs.create_dir(self._root, recursive=True)
        self._numbers = itertools.count(1)  # next() is atomic: commits of several tables run at once
        self._run = uuid.uuid4().hex  # this run's files start with it (see "Ownership")
        self._lock = self._take_lock() if self._lockable else None
        self._claimed: set[str] = set()  # tables whose files of other runs are removed (object stores)
        self._claiming = threading.Lock()
        self._made: set[str] = set()  # the tables' directories made
        self._spilled: set[str] = set()  # this run's spill files not released yet

    # --- ownership ----------------------------------------------------------------------------

    def _take_lock(self) -> BinaryIO:
        """Hold `run-<run>.lock` for this run's life (see "Ownership"): locked under a temporary
        name, then renamed, so that every lock file another run can see is already locked. A file
        object: an area dropped without `close()` lets its lock go when it is collected."""
        while True:
            temporary = os.path.join(self._root, f".{_LOCK_PREFIX}{self._run}{_LOCK_SUFFIX}.tmp")
            fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.rename(temporary, self._lock_path(self._run))
                return os.fdopen(fd, "r+b", buffering=0)
            except FileNotFoundError:  # a sink starting took it for a dead run's and removed it
                os.close(fd)
                self._run = uuid.uuid4().hex
            except BaseException:
                os.close(fd)
                raise

    def _lock_path(self, run: str) -> str:
        return os.path.join(self._root, f"{_LOCK_PREFIX}{run}{_LOCK_SUFFIX}")

    def remove_abandoned(self) -> list[str]:
        """Remove the files of runs no process owns any more (local filesystem: their lock is
        free; see "Ownership"), and their lock files; the names removed. On object stores the
        files of dead runs are removed table by table (`claim`): here only the old layout's."""
        removed = self._remove_old_spills()
        if not self._lockable:
            return removed
        files: dict[str, list[str]] = {}  # by run
        stale: list[str] = []  # lock files being made, by runs that may have died meanwhile
        for entry in os.scandir(self._root):
            if entry.is_dir(follow_symlinks=False) and entry.name.startswith(_TABLE_PREFIX):
                for file in os.scandir(entry.path):
                    files.setdefault(file.name.split("-", 1)[0], []).append(f"{entry.name}/{file.name}")
            elif entry.name.startswith(_LOCK_PREFIX) and entry.name.endswith(_LOCK_SUFFIX):
                files.setdefault(entry.name[len(_LOCK_PREFIX):-len(_LOCK_SUFFIX)], [])
            elif entry.name.startswith("." + _LOCK_PREFIX) and entry.name.endswith(".tmp"):
                stale.append(entry.path)
        for run, names in files.items():
            if run == self._run:
                continue
            lock = _lock_if_free(self._lock_path(run))
            if lock is None:
                continue  # a live run's
            try:
                for name in names:
                    _remove(os.path.join(self._root, name))
                    removed.append(name)
                if lock >= 0:
                    _remove(self._lock_path(run))
                    removed.append(os.path.basename(self._lock_path(run)))
            finally:
                if lock >= 0:
                    os.close(lock)
        for path in stale:
            lock = _lock_if_free(path)
            if lock is not None and lock >= 0:
                try:
                    _remove(path)
                finally:
                    os.close(lock)
        return removed

    def _remove_old_spills(self) -> list[str]:
        """The spill directories of dblog before this layout, `spill-<host>-<pid>-…`, of this
        host, whose pid is this process's (a container's pid 1 after a restart: not ours, since
        this version makes none) or runs no more."""
        prefix = "spill-" + "".join(c if c.isalnum() else "_" for c in socket.gethostname()) + "-"
        removed = []
        for info in self._fs.get_file_info(pafs.FileSelector(self._root)):
            if info.type != pafs.FileType.Directory or not info.base_name.startswith(prefix):
                continue
            pid = info.base_name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and (int(pid) == os.getpid() or not _running(int(pid))):
                self.remove_directory(info.base_name)
                removed.append(info.base_name)
        return removed

    def claim(self, table: str) -> None:
        """This run writes Iceberg table `table`. On an object store, the first time: the
        table's staging files that this run did not make are removed (see "Ownership"); on a
        local filesystem the locks have told already."""
        directory = _TABLE_PREFIX + _path_part(table)
        if self._lockable or directory in self._claimed:
            return
        with self._claiming:
            if directory in self._claimed:
                return
            removed = 0
            for info in self._fs.get_file_info(pafs.FileSelector(f"{self._root}/{directory}", allow_not_found=True)):
                if info.type == pafs.FileType.File and not info.base_name.startswith(self._run):
                    self.release(f"{directory}/{info.base_name}")
                    removed += 1
            if removed:
                log.info("removed %d files of %s from the staging area (%s): no commit of this run, the table's "
                         "writer, names them (left by a run that stopped)", removed, table, directory)
            self._claimed.add(directory)

    def _directory(self, table: str) -> str:
        """The directory of `table`'s files, made (and the table claimed) at its first file."""
        directory = _TABLE_PREFIX + _path_part(table)
        if directory not in self._made:
            self.claim(table)
            self._fs.create_dir(f"{self._root}/{directory}", recursive=True)
            self._made.add(directory)
        return directory

    def close(self) -> None:
        """The run ends: its spill files go (what was not committed is written again), and its
        lock with its lock file."""
        self.remove_spills()
        if self._lock is not None:
            _remove(self._lock_path(self._run))
            self._lock.close()
            self._lock = None

    # --- files ----------------------------------------------------------------------------------

    def _name(self, table: str, kind: str) -> str:
        return f"{self._directory(table)}/{self._run}-{kind}{next(self._numbers)}.parquet"

    def spill(self, tables: Iterable[pa.Table], table: str) -> str:
        """Write `tables` (one schema, at least one) as one Parquet file of Iceberg table
        `table`'s spilled batch, a row group each, holding one of them at a time; the file's name."""
        name = self._name(table, "s")
        self._spilled.add(name)
        writer = None
        try:
            for part in tables:
                if writer is None:
                    writer = pq.ParquetWriter(f"{self._root}/{name}", part.schema, filesystem=self._fs,
                                              compression="none")
                writer.write_table(part)
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
        self._spilled.discard(name)

    def remove_spills(self) -> None:
        """Remove this run's spill files not committed yet (closing: what was not committed is
        written again)."""
        for name in list(self._spilled):
            self.release_spilled(name)

    def stage(self, batch: pa.Table, schema_ddl: str, table: str):
        """`write_batch`, and a Spark DataFrame over the file: (the DataFrame, the file's name)."""
        name = self.write_batch(batch, table)
        return self.spark.read.schema(schema_ddl).parquet(f"{self._uri_root}/{name}"), name

    def write_batch(self, batch: pa.Table, table: str) -> str:
        """Write `batch` as one Parquet file of a commit to Iceberg table `table`; its name."""
        name = self._name(table, "b")
        # no compression: the file lives for one commit and is read once, from near by
        pq.write_table(batch, f"{self._root}/{name}", filesystem=self._fs, compression="none")
        return name

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


_TABLE_PREFIX = "t-"
_LOCK_PREFIX, _LOCK_SUFFIX = "run-", ".lock"


def _path_part(table: str) -> str:
    """A directory name for Iceberg table `table` (`catalog`.`db`.`table`, quoted): its letters,
    digits and `._-`, and a hash of the whole name (two names never share one)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", table.replace("`", "")).strip("_")[:100]
    return f"{readable}-{hashlib.sha256(table.encode()).hexdigest()[:12]}"


def _lock_if_free(path: str) -> int | None:
    """An exclusive lock on the lock file at `path`, taken without waiting: its descriptor (-1:
    no such file, so no run holds it), or None when a live run holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
