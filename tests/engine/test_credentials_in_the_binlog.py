"""No credential the server logged reaches any of dblog's outputs (issue 36, item 7).

Through the real path, a private MariaDB's binlog read by the engine, every statement kind that
carries one is run while dblog streams into each sink that writes statements (JSON lines, Kafka:
the schema change topic, every data topic, the notifications topic), with a snapshot paused
mid-table so that DDL on its table restarts it (TABLE_SCAN_RESTARTED carries the statement):
account statements in MariaDB's syntax and in MySQL's where MariaDB takes it (`IDENTIFIED WITH
… AS '<hash>'`), `SET PASSWORD` (logged with the password's hash), `GRANT … IDENTIFIED BY`, `SET
STATEMENT … FOR CREATE USER`, CREATE/ALTER SERVER and CHANGE MASTER (not logged by MariaDB),
tables with a CONNECTION string or a PASSWORD option (the Kafka sink's first start writes the
SHOW CREATE TABLE of one), and row changes of mysql.global_priv, which hold password hashes. Not
one of those secrets may be in the sink's output, the offsets, the notifications, dblog's log
records at any level, or the metrics; the statements' records must be there, with `<secret>`.

MySQL 8's binlog forms of them (no MySQL server here) go through the real `BinlogSource` from a
scripted primary: QUERY events built as MySQL writes them (libs/mysql/binlog/event/
statement_events.cpp, Query_event: the post-header, status variables, the default database and
the statement), their text as sql/sql_rewrite.cc's Consumer_type::BINLOG rewriters make it.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from prometheus_client import generate_latest
from support import hold_chunk_read
from support.harness import EngineThread, make_config, published
from support.kafka_topics import topic_records
from support.scripted_binlog import ScriptedPrimary

from dblog.core.ddl import classify_ddl
from dblog.core.events import SchemaChange, TableId
from dblog.core.gtid import Gtid
from dblog.core.redaction import SECRET
from dblog.mysql.source_connection import SourceConnection
from dblog.runtime.metrics import Metrics
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table

pytestmark = pytest.mark.timeout(300)


def _read_up_to_now(engine: EngineThread, mariadb) -> None:
    with SourceConnection(mariadb.connect) as reader:
        target = reader.server.executed_gtids()
    engine.eventually(lambda: target.issubset(engine.capture.position), message="the engine reading what ran")


def _kafka_text(bootstrap: str, name: str) -> str:
    """Every record of every topic whose name starts with `name` (schema changes, data)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        topics = sorted(topic for topic in consumer.topics() if topic.startswith(name))
    finally:
        consumer.close()
    assert name in topics, topics
    return "\n".join(f"{topic} {_text(record.key)} {_text(record.value)}" for topic in topics
                     for records in topic_records(bootstrap, topic).values() for record in records)


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


@pytest.mark.parametrize("sink", ["jsonl", "kafka"])
def test_no_credential_reaches_a_sink_a_notification_a_log_line_or_a_metric(mariadb, broker, database, tmp_path,
                                                                            caplog, monkeypatch, sink):
    db, tag = f"`{database}`", uuid.uuid4().hex[:8]
    secrets = {n: f"Pw{n}x{tag}" for n in range(1, 17)}
    accounts = [f"'dblog_{tag}_{n}'@'%'" for n in range(1, 6)]
    server, master = f"dblog_{tag}", f"dblog_{tag}"
    hashes = {n: mariadb.execute("SELECT PASSWORD(%s)", (secrets[n],))[0][0] for n in (3, 6, 7)}
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    mariadb.execute(f"INSERT INTO {db}.orders VALUES " + ", ".join(f"({i}, 'n{i}')" for i in range(1, 301)))
    # Before the first start: the Kafka sink's start-up records carry its SHOW CREATE TABLE.
    mariadb.execute(f"CREATE TABLE {db}.fed0 (id INT PRIMARY KEY) "
                    f"CONNECTION='mysql://remote:{secrets[15]}@127.0.0.1:1/d/t'")
    name = f"cred{tag}"
    notices = f"notices-{tag}"
    broker.create_topic(notices)
    sections = {"sink": {"type": "kafka"}} if sink == "kafka" else {}
    config = make_config(mariadb, database, tmp_path, name=name,
                         snapshot={"startup": "never", "chunk_size": 10},
                         source={"include": [rf"{database}\..*", r"mysql\..*"]},  # the system schema too: refused
                         kafka={"bootstrap_servers": broker.bootstrap},
                         notifications={"kafka_topic": notices}, **sections)
    statements = [
        f"CREATE USER {accounts[0]} IDENTIFIED BY '{secrets[1]}'",
        f"ALTER USER {accounts[0]} IDENTIFIED BY '{secrets[2]}'",
        f"SET PASSWORD FOR {accounts[0]} = PASSWORD('{secrets[3]}')",  # logged as ='<hash>'
        f"GRANT SELECT ON {db}.* TO {accounts[1]} IDENTIFIED BY '{secrets[4]}'",
        f"CREATE USER {accounts[2]} IDENTIFIED VIA mysql_native_password USING PASSWORD('{secrets[5]}')",
        f"ALTER USER {accounts[2]} IDENTIFIED WITH mysql_native_password AS '{hashes[6]}'",  # MySQL's syntax
        f"CREATE OR REPLACE USER {accounts[3]} IDENTIFIED BY PASSWORD '{hashes[7]}'",
        f"SET STATEMENT max_statement_time=100 FOR CREATE USER {accounts[4]} IDENTIFIED BY '{secrets[8]}'",
        f"CREATE SERVER {server} FOREIGN DATA WRAPPER mysql OPTIONS (USER 'r', PASSWORD '{secrets[9]}', "
        "HOST '127.0.0.1', DATABASE 'd')",
        f"ALTER SERVER {server} OPTIONS (PASSWORD '{secrets[10]}')",
        f"CHANGE MASTER '{master}' TO MASTER_HOST='127.0.0.1', MASTER_USER='r', MASTER_PASSWORD='{secrets[11]}'",
        # DDL of the table being read: restarts its snapshot, the statement in the notification
        f"ALTER TABLE {db}.orders ADD COLUMN extra INT, CONNECTION='mysql://r:{secrets[12]}@127.0.0.1:1/d/t'",
        f"CREATE TABLE {db}.fed (id INT PRIMARY KEY) CONNECTION='mysql://r:{secrets[13]}@127.0.0.1:1/d/t'",
        f"CREATE TABLE {db}.opt (id INT PRIMARY KEY) PASSWORD='{secrets[14]}'",
        # rows of a system table: never captured, even when the include patterns name it
        f"INSERT INTO mysql.global_priv (host, user, priv) VALUES ('%', 'dblog_{tag}_9', "
        f"'{{\"authentication_string\": \"*{secrets[16]}\"}}')",
        f"DELETE FROM mysql.global_priv WHERE user = 'dblog_{tag}_9'",
        f"INSERT INTO {db}.orders (id, note) VALUES (1000, 'after')",
    ]
    caplog.set_level(logging.DEBUG, logger="dblog")
    paused = []  # the second chunk's read waits for the pause signal: it lands mid-table
    held = hold_chunk_read(monkeypatch, TableId(database, "orders"), 2, lambda: paused)
    engine = EngineThread(config)
    try:
        send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.orders"]}, "s1")
        engine.eventually(lambda: held["reads"] == 2, message="the second chunk's read")
        send_via_table(config, "pause-snapshot", {}, "p1")
        paused.append(True)
        engine.wait_for("PAUSED")
        assert engine.capture.progress.current.started, "orders' snapshot is not under way"
        with mariadb.connect() as connection, connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        send_via_table(config, "resume-snapshot", {}, "r1")
        engine.wait_for("COMPLETED")
        _read_up_to_now(engine, mariadb)
        metrics = generate_latest(Metrics.of_engine(engine.engine).registry).decode()
        engine.until_caught_up()
    finally:
        engine.stop()
        for statement in [f"DROP USER IF EXISTS {', '.join(accounts)}", f"DROP SERVER IF EXISTS {server}",
                          f"RESET SLAVE '{master}' ALL", f"DELETE FROM mysql.global_priv WHERE user = 'dblog_{tag}_9'"]:
            mariadb.execute(statement)

    output = (_kafka_text(broker.bootstrap, name) if sink == "kafka"
              else Path(config.sink.path).read_text())
    log_records = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    places = {
        "the sink": output,
        "the offsets": Path(config.offsets.path).read_text(),
        "the notifications": repr([(n.type, n.data) for n in engine.notifications]),
        "the notifications topic": json.dumps(published(broker.bootstrap, notices)),
        "dblog's log records": log_records,
        "the metrics": metrics,
    }
    leaks = [(where, secret) for where, text in places.items()
             for secret in [*secrets.values(), *hashes.values(), *(h.lstrip("*") for h in hashes.values())]
             if secret in text]
    assert not leaks, leaks
    # The statements went through those paths, with their credentials replaced.
    assert f"CONNECTION='{SECRET}'" in output and "ADD COLUMN extra" in output
    restarted = [n for n in engine.notifications if n.type == "TABLE_SCAN_RESTARTED"]
    assert restarted and f"CONNECTION='{SECRET}'" in restarted[0].data["reason"]
    assert f"CONNECTION='{SECRET}'" in log_records  # the notification's log line
    if sink == "kafka":
        assert "fed0" in output  # its start-up record
    assert "global_priv" not in output
    assert "'after'" in output or '"after"' in output  # streaming went on past them


# MySQL 8.0+'s binlog text of each (sql/sql_rewrite.cc, Consumer_type::BINLOG), and the hash it
# carries; the salt bytes of a caching_sha2_password hash are 1..127 (generate_user_salt), written
# with append_query_string's backslash escapes. (logged, as the SchemaChange carries it)
HASH = "$A$005$\x0b'K\\m\x1fP=(Y\"3qf~Cz$hP9wOq1Vv0yqXUbA7eB5Hq8rmq2xG3sOZ9yvK4nWcD"
ESCAPED = HASH.replace("\\", "\\\\").replace("'", "\\'").replace('"', '\\"')
MYSQL_LOGGED = [
    (f"CREATE USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS '{ESCAPED}' REQUIRE NONE PASSWORD EXPIRE "
     "DEFAULT ACCOUNT UNLOCK",
     f"CREATE USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET} REQUIRE NONE PASSWORD EXPIRE "
     "DEFAULT ACCOUNT UNLOCK"),
    # SET PASSWORD, as MySQL logs it (Rewriter_set_password)
    (f"ALTER USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS '{ESCAPED}' RETAIN CURRENT PASSWORD",
     f"ALTER USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET} RETAIN CURRENT PASSWORD"),
    ("ALTER USER 'old'@'%' IDENTIFIED WITH 'mysql_native_password' AS '*6C8989366EAF75BB670AD8EA7A7FC1176A95CEF4'",
     f"ALTER USER 'old'@'%' IDENTIFIED WITH 'mysql_native_password' AS {SECRET}"),
    (f"CREATE TABLE `fed` (`id` int NOT NULL, PRIMARY KEY (`id`)) ENGINE=FEDERATED "
     f"CONNECTION='mysql://r:{ESCAPED}@h:3306/d/t'",
     f"CREATE TABLE `fed` (`id` int NOT NULL, PRIMARY KEY (`id`)) ENGINE=FEDERATED CONNECTION='{SECRET}'"),
]


def test_mysql_logged_statements_leave_the_binlog_source_without_their_credentials():
    primary = ScriptedPrimary("mysql")
    source_uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    for seq, (logged, _) in enumerate(MYSQL_LOGGED, 1):
        with primary.transaction(Gtid.mysql(source_uuid, seq)) as log:
            log.query(logged, "shop")
    changes = [event for event in primary.read() if isinstance(event, SchemaChange)]
    assert [change.sql for change in changes] == [redacted for _, redacted in MYSQL_LOGGED]
    assert classify_ddl(changes[-1].sql, changes[-1].db).tables == (TableId("shop", "fed"),)
