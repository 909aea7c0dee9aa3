"""sink.kafka.transforms without servers: each transform's edge cases, record by record, as
Debezium 3.6's ExtractNewRecordState / ByLogicalTableRouter and Kafka's RegexRouter treat them
(test_connect_differential.py runs Debezium in Kafka Connect beside dblog)."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from dblog.sinks.kafka import connect_schema
from dblog.sinks.kafka.java_regex import JavaRegexError, check_replacement, compile_java, replace_first_if_matches
from dblog.sinks.kafka.settings import KafkaSinkSettings
from dblog.sinks.kafka.transforms import Record, TransformChain

TOPIC = "shop.inv.orders"
ROW_FIELDS = [connect_schema.field("id", {"type": "int32"}, False),
              connect_schema.field("name", {"type": "string"}, True)]
ENVELOPE = connect_schema.envelope_schema(TOPIC, ROW_FIELDS)
KEY = connect_schema.key_schema(TOPIC, [connect_schema.field("id", {"type": "int32"}, False)])


def _source(**fields) -> dict:
    source = {field["field"]: None for field in connect_schema.SOURCE_FIELDS}
    return {**source, "db": "inv", "table": "orders", "ts_ms": 1000, "snapshot": "false", **fields}


def _envelope(op: str, before: dict | None, after: dict | None) -> dict:
    return {"before": before, "after": after, "source": _source(), "transaction": None, "op": op,
            "ts_ms": 7, "ts_us": 7000, "ts_ns": 7000000}


def _chain(*transforms, schemas: bool = True) -> TransformChain:
    return TransformChain(KafkaSinkSettings(schemas=schemas, transforms=list(transforms)).transforms, schemas)


def _record(value: dict | None, schemas: bool = True, key: dict | None = None, headers=()) -> Record:
    key = {"id": 1} if key is None else key
    return Record(TOPIC, key, KEY if schemas else None, value, ENVELOPE if schemas and value else None,
                  list(headers), value is not None, tombstone=value is None)


CREATE = _envelope("c", None, {"id": 1, "name": "a"})
DELETE = _envelope("d", {"id": 1, "name": "a"}, None)
TRUNCATE = _envelope("t", None, None)


def test_unwrap_defaults_the_row_deletes_as_null_payloads_tombstones_and_truncates_dropped():
    chain = _chain({"type": "unwrap"})
    created = chain.apply(_record(CREATE))
    assert created.value == {"id": 1, "name": "a"} and not created.envelope
    # `after`'s schema rebuilt by add.fields even with none to add: copySchemaBasics, not optional
    assert created.value_schema == {"type": "struct", "fields": ROW_FIELDS, "optional": False,
                                    "name": f"{TOPIC}.Value"}
    assert created.key_schema is KEY and created.topic == TOPIC
    deleted = chain.apply(_record(DELETE))  # `after`'s null with its schema (optional): {"schema", "payload": null}
    assert deleted.value is None and not deleted.tombstone
    assert deleted.value_schema == {"type": "struct", "fields": ROW_FIELDS, "optional": True, "name": f"{TOPIC}.Value"}
    assert chain.apply(_record(None)) is None  # Debezium's tombstone
    assert chain.apply(_record(TRUNCATE, key={})) is None


@pytest.mark.parametrize("mode, tombstone_kept, delete", [
    ("drop", False, None),
    ("tombstone", False, "null payload"),
    ("rewrite", False, "rewritten"),
    ("rewrite-with-tombstone", True, "rewritten"),
    ("delete-to-tombstone", False, "tombstone"),
])
def test_delete_tombstone_handling_modes(mode, tombstone_kept, delete):
    chain = _chain({"type": "unwrap", "delete_tombstone_handling_mode": mode})
    assert (chain.apply(_record(None)) is not None) == tombstone_kept
    out = chain.apply(_record(DELETE))
    kind = (None if out is None else "tombstone" if out.tombstone else "null payload" if out.value is None
            else "rewritten")
    assert kind == delete
    if kind == "rewritten":
        assert out.value == {"id": 1, "name": "a", "__deleted": "true"}
        # InsertField: copySchemaBasics (not optional), the field an optional string at the end
        assert out.value_schema == {"type": "struct", "optional": False, "name": f"{TOPIC}.Value",
                                    "fields": [*ROW_FIELDS, {"type": "string", "optional": True, "field": "__deleted"}]}
    created = chain.apply(_record(CREATE)).value
    assert created.get("__deleted") == ("false" if mode.startswith("rewrite") else None)


@pytest.mark.parametrize("drop_tombstones, deletes, tombstone_kept, delete", [
    (None, None, False, None),  # Debezium 2.x's defaults: drop.tombstones=true, delete.handling.mode=drop
    (False, "drop", True, None),  # not expressible with delete.tombstone.handling.mode
    (True, "none", False, "null payload"),
    (False, "none", True, "null payload"),
    (False, "rewrite", True, "rewritten"),
])
def test_debezium_2_delete_handling(drop_tombstones, deletes, tombstone_kept, delete):
    settings = {"type": "unwrap", "drop_tombstones": drop_tombstones, "delete_handling_mode": deletes}
    if drop_tombstones is None and deletes is None:
        settings["delete_handling_mode"] = "drop"
    chain = _chain(settings)
    assert (chain.apply(_record(None)) is not None) == tombstone_kept
    out = chain.apply(_record(DELETE))
    assert (None if out is None else "null payload" if out.value is None else "rewritten") == delete


def test_the_new_mode_and_the_old_keys_do_not_go_together():
    with pytest.raises(ValidationError, match="delete_tombstone_handling_mode replaces Debezium 2.x's drop_tombstones"):
        KafkaSinkSettings(transforms=[{"type": "unwrap", "delete_tombstone_handling_mode": "drop",
                                       "drop_tombstones": False}])


def test_add_fields_names_values_and_schemas():
    chain = _chain({"type": "unwrap", "add_fields": "op,table,source.ts_ms,ts_ms,id,snapshot:snap,bogus",
                    "add_fields_prefix": "__"})
    out = chain.apply(_record(CREATE))
    assert out.value == {"id": 1, "name": "a", "__op": "c", "__table": "orders", "__source_ts_ms": 1000,
                         "__ts_ms": 7, "__id": None, "__snap": None}  # bogus: not a field, nothing added
    # source.snapshot outside a snapshot: unset in Debezium's Struct (the converter writes its default, "false")
    snapshot_row = _envelope("r", None, {"id": 1, "name": "a"})
    snapshot_row["source"]["snapshot"] = "incremental"
    assert chain.apply(_record(snapshot_row)).value["__snap"] == "incremental"
    added = {field["field"]: field for field in out.value_schema["fields"][2:]}
    assert added["__op"] == {"type": "string", "optional": True, "field": "__op"}
    assert added["__source_ts_ms"] == {"type": "int64", "optional": True, "field": "__source_ts_ms"}
    assert added["__id"] == {"type": "string", "optional": True, "field": "__id"}  # transaction.id
    assert added["__snap"]["name"] == "io.debezium.data.Enum" and "default" not in added["__snap"]
    assert out.value_schema["optional"] is False
    # a delete rewritten gets them too; a delete as a null payload does not
    rewritten = _chain({"type": "unwrap", "delete_tombstone_handling_mode": "rewrite", "add_fields": ["op"]})
    assert rewritten.apply(_record(DELETE)).value == {"id": 1, "name": "a", "__deleted": "true", "__op": "d"}
    assert _chain({"type": "unwrap", "add_fields": ["op"]}).apply(_record(DELETE)).value is None


def test_add_fields_refuses_a_struct_and_a_name_taken():
    with pytest.raises(ValidationError, match="'source' is a struct"):
        KafkaSinkSettings(transforms=[{"type": "unwrap", "add_fields": "source"}])
    with pytest.raises(ValidationError, match="not of 'after'"):
        KafkaSinkSettings(transforms=[{"type": "unwrap", "add_fields": "after.id"}])
    with pytest.raises(ValidationError, match="one ':NEW_NAME' at most"):
        KafkaSinkSettings(transforms=[{"type": "unwrap", "add_fields": "op:a:b"}])
    from dblog.sinks.kafka.transforms import TransformError
    with pytest.raises(TransformError, match="field name duplication"):  # "na" + "me": the column `name`
        _chain({"type": "unwrap", "add_fields": "db:me", "add_fields_prefix": "na"}).apply(_record(CREATE))


def test_add_headers_json_converter_values_and_the_tombstones_op():
    chain = _chain({"type": "unwrap", "delete_tombstone_handling_mode": "rewrite-with-tombstone",
                    "add_headers": "op,db,source.ts_ms", "add_headers_prefix": "h_"})
    out = chain.apply(_record(CREATE, headers=[("__debezium.oldkey", b"{}")]))
    assert [(name, orjson.loads(value)) for name, value in out.headers] == [
        ("__debezium.oldkey", {}),
        ("h_op", {"schema": {"type": "string", "optional": True}, "payload": "c"}),
        ("h_db", {"schema": {"type": "string", "optional": True}, "payload": "inv"}),
        ("h_source_ts_ms", {"schema": {"type": "int64", "optional": True}, "payload": 1000}),
    ]
    tombstone = chain.apply(_record(None))  # kept, with `op` = "d" only (a required string)
    assert [(name, orjson.loads(value)) for name, value in tombstone.headers] == [
        ("h_op", {"schema": {"type": "string", "optional": False}, "payload": "d"})]
    plain = _chain({"type": "unwrap", "add_headers": "op"}, schemas=False).apply(_record(CREATE, schemas=False))
    assert plain.headers == [("__op", b'"c"')] and plain.value_schema is None


def test_route_by_field():
    chain = _chain({"type": "unwrap", "route_by_field": "name", "delete_tombstone_handling_mode": "delete-to-tombstone"})
    assert chain.apply(_record(CREATE)).topic == "a"
    assert chain.apply(_record(DELETE)).topic == "a"  # the deleted row's value, the record a tombstone
    blank = _envelope("c", None, {"id": 1, "name": "  "})
    assert chain.apply(_record(blank)).topic == TOPIC  # null or blank: the topic as it was
    assert chain.apply(_record(None)) is None
    from dblog.sinks.kafka.transforms import TransformError
    with pytest.raises(TransformError, match="not a string column"):
        _chain({"type": "unwrap", "route_by_field": "id"}).apply(_record(CREATE))
    with pytest.raises(TransformError, match="not a column"):
        _chain({"type": "unwrap", "route_by_field": "nope"}).apply(_record(CREATE))


def test_unwrap_leaves_other_records_alone():
    change = Record("shop", {"databaseName": "inv"}, connect_schema.SCHEMA_CHANGE_KEY, {"ddl": "x"},
                    connect_schema.SCHEMA_CHANGE_VALUE, [], envelope=False)
    assert _chain({"type": "unwrap", "add_fields": "op"}).apply(change) is change


def test_regex_router_full_match_and_first_replacement():
    chain = _chain({"type": "regex_router", "regex": r"shop\.(.*)\.(.*)", "replacement": "$2-$1"})
    assert chain.apply(_record(CREATE)).topic == "orders-inv"
    assert chain.apply(_record(None)).topic == "orders-inv"  # tombstones too
    assert _chain({"type": "regex_router", "regex": "inv", "replacement": "x"}).apply(_record(CREATE)).topic == TOPIC


def test_java_matcher_semantics():
    regex = compile_java("a|ab")  # matches() takes "ab", replaceFirst() the first found: "a"
    assert replace_first_if_matches(regex, check_replacement(regex, "X"), "ab") == "Xb"
    regex = compile_java(r"(?<db>\w+)\.(\w+)")
    assert replace_first_if_matches(regex, check_replacement(regex, r"${db}_$2\$$10"), "a.b") == "a_b$a0"
    regex = compile_java(r"(a)?(b)")
    assert replace_first_if_matches(regex, check_replacement(regex, "[$1]"), "b") == "[]"  # no match: nothing
    assert replace_first_if_matches(compile_java(r"\Q.*\E"), ["x"], ".*") == "x"
    for bad in ("$3", "$", "\\", "${nope}", "$x"):
        with pytest.raises(JavaRegexError):
            check_replacement(compile_java("(a)(b)"), bad)
    with pytest.raises(JavaRegexError, match=r"\\p"):
        compile_java(r"\p{Alpha}+")


def test_logical_table_router_key_and_schema_names():
    chain = _chain({"type": "logical_table_router", "topic_regex": r"(.*)\.(.*)\.orders", "topic_replacement": "$1.all"})
    out = chain.apply(_record(CREATE))
    assert out.topic == "shop.all"
    assert out.key == {"id": 1, "__dbz__physicalTableIdentifier": TOPIC}
    assert out.key_schema == {"type": "struct", "optional": False, "name": "shop.all.Key", "fields": [
        *KEY["fields"], {"type": "string", "optional": False, "field": "__dbz__physicalTableIdentifier"}]}
    assert out.value == CREATE and out.value_schema["name"] == "shop.all.Envelope"
    assert out.value_schema["version"] == 2
    rows = [field for field in out.value_schema["fields"] if field["field"] in ("before", "after")]
    assert all(field["name"] == "shop.all.Value" and field["optional"] for field in rows)
    tombstone = chain.apply(_record(None))
    assert tombstone.topic == "shop.all" and tombstone.value is None and tombstone.key["id"] == 1
    keyless = chain.apply(Record(TOPIC, None, None, TRUNCATE, ENVELOPE, [], True))
    assert keyless.key is None and keyless.topic == "shop.all"
    custom = _chain({"type": "logical_table_router", "topic_regex": r"(.*)\.(.*)\.orders", "topic_replacement": "$1.all",
                     "key_field_name": "shard", "key_field_regex": r".*\.(.*)\..*", "key_field_replacement": "$1"})
    assert custom.apply(_record(CREATE)).key == {"id": 1, "shard": "inv"}
    plain = _chain({"type": "logical_table_router", "topic_regex": ".*", "topic_replacement": "t",
                    "key_enforce_uniqueness": False}).apply(_record(CREATE))
    assert plain.key == {"id": 1} and plain.key_schema["name"] == "t.Key" and plain.key_schema["fields"] == KEY["fields"]
    with pytest.raises(ValidationError, match="key_field_replacement must be non-empty"):
        KafkaSinkSettings(transforms=[{"type": "logical_table_router", "topic_regex": "a", "topic_replacement": "b",
                                       "key_field_regex": "x"}])


def test_after_unwrap_the_router_renames_the_key_only():
    chain = _chain({"type": "unwrap"}, {"type": "logical_table_router", "topic_regex": ".*", "topic_replacement": "t"})
    out = chain.apply(_record(CREATE))
    assert out.key_schema["name"] == "t.Key" and out.value_schema["name"] == f"{TOPIC}.Value"


def test_types_by_class_name_and_unknown_ones_refused():
    settings = KafkaSinkSettings(transforms=[
        {"type": "io.debezium.transforms.ExtractNewRecordState"},
        {"type": "org.apache.kafka.connect.transforms.RegexRouter", "regex": "a", "replacement": "b"},
        {"type": "io.debezium.transforms.ByLogicalTableRouter", "topic_regex": "a", "topic_replacement": "b"}])
    assert [item.type for item in settings.transforms] == ["unwrap", "regex_router", "logical_table_router"]
    with pytest.raises(ValidationError, match="'org.apache.kafka.connect.transforms.Filter' is not one dblog applies"):
        KafkaSinkSettings(transforms=[{"type": "org.apache.kafka.connect.transforms.Filter"}])
    with pytest.raises(ValidationError, match="has no type"):
        KafkaSinkSettings(transforms=[{"regex": "a"}])
    with pytest.raises(ValidationError, match="predicate: Kafka Connect predicates .* are not implemented"):
        KafkaSinkSettings(transforms=[{"type": "unwrap", "predicate": "p"}])


def test_routed_topics_are_checked():
    settings = KafkaSinkSettings(transforms=[{"type": "regex_router", "regex": "(.*)", "replacement": "$1/x"}])
    from dblog.sinks.kafka.settings import TopicNameError
    with pytest.raises(TopicNameError, match="routed by sink.kafka.transforms"):
        settings.routed_topic("a.b.c")
    assert KafkaSinkSettings().routed_topic("a.b.c") == "a.b.c"


def test_a_kept_tombstone_carries_its_deletes_headers_as_in_debezium():
    """Debezium's delete and its tombstone share one Headers object, which unwrap adds to; a router
    before unwrap copies the headers (newRecord), so the tombstone then has its own only."""
    unwrap = {"type": "unwrap", "delete_tombstone_handling_mode": "rewrite-with-tombstone", "add_headers": "op"}
    chain = _chain(unwrap)
    delete, tombstone = _record(DELETE), _record(None)
    tombstone.headers = delete.headers  # as the sink passes them
    chain.apply(delete)
    kept = chain.apply(tombstone)
    assert [(name, orjson.loads(value)["schema"]["optional"], orjson.loads(value)["payload"])
            for name, value in kept.headers] == [("__op", True, "d"), ("__op", False, "d")]
    routed = _chain({"type": "regex_router", "regex": ".*", "replacement": "t"}, unwrap)
    delete, tombstone = _record(DELETE), _record(None)
    tombstone.headers = delete.headers
    routed.apply(delete)
    assert [name for name, _ in routed.apply(tombstone).headers] == ["__op"]


def test_a_bad_transform_in_the_configuration_names_the_key():
    from dblog.runtime.config import ConfigError, parse_config

    data = {"kafka": {"bootstrap_servers": "k:9092"},
            "sink": {"type": "kafka", "kafka": {"transforms": [{"type": "regex_router", "regex": "a", "replacement": "$1"}]}}}
    with pytest.raises(ConfigError, match=r"sink.kafka.transforms.0.regex_router: regex / replacement: '\$1': no group 1"):
        parse_config(data)
    data["sink"]["kafka"]["transforms"] = [{"type": "unwrap", "add_field": "op"}]
    with pytest.raises(ConfigError, match=r"sink.kafka.transforms.0.unwrap.add_field: Extra inputs are not permitted"):
        parse_config(data)
