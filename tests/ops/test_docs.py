"""The documentation: the docs site builds with `mkdocs build --strict` (every link between pages
and every anchor resolves; MkDocs' `validation:` settings in mkdocs.yml turn each broken one into
a failure), the same links resolve on GitHub (relative paths, GitHub's heading anchors),
benchmarks/README.md is what `python -m benchmarks.report` renders from the results files, and
the README stays short."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.report import README, README_TEMPLATE, render_readme
from support.slow_tier import REPEATS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "tests" / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "examples" / "README.md",
         *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")


def test_site_builds_strict_with_every_link_and_anchor_resolved(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "configuration/index.html", "architecture/index.html", "benchmarks/index.html",
                 "benchmarks/results/latest/index.html", "tests/index.html"):
        assert (site / page).is_file(), page
    # the README's links to docs/ land on the pages in the site
    home = (site / "index.html").read_text()
    assert 'href="configuration/"' in home and 'href="operations/#server-requirements"' in home
    assert not (ROOT / "site").exists()


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6} (.+)$", line)):
            found.add(github_anchor(match.group(1)))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_links_resolve_on_github(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_github_anchor_rules() -> None:
    assert github_anchor('Iceberg sink (`sink.type = "iceberg"`)') == "iceberg-sink-sinktype--iceberg"
    assert github_anchor("Visibility: what a chunk must see") == "visibility-what-a-chunk-must-see"
    assert github_anchor("The demo's tables") == "the-demos-tables"


def test_benchmarks_readme_is_rendered_from_the_results() -> None:
    assert README.read_text() == render_readme(README_TEMPLATE.read_text()), (
        "benchmarks/README.md differs from its template and the results files: edit "
        "benchmarks/README.template.md and run `python -m benchmarks.report`")
    assert "{{" not in README.read_text()


def test_readme_is_short_and_starts_with_the_set_up_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert text.startswith(
        "# dblog\n\n```sh\npip install -c constraints.txt -e . && dblog demo                  # main job on embedded defaults\n"
        "pip install -c constraints.txt -e '.[test]' && python -m pytest      # the tests (what .ci/run runs)\n```\n")
    head = "\n".join(text.splitlines()[:60])
    assert "## Run against your own database" in head


def _slow_tests() -> set[str]:
    """Every test of the slow tier, by the id tests/README.md names it with: `folder/file::name`,
    with `[params]` for a slow case of a parametrized test."""
    import ast

    found = set()
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        where = path.relative_to(ROOT / "tests").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            for decorator in node.decorator_list:
                if ast.unparse(decorator) == "pytest.mark.slow":
                    found.add(f"{where}::{node.name}")
                for param in ast.walk(decorator):  # pytest.param(..., marks=pytest.mark.slow)
                    if (isinstance(param, ast.Call) and ast.unparse(param.func) == "pytest.param"
                            and any(ast.unparse(k.value) == "pytest.mark.slow" for k in param.keywords)):
                        values = [ast.literal_eval(arg) for arg in param.args]
                        found.add(f"{where}::{node.name}[{'-'.join(map(str, values))}]")
    return found


def test_the_slow_tier_is_listed_and_scheduled_in_ci() -> None:
    """Nothing is dropped silently: each `slow` test is named in tests/README.md's "The slow
    tier" table, and `.ci/run` runs the tier on its schedule."""
    text = (ROOT / "tests" / "README.md").read_text()
    section = text[text.index("### The slow tier"):text.index("**Spark: local and cluster.**")]
    named = set()
    for row in re.findall(r"^\| `([^`]+)`((?:, `\[[^`]+\]`)*)", section, flags=re.M):
        first, more = row
        named.add(first)
        base = first.split("[")[0]
        named.update(f"{base}{extra}" for extra in re.findall(r"`(\[[^`]+\])`", more))
    slow = _slow_tests()
    assert len(slow) >= 7, slow
    assert slow == named, f"in the code, not in the table: {slow - named}; in the table, not in the code: {named - slow}"
    assert "`support/slow_tier.py`" in section  # the repeats, each with what the default run keeps
    assert not slow & REPEATS.keys(), "marked slow in its module and listed as a repeat"
    assert all(kept.strip() for kept in REPEATS.values()), "a repeat without what the default run keeps"
    ci = (ROOT / ".ci" / "run").read_text()
    default_run = ci.index("python -m pytest\n")
    slow_run = ci.index("python -m pytest --run-slow -m slow")
    assert default_run < slow_run < ci.index('date -u +%u)" = 7')  # every submission; Spark 3.5 on Sundays
