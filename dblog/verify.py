"""The end-to-end check: does replaying the sink give exactly the source tables?

Used by `dblog demo` and by the integration tests. Both sides are normalized the same way
(the sink holds normalized values; the source is read through `ChunkReader`), so any
difference is a real one: a lost row, a resurrected delete or a stale value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dblog.chunk_reader import ChunkReader
from dblog.envelope import materialize
from dblog.events import TableId
from dblog.sinks import read_json_lines


@dataclass
class Comparison:
    rows: dict[str, int] = field(default_factory=dict)  # source rows per table
    missing: dict[str, list] = field(default_factory=dict)  # in the source, not in the sink
    extra: dict[str, list] = field(default_factory=dict)  # in the sink, not in the source
    stale: dict[str, list] = field(default_factory=dict)  # in both, different values

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.stale)

    def summary(self) -> str:
        total = sum(self.rows.values())
        if self.equal:
            return f"sink replay equals source: {len(self.rows)} tables, {total:,} rows"
        parts = []
        for label, found in (("missing", self.missing), ("extra", self.extra), ("stale", self.stale)):
            for table, keys in found.items():
                parts.append(f"{table}: {len(keys)} {label} (e.g. {keys[:3]})")
        return "sink replay DIFFERS from source: " + "; ".join(parts)


def source_rows(reader: ChunkReader, table: TableId, chunk_size: int = 5000) -> dict[tuple, dict]:
    schema = reader.schema(table)
    rows: dict[tuple, dict] = {}
    max_key = reader.max_key(schema)
    after = None
    while max_key is not None:
        chunk = reader.read_chunk(schema, after, max_key, chunk_size)
        for row in chunk:
            rows[schema.key_of(row)] = row
        if len(chunk) < chunk_size:
            break
        after = schema.key_of(chunk[-1])
    return rows


def compare_sink_with_source(sink_path: str, reader: ChunkReader, tables: list[TableId]) -> Comparison:
    replayed = materialize(read_json_lines(sink_path))
    result = Comparison()
    for table in tables:
        source = source_rows(reader, table)
        sink = replayed.get(str(table), {})
        name = str(table)
        result.rows[name] = len(source)
        missing = [key for key in source if key not in sink]
        extra = [key for key in sink if key not in source]
        stale = [key for key in source if key in sink and sink[key] != source[key]]
        if missing:
            result.missing[name] = missing
        if extra:
            result.extra[name] = extra
        if stale:
            result.stale[name] = stale
    return result
