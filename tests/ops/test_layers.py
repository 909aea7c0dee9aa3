"""The layering is checked, not just drawn: import-linter's contracts in pyproject.toml
(core imports nothing of dblog or any I/O library, each layer only those below it, dblog.signals
only the core, sinks no binlog or chunk reading, no other sink importing the Kafka sink's
package, whose parts import downward to the `KafkaSink` that composes them, and nothing of dblog
the test rigs in lab/)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_imports_follow_the_layers():
    lint = shutil.which("lint-imports")
    assert lint is not None, "lint-imports is missing: pip install -e '.[test]'"
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
