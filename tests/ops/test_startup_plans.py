"""What each of Debezium's snapshot modes does at start (`dblog.runtime.snapshot_modes`), as
Debezium 3.6's Snapshotter of that name decides: pure, every mode against no offsets, offsets
in the binlog and offsets it no longer holds. tests/engine/test_snapshot_modes.py runs them."""

import pytest

from dblog.runtime.config import SnapshotConfig
from dblog.runtime.snapshot_modes import incremental_startup_note, plan_startup

NONE, KEPT, PURGED = "no offsets", "offsets in the binlog", "offsets purged"


def _plan(mode: str, offsets: str, **configuration_based):
    settings = SnapshotConfig(startup=mode, configuration_based=configuration_based)
    asked = []

    def purged() -> bool:
        asked.append(True)
        return offsets == PURGED

    plan = plan_startup(settings, offsets != NONE, purged)
    return (plan.read_tables, plan.fresh_position, plan.rebuild_history, plan.stream), plan, asked


# (read the tables, from the present, history from the server, stream)
@pytest.mark.parametrize("mode, offsets, expected", [
    ("initial", NONE, (True, False, False, True)),
    ("initial", KEPT, (False, False, False, True)),
    ("never", NONE, (False, False, False, True)),
    ("never", PURGED, (False, False, False, True)),
    ("when_needed", NONE, (True, False, False, True)),
    ("when_needed", KEPT, (False, False, False, True)),
    ("when_needed", PURGED, (True, True, False, True)),
    ("initial_only", NONE, (True, False, False, False)),
    ("initial_only", KEPT, (False, False, False, False)),
    ("always", NONE, (True, False, False, True)),
    ("always", KEPT, (True, True, False, True)),
    ("recovery", NONE, (False, False, False, True)),
    ("recovery", KEPT, (False, False, True, True)),
    ("configuration_based", NONE, (False, False, False, False)),  # Debezium's defaults: all false
    ("configuration_based", KEPT, (False, False, False, False)),
])
def test_each_mode_at_start(mode, offsets, expected):
    got, plan, _ = _plan(mode, offsets)
    assert got == expected
    assert plan.note.startswith(f"snapshot.startup = {mode!r}: ")


def test_configuration_based_follows_its_keys():
    assert _plan("configuration_based", NONE, snapshot_data=True, start_stream=True)[0] == (True, False, False, True)
    assert _plan("configuration_based", KEPT, snapshot_data=True)[0] == (True, True, False, False)
    assert _plan("configuration_based", KEPT, snapshot_schema=True, start_stream=True)[0] == (False, False, True, True)
    assert _plan("configuration_based", PURGED, start_stream=True)[0] == (False, False, False, True)
    assert _plan("configuration_based", PURGED, snapshot_on_data_error=True)[0] == (True, True, False, False)
    assert _plan("configuration_based", KEPT, snapshot_on_schema_error=True)[1].rebuild_on_schema_error
    assert _plan("recovery", KEPT)[1].rebuild_on_schema_error and not _plan("initial", KEPT)[1].rebuild_on_schema_error


def test_the_binlog_is_asked_only_when_the_mode_depends_on_it():
    assert not _plan("initial", KEPT)[2] and not _plan("always", KEPT)[2] and not _plan("when_needed", NONE)[2]
    assert _plan("when_needed", KEPT)[2]


def test_the_incremental_start_up_is_said_with_the_setting_that_makes_it_debeziums():
    note = incremental_startup_note(SnapshotConfig())
    assert note and 'snapshot.startup_reads = "blocking"' in note
    assert incremental_startup_note(SnapshotConfig(startup_reads="blocking")) is None
