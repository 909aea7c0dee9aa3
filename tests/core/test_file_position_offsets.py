"""File-and-position offsets (dblog.core.file_positions), their document (dblog.core.offsets) and
the resume verdict on them (dblog.core.resume_verdict.judge_file_resume)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.file_positions import FilePosition, position_before, transaction_at, transaction_end
from dblog.core.offsets import Offsets
from dblog.core.resume_verdict import ServerBinlog, describe_file_refusal, judge_file_resume
from dblog.core.visibility import BinlogCoordinate

coordinates = st.builds(lambda seq, pos: BinlogCoordinate.of(f"binlog.{seq:06d}", pos),
                        st.integers(1, 999_999), st.integers(4, 2**32 - 1))


@given(coordinates, coordinates)
def test_names_and_positions_follow_binlog_order(a, b):
    assert (transaction_at(a) in position_before(b)) == (a < b)
    # a transaction ending at b, started at a < b: its end's position holds its name
    if a < b:
        assert transaction_at(a) in position_before(b).with_gtid(transaction_end(b))
        assert position_before(b).with_gtid(transaction_end(b)) == position_before(b)


@given(coordinates, st.booleans())
def test_a_file_position_survives_the_engines_position_form(coordinate, delivered):
    at = FilePosition(coordinate.file, coordinate.pos, delivered)
    assert FilePosition.of(at.position(), "binlog") == at


def test_the_offsets_document_holds_file_position_and_server_identity():
    identity = BinlogIdentity(7, "mysql-bin", "3e11fa47-71ca-11e1-9e33-c80aa9429562")
    offsets = Offsets("mysql", FilePosition("mysql-bin.000012", 4711).position(), {"queue": []}, binlog=identity,
                      resume=FilePosition("mysql-bin.000011", 120).position())
    document = offsets.to_json()
    assert {key: document[key] for key in ("position_mode", "binlog_file", "binlog_pos", "server_id", "server_uuid",
                                           "resume_binlog_file", "resume_binlog_pos")} == {
        "position_mode": "file", "binlog_file": "mysql-bin.000012", "binlog_pos": 4711, "server_id": 7,
        "server_uuid": identity.server_uuid, "resume_binlog_file": "mysql-bin.000011", "resume_binlog_pos": 120}
    assert "gtid_position" not in document
    again = Offsets.from_json(document)
    assert (again.position, again.resume, again.binlog, again.position_mode) == (
        offsets.position, offsets.resume, identity, "file")


IDENTITY = BinlogIdentity(1, "binlog")
FILES = (("binlog.000003", 1000), ("binlog.000004", 500))


def verdict(at: FilePosition, server: BinlogIdentity = IDENTITY, files=FILES):
    return judge_file_resume(at, IDENTITY, ServerBinlog(server, "127.0.0.1:3306", files))


def test_a_position_in_the_servers_binlog_resumes():
    assert verdict(FilePosition("binlog.000003", 900)).ok
    assert verdict(FilePosition("binlog.000004", 500)).ok  # the binlog's end: nothing new yet
    assert verdict(FilePosition("binlog.000001", 4), files=()).ok  # list hidden: the dump decides


def test_a_purged_file_is_refused_with_the_purge_remedy():
    result = verdict(FilePosition("binlog.000002", 900))
    assert result.kind == "purged"
    what, remedy = describe_file_refusal(result, FilePosition("binlog.000002", 900),
                                         ServerBinlog(IDENTITY, "h:1", FILES), "offsets.json")
    assert "binlog.000003" in what and "snapshot" in remedy


def test_a_position_past_the_servers_binlog_is_refused():
    assert verdict(FilePosition("binlog.000004", 501)).kind == "beyond_end"
    assert verdict(FilePosition("binlog.000009", 4)).kind == "beyond_end"


def test_another_server_is_refused_whatever_its_files():
    assert verdict(FilePosition("binlog.000003", 900), BinlogIdentity(2, "binlog")).kind == "other_server"
    mysql = BinlogIdentity(1, "binlog", "3e11fa47-71ca-11e1-9e33-c80aa9429562")
    other = BinlogIdentity(1, "binlog", "4e11fa47-71ca-11e1-9e33-c80aa9429562")
    assert judge_file_resume(FilePosition("binlog.000003", 9), mysql, ServerBinlog(other, "h:1", FILES)).kind == \
        "other_server"


def test_a_file_position_names_its_server_by_its_binlog_not_by_its_address():
    """One identity read from a server serves visibility coordinates (server_id, host, port) and,
    with its files' base name, file positions (no host or port: a server reached on another
    machine with its binlog is the same one)."""
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    read = BinlogIdentity(1, server_uuid=uuid, host="db-1", port=3306)
    saved = read.of_files("binlog")
    assert saved == BinlogIdentity(1, "binlog", uuid) and read.same_binlog(saved)
    assert saved.same_binlog(BinlogIdentity(1, server_uuid=uuid, host="db-9", port=3307).of_files("binlog"))
    assert not read.same_binlog(BinlogIdentity(1, server_uuid=uuid, host="db-2", port=3306))
    assert not saved.same_binlog(read.of_files("mysql-bin"))
    assert str(read) == f"server_uuid {uuid}, server_id 1, host db-1:3306"


def test_dblog_status_names_the_file_position_not_a_gtid_set():
    from dblog.runtime.status import describe

    offsets = Offsets("mysql", FilePosition("mysql-bin.000012", 4711).position(), {"queue": []},
                      binlog=BinlogIdentity(7, "mysql-bin"))
    assert describe(offsets).splitlines()[0] == \
        "binlog position: binlog mysql-bin.000012:4711 of server_id 7, binlog files mysql-bin.*"
