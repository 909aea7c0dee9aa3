"""What `dblog check` (dblog.runtime.preflight) and the sinks' plugins (dblog.sinks.registry)
share: one check's result, the helpers that word it, and `PreflightRun`, what a plugin's checks
may ask of the run they are part of. They are here, below the runtime, because the plugins
cannot import it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import pymysql

from dblog.core.events import TableId
from dblog.sinks.base import Sink

Status = Literal["ok", "fail", "warn", "skip"]
_SHOWN = 5  # names listed in a line before "and N more"


@dataclass(frozen=True)
class CheckResult:
    check: str  # what was checked, e.g. "REPLICATION SLAVE" or "binlog_format"
    status: Status
    detail: str  # what was found
    remedy: str | None = None  # what to do (failures and warnings)

    def to_json(self) -> dict:
        return asdict(self)


class PreflightRun(Protocol):
    """The run of checks a plugin's checks belong to (dblog.runtime.preflight.Preflight)."""

    config: Any  # the configuration checked (dblog.runtime.config.Config)
    spark: bool  # whether checks that start Spark may run (`--no-spark`)
    flavor: str | None  # the source's ("mysql", "mariadb"); None: unreachable
    captured: list[TableId] | None  # the captured tables; None: unknown (the source is unreachable)
    on_slow: Callable[[str], None]  # tell the user a slow step starts

    def open_sink(self, flavor: str) -> Sink:
        """The configured sink, built as the engine builds it."""

    def creation_refused(self, admin: Any, topics: list[str], partitions: int, replication: int,
                         configs: dict[str, str]) -> str | None:
        """Why Kafka would refuse to create `topics` (None: it would create them)."""


def listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"


def reason(error: BaseException) -> str:
    """An error as one line: the server's or client's message (never a password: pymysql's and
    kafka-python's messages hold none)."""
    if isinstance(error, pymysql.err.MySQLError) and len(error.args) >= 2:
        return f"({error.args[0]}) {error.args[1]}"
    text = " ".join(str(error).split())
    name = type(error).__name__
    return text if name in text else f"{name}: {text}" if text else name


def writable(check: str, path: Path, setting: str) -> CheckResult:
    """Whether dblog can create and replace `path` (a temp file beside it, then renamed)."""
    if path.is_dir():
        return CheckResult(check, "fail", f"{path} is a directory", f"point {setting} at a file")
    directory = path.parent
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return CheckResult(check, "fail", f"{existing} is a file, so {directory} cannot be created",
                           f"point {setting} at a path in a directory")
    if existing != directory:
        if not os.access(existing, os.W_OK | os.X_OK):
            return CheckResult(check, "fail", f"{directory} does not exist and {existing} is not writable",
                               f"create {directory} for dblog's user, or point {setting} elsewhere")
        return CheckResult(check, "ok", f"{path} ({directory} will be created)")
    try:
        handle, temp = tempfile.mkstemp(prefix=".dblog-check-", dir=directory)
        os.close(handle)
        os.unlink(temp)
    except OSError as error:
        return CheckResult(check, "fail", f"cannot create files in {directory}: {error.strerror or error}",
                           f"make {directory} writable for dblog's user, or point {setting} elsewhere")
    if path.exists() and not os.access(path, os.W_OK):
        return CheckResult(check, "fail", f"{path} is not writable", f"make it writable, or point {setting} elsewhere")
    return CheckResult(check, "ok", str(path))
