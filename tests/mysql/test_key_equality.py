"""Key equality follows the database (issue 6, item 4), on a real MariaDB.

Under a case/accent-insensitive or PAD SPACE collation 'abc', 'ABC', 'Àbc' and 'abc ' are one
primary-key value. Checked here: the window drops a chunk row when a collation-equal key
changes; the binlog marks a respelling of a key as a key change (so sinks delete the old
spelling); keyset paging visits every row once in server order; the engine under writers that
respell keys ends with a sink equal to the source, with no key held twice.
"""

from __future__ import annotations

import random
import threading
import unicodedata

import pymysql
import pytest
from support.harness import EngineThread, compare, make_config

from dblog.core.capture import ChangeCapture, ChunkRead, ChunkResult
from dblog.core.events import RowChange, TableId, TransactionEnd, TransactionStart
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.progress import SnapshotProgress, TableSnapshot
from dblog.core.window import GtidWatermarks, Window
from dblog.mysql.chunk_reader import ChunkRequest
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines

pytestmark = pytest.mark.timeout(600)


def _table(mariadb, database, ddl: str, name: str = "t") -> TableId:
    mariadb.execute(f"CREATE TABLE `{database}`.`{name}` {ddl}")
    return TableId(database, name)


# --- the window, model level ----------------------------------------------------------------------


def test_the_window_drops_a_chunk_row_when_a_collation_equal_key_changes(mariadb, database, source_connection):
    table = _table(mariadb, database, "(k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
    schema = source_connection.schemas.schema(table)
    low, high = GtidSet.parse("0-1-5", "mariadb"), GtidSet.parse("0-1-9", "mariadb")
    chunk = [(("abc",), {"k": "abc", "v": 1}), (("abd",), {"k": "abd", "v": 2}), (("xyz",), {"k": "xyz", "v": 3})]
    window = Window(table, chunk, GtidWatermarks(low, high), identity=schema.identity_of)
    assert not window.before_transaction(Gtid.mariadb(0, 1, 6))  # inside the window
    # Changes keyed by other spellings of the same server key: each drops the chunk row.
    window.observe(RowChange(table, "u", ("ABC",), {"k": "abc"}, {"k": "ABC", "v": 9}, before_key=("abc",)))
    window.observe(RowChange(table, "d", ("ÀBD ",), {"k": "ÀBD ", "v": 2}, None))
    window.observe(RowChange(table, "c", ("xyzz",), None, {"k": "xyzz", "v": 4}))  # a different key
    assert window.close() == [(("xyz",), {"k": "xyz", "v": 3})]
    # By raw value the spellings differ: a binary window would keep 'abd' as a stale read.
    binary = Window(table, chunk, GtidWatermarks(low, high))
    binary.before_transaction(Gtid.mariadb(0, 1, 6))
    binary.observe(RowChange(table, "d", ("ÀBD ",), {"k": "ÀBD ", "v": 2}, None))
    assert ("abd",) in [key for key, _ in binary.close()]


def test_a_composite_key_keeps_its_other_columns_exact(mariadb, database, source_connection):
    table = _table(mariadb, database, "(name VARCHAR(20) COLLATE utf8mb4_unicode_ci, n INT, PRIMARY KEY (name, n))")
    schema = source_connection.schemas.schema(table)
    assert schema.identity_of(("Straße", 1)) == schema.identity_of(("STRASSE  ", 1))
    assert schema.identity_of(("Straße", 1)) != schema.identity_of(("Straße", 2))
    marks = GtidWatermarks(GtidSet.parse("0-1-5", "mariadb"), GtidSet.parse("0-1-9", "mariadb"))
    window = Window(table, [(("Straße", 1), {}), (("Straße", 2), {})], marks, identity=schema.identity_of)
    window.before_transaction(Gtid.mariadb(0, 1, 7))
    window.observe(RowChange(table, "u", ("STRASSE", 1), {}, {}, before_key=("Straße", 1)))
    assert window.close() == [(("Straße", 2), {})]


def test_the_last_chunk_ends_at_a_respelled_max_key(mariadb, database, source_connection):
    """max_key was read as 'zzz'; by the last chunk the row is spelled 'ZZZ': the table is done,
    without one more (empty) chunk read."""
    table = _table(mariadb, database, "(k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY)")
    schema = source_connection.schemas.schema(table)
    position = GtidSet.parse("0-1-5", "mariadb")
    progress = SnapshotProgress([TableSnapshot(table, started=True, max_key=("zzz",))])
    capture = ChangeCapture(position, progress, chunk_size=2)
    read = capture.next_read()
    assert isinstance(read, ChunkRead)
    rows = [(("yyy",), {"k": "yyy"}), (("ZZZ",), {"k": "ZZZ"})]
    out = capture.chunk_read(read, ChunkResult(rows, GtidWatermarks(position, position), None, schema.identity_of))
    assert [n.data.get("status") for n in out if getattr(n, "type", None) == "TABLE_SCAN_COMPLETED"] == ["SUCCEEDED"]


def test_capture_drops_the_chunk_row_of_a_respelled_key(mariadb, database, source_connection):
    table = _table(mariadb, database, "(k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
    schema = source_connection.schemas.schema(table)
    progress = SnapshotProgress([TableSnapshot(table, started=True, max_key=("zzz",))])
    capture = ChangeCapture(GtidSet.parse("0-1-4", "mariadb"), progress, chunk_size=10)
    read = capture.next_read()
    rows = [(("abc",), {"k": "abc", "v": 1}), (("abd",), {"k": "abd", "v": 2})]
    marks = GtidWatermarks(GtidSet.parse("0-1-5", "mariadb"), GtidSet.parse("0-1-6", "mariadb"))
    assert capture.chunk_read(read, ChunkResult(rows, marks, None, schema.identity_of)) == []
    gtid = Gtid.mariadb(0, 1, 6)
    emitted = capture.on_event(TransactionStart(gtid))
    emitted += capture.on_event(RowChange(table, "u", ("abc ",), {"k": "abc", "v": 1}, {"k": "abc ", "v": 5},
                                          before_key=("abc",)))
    emitted += capture.on_event(TransactionEnd(gtid))
    changes = [(c.op, c.key) for c in emitted if isinstance(c, RowChange)]
    assert changes == [("u", ("abc ",)), ("r", ("abd",))]  # no stale snapshot read of 'abc'


# --- the binlog: a respelled key is a key change ----------------------------------------------------


def test_respelling_a_key_is_a_key_change_in_the_binlog(mariadb, database, source_connection, open_binlog, binlog_reader):
    table = _table(mariadb, database, "(k VARCHAR(20) COLLATE utf8mb4_general_ci, n INT, v INT, PRIMARY KEY (k, n))")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES ('abc', 1, 0), ('x', 1, 0)")
    start = source_connection.server.executed_gtids()
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for sql in ["UPDATE t SET k = 'ABC' WHERE k = 'abc'", "UPDATE t SET k = 'ÀBC  ' WHERE k = 'abc'",
                    "UPDATE t SET v = 1 WHERE k = 'abc'", "UPDATE t SET k = 'X' WHERE k = 'x'"]:
            cursor.execute(sql)
            connection.commit()
    end = source_connection.server.executed_gtids()
    source = open_binlog(start, table_filter=lambda t: t == table)
    events = binlog_reader(source, lambda event, _: isinstance(event, TransactionEnd) and end.issubset(source.position))
    changes = [(c.key, c.before_key) for c in events if isinstance(c, RowChange)]
    assert changes == [
        (("ABC", 1), ("abc", 1)),  # the server stores the new spelling: sinks must drop the old one
        (("ÀBC  ", 1), ("ABC", 1)),
        (("ÀBC  ", 1), None),  # not a key change
        (("X", 1), ("x", 1)),
    ]
    schema = source_connection.schemas.schema(table)
    assert len({schema.identity_of(key) for key, _ in changes}) == 2


# --- keyset paging --------------------------------------------------------------------------------


SPELLINGS = ["abc", "ABC", "Àbc", "abc ", "abç  ", "Straße", "STRASSE", "ß", "ss", "ı", "I", "i", "İ",
             "Ǆ", "ǅ", "dž", "a", "A", "á", "", " ", "z", "Z", "ž", "😀", "😁", "中", "ｚ"]


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_unicode_520_ci", "utf8mb4_unicode_nopad_ci",
                                       "utf8mb4_uca1400_ai_ci", "utf8mb4_bin"])
def test_keyset_paging_visits_every_row_once_in_server_order(mariadb, database, source_connection, collation):
    if not mariadb.execute("SELECT 1 FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY "
                           "WHERE FULL_COLLATION_NAME = %s", (collation,)):
        pytest.skip(f"no {collation} on this server")
    table = _table(mariadb, database, f"(name VARCHAR(20) COLLATE {collation}, n INT, PRIMARY KEY (name, n))")
    single = _table(mariadb, database, f"(k VARCHAR(20) COLLATE {collation} PRIMARY KEY)", "single")
    rng = random.Random(collation)
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for n in range(6):
            cursor.executemany("INSERT IGNORE INTO t VALUES (%s, %s)", [(s, n) for s in rng.sample(SPELLINGS, 12)])
        cursor.executemany("INSERT IGNORE INTO single VALUES (%s)", [(s,) for s in SPELLINGS])
        connection.commit()
    for t in (table, single):
        schema = source_connection.schemas.schema(t)
        columns = ", ".join(schema.key_columns)
        expected = [tuple(row) for row in mariadb.execute(
            f"SELECT {columns} FROM `{database}`.`{t.table}` ORDER BY {columns}")]
        for limit in (1, 2, 3, 7):
            max_key, after, seen = source_connection.chunks.max_key(schema), None, []
            while True:
                chunk = source_connection.chunks.read_chunk(ChunkRequest(schema, after, max_key, limit))
                seen += [schema.key_of(row) for row in chunk]
                if len(chunk) < limit or schema.identity_of(schema.key_of(chunk[-1])) == schema.identity_of(max_key):
                    break
                after = schema.key_of(chunk[-1])
            assert seen == expected, (t, limit)
            assert len({schema.identity_of(key) for key in seen}) == len(seen)


# --- the engine -----------------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "straße", "élan", "naïve", "café", "resume", "über",
         "ıstanbul", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu"]


def _spelling(rng: random.Random, word: str) -> str:
    """Another spelling of `word` that utf8mb4_general_ci considers the same value."""
    letters = [c if c == "ß" else c.upper() if rng.random() < 0.5 else c.lower() for c in word]  # 'ß'.upper() is 'SS'
    if rng.random() < 0.3:  # accents on or off
        letters = [unicodedata.normalize("NFC", c + "\u0301") if c in "aeiouAEIOU" and rng.random() < 0.5 else
                   ("".join(x for x in unicodedata.normalize("NFD", c) if not unicodedata.combining(x)) or c)
                   for c in letters]
    return "".join(letters) + " " * rng.choice([0, 0, 1, 2])


class _Respeller:
    """Writers that keep respelling keys (case, accents, trailing spaces) and their other columns,
    delete and re-insert rows under another spelling, and insert new ones."""

    def __init__(self, mariadb, database: str, writers: int = 3) -> None:
        self.mariadb, self.database = mariadb, database
        self.stop_flag = threading.Event()
        self.respelled = 0
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(seed,), daemon=True) for seed in range(writers)]
        for thread in self.threads:
            thread.start()

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        try:
            with self.mariadb.connect(self.database) as connection, connection.cursor() as cursor:
                connection.autocommit(True)
                while not self.stop_flag.is_set():
                    word, n = rng.choice(WORDS), rng.randrange(200)
                    action = rng.random()
                    try:
                        if action < 0.6:
                            self.respelled += cursor.execute(
                                "UPDATE t SET name = %s, v = v + 1 WHERE name = %s AND n = %s",
                                (_spelling(rng, word), word, n))
                        elif action < 0.75:
                            cursor.execute("BEGIN")
                            cursor.execute("DELETE FROM t WHERE name = %s AND n = %s", (word, n))
                            cursor.execute("INSERT IGNORE INTO t (name, n, v) VALUES (%s, %s, 0)",
                                           (_spelling(rng, word), n))
                            cursor.execute("COMMIT")
                        elif action < 0.85:
                            cursor.execute("INSERT IGNORE INTO t (name, n, v) VALUES (%s, %s, 0)",
                                           (_spelling(rng, word), n + 200))
                        elif action < 0.95:
                            cursor.execute("DELETE FROM t WHERE name = %s AND n = %s", (word, n))
                        else:  # the key moves to another value altogether
                            cursor.execute("UPDATE IGNORE t SET n = n + 1000 WHERE name = %s AND n = %s", (word, n))
                    except pymysql.err.OperationalError as error:
                        if error.args[0] not in (1205, 1213):  # lock wait / deadlock: retry
                            raise
                        cursor.execute("ROLLBACK")
        except BaseException as error:
            self.errors.append(error)

    def stop(self) -> None:
        self.stop_flag.set()
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise self.errors[0]


def test_engine_with_keys_respelled_during_the_snapshot_equals_source(mariadb, database, tmp_path):
    from dblog.runtime.signal_client import SIGNAL_TABLE_DDL

    table = _table(mariadb, database, "(name VARCHAR(32) COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, "
                                      "v INT NOT NULL, PRIMARY KEY (name, n)) CHARACTER SET utf8mb4")
    mariadb.execute(SIGNAL_TABLE_DDL.format(table=f"`{database}`.dblog_signal"))
    rng = random.Random(6)
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        cursor.executemany("INSERT INTO t VALUES (%s, %s, 0)",
                           [(_spelling(rng, word), n) for word in WORDS for n in range(200)])
        connection.commit()
    writers = _Respeller(mariadb, database)
    try:
        engine = EngineThread(make_config(mariadb, database, tmp_path, snapshot={"chunk_size": 97}))
        engine.wait_for("COMPLETED", timeout=300)
    finally:
        writers.stop()
    engine.until_caught_up()
    assert writers.respelled > 200, "the writers did not really respell keys during the snapshot"
    result = compare(mariadb, tmp_path / "changes.jsonl", [table])
    assert result.equal, result.summary()
    schema = engine.engine.schemas.schema(table)
    replayed = materialize(read_json_lines(tmp_path / "changes.jsonl"))[str(table)]
    identities = [schema.identity_of(key) for key in replayed]
    assert len(identities) == len(set(identities)), "the sink holds one server key under two spellings"
    # The sink did see respellings as key changes: a delete of one spelling, then a create of another.
    records = list(read_json_lines(tmp_path / "changes.jsonl"))
    def where(record) -> tuple:
        return record["value"]["source"]["pos"], record["value"]["source"]["row"]

    def identity(record) -> tuple:
        return schema.identity_of(tuple(record["key"].values()))

    respelled = [
        (a, b) for a, b in zip(records, records[1:])
        if (a["value"]["op"], b["value"]["op"]) == ("d", "c") and where(a) == where(b)
        and a["key"] != b["key"] and identity(a) == identity(b)
    ]
    assert respelled
