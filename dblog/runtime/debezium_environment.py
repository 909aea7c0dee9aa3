"""Debezium Server's settings given as environment variables, or in an env file, as Debezium
Server reads them (`dblog convert-debezium`, `dblog run --debezium-config`).

Debezium Server (DebeziumServerConfigSourceFactory, over MicroProfile Config) takes a shell-style
name, letters, digits and `_` with at least one `_` inside, as the dotted lowercase key:
`DEBEZIUM_SOURCE_DATABASE_HOSTNAME` → `debezium.source.database.hostname`. An environment variable
wins over an env file (Quarkus's `.env`), which wins over application.properties. Keys with
capitals or `_` (`database.allowPublicKeyRetrieval`) cannot be given this way, in Debezium
Server as here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from dblog.runtime.config import ConfigError

_SHELL_NAME = re.compile(r"^[a-zA-Z0-9_]+_+[a-zA-Z0-9_]+$")  # DebeziumServerConfigSourceFactory's pattern
_SERVER_PREFIXES = ("debezium.", "quarkus.")


def server_key(name: str) -> str | None:
    """The Debezium Server key an environment variable's name stands for, or None."""
    if not _SHELL_NAME.match(name):
        return None
    key = name.replace("_", ".").lower()
    return key if key.startswith(_SERVER_PREFIXES) else None


def server_settings(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """key -> (value, the variable's name), for the variables that are Debezium Server keys."""
    found = {}
    for name in sorted(environ):
        key = server_key(name)
        if key is not None:
            found[key] = (environ[name], name)
    return found


def read_env_file(path: str | Path) -> dict[str, str]:
    """An env file as Docker and Quarkus's `.env` write it: `NAME=value` lines, `#` comments,
    an optional `export `, the value optionally in matching quotes."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist") from None
    variables = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = line.removeprefix("export ").partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            raise ConfigError(f"{path}, line {number}: not NAME=value")  # the value is never quoted: it may be a secret
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        variables[name.strip()] = value
    return variables
