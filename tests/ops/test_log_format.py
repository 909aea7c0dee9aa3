"""`--log-format json`: the formatter, and `dblog --log-format json run` whose every stderr
line is a JSON object, notifications and progress with their fields as keys."""

import json
import logging
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import tomli_w
from support.harness import config_data, run_dblog_until

from dblog.core.events import TableId
from dblog.demo.workload import load
from dblog.runtime.log_format import HUMAN_FORMAT, JsonLogFormatter, log_fields


def _record(message="snapshot %s: %s", args=("shop.orders", "41 rows"), extra=None, exc_info=None):
    logger = logging.getLogger("dblog.test")
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, args, exc_info, extra=extra)


def test_a_record_is_one_json_object_with_its_fields_as_keys():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    record = _record(extra=log_fields({"table": str(TableId("shop", "orders")), "rows": 41, "rate": None,
                                       "eta": 2.5, "note": "é ✓", "at": at}))
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry == {"time": entry["time"], "level": "INFO", "logger": "dblog.test",
                     "message": "snapshot shop.orders: 41 rows", "table": "shop.orders", "rows": 41,
                     "rate": None, "eta": 2.5, "note": "é ✓", "at": "2026-01-02T03:04:05+00:00"}
    moment = datetime.fromisoformat(entry["time"])  # ISO 8601, in UTC, to the millisecond
    assert entry["time"].endswith("Z") and moment.utcoffset() == timedelta(0)
    assert abs(moment - datetime.fromtimestamp(record.created, timezone.utc)) < timedelta(milliseconds=1)


def test_an_exception_is_a_text_field():
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = _record("failed", (), exc_info=sys.exc_info())
    entry = json.loads(JsonLogFormatter().format(record))
    assert entry["message"] == "failed"
    assert entry["exc_info"].startswith("Traceback") and "ValueError: bad\nthing" in entry["exc_info"]


def test_fields_named_like_record_attributes_do_not_break_logging():
    fields = log_fields({"notification": "LOG", "message": "hi", "name": "x", "args": [1], "reason": "r"})
    assert fields == {"notification": "LOG", "data_message": "hi", "data_name": "x", "data_args": [1], "reason": "r"}
    entry = json.loads(JsonLogFormatter().format(_record("LOG", (), extra=fields)))
    assert entry["message"] == "LOG" and entry["data_message"] == "hi" and entry["logger"] == "dblog.test"


def test_the_human_format_does_not_show_the_fields():
    formatter = logging.Formatter(HUMAN_FORMAT)
    plain, structured = _record(), _record(extra=log_fields({"table": "shop.orders", "rows": 41}))
    structured.created, structured.msecs = plain.created, plain.msecs
    assert formatter.format(structured) == formatter.format(plain)
    assert formatter.format(plain).endswith(" INFO dblog.test: snapshot shop.orders: 41 rows")


def _dblog(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_an_error_ending_the_command_is_a_json_line_too(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[snapshot]\nchunk_size = -5\n")
    result = _dblog("--log-format", "json", "run", "--config", str(bad))
    assert result.returncode == 1
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    assert entries[-1]["level"] == "ERROR" and "snapshot.chunk_size" in entries[-1]["message"]
    usage = _dblog("--log-format", "json", "run")
    assert usage.returncode == 2 and "--debezium-config" in json.loads(usage.stderr.splitlines()[-1])["message"]
    text = _dblog("run", "--config", str(bad))
    assert text.returncode == 1 and text.stderr.startswith("Error: ")  # the default stays as it was


def test_dblog_run_writes_json_lines(mariadb, database, tmp_path):
    with mariadb.connect() as connection:
        load(connection, database, 1_200)
    data = config_data(mariadb, database, tmp_path, snapshot={"chunk_size": 200})
    path = tmp_path / "dblog.toml"
    path.write_text(tomli_w.dumps(data))
    output = run_dblog_until(["--log-format", "json", "run", "--config", str(path)], tmp_path / "stderr.log",
                             '"notification": "COMPLETED"')
    entries = [json.loads(line) for line in output.splitlines()]  # every line parses
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys(), entry
    notifications = {entry["notification"]: entry for entry in entries if "notification" in entry}
    orders = f"{database}.orders"
    started = notifications["STARTED"]
    assert started["message"].startswith("STARTED {") and started["request"] == "initial"
    assert sorted(started["data_collections"]) == sorted([orders, f"{database}.customers"])
    scans = [entry for entry in entries if entry.get("notification") == "TABLE_SCAN_COMPLETED"]
    assert {(e["data_collection"], e["status"], e["total_rows_scanned"]) for e in scans} >= {(orders, "SUCCEEDED", 1_200)}
    assert sorted(notifications["COMPLETED"]["data_collections"]) == sorted(started["data_collections"])
    # The first chunk's progress line (then one every 10 s).
    progress = [entry for entry in entries if entry["message"].startswith("snapshot ")]
    assert progress, "no progress line"
    first = progress[0]
    assert first["message"].startswith(f"snapshot {first['table']}: {first['rows']:,} of ~")
    assert first["table"] in started["data_collections"] and first["rows"] == 200 and first["chunks"] == 1
    assert first["estimated_rows"] > 0 and first["rate"] > 0 and first["eta"] >= 0
