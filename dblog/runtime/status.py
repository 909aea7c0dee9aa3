"""`dblog status`: a readable account of the committed snapshot state, and of the running
engine's as its health endpoint says (`/readyz`: waiting for its source, and since when)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from dblog.core.offsets import Offsets
from dblog.core.progress import SnapshotProgress, TableSnapshot

ENDPOINT_TIMEOUT_SECONDS = 3.0


def describe(offsets: Offsets) -> str:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    position = offsets.describe_position() if offsets.binlog is not None else (offsets.position or "(start)")
    lines = [f"binlog position: {position}"]
    if progress.current is None:
        lines.append("snapshot: idle")
    else:
        lines.append(f"snapshot: {'PAUSED' if progress.paused else 'running'}"
                     f" (request {progress.snapshot_id or '-'})")
        for index, entry in enumerate(progress.queue):
            state = ("paused" if progress.paused else "reading") if index == 0 else "queued"
            lines.append(f"  {entry.table}: {state}, {table_progress(entry, show_eta=not progress.paused)}"
                         f"{_request_text(entry)}")
    for table in progress.completed_tables:
        lines.append(f"  {table}: completed")
    return "\n".join(lines)


def engine_state(readiness: dict[str, Any]) -> str:
    """One line from the running engine's /readyz body (dblog.runtime.metrics `readiness`)."""
    restarts = f", {readiness['restarts']} restarts" if readiness.get("restarts") else ""
    since = readiness.get("waiting_for_source_since")
    reasons = "; ".join(readiness.get("reasons") or [])
    if since:
        return f"engine: WAITING for the source database since {since}{restarts} ({reasons})"
    if readiness.get("ready"):
        lag = readiness.get("lag_seconds")
        return f"engine: streaming{f', {lag:g} s behind the source' if lag is not None else ''}{restarts}"
    return f"engine: not ready{restarts} ({reasons})"


def ask_engine(host: str, port: int) -> str:
    """The running engine's state from its health endpoint (http.host, http.port), or why there
    is no answer."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # listening on every interface: this one too
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=ENDPOINT_TIMEOUT_SECONDS) as response:
            body = response.read()
    except urllib.error.HTTPError as error:  # 503: not ready, with its reasons
        body = error.read()
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return f"engine: no answer from {url} ({reason}): not running, or another http.host/http.port"
    try:
        return engine_state(json.loads(body))
    except (ValueError, AttributeError):
        return f"engine: {url} did not answer with dblog's /readyz"


def table_progress(entry: TableSnapshot, show_eta: bool = True) -> str:
    """"41,000 of ~100,000 rows scanned in 41 chunks, last key …, max key …, 20,500 rows/s, ETA 0m03s"."""
    text = (
        f"{entry.rows_scanned:,}"
        f"{f' of ~{entry.estimated_rows:,}' if entry.estimated_rows is not None else ''} rows scanned "
        f"in {entry.chunks} chunks"
        f"{f' (+{entry.window_rows:,} staged by the read under way)' if entry.window_rows else ''}"
        f", last key {_key(entry.last_key)}, max key {_key(entry.max_key)}"
    )
    rate, eta = entry.rate(), entry.eta_seconds()
    if rate is not None:
        text += f", {rate:,.0f} rows/s"
    if eta is not None and show_eta:
        text += f", ETA {_duration(eta)}"
    return text


def _request_text(entry: TableSnapshot) -> str:
    """The read's condition and surrogate key: one table can be queued with several."""
    text = f", where {entry.condition}" if entry.condition else ""
    return text + (f", paged by {entry.surrogate_key}" if entry.surrogate_key else "")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _key(key) -> str:
    return "-" if key is None else "(" + ", ".join(repr(part) for part in key) + ")"
