"""A snapshot signalled while the engine catches up on a backlog (issue 29, item 3).

dblog is stopped, the server writes 20,000 transactions (updates, deletes and inserts of the
snapshotted table's rows, DDL half-way), then dblog restarts. The execute-snapshot signal is
in the backlog's first transactions, so the engine meets it while the rest of the backlog is
still to read: its chunks are read at the server's present position, far ahead of the reader,
and each window must stay open until the reader has consumed its high watermark. A window
that closed early would emit the present rows, then the backlog's older changes of those
rows after them: a consumer would see rows go back in time (and an update whose `before`
is not the row it had). While the first window waits, rows of its chunk are changed again
(after its high watermark): their changes must follow the snapshot's rows, not be lost."""

from __future__ import annotations

import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.events import TableId
from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)

ACCOUNTS = 3_000
BACKLOG = 20_000  # transactions, in two halves around the DDL


def _procedure(db: str, name: str, after_ddl: bool) -> str:
    """`name(first, count)`: transactions `first` … `first + count - 1`, by `i MOD 5`: an update
    of an account, an event inserted, an account deleted and inserted again under a new key,
    an event deleted, an account updated twice. After the DDL the new column is written too
    and every 8th transaction inserts into `extra`."""
    note = ", note = CONCAT('n', i)" if after_ddl else ""
    extra = "IF i MOD 8 = 3 THEN INSERT INTO extra VALUES (i, i * 2); END IF;" if after_ddl else ""
    return f"""
CREATE PROCEDURE {db}.{name}(IN first INT, IN count INT)
BEGIN
  DECLARE i INT DEFAULT first;
  WHILE i < first + count DO
    START TRANSACTION;
    CASE i MOD 5
      WHEN 0 THEN UPDATE {db}.accounts SET balance = balance + i{note} WHERE id = 1 + (i * 7919) MOD {ACCOUNTS};
      WHEN 1 THEN INSERT INTO {db}.events VALUES (i, 1 + i MOD {ACCOUNTS}, i MOD 100);
      WHEN 2 THEN
        DELETE FROM {db}.accounts WHERE id = 1 + (i * 104729) MOD {ACCOUNTS};
        INSERT IGNORE INTO {db}.accounts (id, balance) VALUES ({ACCOUNTS} + i, i);
      WHEN 3 THEN DELETE FROM {db}.events WHERE id = i - 2;
      ELSE
        UPDATE {db}.accounts SET balance = balance - 1 WHERE id = 1 + i MOD {ACCOUNTS};
        UPDATE {db}.accounts SET balance = balance * 2{note} WHERE id = 1 + i MOD {ACCOUNTS};
    END CASE;
    {extra}
    COMMIT;
    SET i = i + 1;
  END WHILE;
END"""


def _continuity_breaks(records: list[dict], table: str) -> list[str]:
    """Replaying `table`'s records in sink order: every update's and delete's `before` must be
    the row the replay holds for its key (on the columns both have: DDL adds one half-way), and
    no snapshot row may be older than the row it replaces. Keys the replay does not hold yet
    (changed before the engine's first position) are not judged."""
    rows: dict[tuple, dict] = {}
    breaks: list[str] = []
    for record in records:
        value = record["value"]
        source = value.get("source") or {}
        if f"{source.get('db')}.{source.get('table')}" != table or "op" not in value:
            continue
        key = tuple(record["key"].values())
        op, before, after = value["op"], value.get("before"), value.get("after")
        held = rows.get(key)
        if op in ("u", "d") and held is not None and before is not None:
            common = held.keys() & before.keys()
            if any(held[column] != before[column] for column in common):
                breaks.append(f"{op} of {key}: before {before} but the replay held {held}")
        if op == "d":
            rows.pop(key, None)
        else:
            rows[key] = after
    return breaks


def test_a_snapshot_signalled_in_a_backlog_waits_for_the_reader(mariadb, database, tmp_path):
    db = f"`{database}`"
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"{db}.dblog_signal"))
    mariadb.execute(f"CREATE TABLE {db}.accounts (id INT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL)")
    mariadb.execute(f"INSERT INTO {db}.accounts SELECT seq, seq FROM {db}.seq_1_to_{ACCOUNTS}")
    mariadb.execute(f"CREATE TABLE {db}.events (id INT NOT NULL PRIMARY KEY, account INT NOT NULL, "
                    "amount INT NOT NULL)")
    mariadb.execute(_procedure(db, "write_before", after_ddl=False))
    config = make_config(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 100})

    first = EngineThread(config)  # takes its position, then the outage
    first.until_caught_up()

    send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.accounts"]}, "in-backlog")
    mariadb.execute(f"CALL {db}.write_before(1, {BACKLOG // 2})")
    mariadb.execute(f"ALTER TABLE {db}.accounts ADD COLUMN note VARCHAR(20) NULL")
    mariadb.execute(f"CREATE TABLE {db}.extra (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)")
    mariadb.execute(_procedure(db, "write_after", after_ddl=True))
    mariadb.execute(f"CALL {db}.write_after({BACKLOG // 2 + 1}, {BACKLOG - BACKLOG // 2})")
    accounts = f"{database}.accounts"
    backlog_end = int(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0].split("-")[-1])

    restarted = EngineThread(config)
    # Changes of rows of the first chunk while its window waits: after its high watermark.
    def reading() -> bool:  # a window open, or (were windows not to wait) one closed already
        current = restarted.capture.progress.current
        return restarted.capture.window is not None or (current is not None and current.chunks > 0)

    restarted.eventually(reading, 120, interval=0.005, message="the snapshot's first window")
    low = mariadb.execute(f"SELECT MIN(id) FROM {db}.accounts")[0][0]
    mariadb.execute(f"UPDATE {db}.accounts SET balance = -balance, note = 'after' WHERE id < {low} + 20")
    mariadb.execute(f"DELETE FROM {db}.accounts WHERE id >= {low} + 20 AND id < {low} + 30")
    restarted.wait_for("COMPLETED", timeout=300)
    restarted.until_caught_up()

    records = list(read_json_lines(config.sink.path))
    ops = [(index, r["value"]["op"]) for index, r in enumerate(records)
           if r["value"].get("op") and r["value"]["source"]["table"] == "accounts"]
    streamed = [index for index, op in ops if op != "r"]
    snapshot = [index for index, op in ops if op == "r"]
    assert len(streamed) > BACKLOG // 2 and snapshot, "the backlog and the snapshot reached the sink"
    backlog_streamed = [index for index in streamed
                        if int(records[index]["value"]["source"]["gtid"].split("-")[-1]) <= backlog_end]
    # No snapshot row before the backlog's last change of the table: every window waited.
    assert max(backlog_streamed) < min(snapshot)
    # Each key's changes and snapshot row in commit order, those made while the first window
    # waited included (the window drops a key the binlog changes while it is open).
    assert _continuity_breaks(records, accounts) == []
    result = compare(mariadb, config.sink.path, [TableId(database, name) for name in ("accounts", "events", "extra")])
    assert result.equal, result.summary()
    assert "TABLE_SCAN_RESTARTED" in restarted.types(), "the ALTER met the open window: the table's read restarts"
