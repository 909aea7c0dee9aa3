"""Secrets (passwords, key passphrases, catalog credentials) kept out of the config file.

Every secret setting `foo` of the TOML config comes three ways, at most one of them given:

- `foo = "..."`: literally (tests and demos; the file then holds the secret);
- `foo_env = "NAME"`: the value of environment variable NAME;
- `foo_file = "/path"`: the contents of a file, one trailing newline removed (Kubernetes and
  Docker secrets are mounted as files); with `foo_file_key = "KEY"` as well, the file is a Java
  properties file (`KEY=value` lines, as Kafka Connect's FileConfigProvider reads them for
  `${file:PATH:KEY}`) and the secret is the value of KEY.

`resolve_secret` reads it when a connection is opened, so a secret rotated on disk is picked up
at the next connection; `check_secrets` resolves every secret setting of a configuration once
when a command starts, so an unset variable or an unreadable file stops dblog before it connects
anywhere (`secret_problems` gives each setting's message: `dblog check` prints a line for each).
Errors name the setting and the variable, file or key, never a value. Literal values
are pydantic `SecretStr`s: they print as `**********` in reprs and errors.

A model declares a secret setting by having the fields `foo`, `foo_env` and `foo_file`
(optionally `foo_file_key`): `secret_settings` finds them wherever they are in the config tree.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, SecretStr

from dblog.runtime.java_properties import PropertiesError, parse_properties


class SecretError(ValueError):
    """A secret setting cannot be resolved (the message names the setting, never a value)."""


def resolve_secret(where: str, literal: SecretStr | str | None, env: str | None, file: str | None,
                   file_key: str | None = None) -> str | None:
    """The secret configured at `where` (e.g. "source.password"), from whichever of the literal,
    `where_env` and `where_file` (+ `where_file_key`) forms is set; None when none is."""
    if isinstance(literal, SecretStr):
        literal = literal.get_secret_value()
    given = [name for name, value in ((where, literal), (f"{where}_env", env), (f"{where}_file", file)) if value]
    if len(given) > 1:
        raise SecretError(f"{' and '.join(given)} are set: give the secret one way only")
    if file_key and not file:
        raise SecretError(f"{where}_file_key names a key of a properties file: set {where}_file to that file's path")
    if env:
        if env not in os.environ:
            raise SecretError(f"{where}_env names {env!r}, which is not set in the environment: "
                              f"export {env} or change {where}_env")
        return os.environ[env]
    if file:
        try:
            text = Path(file).read_text()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
            raise SecretError(f"{where}_file: cannot read {file}: {reason}; "
                              "check the path and that dblog's user may read it") from None
        if not file_key:
            return text.removesuffix("\n").removesuffix("\r")
        try:
            properties = parse_properties(text)
        except PropertiesError as error:  # its message names a line and a key, never a value
            raise SecretError(f"{where}_file: {file} is not a valid properties file: {error}") from None
        if file_key not in properties:
            raise SecretError(f"{where}_file_key: {file} has no key {file_key!r}; "
                              f"add `{file_key}=...` to it or change {where}_file_key")
        return properties[file_key]
    return literal or None


def secret_settings(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, BaseModel, str]]:
    """(where, model, field) of every secret setting in `model` and the models inside it: each
    `SecretStr` field `foo` beside which the model has `foo_env` (not, say, a dict of
    properties beside a dict of their variables)."""
    fields = type(model).model_fields
    for name, field in fields.items():
        where = f"{prefix}{name}"
        secret = field.annotation is SecretStr or SecretStr in typing.get_args(field.annotation)
        if secret and f"{name}_env" in fields:
            yield where, model, name
        for index, value in _children(getattr(model, name)):
            yield from secret_settings(value, f"{where}{index}.")


def _children(value) -> Iterator[tuple[str, BaseModel]]:
    if isinstance(value, BaseModel):
        yield "", value
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield f"[{index}]", item
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, BaseModel):
                yield f"[{key!r}]", item


def resolve_setting(model: BaseModel, name: str, where: str) -> str | None:
    """The secret of field `name` of `model` (which `secret_settings` found at `where`)."""
    return resolve_secret(where, getattr(model, name), getattr(model, f"{name}_env", None),
                          getattr(model, f"{name}_file", None), getattr(model, f"{name}_file_key", None))


def secret_problems(model: BaseModel) -> tuple[list[str], dict[str, str]]:
    """Resolve every secret setting once (and forget the values): the settings given, and the
    message of each one that cannot be resolved, by setting (`dblog check` prints one line each)."""
    given, problems = [], {}
    for where, owner, name in secret_settings(model):
        try:
            if resolve_setting(owner, name, where) is not None:
                given.append(where)
        except SecretError as error:
            problems[where] = str(error)
    return given, problems


def check_secrets(model: BaseModel) -> list[str]:
    """Resolve every secret setting once (and forget the values): the settings given; a
    SecretError naming every one that cannot be resolved."""
    given, problems = secret_problems(model)
    if problems:
        raise SecretError("; ".join(problems.values()))
    return given
