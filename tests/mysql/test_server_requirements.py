"""Server settings dblog cannot read changes under are refused at start, by name, with the remedy.

The pure check (`dblog.mysql.server_requirements`) for every setting, then the real thing: `dblog run`
against the session's MariaDB with binlog_row_image=MINIMAL and binlog_format=MIXED stops with
exit code 1 before it writes anything, naming both settings.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from support.harness import config_data

from dblog.mysql.server_requirements import decodes_from_history, setting_notes, unsupported_settings

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL",
        "gtid_mode": "ON", "gtid_strict_mode": "ON"}


def test_a_server_set_as_dblog_needs_passes():
    assert unsupported_settings({**GOOD, "gtid_strict_mode": ""}, "mysql") == []  # MySQL has no gtid_strict_mode
    assert unsupported_settings({**GOOD, "gtid_mode": ""}, "mariadb") == []  # MariaDB has no gtid_mode


@pytest.mark.parametrize("value, flavor", [("MINIMAL", "mysql"), ("MINIMAL", "mariadb"), ("NO_LOG", "mariadb"),
                                           (None, "mysql")])
def test_row_metadata_below_full_is_decoded_from_the_schema_history(value, flavor):
    """MySQL's default MINIMAL, MariaDB's default NO_LOG, a server without the variable: not
    refused; `dblog check` says that rows are then decoded with the schema history."""
    variables = dict(GOOD)
    if value is None:
        del variables["binlog_row_metadata"]
    else:
        variables["binlog_row_metadata"] = value
    assert unsupported_settings(variables, flavor) == []
    assert decodes_from_history(variables)
    assert "schema history" in setting_notes(variables)["binlog_row_metadata"]
    assert not decodes_from_history(GOOD) and setting_notes(GOOD) == {}


def test_partial_json_updates_are_not_refused():
    """binlog_row_value_options=PARTIAL_JSON: the diffs are applied to the before image, which
    binlog_row_image=FULL logs whole (tests/mysql/test_mysql_partial_json.py); a session can set the
    option anyway, so a check at start could not rule it out."""
    assert unsupported_settings({**GOOD, "binlog_row_value_options": "PARTIAL_JSON"}, "mysql") == []


@pytest.mark.parametrize("name, value, flavor, named", [
    ("log_bin", "OFF", "mariadb", "--log-bin"),
    ("binlog_format", "MIXED", "mariadb", "binlog_format=ROW"),
    ("binlog_format", "STATEMENT", "mysql", "binlog_format=ROW"),
    ("binlog_row_image", "MINIMAL", "mariadb", "binlog_row_image=FULL"),
    ("binlog_row_image", "NOBLOB", "mysql", "binlog_row_image=FULL"),
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


@pytest.mark.parametrize(("settings", "named"), [
    ({"binlog_row_image": ("'MINIMAL'", "'FULL'"), "binlog_format": ("'MIXED'", "'ROW'")},
     ["binlog_row_image is MINIMAL", "binlog_format is MIXED"]),
    # MariaDB's default lets the server log sequence numbers out of order.
    ({"gtid_strict_mode": ("OFF", "ON")}, ["gtid_strict_mode is OFF", "SET GLOBAL gtid_strict_mode=ON"]),
], ids=["minimal-row-image-and-mixed-format", "gtid-strict-mode-off"])
def test_dblog_run_refuses_an_unsupported_server_before_emitting_anything(own_mariadb, tmp_path, settings, named):
    """Refused by name with the remedy: exit 1, nothing emitted, no offsets saved. On a server of
    its own: new sessions of other tests would log in MIXED format or with MINIMAL row images."""
    mariadb, database = own_mariadb, "shop"
    mariadb.execute(f"CREATE DATABASE {database}")
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 1)")
    config = config_data(mariadb, database, tmp_path)
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(config))
    for name, (value, _) in settings.items():
        mariadb.execute(f"SET GLOBAL {name} = {value}")
    try:
        result = subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                                capture_output=True, text=True, timeout=120)
    finally:
        for name, (_, restored) in settings.items():
            mariadb.execute(f"SET GLOBAL {name} = {restored}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert all(text in output for text in named), output
    sink = Path(config["sink"]["path"])
    assert not sink.exists() or sink.read_text() == "", "nothing may be emitted before the refusal"
    assert not Path(config["offsets"]["path"]).exists(), "no offsets may be saved before the refusal"


# --- position modes (issue 39: servers without GTIDs) -------------------------------------------

@pytest.mark.parametrize("gtid_mode, chosen", [("ON", "gtid"), ("OFF", "file"), ("OFF_PERMISSIVE", "file"),
                                               ("ON_PERMISSIVE", "file")])
def test_auto_reads_mysql_by_file_and_position_unless_every_transaction_has_a_gtid(gtid_mode, chosen):
    from dblog.mysql.server_requirements import allowed_position_modes, position_mode

    variables = {**GOOD, "gtid_mode": gtid_mode}
    assert position_mode(variables, "mysql") == chosen
    assert allowed_position_modes(variables, "mysql") == (("gtid", "file") if gtid_mode == "ON" else ("file",))
    assert unsupported_settings(variables, "mysql", chosen) == []  # accepted in the mode chosen


def test_mariadb_auto_stays_on_gtids_and_file_positions_need_no_strict_mode():
    from dblog.mysql.server_requirements import position_mode, setting_problems

    lax = {**GOOD, "gtid_strict_mode": "OFF"}
    assert position_mode(lax, "mariadb") == "gtid"
    assert 'source.position_mode = "file"' in setting_problems(lax, "mariadb")["gtid_strict_mode"]
    assert setting_problems(lax, "mariadb", "file") == {}
    assert position_mode(lax, "mariadb", "file") == "file"


def test_gtid_mode_off_refused_only_when_gtids_are_chosen():
    from dblog.mysql.server_requirements import setting_problems

    problem = setting_problems({**GOOD, "gtid_mode": "OFF"}, "mysql", "gtid")["gtid_mode"]
    assert 'source.position_mode = "auto" or "file"' in problem
