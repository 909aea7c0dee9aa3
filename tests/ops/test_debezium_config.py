"""From Debezium to dblog: Java .properties parsing, the key mapping, refusals by name, the
table filters against Debezium's semantics, `dblog convert-debezium` and `dblog run
--debezium-config` against the private MariaDB."""

import json
import re
import subprocess
import sys
import tomllib

import pytest
from support.harness import run_dblog_until

from dblog.core.events import TableId
from dblog.demo.workload import load
from dblog.runtime.config import ConfigError, load_config
from dblog.runtime.debezium_config import convert, load_debezium_config, read_connector_config, validated
from dblog.runtime.java_properties import PropertiesError, parse_properties

# --- the .properties format -------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("a=1\nb: 2\nc 3\n", {"a": "1", "b": "2", "c": "3"}),
    ("a = 1\n  b   :   2\nc\t\t3\n", {"a": "1", "b": "2", "c": "3"}),  # blanks around separators
    ("a==1\nb=:2\nc :=3\n", {"a": "=1", "b": ":2", "c": "=3"}),  # only the first separator separates
    ("a=1  \n", {"a": "1  "}),  # trailing blanks belong to the value
    ("a=\nb\n", {"a": "", "b": ""}),
    ("# comment\n! bang comment\n   # indented comment\n\n  \na=1\n", {"a": "1"}),
    ("a=1 # not a comment\n", {"a": "1 # not a comment"}),
    ("# a comment does not continue \\\na=1\n", {"a": "1"}),
    ("a=one \\\n    two \\\n\tthree\n", {"a": "one two three"}),  # continuation drops the next line's blanks
    ("a=x\\\n# part of the value\n", {"a": "x# part of the value"}),
    ("a=ends with a backslash\\\\\nb=2\n", {"a": "ends with a backslash\\", "b": "2"}),  # even count: no continuation
    ("a=odd\\\\\\\nb\n", {"a": "odd\\b"}),
    ("a=tab\\there\\nnewline\\rcr\\fff\n", {"a": "tab\there\nnewline\rcr\fff"}),
    ("a=\\u00e9t\\u00C9\n", {"a": "étÉ"}),
    ("a=\\uD83D\\uDE00\n", {"a": "😀"}),  # a surrogate pair is one character
    ("a=inventory\\.orders\n", {"a": "inventory.orders"}),  # Java drops a backslash before another character
    ("a=inventory\\\\.orders\n", {"a": "inventory\\.orders"}),
    ("key\\ with\\ blanks = v\nk\\=e\\:y=v2\n", {"key with blanks": "v", "k=e:y": "v2"}),
    ("\\#notcomment=1\n", {"#notcomment": "1"}),
    ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),  # \r\n, \r and \n all end lines
    ("a=1\na=2\n", {"a": "2"}),  # the last one wins
    ("a=last line without newline", {"a": "last line without newline"}),
    ("a=continued at the end \\", {"a": "continued at the end "}),
])
def test_properties_are_read_as_java_reads_them(text, expected):
    assert parse_properties(text) == expected


def test_a_malformed_unicode_escape_names_its_line_and_key_but_never_quotes_the_value():
    with pytest.raises(PropertiesError, match=r"line 2, the value of database.password: malformed \\uxxxx") as raised:
        parse_properties("a=1\ndatabase.password=Secret-\\u00g1\n")
    assert "Secret" not in str(raised.value)


# --- the mapping ----------------------------------------------------------------------------

KAFKA = "kafka-1:9092"  # the Kafka Connect worker's cluster, as `--bootstrap-servers` gives it

# As Debezium users have them: converters, schema history, a Kafka signal channel.
CONNECTOR = r"""
# Debezium MySQL connector for the inventory database
name=inventory-connector
connector.class=io.debezium.connector.mysql.MySqlConnector
tasks.max=1

database.hostname=mysql.internal
database.port=3307
database.user=debezium
database.password=dbz secret
database.server.id=184054
topic.prefix=dbserver1
database.include.list=inventory,shop_\\d+
table.exclude.list=inventory\\.audit_.*, inventory\\.tmp_.*

schema.history.internal.kafka.bootstrap.servers=kafka:9092
schema.history.internal.kafka.topic=schema-changes.inventory
include.schema.changes=true

key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false

signal.enabled.channels=source,kafka
signal.data.collection=inventory.debezium_signal
signal.kafka.bootstrap.servers=kafka:9092
incremental.snapshot.chunk.size=2048
incremental.snapshot.watermarking.strategy=insert_delete
snapshot.mode=initial
snapshot.locking.mode=none
tombstones.on.delete=true
database.ssl.mode=preferred
"""


def test_a_realistic_connector_converts_and_validates(tmp_path):
    path = tmp_path / "connector.properties"
    path.write_text(CONNECTOR)
    config, notes = load_debezium_config(path)
    source = config.source
    assert (source.host, source.port, source.user, source.resolved_password(), source.server_id) == (
        "mysql.internal", 3307, "debezium", "dbz secret", 184054)
    assert config.name == "dbserver1"
    assert config.signals.table == "inventory.debezium_signal"
    assert config.signals.kafka_topic == "dbserver1-signal"  # Debezium's default: <topic.prefix>-signal
    assert config.kafka.bootstrap_servers == "kafka:9092"
    snapshot = config.snapshot
    assert (snapshot.chunk_size, snapshot.watermarks, snapshot.startup) == (2048, "insert_delete", "initial")
    captured = {"inventory.orders", "Inventory.Orders", "shop_7.orders", "shop_12.items"}
    left_out = {"inventory.audit_log", "inventory.tmp_x", "other.orders", "shop_x.orders", "mysql.user"}
    for name in captured | left_out:
        assert source.includes(TableId.parse(name)) == (name in captured), name
    ignored = {note.split(" ignored")[0] for note in notes if " ignored" in note}
    assert {"name", "tasks.max", "snapshot.locking.mode", "schema.history.internal.kafka.topic"} <= ignored
    # The records go to Kafka as Debezium's: the schema history's cluster (none named on the command
    # line), JsonConverter without the schema part, a tombstone after each delete.
    sink = config.sink
    assert sink.type == "kafka" and (sink.kafka.schemas, sink.kafka.tombstones) == (False, True)
    assert sink.kafka.table_topic(config.name, TableId("inventory", "orders")) == "dbserver1.inventory.orders"
    assert any(note.startswith("kafka.bootstrap_servers from schema.history.internal.kafka.bootstrap.servers")
               for note in notes)
    assert source.tls.mode == "preferred"  # database.ssl.mode
    assert "dbz secret" not in " ".join(notes)


def test_kafka_connect_json_is_read_like_properties(tmp_path):
    settings = parse_properties(CONNECTOR)
    body = {"name": "inventory-connector", "config": {**settings, "database.port": 3307, "tasks.max": 1}}
    path = tmp_path / "connector.json"
    path.write_text(json.dumps(body))
    assert read_connector_config(path) == {**settings, "database.port": "3307", "tasks.max": "1"}
    alone = tmp_path / "config.json"
    alone.write_text(json.dumps(settings))
    assert load_debezium_config(alone)[0] == load_debezium_config(path)[0]


def test_modes_and_read_only():
    def snapshot_of(**settings):
        return validated(convert({"signal.data.collection": "db.sig", **settings}, bootstrap_servers=KAFKA),
                         "test").snapshot

    assert snapshot_of(**{"snapshot.mode": "no_data"}).startup == "never"
    # Debezium 3.3 removed never and schema_only (3.6 refuses them): refused, naming what replaced them
    for removed, remedy in (("schema_only", "use no_data"), ("never", "use no_data to stream from the present")):
        with pytest.raises(ConfigError, match=f"snapshot.mode: '{removed}': removed in Debezium 3.3.*{remedy}"):
            convert({"snapshot.mode": removed})
    assert snapshot_of(**{"snapshot.mode": "INITIAL"}).startup == "initial"
    # Debezium's initial snapshot (its default mode too) marks its rows first ... last: so do dblog's
    assert snapshot_of(**{"snapshot.mode": "initial"}).initial_markers
    assert snapshot_of().initial_markers and snapshot_of().startup == "initial"
    assert not snapshot_of(**{"snapshot.mode": "no_data"}).initial_markers
    assert snapshot_of().watermarks == "gtid"  # no strategy: dblog's default, which writes nothing
    assert snapshot_of(**{"incremental.snapshot.watermarking.strategy": "insert_insert"}).watermarks == "insert_insert"
    read_only = convert({"read.only": "true", "incremental.snapshot.watermarking.strategy": "insert_insert"})
    assert read_only.data["snapshot"]["watermarks"] == "gtid"
    assert any("read.only = true writes no watermarks" in note for note in read_only.notes)
    env = convert({"database.password": "${env:DBZ_PASSWORD}"}).data["source"]
    assert env["password_env"] == "DBZ_PASSWORD" and "password" not in env
    # Kafka signals only where Debezium reads them: signal.enabled.channels names kafka.
    quiet = convert({"signal.kafka.topic": "sig", "signal.kafka.bootstrap.servers": "k:9092"})
    assert "signals" not in quiet.data and any("does not enable kafka" in note for note in quiet.notes)
    builtin = convert({"table.ignore.builtin": "false"})
    assert builtin.data == {
        "sink": {"type": "kafka", "kafka": {"schemas": True, "create_topics": False}},
        "snapshot": {"initial_markers": True}}
    assert any("never captures the system databases" in note for note in builtin.notes)


@pytest.mark.parametrize("key, value, reason", [
    ("snapshot.mode", "never", "removed in Debezium 3.3"),
    ("snapshot.mode", "initial_only", "dblog streams after the snapshot"),
    ("snapshot.mode", "when_needed", "use initial"),
    ("snapshot.mode", "always", "execute-snapshot signal"),
    ("snapshot.mode", "recovery", "no schema history"),
    ("connector.class", "io.debezium.connector.postgresql.PostgresConnector", "MySQL and MariaDB only"),
    ("database.server.name", "dbserver1", "rename it topic.prefix"),
    ("table.whitelist", "a.b", "rename it table.include.list"),
    ("column.propagate.source.type", "shop.(people", "is not a valid regular expression"),
    ("column.mask.hash.MD2.with.salt.pepper", "a.b.c", "use one of Java's MessageDigest names"),
    ("message.key.columns", "a.b", "has an invalid format"),
    ("value.converter", "io.confluent.connect.avro.AvroConverter", "schema registry"),
    ("key.converter", "org.apache.kafka.connect.storage.StringConverter", "toString()"),
    ("value.converter", "io.debezium.converters.CloudEventsConverter", "CloudEvents"),
    ("value.converter", "com.example.MyConverter", "no other converter's format"),
    ("value.converter.decimal.format", "NUMERIC", "BASE64"),
    ("value.converter.schemas.enable", "maybe", "not true or false"),
    ("value.converter.schema.registry.url", "http://registry:8081", "not a JsonConverter setting"),
    ("topic.creation.groups", "compacted", "one set of settings"),
    ("topic.creation.default.replication.factor", "-1", "give it (the broker's default.replication.factor)"),
    ("topic.creation.default.partitions", "six", "not a whole number"),
    ("topic.naming.strategy", "com.example.Naming", "<topic.prefix>.<db>.<table>"),
    ("producer.override.acks", "0", "use all or 1"),
    ("producer.override.partitioner.class", "x", "acks, linger.ms"),
    ("tombstones.on.delete", "sometimes", "not true or false"),
    ("predicates", "p", "predicates"),
    ("decimal.handling.mode", "exact", "use one of precise, double, string"),
    ("time.precision.mode", "nanos", "use one of adaptive_time_microseconds, adaptive, connect, isostring"),
    ("binary.handling.mode", "base32", "use one of bytes, base64, base64-url-safe, hex"),
    ("bigint.unsigned.handling.mode", "double", "use one of long, precise"),
    ("database.initial.statements", "SET x = 1", "runs no statements"),
    ("database.ssl.mode", "sometimes", "use one of disabled, preferred, required, verify_ca, verify_identity"),
    ("database.ssl.truststore", "/etc/ts.jks", "export them as a PEM file"),
    ("database.ssl.keystore", "/etc/client.p12", "set source.tls.cert and source.tls.key"),
    ("database.ssl.cipher.suites", "x", "not a TLS setting of Debezium's MySQL connector; remove it"),
    ("signal.consumer.ssl.truststore.location", "/etc/ts.jks", "a JKS store; dblog reads PEM files"),
    ("signal.consumer.sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required;",
     "PlainLoginModule or ScramLoginModule"),
    ("signal.consumer.client.dns.lookup", "use_all_dns_ips", "TLS and SASL settings"),
    ("signal.enabled.channels", "source,jmx", "jmx: dblog reads signals from the signal table"),
    ("incremental.snapshot.watermarking.strategy", "insert_update", "use insert_insert or insert_delete"),
    ("provide.transaction.metadata", "yes", "not true or false"),
    ("heartbeat.interval.ms", "10s", "not a whole number of milliseconds"),
    ("skipped.operations", "u,x", "use none, or some of c, u, d, t"),
    ("skipped.operations", "none,t", "use none, or some of c, u, d, t"),
    ("read.only", "yes", "not true or false"),
    ("database.port", "33o6", "not a whole number"),
    ("database.hostname", "${file:/nonexistent/secrets.properties:host}", "cannot read /nonexistent/secrets"),
    ("database.hostname", "${vault:secret/db:host}", "config provider dblog does not run"),
    ("database.password", "${vault:secret/db:password}", "config provider dblog does not run"),
    ("database.password", "x${env:A}", "make the whole value one placeholder"),
    ("gtid.source.includes", "abc", "dblog reads the events of every source in the binlog; remove it"),
    ("include.query", "true", "writes each change's SQL statement into source.query"),
    ("no.such.key", "1", "not a key of Debezium 3.6.3.Final's MySQL connector"),
])
def test_each_unsupported_key_is_refused_by_name(key, value, reason):
    with pytest.raises(ConfigError) as raised:
        convert({key: value}, "connector.properties")
    message = str(raised.value)
    assert message.startswith("connector.properties: settings dblog cannot honour")
    line = next(line for line in message.splitlines() if line.strip().startswith(f"{key}:"))
    assert reason in line, message


def test_debeziums_value_switches_become_the_kafka_sinks():
    conversion = convert({"decimal.handling.mode": "String", "time.precision.mode": "connect",
                          "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "hex"})
    assert conversion.data["sink"]["kafka"] == {
        "decimal_handling_mode": "string", "time_precision_mode": "connect",
        "bigint_unsigned_handling_mode": "precise", "binary_handling_mode": "hex",
        "create_topics": False, "schemas": True}  # Kafka Connect's defaults (topic creation by the broker)
    assert not conversion.refused


@pytest.mark.parametrize("mode", ["disabled", "preferred", "required", "verify_ca", "VERIFY_IDENTITY"])
def test_database_ssl_mode_becomes_source_tls_mode(mode):
    conversion = convert({"database.ssl.mode": mode}, bootstrap_servers=KAFKA)
    assert conversion.data["source"]["tls"] == {"mode": mode.lower()}
    assert validated(conversion, "connector.properties").source.tls.mode == mode.lower()


def test_key_store_passwords_are_refused_without_their_values():
    with pytest.raises(ConfigError) as raised:
        convert({"database.ssl.truststore": "/etc/ts.jks", "database.ssl.truststore.password": "trust-secret"})
    assert "database.ssl.truststore / database.ssl.truststore.password:" in str(raised.value)
    assert "trust-secret" not in str(raised.value)


def test_all_refusals_come_in_one_error_and_the_cli_exits_non_zero(tmp_path):
    path = tmp_path / "connector.properties"
    path.write_text(CONNECTOR + "transforms=filter\ntransforms.filter.type=io.debezium.transforms.Filter\n"
                    "gtid.source.excludes=1\ndatabase.server.name=x\ndatabase.password=${vault:db:pw}\n")
    result = _dblog("run", "--debezium-config", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    for key in ("transforms.filter.type:", "gtid.source.excludes:", "database.server.name:", "database.password:"):
        assert f"  {key}" in result.stderr, result.stderr
    assert "vault:db:pw" not in result.stderr  # the password's value is never echoed


def test_validation_errors_name_the_debezium_key():
    with pytest.raises(ConfigError, match=re.escape("database.port (dblog's source.port): Input should be less")):
        validated(convert({"database.port": "70000"}, bootstrap_servers=KAFKA), "connector.properties")
    with pytest.raises(ConfigError, match=r"set signal\.data\.collection \(dblog's signals\.table\)"):
        validated(convert({"incremental.snapshot.watermarking.strategy": "insert_insert"}, bootstrap_servers=KAFKA),
                  "connector.properties")
    with pytest.raises(ConfigError, match=r"does not name the cluster .* give it with --bootstrap-servers"):
        validated(convert({"signal.enabled.channels": "kafka"}), "connector.properties")
    with pytest.raises(ConfigError, match=r"database\.include\.list / table\.include\.list \(dblog's source\.include\)"
                                          r": pattern .* is not a valid regular expression"):
        validated(convert({"table.include.list": "shop\\.(orders"}, bootstrap_servers=KAFKA), "connector.properties")
    with pytest.raises(ConfigError, match="both"):
        convert({"database.include.list": "a", "database.exclude.list": "b"})
    with pytest.raises(ConfigError, match=re.escape("topic.creation.default.partitions (dblog's sink.kafka.partitions)"
                                                    ": Input should be less")):
        validated(convert({"topic.creation.default.partitions": "200000"}, bootstrap_servers=KAFKA), "c.json")
    with pytest.raises(ConfigError, match=r"topic.delimiter \(dblog's sink.kafka.topic\): .* holds '/'"):
        validated(convert({"topic.delimiter": "/"}, bootstrap_servers=KAFKA), "c.json")


# --- the table filters, against Debezium's rules ------------------------------------------

TABLES = ["inventory.orders", "INVENTORY.Orders", "inventory.orders_archive", "inventory.tmp_1", "inventoryx.orders",
          "shop_1.orders", "shop_123.items", "shop_1234.items", "Shop_9.Orders", "other.orders", "other.tmp_1",
          "mysql.user", "sys.config", "performance_schema.threads", "a,b.c", "inv.x"]


def _debezium_captures(table: str, databases=(), databases_out=(), tables=(), tables_out=()) -> bool:
    """What Debezium's filters do (each regex whole-string and case-insensitive): the database
    filter, then the table filter over db.table, then the system schemas left out."""
    db = table.partition(".")[0]

    def matches(patterns, text):
        return any(re.fullmatch(p, text, re.IGNORECASE) for p in patterns)

    if (databases and not matches(databases, db)) or matches(databases_out, db):
        return False
    if (tables and not matches(tables, table)) or matches(tables_out, table):
        return False
    return db.lower() not in ("mysql", "sys", "performance_schema", "information_schema")


@pytest.mark.parametrize("settings, lists", [
    ({}, {}),
    ({"database.include.list": "inventory"}, {"databases": ["inventory"]}),
    ({"database.include.list": "inventory, shop_\\d+"}, {"databases": ["inventory", r"shop_\d+"]}),
    ({"database.include.list": "shop_\\d{1\\,3}"}, {"databases": [r"shop_\d{1,3}"]}),  # \, is a comma in a regex
    ({"database.include.list": "inv.*"}, {"databases": ["inv.*"]}),
    ({"database.exclude.list": "other,shop_.*"}, {"databases_out": ["other", "shop_.*"]}),
    ({"table.include.list": "inventory\\.orders,shop_\\d+\\.items"},
     {"tables": [r"inventory\.orders", r"shop_\d+\.items"]}),
    ({"table.include.list": ".*\\.orders"}, {"tables": [r".*\.orders"]}),
    ({"table.exclude.list": ".*\\.tmp_\\d+"}, {"tables_out": [r".*\.tmp_\d+"]}),
    ({"database.include.list": "inventory,other", "table.include.list": ".*\\.orders.*"},
     {"databases": ["inventory", "other"], "tables": [r".*\.orders.*"]}),
    ({"database.include.list": "shop_\\d+", "table.exclude.list": ".*\\.items"},
     {"databases": [r"shop_\d+"], "tables_out": [r".*\.items"]}),
    ({"database.exclude.list": "other", "table.include.list": ".*\\.tmp_1,.*\\.orders"},
     {"databases_out": ["other"], "tables": [r".*\.tmp_1", r".*\.orders"]}),
])
def test_table_filters_capture_what_debezium_captures(settings, lists):
    source = validated(convert(settings, bootstrap_servers=KAFKA), "test").source
    for name in TABLES:
        expected = _debezium_captures(name, **lists)
        assert source.includes(TableId.parse(name)) == expected, (name, source.include, source.exclude)


# --- the commands ---------------------------------------------------------------------------


# --- ${…} placeholders ------------------------------------------------------------------------


def test_a_secret_placeholder_becomes_a_reference_and_never_the_value(tmp_path, monkeypatch):
    """The issue's case: Debezium Server's `database.password=${MYSQL_CDC_PASSWORD}` was taken as
    the literal password. Each placeholder form of a secret becomes dblog's `_env` / `_file`
    reference, whether or not the variable is set now, so the converted data never holds it;
    resolved when dblog connects it is the secret."""
    monkeypatch.setenv("MYSQL_CDC_PASSWORD", "from-env-Q1")
    (tmp_path / "secrets.properties").write_text("# Kafka Connect FileConfigProvider file\nother=x\nmysql.pw = from-file-Q2\n")
    (tmp_path / "mounted").mkdir()
    (tmp_path / "mounted" / "password").write_text("from-dir-Q3\n")
    cases = [
        ("${MYSQL_CDC_PASSWORD}", {"password_env": "MYSQL_CDC_PASSWORD"}, "from-env-Q1"),
        (" ${MYSQL_CDC_PASSWORD} ", {"password_env": "MYSQL_CDC_PASSWORD"}, "from-env-Q1"),
        ("${MYSQL_CDC_PASSWORD:fallback}", {"password_env": "MYSQL_CDC_PASSWORD"}, "from-env-Q1"),
        ("${env:MYSQL_CDC_PASSWORD}", {"password_env": "MYSQL_CDC_PASSWORD"}, "from-env-Q1"),
        (f"${{file:{tmp_path}/secrets.properties:mysql.pw}}",
         {"password_file": f"{tmp_path}/secrets.properties", "password_file_key": "mysql.pw"}, "from-file-Q2"),
        (f"${{directory:{tmp_path}/mounted:password}}", {"password_file": f"{tmp_path}/mounted/password"},
         "from-dir-Q3"),
    ]
    for value, reference, secret in cases:
        conversion = convert({"database.password": value})
        assert conversion.data["source"] == {**reference, "exclude": conversion.data["source"]["exclude"]}, value
        assert secret not in json.dumps(conversion.data) + " ".join(conversion.notes)
        conversion.set("kafka.bootstrap_servers", KAFKA)
        assert validated(conversion, "test").source.resolved_password() == secret
    defaulted = convert({"database.password": "${MYSQL_CDC_PASSWORD:fallback}"})
    assert any("MYSQL_CDC_PASSWORD must be set when dblog runs" in note for note in defaulted.notes)
    assert "fallback" not in json.dumps(defaulted.data)
    literal = convert({"database.password": "lit eral "})  # as it is, not trimmed, with a note
    assert literal.data["source"]["password"] == "lit eral "
    assert any("database.password is written into the configuration as it is" in n for n in literal.notes)


def test_other_placeholders_are_resolved_when_converting(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_HOST", "db.internal")
    monkeypatch.setenv("DB_PORT", "3307")
    monkeypatch.delenv("DB_USER_UNSET", raising=False)
    (tmp_path / "c.properties").write_text("user=cdc\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "prefix").write_text("shop")  # the directory provider keeps the contents as they are
    conversion = convert({
        "database.hostname": "${DB_HOST}",
        "database.port": "${env:DB_PORT}",
        "database.user": f"${{file:{tmp_path}/c.properties:user}}",
        "topic.prefix": f"${{directory:{tmp_path}/d:prefix}}",
        "signal.data.collection": "${DB_USER_UNSET:inventory}.sig_${DB_PORT}",  # a default, and inside text
    })
    assert conversion.data["source"]["host"] == "db.internal" and conversion.data["source"]["port"] == 3307
    assert conversion.data["source"]["user"] == "cdc" and conversion.data["name"] == "shop"
    assert conversion.data["signals"]["table"] == "inventory.sig_3307"


@pytest.mark.parametrize("value, named", [
    ("${DB_HOST_UNSET}", "environment variable DB_HOST_UNSET is not set"),
    ("${env:DB_HOST_UNSET}", "environment variable DB_HOST_UNSET is not set"),
    ("${file:/nonexistent/c.properties:host}", "cannot read /nonexistent/c.properties"),
    ("${file:PROPS:nokey}", "has no key 'nokey'"),
    ("${file:PROPS}", "write ${file:PATH:KEY}"),
    ("${directory:/nonexistent:host}", "cannot read /nonexistent/host"),
    ("${directory:/etc:../etc/passwd}", "a file's name inside DIR"),
    ("${db.host}", "from environment variables"),
    ("${vault:kv/db:host}", "config provider dblog does not run"),
])
def test_an_unresolvable_placeholder_is_refused_naming_it(tmp_path, monkeypatch, value, named):
    monkeypatch.delenv("DB_HOST_UNSET", raising=False)
    (tmp_path / "c.properties").write_text("host=h\n")
    value = value.replace("PROPS", str(tmp_path / "c.properties"))
    with pytest.raises(ConfigError) as raised:
        convert({"database.hostname": value})
    assert f"database.hostname: {value}: " in str(raised.value) and named in str(raised.value), str(raised.value)


def test_a_secret_looking_key_is_never_resolved_into_the_configuration(monkeypatch):
    """Keys dblog does not map are refused by name; one that looks like a secret is not even
    resolved, so neither the refusal nor anything else can show its value."""
    monkeypatch.setenv("TRUST_PW", "trust-Q9")
    with pytest.raises(ConfigError) as raised:
        convert({"database.ssl.truststore.password": "${env:TRUST_PW}", "database.password": "${vault:a:b}"})
    assert "database.ssl.truststore.password" in str(raised.value) and "trust-Q9" not in str(raised.value)
    assert "vault" not in str(raised.value)  # a secret key's placeholder is not quoted either


def test_debezium_server_application_properties(monkeypatch):
    """Debezium Server's file: the connector's keys under debezium.source., its sink, format and
    Quarkus keys ignored with notes, its offset and schema history storage ignored."""
    monkeypatch.setenv("MYSQL_HOST", "db.internal")
    conversion = convert(parse_properties("\n".join([
        "debezium.sink.type=kafka",
        "debezium.sink.kafka.producer.bootstrap.servers=kafka:9092",
        "debezium.format.value=json",
        "debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector",
        "debezium.source.offset.storage.file.filename=data/offsets.dat",
        "debezium.source.offset.flush.interval.ms=0",
        "debezium.source.database.hostname=${MYSQL_HOST}",
        "debezium.source.database.password=${MYSQL_CDC_PASSWORD}",
        "debezium.source.topic.prefix=tutorial",
        "debezium.source.schema.history.internal=io.debezium.storage.file.history.FileSchemaHistory",
        "quarkus.log.level=INFO",
    ])))
    assert conversion.data["source"]["host"] == "db.internal" and conversion.data["name"] == "tutorial"
    assert conversion.data["source"]["password_env"] == "MYSQL_CDC_PASSWORD"
    assert conversion.data["sink"] == {"type": "kafka", "kafka": {"schemas": True, "create_topics": False}}
    assert conversion.data["kafka"] == {"bootstrap_servers": "kafka:9092"}
    ignored = {note.split(" ignored")[0] for note in conversion.notes if " ignored" in note}
    assert {"quarkus.log.level", "debezium.source.offset.storage.file.filename",  # named as the file has them
            "debezium.source.offset.flush.interval.ms", "debezium.source.schema.history.internal"} <= ignored
    with pytest.raises(ConfigError, match="debezium.offset.x: not a key of Debezium .*Debezium Server that dblog knows"):
        convert({"debezium.source.topic.prefix": "t", "debezium.offset.x": "1"})
    with pytest.raises(ConfigError, match="debezium.transforms.unwrap.type: missing"):
        convert({"debezium.source.topic.prefix": "t", "debezium.transforms": "unwrap"})


def _dblog(*args, cwd=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "dblog.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_convert_writes_toml_that_dblog_run_reads(tmp_path):
    path = tmp_path / "connector.properties"
    path.write_text(CONNECTOR)
    out = tmp_path / "dblog.toml"
    result = _dblog("convert-debezium", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "sink.kafka.schemas = false" in result.stderr  # the notes, also as comments in the file
    text = out.read_text()
    assert text.startswith(f"# dblog configuration converted from {path}")
    assert "# tasks.max ignored" in text
    assert load_config(out) == load_debezium_config(path)[0]
    again = _dblog("convert-debezium", str(path), "-o", str(out))
    assert again.returncode == 1 and "exists" in again.stderr and out.read_text() == text
    to_stdout = _dblog("--log-level", "warning", "convert-debezium", str(path))
    assert to_stdout.returncode == 0 and tomllib.loads(to_stdout.stdout)["name"] == "dbserver1"


def test_run_takes_one_configuration(tmp_path):
    both = _dblog("run", "--config", "a.toml", "--debezium-config", "b.properties")
    neither = _dblog("run")
    for result in (both, neither):
        assert result.returncode == 2 and "give either --config FILE or --debezium-config FILE" in result.stderr


def test_dblog_run_from_a_debezium_connector_configuration(mariadb, database, broker, tmp_path):
    """`dblog run --debezium-config FILE --bootstrap-servers …`: the connector's records on the
    topic Debezium names, as its JsonConverter (schemas.enable = false) writes them."""
    from support.kafka_topics import decode, topic_records

    with mariadb.connect() as connection:
        load(connection, database, 1_500)
    path = tmp_path / "connector.properties"
    path.write_text("\n".join([
        "name=shop-connector",
        "connector.class=io.debezium.connector.mysql.MySqlConnector",
        "tasks.max=1",
        "database.hostname=127.0.0.1",
        f"database.port={mariadb.port}",
        f"database.user={mariadb.user}",
        f"database.password={mariadb.password}",
        "database.server.id=4100001",
        "topic.prefix=shop",
        f"database.include.list={database}",
        f"table.exclude.list={database}\\\\.customers",  # \\. in the file: a \. in the regex
        f"signal.data.collection={database}.dblog_signal",
        "incremental.snapshot.chunk.size=200",
        "incremental.snapshot.watermarking.strategy=insert_insert",
        "snapshot.mode=initial",
        "schema.history.internal.kafka.bootstrap.servers=kafka:9092",
        "schema.history.internal.kafka.topic=schema-changes.shop",
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        "key.converter.schemas.enable=false",
    ]) + "\n")
    # The Connect worker's cluster from the command line (the schema history's kafka:9092 is not it).
    output = run_dblog_until(["run", "--debezium-config", str(path), "--bootstrap-servers", broker.bootstrap],
                             tmp_path / "stderr.log", " COMPLETED ", cwd=tmp_path)
    assert "tasks.max ignored" in output and "sink.kafka.schemas = false" in output
    assert not (tmp_path / "dblog-data" / "changes.jsonl").exists()  # no JSON-lines file: Kafka
    records = [decode(record) for part in topic_records(broker.bootstrap, f"shop.{database}.orders").values()
               for record in part]
    rows = {(key["region"], key["order_id"]): value for key, value in records if value and value["op"] == "r"}
    keys = {(row[0], row[1]) for row in mariadb.execute(f"SELECT region, order_id FROM `{database}`.orders")}
    assert set(rows) == keys and len(rows) == 1_500
    assert {(value["source"]["name"], value["source"]["table"]) for value in rows.values()} == {("shop", "orders")}
    assert all(set(value) >= {"before", "after", "source", "op"} for value in rows.values())  # no schema part


KAFKA_SIGNALS = {"connector.class": "io.debezium.connector.mysql.MySqlConnector", "signal.enabled.channels": "kafka",
                 "signal.kafka.bootstrap.servers": "k1:9096"}


@pytest.mark.parametrize("jaas, mechanism, expected", [
    ('org.apache.kafka.common.security.scram.ScramLoginModule required username="dbz" password="${env:KAFKA_PW}";',
     "SCRAM-SHA-512", {"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "dbz", "sasl_password_env": "KAFKA_PW"}),
    ('org.apache.kafka.common.security.scram.ScramLoginModule required username="dbz" password="${KAFKA_PW}";',
     "SCRAM-SHA-256", {"sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "dbz", "sasl_password_env": "KAFKA_PW"}),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\\"w";',
     None, {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": 'p"w'}),
])
def test_the_signal_consumers_kafka_security_becomes_the_kafka_section(jaas, mechanism, expected):
    settings = {**KAFKA_SIGNALS, "signal.consumer.security.protocol": "SASL_SSL",
                "signal.consumer.sasl.jaas.config": jaas, "signal.consumer.ssl.truststore.type": "PEM",
                "signal.consumer.ssl.truststore.location": "/etc/kafka/ca.pem",
                "signal.consumer.ssl.endpoint.identification.algorithm": ""}
    if mechanism:
        settings["signal.consumer.sasl.mechanism"] = mechanism
    conversion = convert(settings)
    assert conversion.data["kafka"] == {"bootstrap_servers": "k1:9096", "security_protocol": "SASL_SSL",
                                        "ssl_ca": "/etc/kafka/ca.pem", "ssl_check_hostname": False, **expected}
    assert "${" not in json.dumps(conversion.data)  # a placeholder secret stays in the environment
    config = validated(conversion, "connector.properties")
    assert config.kafka.security_protocol == "SASL_SSL"


def test_a_pem_keystore_becomes_the_client_certificate_and_key():
    conversion = convert({**KAFKA_SIGNALS, "signal.consumer.security.protocol": "SSL",
                          "signal.consumer.ssl.keystore.type": "PEM",
                          "signal.consumer.ssl.keystore.location": "/etc/kafka/client.pem",
                          "signal.consumer.ssl.key.password": "${env:KEY_PW}"})
    assert conversion.data["kafka"] == {"bootstrap_servers": "k1:9096", "security_protocol": "SSL",
                                        "ssl_cert": "/etc/kafka/client.pem", "ssl_key": "/etc/kafka/client.pem",
                                        "ssl_key_password_env": "KEY_PW"}



# --- the records go to Kafka (issue 28 item 4) -------------------------------------------------


def _sink(**settings) -> dict:
    return convert(settings, bootstrap_servers=KAFKA).data["sink"]["kafka"]


@pytest.mark.parametrize("settings, schemas", [
    ({}, True),  # the worker's converters, taken as JsonConverter's default: schemas on
    ({"value.converter": "org.apache.kafka.connect.json.JsonConverter"}, True),
    ({"value.converter.schemas.enable": "false"}, False),  # one side given: both
    ({"key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}, False),
    ({"key.converter.schemas.enable": "true", "value.converter.schemas.enable": "TRUE"}, True),
])
def test_json_converter_schemas_enable_becomes_the_sinks_schemas(settings, schemas):
    assert _sink(**settings)["schemas"] is schemas


def test_keys_and_values_with_different_schemas_enable_are_refused_naming_both():
    with pytest.raises(ConfigError, match=r"key.converter.schemas.enable and value.converter.schemas.enable: differ"):
        convert({"key.converter.schemas.enable": "false", "value.converter.schemas.enable": "true"})


def test_topic_names_tombstones_and_topic_creation():
    sink = _sink(**{"tombstones.on.delete": "false", "topic.delimiter": "_", "extended.headers.enabled": "false",
                    "topic.creation.default.partitions": "6", "topic.creation.default.replication.factor": "3",
                    "topic.creation.default.cleanup.policy": "compact", "errors.tolerance": "all"})
    assert sink == {"schemas": True, "tombstones": False, "extended_headers": False, "topic": "{name}_{db}_{table}",
                    "partitions": 6, "replication_factor": 3, "topic_properties": {"cleanup.policy": "compact"}}
    config = validated(convert({"topic.prefix": "cdc", "topic.creation.default.partitions": "2"},
                               bootstrap_servers=KAFKA), "t")
    assert config.sink.kafka.create_topics and config.sink.kafka.partitions == 2
    assert config.sink.kafka.table_topic("cdc", TableId("inv", "orders")) == "cdc.inv.orders"
    assert config.sink.kafka.schema_topic("cdc") == "cdc"  # Debezium's schema change topic: <topic.prefix>
    # Without topic.creation.default.*, Kafka Connect leaves the topics to the broker: so does dblog.
    plain = convert({}, bootstrap_servers=KAFKA)
    assert plain.data["sink"]["kafka"]["create_topics"] is False
    assert any("auto.create.topics.enable" in note for note in plain.notes)
    noted = convert({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}, bootstrap_servers=KAFKA)
    assert {"errors.tolerance", "errors.deadletterqueue.topic.name"} <= {
        note.split(" ignored")[0] for note in noted.notes if "no record is skipped" in note}


@pytest.mark.parametrize("value, skipped", [
    (None, ["t"]),  # Debezium's default: truncates skipped
    ("t", ["t"]),
    ("none", []),
    (" D, u ,c", ["c", "u", "d"]),
    ("t,c", ["c", "t"]),
])
def test_skipped_operations_become_the_kafka_sinks(value, skipped):
    conversion = convert({} if value is None else {"skipped.operations": value}, bootstrap_servers=KAFKA)
    assert not conversion.refused
    assert not any("skipped.operations" in note for note in conversion.notes)  # no difference left to note
    assert validated(conversion, "t").sink.kafka.skipped_operations == skipped


@pytest.mark.parametrize("value, written", [(None, True), ("true", True), ("false", False)])
def test_include_schema_changes_becomes_the_kafka_sinks(value, written):
    conversion = convert({} if value is None else {"include.schema.changes": value}, bootstrap_servers=KAFKA)
    assert not conversion.refused
    assert not any("include.schema.changes" in note for note in conversion.notes)
    assert validated(conversion, "t").sink.kafka.schema_changes is written


@pytest.mark.parametrize("tables, databases, named", [
    (None, None, ["other tables", "other databases"]),  # Debezium's defaults
    ("true", None, ["other databases"]),
    (None, "true", ["other tables"]),
    ("TRUE", "true", []),  # what dblog writes: no difference to note
])
def test_the_schema_change_topics_scope_is_noted_where_debezium_would_write_more(tables, databases, named):
    only = "schema.history.internal.store.only.captured."
    settings = {key: value for key, value in ((only + "tables.ddl", tables), (only + "databases.ddl", databases))
                if value is not None}
    notes = [note for note in convert(settings, bootstrap_servers=KAFKA).notes
             if note.startswith("schema change topic:")]
    assert len(notes) == (1 if named else 0)
    for words in named:
        assert words in notes[0]
    assert not [note for note in convert({"include.schema.changes": "false", **settings},
                                         bootstrap_servers=KAFKA).notes if note.startswith("schema change topic:")]


def test_the_cluster_comes_from_the_command_line_or_the_file():
    history = {"schema.history.internal.kafka.bootstrap.servers": "history:9092"}
    signals = {"signal.enabled.channels": "kafka", "signal.kafka.bootstrap.servers": "history:9092"}
    assert convert({**history}, bootstrap_servers="worker:9092").data["kafka"] == {"bootstrap_servers": "worker:9092"}
    assert convert({**history}).data["kafka"] == {"bootstrap_servers": "history:9092"}
    assert convert({**signals}).data["kafka"] == {"bootstrap_servers": "history:9092"}
    assert convert({"producer.override.bootstrap.servers": "p:9092", **history}).data["kafka"] == {
        "bootstrap_servers": "p:9092"}
    # The signal topic on another cluster than the records: dblog has one.
    with pytest.raises(ConfigError, match=r"signal.kafka.bootstrap.servers: another cluster than the records' "
                                          r"\(--bootstrap-servers\)"):
        convert({**signals}, bootstrap_servers="worker:9092")


def test_the_clusters_credentials_come_from_the_schema_history_only_when_dblog_writes_there():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="${env:KPW}";'
    settings = {"schema.history.internal.kafka.bootstrap.servers": "h1:9093,h2:9093",
                "schema.history.internal.producer.security.protocol": "SASL_SSL",
                "schema.history.internal.producer.sasl.mechanism": "SCRAM-SHA-256",
                "schema.history.internal.producer.sasl.jaas.config": jaas}
    for servers in (None, "h2:9093, h1:9093"):
        assert convert(settings, bootstrap_servers=servers).data["kafka"] == {
            "bootstrap_servers": servers or "h1:9093,h2:9093", "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "u", "sasl_password_env": "KPW"}
    elsewhere = convert(settings, bootstrap_servers="worker:9092")
    assert elsewhere.data["kafka"] == {"bootstrap_servers": "worker:9092"}
    assert any(note.startswith("schema.history.internal.producer.sasl.jaas.config ignored")
               for note in elsewhere.notes)


def test_connect_producer_overrides_become_sink_settings():
    sink = _sink(**{"producer.override.acks": "-1", "producer.override.linger.ms": "50",
                    "producer.override.max.request.size": "4194304", "producer.override.delivery.timeout.ms": "60000",
                    "producer.override.buffer.memory": "33554432", "producer.override.compression.type": "zstd"})
    keys = ("acks", "linger_ms", "max_request_size", "max_buffer_bytes", "delivery_timeout_seconds", "compression")
    assert {key: sink[key] for key in keys} == {
        "acks": "all", "linger_ms": 50, "max_request_size": 4194304, "max_buffer_bytes": 33554432,
        "delivery_timeout_seconds": 60.0, "compression": "zstd"}
    assert _sink(**{"producer.override.compression.type": "None"})["compression"] == "none"
    with pytest.raises(ConfigError, match="compression.type: 'brotli' is not a codec"):
        _sink(**{"producer.override.compression.type": "brotli"})


SERVER = r"""
debezium.sink.type=kafka
debezium.sink.kafka.producer.bootstrap.servers=${KAFKA_SERVERS_T:k1:9093,k2:9093}
debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.security.protocol=SASL_SSL
debezium.sink.kafka.producer.sasl.mechanism=PLAIN
debezium.sink.kafka.producer.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="cdc" password="${KAFKA_PW_T}";
debezium.sink.kafka.producer.ssl.truststore.type=PEM
debezium.sink.kafka.producer.ssl.truststore.location=/etc/ca.pem
debezium.sink.kafka.producer.acks=1
debezium.sink.kafka.producer.linger.ms=20
debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector
debezium.source.database.hostname=db
debezium.source.database.password=${DB_PW_T}
debezium.source.topic.prefix=tutorial
debezium.source.tombstones.on.delete=false
debezium.format.key=json
debezium.format.value=json
debezium.format.value.schemas.enable=false
debezium.format.key.schemas.enable=false
"""


def test_a_debezium_server_kafka_sink_becomes_dblogs(monkeypatch):
    monkeypatch.delenv("KAFKA_SERVERS_T", raising=False)
    conversion = convert(parse_properties(SERVER))
    assert conversion.data["kafka"] == {"bootstrap_servers": "k1:9093,k2:9093", "security_protocol": "SASL_SSL",
                                        "sasl_mechanism": "PLAIN", "sasl_username": "cdc",
                                        "sasl_password_env": "KAFKA_PW_T", "ssl_ca": "/etc/ca.pem"}
    assert conversion.data["sink"] == {"type": "kafka", "kafka": {"acks": 1, "linger_ms": 20, "schemas": False,
                                                                 "tombstones": False, "create_topics": False}}
    assert conversion.data["source"]["password_env"] == "DB_PW_T" and conversion.data["name"] == "tutorial"
    monkeypatch.setenv("KAFKA_SERVERS_T", "from-env:9093")  # ${VAR:default}: the variable when set
    assert convert(parse_properties(SERVER)).data["kafka"]["bootstrap_servers"] == "from-env:9093"
    config = validated(conversion, "application.properties")
    assert config.sink.kafka.table_topic(config.name, TableId("inventory", "orders")) == "tutorial.inventory.orders"


@pytest.mark.parametrize("line, named, reason", [
    ("debezium.sink.type=kinesis", "debezium.sink.type", "'kinesis': dblog writes to Kafka"),
    ("debezium.format.value=avro", "debezium.format.value", "Avro with a schema registry"),
    ("debezium.format.value=cloudevents", "debezium.format.value", "CloudEvents"),
    ("debezium.format.value.schemas.enable=true", "debezium.format.key.schemas.enable and "
     "debezium.format.value.schemas.enable", "differ"),
    ("debezium.transforms=unwrap", "debezium.transforms.unwrap.type", "missing (Kafka Connect needs it)"),
    ("debezium.transforms=f\ndebezium.transforms.f.type=io.debezium.transforms.Filter", "debezium.transforms.f.type",
     "a Groovy or JavaScript expression"),
    ("debezium.source.message.key.columns=inventory.customers", "debezium.source.message.key.columns",
     "has an invalid format"),
    ("debezium.source.decimal.handling.mode=exact", "debezium.source.decimal.handling.mode", "use one of precise, double, string"),
    ("debezium.sink.kafka.producer.sasl.login.callback.handler.class=x",
     "debezium.sink.kafka.producer.sasl.login.callback.handler.class", "TLS and SASL settings"),
    ("debezium.sink.kafka.producer.acks=0", "debezium.sink.kafka.producer.acks", "use all or 1"),
    ("debezium.source.signal.enabled.channels=kafka\ndebezium.source.signal.consumer.sasl.mechanism=SCRAM-SHA-512",
     "debezium.source.signal.consumer.sasl.mechanism", "differs from debezium.sink.kafka.producer.sasl.mechanism"),
])
def test_debezium_server_keys_dblog_cannot_honour_are_refused_by_name(line, named, reason):
    with pytest.raises(ConfigError) as raised:
        convert(parse_properties(SERVER + line + "\n"))
    lines = [text.strip() for text in str(raised.value).splitlines()[1:]]
    assert len(lines) == 1, str(raised.value)  # that key alone
    assert any(text.startswith(named) and reason in text for text in lines), str(raised.value)
    assert "${KAFKA_PW_T}" not in str(raised.value)


def test_bootstrap_servers_on_the_command_line(tmp_path):
    path = tmp_path / "connector.json"
    path.write_text(json.dumps({"name": "c", "config": {"connector.class": "io.debezium.connector.mysql.MySqlConnector",
                                                        "topic.prefix": "cdc"}}))
    missing = _dblog("convert-debezium", str(path))
    assert missing.returncode == 1 and "give it with --bootstrap-servers" in missing.stderr
    given = _dblog("--log-level", "warning", "convert-debezium", str(path), "--bootstrap-servers", "worker:9092")
    assert given.returncode == 0, given.stderr
    data = tomllib.loads(given.stdout)
    assert data["kafka"] == {"bootstrap_servers": "worker:9092"} and data["sink"]["type"] == "kafka"
    wrong = _dblog("run", "--config", "a.toml", "--bootstrap-servers", "worker:9092")
    assert wrong.returncode == 2 and "--bootstrap-servers goes with --debezium-config" in wrong.stderr


# --- transforms -----------------------------------------------------------------------------

UNWRAP = "io.debezium.transforms.ExtractNewRecordState"


def _kafka(conversion):
    return conversion.data["sink"]["kafka"]


def test_transforms_become_sink_kafka_transforms_in_order():
    conversion = convert({
        "topic.prefix": "shop", "transforms": " unwrap , shards,rename",
        "transforms.unwrap.type": UNWRAP, "transforms.unwrap.delete.tombstone.handling.mode": "Rewrite",
        "transforms.unwrap.add.fields": "op, table,source.ts_ms", "transforms.unwrap.add.headers": "db",
        "transforms.unwrap.add.headers.prefix": "h_", "transforms.unwrap.route.by.field": "",
        "transforms.shards.type": "io.debezium.transforms.ByLogicalTableRouter",
        "transforms.shards.topic.regex": "(.*)_shard\\d+", "transforms.shards.topic.replacement": "$1",
        "transforms.shards.key.enforce.uniqueness": "FALSE", "transforms.shards.logical.table.cache.size": "32",
        "transforms.rename.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.rename.regex": "shop\\.(.*)", "transforms.rename.replacement": "cdc.$1",
        "transforms.rename.typo": "1", "transforms.unused.type": UNWRAP,
    }, bootstrap_servers="k:9092")
    assert _kafka(conversion)["transforms"] == [
        {"name": "unwrap", "type": "unwrap", "delete_tombstone_handling_mode": "rewrite",
         "add_fields": ["op", "table", "source.ts_ms"], "add_headers": ["db"], "add_headers_prefix": "h_",
         "route_by_field": ""},
        {"name": "shards", "type": "logical_table_router", "topic_regex": "(.*)_shard\\d+", "topic_replacement": "$1",
         "key_enforce_uniqueness": False},
        {"name": "rename", "type": "regex_router", "regex": "shop\\.(.*)", "replacement": "cdc.$1"},
    ]
    notes = "\n".join(conversion.notes)
    assert "transforms.shards.logical.table.cache.size ignored" in notes
    assert "transforms.rename.typo ignored: not a setting of org.apache.kafka.connect.transforms.RegexRouter" in notes
    assert "transforms.unused.type ignored: its transform is not in `transforms`" in notes
    config = validated(conversion, "t")
    assert [item.type for item in config.sink.kafka.transforms] == ["unwrap", "logical_table_router", "regex_router"]
    assert config.sink.kafka.routed_topic("shop.inv.orders_shard2") == "cdc.inv.orders"


@pytest.mark.parametrize("settings, refused", [
    ({"transforms.f.type": "io.debezium.transforms.Filter", "transforms.f.language": "jsr223.groovy"},
     ["transforms.f.type: 'io.debezium.transforms.Filter': a Groovy or JavaScript expression",
      "transforms.f.language: goes with transforms.f.type, refused"]),
    ({"transforms.f.type": "org.apache.kafka.connect.transforms.ReplaceField$Value"},
     ["not a transform dblog applies; dblog applies ExtractNewRecordState, RegexRouter and ByLogicalTableRouter"]),
    ({"transforms.f.type": "io.debezium.transforms.outbox.EventRouter"}, ["outbox event router"]),
    ({"transforms.f.type": "org.apache.kafka.connect.transforms.RegexRouter", "transforms.f.regex": "a",
      "transforms.f.predicate": "isHeartbeat", "transforms.f.negate": "true", "predicates": "isHeartbeat",
      "predicates.isHeartbeat.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"},
     ["transforms.f.predicate: Kafka Connect predicates", "transforms.f.negate: Kafka Connect predicates",
      "predicates: Kafka Connect predicates", "predicates.isHeartbeat.type: Kafka Connect predicates",
      "transforms.f.replacement: missing (RegexRouter needs it)"]),
    ({"transforms.f.type": UNWRAP, "transforms.f.delete.tombstone.handling.mode": "keep"},
     ["'keep': use drop or tombstone or rewrite or rewrite-with-tombstone or delete-to-tombstone"]),
    ({"transforms.f.type": "io.debezium.transforms.ByLogicalTableRouter", "transforms.f.topic.regex": "a",
      "transforms.f.topic.replacement": "b", "transforms.f.schema.name.adjustment.mode": "avro"},
     ["'avro': use none: dblog writes JSON"]),
    ({"transforms.f.regex": "a"}, ["transforms.f.type: missing"]),
])
def test_transforms_dblog_does_not_apply_are_refused_by_name(settings, refused):
    with pytest.raises(ConfigError) as raised:
        convert({"topic.prefix": "t", "transforms": "f", **settings}, bootstrap_servers="k:9092")
    for text in refused:
        assert text in str(raised.value), str(raised.value)


@pytest.mark.parametrize("drop_tombstones, deletes", [("false", None), ("true", "rewrite"), (None, "none")])
def test_debezium_2_delete_handling_keys_are_applied_as_debezium_2_did(drop_tombstones, deletes):
    settings = {"transforms.u.drop.tombstones": drop_tombstones, "transforms.u.delete.handling.mode": deletes}
    conversion = convert({"topic.prefix": "t", "transforms": "u", "transforms.u.type": UNWRAP,
                          **{key: value for key, value in settings.items() if value is not None}},
                         bootstrap_servers="k:9092")
    item = _kafka(conversion)["transforms"][0]
    assert item.get("drop_tombstones") == (None if drop_tombstones is None else drop_tombstones == "true")
    assert item.get("delete_handling_mode") == deletes
    assert any("Debezium 3.x no longer reads them" in note for note in conversion.notes)
    validated(conversion, "t")
    # with Debezium 3.x's key they are ignored, as Debezium 2.5+ ignores them then
    conversion = convert({"topic.prefix": "t", "transforms": "u", "transforms.u.type": UNWRAP,
                          "transforms.u.delete.tombstone.handling.mode": "drop",
                          **{key: value for key, value in settings.items() if value is not None}},
                         bootstrap_servers="k:9092")
    assert _kafka(conversion)["transforms"][0] == {"name": "u", "type": "unwrap",
                                                   "delete_tombstone_handling_mode": "drop"}
    assert any("delete.tombstone.handling.mode replaces it" in note for note in conversion.notes)


@pytest.mark.parametrize("settings, refusal", [
    ({"transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter", "transforms.r.regex": "(a)",
      "transforms.r.replacement": "$2"}, "transforms.r.regex / transforms.r.replacement: '$2': no group 2 in the regex"),
    ({"transforms.r.type": "io.debezium.transforms.ByLogicalTableRouter", "transforms.r.topic.regex": "\\p{Alpha}",
      "transforms.r.topic.replacement": "x"}, "transforms.r.topic.regex / transforms.r.topic.replacement: "),
    ({"transforms.r.type": UNWRAP, "transforms.r.add.fields": "op,source"}, "transforms.r: 'source' is a struct"),
])
def test_transform_settings_dblog_refuses_name_the_debezium_key(settings, refusal):
    with pytest.raises(ConfigError) as raised:
        convert({"topic.prefix": "t", "transforms": "r", **settings}, bootstrap_servers="k:9092")
    assert refusal in str(raised.value), str(raised.value)


def test_debezium_server_transforms():
    conversion = convert({"debezium.source.topic.prefix": "t", "debezium.sink.type": "kafka",
                          "debezium.sink.kafka.producer.bootstrap.servers": "k:9092",
                          "debezium.transforms": "unwrap", "debezium.transforms.unwrap.type": UNWRAP,
                          "debezium.transforms.unwrap.add.fields": "op", "debezium.transforms.unwrap.nope": "1"})
    assert _kafka(conversion)["transforms"] == [{"name": "unwrap", "type": "unwrap", "add_fields": ["op"]}]
    assert any(note.startswith("debezium.transforms.unwrap.nope ignored") for note in conversion.notes)
    with pytest.raises(ConfigError, match="debezium.predicates: Kafka Connect predicates"):
        convert({"debezium.source.topic.prefix": "t", "debezium.sink.type": "kafka", "debezium.predicates": "p"})


def test_convert_debezium_writes_the_transforms_as_toml(tmp_path):
    import tomllib

    path = tmp_path / "connector.json"
    path.write_text(json.dumps({"name": "c", "config": {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector", "topic.prefix": "shop",
        "database.hostname": "db", "database.user": "u", "transforms": "unwrap,route",
        "transforms.unwrap.type": UNWRAP, "transforms.unwrap.add.fields": "op,source.ts_ms",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "shop\\.(.*)", "transforms.route.replacement": "$1"}}))
    out = tmp_path / "dblog.toml"
    result = _dblog("convert-debezium", str(path), "-o", str(out), "--bootstrap-servers", "k:9092")
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "[[sink.kafka.transforms]]" in text
    data = tomllib.loads(text)
    assert [item["type"] for item in data["sink"]["kafka"]["transforms"]] == ["unwrap", "regex_router"]
    from dblog.runtime.config import parse_config
    assert parse_config(data).sink.kafka.transforms[1].replacement == "$1"


def test_the_json_converters_replace_null_with_default_carries_over():
    from dblog.runtime.debezium_config import convert

    base = {"topic.prefix": "x", "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    assert convert({**base, "value.converter.replace.null.with.default": "false"},
                   bootstrap_servers="k:1").data["sink"]["kafka"]["replace_null_with_default"] is False
    assert "replace_null_with_default" not in convert(base, bootstrap_servers="k:1").data["sink"]["kafka"]
