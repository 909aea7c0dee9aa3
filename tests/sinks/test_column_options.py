"""Debezium's column options (dblog.sinks.column_options), rule by rule: the filters, the masks,
the hashes (against digests Java 17's MessageDigest and ObjectOutputStream computed), truncation
by UTF-16 code units and by bytes, Debezium's column lengths, which mapper wins, and the message
key. The records as Debezium writes them are checked against Debezium itself in
tests/sinks/kafka/test_connect_differential.py."""

from __future__ import annotations

import base64
import re

import pytest
from pydantic import ValidationError

from dblog.core.events import RowChange, TableId
from dblog.mysql.schema import Column, TableSchema
from dblog.runtime.config import ConfigError, parse_config
from dblog.sinks.column_options import (
    ColumnSettings,
    MessageKeyRule,
    TableColumns,
    debezium_length,
    java_serialized_string,
    output_change,
    truncate_text,
)

T = TableId("shop", "people")


def _column(name, data_type, column_type=None, **kw) -> Column:
    return Column(name, data_type, column_type or data_type, **kw)


SCHEMA = TableSchema(T, [
    _column("id", "int", "int(11)", nullable=False),
    _column("email", "varchar", "varchar(100)", char_length=100),
    _column("code", "char", "char(10)", char_length=10),
    _column("bio", "text", "text"),
    _column("photo", "varbinary", "varbinary(20)"),
    _column("size", "enum", "enum('s','m','l')", enum_values=("s", "m", "l")),
    _column("born", "date", "date"),
], ("id",))


def _table(message_key=None, **settings) -> TableColumns:
    return TableColumns(SCHEMA, ColumnSettings(**settings), [MessageKeyRule(**rule) for rule in message_key or []])


ROW = {"id": 1, "email": "ann@example.com", "code": "AB12", "bio": "héllo 😀 wörld", "photo": "AAEC",
       "size": "m", "born": "2000-01-01"}


def test_exclude_drops_the_columns_from_the_rows_but_not_from_the_key():
    table = _table(exclude=[r"shop\.people\.(ID|email)"])  # case-insensitive, whole name
    assert [c.name for c in table.columns] == ["code", "bio", "photo", "size", "born"]
    assert table.keep(ROW) == {k: v for k, v in ROW.items() if k not in ("id", "email")}
    assert table.key(ROW) == {"id": 1}
    change = output_change(RowChange(T, "u", (1,), ROW, {**ROW, "email": "b@x"}), table)
    assert change.key == (1,) and change.before_key is None and "email" not in change.after


def test_include_keeps_only_the_matching_columns_and_a_partial_match_is_no_match():
    table = _table(include=[r"shop\.people\.(id|code)", r"people\.bio"])  # the second never matches whole
    assert [c.name for c in table.columns] == ["id", "code"]


def test_include_and_exclude_together_are_refused():
    with pytest.raises(ValidationError, match="keep one"):
        ColumnSettings(include=["a"], exclude=["b"])
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        ColumnSettings(exclude=["shop.(people"])


def test_mask_writes_asterisks_in_string_columns_and_for_null_too():
    table = _table(mask=[{"columns": [r".*\.(email|code|size|born|id)"], "chars": 5}])
    assert table.map(ROW) == {**ROW, "email": "*****", "code": "*****", "size": "*****"}
    assert table.map({**ROW, "email": None})["email"] == "*****"  # Debezium's MaskingValueConverter
    # every matched column says masked in its schema, string or not (Debezium's alterFieldSchema)
    assert {name: table.parameters(name) for name in ("email", "born", "id", "bio")} == {
        "email": {"masked": "true"}, "born": {"masked": "true"}, "id": {"masked": "true"}, "bio": None}


# Java 17: MessageDigest.getInstance(ALG), update("s4lt.é".getBytes()) (UTF-8), digest(v1: the
# ObjectOutputStream bytes of the String; v2: its getBytes()).
JAVA_DIGESTS = {
    ("SHA-256", "hello"): ("547da1257b2c249899239accd0335109a231f0ebd8a030cc50ec5590a2207210",
                           "737a0b71f868f599fd94b29adb9996a18ce6a3921bd4b836aa1670cb3f2a9cc4"),
    ("SHA-256", ""): ("0eb60e2365e23c49a612f3a968a05fd24779cbd0531485f6ed9858c571584e16",
                      "50d87e2e67545b79674c51ed869e72322469c5a192ec48b0fdd9f43bae3cd04c"),
    ("SHA-256", "héllo 😀 wörld"): ("cd9de610f775bb5f426471b3965399d0b6b14b3d6abadd9b8cae89a422c93e6f",
                                   "407d40169aebaa309edbead75a8b979ea4519b9d8038c7675f49af8fc7276257"),
    ("SHA-256", "a\0b"): ("5d931e3592853b135783f5fa4d81666b44d089cce26fc87a3678cbd620bbd565",
                          "aedd7b1f41b440634bba9af02f665f1f1738688781a3c3195cb5686222037b82"),
    ("SHA-256", "x" * 70000): ("dbc4c4adb04f28785b9647566d710a21b2aedab4319e0117484e87936160dfcd",
                               "ca05cc6d799b51a347521fe938d35a190aeb2e6afe7c67a3ac741bd10d9b3329"),
    ("md5", "héllo 😀 wörld"): ("d0bec21e06317ce088112ea6b98b8414", "b120b23089752d3ba7e6debd406b88f1"),
    ("SHA3-256", "a\0b"): ("61070b97829a270a50128dffe2969c32f0c13d0d0f9103e41683d3427f24a3db",
                           "eb13a621aff768aa41f60b2094375d54d6a13d888c967c9fcf1f9099dcedf660"),
    ("SHA-512/256", "hello"): ("b7ddcda4be472c1e33ee3b5370f68a83d6ab316d2c2d8de5405cd36a0b6bbffd",
                               "2bed396c41b9a6a99863e6f4c57bd49cf6d6ffbb1646021c57a0933dea925b19"),
}


@pytest.mark.parametrize("algorithm, value", list(JAVA_DIGESTS))
@pytest.mark.parametrize("version", [1, 2])
def test_hash_is_javas_digest_of_the_salt_and_the_value(algorithm, value, version):
    table = _table(hash=[{"columns": [r".*\.bio"], "algorithm": algorithm, "salt": "s4lt.é", "version": version}])
    assert table.map({"bio": value})["bio"] == JAVA_DIGESTS[(algorithm, value)][version - 1]


def test_java_serialization_of_a_string():
    assert java_serialized_string("héllo 😀").hex() == "aced000574000d68c3a96c6c6f20eda0bdedb880"


def test_hash_is_cut_to_the_column_length_and_leaves_null_and_non_strings_alone():
    table = _table(hash=[{"columns": [r".*"], "algorithm": "SHA-256", "salt": "s4lt.é"}])
    mapped = table.map({**ROW, "code": "hello", "email": "hello", "bio": None})
    assert mapped["code"] == JAVA_DIGESTS[("SHA-256", "hello")][0][:10]  # CHAR(10)
    assert mapped["email"] == JAVA_DIGESTS[("SHA-256", "hello")][0]  # 64 < VARCHAR(100)
    assert mapped["bio"] is None and mapped["photo"] == "AAEC" and mapped["born"] == "2000-01-01"
    assert mapped["size"] == mapped["size"][:1]  # ENUM: Debezium's length 1


def test_unknown_hash_algorithm_is_refused_naming_javas_names():
    with pytest.raises(ValidationError, match="MessageDigest names"):
        ColumnSettings(hash=[{"columns": ["x"], "algorithm": "MD2", "salt": "s"}])


def test_truncate_cuts_text_by_utf16_units_and_bytes_by_bytes():
    table = _table(truncate=[{"columns": [r".*\.(bio|photo|email|code|born)"], "chars": 7}])
    mapped = table.map({**ROW, "photo": base64.b64encode(bytes(range(20))).decode()})
    assert mapped["bio"] == "héllo "  # 😀 is two UTF-16 units: it would be split, so it goes whole
    assert base64.b64decode(mapped["photo"]) == bytes(range(7))
    assert mapped["email"] == "ann@exa" and mapped["code"] == "AB12"  # CHAR(10) > 7: cut if longer
    assert mapped["born"] == "2000-01-01"  # a date in the normal form is not cut
    assert table.parameters("bio") == {"truncateLength": "7"}
    assert truncate_text("a😀b", 3) == "a😀" and truncate_text("a😀b", 2) == "a" and truncate_text("ab", 9) == "ab"


def test_truncate_longer_than_the_column_leaves_it_and_its_schema_alone():
    table = _table(truncate=[{"columns": [r".*\.code"], "chars": 10}], mask=[{"columns": [r".*\.code"], "chars": 3}])
    assert table.parameters("code") is None and table.map(ROW)["code"] == "AB12"  # the truncation won, doing nothing


def test_first_rule_wins_truncations_then_masks_then_hashes():
    table = _table(hash=[{"columns": [r".*\.email"], "algorithm": "MD5", "salt": "s"}],
                   mask=[{"columns": [r".*\.email"], "chars": 2}],
                   truncate=[{"columns": [r".*\.email"], "chars": 3}, {"columns": [r".*\.email"], "chars": 5}])
    assert table.map(ROW)["email"] == "ann" and table.parameters("email") == {"truncateLength": "3"}
    table = _table(hash=[{"columns": [r".*\.email"], "algorithm": "MD5", "salt": "s", "version": 2},
                         {"columns": [r".*\.email"], "algorithm": "MD5", "salt": "s"}],
                   mask=[{"columns": [r".*\.code"], "chars": 2}])
    v1 = TableColumns(SCHEMA, ColumnSettings(hash=[{"columns": [r".*\.email"], "algorithm": "MD5", "salt": "s"}]))
    assert table.map(ROW)["email"] == v1.map(ROW)["email"]  # hash (v1) before hash.v2


@pytest.mark.parametrize("column_type, data_type, expected", [
    ("varchar(100)", "varchar", 100), ("char(10)", "char", 10), ("text", "text", -1), ("int(11)", "int", 11),
    ("int(10) unsigned", "int", 10), ("decimal(10,2)", "decimal", 10), ("datetime(3)", "datetime", 3),
    ("datetime", "datetime", -1), ("bit(1)", "bit", 1), ("longtext", "longtext", -1), ("char(0)", "char", 10),
    ("double", "double", -1), ("timestamp(6)", "timestamp", 6), ("tinyint(1)", "tinyint", 1),
])
def test_debezium_length_reads_the_column_type_as_its_ddl_parser(column_type, data_type, expected):
    assert debezium_length(_column("c", data_type, column_type)) == expected


def test_debezium_length_of_enum_and_set():
    assert debezium_length(_column("e", "enum", "enum('a','b')", enum_values=("a", "b"))) == 1
    assert debezium_length(_column("s", "set", "set('a','b','c')", enum_values=("a", "b", "c"))) == 5


def test_message_key_columns_rule_by_rule_in_the_tables_order_else_the_primary_key():
    rules = [{"table": r"shop\.people", "columns": ["code", "e.*"]}, {"table": r"other\.t", "columns": ["x"]}]
    table = _table(message_key=rules)
    assert table.key_columns == ("code", "email")
    assert TableColumns(SCHEMA, None, [MessageKeyRule(table=r"shop\.nobody", columns=["id"])]).key_columns == ("id",)
    # Debezium trims the joined `table.column` regex: a space after `;` does not stop the match
    assert TableColumns(SCHEMA, None, [MessageKeyRule(table=r" shop\.people", columns=["code "])]).key_columns == ("code",)
    with pytest.raises(ValueError, match="twice"):
        _table(message_key=[{"table": r"shop\.people", "columns": ["code", "c.*"]}])


def test_a_change_of_the_message_key_is_a_key_change_and_of_the_primary_key_alone_is_not():
    table = _table(message_key=[{"table": r"shop\.people", "columns": ["email"]}])
    moved = output_change(RowChange(T, "u", (2,), ROW, {**ROW, "id": 2}, before_key=(1,)), table)
    assert moved.key == ("ann@example.com",) and moved.before_key is None
    renamed = output_change(RowChange(T, "u", (1,), ROW, {**ROW, "email": "b@x"}), table)
    assert renamed.key == ("b@x",) and renamed.before_key == ("ann@example.com",)
    deleted = output_change(RowChange(T, "d", (1,), ROW, None), table)
    assert deleted.key == ("ann@example.com",) and deleted.before_key is None


def test_iceberg_refuses_source_types_and_a_distributed_snapshot_and_message_key_is_kafkas_only():
    assert parse_config({"sink": {"type": "iceberg"}, "columns": {"exclude": ["a"]}}).columns.exclude == ["a"]
    with pytest.raises(ConfigError, match="propagate_source_type / propagate_data_types .* Iceberg"):
        parse_config({"sink": {"type": "iceberg"}, "columns": {"propagate_data_types": [".+\\.VARCHAR"]}})
    with pytest.raises(ConfigError, match=r"\[columns\] leaves out or masks columns, and snapshot.distributed"):
        parse_config({"sink": {"type": "iceberg"}, "snapshot": {"distributed": True},
                      "columns": {"mask": [{"columns": ["a"], "chars": 3}]}})
    with pytest.raises(ConfigError, match="message_key"):
        parse_config({"sink": {"kafka": {"message_key": [{"table": "a", "columns": ["b"]}]}}})
    config = parse_config({"columns": {"hash": [{"columns": ["a"], "algorithm": "SHA-256", "salt": "x", "version": 2}]}})
    assert config.columns.hash[0].version == 2


def test_debeziums_column_keys_convert_to_columns_and_message_key():
    from dblog.runtime.debezium_config import convert, validated
    from dblog.runtime.java_properties import parse_properties

    settings = {
        "column.exclude.list": r"shop\.people\.ssn, shop\.people\.card\,x",  # `\,` is a comma inside one regex
        "column.truncate.to.20.chars": r"shop\.people\.bio",
        "column.mask.with.0.chars": r"shop\.people\.phone",
        "column.mask.hash.SHA-256.with.salt.a.b:c": r"shop\.people\.email",
        "column.mask.hash.v2.sha3-512.with.salt.x": r"shop\.people\.name",
        "message.key.columns": r"shop.people:email, name; (.*)\.orders:customer_id ",
    }
    conversion = convert(settings, bootstrap_servers="k:9092")
    assert conversion.data["columns"] == {
        "exclude": [r"shop\.people\.ssn", r"shop\.people\.card,x"],
        "truncate": [{"columns": [r"shop\.people\.bio"], "chars": 20}],
        "mask": [{"columns": [r"shop\.people\.phone"], "chars": 0}],
        "hash": [{"columns": [r"shop\.people\.email"], "algorithm": "SHA-256", "salt": "a.b:c", "version": 1},
                 {"columns": [r"shop\.people\.name"], "algorithm": "sha3-512", "salt": "x", "version": 2}],
    }
    assert conversion.data["sink"]["kafka"]["message_key"] == [
        {"table": "shop.people", "columns": ["email", "name"]}, {"table": r"(.*)\.orders", "columns": ["customer_id"]}]
    config = validated(conversion, "test")
    assert config.columns.hash[1].version == 2 and config.sink.kafka.message_key[1].columns == ["customer_id"]
    server = convert(parse_properties("debezium.sink.type=kafka\ndebezium.sink.kafka.producer.bootstrap.servers=k:1\n"
                                      "debezium.source.column.include.list=shop\\\\.people\\\\..*\n"))
    assert server.data["columns"] == {"include": [r"shop\.people\..*"]}


@pytest.mark.parametrize("settings, refused", [
    ({"column.include.list": "a", "column.exclude.list": "b"}, '"column.include.list" is already specified'),
    ({"column.exclude.list": "shop.(people"}, "column.exclude.list: 'shop.(people' is not a valid regular expression"),
    ({"column.mask.with.3.chars": ""}, "names no columns"),
    ({"message.key.columns": ""}, "Must not be empty"),
    ({"message.key.columns": "a.b:c;d.e"}, "'d.e' has an invalid format"),
    ({"datatype.propagate.source.type": ".+(VARCHAR"}, "datatype.propagate.source.type: '.+(VARCHAR' is not a valid"),
])
def test_debeziums_column_keys_dblog_cannot_honour_are_refused(settings, refused):
    from dblog.runtime.debezium_config import convert

    with pytest.raises(ConfigError, match=re.escape(refused)):
        convert(settings, bootstrap_servers="k:9092")


def test_validation_errors_name_debeziums_column_key():
    from dblog.runtime.debezium_config import convert, validated

    conversion = convert({"column.exclude.list": "a"}, bootstrap_servers="k:9092")
    conversion.data["columns"]["include"] = ["b"]  # as if both came through
    with pytest.raises(ConfigError, match="include and exclude are both set"):
        validated(conversion, "test")


def test_the_kafka_sink_refuses_a_message_key_naming_a_column_twice_at_start(broker):
    from dblog.sinks.base import SinkError
    from dblog.sinks.kafka.settings import KafkaSinkSettings
    from dblog.sinks.kafka.sink import KafkaSink

    settings = KafkaSinkSettings(create_topics=False, message_key=[{"table": r"shop\.people", "columns": ["code", "c.*"]}])
    sink = KafkaSink(broker.bootstrap, settings, "twice", lambda table: SCHEMA)
    try:
        with pytest.raises(SinkError, match="names column 'code' of shop.people twice"):
            sink.check_routes([T])
    finally:
        sink.close()


def test_propagated_source_types_are_debeziums_schema_parameters():
    """As Debezium 3.6 writes them (checked against it: test_connect_differential.py):
    the type as its DDL parser names it, length and scale where the type has them, the column's
    name; columns by "db.table.column", data types by "db.table.TYPE"."""
    from dblog.core.events import TableId
    from dblog.mysql.schema import Column, TableSchema
    from dblog.sinks.column_options import ColumnSettings, TableColumns

    schema = TableSchema(TableId("shop", "t"), [
        Column("id", "int", "int(10) unsigned", unsigned=True), Column("amount", "decimal", "decimal(12,2)"),
        Column("e", "enum", "enum('a','b')", enum_values=("a", "b")), Column("txt", "text", "text"),
        Column("n", "int", "int(5) unsigned zerofill", unsigned=True)], ("id",))
    columns = TableColumns(schema, ColumnSettings(propagate_source_type=[r"shop\.t\.(amount|e|txt)"],
                                                  propagate_data_types=[r".+\.INT UNSIGNED ZEROFILL"]))
    assert columns.parameters("id") is None
    assert columns.parameters("amount") == {"__debezium.source.column.type": "DECIMAL",
                                            "__debezium.source.column.length": "12",
                                            "__debezium.source.column.scale": "2", "__debezium.source.column.name": "amount"}
    assert columns.parameters("e") == {"__debezium.source.column.type": "ENUM", "__debezium.source.column.length": "1",
                                       "__debezium.source.column.name": "e"}
    assert columns.parameters("txt") == {"__debezium.source.column.type": "TEXT", "__debezium.source.column.name": "txt"}
    assert columns.parameters("n")["__debezium.source.column.type"] == "INT UNSIGNED ZEROFILL"
    assert not columns.rewrites and columns.map({"id": 1, "amount": "1.00"}) == {"id": 1, "amount": "1.00"}


def test_a_column_with_a_mask_and_a_propagated_type_gets_one_rule_in_debeziums_order():
    """Debezium applies the first matching mapper: truncate, mask, the source type, then the
    hashes (so a hashed column whose type is propagated is written as it is, as Debezium 3.6 does)."""
    from dblog.core.events import TableId
    from dblog.mysql.schema import Column, TableSchema
    from dblog.sinks.column_options import ColumnSettings, HashRule, MaskRule, TableColumns

    schema = TableSchema(TableId("shop", "t"), [Column("id", "int", "int(11)"), Column(
        "email", "varchar", "varchar(40)", char_length=40), Column("nick", "varchar", "varchar(20)", char_length=20)],
        ("id",))
    settings = ColumnSettings(mask=[MaskRule(columns=[r"shop\.t\.nick"], chars=3)],
                              hash=[HashRule(columns=[r"shop\.t\.email"], algorithm="SHA-256", salt="s")],
                              propagate_data_types=[r".+\.VARCHAR"])
    columns = TableColumns(schema, settings)
    assert columns.parameters("nick") == {"masked": "true"}
    assert columns.parameters("email")["__debezium.source.column.type"] == "VARCHAR"
    assert columns.map({"id": 1, "email": "a@b", "nick": "x"}) == {"id": 1, "email": "a@b", "nick": "***"}
