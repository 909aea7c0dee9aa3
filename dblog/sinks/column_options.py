"""Debezium's column options: which columns a record carries (`column.include.list` /
`column.exclude.list`), what their values become (`column.truncate.to.N.chars`,
`column.mask.with.N.chars`, `column.mask.hash[.v2].ALGO.with.salt.SALT`) and which columns key a
Kafka record (`message.key.columns`), as Debezium 3.6's MySQL connector does them. dblog's
settings are `[columns]` and `[[sink.kafka.message_key]]`; docs/configuration.md, "Columns".

How Debezium does it (io.debezium.relational.TableSchemaBuilder, mapping.ColumnMappers,
mapping.MaskStrings, mapping.TruncateColumn, Key.CustomKeyMapper), and so dblog:

* Every pattern is a regex matched, whole and case-insensitively, against `db.table.column`.
* The filter drops columns from `before` / `after` and their Connect schema only: the record's
  key keeps its columns, filtered or not.
* A column gets at most one mapper: the first rule that matches it, truncations first, then the
  masks, then the hashes (Debezium's ColumnMappers order; within one kind Debezium takes its
  configuration map's order, dblog the order the rules are given).
* A mapper works on the value as the record writes it (after Debezium's encoding in the Kafka
  sink), never on the key: a masked key column is masked in `after` and plain in the key.
* `mask` (N `*`) and `hash` change the values of string columns only (CHAR, VARCHAR, the TEXT
  types, ENUM, SET: Debezium's JDBC CHAR/VARCHAR types). `mask` writes the asterisks for a NULL
  too (Debezium's MaskingValueConverter ignores the value); `hash` leaves NULL null. Both add the
  schema parameter `masked: "true"`, to whichever column they match (Debezium's alterFieldSchema
  does not look at the type).
* `hash`: the lowercase hex digest of the salt's UTF-8 bytes followed by the value's bytes: version 1
  (Debezium's `column.mask.hash.`) hashes the value as Java serialization writes a String
  (ObjectOutputStream: stream header, TC_STRING, length, modified UTF-8), version 2
  (`column.mask.hash.v2.`) its UTF-8 bytes (`String.getBytes()` with a UTF-8 default charset:
  Java 18+, or a UTF-8 locale). The digest is cut to the column's length when it has one.
* `truncate` applies when the column's length is unknown or larger than N: text is cut to N
  UTF-16 code units (Java's `String.substring`; a cut that would split a surrogate pair drops its
  first half, where Java writes a lone surrogate), bytes to N bytes; other values pass. It adds the
  schema parameter `truncateLength: "N"` then.
* A column's length is Debezium's `Column.length()`: what its DDL parser reads from `SHOW CREATE
  TABLE` (the column's COLUMN_TYPE): the `(n)` or `(p,s)` of the type, 1 for ENUM, the members
  and commas of a SET, BIT's 1 and DECIMAL's 10 by default, -1 (unknown) otherwise (TEXT, BLOB,
  DATETIME without a fraction, JSON).
* `message.key.columns`: per table, the columns each rule's `table.column` regexes match, rule by
  rule in the table's column order; no match: the primary key (or the key given for a table
  without one, `source.key_columns`). A key change is a change of these columns.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dblog.core.events import RowChange
from dblog.mysql.schema import Column, TableSchema
from dblog.sinks.schema_history import source_type_parameters

# Debezium's MySQL DDL parser gives these the JDBC types CHAR / VARCHAR: the ones masks change.
STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})

# Java's MessageDigest names (the SUN provider's, and their aliases) -> hashlib's.
JAVA_DIGESTS = {
    "MD5": "md5", "SHA-1": "sha1", "SHA": "sha1", "SHA1": "sha1",
    "SHA-224": "sha224", "SHA224": "sha224", "SHA-256": "sha256", "SHA256": "sha256",
    "SHA-384": "sha384", "SHA384": "sha384", "SHA-512": "sha512", "SHA512": "sha512",
    "SHA-512/224": "sha512_224", "SHA512/224": "sha512_224", "SHA-512/256": "sha512_256", "SHA512/256": "sha512_256",
    "SHA3-224": "sha3_224", "SHA3-256": "sha3_256", "SHA3-384": "sha3_384", "SHA3-512": "sha3_512",
}


def _patterns(patterns: list[str], what: str) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{what} {pattern!r} is not a valid regular expression ({error}); write a regex over "
                             r"'db.table.column', e.g. 'shop\.customers\.email'") from None
    return patterns


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    columns: list[str] = Field(min_length=1)  # regexes over "db.table.column", whole and case-insensitive

    @field_validator("columns")
    @classmethod
    def _valid(cls, patterns: list[str]) -> list[str]:
        return _patterns(patterns, "pattern")


class TruncateRule(_Rule):
    """`[[columns.truncate]]`: Debezium's `column.truncate.to.N.chars`."""

    chars: int = Field(ge=0)


class MaskRule(_Rule):
    """`[[columns.mask]]`: Debezium's `column.mask.with.N.chars` (N asterisks)."""

    chars: int = Field(ge=0)


class HashRule(_Rule):
    """`[[columns.hash]]`: Debezium's `column.mask.hash.ALGO.with.salt.SALT` (version 1) and
    `column.mask.hash.v2.ALGO.with.salt.SALT` (version 2)."""

    algorithm: str  # Java's MessageDigest name: SHA-256, SHA-512, MD5, SHA3-256, ...
    salt: str
    version: Literal[1, 2] = 1

    @field_validator("algorithm")
    @classmethod
    def _known(cls, algorithm: str) -> str:
        if algorithm.upper() not in JAVA_DIGESTS:
            raise ValueError(f"{algorithm!r} is not a hash algorithm dblog knows; use one of Java's MessageDigest "
                             "names: MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224, SHA-512/256, "
                             "SHA3-224, SHA3-256, SHA3-384, SHA3-512")
        try:
            hashlib.new(JAVA_DIGESTS[algorithm.upper()])
        except ValueError:  # e.g. SHA-512/224 with an OpenSSL built without it
            raise ValueError(f"{algorithm!r}: this Python's OpenSSL does not provide it; use SHA-256 or SHA-512") from None
        return algorithm


class MessageKeyRule(BaseModel):
    """`[[sink.kafka.message_key]]`: one `table:col1,col2` of Debezium's `message.key.columns`."""

    model_config = ConfigDict(extra="forbid")

    table: str  # a regex over "db.table"
    columns: list[str] = Field(min_length=1)  # regexes over the column name

    @model_validator(mode="after")
    def _valid(self) -> MessageKeyRule:
        _patterns([f"{self.table}.{column}" for column in self.columns], "table and column")
        return self


class ColumnSettings(BaseModel):
    """`[columns]`: the columns the JSON-lines and Kafka sinks write, and their masks."""

    model_config = ConfigDict(extra="forbid")

    include: list[str] | None = None  # regexes over "db.table.column": only these columns (key columns stay in the key)
    exclude: list[str] = Field(default_factory=list)  # or: every column but these
    truncate: list[TruncateRule] = Field(default_factory=list)
    mask: list[MaskRule] = Field(default_factory=list)
    hash: list[HashRule] = Field(default_factory=list)
    # Debezium's column.propagate.source.type, regexes over "db.table.column", and
    # datatype.propagate.source.type, over "db.table.TYPE" (`INT UNSIGNED`): schema parameters only
    propagate_source_type: list[str] = Field(default_factory=list)
    propagate_data_types: list[str] = Field(default_factory=list)

    @field_validator("include", "exclude", "propagate_source_type", "propagate_data_types")
    @classmethod
    def _valid(cls, patterns: list[str] | None) -> list[str] | None:
        return None if patterns is None else _patterns(patterns, "pattern")

    @model_validator(mode="after")
    def _one_filter(self) -> ColumnSettings:
        if self.include is not None and self.exclude:
            raise ValueError("include and exclude are both set; Debezium takes one of column.include.list and "
                             "column.exclude.list: keep one")
        return self

    @property
    def active(self) -> bool:
        return self.rewrites_rows or bool(self.propagate_source_type or self.propagate_data_types)

    @property
    def rewrites_rows(self) -> bool:
        """Whether records' rows differ from the table's (columns left out, masked, cut)."""
        return bool(self.include is not None or self.exclude or self.truncate or self.mask or self.hash)


# --- values -----------------------------------------------------------------------------------


def debezium_length(column: Column) -> int:
    """Debezium's `Column.length()` of `column`, as its DDL parser reads the column's type from
    SHOW CREATE TABLE (COLUMN_TYPE); -1 when the type has none."""
    if column.data_type == "enum":
        return 1
    if column.data_type == "set":
        return max(0, 2 * len(column.enum_values or ()) - 1)
    match = re.match(r"\s*[a-z ]+\(\s*(\d+)", column.column_type.lower())
    if match:
        length = int(match.group(1))
        return length if length > 0 else 10  # Debezium's parser: a length of 0 is DECIMAL's default
    return {"bit": 1, "decimal": 10, "numeric": 10}.get(column.data_type, -1)


def java_serialized_string(value: str) -> bytes:
    """`value` as java.io.ObjectOutputStream writes a String into a new stream: the stream header,
    TC_STRING and a 2-byte length (TC_LONGSTRING and 8 bytes past 65,535), modified UTF-8."""
    encoded = bytearray()
    for unit in struct.unpack(f"<{len(value.encode('utf-16-le', 'surrogatepass')) // 2}H",
                              value.encode("utf-16-le", "surrogatepass")):
        if 0 < unit < 0x80:
            encoded.append(unit)
        elif unit < 0x800:  # NUL too: modified UTF-8 writes it in two bytes
            encoded += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:  # each half of a surrogate pair on its own (CESU-8)
            encoded += bytes((0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F))
    if len(encoded) <= 0xFFFF:
        return b"\xac\xed\x00\x05\x74" + len(encoded).to_bytes(2, "big") + bytes(encoded)
    return b"\xac\xed\x00\x05\x7c" + len(encoded).to_bytes(8, "big") + bytes(encoded)


def truncate_text(value: str, length: int) -> str:
    """The first `length` UTF-16 code units of `value` (Java's `substring(0, length)`); a
    surrogate pair the cut would split is dropped whole."""
    if len(value) <= length // 2:  # fewer code points than half the limit: fewer code units than it
        return value
    units = 0
    for index, char in enumerate(value):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > length:
            return value[:index]
    return value


def _truncate_base64(value: str, length: int) -> str:
    data = base64.b64decode(value)
    return value if len(data) <= length else base64.b64encode(data[:length]).decode("ascii")


@dataclass(frozen=True)
class ColumnMapper:
    """What one column's values become, and the schema parameters that say so."""

    parameters: dict[str, str]
    convert: Callable[[Any], Any] | None  # the written value (None too) -> the value; None: unchanged
    nulls: bool = False  # convert NULL too (a mask)


def _hasher(rule: HashRule, length: int) -> Callable[[Any], Any]:
    name = JAVA_DIGESTS[rule.algorithm.upper()]
    salted = hashlib.new(name, rule.salt.encode("utf-8"))
    serialize = java_serialized_string if rule.version == 1 else (lambda value: value.encode("utf-8", "surrogatepass"))

    def digest(value):
        if value is None:
            return None
        hashed = salted.copy()
        hashed.update(serialize(value))
        text = hashed.hexdigest()
        return text[:length] if length > 0 else text
    return digest


def column_mapper(settings: ColumnSettings, name: str, column: Column, text: Callable[[Column], bool],
                  binary: Callable[[Column], bool]) -> ColumnMapper | None:
    """The mapper of `column` (`name`: its `db.table.column`), the first rule matching it in
    Debezium's order; `text(column)` / `binary(column)`: whether the values written for it are
    text (truncated by characters) or bytes as base64 (truncated by bytes)."""
    for rule in settings.truncate:
        if matches(rule.columns, name):
            length = debezium_length(column)
            if not (length < 0 or length > rule.chars):
                return ColumnMapper({}, None)  # cannot be longer: Debezium leaves it and its schema alone
            chars = rule.chars
            if binary(column):
                return ColumnMapper({"truncateLength": str(chars)}, lambda v: v if v is None else _truncate_base64(v, chars))
            if text(column):
                return ColumnMapper({"truncateLength": str(chars)}, lambda v: v if v is None else truncate_text(v, chars))
            return ColumnMapper({"truncateLength": str(chars)}, None)
    strings = column.data_type in STRING_TYPES and not column.is_binary
    for rule in settings.mask:
        if matches(rule.columns, name):
            mask = "*" * rule.chars
            return ColumnMapper({"masked": "true"}, (lambda value: mask) if strings else None, nulls=strings)
    # The source type's parameters (Debezium's propagate mappers) come before the hashes: a column
    # both match is not hashed, as in Debezium 3.6 (test_connect_differential.py).
    if settings.propagate_source_type or settings.propagate_data_types:
        parameters = source_type_parameters(column.name, column.column_type)
        table = name[:len(name) - len(column.name)]  # "db.table."
        if (matches(settings.propagate_source_type, name)
                or matches(settings.propagate_data_types, table + parameters["__debezium.source.column.type"])):
            return ColumnMapper(parameters, None)
    for version in (1, 2):
        for rule in settings.hash:
            if rule.version == version and matches(rule.columns, name):
                return ColumnMapper({"masked": "true"}, _hasher(rule, debezium_length(column)) if strings else None)
    return None


def matches(patterns: list[str], name: str) -> bool:
    return any(_compiled(pattern).fullmatch(name) for pattern in patterns)


_COMPILED: dict[str, re.Pattern] = {}


def _compiled(pattern: str) -> re.Pattern:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern, re.IGNORECASE)
    return compiled


# --- one table --------------------------------------------------------------------------------


class TableColumns:
    """The column options of one table (its schema as loaded): the columns its records carry, the
    columns that key them, and each column's mapper. Rebuilt when the table's schema changes."""

    def __init__(self, schema: TableSchema, settings: ColumnSettings | None,
                 message_key: list[MessageKeyRule] | None = None,
                 text: Callable[[Column], bool] | None = None, binary: Callable[[Column], bool] | None = None) -> None:
        settings = settings or ColumnSettings()
        prefix = f"{schema.table.db}.{schema.table.table}."
        if settings.include is not None:
            kept = [c for c in schema.columns if matches(settings.include, prefix + c.name)]
        else:
            kept = [c for c in schema.columns if not matches(settings.exclude, prefix + c.name)]
        self.schema = schema
        self.columns: list[Column] = kept  # the columns of `before` / `after`, in the table's order
        self.filtered = len(kept) != len(schema.columns)
        self.key_columns = message_key_columns(schema, message_key or [])
        # whether changes need rewriting: columns left out, or keyed by other columns than the table's
        self.rewrites = self.filtered or self.key_columns != schema.key_columns
        text = text or normal_form_text
        binary = binary or normal_form_binary
        self.mappers: dict[str, ColumnMapper] = {}
        for column in kept:
            mapper = column_mapper(settings, prefix + column.name, column, text, binary)
            if mapper is not None:
                self.mappers[column.name] = mapper
        self._names = [c.name for c in kept]
        self._converting = [(name, mapper.convert, mapper.nulls) for name, mapper in self.mappers.items()
                            if mapper.convert is not None]

    def key(self, row: dict | None) -> dict | None:
        """The record's key of a full row (before any filter or mask)."""
        if row is None:
            return None
        return {name: row.get(name) for name in self.key_columns}

    def keep(self, row: dict | None) -> dict | None:
        """`row` with the filtered-out columns left out."""
        if row is None or not self.filtered:
            return row
        return {name: row[name] for name in self._names if name in row}

    def map(self, row: dict | None) -> dict | None:
        """`row` (as it will be written) with each column's mapper applied."""
        if row is None or not self._converting:
            return row
        row = dict(row)
        for name, convert, nulls in self._converting:
            if name in row:
                value = row[name]
                if value is not None or nulls:
                    row[name] = convert(value)
        return row

    def parameters(self, name: str) -> dict[str, str] | None:
        mapper = self.mappers.get(name)
        return mapper.parameters if mapper is not None and mapper.parameters else None

    def rewrite(self, change: RowChange) -> RowChange:
        """`change` with its rows as written: the filtered-out columns left out, the others
        mapped (its key as it was)."""
        return dataclasses.replace(change, before=self.map(self.keep(change.before)), after=self.map(self.keep(change.after)))

    def rewritten_key_columns(self) -> list[str]:
        """The table's key columns this table's options leave out or change the values of."""
        kept = set(self._names)
        return [name for name in self.schema.key_columns
                if name not in kept or any(name == converted for converted, _, _ in self._converting)]


def normal_form_text(column: Column) -> bool:
    """dblog's normal form: text columns (and JSON) are text; dates, decimals are left alone."""
    return (column.data_type in STRING_TYPES or column.data_type == "json") and not column.is_binary


def normal_form_binary(column: Column) -> bool:
    return column.is_binary and column.data_type not in ("geometry", "point", "linestring", "polygon", "multipoint",
                                                         "multilinestring", "multipolygon", "geometrycollection")


def message_key_columns(schema: TableSchema, rules: list[MessageKeyRule]) -> tuple[str, ...]:
    """Debezium's CustomKeyMapper: for each `table.column` regex, in order, the table's columns
    it matches; none matched: the table's key. A column matched twice is refused (Debezium fails
    building the key schema then)."""
    table = f"{schema.table.db}.{schema.table.table}"
    chosen: list[str] = []
    for rule in rules:
        for pattern in rule.columns:
            regex = f"{rule.table}.{pattern.strip()}".strip()  # Debezium trims the joined regex
            for column in schema.columns:
                if _compiled(regex).fullmatch(f"{table}.{column.name}"):
                    if column.name in chosen:
                        raise ValueError(f"sink.kafka.message_key names column {column.name!r} of {table} twice "
                                         f"(Debezium's message.key.columns would fail building its key); list each "
                                         "key column once")
                    chosen.append(column.name)
    return tuple(chosen) if chosen else schema.key_columns


def output_change(change: RowChange, columns: TableColumns) -> RowChange:
    """`change` as its records carry it: keyed by the message key's columns (a key change when
    they differ between `before` and `after`, as Debezium compares the keys), its rows without
    the filtered-out columns."""
    if not columns.rewrites:
        return change
    row = change.after if change.after is not None else change.before
    if row is None:
        return change
    key = tuple(row.get(name) for name in columns.key_columns)
    before_key = None
    if change.before is not None and change.after is not None:
        old = tuple(change.before.get(name) for name in columns.key_columns)
        before_key = old if old != key else None
    return dataclasses.replace(change, key=key, before=columns.keep(change.before), after=columns.keep(change.after),
                               before_key=before_key)
