"""What a collation sort key costs: `Collation.sort_key` (dblog.mysql.collation), the key the
window and the key-equality checks compute for a string key under the column's collation, per
call, against Python's own case-insensitive key for the same text (`str.casefold`) measured in
the same run. A no-op call of the same shape is in each figure's details: the part of a call
that is Python's call overhead, not the key.

Each figure is the fastest of `REPEATS` timings of `CALLS` calls (timeit's advice: the slower
repeats measure the machine's other load, not the code). The weights are loaded from the
private MariaDB first (not timed). Checked: the key of the upper-cased text equals the text's
(every collation measured is case-insensitive), so the measured key is a real one.

    python -m benchmarks --only collation --name collation
"""

from __future__ import annotations

import timeit
from typing import TYPE_CHECKING, Callable

from benchmarks.figures import Figure
from dblog.mysql.collation import load_collation

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

DATABASE = "bench_collation"  # any database: load_collation reads MariaDB's SEQUENCE tables through it
CALLS = 20_000
REPEATS = 7
TEXTS = {
    "accented": "customer-000123 Ünïcödé",  # every character looked up in the weights
    "contracting": "Guillermo Chávez",  # 'll' and 'Ch' are contractions in utf8mb4_spanish2_ci
}
# (collation, text, what the figure shows)
CASES = [
    ("utf8mb4_general_ci", "accented", "one weight per character"),
    ("utf8mb4_unicode_520_ci", "accented", "one weight per character"),
    ("utf8mb4_uca1400_ai_ci", "accented", "contractions in the collation, none in the text"),
    ("utf8mb4_spanish2_ci", "contracting", "contractions in the text: the scanner's slow path"),
]


def _noop(text: str) -> None:
    return None


def microseconds_per_call(function: Callable[[], object]) -> float:
    return min(timeit.repeat(function, number=CALLS, repeat=REPEATS)) / CALLS * 1e6


def measure_collation(context: BenchContext) -> None:
    section = "collation"
    context.db.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    connection = context.db.connect(DATABASE)
    try:
        available = {row[0] for row in context.db.execute(  # MariaDB 10.10+ names uca1400 per charset only in the first
            "SELECT FULL_COLLATION_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY "
            "UNION SELECT COLLATION_NAME FROM information_schema.COLLATIONS")}
        models = {name: load_collation(connection, name, "utf8mb4", DATABASE)
                  for name, _, _ in CASES if name in available}
    finally:
        connection.close()
    for name, text in TEXTS.items():
        context.report(Figure(
            f"collation.casefold.{name}", section, f"str.casefold of {text!r} (Python's own case-insensitive key)",
            round(microseconds_per_call(lambda: text.casefold()), 3), "µs",
            detail={"calls": CALLS, "repeats": REPEATS, "noop_call_us": round(microseconds_per_call(lambda: _noop(text)), 3)}))
    for name, text_name, shows in CASES:
        model, text = models.get(name), TEXTS[text_name]
        if model is None:
            print(f"  this server has no {name}: not measured", flush=True)
            continue
        sort_key = model.sort_key
        same = sort_key(text) == sort_key(text.upper())
        context.report(Figure(
            f"collation.sort_key.{name}", section, f"{name} sort key of {text!r} ({shows})",
            round(microseconds_per_call(lambda: sort_key(text)), 3), "µs", limit=f"collation.casefold.{text_name}",
            check="the upper-cased text has the same key", check_ok=same,
            detail={"calls": CALLS, "repeats": REPEATS, "kind": model.kind,
                    "contractions": len(getattr(model, "contractions", {}))}))
