"""Watermark modes sit behind one interface, one class per mode (issue 37), chosen from the
configuration through one table, `dblog.runtime.watermark_modes.WATERMARK_MODES`.

Checked here: the table holds exactly the modes the configuration accepts; what each mode does on
the server around a read (what the loop's chunk reads and Spark tasks' reads both run); and that
no module of dblog outside the table branches on a mode's name (a comparison with a mode name or
with `snapshot.watermarks`, or a dict keyed by mode names)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

import dblog
from dblog.core.capture import ChunkRead
from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.core.progress import TableSnapshot
from dblog.core.window import GtidWatermarks, SignalWatermarks
from dblog.runtime import watermark_modes
from dblog.runtime.config import SnapshotConfig
from dblog.runtime.watermark_modes import WATERMARK_MODES, WatermarkMode, watermark_mode

pytestmark = pytest.mark.timeout(60)

SIGNALS = TableId("ops", "dblog_signal")
LOW = GtidSet.parse("0-1-10", "mariadb")
HIGH = GtidSet.parse("0-1-12", "mariadb")


class RecordingServer:
    """A `WindowServer` that records what a mode asks of the server."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def wait_until_visible(self, read) -> None:
        self.calls.append(("wait_until_visible", read.position))

    def executed_gtids(self) -> GtidSet:
        self.calls.append(("executed_gtids",))
        return HIGH

    def write_signal(self, signal_id: str, signal_type: str) -> None:
        self.calls.append(("write", signal_id, signal_type))

    def delete_signal(self, signal_id: str) -> None:
        self.calls.append(("delete", signal_id))


def chunk_read() -> ChunkRead:
    return ChunkRead(TableSnapshot(TableId("shop", "orders")), None, (100,), 1024, position=LOW)


def test_the_table_holds_exactly_the_modes_the_configuration_accepts() -> None:
    accepted = set(typing.get_args(SnapshotConfig.model_fields["watermarks"].annotation))
    assert set(WATERMARK_MODES) == accepted
    for name, mode in WATERMARK_MODES.items():
        assert issubclass(mode, WatermarkMode) and mode.name == name
        assert not getattr(mode, "__abstractmethods__", None), f"{name} leaves methods unimplemented"
        assert mode.writes_signal_rows == bool(mode.signal_table_privileges)


def run_window(name: str) -> tuple[object, object, list[tuple]]:
    mode, server, read = watermark_mode(name, SIGNALS), RecordingServer(), chunk_read()
    opened = mode.watermarks(read)
    mode.open(opened, read, server)
    server.calls.append(("read the rows",))
    return opened, mode.close(opened, server), server.calls


def test_gtid_mode_waits_for_its_low_watermark_and_reads_the_high_one_after_the_rows() -> None:
    opened, closed, calls = run_window("gtid")
    assert opened == GtidWatermarks(LOW, None)
    assert closed == GtidWatermarks(LOW, HIGH) and closed.high == HIGH
    assert calls == [("wait_until_visible", LOW), ("read the rows",), ("executed_gtids",)]
    assert not WATERMARK_MODES["gtid"].writes_signal_rows and WATERMARK_MODES["gtid"].waits_for_visibility


def test_insert_insert_writes_an_open_and_a_close_marker_around_the_rows() -> None:
    opened, closed, calls = run_window("insert_insert")
    assert isinstance(opened, SignalWatermarks) and closed == opened and closed.high is None
    assert opened.signal_table == SIGNALS and opened.open_id.endswith("-open") and opened.close_id.endswith("-close")
    assert opened.open_id.removesuffix("-open") == opened.close_id.removesuffix("-close")
    assert calls == [("write", opened.open_id, "snapshot-window-open"), ("read the rows",),
                     ("write", opened.close_id, "snapshot-window-close")]
    assert WATERMARK_MODES["insert_insert"].signal_table_privileges == ("INSERT",)
    assert not WATERMARK_MODES["insert_insert"].waits_for_visibility  # no semi-sync refusal


def test_insert_delete_writes_an_open_marker_and_deletes_it_after_the_rows() -> None:
    opened, closed, calls = run_window("insert_delete")
    assert isinstance(opened, SignalWatermarks) and closed == opened and closed.high is None
    assert opened.close_id is None and opened.open_id.endswith("-open")
    assert calls == [("write", opened.open_id, "snapshot-window-open"), ("read the rows",),
                     ("delete", opened.open_id)]
    assert WATERMARK_MODES["insert_delete"].signal_table_privileges == ("INSERT", "DELETE")
    assert not WATERMARK_MODES["insert_delete"].waits_for_visibility


def test_each_window_gets_markers_of_its_own() -> None:
    mode = watermark_mode("insert_insert", SIGNALS)
    assert mode.watermarks(chunk_read()).open_id != mode.watermarks(chunk_read()).open_id


def _mode_branches(path: Path) -> list[str]:
    names = set(WATERMARK_MODES)
    found = []

    def is_mode_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(is_mode_name(item) for item in node.elts)
        return isinstance(node, ast.Attribute) and node.attr == "watermarks"  # snapshot.watermarks itself

    def about_watermarks(node: ast.Compare) -> bool:
        """"gtid" names a position mode and a binlog event too: a comparison with it is about
        watermarks only when its other side says so (`snapshot.watermarks == "gtid"`)."""
        constants = {operand.value for operand in ast.walk(node) if isinstance(operand, ast.Constant)}
        return bool(constants & (names - {"gtid"})) or "watermark" in ast.unparse(node)

    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Compare) and any(is_mode_name(operand) for operand in (node.left, *node.comparators))
                and about_watermarks(node)):
            found.append(f"{path.name}:{node.lineno} compares with a watermark mode")
        elif isinstance(node, ast.Dict) and sum(is_mode_name(key) for key in node.keys if key is not None) > 1:
            found.append(f"{path.name}:{node.lineno} a dict keyed by watermark modes")
        elif isinstance(node, ast.Match):
            found.append(f"{path.name}:{node.lineno} match statement")  # none in dblog; look at it if one comes
    return found


def test_no_module_outside_the_table_branches_on_the_mode_name() -> None:
    package = Path(dblog.__file__).parent
    table = Path(watermark_modes.__file__)
    found = [branch for path in sorted(package.rglob("*.py")) if path != table for branch in _mode_branches(path)]
    assert found == []
