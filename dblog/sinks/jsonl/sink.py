"""The JSON-lines sink: one Debezium record per line, fsynced on flush."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

import orjson

from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.schema import TableSchema
from dblog.sinks.base import Sink
from dblog.sinks.column_options import ColumnSettings, TableColumns
from dblog.sinks.envelope import envelopes, schema_change_record, statement_gtid, truncate_record
from dblog.sinks.record_bytes import NO_TRANSACTION, RecordBytes, envelope_times


class JsonLinesSink(Sink):
    """Appends one Debezium record per line (`{"key": …, "value": envelope}`) to a file: row
    changes, and TRUNCATE / DDL of captured tables (`dblog.sinks.envelope`)."""

    def __init__(self, path: str | os.PathLike, key_columns: Callable[[TableId], tuple[str, ...]], connector: str,
                 captures: Callable[[TableId], bool] = lambda table: True,
                 columns: ColumnSettings | None = None, schema_of: Callable[[TableId], TableSchema] | None = None):
        """`columns` (`[columns]`, needs `schema_of`): the columns the records carry and their
        masks, in dblog's normal form (dblog.sinks.column_options); the key stays whole."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        self._file = open(self.path, "ab")
        self._key_columns = key_columns
        self._connector = connector
        self._captures = captures
        self._column_settings = columns if columns is not None and columns.rewrites_rows else None
        self._schema_of = schema_of
        self._columns: dict[TableId, TableColumns] = {}
        self._records: dict[TableId, tuple[tuple[str, ...], RecordBytes]] = {}  # by table: its key, its records

    def table_redefined(self, table: TableId) -> None:
        self._columns.pop(table, None)

    def schema_changed(self, change: SchemaChange, ddl: DdlChange, position: GtidSet) -> list[TableId]:
        """A TRUNCATE is a `t` record per captured table; other DDL naming a captured table a
        schema-change record (a replay drops, moves or keeps the table's rows by it)."""
        self._columns.clear()  # the tables' columns may have changed
        now_ns = time.time_ns()
        now = now_ns // 1_000_000
        if ddl.kind == "truncate":
            records = [truncate_record(table, statement_gtid(change), self._connector, now, now_ns, change.source)
                       for table in ddl.tables if self._captures(table)]
        else:
            record = schema_change_record(change, ddl, self._captures, self._connector, now)
            records = [record] if record is not None else []
        if records:
            self._file.write(b"\n".join(encode_record(record) for record in records) + b"\n")
        return []

    def write(self, changes: list[RowChange]) -> None:
        """Each change's line is `encode_record` of its envelope, assembled from byte pieces as the
        Kafka sink's values are (`dblog.sinks.record_bytes`: the same bytes, without building the
        envelope's dicts; a window's rows share their source block): building them was most of
        the sink's time in a snapshot once the envelope had Debezium 3.x's fields."""
        now_ns = time.time_ns()
        times = envelope_times(now_ns)
        lines = []
        append, assembled, key_columns_of = lines.append, self._records, self._key_columns
        for change in changes:
            if self._column_settings is not None:
                change = self._filtered(change)
            table = change.table
            key_columns = key_columns_of(table)
            if change.before_key is not None:  # a key change: a delete and a create, as `envelopes` writes it
                lines.extend(encode_record(record) for record in
                             envelopes(change, key_columns, self._connector, now_ns // 1_000_000, now_ns))
                continue
            known = assembled.get(table)
            if known is None or known[0] != key_columns:  # new, or keyed anew (a surrogate key, DDL)
                known = assembled[table] = (key_columns, RecordBytes(table, self._connector, key_columns, None))
            records = known[1]
            append(b'{"key":' + records.key(change.key) + b',"value":'
                   + records.value(change, change.before, change.after, NO_TRANSACTION, times, now_ns) + b"}")
        if lines:
            self._file.write(b"\n".join(lines) + b"\n")

    def _filtered(self, change: RowChange) -> RowChange:
        columns = self._columns.get(change.table)
        if columns is None:
            columns = self._columns[change.table] = TableColumns(self._schema_of(change.table), self._column_settings)
        return columns.rewrite(change)

    def flush(self, offsets: Offsets | None = None) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()


def encode_record(record: dict) -> bytes:
    """One record as compact UTF-8 JSON (what `json.dumps(record, ensure_ascii=False,
    separators=(",", ":"))` would write, encoded), by orjson: the stdlib encoder took more time
    per record than the rest of the snapshot."""
    return orjson.dumps(record)


def _drop_torn_tail(path: Path) -> None:
    """A crash mid-write can leave a last line without its newline. It was never covered by a
    committed offset (it is written again after the restart), so cut it off before appending."""
    if not path.exists():
        return
    with open(path, "rb+") as data:
        size = data.seek(0, os.SEEK_END)
        if size == 0:
            return
        data.seek(size - 1)
        if data.read(1) == b"\n":
            return
        end = size
        while end > 0:
            step = min(65536, end)
            data.seek(end - step)
            block = data.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                data.truncate(end - step + newline + 1)
                return
            end -= step
        data.truncate(0)


def read_json_lines(path: str | os.PathLike):
    """The records of a JSON-lines sink file (a torn last line, left by a crash, is skipped)."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):
                yield json.loads(line)
