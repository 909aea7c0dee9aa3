"""What dblog does with each key of a Debezium MySQL connector's (and Debezium Server's)
configuration, one entry per key or key prefix: read by a step of dblog.runtime.debezium_config
(`Mapped`, naming dblog's setting), `Ignored` with the reason it changes nothing dblog writes, or
`Refused` with the reason and the remedy. A refused key at Debezium's default value
(dblog.runtime.debezium_key_list, generated from Debezium's jars) is accepted: it asks for what
Debezium does anyway. tests/ops/test_debezium_keys.py checks that every key of that list has an
answer here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dblog.runtime.debezium_key_list import CONNECTOR_KEYS, SERVER_KEYS


@dataclass(frozen=True)
class Mapped:
    to: str  # dblog's setting (or what the converter does with it)


@dataclass(frozen=True)
class Ignored:
    reason: str  # why it changes nothing dblog writes


@dataclass(frozen=True)
class Refused:
    reason: str  # what Debezium does with it that dblog does not
    remedy: str  # what to do instead


_HISTORY = Ignored("dblog keeps its schema history beside its offsets (offsets.path), in a file of its own")
_QUEUE = Ignored("Debezium's internal queue between its reader and Kafka Connect; dblog has none (it commits "
                 "after sink.batch_rows changes or offsets.commit_interval_seconds)")
_JDBC = Ignored("a setting of Debezium's JDBC connection; dblog's MySQL client is its own (PyMySQL)")
_BLOCKING_SNAPSHOT = Ignored("a setting of Debezium's blocking initial snapshot; dblog's start-up snapshot is "
                             "incremental (chunks of snapshot.chunk_size rows by primary key while it streams), "
                             "so it changes when rows are read, never which records are written")
_RECONNECTS = Ignored("dblog retries a lost or refused connection itself for source.reconnect_timeout_seconds "
                      "(300 s), then stops; `dblog run` restarts from the committed offsets")
_METRICS = Ignored("Debezium's JMX metrics; dblog's are served at /metrics on http.port (docs/operations.md), and "
                   "no record changes")
_JAVA_PLUGIN = "a Java class loaded into Debezium"
_REMOVE = "remove it"
_CONFIGURATION_BASED = Refused("goes with snapshot.mode = configuration_based, which dblog does not run",
                               "use snapshot.mode initial or no_data (docs/debezium.md, Snapshot modes)")
_KAFKA_CLIENT = ("dblog's Kafka clients take the bootstrap servers, TLS and SASL settings (security.protocol, "
                 "sasl.mechanism, sasl.jaas.config, ssl.* with PEM files) only")

# key -> answer. A key ending in "." or "*" is a prefix (its longest match answers).
ANSWERS: dict[str, Mapped | Ignored | Refused] = {
    # --- Kafka Connect's own keys (SourceConnectorConfig) ---
    "name": Ignored("Kafka Connect's name of the connector; dblog's `name` is topic.prefix"),
    "connector.class": Mapped("checked: Debezium's MySQL or MariaDB connector"),
    "connector.plugin.version": Ignored("Kafka Connect's choice among installed plugin versions"),
    "tasks.max": Ignored("the MySQL connector runs one task, and dblog one engine"),
    "tasks.max.enforce": Ignored("the MySQL connector runs one task, and dblog one engine"),
    "key.converter": Mapped("sink.kafka.schemas (JsonConverter only)"),
    "value.converter": Mapped("sink.kafka.schemas (JsonConverter only)"),
    "key.converter.": Mapped("sink.kafka.schemas, sink.kafka.replace_null_with_default"),
    "value.converter.": Mapped("sink.kafka.schemas, sink.kafka.replace_null_with_default"),
    "key.converter.plugin.version": Ignored("Kafka Connect's choice among installed plugin versions"),
    "value.converter.plugin.version": Ignored("Kafka Connect's choice among installed plugin versions"),
    "header.converter.plugin.version": Ignored("Kafka Connect's choice among installed plugin versions"),
    "header.converter": Ignored("dblog writes its headers (__debezium.newkey / oldkey, __debezium.context.*, the "
                                "unwrap's) as the JsonConverter does, Debezium Server's default header format"),
    "transforms": Mapped("sink.kafka.transforms"),
    "transforms.": Mapped("sink.kafka.transforms"),
    "predicates": Mapped("sink.kafka.transforms (their predicates)"),
    "predicates.": Mapped("sink.kafka.transforms (their predicates)"),
    "config.action.reload": Ignored("Kafka Connect restarts a connector when its config provider's values change; "
                                    "dblog reads its configuration once, at start"),
    "errors.": Ignored("Kafka Connect's handling of records its converters or transforms fail on (and Debezium's "
                       "retries of connection errors): dblog stops on a record it cannot write, and `dblog run` "
                       "restarts it from the committed offsets for source.reconnect_timeout_seconds; no record is "
                       "skipped"),
    # topic.creation.default.* and topic.creation.groups are read by their step (sink.kafka.create_topics,
    # partitions, replication_factor, topic_properties; groups refused); any other is left over.
    "topic.creation.": Refused("not a topic creation setting of Kafka Connect's connector configuration",
                               "remove it (topic.creation.default.* are read)"),
    "exactly.once.support": Ignored("Kafka Connect's exactly-once source support: dblog writes at least once, as "
                                    "Debezium without it, with an idempotent producer, and commits its offsets only "
                                    "after Kafka's acknowledgement"),
    "transaction.boundary": Ignored("goes with exactly.once.support: Kafka transactions, which dblog's producer does "
                                    "not use (at-least-once, as Debezium without them)"),
    "transaction.boundary.interval.ms": Ignored("goes with exactly.once.support: Kafka transactions, which dblog's "
                                                "producer does not use"),
    "offsets.storage.topic": Ignored("Kafka Connect's offsets topic of this connector; dblog keeps its offsets in "
                                     "offsets.path"),
    # The Kafka clients' settings dblog knows are read by their steps; the others are left over.
    "producer.override.": Refused(_KAFKA_CLIENT + ", and of the producer's: acks, linger.ms, max.request.size, "
                                  "buffer.memory, delivery.timeout.ms, compression.type (sink.kafka.*)", _REMOVE),
    # --- the connection ---
    "topic.prefix": Mapped("name"),
    "database.hostname": Mapped("source.host"),
    "database.port": Mapped("source.port"),
    "database.user": Mapped("source.user"),
    "database.password": Mapped("source.password (or _env / _file)"),
    "database.server.id": Mapped("source.server_id"),
    "database.server.id.offset": Ignored("the server id of Debezium's snapshot connection (database.server.id + "
                                         "offset); dblog's snapshot reads are plain queries that need none"),
    "database.query.timeout.ms": Ignored("a JDBC statement timeout; dblog's queries read one chunk each "
                                         "(snapshot.chunk_size rows), and a lost connection is retried for "
                                         "source.reconnect_timeout_seconds"),
    "database.initial.statements": Refused("dblog runs no statements of yours on its connections",
                                           "set what they set as the server's defaults or the user's, and remove it"),
    "database.jdbc.driver": _JDBC,
    "database.protocol": _JDBC,
    "database.allowPublicKeyRetrieval": Ignored("a JDBC driver setting; dblog's client asks for the key itself "
                                                "when it needs it"),
    "database.ssl.mode": Mapped("source.tls.mode"),
    "database.ssl.keystore": Mapped("source.tls.cert / key: refused as a Java key store, with how to export PEM"),
    "database.ssl.keystore.": Mapped("source.tls.cert / key: refused as a Java key store, with how to export PEM"),
    "database.ssl.truststore": Mapped("source.tls.ca: refused as a Java key store, with how to export PEM"),
    "database.ssl.truststore.": Mapped("source.tls.ca: refused as a Java key store, with how to export PEM"),
    "database.ssl.": Refused("not a TLS setting of Debezium's MySQL connector",
                             "remove it (docs/debezium.md, TLS)"),
    "connect.timeout.ms": _RECONNECTS,
    "connect.keep.alive": _RECONNECTS,
    "connect.keep.alive.interval.ms": _RECONNECTS,
    "connection.validation.timeout.ms": Ignored("how long Kafka Connect's validation of the configuration may "
                                                "take; `dblog check` checks the connection"),
    "use.nongraceful.disconnect": Ignored("how Debezium's binlog client closes its socket; dblog closes its own"),
    "retriable.restart.connector.wait.ms": _RECONNECTS,
    "binlog.net.write.timeout": Ignored("the binlog connection's net_write_timeout; dblog keeps the server's"),
    "binlog.net.read.timeout": Ignored("the binlog connection's net_read_timeout; dblog keeps the server's"),
    "binlog.buffer.size": Ignored("Debezium's look-ahead buffer for transactions it may need to read twice; dblog "
                                  "holds each transaction's events itself (source.max_held_xa_rows for XA)"),
    "executor.shutdown.timeout.ms": Ignored("dblog stops within stop_timeout_seconds"),
    # --- what is captured ---
    "database.include.list": Mapped("source.include"),
    "database.exclude.list": Mapped("source.exclude"),
    "table.include.list": Mapped("source.include"),
    "table.exclude.list": Mapped("source.exclude"),
    "table.ignore.builtin": Mapped("source.exclude"),
    "column.include.list": Mapped("columns.include"),
    "column.exclude.list": Mapped("columns.exclude"),
    "column.mask.": Mapped("[[columns.rules]]"),
    "column.truncate.": Mapped("[[columns.rules]]"),
    "column.propagate.source.type": Mapped("columns.propagate_source_type"),
    "datatype.propagate.source.type": Mapped("columns.propagate_data_types"),
    "message.key.columns": Mapped("[[sink.kafka.message_key]]"),
    "skipped.operations": Mapped("sink.kafka.skipped_operations"),
    "gtid.source.includes": Refused("Debezium then reads only the events of these GTID sources; dblog reads the "
                                    "events of every source in the binlog",
                                    "remove it; choose what is captured with table.include.list"),
    "gtid.source.excludes": Refused("Debezium then skips the events of these GTID sources; dblog reads the events of "
                                    "every source in the binlog",
                                    "remove it; choose what is captured with table.include.list"),
    "gtid.source.filter.dml.events": Ignored("goes with gtid.source.includes / excludes (refused when given)"),
    "gtid.ignore.on.recovery": Refused("Debezium's schema history recovery skips these GTIDs; dblog has no recovery "
                                       "mode", _REMOVE),
    # --- snapshots ---
    "snapshot.mode": Mapped("snapshot.startup"),
    "snapshot.mode.custom.name": Refused("goes with snapshot.mode = custom, " + _JAVA_PLUGIN,
                                         "use snapshot.mode initial or no_data"),
    "snapshot.mode.configuration.based.snapshot.data": _CONFIGURATION_BASED,
    "snapshot.mode.configuration.based.snapshot.schema": _CONFIGURATION_BASED,
    "snapshot.mode.configuration.based.start.stream": _CONFIGURATION_BASED,
    "snapshot.mode.configuration.based.snapshot.on.schema.error": _CONFIGURATION_BASED,
    "snapshot.mode.configuration.based.snapshot.on.data.error": _CONFIGURATION_BASED,
    "snapshot.query.mode": Refused("custom: " + _JAVA_PLUGIN + " that writes the snapshot's queries; dblog reads "
                                   "each table by key ranges", "remove it (select_all is what dblog does)"),
    "snapshot.query.mode.custom.name": Refused("goes with snapshot.query.mode = custom, " + _JAVA_PLUGIN, _REMOVE),
    "snapshot.select.statement.overrides": Refused(
        "dblog's snapshots read every row of a table", "send an execute-snapshot signal with additional-conditions"),
    "snapshot.include.collection.list": Refused(
        "dblog's start-up snapshot reads every captured table",
        "start with snapshot.mode = no_data and send an execute-snapshot signal naming the tables"),
    "snapshot.fetch.size": _BLOCKING_SNAPSHOT,
    "snapshot.max.threads": _BLOCKING_SNAPSHOT,
    "snapshot.max.threads.multiplier": _BLOCKING_SNAPSHOT,
    "legacy.snapshot.max.threads": _BLOCKING_SNAPSHOT,
    "snapshot.delay.ms": _BLOCKING_SNAPSHOT,
    "snapshot.lock.timeout.ms": Ignored("dblog's snapshots take no locks"),
    "snapshot.locking.mode": Ignored("dblog's snapshots take no locks"),
    "snapshot.tables.order.by.row.count": _BLOCKING_SNAPSHOT,
    "min.row.count.to.stream.results": _BLOCKING_SNAPSHOT,
    "query.fetch.size": _JDBC,
    "internal.snapshot.scan.all.columns.force": _BLOCKING_SNAPSHOT,
    "streaming.delay.ms": Ignored("only when Debezium starts streaming after its snapshot; dblog streams from the "
                                  "start, and the records are the same"),
    "incremental.snapshot.chunk.size": Mapped("snapshot.chunk_size"),
    "incremental.snapshot.watermarking.strategy": Mapped("snapshot.watermarks"),
    "incremental.snapshot.allow.schema.changes": Ignored("dblog always allows DDL during snapshots (the table is "
                                                         "read again)"),
    "read.only": Mapped("snapshot.watermarks = \"gtid\""),
    # --- signals and notifications ---
    "signal.enabled.channels": Mapped("signals.table / signals.kafka_topic"),
    "signal.data.collection": Mapped("signals.table"),
    "signal.kafka.topic": Mapped("signals.kafka_topic"),
    "signal.kafka.bootstrap.servers": Mapped("kafka.bootstrap_servers"),
    "signal.kafka.groupId": Ignored("dblog reads the signal topic without a consumer group (it keeps the offsets "
                                    "itself)"),
    "signal.kafka.poll.timeout.ms": Ignored("dblog polls the signal topic every signals.kafka_poll_interval_seconds "
                                            "(0.5 s)"),
    "signal.poll.interval.ms": Ignored("how often Debezium polls its signal channels; dblog reads the signal table's "
                                       "rows from the binlog and polls Kafka every 0.5 s"),
    "signal.consumer.": Refused(_KAFKA_CLIENT, _REMOVE),
    "notification.enabled.channels": Mapped("notifications.kafka_topic (sink); log and jmx: see the notes"),
    "notification.sink.topic.name": Mapped("notifications.kafka_topic"),
    # --- the records ---
    "decimal.handling.mode": Mapped("sink.kafka.decimal_handling_mode"),
    "time.precision.mode": Mapped("sink.kafka.time_precision_mode"),
    "bigint.unsigned.handling.mode": Mapped("sink.kafka.bigint_unsigned_handling_mode"),
    "binary.handling.mode": Mapped("sink.kafka.binary_handling_mode"),
    "enable.time.adjuster": Refused("false: Debezium leaves two-digit years in strings as they are; dblog reads "
                                    "them as MySQL does (00-69: 20xx, 70-99: 19xx), as with true", _REMOVE),
    "schema.name.adjustment.mode": Refused("avro / avro_unicode: Debezium replaces the characters Avro names cannot "
                                           "hold in schema names; dblog writes JSON, with the names as they are",
                                           "remove it (none is what dblog does)"),
    "include.query": Refused("true: Debezium writes each change's SQL statement into source.query; dblog does not "
                             "(the field is null, as with Debezium's default)", _REMOVE),
    "include.schema.changes": Mapped("sink.kafka.schema_changes"),
    "include.schema.comments": Refused("true: Debezium puts the columns' comments into its schema change records; "
                                       "dblog does not", _REMOVE),
    "tombstones.on.delete": Mapped("sink.kafka.tombstones"),
    "extended.headers.enabled": Mapped("sink.kafka.extended_headers"),
    "provide.transaction.metadata": Mapped("sink.kafka.transaction_metadata"),
    "transaction.metadata.factory": Refused(_JAVA_PLUGIN + " that makes the transaction records", _REMOVE),
    "sourceinfo.struct.maker": Refused(_JAVA_PLUGIN + " that makes the records' source block", _REMOVE),
    "converters": Refused("Debezium's custom converters are Java classes (CustomConverter)",
                          "remove them; dblog writes each column as Debezium's own converters do "
                          "(docs/debezium.md, Column options)"),
    "converters.": Refused("goes with converters (Java classes)", _REMOVE),
    "post.processors": Refused("Debezium's post processors are Java classes (e.g. the column reselector)", _REMOVE),
    "post.processors.": Refused("goes with post.processors (Java classes)", _REMOVE),
    "event.processing.failure.handling.mode": Refused(
        "warn / skip: Debezium skips an event it cannot process; dblog stops on it, never skipping a change",
        "remove it (fail is what dblog does)"),
    "event.deserialization.failure.handling.mode": Refused(
        "warn / skip: Debezium skips a binlog event it cannot decode; dblog stops on it, never skipping a change",
        "remove it (fail is what dblog does)"),
    "inconsistent.schema.handling.mode": Refused(
        "warn / skip: Debezium skips the changes of a table missing from its schema history; dblog reads the table's "
        "definition from the server and stops when it cannot", "remove it (fail is what dblog does)"),
    # --- topics, heartbeats ---
    "topic.naming.strategy": Mapped("sink.kafka.topic"),
    "topic.delimiter": Mapped("sink.kafka.topic"),
    "topic.transaction": Mapped("sink.kafka.transaction_topic"),
    "topic.heartbeat.prefix": Mapped("sink.kafka.heartbeat_topic"),
    "topic.heartbeat.name": Mapped("sink.kafka.heartbeat_topic"),
    "heartbeat.topics.prefix": Ignored("Debezium 1.x's key, which Debezium 3.6 does not read either: its "
                                       "topic naming strategy names the heartbeat topic from topic.heartbeat.prefix "
                                       "(or topic.heartbeat.name), and so does dblog"),
    "topic.cache.size": Ignored("a cache of Debezium's topic naming strategy"),
    "heartbeat.interval.ms": Mapped("sink.kafka.heartbeat_interval_ms"),
    "heartbeat.action.query": Mapped("sink.kafka.heartbeat_action_query"),
    # --- Debezium's internals ---
    "max.batch.size": _QUEUE,
    "max.queue.size": _QUEUE,
    "max.queue.size.in.bytes": _QUEUE,
    "poll.interval.ms": _QUEUE,
    "ddl.parser.type": Ignored("Debezium's DDL parser; dblog parses DDL itself"),
    "memory.management.schemas.class": Ignored("how Debezium holds its table schemas in memory"),
    "memory.management.tables.class": Ignored("how Debezium holds its table schemas in memory"),
    "internal.log.position.check.enable": Ignored("Debezium's check that its binlog position still exists; dblog "
                                                  "always checks it, and stops saying so when it is purged"),
    "internal.advanced.metrics.enable": _METRICS,
    "statistics.metrics.enabled": _METRICS,
    "custom.metric.tags": Ignored("tags added to Debezium's JMX MBean names; dblog's metrics (/metrics on "
                                  "http.port) carry none, and no record changes"),
    "custom.sanitize.pattern": Ignored("which keys Debezium masks when it logs its configuration; dblog never logs "
                                       "a secret setting's value"),
    "guardrail.collections.max": Refused("Debezium stops (or warns) past this many captured tables; dblog has no "
                                         "such limit", "remove it; `dblog check` lists the captured tables"),
    "guardrail.collections.limit.action": Ignored("goes with guardrail.collections.max (refused when given)"),
    "openlineage.integration.enabled": Refused("true: Debezium emits OpenLineage events; dblog does not", _REMOVE),
    "openlineage.": Ignored("goes with openlineage.integration.enabled (refused when true)"),
    "schema.history.internal": _HISTORY,
    "schema.history.internal.": _HISTORY,
    "internal.schema.history.internal.": _HISTORY,
    "database.history.": _HISTORY,
    "offset.storage": Ignored("dblog keeps its offsets in the file offsets.path (dblog-data/offsets.json)"),
    "offset.storage.": Ignored("dblog keeps its offsets in the file offsets.path (dblog-data/offsets.json)"),
    "offset.flush.interval.ms": Ignored("dblog commits its offsets every offsets.commit_interval_seconds"),
    "offset.flush.timeout.ms": Ignored("dblog commits its offsets every offsets.commit_interval_seconds"),
    # --- Debezium 1.x's names ---
    "database.server.name": Refused("Debezium 1.x's name of topic.prefix", "rename it topic.prefix"),
    "database.whitelist": Refused("Debezium 1.x's name", "rename it database.include.list"),
    "database.blacklist": Refused("Debezium 1.x's name", "rename it database.exclude.list"),
    "table.whitelist": Refused("Debezium 1.x's name", "rename it table.include.list"),
    "table.blacklist": Refused("Debezium 1.x's name", "rename it table.exclude.list"),
    # --- Debezium Server (its keys as the file writes them; debezium.source.* are the connector's) ---
    "debezium.api.": Ignored("Debezium Server's REST API; dblog's signals go through `dblog signal`"),
    "debezium.sink.type": Mapped("sink.type = \"kafka\""),
    "debezium.sink.kafka.producer.": Refused(_KAFKA_CLIENT + ", and of the producer's: acks, linger.ms, "
                                             "max.request.size, buffer.memory, delivery.timeout.ms, compression.type "
                                             "(sink.kafka.*)", _REMOVE),
    "debezium.sink.kafka.wait.message.delivery.timeout.ms": Mapped(
        "ignored with a note: dblog waits for every acknowledgement, up to sink.kafka.delivery_timeout_seconds"),
    "debezium.sink.": Refused("not a setting of Debezium Server's Kafka sink", _REMOVE),
    "debezium.source.": Mapped("the connector's keys, answered as above"),
    "debezium.format.key": Mapped("sink.kafka.schemas (json only)"),
    "debezium.format.value": Mapped("sink.kafka.schemas (json only)"),
    "debezium.format.key.": Mapped("sink.kafka.schemas, sink.kafka.replace_null_with_default"),
    "debezium.format.value.": Mapped("sink.kafka.schemas, sink.kafka.replace_null_with_default"),
    "debezium.format.header": Mapped("json only: dblog writes its headers as JSON"),
    "debezium.format.header.": Ignored("dblog writes its headers as the JsonConverter does"),
    "debezium.format.schema.registry.url": Ignored("a schema registry's, used by the avro and protobuf formats only "
                                                   "(refused): dblog writes JSON"),
    "debezium.format.apicurio.registry.": Ignored("a schema registry's, used by the avro and protobuf formats only "
                                                  "(refused): dblog writes JSON"),
    "debezium.format.": Refused("not a Debezium Server format setting",
                                "remove it (debezium.format.key / debezium.format.value = json, "
                                "debezium.format.value.schemas.enable)"),
    "debezium.transforms": Mapped("sink.kafka.transforms"),
    "debezium.transforms.": Mapped("sink.kafka.transforms"),
    "debezium.predicates": Mapped("sink.kafka.transforms (their predicates)"),
    "debezium.predicates.": Mapped("sink.kafka.transforms (their predicates)"),
    "quarkus.http.port": Mapped("http.port (dblog's health and metrics endpoint)"),
    "quarkus.http.host": Mapped("http.host"),
    "quarkus.": Ignored("Debezium Server's Quarkus runtime (logging, TLS of its HTTP server): dblog's are "
                        "--log-level / --log-format and [http]"),
}


def answer(key: str) -> Mapped | Ignored | Refused | None:
    """The answer for `key`: its own, else its longest prefix's; None: dblog does not know it."""
    if key in ANSWERS:
        return ANSWERS[key]
    prefixes = [prefix for prefix in ANSWERS if prefix.endswith(".") and key.startswith(prefix)]
    return ANSWERS[max(prefixes, key=len)] if prefixes else None


def example_key(listed: str) -> str:
    """A key as a configuration writes it, for a listed key that is a pattern or prefix
    (`column.mask.with.(d+).chars` → `column.mask.with.12.chars`, `debezium.source.*` → one)."""
    return (listed.replace("([^.]+)", "SHA-256").replace("(.+)", "salt").replace("(d+)", "12")
            .replace("*", "example"))


_DEFAULTS = {key: default for key, default, _ in (*CONNECTOR_KEYS, *SERVER_KEYS) if default is not None}


def debezium_default(key: str) -> str | None:
    """Debezium's default value of `key` (a connector key, or a Debezium Server one)."""
    return _DEFAULTS.get(key)


def at_default(key: str, value: str) -> bool:
    """`value` is Debezium's default for `key` (compared as Debezium reads it: trimmed, case-
    insensitively, a list item by item)."""
    default = debezium_default(key)
    if default is None:
        return False

    def normal(text: str) -> list[str]:
        return [part.strip().lower() for part in text.split(",")]
    return normal(value) == normal(default)
