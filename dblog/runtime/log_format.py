"""`dblog --log-format json`: one JSON object per log line, for log shippers.

python-json-logger does the work that is easy to get wrong by hand: it knows which attributes
of a LogRecord are the logging module's own and writes every other one (what a log call
passes as `extra=`) as a top-level key, with exceptions and stack traces as text. Here we only
name the standard keys and write the time as ISO 8601 in UTC.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from pythonjsonlogger.json import JsonFormatter

HUMAN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes a LogRecord has (or gets when formatted): `extra=` may not set them.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonLogFormatter(JsonFormatter):
    """{"time", "level", "logger", "message", …the record's structured fields, "exc_info"}."""

    def __init__(self) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message"],
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        moment = datetime.fromtimestamp(record.created, timezone.utc)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`extra=` for a log call: fields the JSON format writes as keys (the human format does
    not show them). A name the LogRecord already has (`message`, `name`, …) would make the
    logging module raise, so it is written as `data_<name>`."""
    return {f"data_{key}" if key in _RECORD_ATTRIBUTES else key: value for key, value in fields.items()}
