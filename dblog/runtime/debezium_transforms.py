"""A Debezium connector's `transforms` (Kafka Connect's SMTs), turned into the Kafka sink's
`[[sink.kafka.transforms]]` (dblog.sinks.kafka.transforms): the ones dblog applies (ExtractNewRecordState,
RegexRouter, ByLogicalTableRouter) with their settings, every other transform and the predicates
refused by name with the reason. Debezium Server's `debezium.transforms*` reach here renamed
(`dblog.runtime.debezium_config`). docs/debezium.md has the table.
"""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from dblog.sinks.kafka.transforms import (
    DELETE_TOMBSTONE_MODES,
    LOGICAL_TABLE_ROUTER,
    REGEX_ROUTER,
    TRANSFORM_CLASSES,
    UNWRAP,
    TransformSettings,
)

_APPLIED = "dblog applies ExtractNewRecordState, RegexRouter and ByLogicalTableRouter only"
_NOT_APPLIED = {
    "io.debezium.transforms.outbox.EventRouter": "Debezium's outbox event router, which dblog does not apply",
    "io.debezium.transforms.Filter": "a Groovy or JavaScript expression per record, which dblog cannot evaluate",
    "io.debezium.transforms.ContentBasedRouter": "a Groovy or JavaScript expression per record, which dblog cannot "
                                                 "evaluate",
    "io.debezium.connector.mongodb.transforms.ExtractNewDocumentState": "MongoDB's; dblog reads MySQL and MariaDB",
    "io.debezium.transforms.ExtractNewDocumentState": "MongoDB's; dblog reads MySQL and MariaDB",
}
_PREDICATES = ("Kafka Connect predicates (a transform applied to some records only) are not implemented by dblog; "
               "remove them, and the transform's predicate / negate")

# Each transform's settings: Debezium's / Kafka's name -> dblog's ([[sink.kafka.transforms]])
_SETTINGS = {
    UNWRAP: {"delete.tombstone.handling.mode": "delete_tombstone_handling_mode", "drop.tombstones": "drop_tombstones",
             "delete.handling.mode": "delete_handling_mode", "add.fields": "add_fields",
             "add.fields.prefix": "add_fields_prefix", "add.headers": "add_headers",
             "add.headers.prefix": "add_headers_prefix", "route.by.field": "route_by_field"},
    REGEX_ROUTER: {"regex": "regex", "replacement": "replacement"},
    LOGICAL_TABLE_ROUTER: {"topic.regex": "topic_regex", "topic.replacement": "topic_replacement",
                           "key.enforce.uniqueness": "key_enforce_uniqueness", "key.field.name": "key_field_name",
                           "key.field.regex": "key_field_regex", "key.field.replacement": "key_field_replacement",
                           "schema.name.adjustment.mode": "schema_name_adjustment_mode"},
}
_REQUIRED = {REGEX_ROUTER: ("regex", "replacement"), LOGICAL_TABLE_ROUTER: ("topic.regex", "topic.replacement")}
_BOOLEANS = {"drop.tombstones", "key.enforce.uniqueness"}
_IGNORED = {
    "replace.null.with.default": "nulls are replaced by their column's default once, as the value converter's "
                                 "setting (sink.kafka.replace_null_with_default) says",
    "drop.fields.header.name": "the header is written by ExtractChangedRecordState, which dblog does not apply: "
                               "there is nothing to drop",
    "drop.fields.from.key": "goes with drop.fields.header.name",
    "drop.fields.keep.schema.compatible": "goes with drop.fields.header.name",
    "logical.table.cache.size": "a cache of ByLogicalTableRouter's",
}
_LEGACY = ("drop.tombstones", "delete.handling.mode")


def convert_transforms(pending: dict[str, str]) -> tuple[list[dict], list[str], list[str]]:
    """Takes the `transforms*` and `predicates*` keys out of `pending`: (the transforms as
    `[[sink.kafka.transforms]]`, notes, refusals "key: why")."""
    notes: list[str] = []
    refused: list[str] = []
    for key in sorted(key for key in pending if key == "predicates" or key.startswith("predicates.")):
        pending.pop(key)
        refused.append(f"{key}: {_PREDICATES}")
    listed = pending.pop("transforms", None)
    aliases = [alias.strip() for alias in (listed or "").split(",") if alias.strip()]
    transforms = []
    for alias in aliases:
        prefix = f"transforms.{alias}."
        params = {key[len(prefix):]: pending.pop(key).strip() for key in sorted(pending) if key.startswith(prefix)}
        converted = _transform(alias, params, notes, refused)
        if converted is not None:
            transforms.append(converted)
    for key in sorted(key for key in pending if key.startswith("transforms.")):
        pending.pop(key)
        notes.append(f"{key} ignored: its transform is not in `transforms` (Kafka Connect ignores it too)")
    if transforms:
        names = ", ".join(f"{item['name']} ({TRANSFORM_CLASSES[item['type']].rpartition('.')[2]})"
                          for item in transforms)
        notes.append(f"transforms: sink.kafka.transforms, applied by dblog's Kafka sink in this order: {names}")
    return transforms, notes, refused


def _transform(alias: str, params: dict[str, str], notes: list[str], refused: list[str]) -> dict | None:
    prefix = f"transforms.{alias}."
    kind = params.pop("type", None)
    for name in ("predicate", "negate"):
        if params.pop(name, None) is not None:
            refused.append(f"{prefix}{name}: {_PREDICATES}")
    if kind is None:
        refused.append(f"{prefix}type: missing (Kafka Connect needs it); dblog applies {UNWRAP}, {REGEX_ROUTER} and "
                       f"{LOGICAL_TABLE_ROUTER}")
        return None
    settings = _SETTINGS.get(kind)
    if settings is None:
        why = _NOT_APPLIED.get(kind, "not a transform dblog applies")
        refused.append(f"{prefix}type: {kind!r}: {why}; {_APPLIED}: remove it, and apply it where the records are "
                       "read (a Kafka Streams job, or the sink connector's transforms)")
        for name in params:
            refused.append(f"{prefix}{name}: goes with {prefix}type, refused")
        return None
    converted: dict = {"name": alias, "type": next(short for short, cls in TRANSFORM_CLASSES.items() if cls == kind)}
    for name in _REQUIRED.get(kind, ()):
        if name not in params:
            refused.append(f"{prefix}{name}: missing ({kind.rpartition('.')[2]} needs it)")
    if kind == UNWRAP and "delete.tombstone.handling.mode" in params:
        for name in _LEGACY:
            if params.pop(name, None) is not None:
                notes.append(f"{prefix}{name} ignored: delete.tombstone.handling.mode replaces it (Debezium 2.5+ "
                             "ignores it then; 3.x no longer reads it)")
    elif kind == UNWRAP and any(name in params for name in _LEGACY):
        given = " and ".join(f"{prefix}{name}" for name in _LEGACY if name in params)
        notes.append(f"{given}: Debezium 2.x's, applied as Debezium 2.x applies them. Debezium 3.x no longer reads "
                     "them (it writes delete.tombstone.handling.mode = tombstone's records, its default): to keep "
                     "those, replace them with delete.tombstone.handling.mode=tombstone")
    for name, value in params.items():
        key = f"{prefix}{name}"
        if name in settings:
            if name in _BOOLEANS:
                if value.lower() not in ("true", "false"):
                    refused.append(f"{key}: {value!r} is not true or false")
                    continue
                value = value.lower() == "true"
            elif name in ("add.fields", "add.headers"):
                value = [part.strip() for part in value.split(",") if part.strip()]
            elif name in ("delete.tombstone.handling.mode", "delete.handling.mode", "schema.name.adjustment.mode"):
                value = value.lower()
                allowed = {"delete.tombstone.handling.mode": DELETE_TOMBSTONE_MODES,
                           "delete.handling.mode": ("none", "drop", "rewrite"),
                           "schema.name.adjustment.mode": ("none",)}[name]
                if value not in allowed:
                    why = (": dblog writes JSON, whose schema names need no adjustment (Avro's do)"
                           if name == "schema.name.adjustment.mode" else "")
                    refused.append(f"{key}: {value!r}: use {' or '.join(allowed)}{why}")
                    continue
            converted[settings[name]] = value
        elif name in _IGNORED:
            notes.append(f"{key} ignored: {_IGNORED[name]}")
        else:
            notes.append(f"{key} ignored: not a setting of {kind} (Kafka Connect ignores it too)")
    if not any(line.startswith(prefix) for line in refused):
        _check(converted, prefix, settings, refused)
    return converted


def _check(converted: dict, prefix: str, settings: dict[str, str], refused: list[str]) -> None:
    """The transform's own checks (its regexes, replacements, add.fields), in Debezium's words."""
    try:
        TypeAdapter(TransformSettings).validate_python(converted)
    except ValidationError as error:
        names = {dblog: f"{prefix}{key}" for key, dblog in settings.items()}
        for item in error.errors():
            message = item["msg"].removeprefix("Value error, ")
            keys, colon, rest = message.partition(": ")
            named = [names.get(part.strip()) for part in keys.split("/")]
            if colon and all(named):  # "topic_regex / topic_replacement: why" -> Debezium's keys
                refused.append(f"{' / '.join(named)}: {rest}")
            else:
                refused.append(f"{prefix.rstrip('.')}: {message}")
