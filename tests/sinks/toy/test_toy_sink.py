"""A sink added in this folder alone (toy_sink.py: its settings, sink and plugin) is found
through the registry (dblog.sinks.registry) and runs end to end in the real engine on the private
MariaDB: a snapshot and streamed inserts, updates, key changes and deletes reach it, and what it
holds equals the source. Its `[sink.toy]` table, cross-check and heartbeats are its own; without
registration it is refused, naming the registered sinks; an installed distribution's entry point
of group `dblog.sinks` finds it too (`dblog run` would)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import EngineThread, config_data

from dblog.core.events import TableId
from dblog.runtime.config import ConfigError, parse_config
from dblog.sinks.registry import register, unregister

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ROWS = 300


def test_the_toy_sink_gets_the_snapshot_and_the_stream_and_holds_what_the_source_holds(mariadb, database,
                                                                                       tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, name VARCHAR(40), qty INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES " + ", ".join(f"({i}, 'row {i}', {i})" for i in range(ROWS)))
    config = parse_config(config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 64},
                                      sink={"type": "toy", "toy": {"label": "e2e", "heartbeat_interval_ms": 20}}))
    engine = EngineThread(config)
    sink = engine.engine.sink
    assert type(sink).__name__ == "ToySink" and sink.settings.label == "e2e"
    # Streamed while the snapshot runs: inserts, updates, a key change and deletes.
    for i in range(ROWS, ROWS + 50):
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES ({i}, 'new {i}', {i})")
    mariadb.execute(f"UPDATE `{database}`.t SET qty = qty + 1000 WHERE id % 7 = 0")
    mariadb.execute(f"UPDATE `{database}`.t SET id = 10000 WHERE id = 5")
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id % 11 = 0")
    engine.wait_for("COMPLETED")
    engine.eventually(lambda: sink.beats > 0, message="a heartbeat, which the toy plugin asked for")
    engine.until_caught_up()

    source = {row[0]: {"id": row[0], "name": row[1], "qty": row[2]}
              for row in mariadb.execute(f"SELECT id, name, qty FROM `{database}`.t")}
    held = {row["id"]: row for row in sink.rows[TableId(database, "t")].values()}
    assert held == source
    assert sink.ops["r"] > 0 and sink.ops["c"] >= 50 and sink.ops["u"] > 0 and sink.ops["d"] > 0


def test_the_toy_sinks_settings_and_cross_check_are_its_own(toy_sink_registered):
    config = parse_config({"sink": {"type": "toy", "toy": {"label": "mine"}}})
    assert config.sink.toy.label == "mine" and config.commit_interval_seconds() == 1.0
    with pytest.raises(ConfigError, match=r"sink\.toy\.colour: Extra inputs are not permitted"):
        parse_config({"sink": {"type": "toy", "toy": {"colour": "red"}}})
    with pytest.raises(ConfigError, match=r"config: sink\.toy\.label is empty: name the toy sink"):
        parse_config({"sink": {"type": "toy", "toy": {"label": ""}}})
    parse_config({"sink": {"type": "jsonl", "toy": {"label": ""}}})  # its cross-check is for itself only
    unregister(toy_sink_registered.name)
    try:
        with pytest.raises(ConfigError, match=r"sink\.type: Input should be 'jsonl', 'iceberg', 'kafka' or 'null'"):
            parse_config({"sink": {"type": "toy"}})
    finally:
        register(toy_sink_registered)
    with pytest.raises(ConfigError, match=r"sink\.type: Input should be 'jsonl', 'iceberg', 'kafka', 'null' or 'toy'"):
        parse_config({"sink": {"type": "parquet"}})


def test_an_installed_distribution_registers_the_toy_sink_through_its_entry_point(tmp_path):
    """A distribution's metadata, as `pip install` writes it, names the plugin in group
    `dblog.sinks`; a fresh process (as `dblog run` is) finds it, validates `[sink.toy]` and
    builds the sink. Without it, the same configuration is refused."""
    dist = tmp_path / "dblog_toy_sink-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dblog-toy-sink\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[dblog.sinks]\ntoy = toy_sink:PLUGIN\n")
    script = ("from dblog.runtime.config import parse_config\n"
              "from dblog.runtime.sink_factory import open_sink\n"
              "config = parse_config({'sink': {'type': 'toy', 'toy': {'label': 'installed'}}})\n"
              "sink = open_sink(config, None, None, lambda table: True)\n"
              "print(type(sink).__name__, sink.settings.label)\n")

    def run(*path: Path) -> subprocess.CompletedProcess:
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (*path, HERE, ROOT))}
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                              timeout=120)

    installed = run(tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.split() == ["ToySink", "installed"]
    missing = run()
    assert missing.returncode != 0 and "sink.type: Input should be 'jsonl', 'iceberg', 'kafka' or 'null'" in missing.stderr
