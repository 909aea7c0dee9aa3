"""Server settings dblog cannot read changes under are refused at start, by name, with the remedy.

The pure check (`dblog.server_requirements`) for every setting, then the real thing: `dblog run`
against the session's MariaDB with binlog_row_image=MINIMAL and binlog_format=MIXED stops with
exit code 1 before it writes anything, naming both settings.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from dblog.server_requirements import unsupported_settings
from harness import config_data

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL",
        "binlog_row_value_options": "", "gtid_mode": "ON", "gtid_strict_mode": "ON"}


def test_a_server_set_as_dblog_needs_passes():
    assert unsupported_settings({**GOOD, "gtid_strict_mode": ""}, "mysql") == []  # MySQL has no gtid_strict_mode
    assert unsupported_settings({**GOOD, "gtid_mode": ""}, "mariadb") == []  # MariaDB has no gtid_mode


@pytest.mark.parametrize("name, value, flavor, named", [
    ("log_bin", "OFF", "mariadb", "--log-bin"),
    ("binlog_format", "MIXED", "mariadb", "binlog_format=ROW"),
    ("binlog_format", "STATEMENT", "mysql", "binlog_format=ROW"),
    ("binlog_row_image", "MINIMAL", "mariadb", "binlog_row_image=FULL"),
    ("binlog_row_image", "NOBLOB", "mysql", "binlog_row_image=FULL"),
    ("binlog_row_metadata", "MINIMAL", "mariadb", "binlog_row_metadata=FULL"),
    ("binlog_row_metadata", None, "mariadb", "server too old"),
    ("binlog_row_value_options", "PARTIAL_JSON", "mysql", "binlog_row_value_options=''"),
    ("gtid_mode", "OFF_PERMISSIVE", "mysql", "gtid_mode=ON"),
    ("gtid_strict_mode", "OFF", "mariadb", "SET GLOBAL gtid_strict_mode=ON"),
    ("gtid_strict_mode", None, "mariadb", "SET GLOBAL gtid_strict_mode=ON"),
])
def test_each_unsupported_setting_is_named_with_its_remedy(name, value, flavor, named):
    variables = dict(GOOD)
    if value is None:
        del variables[name]
    else:
        variables[name] = value
    problems = unsupported_settings(variables, flavor)
    assert len(problems) == 1 and name in problems[0] and named in problems[0], problems


def test_dblog_run_refuses_a_minimal_row_image_and_mixed_format(mariadb, database, tmp_path):
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 1)")
    config = config_data(mariadb, database, tmp_path)
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(config))
    mariadb.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    mariadb.execute("SET GLOBAL binlog_format = 'MIXED'")
    try:
        result = subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                                capture_output=True, text=True, timeout=120)
    finally:
        mariadb.execute("SET GLOBAL binlog_row_image = 'FULL'")
        mariadb.execute("SET GLOBAL binlog_format = 'ROW'")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "binlog_row_image is MINIMAL" in output and "binlog_format is MIXED" in output, output
    sink = Path(config["sink"]["path"])
    assert not sink.exists() or sink.read_text() == "", "nothing may be emitted before the refusal"
    assert not Path(config["offsets"]["path"]).exists(), "no offsets may be saved before the refusal"


def test_dblog_run_refuses_a_server_without_gtid_strict_mode(mariadb, database, tmp_path):
    """MariaDB's default, gtid_strict_mode=OFF, lets the server log sequence numbers out of
    order: refused by name with the remedy, before anything is emitted."""
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 1)")
    config = config_data(mariadb, database, tmp_path)
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(config))
    mariadb.execute("SET GLOBAL gtid_strict_mode = OFF")
    try:
        result = subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                                capture_output=True, text=True, timeout=120)
    finally:
        mariadb.execute("SET GLOBAL gtid_strict_mode = ON")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "gtid_strict_mode is OFF" in output and "SET GLOBAL gtid_strict_mode=ON" in output, output
    sink = Path(config["sink"]["path"])
    assert not sink.exists() or sink.read_text() == "", "nothing may be emitted before the refusal"
    assert not Path(config["offsets"]["path"]).exists(), "no offsets may be saved before the refusal"
