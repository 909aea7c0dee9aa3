"""`dblog status`: a readable account of the committed snapshot state."""

from __future__ import annotations

from dblog.offsets import Offsets
from dblog.progress import SnapshotProgress


def describe(offsets: Offsets) -> str:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    lines = [f"binlog position: {offsets.position or '(start)'}"]
    if progress.current is None:
        lines.append("snapshot: idle")
    else:
        lines.append(f"snapshot: {'PAUSED' if progress.paused else 'running'}"
                     f" (request {progress.snapshot_id or '-'})")
        for index, entry in enumerate(progress.queue):
            state = "reading" if index == 0 else "queued"
            lines.append(
                f"  {entry.table}: {state}, {entry.rows_scanned:,} rows scanned in {entry.chunks} chunks, "
                f"last key {_key(entry.last_key)}, max key {_key(entry.max_key)}"
            )
    for table in progress.completed_tables:
        lines.append(f"  {table}: completed")
    return "\n".join(lines)


def _key(key) -> str:
    return "-" if key is None else "(" + ", ".join(repr(part) for part in key) + ")"
