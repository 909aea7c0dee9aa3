"""Kafka Connect transforms (SMTs) the Kafka sink applies, as Debezium's users run them:
`[[sink.kafka.transforms]]`, in order, each record of every topic through the chain, as Kafka
Connect applies a connector's `transforms`.

* `unwrap` (`io.debezium.transforms.ExtractNewRecordState`): the row instead of the envelope
  (`after`; a delete as `delete_tombstone_handling_mode` says, or Debezium 2.x's `drop_tombstones`
  and `delete_handling_mode`), the envelope's fields as value fields (`add_fields`) or headers
  (`add_headers`), the topic from a column (`route_by_field`); truncates dropped; records that are
  not change envelopes (schema changes) untouched.
* `regex_router` (`org.apache.kafka.connect.transforms.RegexRouter`): the topic rewritten when
  `regex` matches all of it.
* `logical_table_router` (`io.debezium.transforms.ByLogicalTableRouter`): the same with
  `topic_regex`, plus the key's `__dbz__physicalTableIdentifier` and the new topic in the key's,
  the envelope's and the row's schema names.

Each behaves as Debezium 3.6's / Kafka 4.3's class does, record for record and schema for schema
(learnt from their code; tests/sinks/kafka/test_connect_differential.py runs Debezium in Kafka
Connect beside dblog with them). A record is a `Record`: topic, key and value payloads and their Connect
schemas (None when `sink.kafka.schemas` is off: then nothing is spent on schemas), headers as
written bytes. Any other transform, and predicates, are refused by name (docs/kafka.md, "Transforms").
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any, Literal, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dblog.sinks.kafka import connect_schema
from dblog.sinks.kafka.java_regex import JavaRegexError, check_replacement, compile_java, replace_first_if_matches

log = logging.getLogger("dblog.kafka")

UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
REGEX_ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"
LOGICAL_TABLE_ROUTER = "io.debezium.transforms.ByLogicalTableRouter"
# dblog's name of each transform it applies -> Debezium's / Kafka's class
TRANSFORM_CLASSES = {"unwrap": UNWRAP, "regex_router": REGEX_ROUTER, "logical_table_router": LOGICAL_TABLE_ROUTER}
_TYPES = {**{cls: name for name, cls in TRANSFORM_CLASSES.items()}, **{name: name for name in TRANSFORM_CLASSES}}

DELETE_TOMBSTONE_MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
DELETED_FIELD = "__deleted"  # the rewrite modes' field
PHYSICAL_TABLE_FIELD = "__dbz__physicalTableIdentifier"  # ByLogicalTableRouter's key.field.name default


class TransformError(ValueError):
    """A record a transform cannot take (as Debezium's task would fail on it); names the transform."""


def transform_type(value: Any) -> str:
    """dblog's name of a transform given by its name or Debezium's / Kafka's class name."""
    kind = _TYPES.get(str(value).strip()) if value is not None else None
    if kind is None:
        known = ", ".join(f'"{name}" ({cls})' for name, cls in TRANSFORM_CLASSES.items())
        raise ValueError(f"transform type {value!r} is not one dblog applies: use {known}. dblog applies no other "
                         "Kafka Connect transform; apply it where the records are read")
    return kind


def _names(value: Any) -> Any:
    """Debezium's comma-separated list, or a TOML list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None  # the alias (Kafka Connect's `transforms=NAME`), for messages


class UnwrapSettings(_Settings):
    """io.debezium.transforms.ExtractNewRecordState."""

    type: Literal["unwrap"] = "unwrap"
    # Debezium 3.x's delete.tombstone.handling.mode (default `tombstone`), or Debezium 2.x's
    # drop.tombstones (default true) with delete.handling.mode (none, drop (default), rewrite).
    delete_tombstone_handling_mode: Literal["drop", "tombstone", "rewrite", "rewrite-with-tombstone",
                                            "delete-to-tombstone"] | None = None
    drop_tombstones: bool | None = None
    delete_handling_mode: Literal["none", "drop", "rewrite"] | None = None
    add_fields: list[str] = Field(default_factory=list)  # e.g. ["op", "table", "source.ts_ms", "ts_ms:when"]
    add_fields_prefix: str = "__"
    add_headers: list[str] = Field(default_factory=list)
    add_headers_prefix: str = "__"
    route_by_field: str = ""  # a column whose value becomes the record's topic

    @field_validator("add_fields", "add_headers", mode="before")
    @classmethod
    def _lists(cls, value):
        return _names(value)

    @field_validator("delete_tombstone_handling_mode", "delete_handling_mode", mode="before")
    @classmethod
    def _mode(cls, value):
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self):
        legacy = [key for key in ("drop_tombstones", "delete_handling_mode") if getattr(self, key) is not None]
        if self.delete_tombstone_handling_mode is not None and legacy:
            raise ValueError(f"delete_tombstone_handling_mode replaces Debezium 2.x's {' and '.join(legacy)}: "
                             "give one or the other")
        for prefix_key, names in (("add_fields_prefix", self.add_fields), ("add_headers_prefix", self.add_headers)):
            for name in names:
                FieldReference.parse(getattr(self, prefix_key), name)  # ValueError naming the problem
        return self


class RegexRouterSettings(_Settings):
    """org.apache.kafka.connect.transforms.RegexRouter."""

    type: Literal["regex_router"] = "regex_router"
    regex: str
    replacement: str

    @model_validator(mode="after")
    def _check(self):
        _regex_and_replacement(self.regex, self.replacement, "regex / replacement")
        return self


class LogicalTableRouterSettings(_Settings):
    """io.debezium.transforms.ByLogicalTableRouter."""

    type: Literal["logical_table_router"] = "logical_table_router"
    topic_regex: str
    topic_replacement: str
    key_enforce_uniqueness: bool = True
    key_field_name: str = PHYSICAL_TABLE_FIELD
    key_field_regex: str | None = None
    key_field_replacement: str | None = None
    # Debezium's default `none`; `avro` / `avro_unicode` (for Avro converters) are not offered:
    # dblog writes JSON
    schema_name_adjustment_mode: Literal["none"] = "none"

    @model_validator(mode="after")
    def _check(self):
        _regex_and_replacement(self.topic_regex, self.topic_replacement, "topic_regex / topic_replacement")
        if (self.key_field_regex or "").strip():
            if not (self.key_field_replacement or "").strip():
                raise ValueError("key_field_replacement must be non-empty if key_field_regex is set")
            _regex_and_replacement(self.key_field_regex, self.key_field_replacement,
                                   "key_field_regex / key_field_replacement")
        return self


def _regex_and_replacement(regex: str, replacement: str, keys: str) -> None:
    try:
        check_replacement(compile_java(regex), replacement)
    except JavaRegexError as error:
        raise ValueError(f"{keys}: {error}") from None


TransformSettings = Annotated[Union[UnwrapSettings, RegexRouterSettings, LogicalTableRouterSettings],
                              Field(discriminator="type")]


def normalized_types(items: Any) -> Any:
    """`[sink.kafka.transforms]` items with their `type` as dblog names it (a class name is taken)."""
    if not isinstance(items, list):
        return items
    normalized = []
    for index, item in enumerate(items):
        if isinstance(item, dict):
            if "type" not in item:
                raise ValueError(f"transform {index + 1} has no type: give type = "
                                 f"{' | '.join(repr(name) for name in TRANSFORM_CLASSES)}")
            given = [key for key in ("predicate", "negate") if key in item]
            if given:
                raise ValueError(f"transform {index + 1}: {', '.join(given)}: Kafka Connect predicates (a transform "
                                 "applied to some records only) are not implemented by dblog; remove them")
            item = {**item, "type": transform_type(item["type"])}
        normalized.append(item)
    return normalized


# --- records -----------------------------------------------------------------------------------

class Record:
    """One Kafka record on its way through the transforms. `value` None with `tombstone` false is
    a record whose payload is null (Kafka Connect writes `null`, or the schema with a null
    payload); a tombstone has no value at all. `envelope`: the value is a change envelope
    (Debezium: a value schema named `*.Envelope`)."""

    __slots__ = ("topic", "key", "key_schema", "value", "value_schema", "headers", "envelope", "tombstone")
    # `headers`: a list the sink may share between a delete and its tombstone, as Debezium
    # shares one Headers object between them

    def __init__(self, topic: str, key: dict | None, key_schema: dict | None, value: dict | None,
                 value_schema: dict | None, headers: list[tuple[str, bytes]], envelope: bool,
                 tombstone: bool = False) -> None:
        self.topic, self.key, self.key_schema = topic, key, key_schema
        self.value, self.value_schema, self.headers = value, value_schema, headers
        self.envelope, self.tombstone = envelope, tombstone

    def replaced(self, **changes) -> "Record":
        """A new record (Kafka Connect's newRecord: the headers copied)."""
        record = Record(self.topic, self.key, self.key_schema, self.value, self.value_schema, list(self.headers),
                        self.envelope, self.tombstone)
        for name, value in changes.items():
            setattr(record, name, value)
        return record


class _Derived:
    """Schemas derived from another schema object, made once per object: the sink reuses its
    schema objects, so a table's derived schemas (and their JSON) are computed once."""

    def __init__(self, limit: int = 4096) -> None:
        self._cache: dict[tuple, tuple[Any, Any]] = {}
        self._limit = limit

    def get(self, source: Any, key: Any, make) -> Any:
        entry = self._cache.get((id(source), key))
        if entry is None or entry[0] is not source:
            if len(self._cache) >= self._limit:
                self._cache.clear()
            entry = self._cache[(id(source), key)] = (source, make())
        return entry[1]


def _bare(schema: dict) -> dict:
    """A field's schema without its field name (Connect's Field.schema())."""
    return {name: value for name, value in schema.items() if name != "field"}


def _basics(schema: dict) -> dict:
    """Kafka's SchemaUtil.copySchemaBasics: type, name, version, doc, parameters (not optional,
    not the default); for a struct, none of its fields."""
    copied = {"type": schema["type"]}
    if schema["type"] == "struct":
        copied["fields"] = []
    copied["optional"] = False
    for name in ("name", "version", "doc", "parameters"):
        if schema.get(name) is not None:
            copied[name] = schema[name]
    return copied


def _with_fields(schema: dict, added: list[dict]) -> dict:
    """`schema`'s basics (InsertField / ExtractNewRecordState: not optional) with its fields and `added`."""
    fields = list(schema["fields"])
    names = {field["field"] for field in fields}
    for field in added:
        if field["field"] in names:
            raise TransformError(f"cannot add field {field['field']!r} to {schema.get('name')}: it has one of "
                                 "that name (Kafka Connect: field name duplication)")
        names.add(field["field"])
        fields.append(field)
    return {**_basics(schema), "fields": fields}


def _envelope_layout() -> dict[str, dict]:
    """The change envelope's own fields (all but the rows') by name, as connect_schema builds them."""
    return {field["field"]: field for field in connect_schema.envelope_schema("layout", [])["fields"]}


# Debezium's FieldReference.determineStruct: the struct an unqualified name is read from
_TRANSACTION_FIELDS = ("id", "total_order", "data_collection_order")
_TOP_LEVEL_FIELDS = ("op", "ts_ms", "ts_us", "ts_ns")


class FieldReference:
    """An `add.fields` / `add.headers` entry, as Debezium's FieldReference reads it: `[struct.]field[:new_name]`,
    the new name after the prefix (`__op`, `__source_ts_ms`; `__table` for the unqualified `table`)."""

    def __init__(self, struct: str | None, field: str, new_name: str) -> None:
        self.struct, self.field, self.new_name = struct, field, new_name
        layout = _envelope_layout()
        self.where: str | None = None  # "top", "struct" or None (absent: Debezium adds nothing)
        self.schema: dict | None = None
        self.unset: Any = None  # the value of a field Debezium leaves unset, which its converter writes as the default
        parent = layout.get(struct) if struct is not None else None
        if parent is not None and any(f["field"] == field for f in parent["fields"]):
            self.where, found = "struct", next(f for f in parent["fields"] if f["field"] == field)
        elif field in layout:
            self.where, found = "top", layout[field]
        if self.where is not None:
            if found["type"] in ("struct", "array", "map"):
                raise ValueError(f"{field!r} is a {found['type']}: Kafka Connect fails on every record adding it "
                                 "(its schema is copied without its fields); name one of its fields "
                                 f"({field}.FIELD)")
            self.schema = {**_basics(found), "optional": True}  # copySchemaBasics(...).optional()
            # source.snapshot outside snapshots: unset in Debezium's Struct, "false" (the schema's
            # default) in the envelope the converter writes; the SMT reads the unset value, null
            self.unset = found.get("default")

    @classmethod
    def parse(cls, prefix: str, text: str) -> "FieldReference":
        parts = text.strip().split(":")
        if len(parts) > 2:
            raise ValueError(f"{text!r}: unexpected field name (one ':NEW_NAME' at most)")
        splits = parts[0].split(".")
        field = splits[0] if len(splits) == 1 else splits[1]
        if len(splits) == 1:
            struct = ("transaction" if field in _TRANSACTION_FIELDS else None if field in _TOP_LEVEL_FIELDS
                      else "source")
        else:
            struct = splits[0]
        if struct is not None and struct not in ("source", "transaction"):
            raise ValueError(f"{text!r}: dblog adds fields of the envelope (op, ts_ms, ts_us, ts_ns), of source "
                             "(source.FIELD, or FIELD) and of transaction (id, total_order, data_collection_order) "
                             f"only, not of {struct!r}")
        if len(parts) == 2:
            new_name = prefix + parts[1]
        else:
            new_name = prefix + (field if len(splits) == 1 else f"{struct}_{field}")
        return cls(struct, field, new_name)

    def value(self, envelope: dict) -> Any:
        if self.where == "top":
            value = envelope.get(self.field)
        else:
            parent = envelope.get(self.struct)
            value = None if parent is None else parent.get(self.field)
        return None if self.unset is not None and value == self.unset else value


# --- the transforms ------------------------------------------------------------------------------

class Transform:
    label: str

    def apply(self, record: Record) -> Record | None:
        raise NotImplementedError

    def route(self, topic: str) -> str:
        """The topic the records of `topic` go to, as far as the topic alone decides it."""
        return topic


class Unwrap(Transform):
    def __init__(self, settings: UnwrapSettings, header_schemas: bool, label: str) -> None:
        self.label = label
        self.header_schemas = header_schemas  # the headers it adds: with their `schema` part?
        if settings.delete_tombstone_handling_mode is None and (
                settings.drop_tombstones is not None or settings.delete_handling_mode is not None):
            # Debezium 2.x's LegacyDeleteHandlingStrategy
            deletes = settings.delete_handling_mode or "drop"
            self.keep_tombstones = settings.drop_tombstones is False
            self.deletes = {"none": "null", "drop": "drop", "rewrite": "rewrite"}[deletes]
            self.rewrite = deletes == "rewrite"
        else:  # Debezium 3.x's DefaultDeleteHandlingStrategy
            mode = settings.delete_tombstone_handling_mode or "tombstone"
            self.keep_tombstones = mode == "rewrite-with-tombstone"
            self.deletes = {"drop": "drop", "tombstone": "null", "rewrite": "rewrite",
                            "rewrite-with-tombstone": "rewrite", "delete-to-tombstone": "tombstone"}[mode]
            self.rewrite = mode in ("rewrite", "rewrite-with-tombstone")
        self.fields = [FieldReference.parse(settings.add_fields_prefix, name) for name in settings.add_fields]
        self.headers = [FieldReference.parse(settings.add_headers_prefix, name) for name in settings.add_headers]
        for reference in (*self.fields, *self.headers):
            if reference.where is None:
                log.warning("%s: %r is not a field of the change envelope or its %s block: nothing is added for "
                            "it (as Debezium)", label, reference.field, reference.struct or "top")
        self.fields = [reference for reference in self.fields if reference.where is not None]
        self.route_by_field = settings.route_by_field or None
        self._derived = _Derived()

    def apply(self, record: Record) -> Record | None:
        value = record.value
        if (record.envelope or value is None) and self.headers:
            # added to the record's own headers, as Debezium does: a delete and its tombstone share
            # theirs, so a tombstone kept carries the delete's too
            record.headers.extend(self._headers(value if record.envelope else None))
        if value is None:  # a tombstone
            return record if self.keep_tombstones else None
        if not record.envelope:  # schema changes and other records: as they are
            return record
        before, after = value["before"], value["after"]
        if after is None and before is None:  # a truncate
            return None
        if after is None:  # a delete
            if self.deletes == "drop":
                return None
            if self.deletes == "null":  # `after`'s null, with its schema
                unwrapped = record.replaced(value=None, value_schema=self._row_schema(record.value_schema, "after"),
                                            envelope=False)
            elif self.deletes == "tombstone":
                unwrapped = record.replaced(value=None, value_schema=None, envelope=False, tombstone=True)
            else:
                unwrapped = self._rewritten(record, "before", "true")
            if self.route_by_field is not None:
                unwrapped = self._routed(unwrapped, before, record.value_schema, "before")
            if unwrapped.value is not None:
                unwrapped = self._with_fields(unwrapped, value)
            return unwrapped
        if self.rewrite:
            unwrapped = self._rewritten(record, "after", "false")
        else:
            unwrapped = record.replaced(value=after, value_schema=self._row_schema(record.value_schema, "after"),
                                        envelope=False)
        if self.route_by_field is not None:
            unwrapped = self._routed(unwrapped, unwrapped.value, unwrapped.value_schema, None)
        return self._with_fields(unwrapped, value)

    def _row_schema(self, envelope_schema: dict | None, side: str) -> dict | None:
        if envelope_schema is None:
            return None
        return self._derived.get(envelope_schema, side, lambda: _bare(_field_schema(envelope_schema, side)))

    def _rewritten(self, record: Record, side: str, deleted: str) -> Record:
        """The row of `side` with `__deleted` (InsertField's static field, an optional string)."""
        row = {**record.value[side], DELETED_FIELD: deleted}
        schema = None
        if record.value_schema is not None:
            row_schema = self._row_schema(record.value_schema, side)
            schema = self._derived.get(row_schema, DELETED_FIELD, lambda: _with_fields(
                row_schema, [{"type": "string", "optional": True, "field": DELETED_FIELD}]))
        return record.replaced(value=row, value_schema=schema, envelope=False)

    def _with_fields(self, record: Record, envelope: dict) -> Record:
        """add.fields; Debezium rebuilds the value's schema even with none to add (so an unwrapped
        row's schema is not optional, where `after`'s is)."""
        row = record.value
        if self.fields:
            row = dict(row)
        for reference in self.fields:
            if reference.new_name in record.value:
                raise TransformError(f"{self.label}: cannot add field {reference.new_name!r}: the row has a column "
                                     "of that name (Kafka Connect: field name duplication); change add_fields_prefix")
            row[reference.new_name] = reference.value(envelope)
        schema = None
        if record.value_schema is not None:
            source = record.value_schema
            schema = self._derived.get(source, "fields", lambda: _with_fields(
                source, [{**reference.schema, "field": reference.new_name} for reference in self.fields]))
        return record.replaced(value=row, value_schema=schema)

    def _headers(self, envelope: dict | None) -> list[tuple[str, bytes]]:
        """Debezium's makeHeaders: each present field as a header; a tombstone gets `op` = "d" only."""
        headers = []
        for reference in self.headers:
            if envelope is None:
                if reference.field == "op":
                    headers.append((reference.new_name, _header_bytes({"type": "string", "optional": False}, "d",
                                                                      self.header_schemas)))
                continue
            if reference.where is not None:
                headers.append((reference.new_name, _header_bytes(reference.schema, reference.value(envelope),
                                                                  self.header_schemas)))
        return headers

    def _routed(self, record: Record, row: dict, schema: dict | None, side: str | None) -> Record:
        """route.by.field: the topic from a string column (Struct.getString: the column must exist
        and be a string; a null or blank value leaves the topic as it is)."""
        name = self.route_by_field
        if side is not None and schema is not None:
            schema = self._row_schema(schema, side)
        if name not in row:
            raise TransformError(f"{self.label}: route_by_field {name!r} is not a column of the rows of topic "
                                 f"{record.topic!r}")
        field_schema = next((f for f in schema["fields"] if f["field"] == name), None) if schema else None
        topic = row[name]
        if (field_schema is not None and field_schema["type"] != "string") or (
                topic is not None and not isinstance(topic, str)):
            raise TransformError(f"{self.label}: route_by_field {name!r} is not a string column (topic "
                                 f"{record.topic!r}): Debezium fails on it too")
        if topic is None or all(char <= " " for char in topic):
            return record
        return record.replaced(topic=topic)


def _field_schema(struct: dict, name: str) -> dict:
    return next(field for field in struct["fields"] if field["field"] == name)


def _header_bytes(schema: dict, value: Any, schemas: bool) -> bytes:
    """A header's value as Kafka Connect's JsonConverter writes it (Debezium Server's header format)."""
    return orjson.dumps({"schema": schema, "payload": value} if schemas else value)


class RegexRouter(Transform):
    def __init__(self, settings: RegexRouterSettings, label: str) -> None:
        self.label = label
        self.regex = compile_java(settings.regex)
        self.replacement = check_replacement(self.regex, settings.replacement)
        self._topics: dict[str, str] = {}

    def route(self, topic: str) -> str:
        routed = self._topics.get(topic)
        if routed is None:
            routed = replace_first_if_matches(self.regex, self.replacement, topic)
            routed = self._topics[topic] = topic if routed is None else routed
        return routed

    def apply(self, record: Record) -> Record:
        topic = self.route(record.topic)
        return record if topic == record.topic else record.replaced(topic=topic)


class LogicalTableRouter(Transform):
    def __init__(self, settings: LogicalTableRouterSettings, label: str) -> None:
        self.label = label
        self.regex = compile_java(settings.topic_regex)
        self.replacement = check_replacement(self.regex, settings.topic_replacement)
        self.unique = settings.key_enforce_uniqueness
        self.key_field = settings.key_field_name
        self.key_regex = None
        if (settings.key_field_regex or "").strip():
            self.key_regex = compile_java(settings.key_field_regex)
            self.key_replacement = check_replacement(self.key_regex, settings.key_field_replacement)
        self._derived = _Derived()

    def _new_topic(self, topic: str) -> str | None:
        routed = replace_first_if_matches(self.regex, self.replacement, topic)
        return routed or None  # an empty name: the record as it is (Debezium logs a warning)

    def route(self, topic: str) -> str:
        return self._new_topic(topic) or topic

    def apply(self, record: Record) -> Record:
        old_topic = record.topic
        topic = self._new_topic(old_topic)
        if topic is None:
            return record
        changes: dict[str, Any] = {"topic": topic}
        if record.key is not None:
            key = dict(record.key)
            if self.unique:
                if self.key_field in key:
                    raise TransformError(f"{self.label}: the key of topic {old_topic!r} has a field {self.key_field!r} "
                                         "already (Kafka Connect: field name duplication); change key_field_name")
                identifier = None
                if self.key_regex is not None:
                    identifier = replace_first_if_matches(self.key_regex, self.key_replacement, old_topic)
                key[self.key_field] = old_topic if identifier is None else identifier
            changes["key"] = key
            if record.key_schema is not None:
                changes["key_schema"] = self._derived.get(record.key_schema, ("key", topic),
                                                          lambda: self._key_schema(record.key_schema, topic))
        if record.value is not None and record.envelope and record.value_schema is not None:
            changes["value_schema"] = self._derived.get(record.value_schema, ("envelope", topic),
                                                        lambda: _renamed_envelope(record.value_schema, topic))
        return record.replaced(**changes)

    def _key_schema(self, schema: dict, topic: str) -> dict:
        fields = list(schema["fields"])
        if self.unique:
            fields.append({"type": "string", "optional": False, "field": self.key_field})
        return {**schema, "fields": fields, "name": f"{topic}.Key"}


def _renamed_envelope(schema: dict, topic: str) -> dict:
    """ByLogicalTableRouter's envelope schema: `<topic>.Envelope`, its rows `<topic>.Value`."""
    row = {**_bare(_field_schema(schema, "before")), "name": f"{topic}.Value"}
    fields = [{**row, "field": field["field"]} if field["field"] in ("before", "after") else field
              for field in schema["fields"]]
    return {**schema, "fields": fields, "name": f"{topic}.Envelope"}


class TransformChain:
    """The configured transforms, in order."""

    def __init__(self, settings: list, header_schemas: bool, routers_only: bool = False) -> None:
        self.transforms: list[Transform] = []
        for index, item in enumerate(settings):
            label = f"sink.kafka.transforms[{index}]" + (f" ({item.name})" if item.name else "")
            if isinstance(item, UnwrapSettings):
                if not routers_only:
                    self.transforms.append(Unwrap(item, header_schemas, label))
            elif isinstance(item, RegexRouterSettings):
                self.transforms.append(RegexRouter(item, label))
            else:
                self.transforms.append(LogicalTableRouter(item, label))

    def apply(self, record: Record) -> Record | None:
        for transform in self.transforms:
            record = transform.apply(record)
            if record is None:
                return None
        return record

    def route(self, topic: str) -> str:
        for transform in self.transforms:
            topic = transform.route(topic)
        return topic


def static_route(settings: list, topic: str) -> str:
    """Where the records of `topic` go as far as the topic alone decides it (the routers), for
    naming and creating topics before any record is written (`dblog check`, the sink's start)."""
    return TransformChain(settings, header_schemas=False, routers_only=True).route(topic) if settings else topic
