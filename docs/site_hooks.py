"""MkDocs hooks (mkdocs.yml): the site is built from the Markdown files as they are read on GitHub.

README.md becomes the home page, benchmarks/README.md, its results, examples/README.md and tests/README.md pages of
their own, and every link between them, written relative to the repository as GitHub resolves
it (`docs/output.md#values` in the README, `../benchmarks/README.md` in docs/), is mapped to the
page it lands on in the site. A link to anything else is left as it is, so that `mkdocs build
--strict` reports it (tests/ops/test_docs.py).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
DOCS = "docs/"
# repository path -> site page, for the pages that live outside docs/
OUTSIDE = {"README.md": "index.md", "benchmarks/README.md": "benchmarks/index.md", "tests/README.md": "tests/index.md",
           "examples/README.md": "examples/index.md"}
OUTSIDE.update({f"benchmarks/results/{path.name}": f"benchmarks/results/{path.name}"
                for path in sorted((ROOT / "benchmarks" / "results").glob("*.md"))})
_SITE_TO_REPO = {site: repo for repo, site in OUTSIDE.items()}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def on_files(files, config):
    for repo_path, site_path in OUTSIDE.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / repo_path)))
    return files


def _site_path(repo_path: str) -> str | None:
    if repo_path in OUTSIDE:
        return OUTSIDE[repo_path]
    if repo_path.startswith(DOCS) and repo_path.endswith(".md"):
        return repo_path[len(DOCS):]
    return None


def on_page_markdown(markdown, page, config, files):
    page_site = page.file.src_uri
    page_repo = _SITE_TO_REPO.get(page_site, DOCS + page_site)

    def relink(match: re.Match) -> str:
        target = match.group(1)
        if target.startswith(("#", "http://", "https://", "mailto:")):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), path))
        site = _site_path(repo_path)
        if site is None:
            return match.group(0)
        relative = posixpath.relpath(site, posixpath.dirname(page_site) or ".")
        return "](" + relative + hash_ + anchor + ")"

    return _LINK.sub(relink, markdown)
