"""Peak RSS of the engine for two table sizes: is memory bounded by the chunk, not the table?

For each size a table of that many generated orders is made (without binlog), and a fresh
process (`benchmarks.rss_snapshot`) runs the engine's snapshot of it to the null sink and
reports its RSS. The figure is that process's own peak RSS during the snapshot (VmHWM, reset
after imports and start-up: their peak, in the details, would hide what the snapshot itself
holds; `benchmarks.process_rss`). The larger table's figure is given as a ratio of the
smaller's: the target is 1.0 ± 0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from benchmarks.dataset import drop_table, generated_table
from benchmarks.figures import Figure, rate
from benchmarks.snapshot import snapshot_timeout

if TYPE_CHECKING:
    from benchmarks.context import BenchContext


def measure_rss(ctx: BenchContext) -> None:
    first_key = None
    for size in sorted(ctx.options.rss_sizes):
        table = generated_table(ctx.db, size)
        try:
            config = ctx.engine_config(f"rss-{size}", [table.table], {"type": "null"})
            command = [sys.executable, "-m", "benchmarks.rss_snapshot", "--config", json.dumps(config),
                       "--table", str(table.table)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=snapshot_timeout(size))
            if done.returncode != 0:
                raise RuntimeError(f"rss_snapshot failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            drop_table(ctx.db, table.table)
        key = f"rss.{size}"
        figure = ctx.report(Figure(
            key, "rss", f"peak RSS of the engine during a snapshot of {size:,} rows (own process, VmHWM; "
                        f"plus its binlog reader process's, if any)",
            measured["total_peak_kib"] / 1024, "MiB", limit=first_key,
            check=f"{measured['rows']:,} snapshot events, {measured['status']}, peak of the {measured['peak_scope']}",
            check_ok=measured["rows"] == size and measured["status"] == "SUCCEEDED",
            detail={**measured, "engine_peak_mib": round(measured["peak_kib"] / 1024, 1),
                    "startup_peak_mib": round(measured["startup_peak_kib"] / 1024, 1),
                    "before_snapshot_mib": round(measured["rss_before_kib"] / 1024, 1),
                    "rows_per_second": round(rate(measured["rows"], measured["seconds"]))},
        ))
        first_key = first_key or figure.key
