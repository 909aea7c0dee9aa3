"""Issue 25, item 1, end to end on the real MariaDB: an XA transaction's rows, held from its
XA PREPARE and released inside its XA COMMIT's transaction, reach every sink (JSON lines, Kafka,
Iceberg) with the XA COMMIT's coordinates, never the PREPARE's. With the PREPARE's, Iceberg
dropped them as already held once a later commit had reached the table (`_is_new`), an XA
COMMIT in another GTID domain stopped the engine with a false "binlog was reset", and the JSON
lines / Kafka positions ran backwards. Covered: the plain case, the XA COMMIT in another domain,
a clean dblog restart and a kill -9 of `dblog run` between PREPARE and COMMIT; an XA ROLLBACK's
rows never appear."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from support.harness import EngineProcess, EngineThread, config_data, spark_settings
from support.kafka_topics import decode, topic_records

from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress
from dblog.runtime.config import parse_config
from dblog.runtime.offset_store import OffsetStore
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)

SINKS = ["jsonl", "kafka", pytest.param("iceberg", marks=pytest.mark.spark)]

HELD, UNDONE, BEFORE, AFTER, LATER = 1, 3, 2, 4, 5  # ids: committed XA, rolled-back XA, plain inserts


# --- the source side ------------------------------------------------------------------------------


def _run(mariadb, database: str, statements: list[str], domain: int | None = None) -> str:
    """Runs the statements in one session, which then ends (a prepared XA transaction outlives
    it); returns the GTID of the last transaction it logged (`@@last_gtid`)."""
    connection = mariadb.connect(database)
    try:
        with connection.cursor() as cursor:
            if domain is not None:
                cursor.execute(f"SET SESSION gtid_domain_id = {domain}")
            for sql in statements:
                cursor.execute(sql)
            cursor.execute("SELECT @@last_gtid")
            return cursor.fetchone()[0]
    finally:
        connection.close()


def _prepare(mariadb, database: str, xid: str, row: int) -> str:
    return _run(mariadb, database, [f"XA START '{xid}'", f"INSERT INTO t VALUES ({row})", f"XA END '{xid}'",
                                    f"XA PREPARE '{xid}'"])


def _insert(mariadb, database: str, row: int) -> str:
    return _run(mariadb, database, [f"INSERT INTO t VALUES ({row})"])


def _source_ids(mariadb, database: str) -> list[int]:
    return sorted(row[0] for row in mariadb.execute(f"SELECT id FROM `{database}`.t"))


def _executed(mariadb) -> GtidSet:
    return GtidSet.parse(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0], "mariadb")


def _transaction_span(mariadb, file: str, gtid: str) -> tuple[int, int]:
    """The byte range of transaction `gtid` in binlog `file`: from its GTID event to the next
    transaction's GTID event (or the file's last event's end)."""
    events = mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'")
    starts = [index for index, event in enumerate(events) if event[2] == "Gtid" and gtid in event[5].split()]
    assert starts, f"no GTID event {gtid} in {file}"
    index = starts[0]
    following = [event[1] for event in events[index + 1:] if event[2] == "Gtid"]
    return events[index][1], following[0] if following else events[-1][4]


@pytest.fixture(autouse=True)
def _xa_tests_one_at_a_time(xa_one_at_a_time):
    """Server-wide XA ids: see the fixture."""


@pytest.fixture
def table_t(mariadb, database):
    """`t (id INT PRIMARY KEY)` holding 0 and 10, as in the issue."""
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (0), (10)")


# --- the sink side --------------------------------------------------------------------------------


class Output:
    """One sink under test: its config sections and what it holds for table t."""

    def __init__(self, kind: str, request, mariadb, database: str, workdir: Path) -> None:
        self.kind, self.mariadb, self.database, self.workdir = kind, mariadb, database, workdir
        self.name = f"xa{uuid.uuid4().hex[:6]}"
        self.broker = request.getfixturevalue("broker") if kind == "kafka" else None
        self.spark = request.getfixturevalue("spark") if kind == "iceberg" else None
        self.qualified = f"`lake`.`{database}`.`t`"

    def config(self) -> dict:
        sections: dict = {"name": self.name, "snapshot": {"startup": "initial"}}
        if self.kind == "kafka":
            sections.update(kafka={"bootstrap_servers": self.broker.bootstrap}, sink={"type": "kafka"})
        elif self.kind == "iceberg":
            sections.update(sink={"type": "iceberg"}, spark=spark_settings(self.spark))
        return config_data(self.mariadb, self.database, self.workdir, **sections)

    def records(self) -> list[dict]:
        """The envelopes of table t's row changes, in the order the sink received them."""
        if self.kind == "jsonl":
            values = [record["value"] for record in read_json_lines(self.workdir / "changes.jsonl")]
        else:
            partitions = topic_records(self.broker.bootstrap, f"{self.name}.{self.database}.t")
            assert list(partitions) == [0]
            values = [decode(record)[1] for record in partitions[0]]
        return [value for value in values if value is not None and value.get("op") in ("c", "u", "d", "r")
                and value["source"]["table"] == "t"]

    def ids(self) -> list[int]:
        """The ids the sink holds for t: the table (Iceberg; a key held twice raises), or the
        records applied in order."""
        if self.kind == "iceberg":
            self.spark.sql(f"REFRESH TABLE {self.qualified}")
            ids = [row.id for row in self.spark.sql(f"SELECT id FROM {self.qualified}").collect()]
            assert len(ids) == len(set(ids)), f"a key twice in {self.qualified}: {sorted(ids)}"
            return sorted(ids)
        held: set[int] = set()
        for value in self.records():
            if value["op"] == "d":
                held.discard(value["before"]["id"])
            else:
                held.add(value["after"]["id"])
        return sorted(held)

    def sequences(self) -> dict[int, int]:
        """Iceberg: each row's `_dblog_seq` (its binlog file number, position and row)."""
        self.spark.sql(f"REFRESH TABLE {self.qualified}")
        return {row.id: row._dblog_seq for row in self.spark.sql(f"SELECT id, _dblog_seq FROM {self.qualified}").collect()}

    def holds(self, row: int) -> bool:
        if self.kind != "iceberg":
            return True  # the offsets are saved after the sink's flush: see _wait_committed
        try:
            return row in self.ids()
        except Exception as error:  # noqa: BLE001 - the table is created by the first commit
            if "TABLE_OR_VIEW_NOT_FOUND" in str(error) or "not found" in str(error).lower():
                return False
            raise


@pytest.fixture(params=SINKS)
def output(request, mariadb, database, tmp_path, table_t) -> Output:
    return Output(request.param, request, mariadb, database, tmp_path)


def _committed(config_path: str, gtid: str) -> bool:
    offsets = OffsetStore(config_path).load()
    return offsets is not None and Gtid.parse(gtid) in offsets.position


def _snapshot_done(offsets) -> bool:
    progress = SnapshotProgress.from_json(offsets.snapshot)
    return progress.current is None and bool(progress.completed_tables)


# --- what every case checks -----------------------------------------------------------------------


def _check(output: Output, commit_gtid: str, *, replayed: bool = False) -> None:
    """The sink holds exactly the source's rows; the rolled-back XA row never reached it; the
    released XA row carries the XA COMMIT's GTID, lies inside that transaction in the binlog
    and after the plain insert that committed before it; the streamed positions run forward,
    each row event once (`replayed`: a crash may deliver a tail again, each copy identical)."""
    expected = sorted([0, 10, HELD, BEFORE, AFTER, LATER])
    assert _source_ids(output.mariadb, output.database) == expected
    assert output.ids() == expected, f"{output.kind} holds {output.ids()}, the source {expected}"
    if output.kind == "iceberg":
        seq = output.sequences()
        assert seq[BEFORE] < seq[HELD] < seq[AFTER], f"_dblog_seq: {seq}"
        return
    records = output.records()
    assert all((value["after"] or value["before"])["id"] != UNDONE for value in records), "a rolled-back XA row"
    released = [value for value in records if value["after"] and value["after"]["id"] == HELD]
    assert len(released) == 1, f"the XA row delivered {len(released)} times: {released}"
    source = released[0]["source"]
    assert source["gtid"] == commit_gtid, f"the XA row carries {source['gtid']}, its XA COMMIT is {commit_gtid}"
    start, end = _transaction_span(output.mariadb, source["file"], commit_gtid)
    assert start <= source["pos"] <= end, f"the XA row at {source['file']}:{source['pos']}, its XA COMMIT at {start}-{end}"
    streamed = [value for value in records if value["op"] != "r"]
    seen: dict[tuple, tuple] = {}
    forward = []
    for value in streamed:
        s = value["source"]
        coordinate = (s["file"], s["pos"], s["row"])
        identity = (s["gtid"], value["op"], str(value["before"]), str(value["after"]))
        if coordinate in seen:
            assert replayed and seen[coordinate] == identity, \
                f"{coordinate} carries {identity} and {seen[coordinate]}"
            continue
        seen[coordinate] = identity
        forward.append((coordinate, s["gtid"], (value["after"] or value["before"])["id"]))
    for earlier, later in zip(forward, forward[1:]):
        assert earlier[0] < later[0], f"the positions run backwards: {earlier} then {later}"


# --- the cases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit_domain", [None, 1], ids=["same_domain", "commit_in_domain_1"])
def test_an_xa_commit_after_a_later_commit_reached_the_sink(mariadb, database, output, commit_domain):
    """(a) and (b): 'x1' (row 1) and 'x2' (row 3) prepared; row 2 committed and in the sink;
    then XA COMMIT 'x1' (in domain 0 or 1) and XA ROLLBACK 'x2'; rows 4 and 5 after."""
    config = parse_config(output.config())
    engine = EngineThread(config)
    try:
        engine.wait_for("COMPLETED")
        _prepare(mariadb, database, "x1", HELD)
        _prepare(mariadb, database, "x2", UNDONE)
        before = _insert(mariadb, database, BEFORE)
        engine.eventually(lambda: _committed(config.offsets.path, before) and output.holds(BEFORE),
                          message=f"{before} committed by the sink")
        commit = _run(mariadb, database, ["XA COMMIT 'x1'"], domain=commit_domain)
        _run(mariadb, database, ["XA ROLLBACK 'x2'"], domain=commit_domain)
        _insert(mariadb, database, AFTER)
        _run(mariadb, database, [f"INSERT INTO t VALUES ({LATER})"], domain=commit_domain)
        engine.until_caught_up()
    finally:
        engine.stop()
    assert commit_domain is None or commit.startswith(f"{commit_domain}-")
    _check(output, commit)
    assert OffsetStore(config.offsets.path).load().resume is None, "nothing held any more"


def test_an_xa_prepared_before_and_committed_after_a_clean_restart(mariadb, database, output):
    """(c): dblog stops cleanly with 'x1' and 'x2' prepared and row 2 in the sink; a new engine
    starts from the offsets, row 5 reaches the sink, then XA COMMIT 'x1', XA ROLLBACK 'x2'."""
    config = parse_config(output.config())
    first = EngineThread(config)
    try:
        first.wait_for("COMPLETED")
        _prepare(mariadb, database, "x1", HELD)
        _prepare(mariadb, database, "x2", UNDONE)
        _insert(mariadb, database, BEFORE)
        first.until_caught_up()
    finally:
        first.stop()
    offsets = OffsetStore(config.offsets.path).load()
    assert offsets.resume is not None and offsets.resume != offsets.position, "the prepared ones are read again"
    assert output.holds(BEFORE)
    second = EngineThread(config)
    try:
        later = _insert(mariadb, database, LATER)
        second.eventually(lambda: _committed(config.offsets.path, later) and output.holds(LATER),
                          message=f"{later} committed by the sink")
        commit = _run(mariadb, database, ["XA COMMIT 'x1'"])
        _run(mariadb, database, ["XA ROLLBACK 'x2'"])
        _insert(mariadb, database, AFTER)
        second.until_caught_up()
    finally:
        second.stop()
    _check(output, commit)
    assert OffsetStore(config.offsets.path).load().resume is None


def test_kill_9_of_dblog_run_between_xa_prepare_and_commit(mariadb, database, output, tmp_path):
    """(d): `dblog run` killed with 'x1' and 'x2' prepared and row 2 in the sink; restarted,
    then XA COMMIT 'x1' and XA ROLLBACK 'x2': nothing lost, nothing twice in the table, the XA
    row once with its XA COMMIT's GTID."""
    data = output.config()
    path = data["offsets"]["path"]
    engine = EngineProcess(data, tmp_path)
    try:
        engine.start()
        engine.wait_until(_snapshot_done)
        _prepare(mariadb, database, "x1", HELD)
        _prepare(mariadb, database, "x2", UNDONE)
        before = _insert(mariadb, database, BEFORE)
        engine.eventually(lambda: _committed(path, before) and output.holds(BEFORE),
                          message=f"{before} committed by the sink")
        engine.kill()
        offsets = OffsetStore(path).load()
        assert offsets.resume is not None and Gtid.parse(before) in offsets.position
        later = _insert(mariadb, database, LATER)  # while dblog is down
        engine.start()
        engine.eventually(lambda: _committed(path, later) and output.holds(LATER), message=f"{later} in the sink")
        commit = _run(mariadb, database, ["XA COMMIT 'x1'"])
        _run(mariadb, database, ["XA ROLLBACK 'x2'"])
        _insert(mariadb, database, AFTER)
        target = _executed(mariadb)
        engine.wait_until(lambda offsets: target.issubset(offsets.position) and offsets.resume is None)
    finally:
        engine.terminate()
        engine.kill()
    _check(output, commit, replayed=True)


@pytest.mark.parametrize("reader_process", [False, True], ids=["in-process", "reader-process"])
def test_rows_held_across_a_surrogate_key_are_keyed_as_of_their_xa_commit(mariadb, database, tmp_path,
                                                                          monkeypatch, reader_process):
    """Issue 36, item 9. A keyless table's row is updated by an XA transaction prepared before an
    execute-snapshot signal gives the table its surrogate key, and committed inside the first
    chunk's window (after the chunk's SELECT, which saw the old value; before its high
    watermark). The released change is keyed as of the XA COMMIT, so it drops the chunk's stale
    row of that key: the sink ends equal to the source, its record keyed {"uid": 5}. With the
    PREPARE's empty key the window dropped nothing, the chunk's old row came after the update
    (a stale row) and the update's key was {}. In-process (what `auto` picks on one core) and
    with the reader process, which keys the same way."""
    from dblog.demo.verify import compare_sink_with_source
    from dblog.mysql.chunk_reader import ChunkReader
    from dblog.mysql.source_connection import SourceConnection
    from dblog.runtime.signal_client import SIGNAL_TABLE_DDL, send_via_table
    from dblog.core.events import TableId

    table = TableId(database, "k")
    mariadb.execute(f"CREATE TABLE `{database}`.k (uid INT NOT NULL, v VARCHAR(20), UNIQUE KEY (uid))")
    mariadb.execute(f"INSERT INTO `{database}`.k SELECT seq, 'old' FROM `{database}`.seq_1_to_20")
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    config = parse_config(config_data(mariadb, database, tmp_path, snapshot={"startup": "never", "chunk_size": 100},
                                      source={"reader_process": reader_process}))
    committed: list[str] = []
    original = ChunkReader.read_chunk

    def read_chunk(self, request):
        rows = original(self, request)
        if request.schema.table == table and not committed:  # after the SELECT, before the high watermark
            committed.append(_run(mariadb, database, ["XA COMMIT 'x1'"]))
        return rows

    monkeypatch.setattr(ChunkReader, "read_chunk", read_chunk)
    engine = EngineThread(config)
    try:
        prepared = _run(mariadb, database, ["XA START 'x1'", "UPDATE k SET v = 'xa' WHERE uid = 5", "XA END 'x1'",
                                            "XA PREPARE 'x1'"])
        engine.eventually(lambda: engine.engine.binlog is not None and Gtid.parse(prepared) in engine.engine.binlog.position,
                          message="the engine to hold the prepared x1")
        send_via_table(config, "execute-snapshot", {"data-collections": [rf"{database}\.k"], "surrogate-key": "uid"},
                       "surrogate")
        engine.wait_for("COMPLETED")
        engine.until_caught_up()
    finally:
        engine.stop()
    assert committed, "the chunk read committed x1"
    records = [record for record in read_json_lines(Path(config.sink.path))
               if record["value"] and record["value"]["source"]["table"] == "k"]
    reader = SourceConnection(lambda: mariadb.connect(), {table: ("uid",)})
    try:
        result = compare_sink_with_source(config.sink.path, reader, [table])
    finally:
        reader.close()
    assert result.equal and result.rows[str(table)] == 20, result.summary()
    [update] = [record for record in records if record["value"]["op"] == "u"]
    assert update["value"]["source"]["gtid"] == committed[0]
    assert update["key"] == {"uid": 5}, f"the released update is keyed {update['key']}"
