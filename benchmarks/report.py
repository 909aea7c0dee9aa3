"""The results as the console shows them, as JSON and as markdown tables, and benchmarks/README.md
rendered from its template with the figures of the results files."""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from pathlib import Path

from benchmarks.figures import Figure, Results

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def format_value(figure: Figure) -> str:
    value = figure.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if figure.unit in ("rows/s", "records/s"):
        return f"{value:,.0f} {figure.unit}"
    if figure.unit == "µs":
        return f"{value:,.2f} µs"
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


# benchmarks/README.md: the method (benchmarks/README.template.md, written by hand) with every
# figure taken from the results files, so that no figure is ever pasted by hand.
README_TEMPLATE = Path(__file__).resolve().parent / "README.template.md"
README = Path(__file__).resolve().parent / "README.md"
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.S)


class TemplateError(ValueError):
    """A placeholder the results cannot fill: an unknown form, file, figure or field."""


def _figures(name: str, directory: Path, cache: dict) -> dict:
    if name not in cache:
        path = directory / f"{name}.json"
        try:
            cache[name] = json.loads(path.read_text())
        except FileNotFoundError:
            raise TemplateError(f"no results file {path}") from None
    return cache[name]


def _figure(name: str, key: str, directory: Path, cache: dict) -> dict:
    for figure in _figures(name, directory, cache).get("figures", []):
        if figure["key"] == key:
            return figure
    raise TemplateError(f"no figure {key!r} in {name}.json")


def _thousands(value: float) -> str:
    """120433 -> 120k, 71546 -> 71.5k, 6150 -> 6.2k, 950 -> 950."""
    if value >= 100_000:
        return f"{value / 1000:.0f}k"
    if value >= 1_000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def _seconds_from_ms(value: float) -> str:
    seconds = value / 1000
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


def _ms(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _run(name: str, directory: Path, cache: dict) -> str:
    data = _figures(name, directory, cache)
    machine, settings = data.get("machine", {}), data.get("settings", {})
    date = str(machine.get("date", "?"))[:16].replace("T", " ")
    command = " ".join(["python -m benchmarks", *settings.get("arguments", [])])
    load = machine.get("load_average_at_start") or ["?"]
    return (f"{date} UTC, `{command}`, {data.get('seconds', 0) / 60:.1f} min, {machine.get('cores')} cores, "
            f"load average {load[0]} at the start")


_FIGURE_FORMS = {
    "value": lambda figure: format_value(Figure(**figure)),
    "k": lambda figure: _thousands(figure["value"]),
    "n": lambda figure: f"{figure['value']:,.0f}",
    "s": lambda figure: _seconds_from_ms(figure["value"]),
    "ms": lambda figure: _ms(figure["value"]),
    "mib": lambda figure: f"{figure['value']:.1f}",
    "x": lambda figure: "n/a" if figure["ratio"] is None else f"{figure['ratio']:.2f}×",
}


def _fill(words: list[str], directory: Path, cache: dict) -> str:
    """One placeholder's text. Forms (NAME: a results file's stem, KEY: a figure's key):
    `value|k|n|s|ms|mib|x NAME KEY` a figure's value formatted (x: its ratio to its limit);
    `detail NAME KEY FIELD` a field of the figure's details; `over NAME KEY NAME KEY` the ratio of
    two figures; `run NAME` when and how the run was made; `overhead MODE WORKLOAD` and
    `instructions MODE WORKLOAD VARIANT` from metrics_overhead.json."""
    form, *args = words
    if form in _FIGURE_FORMS and len(args) == 2:
        return _FIGURE_FORMS[form](_figure(*args, directory, cache))
    if form == "detail" and len(args) == 3:
        detail = _figure(args[0], args[1], directory, cache)["detail"]
        value = detail
        for part in args[2].split("."):
            if not isinstance(value, dict) or part not in value:
                raise TemplateError(f"no detail {args[2]!r} of {args[1]!r} in {args[0]}.json")
            value = value[part]
        if isinstance(value, bool):
            return "yes" if value else "no"
        return f"{value:,}" if isinstance(value, int) else str(value)
    if form == "over" and len(args) == 4:
        top, bottom = _figure(*args[:2], directory, cache), _figure(*args[2:], directory, cache)
        return f"{top['value'] / bottom['value']:.2f}×"
    if form == "run" and len(args) == 1:
        return _run(args[0], directory, cache)
    if form in ("overhead", "instructions") and len(args) in (2, 3):
        runs = _figures("metrics_overhead", directory, cache)
        try:
            result = runs[args[0]]["report"][args[1]]
            return result["change"] if form == "overhead" else f"{result[args[2]]['instructions_per_row']:,}"
        except (KeyError, IndexError):
            raise TemplateError(f"no {' / '.join(args)} in metrics_overhead.json") from None
    raise TemplateError(f"unknown placeholder {{{{ {' '.join(words)} }}}}")


def render_readme(template: str, directory: Path = RESULTS_DIR) -> str:
    """The template with each `{{ … }}` replaced by what the results files say (see `_fill`)."""
    cache: dict = {}

    def replace(match: re.Match) -> str:
        return _fill(shlex.split(match.group(1)), directory, cache)

    header = ("<!-- Generated by `python -m benchmarks.report` from benchmarks/README.template.md and "
              "benchmarks/results/*.json: edit the template, not this file. -->\n")
    return header + _PLACEHOLDER.sub(replace, template)


def write_readme(directory: Path = RESULTS_DIR, template: Path = README_TEMPLATE, output: Path = README) -> Path:
    output.write_text(render_readme(template.read_text(), directory))
    return output


def refresh_readme() -> None:
    """After a run: benchmarks/README.md again from the results files (a template placeholder the
    results cannot fill is reported, not raised: the run's own results are written already)."""
    try:
        print(f"written: {write_readme()}", flush=True)
    except TemplateError as error:
        print(f"benchmarks/README.md not rendered: {error}", file=sys.stderr, flush=True)


def main() -> int:
    """`python -m benchmarks.report`: render benchmarks/README.md from the results as they are."""
    print(f"written: {write_readme()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
