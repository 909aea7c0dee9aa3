"""`${…}` placeholders in a Debezium configuration's values (dblog.runtime.debezium_config).

Three families are understood, as Debezium's users write them:

- `${NAME}` and `${NAME:default}`: Debezium Server's (MicroProfile Config's) expressions, read
  here from the environment variable NAME (the default when it is unset); with a default, NAME
  must be upper case (`${vault:path:key}` is a Kafka Connect provider, refused by name);
- `${env:NAME}`: Kafka Connect's EnvVarConfigProvider;
- `${file:PATH:KEY}`: Kafka Connect's FileConfigProvider, the value of KEY in the Java
  properties file PATH; `${directory:DIR:FILE}`: its DirectoryConfigProvider, the contents of
  DIR/FILE (a Kubernetes secret mounted as a directory).

Kafka Connect's providers are named by the worker's `config.providers`; `env`, `file` and
`directory` are the names its documentation uses, and the only ones recognised here. Parsing
splits `${provider:path:key}` at its first two colons, as Kafka Connect's ConfigTransformer does.

A non-secret value is `resolve`d when the configuration is converted. A secret value (a
password) is never resolved here: `secret_reference` turns it into dblog's `foo_env` /
`foo_file` (+ `foo_file_key`) settings (dblog.runtime.secrets), which are read when dblog
connects, so the converted TOML never holds the secret. Errors name the key, the variable, the
file or the properties key, never a value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dblog.runtime.java_properties import PropertiesError, parse_properties

_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULTED_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
PROVIDERS = ("env", "file", "directory")


class PlaceholderError(ValueError):
    """A placeholder that is malformed or cannot be resolved: `str()` quotes the placeholder,
    `reason` alone does not (for secret keys, whose text might be a password after all)."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"{text}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Placeholder:
    text: str  # as written: "${env:NAME}"
    kind: str  # "env", "file" or "directory"
    name: str  # env: the variable; file: the properties file; directory: the file DIR/FILE
    key: str | None = None  # file: the key in the properties file
    default: str | None = None  # env written ${NAME:default}

    def resolve(self) -> str:
        if self.kind == "env":
            if self.name in os.environ:
                return os.environ[self.name]
            if self.default is not None:
                return self.default
            raise PlaceholderError(self.text, f"environment variable {self.name} is not set; export it")
        try:
            text = Path(self.name).read_text()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
            raise PlaceholderError(self.text, f"cannot read {self.name}: {reason}") from None
        if self.kind == "directory":
            return text  # as Kafka Connect's DirectoryConfigProvider: the contents as they are
        try:
            properties = parse_properties(text)
        except PropertiesError as error:
            raise PlaceholderError(self.text, f"{self.name} is not a valid properties file: {error}") from None
        if self.key not in properties:
            raise PlaceholderError(self.text, f"{self.name} has no key {self.key!r}")
        return properties[self.key]


def parse(text: str) -> Placeholder:
    """The placeholder `text` (`${…}`, as found by `find`)."""
    inner = text[2:-1]
    provider, colon, rest = inner.partition(":")
    if colon and provider in PROVIDERS:
        path, colon, key = rest.partition(":")
        if not colon:
            path, key = "", path
        if provider == "env":
            if not _ENV_NAME.fullmatch(key):
                raise PlaceholderError(text, "write ${env:NAME} with an environment variable's name")
            return Placeholder(text, "env", key)
        if not path or not key:
            form = "${file:PATH:KEY}" if provider == "file" else "${directory:DIR:FILE}"
            raise PlaceholderError(text, f"write {form}")
        if provider == "directory":
            if "/" in key or key in (".", ".."):
                raise PlaceholderError(text, "FILE must be a file's name inside DIR")
            return Placeholder(text, "directory", str(Path(path) / key))
        return Placeholder(text, "file", path, key=key)
    known = ", ".join(f"${{{name}:…}}" for name in PROVIDERS)
    if colon and not _DEFAULTED_ENV_NAME.fullmatch(provider):
        # `${vault:path:key}`: a Kafka Connect provider dblog does not have (MicroProfile's
        # `${NAME:default}` is taken for environment variables' upper-case names only).
        raise PlaceholderError(text, f"a Kafka Connect config provider dblog does not run (it knows {known}); "
                               "put the value in an environment variable or a file and use one of those")
    if not _ENV_NAME.fullmatch(provider):
        raise PlaceholderError(text, f"dblog reads ${{NAME}} and ${{NAME:default}} from environment variables "
                               f"(NAME: letters, digits, _) and the Kafka Connect providers {known}; "
                               "write one of those or the value itself")
    return Placeholder(text, "env", provider, default=rest if colon else None)


def find(value: str) -> list[tuple[re.Match, Placeholder]]:
    """The placeholders of `value`, in order; PlaceholderError for a malformed one."""
    return [(match, parse(match.group())) for match in _PLACEHOLDER.finditer(value)]


def resolve(value: str) -> str:
    """`value` with every placeholder replaced by what it stands for."""
    found = find(value)
    if not found:
        return value
    parts, end = [], 0
    for match, placeholder in found:
        parts += [value[end:match.start()], placeholder.resolve()]
        end = match.end()
    return "".join(parts + [value[end:]])


def secret_reference(value: str, where: str) -> tuple[dict[str, str], list[str]] | None:
    """dblog's settings that read the secret `value` stands for when dblog connects: for
    `where` = "source.password", {"password_env": NAME} or {"password_file": PATH[,
    "password_file_key": KEY]}, and notes; None when `value` holds no placeholder (a literal)."""
    try:
        found = find(value)
    except PlaceholderError as error:  # raised again without the text
        raise PlaceholderError("", error.reason) from None
    if not found:
        return None
    match, placeholder = found[0]
    if len(found) > 1 or match.group() != value.strip():
        raise PlaceholderError("the value", "a placeholder inside other text (or several) cannot be read when dblog "
                                      "connects; make the whole value one placeholder")
    name = where.rpartition(".")[2]
    notes = []
    if placeholder.kind == "env":
        if placeholder.default is not None:
            notes.append(f"the default of ${{{placeholder.name}:…}} is not carried over (it would put the secret "
                         f"into the configuration): {placeholder.name} must be set when dblog runs")
        return {f"{name}_env": placeholder.name}, notes
    settings = {f"{name}_file": placeholder.name}
    if placeholder.kind == "file":
        settings[f"{name}_file_key"] = placeholder.key
    else:
        notes.append(f"{placeholder.text}: dblog removes one trailing newline from the file "
                     "(Kafka Connect's directory provider keeps it)")
    return settings, notes
