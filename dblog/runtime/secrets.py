"""Secrets (passwords, key passphrases, catalog credentials) kept out of the config file.

Every secret setting `foo` of the TOML config comes three ways, at most one of them given:

- `foo = "..."`: literally (tests and demos; the file then holds the secret);
- `foo_env = "NAME"`: the value of environment variable NAME;
- `foo_file = "/path"`: the contents of a file, trailing newline removed (Kubernetes and Docker
  secrets are mounted as files).

`resolve_secret` reads it when a connection is opened, so an unset variable or an unreadable
file stops dblog with an error naming the setting and the variable or file, never the value.
Literal values are pydantic `SecretStr`s: they print as `**********` in reprs and errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr


class SecretError(ValueError):
    """A secret setting cannot be resolved (the message names the setting, never a value)."""


def resolve_secret(where: str, literal: SecretStr | str | None, env: str | None, file: str | None) -> str | None:
    """The secret configured at `where` (e.g. "source.password"), from whichever of the literal,
    `where_env` and `where_file` forms is set; None when none is."""
    if isinstance(literal, SecretStr):
        literal = literal.get_secret_value()
    given = [name for name, value in ((where, literal), (f"{where}_env", env), (f"{where}_file", file)) if value]
    if len(given) > 1:
        raise SecretError(f"{' and '.join(given)} are set: give the secret one way only")
    if env:
        if env not in os.environ:
            raise SecretError(f"{where}_env names {env!r}, which is not set in the environment: "
                              f"export {env} or change {where}_env")
        return os.environ[env]
    if file:
        try:
            return Path(file).read_text().removesuffix("\n").removesuffix("\r")
        except OSError as error:
            raise SecretError(f"{where}_file: cannot read {file}: {error.strerror or error}; "
                              "check the path and that dblog's user may read it") from None
    return literal or None
