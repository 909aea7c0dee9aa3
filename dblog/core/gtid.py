"""GTID sets of MySQL and MariaDB: parsing, canonical text, membership and set algebra.

Two flavors of global transaction id exist:

* MySQL: ``server_uuid:n``. ``@@gtid_executed`` may hold any set of transaction numbers per
  source UUID (gaps are real: a replica can skip transactions), printed as intervals:
  ``uuid:1-5:7-9,uuid2:3``. MySQL 8.3+ also has tagged GTIDs, ``server_uuid:tag:n``
  (``SET gtid_next='AUTOMATIC:tag'``): MySQL's transaction source id (TSID) is then the pair
  (UUID, tag), and each TSID numbers its transactions on its own, so ``uuid:tag:5`` and
  ``uuid:5`` are different transactions. A set prints each UUID once, its untagged intervals
  first, then each tag in order with its intervals: ``uuid:1-5:tag1:1-3:tag2:7``.
* MariaDB: ``domain-server-seq``. ``@@gtid_binlog_pos`` prints only the last GTID of each
  replication domain: ``0-1-100,1-2-5``. Under ``gtid_strict_mode`` sequence numbers only grow
  within a domain, so "the last one is 100" means every seq 1..100 of that domain is applied:
  a MariaDB position is down-closed, a prefix 1..N per domain. The server id does not identify
  the transaction; it is kept only so a position is written back as the server wrote it (a
  server looks the exact ``d-s-n`` up in its binlog when a reader connects).

Both flavors are held the same way: source (MySQL: the TSID as text, ``uuid`` or ``uuid:tag``;
MariaDB: the domain id as decimal text) -> sorted,
disjoint, non-adjacent closed intervals of sequence numbers. Set algebra works on that form.
Only MariaDB *text* needs a prefix per domain, so a difference of two MariaDB positions is a
valid set that has no MariaDB spelling.

Pure code: no I/O, no clock.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Literal, NoReturn

__all__ = ["Flavor", "Gtid", "GtidError", "GtidSet", "flavor_of_version"]

Flavor = Literal["mysql", "mariadb"]
Interval = tuple[int, int]
Intervals = tuple[Interval, ...]

_FLAVORS = ("mysql", "mariadb")


def flavor_of_version(version: str) -> Flavor:
    """The flavour of the server whose version string this is (`SELECT VERSION()`, or the one a
    binlog's format description carries): MariaDB's names MariaDB, MySQL's does not."""
    return "mariadb" if "mariadb" in version.lower() else "mysql"


_MYSQL_MAX_SEQ = 2**63 - 2  # MySQL's GNO is below GNO_END = INT64_MAX (sql/rpl_gtid.h, parse_gno)
_MARIADB_MAX_SEQ = 2**64 - 1  # MariaDB's seq_no is unsigned 64-bit
_MARIADB_MAX_ID = 2**32 - 1  # domain_id and server_id are unsigned 32-bit
_UUID_LENGTH = 36  # a domain id has at most 10 digits, so length alone tells the flavors apart

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DOMAIN = re.compile(r"0|[1-9][0-9]*")
_NUMBER = re.compile(r"[0-9]+")  # not int()'s grammar: no sign, no underscores, no other digits
_MARIADB_GTID = re.compile(r"([0-9]+)-([0-9]+)-([0-9]+)")
# A GTID tag (MySQL 8.3+, libs/mysql/gtid/tag.h): a letter or underscore, then up to 31
# letters, digits or underscores; case-insensitive, kept in lower case (Tag::replace).
_TAG_MAX_LENGTH = 32
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_TAG_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a tag, maybe too long: told apart from an interval

_MYSQL_GTID_FORM = (
    "MySQL form 'uuid:n' or, tagged (MySQL 8.3+), 'uuid:tag:n', e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:23'"
)
_TAG_FORM = f"a letter or underscore, then up to {_TAG_MAX_LENGTH - 1} letters, digits or underscores"
_MARIADB_GTID_FORM = "MariaDB form 'domain-server-seq', e.g. '0-1-100'"
_GTID_FORMS = f"{_MYSQL_GTID_FORM} or {_MARIADB_GTID_FORM}"
_MYSQL_SET_FORM = (
    "MySQL form 'uuid:first-last[:first-last...][:tag:first-last...][,uuid:...]', "
    "e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7' or, with a tag (MySQL 8.3+), "
    "'3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:tag1:1-3'"
)
_MARIADB_SET_FORM = "MariaDB form 'domain-server-seq[,domain-server-seq...]', e.g. '0-1-100,1-2-5'"
_SET_FORMS = {"mysql": _MYSQL_SET_FORM, "mariadb": _MARIADB_SET_FORM, None: f"{_MYSQL_SET_FORM} or {_MARIADB_SET_FORM}"}

_first = itemgetter(0)


class GtidError(ValueError):
    """A GTID or GTID set that cannot be parsed, formatted or combined."""


def _to_int(digits: str) -> int:
    """Decimal digits to int. Absurdly long input becomes a number that fails every range
    check, instead of hitting int()'s own 4300-digit ValueError."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 30 else 2**100


def _shorten(text: str, limit: int = 200) -> str:
    # @@gtid_executed can be long; the offending piece is always quoted in full separately.
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


# --- Gtid -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gtid:
    """One transaction id. Equality and hash ignore `server_id` (it is not part of the identity)."""

    # MySQL: the transaction source id, lowercased: the server UUID, or 'uuid:tag' for a tagged
    # GTID (MySQL 8.3+); MariaDB: the domain id as decimal text
    source: str
    seq: int  # MySQL transaction number or MariaDB sequence number, >= 1
    server_id: int | None = field(default=None, compare=False)  # MariaDB only, kept for formatting

    def __post_init__(self) -> None:
        source = self.source
        if not isinstance(source, str):
            raise GtidError(f"GTID source {source!r} must be text; expected {_GTID_FORMS}")
        if (len(source) == _UUID_LENGTH and _UUID.fullmatch(source)) or (
            len(source) > _UUID_LENGTH and _is_tagged_source(source)
        ):
            if self.server_id is not None:
                raise GtidError(
                    f"MySQL GTID {source}:{self.seq} cannot carry server_id={self.server_id!r}; "
                    f"expected {_MYSQL_GTID_FORM}"
                )
            _check_number(self.seq, "transaction number", 1, _MYSQL_MAX_SEQ, f"{source}:{self.seq}", _MYSQL_GTID_FORM)
            lowered = source.lower()
            if lowered != source:
                object.__setattr__(self, "source", lowered)
        elif len(source) <= 10 and _DOMAIN.fullmatch(source) and int(source) <= _MARIADB_MAX_ID:
            text = f"{source}-{self.server_id}-{self.seq}"
            if self.server_id is not None:
                _check_number(self.server_id, "server id", 0, _MARIADB_MAX_ID, text, _MARIADB_GTID_FORM)
            _check_number(self.seq, "sequence number", 1, _MARIADB_MAX_SEQ, text, _MARIADB_GTID_FORM)
        else:
            raise GtidError(
                f"invalid GTID source {source!r}: expected a server UUID such as "
                "'3e11fa47-71ca-11e1-9e33-c80aa9429562' or a UUID and tag such as "
                "'3e11fa47-71ca-11e1-9e33-c80aa9429562:tag1' (MySQL), or a decimal domain id such as '0' (MariaDB)"
            )

    @property
    def flavor(self) -> Flavor:
        # __post_init__ admits only a UUID (36 characters, more with a tag) or a domain id of at
        # most 10 digits.
        return "mysql" if len(self.source) >= _UUID_LENGTH else "mariadb"

    @classmethod
    def parse(cls, text: str) -> Gtid:
        """``"3E11FA47-71CA-11E1-9E33-C80AA9429562:23"``, ``"3E11FA47-71CA-11E1-9E33-C80AA9429562:Tag1:23"``
        (MySQL) or ``"0-1-100"`` (MariaDB)."""
        if not isinstance(text, str):
            raise GtidError(f"GTID {text!r} must be text; expected {_GTID_FORMS}")
        stripped = text.strip()
        if ":" in stripped:
            parts = [part.strip() for part in stripped.split(":")]
            if len(parts) == 3:
                uuid, tag, seq = parts
                if not _TAG.fullmatch(tag):
                    raise GtidError(f"invalid GTID {text!r}: {tag!r} is not a GTID tag ({_TAG_FORM}); "
                                    f"expected {_MYSQL_GTID_FORM}")
            elif len(parts) == 2:
                (uuid, seq), tag = parts, ""
            else:
                raise GtidError(f"invalid GTID {text!r}; expected {_MYSQL_GTID_FORM}")
            if not _UUID.fullmatch(uuid):
                raise GtidError(f"invalid GTID {text!r}: {uuid!r} is not a server UUID; expected {_MYSQL_GTID_FORM}")
            if not _NUMBER.fullmatch(seq):
                raise GtidError(
                    f"invalid GTID {text!r}: {seq!r} is not a transaction number; expected {_MYSQL_GTID_FORM}"
                )
            return cls(f"{uuid}:{tag}" if tag else uuid, _to_int(seq))
        match = _MARIADB_GTID.fullmatch(stripped)
        if match is None:
            raise GtidError(f"invalid GTID {text!r}; expected {_GTID_FORMS}")
        domain, server_id, seq = map(_to_int, match.groups())
        if domain > _MARIADB_MAX_ID:
            raise GtidError(f"invalid GTID {text!r}: domain id {domain} is out of range; expected {_MARIADB_GTID_FORM}")
        return cls(str(domain), seq, server_id)

    @classmethod
    def mariadb(cls, domain: int, server_id: int, seq: int) -> Gtid:
        _check_number(domain, "domain id", 0, _MARIADB_MAX_ID, f"{domain}-{server_id}-{seq}", _MARIADB_GTID_FORM)
        return cls(str(domain), seq, server_id)

    @classmethod
    def mysql(cls, uuid: str, seq: int, tag: str = "") -> Gtid:
        """``uuid:seq``, or ``uuid:tag:seq`` with a tag (MySQL 8.3+; "" is no tag)."""
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            raise GtidError(f"invalid server UUID {uuid!r}; expected {_MYSQL_GTID_FORM}")
        if not tag:
            return cls(uuid.lower(), seq)
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise GtidError(f"invalid GTID tag {tag!r}: expected {_TAG_FORM}")
        return cls(f"{uuid}:{tag}".lower(), seq)

    def __str__(self) -> str:
        if self.flavor == "mysql":
            return f"{self.source}:{self.seq}"
        if self.server_id is None:
            raise GtidError(
                f"MariaDB GTID of domain {self.source} seq {self.seq} has no server id, so it cannot be "
                f"written; expected {_MARIADB_GTID_FORM}"
            )
        return f"{self.source}-{self.server_id}-{self.seq}"


def _is_tagged_source(source: str) -> bool:
    """'uuid:tag', a tagged GTID's source (MySQL 8.3+); `source` is longer than a UUID."""
    return (
        source[_UUID_LENGTH] == ":"
        and _UUID.fullmatch(source, 0, _UUID_LENGTH) is not None
        and _TAG.fullmatch(source, _UUID_LENGTH + 1) is not None
    )


def _check_number(value: object, what: str, low: int, high: int, text: str, form: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise GtidError(f"invalid GTID {text!r}: {what} {value!r} is not an integer; expected {form}")
    if not low <= value <= high:
        raise GtidError(f"invalid GTID {text!r}: {what} {value} is outside {low}..{high}; expected {form}")


# --- interval algebra on sorted, disjoint, non-adjacent closed intervals ------------------------


def _normalize(intervals: list[Interval]) -> Intervals:
    """Sort and merge overlapping or adjacent intervals."""
    intervals.sort()
    merged: list[Interval] = []
    for lo, hi in intervals:
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _union(a: Intervals, b: Intervals) -> Intervals:
    return _normalize([*a, *b])  # two sorted runs: timsort merges them in linear time


def _intersection(a: Intervals, b: Intervals) -> Intervals:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _difference(a: Intervals, b: Intervals) -> Intervals:
    out: list[Interval] = []
    j = 0
    for lo, hi in a:
        while j < len(b) and b[j][1] < lo:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi and lo <= hi:
            if b[k][0] > lo:
                out.append((lo, b[k][0] - 1))
            lo = max(lo, b[k][1] + 1)
            k += 1
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def _covers(outer: Intervals, inner: Intervals) -> bool:
    # outer is merged, so each inner interval must fit inside a single outer interval.
    j = 0
    for lo, hi in inner:
        while j < len(outer) and outer[j][1] < lo:
            j += 1
        if j == len(outer) or outer[j][0] > lo or outer[j][1] < hi:
            return False
    return True


def _contains(intervals: Intervals, seq: int) -> bool:
    lo, hi = intervals[-1]
    if seq >= lo:  # the common case: a live position is one interval, or seq is recent
        return seq <= hi
    i = bisect_right(intervals, seq, key=_first) - 1
    return i >= 0 and intervals[i][1] >= seq


def _describe(intervals: dict[str, Intervals]) -> str:
    """Interval notation for any set, also one that MariaDB syntax cannot express.

    MySQL's order (Gtid_set::to_string, sql/rpl_gtid_set.cc: by Tsid, i.e. UUID then tag as
    bytes, libs/mysql/gtid/tsid.cpp and tag.h) is the order of the 'uuid[:tag]' texts: a UUID
    is lowercase hex of fixed length, and 'uuid' sorts before its 'uuid:tag'. Each UUID is
    printed once, its tags after its untagged intervals: ``uuid:1-5:tag1:1-3:tag2:7``."""
    elements: list[str] = []
    for source in sorted(intervals):
        numbers = "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in intervals[source])
        if len(source) > _UUID_LENGTH and elements and elements[-1].startswith(source[:_UUID_LENGTH]):
            elements[-1] += source[_UUID_LENGTH:] + numbers
        else:
            elements.append(source + numbers)
    return ",".join(elements)


# --- GtidSet ----------------------------------------------------------------------------------


class GtidSet:
    """An immutable set of GTIDs of one flavor. Build with `parse`, `empty` or `with_gtid`.

    Equality and hash are those of the set of (source, seq) pairs: MariaDB server ids and the
    flavor of an empty set do not take part.
    """

    __slots__ = ("flavor", "_intervals", "_server_ids", "_hash")

    flavor: Flavor | None
    _intervals: dict[str, Intervals]  # never mutated once built; only non-empty sources
    _server_ids: dict[str, int]  # MariaDB: server id of each domain's last GTID, where known
    _hash: int | None

    def __init__(self) -> None:
        raise TypeError("build a GtidSet with GtidSet.parse(text) or GtidSet.empty(flavor)")

    @classmethod
    def _build(
        cls, flavor: Flavor | None, intervals: dict[str, Intervals], server_ids: dict[str, int]
    ) -> GtidSet:
        built = object.__new__(cls)
        setter = object.__setattr__
        setter(built, "flavor", flavor)
        setter(built, "_intervals", intervals)
        setter(built, "_server_ids", server_ids)
        setter(built, "_hash", None)
        return built

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"GtidSet is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"GtidSet is immutable (cannot delete {name!r})")

    def __reduce__(self):
        return (_rebuild, (self.flavor, self._intervals, self._server_ids))

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def empty(cls, flavor: Flavor | None = None) -> GtidSet:
        _check_flavor(flavor)
        return cls._build(flavor, {}, {})

    @classmethod
    def parse(cls, text: str, flavor: Flavor | None = None) -> GtidSet:
        """Parse MySQL ``uuid:1-5:7-9,uuid2:3`` or MariaDB ``0-1-100,1-2-5`` text.

        The flavor is inferred from the syntax unless given; ``""`` is the empty set.
        """
        _check_flavor(flavor)
        if not isinstance(text, str):
            raise GtidError(f"GTID set {text!r} must be text; expected {_SET_FORMS[flavor]}")
        stripped = text.strip()
        if not stripped:
            return cls._build(flavor, {}, {})
        asked = flavor
        mysql: dict[str, list[Interval]] = {}
        mariadb: dict[str, Intervals] = {}
        server_ids: dict[str, int] = {}

        def fail(problem: str, piece: str) -> NoReturn:
            raise GtidError(
                f"invalid GTID set {_shorten(text)}: {problem} {_shorten(piece)}; expected {_SET_FORMS[flavor]}"
            )

        for element in stripped.split(","):
            element = element.strip()
            if ":" in element or _UUID.fullmatch(element):
                element_flavor: Flavor = "mysql"
            elif _MARIADB_GTID.fullmatch(element):
                element_flavor = "mariadb"
            elif not element:
                fail("empty element (a stray comma)", element)
            else:
                fail("not a GTID set element:", element)
            if flavor is None:
                flavor = element_flavor
            elif element_flavor != flavor:
                if asked is not None:
                    fail(f"{element_flavor} syntax where flavor {asked!r} was asked:", element)
                fail(f"mixes {flavor} and {element_flavor} syntax at", element)
            if element_flavor == "mysql":
                for source, intervals in _parse_mysql_element(element, fail).items():
                    mysql.setdefault(source, []).extend(intervals)
            else:
                domain_id, server_id, seq = map(_to_int, element.split("-"))
                if domain_id > _MARIADB_MAX_ID:
                    fail(f"domain id outside 0..{_MARIADB_MAX_ID} in", element)
                if server_id > _MARIADB_MAX_ID:
                    fail(f"server id outside 0..{_MARIADB_MAX_ID} in", element)
                if not 1 <= seq <= _MARIADB_MAX_SEQ:
                    fail(f"sequence number outside 1..{_MARIADB_MAX_SEQ} in", element)
                domain = str(domain_id)
                if domain in mariadb:
                    fail(f"domain {domain} appears twice, again in", element)
                mariadb[domain] = ((1, seq),)
                server_ids[domain] = server_id
        if flavor == "mysql":
            return cls._build(flavor, {source: _normalize(ivs) for source, ivs in mysql.items()}, {})
        return cls._build(flavor, mariadb, server_ids)

    # --- queries ------------------------------------------------------------------------------

    def __contains__(self, gtid: object) -> bool:
        if not isinstance(gtid, Gtid):
            return False
        if self.flavor is not None and gtid.flavor != self.flavor:
            raise GtidError(
                f"a {gtid.flavor} GTID {gtid.source}:{gtid.seq} cannot be looked up in a {self.flavor} GTID set"
            )
        intervals = self._intervals.get(gtid.source)
        return intervals is not None and _contains(intervals, gtid.seq)

    def sources(self) -> frozenset[str]:
        """Sources (server UUIDs or MariaDB domain ids) with at least one GTID."""
        return frozenset(self._intervals)

    def intervals(self, source: str) -> Intervals:
        """The (first, last) ranges of `source`'s seqs, inclusive and in order; () if none."""
        return self._intervals.get(source.lower(), ())

    def last(self, source: str) -> int | None:
        """Highest seq of `source`, None if the set holds none of it."""
        intervals = self._intervals.get(source.lower())
        return None if intervals is None else intervals[-1][1]

    def issubset(self, other: GtidSet) -> bool:
        """Every GTID of self is in other."""
        _combined_flavor(self, other)
        theirs = other._intervals
        for source, mine in self._intervals.items():
            their = theirs.get(source)
            if their is None or not _covers(their, mine):
                return False
        return True

    def __le__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.issubset(other)

    def __bool__(self) -> bool:
        return bool(self._intervals)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._intervals == other._intervals

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._intervals.items())))
        return self._hash  # type: ignore[return-value]

    # --- building new sets --------------------------------------------------------------------

    def with_gtid(self, gtid: Gtid) -> GtidSet:
        """This set plus one committed transaction (MariaDB: plus the whole prefix 1..seq)."""
        flavor = gtid.flavor
        if self.flavor is not None and flavor != self.flavor:
            raise GtidError(f"a {flavor} GTID {gtid.source}:{gtid.seq} cannot be added to a {self.flavor} GTID set")
        source, seq = gtid.source, gtid.seq
        old = self._intervals.get(source)
        server_ids = self._server_ids
        if flavor == "mysql":
            if old is None:
                new: Intervals = ((seq, seq),)
            else:
                lo, hi = old[-1]
                if seq == hi + 1:  # the hot path: the next transaction of the same server
                    new = (*old[:-1], (lo, seq))
                elif seq > hi:
                    new = (*old, (seq, seq))
                elif _contains(old, seq):
                    return self
                else:
                    new = _union(old, ((seq, seq),))
        else:
            last = 0 if old is None else old[-1][1]
            if seq > last or (seq == last and source not in server_ids and gtid.server_id is not None):
                # The domain's last GTID changes: its server id is now that of this GTID.
                if server_ids.get(source) != gtid.server_id:
                    server_ids = dict(server_ids)
                    if gtid.server_id is None:
                        server_ids.pop(source, None)
                    else:
                        server_ids[source] = gtid.server_id
            elif old is not None and old[0] == (1, last):
                return self  # already a prefix at or past seq (strict mode: nothing to add)
            if old is None or old[0][0] == 1 and len(old) == 1:
                new = ((1, max(seq, last)),)
            else:  # a non-prefix domain, e.g. from a difference
                new = _union(old, ((1, seq),))
        intervals = self._intervals.copy()
        intervals[source] = new
        return GtidSet._build(flavor, intervals, server_ids)

    def union(self, other: GtidSet) -> GtidSet:
        flavor = _combined_flavor(self, other)
        intervals = self._intervals.copy()
        for source, theirs in other._intervals.items():
            mine = intervals.get(source)
            intervals[source] = theirs if mine is None else _union(mine, theirs)
        return GtidSet._build(flavor, intervals, _server_ids_for(flavor, intervals, self, other))

    def intersection(self, other: GtidSet) -> GtidSet:
        flavor = _combined_flavor(self, other)
        intervals: dict[str, Intervals] = {}
        for source, mine in self._intervals.items():
            theirs = other._intervals.get(source)
            if theirs is not None:
                common = _intersection(mine, theirs)
                if common:
                    intervals[source] = common
        return GtidSet._build(flavor, intervals, _server_ids_for(flavor, intervals, self, other))

    def difference(self, other: GtidSet) -> GtidSet:
        flavor = _combined_flavor(self, other)
        intervals: dict[str, Intervals] = {}
        for source, mine in self._intervals.items():
            theirs = other._intervals.get(source)
            rest = mine if theirs is None else _difference(mine, theirs)
            if rest:
                intervals[source] = rest
        return GtidSet._build(flavor, intervals, _server_ids_for(flavor, intervals, self, other))

    def __or__(self, other: object) -> GtidSet:
        return self.union(other) if isinstance(other, GtidSet) else NotImplemented

    def __and__(self, other: object) -> GtidSet:
        return self.intersection(other) if isinstance(other, GtidSet) else NotImplemented

    def __sub__(self, other: object) -> GtidSet:
        return self.difference(other) if isinstance(other, GtidSet) else NotImplemented

    # --- text ---------------------------------------------------------------------------------

    def __str__(self) -> str:
        """Canonical text that `parse` reads back to an equal set ("" for the empty set)."""
        if self.flavor != "mariadb":
            return _describe(self._intervals)
        parts = []
        for domain in sorted(self._intervals, key=int):
            intervals = self._intervals[domain]
            if len(intervals) != 1 or intervals[0][0] != 1:
                raise GtidError(
                    f"MariaDB GTID set <{_describe(self._intervals)}> cannot be written in MariaDB syntax: "
                    f"domain {domain} holds {_describe({domain: intervals})!r}, not a prefix 1..N "
                    f"(MariaDB form 'domain-server-seq' names only the last GTID of each domain)"
                )
            server_id = self._server_ids.get(domain)
            if server_id is None:
                raise GtidError(
                    f"MariaDB GTID set <{_describe(self._intervals)}> cannot be written: the server id of "
                    f"domain {domain} seq {intervals[0][1]} is unknown; expected {_MARIADB_SET_FORM}"
                )
            parts.append(f"{domain}-{server_id}-{intervals[0][1]}")
        return ",".join(parts)

    def __repr__(self) -> str:
        try:
            return f"GtidSet.parse({str(self)!r}, flavor={self.flavor!r})"
        except GtidError:
            return f"<GtidSet {self.flavor} {_describe(self._intervals)}>"


def _rebuild(flavor: Flavor | None, intervals: dict[str, Intervals], server_ids: dict[str, int]) -> GtidSet:
    return GtidSet._build(flavor, intervals, server_ids)


def _check_flavor(flavor: object) -> None:
    if flavor is not None and flavor not in _FLAVORS:
        raise GtidError(f"unknown GTID flavor {flavor!r}; expected 'mysql', 'mariadb' or None")


def _combined_flavor(a: GtidSet, b: object) -> Flavor | None:
    if not isinstance(b, GtidSet):
        raise TypeError(f"expected a GtidSet, got {type(b).__name__}")
    if a.flavor is None:
        return b.flavor
    if b.flavor is None or b.flavor == a.flavor:
        return a.flavor
    raise GtidError(f"cannot combine a {a.flavor} GTID set with a {b.flavor} GTID set: {a!r} and {b!r}")


def _server_ids_for(
    flavor: Flavor | None, intervals: dict[str, Intervals], *operands: GtidSet
) -> dict[str, int]:
    """MariaDB: keep a domain's server id only from an operand whose last GTID is the result's."""
    if flavor != "mariadb":
        return {}
    server_ids: dict[str, int] = {}
    for domain, result in intervals.items():
        last = result[-1][1]
        for operand in operands:
            theirs = operand._intervals.get(domain)
            if theirs is not None and theirs[-1][1] == last and domain in operand._server_ids:
                server_ids[domain] = operand._server_ids[domain]
                break
    return server_ids


def _parse_mysql_element(element: str, fail) -> dict[str, list[Interval]]:
    """``uuid:1-5:7:tag1:1-3`` -> {lowercased source: intervals}; `fail(problem, piece)` raises.

    As MySQL reads it (Gtid_set::add_gtid_text, sql/rpl_gtid_set.cc, 8.3+): after the UUID each
    ':'-separated item is an interval or a tag, and a tag holds the intervals after it, up to the
    next tag (the untagged ones come before any tag)."""
    uuid, *parts = (part.strip() for part in element.split(":"))
    if not _UUID.fullmatch(uuid):
        fail("not a server UUID:", uuid)
    if not parts:
        fail("no transaction numbers after server UUID in", element)
    uuid = source = uuid.lower()
    sources: dict[str, list[Interval]] = {}
    tag_without_numbers: str | None = None
    for part in parts:
        if _TAG_LIKE.fullmatch(part):
            if len(part) > _TAG_MAX_LENGTH:
                fail(f"a GTID tag longer than {_TAG_MAX_LENGTH} characters:", part)
            if tag_without_numbers is not None:
                fail(f"no transaction numbers after tag {tag_without_numbers!r} in", element)
            tag_without_numbers = part
            source = f"{uuid}:{part.lower()}"
            continue
        tag_without_numbers = None
        bounds = [bound.strip() for bound in part.split("-")]
        if len(bounds) > 2 or not all(_NUMBER.fullmatch(bound) for bound in bounds):
            fail(f"not an interval 'n' or 'first-last', nor a GTID tag ({_TAG_FORM}):", part)
        lo, hi = _to_int(bounds[0]), _to_int(bounds[-1])
        if lo < 1:
            fail("transaction numbers start at 1, got", part)
        if hi < lo:
            fail("reversed interval", part)
        if hi > _MYSQL_MAX_SEQ:
            fail(f"transaction number above {_MYSQL_MAX_SEQ} in", part)
        sources.setdefault(source, []).append((lo, hi))
    if tag_without_numbers is not None:
        fail(f"no transaction numbers after tag {tag_without_numbers!r} in", element)
    return sources
