"""GTID sets: parsing, canonical text, membership and set algebra, against a reference model.

The reference model of a set is a Python set of (source, seq) pairs over a small universe
(a few sources, seqs 1..MAX_SEQ), so every law can be checked exhaustively per example.
MySQL sources include tagged ones (MySQL 8.3+, 'uuid:tag'), mixed with the untagged intervals
of the same UUID in one element as MySQL writes them (Gtid_set::add_gtid_text and to_string,
sql/rpl_gtid_set.cc; tags: libs/mysql/gtid/tag.h; the manual's "GTID Format and Storage").
"""

from __future__ import annotations

import copy
import pickle
import re

import hypothesis.strategies as st
import pytest
from hypothesis import given

from dblog.core.gtid import Gtid, GtidError, GtidSet

UUIDS = (
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4f22ab58-82db-22f2-af44-d91bb0530673",
    "00000000-0000-0000-0000-000000000001",
)
U1, U2, U3 = UUIDS
# "" is no tag. MySQL orders tags as bytes ('_' after digits, before lowercase letters).
TAGS = ("", "tag1", "_x", "b", "tag_2")
MYSQL_SOURCES = tuple(f"{uuid}:{tag}" if tag else uuid for uuid in UUIDS for tag in TAGS)
DOMAINS = ("0", "1", "2", "10")  # "10" sorts before "2" as text but after it as an integer
MAX_SEQ = 12
SOURCES = {"mysql": MYSQL_SOURCES, "mariadb": DOMAINS}
SEPARATORS = st.sampled_from([",", ", ", ",\n", ",\n  "])

Pairs = frozenset[tuple[str, int]]


def model(gtids: GtidSet) -> Pairs:
    """The set as (source, seq) pairs, read back through membership (checked against the
    generating pairs in test_parse_agrees_with_reference)."""
    flavor = gtids.flavor or "mysql"
    universe = SOURCES[flavor]
    assert gtids.sources() <= set(universe)
    assert all(gtids.last(source) <= MAX_SEQ for source in gtids.sources())
    return frozenset(
        (source, seq) for source in universe for seq in range(1, MAX_SEQ + 1) if Gtid(source, seq) in gtids
    )


def is_mariadb_position(pairs: Pairs) -> bool:
    """Every domain holds a prefix 1..N: what MariaDB syntax can express."""
    return all((source, seq) in pairs for source, last in pairs for seq in range(1, last))


# --- strategies: (set, reference pairs) ---------------------------------------------------------


def runs(seqs) -> list[tuple[int, int]]:
    """Sorted seqs as maximal runs (first, last)."""
    out: list[list[int]] = []
    for seq in sorted(seqs):
        if out and out[-1][1] == seq - 1:
            out[-1][1] = seq
        else:
            out.append([seq, seq])
    return [(lo, hi) for lo, hi in out]


@st.composite
def mysql_cases(draw) -> tuple[GtidSet, Pairs]:
    """Random text for a random set: runs cut into overlapping/adjacent pieces, repeated and
    shuffled elements, mixed-case UUIDs and tags, tagged and untagged intervals of one UUID in
    one element, newlines after commas."""
    pairs = draw(st.frozensets(st.tuples(st.sampled_from(MYSQL_SOURCES), st.integers(1, MAX_SEQ)), max_size=24))
    pieces: list[tuple[str, str, int, int]] = []
    for source in MYSQL_SOURCES:
        for lo, hi in runs(seq for s, seq in pairs if s == source):
            start = lo
            while start <= hi:
                end = draw(st.integers(start, hi))
                overlap_back = draw(st.integers(0, start - lo))  # reach back into the previous piece
                uuid, _, tag = source.partition(":")
                pieces.append((uuid, tag, start - overlap_back, end))
                start = end + 1
    pieces = draw(st.permutations(pieces))
    elements: list[str] = []
    element_tsid: tuple[str, str] | None = None  # the (uuid, tag) the last element's next interval goes to
    for uuid, tag, lo, hi in pieces:
        interval = str(lo) if lo == hi else f"{lo}-{hi}"
        spelled_tag = tag.upper() if draw(st.booleans()) else tag
        same_uuid = element_tsid is not None and element_tsid[0] == uuid
        if same_uuid and element_tsid[1] == tag and draw(st.booleans()):
            elements[-1] += f":{interval}"  # several intervals after one UUID or tag
        elif same_uuid and tag and draw(st.booleans()):
            elements[-1] += f":{spelled_tag}:{interval}"  # a tag after other intervals of its UUID
        else:
            spelled_uuid = uuid.upper() if draw(st.booleans()) else uuid
            elements.append(f"{spelled_uuid}:{spelled_tag}:{interval}" if tag else f"{spelled_uuid}:{interval}")
        element_tsid = (uuid, tag)
    text = ""
    for element in elements:
        text += (draw(SEPARATORS) if text else "") + element
    return GtidSet.parse(text), pairs


def mysql_text(pairs: Pairs) -> str:
    """MySQL's text of a set (Gtid_set::to_string): UUIDs in order, each once; its untagged
    intervals, then each tag in byte order with its intervals; merged runs."""
    by_tsid: dict[tuple[str, str], list[int]] = {}
    for source, seq in pairs:
        uuid, _, tag = source.partition(":")
        by_tsid.setdefault((uuid, tag), []).append(seq)
    elements: dict[str, str] = {}
    # MySQL's Tsid order: the UUID's 16 bytes, then the tag's bytes (libs/mysql/gtid/tsid.cpp, tag.h)
    for (uuid, tag), seqs in sorted(by_tsid.items(), key=lambda item: (bytes.fromhex(item[0][0].replace("-", "")),
                                                                         item[0][1].encode())):
        numbers = "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in runs(seqs))
        elements[uuid] = elements.get(uuid, uuid) + (f":{tag}" if tag else "") + numbers
    return ",".join(elements.values())


@st.composite
def mariadb_cases(draw) -> tuple[GtidSet, Pairs]:
    positions = draw(
        st.dictionaries(st.sampled_from(DOMAINS), st.tuples(st.integers(0, 5), st.integers(1, MAX_SEQ)), max_size=4)
    )
    elements = draw(st.permutations([f"{d}-{server}-{last}" for d, (server, last) in positions.items()]))
    text = ""
    for element in elements:
        text += (draw(SEPARATORS) if text else "") + element
    pairs = frozenset((d, seq) for d, (_, last) in positions.items() for seq in range(1, last + 1))
    return GtidSet.parse(text), pairs


CASES = {"mysql": mysql_cases(), "mariadb": mariadb_cases()}
any_case = st.one_of(*CASES.values())
sets_of = {flavor: cases.map(lambda case: case[0]) for flavor, cases in CASES.items()}
# three sets of one flavor, for the binary and ternary laws
triples = st.sampled_from(sorted(CASES)).flatmap(lambda f: st.tuples(sets_of[f], sets_of[f], sets_of[f]))
# MariaDB sets that are not positions (differences) are valid sets too
mariadb_any = st.one_of(sets_of["mariadb"], st.builds(lambda a, b: a - b, sets_of["mariadb"], sets_of["mariadb"]))


# --- properties ---------------------------------------------------------------------------------


@given(any_case)
def test_parse_agrees_with_reference(case):
    gtids, pairs = case
    assert model(gtids) == pairs
    assert gtids.sources() == {source for source, _ in pairs}
    for source in SOURCES[gtids.flavor or "mysql"]:
        seqs = [seq for s, seq in pairs if s == source]
        assert gtids.last(source) == (max(seqs) if seqs else None)
    assert bool(gtids) == bool(pairs)


@given(any_case)
def test_round_trip(case):
    gtids, _ = case
    text = str(gtids)
    again = GtidSet.parse(text)
    assert again == gtids
    assert hash(again) == hash(gtids)
    assert str(again) == text  # server ids survive too
    assert GtidSet.parse(text, flavor=gtids.flavor) == gtids
    assert eval(repr(gtids)) == gtids  # repr is a parse() call


@given(mysql_cases())
def test_mysql_text_is_canonical(case):
    gtids, pairs = case
    assert str(gtids) == mysql_text(pairs)


@given(st.dictionaries(st.sampled_from(DOMAINS), st.tuples(st.integers(0, 5), st.integers(1, MAX_SEQ))))
def test_mariadb_text_sorted_by_domain_number(positions):
    gtids = GtidSet.parse(",".join(f"{d}-{s}-{n}" for d, (s, n) in positions.items()))
    expected = ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(positions.items(), key=lambda kv: int(kv[0])))
    assert str(gtids) == expected


@given(triples)
def test_algebra_agrees_with_reference(sets):
    a, b, _ = sets
    assert model(a | b) == model(a) | model(b)
    assert model(a & b) == model(a) & model(b)
    assert model(a - b) == model(a) - model(b)
    # random pairs are rarely subsets of each other: also compare sets that differ a little
    for x, y in ((a, b), (a | b, a), (a, a - b), (a & b, b), (b, a | b), (a - b, a)):
        assert (x <= y) == (model(x) <= model(y)), (x, y)
        assert x.issubset(y) == (x <= y)
    assert (a == b) == (model(a) == model(b))


@given(triples)
def test_set_laws(sets):
    a, b, c = sets
    assert a | b == b | a
    assert a & b == b & a
    assert (a | b) | c == a | (b | c)
    assert (a & b) & c == a & (b & c)
    assert not ((a - b) & b)
    assert (a - b) | (a & b) == a
    assert a <= a | b and b <= a | b
    assert a & b <= a and a - b <= a
    assert a | a == a and a & a == a and not (a - a)
    assert a.union(b) == a | b and a.intersection(b) == a & b and a.difference(b) == a - b


@given(st.tuples(sets_of["mariadb"], sets_of["mariadb"]))
def test_mariadb_text_exists_exactly_for_prefixes(sets):
    a, b = sets
    for result in (a | b, a & b, a - b):
        if is_mariadb_position(model(result)):
            text = str(result)
            assert GtidSet.parse(text) == result
            # The server id written is that of an operand whose last GTID it is.
            for element in filter(None, text.split(",")):
                domain, server, last = element.split("-")
                assert any(
                    f"{domain}-{server}-{last}" in str(operand).split(",") for operand in (a, b)
                ), (element, a, b)
        else:
            with pytest.raises(GtidError, match="cannot be written in MariaDB syntax"):
                str(result)
            assert "GtidSet mariadb" in repr(result)  # repr never raises


@given(mysql_cases(), st.sampled_from(MYSQL_SOURCES), st.integers(1, MAX_SEQ))
def test_mysql_with_gtid_is_union_with_that_gtid(case, source, seq):
    gtids, pairs = case
    uuid, _, tag = source.partition(":")
    gtid = Gtid.mysql(uuid, seq, tag)
    added = gtids.with_gtid(gtid)
    assert added == gtids | GtidSet.parse(str(gtid))
    assert model(added) == pairs | {(source, seq)}
    assert gtid in added
    assert gtids <= added and (added <= gtids) == ((source, seq) in pairs)
    assert model(gtids) == pairs  # the original is untouched


@given(mariadb_any, st.sampled_from(DOMAINS), st.integers(0, 5), st.integers(1, MAX_SEQ))
def test_mariadb_with_gtid_is_union_with_the_prefix(gtids, domain, server_id, seq):
    before = model(gtids)
    added = gtids.with_gtid(Gtid.mariadb(int(domain), server_id, seq))
    assert added == gtids | GtidSet.parse(f"{domain}-{server_id}-{seq}")
    assert model(added) == before | {(domain, n) for n in range(1, seq + 1)}
    assert added.last(domain) == max(seq, gtids.last(domain) or 0)
    assert model(gtids) == before


@given(st.lists(st.tuples(st.sampled_from(MYSQL_SOURCES), st.integers(1, MAX_SEQ)), max_size=30))
def test_mysql_folding_transactions(transactions):
    position = GtidSet.empty("mysql")
    for source, seq in transactions:
        position = position.with_gtid(Gtid(source, seq))
    expected = ",".join(f"{source}:{seq}" for source, seq in transactions)
    assert position == GtidSet.parse(expected)
    assert model(position) == set(transactions)


@given(
    st.lists(
        st.tuples(st.sampled_from(DOMAINS), st.integers(1, MAX_SEQ), st.integers(0, 5)),
        unique_by=lambda t: (t[0], t[1]),  # strict mode: one transaction per (domain, seq)
        max_size=30,
    )
)
def test_mariadb_folding_keeps_the_highest_gtid_per_domain(transactions):
    position = GtidSet.empty()
    for domain, seq, server_id in transactions:
        position = position.with_gtid(Gtid.mariadb(int(domain), server_id, seq))
    highest: dict[str, tuple[int, int]] = {}
    for domain, seq, server_id in transactions:
        if seq > highest.get(domain, (0, 0))[0]:
            highest[domain] = (seq, server_id)
    expected = ",".join(f"{d}-{s}-{n}" for d, (n, s) in sorted(highest.items(), key=lambda kv: int(kv[0])))
    assert str(position) == expected
    assert position.flavor == ("mariadb" if transactions else None)


@given(any_case, any_case)
def test_equal_sets_hash_equal(x, y):
    (a, pa), (b, pb) = x, y
    if pa == pb:
        assert a == b and hash(a) == hash(b)
    else:
        assert a != b


# --- examples: MySQL ----------------------------------------------------------------------------


def test_mysql_text_as_the_server_prints_it():
    text = (
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7-9,\n"
        "4F22AB58-82DB-22F2-AF44-D91BB0530673:3,\n"
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:6:11"
    )
    gtids = GtidSet.parse(text)
    assert gtids.flavor == "mysql"
    assert str(gtids) == f"{U1}:1-9:11,{U2}:3"
    assert Gtid.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:6") in gtids
    assert Gtid.mysql(U1, 10) not in gtids
    assert gtids.sources() == {U1, U2}
    assert gtids.last(U1) == 11 and gtids.last(U1.upper()) == 11 and gtids.last(U3) is None


def test_mysql_overlapping_and_adjacent_intervals_merge():
    assert str(GtidSet.parse(f"{U1}:4-8:1-5:9:12-13:11")) == f"{U1}:1-9:11-13"


def test_mysql_with_gtid_extends_the_last_interval():
    position = GtidSet.parse(f"{U1}:1-5:7-9")
    assert str(position.with_gtid(Gtid.mysql(U1, 10))) == f"{U1}:1-5:7-10"
    assert str(position.with_gtid(Gtid.mysql(U1, 6))) == f"{U1}:1-9"
    assert str(position.with_gtid(Gtid.mysql(U1, 20))) == f"{U1}:1-5:7-9:20"
    assert position.with_gtid(Gtid.mysql(U1, 8)) is position  # already there: nothing to build
    assert str(position) == f"{U1}:1-5:7-9"


def test_mysql_high_minus_low_names_new_servers():
    low = GtidSet.parse(f"{U1}:1-100,{U2}:1-7")
    high = GtidSet.parse(f"{U1}:1-103,{U2}:1-7")
    assert str(high - low) == f"{U1}:101-103"
    assert (high - low).sources() == {U1}


# --- examples: MySQL tagged GTIDs (8.3+) ---------------------------------------------------------

# What a MySQL 9.6.0 server logged (PREVIOUS_GTIDS of a binlog file, public corpus
# blackbeam/rust_mysql_common test-data/binlogs/binlog_transaction_with_GTID_TAG.000001), then
# the transaction it logged next, 'mytag:3'.
SERVER = "55778904-0299-11f1-b1b8-4ef0c4956feb"


def test_mysql_tagged_text_as_the_server_prints_it():
    gtids = GtidSet.parse(f"{SERVER}:1-13:mytag:1-2")
    assert gtids.sources() == {SERVER, f"{SERVER}:mytag"}
    assert str(gtids) == f"{SERVER}:1-13:mytag:1-2"
    assert Gtid.parse(f"{SERVER}:mytag:2") in gtids and Gtid.parse(f"{SERVER}:mytag:3") not in gtids
    assert str(gtids.with_gtid(Gtid.mysql(SERVER, 3, "mytag"))) == f"{SERVER}:1-13:mytag:1-3"
    assert gtids.last(f"{SERVER}:MyTag") == 2 and gtids.intervals(f"{SERVER}:mytag") == ((1, 2),)


def test_tags_are_case_insensitive_and_printed_in_lower_case_in_byte_order():
    text = f"{U1.upper()}:Tag_2:4:1-3:TAG1:7, {U1}:9-10 ,{U2}:b:1,{U1}:_x:2"
    gtids = GtidSet.parse(text)
    # untagged first, then the tags as bytes: '_' (0x5f) < 't'; 'tag1' < 'tag_2' ('1' < '_')
    assert str(gtids) == f"{U1}:9-10:_x:2:tag1:7:tag_2:1-4,{U2}:b:1"
    assert GtidSet.parse(str(gtids)) == gtids
    assert Gtid.parse(f"{U1}:tAg1:7") == Gtid.mysql(U1, 7, "TAG1") == Gtid(f"{U1.upper()}:Tag1", 7)
    assert str(Gtid.parse(f"{U1.upper()}:TAG1:7")) == f"{U1}:tag1:7"


def test_a_tag_holds_the_intervals_after_it_up_to_the_next_tag():
    gtids = GtidSet.parse(f"{U1}:1-5:t1:1-3:8:t2:7")
    assert gtids.intervals(U1) == ((1, 5),)
    assert gtids.intervals(f"{U1}:t1") == ((1, 3), (8, 8))
    assert gtids.intervals(f"{U1}:t2") == ((7, 7),)


def test_a_tagged_gtid_is_not_the_untagged_one_of_the_same_number():
    # Each TSID numbers its own transactions: the window's watermarks must tell them apart.
    low = GtidSet.parse(f"{U1}:1-100")
    assert Gtid.mysql(U1, 50, "t") not in low and Gtid.mysql(U1, 50) in low
    high = GtidSet.parse(f"{U1}:1-101:t:1-2")
    assert str(high - low) == f"{U1}:101:t:1-2"
    assert (high - low).sources() == {U1, f"{U1}:t"}
    assert not high <= low and low <= high
    assert GtidSet.parse(f"{U1}:t:1-100") & low == GtidSet.empty("mysql")


def test_tag_length_limit():
    longest = "a" * 32
    assert str(GtidSet.parse(f"{U1}:{longest}:1")) == f"{U1}:{longest}:1"
    assert str(Gtid.mysql(U1, 1, longest)) == f"{U1}:{longest}:1"
    with pytest.raises(GtidError, match="longer than 32"):
        GtidSet.parse(f"{U1}:{longest}a:1")
    with pytest.raises(GtidError, match="not a GTID tag"):
        Gtid.parse(f"{U1}:{longest}a:1")


# --- examples: MariaDB --------------------------------------------------------------------------


def test_mariadb_position():
    gtids = GtidSet.parse("0-1-100,1-2-5")
    assert gtids.flavor == "mariadb"
    assert Gtid.parse("0-1-100") in gtids
    assert Gtid.mariadb(0, 7, 1) in gtids  # down-closed; the server id is not part of identity
    assert Gtid.mariadb(0, 1, 101) not in gtids
    assert Gtid.mariadb(2, 1, 1) not in gtids
    assert gtids.sources() == {"0", "1"}
    assert gtids.last("0") == 100 and gtids.last("1") == 5 and gtids.last("2") is None
    assert str(gtids) == "0-1-100,1-2-5"
    assert GtidSet.parse("1-2-5, \n0-1-100") == gtids


def test_mariadb_with_gtid_never_moves_back():
    position = GtidSet.parse("0-1-100")
    assert str(position.with_gtid(Gtid.mariadb(0, 2, 101))) == "0-2-101"
    assert position.with_gtid(Gtid.mariadb(0, 2, 50)) == position
    assert str(position.with_gtid(Gtid.mariadb(0, 2, 50))) == "0-1-100"
    assert str(position.with_gtid(Gtid.mariadb(3, 1, 1))) == "0-1-100,3-1-1"


def test_mariadb_difference_has_no_mariadb_text():
    gap = GtidSet.parse("0-1-100") - GtidSet.parse("0-1-40")
    assert Gtid.mariadb(0, 1, 41) in gap and Gtid.mariadb(0, 1, 40) not in gap
    with pytest.raises(GtidError, match="cannot be written in MariaDB syntax") as raised:
        str(gap)
    assert "41-100" in str(raised.value)
    assert GtidSet.parse("0-1-40") | gap == GtidSet.parse("0-1-100")


def test_mariadb_gtid_without_server_id_cannot_be_written():
    position = GtidSet.empty("mariadb").with_gtid(Gtid("0", 5))
    assert Gtid.mariadb(0, 9, 5) in position
    with pytest.raises(GtidError, match="server id"):
        str(position)
    with pytest.raises(GtidError, match="server id"):
        str(Gtid("0", 5))


# --- examples: Gtid -----------------------------------------------------------------------------


def test_gtid_forms():
    mysql = Gtid.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:23")
    assert mysql == Gtid(U1, 23) == Gtid.mysql(U1.upper(), 23)
    assert (mysql.source, mysql.seq, mysql.server_id, mysql.flavor) == (U1, 23, None, "mysql")
    assert str(mysql) == f"{U1}:23"
    mariadb = Gtid.parse("0-1-100")
    assert (mariadb.source, mariadb.seq, mariadb.server_id, mariadb.flavor) == ("0", 100, 1, "mariadb")
    assert mariadb == Gtid.mariadb(0, 2, 100) and hash(mariadb) == hash(Gtid("0", 100))
    assert str(Gtid.mariadb(10, 3, 7)) == "10-3-7"


@pytest.mark.parametrize(
    "text, offending",
    [
        (f"{U1}:0", "0"),
        (f"{U1}", U1),
        (f"{U1}:9tag:5", "9tag"),
        (f"{U1}:t-g:5", "t-g"),
        (f"{U1}::5", "''"),
        (f"{U1}:tag:x", "x"),
        (f"{U1}:a:b:5", f"{U1}:a:b:5"),
        (f"{U1}:x", "x"),
        (f"{U1}:1:2", f"{U1}:1:2"),
        ("3e11fa47-71ca-11e1-9e33-c80aa942956:5", "3e11fa47-71ca-11e1-9e33-c80aa942956"),
        ("0-1-0", "0-1-0"),
        ("0-1", "0-1"),
        ("0-1-x", "0-1-x"),
        ("4294967296-1-5", "4294967296-1-5"),
        ("", ""),
    ],
)
def test_malformed_gtid(text, offending):
    with pytest.raises(GtidError) as raised:
        Gtid.parse(text)
    message = str(raised.value)
    assert offending in message and "expected" in message


def test_invalid_gtid_fields():
    with pytest.raises(GtidError, match="not-a-source"):
        Gtid("not-a-source", 1)
    with pytest.raises(GtidError, match="server_id"):
        Gtid(U1, 1, server_id=3)
    with pytest.raises(GtidError, match="outside"):
        Gtid(U1, 0)
    with pytest.raises(GtidError, match="outside"):
        Gtid.mariadb(-1, 1, 1)
    with pytest.raises(GtidError, match="007"):
        Gtid("007", 1)  # a domain is written without leading zeros
    for source in (f"{U1}:", f"{U1}:9x", f"{U1}:{'a' * 33}", f"{U1}:t:u", f"{U1}-t", f"{U1}:t g"):
        with pytest.raises(GtidError, match="invalid GTID source"):
            Gtid(source, 1)
    with pytest.raises(GtidError, match="server_id"):
        Gtid(f"{U1}:t", 1, server_id=3)
    with pytest.raises(GtidError, match="invalid GTID tag '9x'"):
        Gtid.mysql(U1, 1, "9x")


# --- malformed sets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, offending",
    [
        (f"{U1}:0", "'0'"),
        (f"{U1}:0-5", "'0-5'"),
        (f"{U1}:5-3", "'5-3'"),
        (f"{U1}:1-5:9-7", "'9-7'"),
        ("3E11FA47-71CA-11E1-9E33-C80AA94295:1-5", "'3E11FA47-71CA-11E1-9E33-C80AA94295'"),
        ("3g11fa47-71ca-11e1-9e33-c80aa9429562:1", "'3g11fa47-71ca-11e1-9e33-c80aa9429562'"),
        (f"{U1}:tag", f"'{U1}:tag'"),
        (f"{U1}:1-5:tag", f"'{U1}:1-5:tag'"),
        (f"{U1}:t1:t2:1-5", "'t1'"),
        (f"{U1}:1-5:tag:9-7", "'9-7'"),
        (f"{U1}:tag-1:5", "'tag-1'"),
        (f"{U1}:1-5:9tag:1", "'9tag'"),
        (f"{U1}:{'a' * 33}:1", f"'{'a' * 33}'"),
        (f"{U1}", f"'{U1}'"),
        (f"{U1}:", "''"),
        (f"{U1}:1-2-3", "'1-2-3'"),
        (f"{U1}:-5", "'-5'"),
        (f"{U1}:+5", "'+5'"),
        (f"{U1}:1_0", "'1_0'"),
        (f"{U1}:1,", "''"),
        (f"{U1}:9223372036854775808", "'9223372036854775808'"),
        (f"{U1}:1-9223372036854775807", "'1-9223372036854775807'"),  # GNO_END (INT64_MAX) is no GNO
        ("0-1-100,0-2-105", "'0-2-105'"),
        ("0-1-0", "'0-1-0'"),
        ("0-1-100,1-2", "'1-2'"),
        ("0-4294967296-5", "'0-4294967296-5'"),
        (f"0-1-5,{U1}:1-5", f"'{U1}:1-5'"),
        (f"{U1}:1-5,0-1-5", "'0-1-5'"),
        ("hello", "'hello'"),
    ],
)
def test_malformed_set(text, offending):
    with pytest.raises(GtidError) as raised:
        GtidSet.parse(text)
    message = str(raised.value)
    assert offending in message, message
    assert re.search(r"expected (MySQL|MariaDB) form", message), message


def test_flavor_given_must_match_the_text():
    with pytest.raises(GtidError, match="'0-1-5'"):
        GtidSet.parse("0-1-5", flavor="mysql")
    with pytest.raises(GtidError, match="1-5"):
        GtidSet.parse(f"{U1}:1-5", flavor="mariadb")
    with pytest.raises(GtidError, match="'oracle'"):
        GtidSet.parse("", flavor="oracle")  # type: ignore[arg-type]


def test_huge_numbers_are_range_errors_not_crashes():
    with pytest.raises(GtidError, match="outside"):
        GtidSet.parse("0-1-" + "9" * 5000)
    with pytest.raises(GtidError, match="above"):
        GtidSet.parse(f"{U1}:1-" + "9" * 5000)


# --- empty sets and flavors ---------------------------------------------------------------------


def test_empty_sets():
    assert GtidSet.parse("").flavor is None
    assert GtidSet.parse(" \n ", flavor="mariadb").flavor == "mariadb"
    assert GtidSet.empty("mysql").flavor == "mysql"
    for empty in (GtidSet.parse(""), GtidSet.empty("mysql"), GtidSet.empty("mariadb")):
        assert not empty and str(empty) == "" and empty.sources() == frozenset()
        assert empty == GtidSet.empty() and hash(empty) == hash(GtidSet.empty())
        same_flavor = GtidSet.parse(f"{U1}:1" if empty.flavor == "mysql" else "0-1-5")
        assert empty <= same_flavor and not same_flavor <= empty


def test_flavorless_empty_set_combines_with_either():
    mysql = GtidSet.parse(f"{U1}:1-3")
    mariadb = GtidSet.parse("0-1-3")
    nothing = GtidSet.empty()
    assert (nothing | mysql).flavor == "mysql" and (mariadb | nothing).flavor == "mariadb"
    assert (nothing & mysql).flavor == "mysql" and not (nothing & mysql)
    assert mariadb - nothing == mariadb and nothing <= mariadb and nothing <= mysql
    assert nothing.with_gtid(Gtid.mysql(U1, 2)).flavor == "mysql"
    assert Gtid.mysql(U1, 1) not in nothing and Gtid.mariadb(0, 1, 1) not in nothing


def test_mixing_flavors_is_an_error():
    mysql = GtidSet.parse(f"{U1}:1-3")
    mariadb = GtidSet.parse("0-1-3")
    for operation in (
        lambda: mysql | mariadb,
        lambda: mysql & mariadb,
        lambda: mariadb - mysql,
        lambda: mysql <= mariadb,
        lambda: GtidSet.empty("mysql") | mariadb,
        lambda: mysql.with_gtid(Gtid.mariadb(0, 1, 4)),
        lambda: Gtid.mariadb(0, 1, 1) in mysql,
        lambda: Gtid.mysql(U1, 1) in mariadb,
    ):
        with pytest.raises(GtidError):
            operation()


# --- value semantics ----------------------------------------------------------------------------


def test_immutable_hashable_picklable():
    tagged = GtidSet.parse(f"{U1}:1-5:t:2,{U2}:3")
    assert pickle.loads(pickle.dumps(tagged)) == tagged and str(copy.deepcopy(tagged)) == str(tagged)
    assert pickle.loads(pickle.dumps(Gtid.mysql(U1, 4, "t"))) == Gtid.mysql(U1, 4, "t")
    gtids = GtidSet.parse(f"{U1}:1-5:7,{U2}:3")
    with pytest.raises(AttributeError):
        gtids.flavor = "mariadb"  # type: ignore[misc]
    with pytest.raises(TypeError):
        GtidSet()
    assert {gtids: 1}[GtidSet.parse(f"{U2}:3,{U1}:7:1-5")] == 1
    assert pickle.loads(pickle.dumps(gtids)) == gtids
    position = GtidSet.parse("0-1-100,1-2-5")
    assert str(pickle.loads(pickle.dumps(position))) == "0-1-100,1-2-5"
    assert str(copy.deepcopy(position)) == "0-1-100,1-2-5"
    assert gtids != f"{U1}:1-5:7,{U2}:3"  # no equality with text


def test_operators_reject_other_types():
    gtids = GtidSet.parse(f"{U1}:1")
    with pytest.raises(TypeError):
        gtids | {1}  # type: ignore[operator]
    with pytest.raises(TypeError):
        gtids.union("x")  # type: ignore[arg-type]
    assert "not a gtid" not in gtids
