"""Debezium's change-event envelope, the format users' existing consumers already parse.

Each record is a (key, value) pair as a Kafka consumer of Debezium sees it: the key holds the
primary-key columns, the value is `{before, after, source, op, ts_ms}`. An update that changes
the primary key becomes a delete of the old key followed by a create of the new one, as
Debezium does, so a consumer that keys by primary key never keeps a ghost row.
"""

from __future__ import annotations

from typing import Any, Iterator

from dblog import __version__
from dblog.events import RowChange

Record = dict[str, Any]


def envelopes(
    change: RowChange, key_columns: tuple[str, ...], connector: str, ts_ms: int
) -> Iterator[Record]:
    if change.before_key is not None:
        yield _record(change, "d", change.before, None, change.before_key, key_columns, connector, ts_ms)
        yield _record(change, "c", None, change.after, change.key, key_columns, connector, ts_ms)
        return
    yield _record(change, change.op, change.before, change.after, change.key, key_columns, connector, ts_ms)


def _record(change, op, before, after, key, key_columns, connector, ts_ms) -> Record:
    source = change.source
    return {
        "key": dict(zip(key_columns, key)),
        "value": {
            "before": before,
            "after": after,
            "source": {
                "version": __version__,
                "connector": "mysql",
                "name": connector,
                "ts_ms": source.ts_ms if source.ts_ms is not None else ts_ms,
                "snapshot": "incremental" if source.snapshot else "false",
                "db": change.table.db,
                "table": change.table.table,
                "server_id": source.server_id or 0,
                "gtid": source.gtid,
                "file": source.file or "",
                "pos": source.pos or 0,
                "row": source.row,
            },
            "op": op,
            "ts_ms": ts_ms,
        },
    }


def materialize(records) -> dict[str, dict[tuple, dict]]:
    """Replay records in order into `{"db.table": {key tuple: row}}`: the state a consumer
    that applies every event (upsert on c/u/r, delete on d) ends with."""
    tables: dict[str, dict[tuple, dict]] = {}
    for record in records:
        value = record["value"]
        source = value["source"]
        rows = tables.setdefault(f"{source['db']}.{source['table']}", {})
        key = tuple(record["key"].values())
        if value["op"] == "d":
            rows.pop(key, None)
        else:
            rows[key] = value["after"]
    return tables
