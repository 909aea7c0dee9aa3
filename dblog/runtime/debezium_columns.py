"""Debezium's column options, converted to dblog's `[columns]` and `[[sink.kafka.message_key]]`
(a step of `dblog.runtime.debezium_config.convert`; what they do: dblog.sinks.column_options).

| Debezium                                   | dblog                                                    |
|--------------------------------------------|----------------------------------------------------------|
| column.include.list / column.exclude.list  | columns.include / columns.exclude                        |
| column.truncate.to.N.chars                 | [[columns.truncate]] columns, chars = N                  |
| column.mask.with.N.chars                   | [[columns.mask]] columns, chars = N                      |
| column.mask.hash.ALGO.with.salt.SALT       | [[columns.hash]] columns, algorithm, salt, version = 1   |
| column.mask.hash.v2.ALGO.with.salt.SALT    | [[columns.hash]] ..., version = 2                        |
| message.key.columns = db.t:c1,c2;db.u:c    | [[sink.kafka.message_key]] table = "db.t", columns       |
"""

from __future__ import annotations

import re
from typing import Callable

from dblog.sinks.column_options import JAVA_DIGESTS

_TRUNCATE = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
_MASK = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_HASH = re.compile(r"column\.mask\.hash\.(v2\.)?([^.]+)\.with\.salt\.(.+)")
# Debezium's CustomKeyMapper.MSG_KEY_COLUMNS_PATTERN: one `table:col1,col2` of message.key.columns
_MESSAGE_KEY = re.compile(r"^\s*([^:]+):([^:,]+(,[^:,]+)*)\s*$")


def convert_columns(pending: dict[str, str], conversion, split: Callable[[str | None], list[str]]) -> None:
    """Take the column option keys out of `pending` into `conversion` (refusing what dblog
    cannot do, naming the key); `split` splits a comma-separated regex list as Debezium does."""
    columns: dict = {}
    include, exclude = pending.pop("column.include.list", None), pending.pop("column.exclude.list", None)
    if include is not None and exclude is not None:
        conversion.refused.append("column.exclude.list: \"column.include.list\" is already specified (Debezium takes "
                                  "one of them); keep one")
    elif include is not None:
        columns["include"] = _valid(split(include), "column.include.list", conversion)
    elif exclude is not None:
        columns["exclude"] = _valid(split(exclude), "column.exclude.list", conversion)
    for kind in ("truncate", "mask", "hash"):
        rules = []
        for key in [key for key in pending if _rule_kind(key) == kind]:
            rule = _rule(key, pending.pop(key), split, conversion)
            if rule is not None:
                rules.append(rule)
        if rules:
            columns[kind] = rules
        if len(rules) > 1:
            conversion.notes.append(
                f"{len(rules)} column {kind} rules: a column two of them match gets the first; dblog takes them in "
                "the file's order, Debezium in its configuration map's (hash) order: keep them apart")
    for key, setting in (("column.propagate.source.type", "propagate_source_type"),
                         ("datatype.propagate.source.type", "propagate_data_types")):
        if key in pending:
            columns[setting] = _valid(split(pending.pop(key)), key, conversion)
    if columns:
        conversion.set("columns", columns)
        conversion.notes.append("column.* options: the Kafka sink's records carry the columns and masks as "
                                "Debezium's; the record keys stay whole and unmasked ([columns])")
    _message_key(pending, conversion)


def _rule_kind(key: str) -> str | None:
    if _TRUNCATE.fullmatch(key):
        return "truncate"
    if _MASK.fullmatch(key):
        return "mask"
    if _HASH.fullmatch(key):
        return "hash"
    return None


def _rule(key: str, value: str, split, conversion) -> dict | None:
    patterns = _valid(split(value), key, conversion)
    if not patterns:
        conversion.refused.append(f"{key}: names no columns; give a comma-separated list of regexes over "
                                  "db.table.column, or remove it")
        return None
    for pattern, kind in ((_TRUNCATE, "truncate"), (_MASK, "mask")):
        match = pattern.fullmatch(key)
        if match:
            if int(match.group(1)) > 2**31 - 1:
                conversion.refused.append(f"{key}: {match.group(1)} is larger than Java's int")
                return None
            return {"columns": patterns, "chars": int(match.group(1))}
    match = _HASH.fullmatch(key)
    version, algorithm, salt = 2 if match.group(1) else 1, match.group(2), match.group(3)
    if algorithm.upper() not in JAVA_DIGESTS:
        conversion.refused.append(f"{key}: {algorithm!r} is not a hash algorithm dblog knows; use one of Java's "
                                  "MessageDigest names: MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224, "
                                  "SHA-512/256, SHA3-224, SHA3-256, SHA3-384, SHA3-512")
        return None
    return {"columns": patterns, "algorithm": algorithm, "salt": salt, "version": version}


def _valid(patterns: list[str], key: str, conversion) -> list[str]:
    """Debezium's Field.isListOfRegex: every regex must compile."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            conversion.refused.append(f"{key}: {pattern!r} is not a valid regular expression ({error})")
    return patterns


def _message_key(pending: dict[str, str], conversion) -> None:
    value = pending.pop("message.key.columns", None)
    if value is None:
        return
    if not value:
        conversion.refused.append("message.key.columns: Must not be empty")
        return
    rules = []
    for entry in value.split(";"):
        if not _MESSAGE_KEY.search(entry):
            conversion.refused.append(f"message.key.columns: {entry!r} has an invalid format (expecting "
                                      "'<db.table regex>:<column>[,<column>...]')")
            continue
        table, columns = entry.split(":", 1)
        table = table.lstrip()  # Debezium trims `table.column`; a space before the `:` stays in it
        rules.append({"table": table, "columns": [column.strip() for column in columns.split(",")]})
        _valid([f"{table}.{column.strip()}" for column in columns.split(",")], "message.key.columns", conversion)
    if rules:
        conversion.set("sink.kafka.message_key", rules)
