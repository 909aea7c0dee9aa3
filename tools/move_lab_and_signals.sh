#!/usr/bin/env bash
# Issue 37, item 6: the test rigs out of the installed package, and `signals` under `dblog`.
#
#   dblog/lab/demo.py                      -> dblog/demo/run.py       (`dblog demo`, installed)
#   dblog/lab/{localstack,workload,verify} -> dblog/demo/             (what the demo needs at run time)
#   every other dblog/lab/*.py             -> lab/                    (test and benchmark rigs: broker,
#                                                                      gateway, Spark cluster, Debezium
#                                                                      reference, JDBC driver, object store;
#                                                                      not in the wheel)
#   signals/                               -> dblog/signals/
#
# then rewrites every import, `python -m` and docs path to them, and pyproject.toml (package
# discovery, the import-linter contracts, pytest's pythonpath). Mechanical only: what needs
# judgement (the code map's prose) is a separate commit.
#
# Re-runnable on any tree that still has dblog/lab/ and signals/ (e.g. main after other branches
# were merged): run it from a clean work tree, anywhere in the repository, and commit the result.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

if [ ! -d dblog/lab ] || [ ! -d signals ]; then
    echo "move_lab_and_signals: dblog/lab/ or signals/ is gone already: nothing to do" >&2
    exit 1
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "move_lab_and_signals: commit or stash your changes first" >&2
    exit 1
fi

DEMO_MODULES="localstack workload verify"  # besides demo.py itself

# --- 1. the moves ------------------------------------------------------------------------------
mkdir -p dblog/demo
git mv dblog/lab/demo.py dblog/demo/run.py
for module in $DEMO_MODULES; do
    git mv "dblog/lab/$module.py" "dblog/demo/$module.py"
done
git mv dblog/lab/__init__.py dblog/demo/__init__.py
git mv dblog/lab lab
cat > lab/__init__.py <<'EOF'
"""Test and benchmark rigs: a private Kafka-protocol broker and its TLS/SASL gateway, a Spark
standalone cluster, Debezium itself as a reference, the MariaDB JDBC driver, a private object
store. Not part of the installed package (pyproject.toml packages only `dblog`); `dblog demo`'s
own rig (the private MariaDB, the writers, the checks) is `dblog.demo`."""
EOF
git add lab/__init__.py
git mv signals dblog/signals

LAB_MODULES=$(cd lab && ls -- *.py | sed -n 's/\.py$//p' | grep -vx '__init__' | tr '\n' ' ')
SIGNALS_MODULES=$(cd dblog/signals && ls -- *.py | sed -n 's/\.py$//p' | grep -vx '__init__' | tr '\n' '|')
SIGNALS_MODULES=${SIGNALS_MODULES%|}

# --- 2. imports, `python -m`, dotted names and paths in code and docs ---------------------------
# Not rewritten: benchmarks/results/ (records of past runs) and this script.
rules=(
    -e 's/\bdblog\.lab\.demo\b/dblog.demo.run/g'
    -e 's#\bdblog/lab/demo\.py\b#dblog/demo/run.py#g'
    -e 's/^(\s*)from dblog\.lab import /\1from lab import /'
    -e 's#`dblog/lab/`#`lab/`#g'
)
for module in $DEMO_MODULES; do
    rules+=(-e "s/\\bdblog\\.lab\\.$module\\b/dblog.demo.$module/g"
            -e "s#\\bdblog/lab/$module\\.py\\b#dblog/demo/$module.py#g")
done
for module in $LAB_MODULES; do
    rules+=(-e "s/\\bdblog\\.lab\\.$module\\b/lab.$module/g"
            -e "s#\\bdblog/lab/$module\\.py\\b#lab/$module.py#g")
done
rules+=(
    -e 's/^(\s*)(from|import) signals([. ])/\1\2 dblog.signals\3/'
    -e "s/(^|[^.[:alnum:]_/-])signals\\.($SIGNALS_MODULES)\\b/\\1dblog.signals.\\2/g"
    -e "s#(^|[^.[:alnum:]_/-])signals/($SIGNALS_MODULES)\\.py\\b#\\1dblog/signals/\\2.py#g"
)
mapfile -t files < <(git ls-files -- '*.py' '*.md' '*.toml' '*.yml' '*.yaml' '*.cfg' '*.ini' '*.txt' \
                     | grep -vE '^(benchmarks/results/|tools/move_lab_and_signals\.sh$)')
mapfile -t touched < <(grep -lE 'dblog\.lab|dblog/lab/|signals[./]' -- "${files[@]}" || true)
if [ "${#touched[@]}" -gt 0 ]; then
    sed -i -E "${rules[@]}" -- "${touched[@]}"
fi

# The code map's row of the package (tests/README.md's `signals/` row is the tests' folder: kept).
sed -i -E 's#^\| `signals/` \|#| `dblog/signals/` |#' docs/architecture.md
sed -i -E 's#`pythonpath = \["tests"\]`#`pythonpath = [".", "tests"]`#' tests/README.md

# The Debezium rigs put the repository on their children's PYTHONPATH: one level up less now.
sed -i -E 's/Path\(__file__\)\.resolve\(\)\.parents\[2\]/Path(__file__).resolve().parents[1]/' lab/*.py

# --- 3. pyproject.toml: what the wheel holds, the layers, pytest's path ---------------------------
python3 - <<'EOF'
import pathlib

path = pathlib.Path("pyproject.toml")
text = path.read_text()
edits = [
    ('include = ["dblog*", "signals*"]', 'include = ["dblog*"]  # not lab/, benchmarks/, tests/: they stay in the repository'),
    ('pythonpath = ["tests"]', 'pythonpath = [".", "tests"]'),
    ("# tests/ on sys.path: `import support` (the helpers and fixture plugins) from every test folder",
     "# on sys.path: the repository (`import lab`: the test rigs, not installed) and tests/ (`import\n"
     "# support`: the helpers and fixture plugins, from every test folder)"),
    ('root_packages = ["dblog", "signals"]', 'root_packages = ["dblog", "lab"]'),
    ('layers = ["dblog.cli", "dblog.lab", "dblog.runtime"', 'layers = ["dblog.cli", "dblog.demo", "dblog.runtime"'),
    ('name = "signals depends on dblog.core only"', 'name = "dblog.signals depends on dblog.core only"'),
    ('source_modules = ["signals"]', 'source_modules = ["dblog.signals"]'),
    ('"dblog.runtime", "dblog.lab", "dblog.cli"]', '"dblog.runtime", "dblog.demo", "dblog.cli", "lab"]'),
    ('forbidden_modules = ["signals", "pymysql"', 'forbidden_modules = ["dblog.signals", "pymysql"'),
]
for old, new in edits:
    if text.count(old) != 1:
        raise SystemExit(f"move_lab_and_signals: pyproject.toml: expected once: {old!r}")
    text = text.replace(old, new)
text = text.rstrip("\n") + '''

[[tool.importlinter.contracts]]
name = "the installed package imports no test rig"
type = "forbidden"
source_modules = ["dblog"]
forbidden_modules = ["lab"]
'''
path.write_text(text)
EOF

# --- 4. checks: nothing left behind ----------------------------------------------------------------
left=$(git grep -nE '\bdblog\.lab\.[a-z_]+|dblog/lab/|^\s*(from|import) signals\b' -- \
       ':!benchmarks/results/' ':!tools/move_lab_and_signals.sh' || true)
if [ -n "$left" ]; then
    echo "move_lab_and_signals: still pointing at the old places:" >&2
    echo "$left" >&2
    exit 1
fi
if git grep -nE '\blab\.' -- dblog/demo/ | grep -E '^\S+:\s*(from|import) lab\b' >&2; then
    echo "move_lab_and_signals: dblog/demo imports a rig that left the package (above)" >&2
    exit 1
fi
git add -A dblog/demo dblog/signals lab pyproject.toml
git add -u
echo "move_lab_and_signals: done; review with git status / git diff --cached, then commit"
