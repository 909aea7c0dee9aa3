"""The end-to-end check: does the sink hold exactly the source tables?

Used by `dblog demo` and by the integration tests, for the JSON-lines sink (its replay) and the
Iceberg sink (its tables read back through Spark). Both sides are normalized the same way (the
sink holds normalized values; the source is read through a `SourceConnection`), so any difference is a
real one: a lost row, a resurrected delete, a stale value or a key held twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dblog.core.events import TableId
from dblog.mysql.chunk_reader import ChunkRequest
from dblog.mysql.schema import TableNotFound
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines


@dataclass
class Comparison:
    rows: dict[str, int] = field(default_factory=dict)  # source rows per table
    missing: dict[str, list] = field(default_factory=dict)  # in the source, not in the sink
    extra: dict[str, list] = field(default_factory=dict)  # in the sink, not in the source
    stale: dict[str, list] = field(default_factory=dict)  # in both, different values
    duplicate: dict[str, str] = field(default_factory=dict)  # a key the sink holds twice (Iceberg): why
    subject: str = "sink replay"  # what was compared with the source, for summary()
    plural: bool = False

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.stale or self.duplicate)

    def summary(self) -> str:
        total = sum(self.rows.values())
        if self.equal:
            verb = "equal" if self.plural else "equals"
            return f"{self.subject} {verb} source: {len(self.rows)} tables, {total:,} rows"
        parts = []
        for label, found in (("missing", self.missing), ("extra", self.extra), ("stale", self.stale)):
            for table, keys in found.items():
                parts.append(f"{table}: {len(keys)} {label} (e.g. {keys[:3]})")
        parts += [f"{table}: {why}" for table, why in self.duplicate.items()]
        verb = "DIFFER" if self.plural else "DIFFERS"
        return f"{self.subject} {verb} from source: " + "; ".join(parts)


def source_rows(source: SourceConnection, table: TableId, chunk_size: int = 5000) -> dict[tuple, dict]:
    """The table's rows by key; none for a table that does not exist (dropped, renamed away):
    a replay must hold none either."""
    try:
        schema = source.schemas.schema(table)
    except TableNotFound:
        return {}
    rows: dict[tuple, dict] = {}
    max_key = source.chunks.max_key(schema)
    after = None
    while max_key is not None:
        chunk = source.chunks.read_chunk(ChunkRequest(schema, after, max_key, chunk_size))
        for row in chunk:
            rows[schema.key_of(row)] = row
        if len(chunk) < chunk_size:
            break
        after = schema.key_of(chunk[-1])
    return rows


class DuplicateKey(Exception):
    """The sink holds a key twice (its rows cannot be keyed): the message says which."""


def compare_with_source(
    source: SourceConnection, tables: list[TableId], sink_rows: Callable[[TableId], dict[tuple, dict]], result: Comparison
) -> Comparison:
    """Compare each table's source rows with `sink_rows(table)` (same form as `source_rows`),
    filling `result`. A sink that finds a key twice raises `DuplicateKey` from `sink_rows`."""
    for table in tables:
        name = str(table)
        expected = source_rows(source, table)
        result.rows[name] = len(expected)
        try:
            sink = sink_rows(table)
        except DuplicateKey as error:
            result.duplicate[name] = str(error)
            continue
        missing = [key for key in expected if key not in sink]
        extra = [key for key in sink if key not in expected]
        stale = [key for key in expected if key in sink and sink[key] != expected[key]]
        if missing:
            result.missing[name] = missing
        if extra:
            result.extra[name] = extra
        if stale:
            result.stale[name] = stale
    return result


def compare_sink_with_source(sink_path: str, source: SourceConnection, tables: list[TableId]) -> Comparison:
    """The JSON-lines sink file, replayed (`materialize`: last change per key wins; TRUNCATE,
    DROP and RENAME records applied), against `SELECT *`."""
    replayed = materialize(read_json_lines(sink_path))
    return compare_with_source(source, tables, lambda table: replayed.get(str(table), {}), Comparison())


def compare_iceberg_with_source(sink, source: SourceConnection, tables: list[TableId]) -> Comparison:
    """Each table's Iceberg target (`sink`: a `SparkIcebergSink`; read through its Spark session,
    so call this from a thread where no MERGE runs), against `SELECT *`. A routed (sharded)
    target is compared on the source table's own rows."""
    from dblog.core.sql import quote_identifier as quote
    from dblog.sinks.iceberg.maintenance import sql_string
    from dblog.sinks.iceberg.routing import SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN
    from dblog.sinks.iceberg.sink import read_target

    def iceberg_rows(table: TableId) -> dict[tuple, dict]:
        route = sink.router.route(table)
        if not sink.spark.catalog.tableExists(f"{sink.catalog}.{route.target.db}.{route.target.table}"):
            return {}  # never created: every source row is missing
        sharded = route.sharded
        try:
            schema = source.schemas.schema(table)
        except TableNotFound:  # dropped at the source: whatever its target still holds is extra
            query = f"SELECT * FROM {sink.target_name(table)}"
            if sharded:
                query += (f" WHERE {quote(SOURCE_DB_COLUMN)} = {sql_string(table.db)}"
                          f" AND {quote(SOURCE_TABLE_COLUMN)} = {sql_string(table.table)}")
            return {(index,): row.asDict() for index, row in enumerate(sink.spark.sql(query).collect())}
        try:
            return read_target(sink.spark, sink.target_name(table), schema,
                               sharded_source=table if sharded else None)
        except AssertionError as error:  # read_target: "key … appears twice in …"
            raise DuplicateKey(str(error)) from None

    return compare_with_source(source, tables, iceberg_rows, Comparison(subject="Iceberg tables", plural=True))
