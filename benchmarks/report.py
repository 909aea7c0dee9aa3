"""The results as the console shows them, as JSON and as the markdown table the README quotes."""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks.figures import Figure, Results

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def format_value(figure: Figure) -> str:
    value = figure.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if figure.unit == "rows/s":
        return f"{value:,.0f} rows/s"
    if figure.unit == "ms":
        return f"{value:,.0f} ms" if value >= 100 else f"{value:,.1f} ms"
    return f"{value:,.1f} {figure.unit}"


def format_ratio(figure: Figure, results: Results) -> str:
    if figure.limit is None:
        return ""
    limit = results.get(figure.limit)
    name = limit.label.split(" (")[0] if limit is not None else figure.limit
    if figure.ratio is None:
        return f"(limit {name} not measured)"
    return f"{figure.ratio:.2f}× {name}"


def format_check(figure: Figure) -> str:
    if figure.check is None:
        return ""
    return ("✓ " if figure.check_ok else "✗ ") + figure.check


def print_figure(figure: Figure, results: Results) -> None:
    parts = [f"{figure.label}: {format_value(figure)}"]
    ratio = format_ratio(figure, results)
    if ratio:
        parts.append(ratio)
    check = format_check(figure)
    if check:
        parts.append(check)
    print("  " + " · ".join(parts), flush=True)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(results: Results) -> str:
    machine = results.machine
    versions = machine.get("versions", {})
    settings = results.settings
    lines = [
        "# dblog benchmark results",
        "",
        f"Run {machine.get('date')} on {machine.get('cores')} cores ({machine.get('cpu_model')}), "
        f"{machine.get('memory_gib')} GiB, load average at start {machine.get('load_average_at_start')}; "
        + ", ".join(f"{name} {version}" for name, version in versions.items() if version)
        + ".",
        "",
        f"`{' '.join(['python -m benchmarks', *settings.get('arguments', [])])}`: "
        f"{settings.get('rows', 0):,} rows per table, chunk size {settings.get('chunk_size')}, "
        f"total {results.seconds / 60:.1f} min.",
        "",
        "| section | figure | value | vs physical limit | check |",
        "|---|---|---|---|---|",
    ]
    for figure in results.figures:
        lines.append(
            f"| {figure.section} | {_cell(figure.label)} | {format_value(figure)} | "
            f"{_cell(format_ratio(figure, results))} | {_cell(format_check(figure))} |"
        )
    if results.errors:
        lines += ["", "Sections that failed:", ""]
        lines += [f"- {section}: {error}" for section, error in results.errors.items()]
    lines += ["", "Details (rows, seconds, CPU seconds of the client and of the server, …) are in the JSON file.", ""]
    return "\n".join(lines)


def write_results(results: Results, name: str, directory: Path = RESULTS_DIR) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(results.to_json(), indent=2, ensure_ascii=False, default=str) + "\n")
    md_path.write_text(markdown(results))
    return json_path, md_path
