"""Into Kafka: the Kafka sink against the JSON-lines sink and a raw producer, in the same run.

A private Apache Kafka broker (`lab.localbroker`) is started for the section.
Two workloads, each run into both sinks:

- **snapshot**: the incremental snapshot of the quiet `orders_kafka` table (`--kafka-rows` rows,
  default 300,000: the shape of `orders`, keyed by `order_id`, generated on the server), from
  the loop's start to the COMPLETED notification, as the snapshot section measures it; the Kafka
  figure then also waits for the last commit (every record acknowledged) before it counts.
- **streaming**: a backlog burst on `orders_kafka` (`--burst-rows` changes in
  `--burst-txn-rows`-row transactions, as the streaming section writes it), streamed from the
  first change reaching the sink to the end of the commit that covers the last one.

Each Kafka figure's limit is the JSON-lines figure of the same workload (the issue's target:
≥ 0.8×). The baselines are the clients alone: the records the JSON-lines run wrote (keys and
values as the Kafka sink encodes them, built in memory before the clock starts) sent by a raw
confluent-kafka producer (librdkafka, what the sink uses) and a raw kafka-python producer (what
it used before), with the sink's producer settings, flushed at the end. The Kafka sink's
records are counted back from the topic (to its high watermark) and must equal the changes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from benchmarks.dataset import _GENERATED_ROW, DATABASE, BenchTable, BinlogRange, _unlogged, count_rows, executed_gtids
from benchmarks.engine_run import EngineRun
from benchmarks.figures import Figure, rate
from benchmarks.snapshot import snapshot_timeout
from benchmarks.streaming import write_burst
from dblog.core.events import TableId
from dblog.core.sql import quote_identifier as quote
from lab.localbroker import LocalBroker
from dblog.sinks.kafka.settings import KafkaSinkSettings

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

TABLE = TableId(DATABASE, "orders_kafka")


def measure_kafka(ctx: BenchContext) -> None:
    table = kafka_table(ctx, ctx.options.kafka_rows)
    with LocalBroker() as broker:
        _snapshot(ctx, broker, table)
        _streaming(ctx, broker, table)


def kafka_table(ctx: BenchContext, rows: int, batch: int = 100_000) -> BenchTable:
    """`orders_kafka`: `rows` generated orders keyed by `order_id`, written without binlog."""
    with _unlogged(ctx.db) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {quote(TABLE.table)}")
        cursor.execute(f"CREATE TABLE {quote(TABLE.table)} LIKE {quote(ctx.tables['orders'].table.table)}")
        cursor.execute(f"ALTER TABLE {quote(TABLE.table)} DROP PRIMARY KEY, ADD PRIMARY KEY (order_id)")
        for first in range(1, rows + 1, batch):
            last = min(first + batch - 1, rows)
            cursor.execute(f"INSERT INTO {quote(TABLE.table)} SELECT {_GENERATED_ROW} FROM seq_{first}_to_{last}")
    return BenchTable(TABLE, rows, "single integer (order_id BIGINT)", ("order_id",))


# --- the two workloads ----------------------------------------------------------------------------


def _snapshot(ctx: BenchContext, broker: LocalBroker, table: BenchTable) -> None:
    expected = count_rows(ctx.db, table.table)
    results = {}
    for sink in ("jsonl", "kafka"):
        name = f"kafka-snapshot-{sink}"
        run = EngineRun(ctx.engine_config(name, [table.table], _sink_config(ctx, name, sink),
                                          kafka={"bootstrap_servers": broker.bootstrap}))
        try:
            run.request_snapshot([table.table])
            run.start()
            run.wait_completed(snapshot_timeout(table.rows))
            run.finish()  # the last commit: for Kafka, every record acknowledged
        except BaseException:
            run.abandon()
            raise
        run.cpu_seconds = time.process_time() - run.started_cpu
        ended = _last_flush_end(run)
        seconds = max(run.snapshot_seconds, ended - _wall(run.started_at))
        results[sink] = (run, seconds, name)
    _report(ctx, broker, "snapshot", "incremental snapshot, quiet table", results, expected,
            ops=lambda run: run.sink.ops.get("r", 0))


def _streaming(ctx: BenchContext, broker: LocalBroker, table: BenchTable) -> None:
    options = ctx.options
    runs = {}
    for sink in ("jsonl", "kafka"):  # both take their binlog position before the burst
        name = f"kafka-streaming-{sink}"
        runs[sink] = (EngineRun(ctx.engine_config(name, [table.table], _sink_config(ctx, name, sink),
                                                   kafka={"bootstrap_servers": broker.bootstrap})), name)
    results = {}
    try:
        start = executed_gtids(ctx.db)
        counts = write_burst(ctx.db, table, options.burst_rows, options.burst_txn_rows)
        burst = BinlogRange(start, executed_gtids(ctx.db))
        total = sum(counts.values())
        for sink, (run, name) in runs.items():
            run.start()
            run.finish(burst.end, timeout=600 + total / 500)
            run.cpu_seconds = time.process_time() - run.started_cpu
            first = _wall(run.sink.first) if run.sink.first is not None else time.time()
            results[sink] = (run, _last_flush_end(run) - first, name)
    except BaseException:
        for run, _ in runs.values():
            run.abandon()
        raise
    _report(ctx, broker, "streaming", f"streaming a backlog burst ({options.burst_txn_rows}-row transactions)",
            results, total, ops=lambda run: run.sink.count)


# --- reporting ------------------------------------------------------------------------------------


def _report(ctx: BenchContext, broker: LocalBroker, workload: str, label: str, results: dict, expected: int,
            ops) -> None:
    jsonl_run, jsonl_seconds, jsonl_name = results["jsonl"]
    kafka_run, kafka_seconds, kafka_name = results["kafka"]
    path = ctx.workdir / f"{jsonl_name}.jsonl"
    records = _records(path)
    path.unlink()
    jsonl_rows = ops(jsonl_run)
    jsonl = ctx.report(Figure(
        f"kafka.{workload}.jsonl", "kafka", f"{label}, JSON-lines sink ({TABLE.table})", rate(jsonl_rows, jsonl_seconds),
        "rows/s", check=f"{jsonl_rows:,} changes reached the sink, {len(records):,} records written, expected "
                        f"{expected:,} changes", check_ok=jsonl_rows == expected,
        detail=_detail(jsonl_run, jsonl_rows, jsonl_seconds) | {"records": len(records)},
    ))
    kafka_rows = ops(kafka_run)
    on_topic = _count_topic(broker, f"bench-{kafka_name}.{TABLE.db}.{TABLE.table}")
    ctx.report(Figure(
        f"kafka.{workload}.kafka", "kafka", f"{label}, Kafka sink ({TABLE.table})", rate(kafka_rows, kafka_seconds),
        "rows/s", limit=jsonl.key,
        check=f"{kafka_rows:,} changes reached the sink, {on_topic:,} records on the topic, the JSON-lines run "
              f"wrote {len(records):,}",
        check_ok=kafka_rows == expected and on_topic == len(records),
        detail=_detail(kafka_run, kafka_rows, kafka_seconds) | {"records": on_topic},
    ))
    settings = KafkaSinkSettings()
    for client, produce in (("confluent-kafka", _raw_confluent), ("kafka-python", _raw_kafka_python)):
        topic = f"raw-{workload}-{client}"
        broker.create_topic(topic)
        send_all = produce(broker.bootstrap, topic, settings)  # connected, the topic's metadata known
        cpu = time.process_time()
        started = time.perf_counter()
        send_all(records)
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        on_topic = _count_topic(broker, topic)
        ctx.report(Figure(
            f"kafka.{workload}.raw-{client}", "kafka",
            f"{label}: the same records sent by a raw {client} producer, flushed", rate(len(records), seconds),
            "records/s", check=f"{on_topic:,} of {len(records):,} records on the topic",
            check_ok=on_topic == len(records),
            detail={"records": len(records), "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
                    "records_per_cpu_second": round(len(records) / cpu) if cpu else None},
        ))


def _detail(run: EngineRun, rows: int, seconds: float) -> dict:
    cpu = run.cpu_seconds  # this process's, every thread, from the loop's start to its end
    return {"rows": rows, "seconds": round(seconds, 3), "cpu_seconds_whole_run": round(cpu, 3),
            "rows_per_cpu_second": round(rows / cpu) if cpu else None, "flushes": len(run.sink.flushes)}


def _sink_config(ctx: BenchContext, name: str, sink: str) -> dict:
    if sink == "jsonl":
        return {"type": "jsonl", "path": str(ctx.workdir / f"{name}.jsonl")}
    return {"type": "kafka"}


def _wall(perf: float) -> float:
    """A perf_counter reading as wall-clock time (TimedSink's flushes are wall-clock)."""
    return time.time() - (time.perf_counter() - perf)


def _last_flush_end(run: EngineRun) -> float:
    return run.sink.flushes[-1][1] if run.sink.flushes else time.time()


def _records(path: Path) -> list[tuple[bytes | None, bytes | None]]:
    """The (key, value) pairs the Kafka sink would produce for the records of a JSON-lines file
    (the sink adds `transaction: null` to values and a tombstone after each delete)."""
    records = []
    with open(path, "rb") as lines:
        for line in lines:
            record = orjson.loads(line)
            key = orjson.dumps(record["key"]) if record["key"] is not None else None
            value = record["value"]
            value["transaction"] = None
            records.append((key, orjson.dumps(value)))
            if key is not None and value.get("op") == "d":
                records.append((key, None))
    return records


# --- the raw producers ----------------------------------------------------------------------------


def _raw_confluent(bootstrap: str, topic: str, settings: KafkaSinkSettings):
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 1, "linger.ms": settings.linger_ms,
        "partitioner": "murmur2_random", "delivery.report.only.error": True,
        "compression.type": settings.compression,
    })
    producer.list_topics(topic, timeout=30)

    def send_all(records: list) -> None:
        produce, poll = producer.produce, producer.poll
        for key, value in records:
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:  # the local queue is full: wait for acknowledgements
                    poll(0.05)
        if producer.flush(120):
            raise RuntimeError("the raw confluent-kafka producer did not get every record acknowledged")
        producer.close()

    return send_all


def _raw_kafka_python(bootstrap: str, topic: str, settings: KafkaSinkSettings):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                             max_in_flight_requests_per_connection=1, linger_ms=settings.linger_ms,
                             batch_size=512 * 1024,
                             compression_type=None if settings.compression == "none" else settings.compression)
    producer.partitions_for(topic)

    def send_all(records: list) -> None:
        try:
            send = producer.send
            for key, value in records:
                send(topic, key=key, value=value)
            producer.flush(120)
        finally:
            producer.close(timeout=5)

    return send_all


def _count_topic(broker: LocalBroker, topic: str, timeout: float = 120) -> int:
    """Records on every partition of `topic`, read from the beginning to the high watermark
    (as tests/support/kafka_topics.py reads)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20)
    try:
        deadline = time.monotonic() + timeout
        while not (partitions := consumer.partitions_for_topic(topic)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} does not exist")
            time.sleep(0.1)
        parts = [TopicPartition(topic, partition) for partition in sorted(partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        count = 0
        while True:
            count += sum(len(batch) for batch in consumer.poll(200).values())
            ends = {part: consumer.highwater(part) for part in parts}
            if all(end is not None and consumer.position(part) >= end for part, end in ends.items()):
                return count
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: not read to its end within {timeout:.0f} s")
    finally:
        consumer.close()
