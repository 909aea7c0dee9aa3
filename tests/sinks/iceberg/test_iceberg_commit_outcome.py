"""Which commits an Iceberg table holds, as the sink sees it.

- A commit written without Spark (`direct_writes`) whose outcome is unknown (Iceberg's
  CommitStateUnknownException, raised after the commit landed or before it could) keeps its
  files; after the restart nothing is lost or doubled and every file the table names exists. A
  commit Iceberg refused (CommitFailedException) removes its files.
- The committed position follows the snapshot lineage: after a rollback the older snapshot's,
  whatever the snapshots' timestamps say.

The unknown outcomes are made around the real commit: the py4j objects of the table are wrapped
(`_Hooked`) so that `commit()` of an AppendFiles / RowDelta runs the real Java commit, or not,
and then a real CommitStateUnknownException is thrown inside the JVM.
"""

from __future__ import annotations

import json
import os
import uuid
from urllib.parse import unquote, urlparse

import pytest
from py4j.java_gateway import JavaObject

from dblog.core.events import RowChange, SourceInfo, TableId
from dblog.core.gtid import GtidSet
from dblog.core.offsets import Offsets
from dblog.mysql.schema import Column, TableSchema
from dblog.sinks.iceberg import direct_writes
from dblog.sinks.iceberg.maintenance import IcebergMaintenance
from dblog.sinks.iceberg.sink import SparkIcebergSink, read_target

pytestmark = pytest.mark.timeout(600)

COLUMNS = [Column("id", "bigint", "bigint"), Column("note", "varchar", "varchar(50)", char_length=50)]
LOAD = "org.apache.iceberg.spark.Spark3Util.loadIcebergTable"


def _position(seq: int) -> GtidSet:
    return GtidSet.parse(f"0-1-{seq}", "mariadb")


def _change(table: TableId, op: str, key: int, seq: int, note: str = "streamed") -> RowChange:
    before = {"id": key, "note": "old"} if op in ("u", "d") else None
    after = None if op == "d" else {"id": key, "note": note}
    return RowChange(table, op, (key,), before, after, SourceInfo(gtid=f"0-1-{seq}", file="bin.000001", pos=seq * 100))


def _flush(sink: SparkIcebergSink, seq: int) -> None:
    sink.flush(Offsets("mariadb", _position(seq), None))


def _apply(rows: dict, changes: list[RowChange]) -> dict:
    rows = dict(rows)
    for change in changes:
        if change.op == "d":
            rows.pop(change.key, None)
        else:
            rows[change.key] = change.after
    return rows


@pytest.fixture
def table_of(spark, request):
    """table_of(write_mode) -> (new sink, its table); the table is dropped afterwards."""
    table = TableId("outcome", f"t_{uuid.uuid4().hex[:12]}")  # parametrized runs leave no files to one another
    schema = TableSchema(table, COLUMNS, ("id",))
    sinks = []

    def make(write_mode: str = "merge") -> SparkIcebergSink:
        sinks.append(SparkIcebergSink(spark, "lake", lambda _: schema, "mariadb", write_mode=write_mode))
        return sinks[-1]

    yield make, table, schema
    for sink in sinks:
        sink.close()
    spark.sql(f"DROP TABLE IF EXISTS lake.outcome.{table.table}")


# --- the wrapper around the real commit ---------------------------------------------------------


class _Hooked:
    """A SparkSession, its context, JVM view, the Iceberg tables loaded through it and their
    pending commits, all passed through to the real py4j objects, but for `commit()` of an
    AppendFiles / RowDelta: `hook(real_commit)` runs instead. `catalog_down` makes `refresh()`
    fail once the hook has run (a catalog that stays unreachable)."""

    def __init__(self, real, hook, path: str | None = None, state: dict | None = None) -> None:
        self._real, self._hook, self._path = real, hook, path
        self._state = state if state is not None else {"fired": False, "catalog_down": False}

    def __getattr__(self, name):
        value = getattr(self._real, name)
        if self._path is None:  # the session, its context, the JVM view
            if name in ("sparkContext", "_jvm"):
                return _Hooked(value, self._hook, "" if name == "_jvm" else None, self._state)
            return value
        if self._path in ("table", "commit"):
            return self._method(name, value)
        path = f"{self._path}.{name}".lstrip(".")
        if path == LOAD:
            return lambda *args: _Hooked(value(*args), self._hook, "table", self._state)
        return _Hooked(value, self._hook, path, self._state) if LOAD.startswith(path + ".") else value

    def _method(self, name: str, method):
        if self._path == "commit" and name == "commit":
            def commit():
                self._state["fired"] = True
                self._hook(self._real)
            return commit
        if self._path == "table" and name == "refresh" and self._state["fired"] and self._state["catalog_down"]:
            return _throw_unknown
        if self._path == "table" and name not in ("newAppend", "newRowDelta"):
            return method

        def call(*args):  # a pending commit's builder calls return the builder
            result = method(*args)
            return _Hooked(result, self._hook, "commit", self._state) if isinstance(result, JavaObject) else result
        return call


def _jvm():
    from pyspark import SparkContext

    return SparkContext._jvm


def _throw(exception) -> None:
    """Throw a Java exception inside the JVM: py4j raises it as from any Java call."""
    _jvm().org.apache.iceberg.relocated.com.google.common.base.Throwables.throwIfUnchecked(exception)


def _throw_unknown(*_) -> None:
    jvm = _jvm()
    _throw(jvm.org.apache.iceberg.exceptions.CommitStateUnknownException(
        jvm.java.net.SocketTimeoutException("Read timed out")))


def _landed_then_unknown(commit) -> None:
    commit.commit()
    _throw_unknown()


def _refused(commit) -> None:
    jvm = _jvm()
    _throw(jvm.org.apache.iceberg.exceptions.CommitFailedException(jvm.java.lang.RuntimeException("stale metadata")))


OUTCOMES = {  # how the hooked commit ends: (hook, the catalog stays down)
    "landed": (_landed_then_unknown, False),  # seen landed at once: adopted
    "landed-unseen": (_landed_then_unknown, True),  # adopted after the restart, by its position
    "not-landed": (lambda commit: _throw_unknown(), False),
    "refused": (_refused, False),  # a known failure
}


def _files(spark, qualified: str) -> tuple[set[str], set[str]]:
    """(files any snapshot of the table names, Parquet files under its data directory)."""
    named = {unquote(urlparse(row.file_path).path) for row in spark.sql(f"SELECT file_path FROM {qualified}.all_files").collect()}
    location = _jvm().org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified).location()
    data = os.path.join(unquote(urlparse(location).path), "data")
    on_disk = {os.path.join(root, name) for root, _, names in os.walk(data) for name in names if name.endswith(".parquet")}
    return named, on_disk


@pytest.mark.parametrize(("write_mode", "outcome"), [
    *(("merge", outcome) for outcome in OUTCOMES),  # AppendFiles
    *(("upsert", outcome) for outcome in OUTCOMES if outcome != "refused"),  # RowDelta
])
def test_a_direct_commit_with_an_unknown_outcome_keeps_its_files_and_the_restart_loses_and_doubles_nothing(
    table_of, spark, write_mode, outcome,
):
    make, table, schema = table_of
    sink = make(write_mode)
    first = [_change(table, "c", n, n) for n in range(1, 51)]
    sink.write(first)
    _flush(sink, 50)
    if write_mode == "merge":  # inserts beyond every key: an AppendFiles
        second = [_change(table, "c", n, n) for n in range(51, 101)]
    else:  # updates, a delete, an insert: a RowDelta of equality deletes and rows
        second = [*(_change(table, "u", n, 50 + n, "updated") for n in range(1, 11)),
                  _change(table, "d", 20, 61), _change(table, "c", 200, 62)]
    last = int(second[-1].source.gtid.rsplit("-", 1)[1])
    qualified = sink.target_name(table)
    named_before, _ = _files(spark, qualified)
    hook, catalog_down = OUTCOMES[outcome]
    state = {"fired": False, "catalog_down": catalog_down}
    sink._direct.spark = _Hooked(spark, hook, state=state)
    committed = before = sink.appended_batches + sink.upserted_batches
    failure = None
    sink.write(second)
    try:
        _flush(sink, last)
        committed = sink.appended_batches + sink.upserted_batches
    except Exception as error:  # noqa: BLE001 - checked below, after the restart
        failure = error
    assert state["fired"]  # the batch's commit went through the hook
    named, on_disk = _files(spark, qualified)
    assert named <= on_disk, f"the table names deleted files: {sorted(named - on_disk)}"
    if outcome == "refused":
        assert on_disk == named == named_before  # Iceberg said no: its files are gone
    else:
        assert on_disk > named_before  # kept, whatever became of the commit

    # The restart: a new sink learns what the table holds, the engine replays the batch.
    sink.close()
    restarted = make(write_mode)
    restarted.write(second)
    _flush(restarted, last)
    expected = _apply(_apply({}, first), second)
    assert read_target(spark, qualified, schema) == expected  # raises on a key seen twice
    named, on_disk = _files(spark, qualified)
    assert named <= on_disk
    landed = outcome.startswith("landed")
    assert restarted.committed_position(table) == _position(last)
    # a landed commit is not made again; one that did not land is
    assert restarted.appended_batches + restarted.upserted_batches == (0 if landed else 1)
    if outcome == "landed":
        assert failure is None and committed == before + 1
    elif outcome == "refused":
        assert "CommitFailedException" in str(failure)
    else:
        assert isinstance(failure, direct_writes.CommitStateUnknown), failure
        assert "may or may not have landed" in str(failure)


# --- the committed position follows the lineage --------------------------------------------------


def _snapshot_ids(spark, qualified: str) -> list[int]:
    return [row.snapshot_id for row in spark.sql(
        f"SELECT snapshot_id FROM {qualified}.history ORDER BY made_current_at").collect()]


def test_a_rolled_back_table_reports_the_earlier_position_and_takes_the_rolled_back_changes_again(table_of, spark):
    make, table, schema = table_of
    sink = make()
    first = [_change(table, "c", n, n) for n in range(1, 11)]
    second = [*(_change(table, "u", n, 10 + n, "updated") for n in range(1, 6)),
              *(_change(table, "c", n, n) for n in range(16, 21))]
    sink.write(first)
    _flush(sink, 10)
    sink.write(second)
    _flush(sink, 20)
    qualified = sink.target_name(table)
    kept, _ = _snapshot_ids(spark, qualified)
    spark.sql(f"CALL lake.system.rollback_to_snapshot('outcome.{table.table}', {kept})")
    assert read_target(spark, qualified, schema) == _apply({}, first)

    # the snapshot rolled back is still the newest by commit time: not what the table holds
    restarted = make()
    restarted.write(second)
    assert restarted.committed_position(table) == _position(10)
    _flush(restarted, 20)
    assert read_target(spark, qualified, schema) == _apply(_apply({}, first), second)

    # compaction carries the position of the lineage over to its own snapshot
    result = IcebergMaintenance(spark, "lake", equality_deletes=True).run(qualified, ["compact"])
    assert result.ok and result.data_files_rewritten > 0
    assert result.carried["dblog.position"] == str(_position(20)) and "dblog.commit-id" not in result.carried
    again = make()
    again.write(second)
    assert again.pending_rows == 0 and again.committed_position(table) == _position(20)


@pytest.mark.parametrize("skew", ["reversed", "equal"])
def test_snapshot_times_that_tie_or_go_backwards_do_not_confuse_the_committed_position(table_of, spark, skew):
    make, table, _ = table_of
    sink = make()
    sink.write([_change(table, "c", n, n) for n in range(1, 11)])
    _flush(sink, 10)
    sink.write([_change(table, "u", n, 10 + n, "updated") for n in range(1, 6)])
    _flush(sink, 15)
    qualified = sink.target_name(table)
    # A writer with a clock behind: the newer snapshot's time at or before its parent's (Iceberg
    # accepts up to a minute of this). Made as a metadata commit of the snapshots so changed.
    jvm = _jvm()
    iceberg = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)
    iceberg.refresh()
    operations = iceberg.operations()
    base = operations.current()
    metadata = json.loads(jvm.org.apache.iceberg.TableMetadataParser.toJson(base))
    parent, child = _snapshot_ids(spark, qualified)
    snapshots = {snapshot["snapshot-id"]: snapshot for snapshot in metadata["snapshots"]}
    snapshots[child]["timestamp-ms"] = snapshots[parent]["timestamp-ms"] - (1000 if skew == "reversed" else 0)
    operations.commit(base, jvm.org.apache.iceberg.TableMetadataParser.fromJson(json.dumps(metadata)))
    times = {row.snapshot_id: row.committed_at for row in spark.sql(
        f"SELECT snapshot_id, committed_at FROM {qualified}.snapshots").collect()}
    assert times[child] < times[parent] if skew == "reversed" else times[child] == times[parent]

    restarted = make()
    restarted.write([_change(table, "u", 1, 11, "updated")])  # held: dropped
    assert restarted.pending_rows == 0
    assert restarted.committed_position(table) == _position(15)
