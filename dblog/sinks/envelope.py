"""Debezium's change-event envelope, the format users' existing consumers already parse.

Each record is a (key, value) pair as a Kafka consumer of Debezium sees it: the key holds the
primary-key columns, the value is Debezium 3.x's `{before, after, source, transaction, op, ts_ms,
ts_us, ts_ns}` with its MySQL `source` block (`SOURCE_FIELDS`, in Debezium's order). An update
that changes the primary key becomes a delete of the old key followed by a create of the new one,
as Debezium does, so a consumer that keys by primary key never keeps a ghost row.

The `source` block, field by field as Debezium's MySQL connector fills it:
`ts_ms` the binlog event's time (seconds, as the binlog has them) or, for a snapshot row, when it
was read, with `ts_us`/`ts_ns` the same instant; `snapshot` `"false"` for streamed changes,
`"incremental"` for incremental-snapshot rows (with `snapshot.initial_markers`, the startup
snapshot's rows carry Debezium's initial-snapshot markers instead: `first`, `true`, …, `last`); `sequence` null (MySQL has none); `server_id`,
`gtid`, `file`, `pos`, `row` where the change is in the binlog (`row`: its index in its rows
event); `thread` null (MariaDB logs no thread id with row events; Debezium writes null there
too); `query` null (Debezium's `include.query` is off by default). The envelope's
`ts_ms`/`ts_us`/`ts_ns` say when dblog wrote the record.

Statements that change rows without row events are records too, so that replaying the output
in order gives the source's tables (`materialize`):

* TRUNCATE: Debezium's truncate record, `op` `t`, key, `before` and `after` null.
* DDL naming a captured table: a schema-change record shaped like Debezium's schema-change
  topic, `{"key": {"databaseName"}, "value": {"source", "ts_ms", "databaseName", "schemaName",
  "ddl", "tableChanges"}}` (no `op`), one `tableChanges` entry per captured table: `CREATE`,
  `ALTER`, `DROP` (DROP TABLE, CREATE OR REPLACE: the old rows are gone), and for a rename
  `ALTER` with the new name in `id` and the old one in `previousId` (the rows move; renamed out
  of the captured tables, it is a `DROP` of the old name). Ids are `db.table`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from dblog import __version__
from dblog.core.ddl import DdlChange
from dblog.core.events import RowChange, SchemaChange, SourceInfo, TableId
from dblog.core.file_positions import is_file_position_name

Record = dict[str, Any]


def envelopes(
    change: RowChange, key_columns: tuple[str, ...], connector: str, ts_ms: int, ts_ns: int | None = None
) -> Iterator[Record]:
    """The records of one change; `ts_ms` (and, more precise, `ts_ns`) is now, when it is written."""
    ts_ns = ts_ms * 1_000_000 if ts_ns is None else ts_ns
    if change.before_key is not None:
        yield _record(change, "d", change.before, None, change.before_key, key_columns, connector, ts_ns)
        yield _record(change, "c", None, change.after, change.key, key_columns, connector, ts_ns)
        return
    yield _record(change, change.op, change.before, change.after, change.key, key_columns, connector, ts_ns)


def _record(change, op, before, after, key, key_columns, connector, ts_ns) -> Record:
    return {
        "key": dict(zip(key_columns, key)),
        "value": {
            "before": before,
            "after": after,
            "source": source_block(change.source, change.table, connector, ts_ns),
            "transaction": None,  # Debezium's, without provide.transaction.metadata
            "op": op,
            "ts_ms": ts_ns // 1_000_000,
            "ts_us": ts_ns // 1_000,
            "ts_ns": ts_ns,
        },
    }


def source_block(source: SourceInfo, table: TableId, connector: str, ts_ns: int) -> dict:
    """Debezium's `source` (io.debezium.connector.mysql.Source) of a change at `source` in
    `table`; `ts_ns` (now) stands for the source's time when it has none (a snapshot row)."""
    if source.ts_ms is not None:
        ts_ms, ts_us, source_ns = source.ts_ms, source.ts_ms * 1000, source.ts_ms * 1_000_000
    else:
        ts_ms, ts_us, source_ns = ts_ns // 1_000_000, ts_ns // 1000, ts_ns
    return {
        "version": __version__,
        "connector": "mysql",
        "name": connector,
        "ts_ms": ts_ms,
        "snapshot": source.initial_marker or ("incremental" if source.snapshot else "false"),
        "db": table.db,
        "sequence": None,
        "ts_us": ts_us,
        "ts_ns": source_ns,
        "table": table.table,
        "server_id": source.server_id or 0,
        "gtid": source.gtid,
        "file": source.file or "",
        "pos": source.pos or 0,
        "row": source.row,
        "thread": None,
        "query": None,
    }


def truncate_record(table: TableId, gtid: str | None, connector: str, ts_ms: int, ts_ns: int | None = None,
                    source: SourceInfo | None = None) -> Record:
    """Debezium's record for a TRUNCATE of `table`: every row of it is gone. `source`: where the
    statement is in the binlog (else only its GTID is known)."""
    ts_ns = ts_ms * 1_000_000 if ts_ns is None else ts_ns
    record = _record(RowChange(table, "t", (), None, None, source or SourceInfo()), "t", None, None, (), (),
                     connector, ts_ns)
    record["key"] = None
    if record["value"]["source"]["gtid"] is None:
        record["value"]["source"]["gtid"] = gtid
    return record


def statement_gtid(change: SchemaChange) -> str | None:
    """A statement's GTID as its records say it; None when read by binlog file and position
    (dblog.core.file_positions), as Debezium's without GTIDs."""
    return None if is_file_position_name(change.gtid) else str(change.gtid)


def schema_change_record(
    change: SchemaChange, ddl: DdlChange, captures: Callable[[TableId], bool], connector: str, ts_ms: int
) -> Record | None:
    """The schema-change record of DDL naming a captured table (None when it names none)."""
    renamed = {old: new for old, new in ddl.renamed}
    kind = {"create_table": "CREATE", "drop_table": "DROP"}.get(ddl.kind, "ALTER")
    changes = []
    for table in ddl.tables:
        new = renamed.get(table)
        if new is not None and captures(new):
            changes.append({"type": "ALTER", "id": str(new), "previousId": str(table)})
        elif new is not None and captures(table):
            changes.append({"type": "DROP", "id": str(table)})
        elif captures(table):
            changes.append({"type": kind, "id": str(table)})
    if not changes:
        return None
    first = TableId.parse(changes[0].get("previousId", changes[0]["id"]))
    source = source_block(change.source, first, connector, ts_ms * 1_000_000)
    source["gtid"] = statement_gtid(change)
    source["table"] = ",".join(TableId.parse(c.get("previousId", c["id"])).table for c in changes)
    return {
        "key": {"databaseName": change.db},
        "value": {"source": source, "ts_ms": ts_ms, "databaseName": change.db, "schemaName": None,
                  "ddl": change.sql, "tableChanges": changes},
    }


def materialize(records) -> dict[str, dict[tuple, dict]]:
    """Replay records in order into `{"db.table": {key tuple: row}}`: the state a consumer
    that applies every event ends with: upsert on c/u/r, delete on d, empty the table on t; of
    schema changes, DROP forgets the table and a rename (`previousId`) moves its rows."""
    tables: dict[str, dict[tuple, dict]] = {}
    for record in records:
        value = record["value"]
        table_changes = value.get("tableChanges")
        if table_changes is not None:
            for table_change in table_changes:
                previous = table_change.get("previousId")
                if table_change["type"] == "DROP":
                    tables.pop(table_change["id"], None)
                elif previous is not None:
                    tables[table_change["id"]] = tables.pop(previous, {})
            continue
        source = value["source"]
        name = f"{source['db']}.{source['table']}"
        if value["op"] == "t":
            tables[name] = {}
            continue
        rows = tables.setdefault(name, {})
        key = tuple(record["key"].values())
        if value["op"] == "d":
            rows.pop(key, None)
        else:
            rows[key] = value["after"]
    return tables
