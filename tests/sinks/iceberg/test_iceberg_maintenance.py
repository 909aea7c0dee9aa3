"""Iceberg maintenance: the policy, the sans-IO schedule, and compaction/expiry on real tables."""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dblog.sinks.iceberg.maintenance import (
    Action,
    IcebergMaintenance,
    MaintenancePolicy,
    MaintenanceSchedule,
    parse_identifier,
    qualified_name,
    sql_string,
)

V3_MOR = (
    "'format-version'='3', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"
)
ODD_NAME = "od`d 'na.me\\x é"  # backtick, quote, dot, backslash, space, non-ASCII


# --- the policy -------------------------------------------------------------------------------------


def test_policy_defaults_and_unknown_keys():
    policy = MaintenancePolicy()
    assert policy.enabled and policy.compact_every_commits == 50 and policy.expire_every_seconds == 3600
    assert policy.keep_snapshots == 10 and policy.max_snapshot_age_seconds == 86400
    assert policy.target_file_size_bytes == 128 * 1024 * 1024
    with pytest.raises(ValidationError, match="keep_snapshot"):
        MaintenancePolicy(keep_snapshot=3)  # typo: rejected, not ignored


@pytest.mark.parametrize(
    "settings_, key",
    [
        ({"keep_snapshots": 0}, "keep_snapshots must be at least 1"),
        ({"keep_snapshots": -2}, "keep_snapshots"),
        ({"compact_every_commits": -1}, "compact_every_commits"),
        ({"expire_every_seconds": -1}, "expire_every_seconds"),
        ({"max_snapshot_age_seconds": float("nan")}, "max_snapshot_age_seconds"),
        ({"target_file_size_bytes": 1000}, "target_file_size_bytes"),
        ({"orphan_file_age_seconds": 3600}, "orphan_file_age_seconds"),
    ],
)
def test_policy_errors_name_the_key(settings_, key):
    with pytest.raises(ValidationError, match=key):
        MaintenancePolicy(**settings_)


# --- the schedule -------------------------------------------------------------------------------------


class ScheduleModel:
    """The schedule's rules, written out plainly."""

    def __init__(self, policy):
        self.policy = policy
        self.tables = {}  # table -> [commits since compact, commits since expire, last expire]

    def commit(self, table, now):
        state = self.tables.setdefault(table, [0, 0, now])
        state[0] += 1
        state[1] += 1

    def due(self, now):
        p = self.policy
        if not p.enabled:
            return []
        out = []
        for table, (since_compact, since_expire, last) in self.tables.items():
            if p.compact_every_commits > 0 and since_compact >= p.compact_every_commits:
                out.append((table, Action.COMPACT))
            if p.expire_every_seconds > 0 and since_expire > 0 and now - last >= p.expire_every_seconds:
                out.append((table, Action.EXPIRE))
        return out

    def done(self, table, action, now):
        state = self.tables[table]
        if action is Action.COMPACT:
            state[0] = 0
        else:
            state[1], state[2] = 0, now


steps = st.lists(
    st.tuples(st.sampled_from(["commit", "tick", "run"]), st.sampled_from(["a", "b", "c"]), st.integers(0, 7)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    enabled=st.booleans(),
    every_commits=st.integers(0, 4),
    every_seconds=st.integers(0, 12),
    steps=steps,
)
def test_schedule_matches_model(enabled, every_commits, every_seconds, steps):
    policy = MaintenancePolicy(enabled=enabled, compact_every_commits=every_commits, expire_every_seconds=every_seconds)
    schedule, model = MaintenanceSchedule(policy), ScheduleModel(policy)
    now = 1000.0
    for kind, table, dt in steps:
        now += dt
        if kind == "commit":
            schedule.record_commit(table, now)
            model.commit(table, now)
        due = schedule.due(now)
        assert due == model.due(now)
        assert schedule.due(now) == due  # only reporting: asking twice changes nothing
        assert len(set(due)) == len(due)
        if kind == "run":
            for table_, action in due:
                schedule.done(table_, action, now)
                model.done(table_, action, now)
            assert schedule.due(now) == []  # everything done is not due again at once


@settings(max_examples=100, deadline=None)
@given(every=st.integers(1, 20), commits=st.integers(0, 60))
def test_compaction_due_exactly_every_n_commits(every, commits):
    schedule = MaintenanceSchedule(MaintenancePolicy(compact_every_commits=every, expire_every_seconds=0))
    compactions = 0
    for i in range(commits):
        schedule.record_commit("t", float(i))
        for table, action in schedule.due(float(i)):
            assert (table, action) == ("t", Action.COMPACT)
            assert schedule.commits_since(table, action) == every
            schedule.done(table, action, float(i))
            compactions += 1
    assert compactions == commits // every


def test_expiry_waits_for_interval_and_a_commit():
    schedule = MaintenanceSchedule(MaintenancePolicy(compact_every_commits=0, expire_every_seconds=60))
    assert schedule.due(0) == []
    schedule.record_commit("t", 10)
    assert schedule.due(69) == []
    assert schedule.due(70) == [("t", Action.EXPIRE)]
    schedule.done("t", "expire", 75)
    assert schedule.due(1000) == []  # idle table: nothing new to expire
    schedule.record_commit("t", 1001)
    assert schedule.due(1001) == [("t", Action.EXPIRE)]  # a commit after the interval: due at once
    assert MaintenanceSchedule(MaintenancePolicy(enabled=False)).due(0) == []


# --- names --------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_identifier_round_trip(parts):
    assert parse_identifier(qualified_name(parts)) == parts


def test_identifier_parsing():
    assert parse_identifier("lake.db.t") == ["lake", "db", "t"]
    assert parse_identifier("lake.`my db`.`a.b``c`") == ["lake", "my db", "a.b`c"]
    for bad in ["a..b", "a.", "`a", "`a`b", "a`b`"]:
        with pytest.raises(ValueError):
            parse_identifier(bad)
    maintenance = IcebergMaintenance(None, "lake")
    assert maintenance.table_parts("db.t") == ["lake", "db", "t"]
    assert maintenance.table_parts("lake.db.t") == ["lake", "db", "t"]
    assert maintenance.table_parts(["db", "a.b"]) == ["lake", "db", "a.b"]


# --- on real tables -------------------------------------------------------------------------------


@pytest.fixture
def namespace(spark):
    name = f"maint_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE NAMESPACE lake.{name}")
    return name


def make_table(spark, namespace: str, table: str, merges: int) -> str:
    """A v3 merge-on-read table after `merges` small MERGE commits (inserts and updates), each
    carrying dblog.position 0-1-<i>. Returns the quoted name."""
    from dblog.sinks.iceberg.session import iceberg_commit_properties

    name = qualified_name(["lake", namespace, table])
    spark.sql(f"CREATE TABLE {name} (id BIGINT NOT NULL, v STRING) USING iceberg TBLPROPERTIES ({V3_MOR})")
    for i in range(merges):
        rows = [(key, f"v{i}-{key}") for key in range(i * 2, i * 2 + 4)]  # 2 updates, 2 inserts
        spark.createDataFrame(rows, "id BIGINT, v STRING").createOrReplaceTempView("maint_src")
        with iceberg_commit_properties(spark, {"dblog.position": f"0-1-{i}", "dblog.flavor": "mariadb"}):
            spark.sql(
                f"MERGE INTO {name} t USING maint_src s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
            )
    return name


def rows(spark, name):
    return [tuple(r) for r in spark.sql(f"SELECT id, v FROM {name} ORDER BY id").collect()]


def file_counts(spark, name) -> tuple[int, int]:
    """(data files, delete files) of the current snapshot."""
    counts = dict(spark.sql(f"SELECT content, count(*) FROM {name}.files GROUP BY content").collect())
    return counts.get(0, 0), sum(v for k, v in counts.items() if k != 0)


def snapshots(spark, name) -> list[dict]:
    return [
        dict(r.summary or {}) | {"_operation": r.operation}
        for r in spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at").collect()
    ]


def test_compaction_after_many_merges(spark, namespace, caplog):
    name = make_table(spark, namespace, ODD_NAME, merges=5)  # bin-packing needs >= 5 files
    before = rows(spark, name)
    data_files, delete_files = file_counts(spark, name)
    assert data_files == 5 and delete_files > 0  # one file per MERGE, deletion vectors for the updates

    policy = MaintenancePolicy(compact_every_commits=5, expire_every_seconds=0)
    schedule = MaintenanceSchedule(policy)
    for i in range(5):
        schedule.record_commit((namespace, ODD_NAME), float(i))  # as the sink would, after each MERGE
    maintenance = IcebergMaintenance(spark, "lake", policy)
    with caplog.at_level(logging.INFO, logger="dblog.sinks.iceberg.maintenance"):
        [result] = maintenance.run_due(schedule, 5.0)
    assert result.ok, result.errors
    assert schedule.due(5.0) == []
    assert result.data_files_rewritten == 5 and result.data_files_added == 1
    assert result.delete_files_removed == delete_files
    assert result.manifests_rewritten > 0
    assert file_counts(spark, name) == (1, 0)
    assert rows(spark, name) == before  # same content
    history = snapshots(spark, name)
    assert [s["_operation"] for s in history[-2:]] == ["replace", "replace"]  # data files, then manifests
    # Every maintenance commit repeats the offsets of the last MERGE: the newest snapshot still holds them.
    assert history[-1]["dblog.position"] == "0-1-4" and history[-1]["dblog.flavor"] == "mariadb"
    assert result.carried == {"dblog.position": "0-1-4", "dblog.flavor": "mariadb"}
    logged = [r for r in caplog.records if r.levelno == logging.INFO and "5 data files rewritten into 1" in r.message]
    assert logged and "od``d" in logged[0].message


def test_expiry_keeps_newest_snapshots_and_dblog_offsets(spark, namespace):
    name = make_table(spark, namespace, ODD_NAME, merges=4)
    content = rows(spark, name)
    now = time.time() + 1  # every snapshot is older than max_snapshot_age_seconds=0
    policy = MaintenancePolicy(keep_snapshots=2, max_snapshot_age_seconds=0, orphan_file_age_seconds=None)
    result = IcebergMaintenance(spark, "lake", policy).run(["lake", namespace, ODD_NAME], ["expire"], now=now)
    assert result.ok, result.errors
    assert result.snapshots_expired == 2
    history = snapshots(spark, name)
    assert [s["dblog.position"] for s in history] == ["0-1-2", "0-1-3"]
    assert rows(spark, name) == content

    # A commit without dblog's properties (some other writer): keep_snapshots=1 must still keep
    # the newest snapshot carrying them.
    spark.sql(f"INSERT INTO {name} VALUES (1000, 'x')")
    policy = MaintenancePolicy(keep_snapshots=1, max_snapshot_age_seconds=0, orphan_file_age_seconds=None)
    as_text = f"lake.{namespace}.{qualified_name([ODD_NAME])}"  # a string name, parsed like Spark SQL
    result = IcebergMaintenance(spark, "lake", policy).run(as_text, ["expire"], now=time.time() + 1)
    assert result.ok, result.errors
    history = snapshots(spark, name)
    assert len(history) == 2 and history[0]["dblog.position"] == "0-1-3" and "dblog.position" not in history[1]


def test_expiry_removes_orphan_files_only(spark, namespace):
    name = make_table(spark, namespace, "orphans", merges=1)
    content = rows(spark, name)
    maintenance = IcebergMaintenance(spark, "lake", MaintenancePolicy(max_snapshot_age_seconds=30 * 86400))
    location = Path(str(maintenance._load(["lake", namespace, "orphans"]).location()).removeprefix("file:"))
    orphan = location / "data" / "left-by-a-killed-writer.parquet"
    orphan.write_bytes(b"not referenced")
    ten_days_ago = time.time() - 10 * 86400
    for path in location.rglob("*"):  # every file old: only the unreferenced one may go
        os.utime(path, (ten_days_ago, ten_days_ago))
    result = maintenance.run(name, ["expire"])
    assert result.ok, result.errors
    assert result.snapshots_expired == 0 and result.orphan_files_removed == 1
    assert not orphan.exists()
    assert rows(spark, name) == content


def test_failures_are_logged_not_raised(spark, namespace, caplog):
    maintenance = IcebergMaintenance(spark, "lake", MaintenancePolicy())
    with caplog.at_level(logging.WARNING, logger="dblog.sinks.iceberg.maintenance"):
        result = maintenance.run(f"lake.{namespace}.missing", ["compact", "expire"])
        bad_name = maintenance.run("lake.`unclosed", ["expire"])
    assert not result.ok and len(result.errors) == 2  # each action tried and reported
    assert all(e.startswith("load table: ") and "missing" in e for e in result.errors)
    assert not bad_name.ok and bad_name.errors[0].startswith("name: ")
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert any("failed and was skipped" in w and "missing" in w for w in warnings)


def test_a_failing_step_does_not_stop_the_others(spark, namespace, caplog):
    name = make_table(spark, namespace, "steps", merges=1)
    maintenance = IcebergMaintenance(spark, "lake", MaintenancePolicy(max_snapshot_age_seconds=0))

    statements = []

    def failing_sql(statement):
        statements.append(statement)
        if "expire_snapshots" in statement:
            raise RuntimeError("simulated failure\nwith a long second line")
        return spark.sql(statement).collect()

    maintenance._sql = failing_sql
    with caplog.at_level(logging.WARNING, logger="dblog.sinks.iceberg.maintenance"):
        result = maintenance.run(name, [Action.EXPIRE])
    assert result.errors == ["expire_snapshots: RuntimeError: simulated failure"]
    assert "remove_orphan_files" in statements[-1]  # still ran after the failed step
    assert len(snapshots(spark, name)) == 1


def test_sql_string_literals(spark):
    for text in [ODD_NAME, "a'b", "back\\slash", "new\nline", "`lake`.`x``y`"]:
        assert spark.sql(f"SELECT {sql_string(text)} AS s").first().s == text
