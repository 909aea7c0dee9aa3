"""Collation sort keys (dblog.mysql.collation) against the server's own `a = b`, on a real MariaDB.

The property: for two strings, `sort_key(a) == sort_key(b)` exactly when the server says
`a = b` under the collation (for the collations dblog models: general, unicode, unicode_520,
uca1400_ai, _bin, 8-bit), and never when the server says they differ (for the ones it does not
model, whose identity is the stored value).
"""

from __future__ import annotations

import itertools
import unicodedata
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dblog.mysql.collation import WeightedCollation, _find_contractions, load_collation

pytestmark = pytest.mark.timeout(900)

# (collation, charset) pairs checked by the property; uca1400 is skipped on servers without it.
MODELLED = [
    ("utf8mb4_general_ci", "utf8mb4"),
    ("utf8mb4_unicode_ci", "utf8mb4"),
    ("utf8mb4_unicode_520_ci", "utf8mb4"),
    ("utf8mb4_uca1400_ai_ci", "utf8mb4"),
    ("utf8mb4_bin", "utf8mb4"),
    ("latin1_swedish_ci", "latin1"),
    ("utf8mb4_general_nopad_ci", "utf8mb4"),
    ("utf8mb4_unicode_520_nopad_ci", "utf8mb4"),
    ("utf8mb4_uca1400_nopad_ai_ci", "utf8mb4"),
    ("utf8mb4_spanish2_ci", "utf8mb4"),  # a language tailoring: 'ch' and 'll' are contractions
    ("utf8mb3_general_ci", "utf8mb3"),
    ("latin1_german2_ci", "latin1"),  # expansions: 'ä' = 'ae', 'ß' = 'ss'
]
UNMODELLED = [("utf8mb4_uca1400_as_cs", "utf8mb4"), ("utf8mb4_uca1400_as_ci", "utf8mb4")]

# Pieces of test strings: ASCII, accented Latin, German ß/ẞ, Turkish dotless/dotted i, CJK,
# full-width, emoji (supplementary), spaces and space-likes, plus the ingredients of real
# contractions (uca1400: И + U+0306 = Й, l·, Thai prevowel + consonant; spanish2: ch, ll).
ALPHABET = (
    list("aAbBcChHeEiIlLnNoOsSuUzZ09 -_.")
    + list("àÀáÁâÂäÄåÅæÆçÇèÈéÉêÊëËíÍîÎïÏñÑòÒóÓöÖøØùÙúÚüÜýÝÿŠšŽžŒœ")
    + ["ß", "ẞ", "ı", "İ", "中", "文", "日", "Ａ", "ａ", "😀", "😁", "🙂", "\U00020000"]
    + ["\u00a0", "\t", "\u3000", "И", "и", "\u0306", "Й", "й", "·", "เ", "ก", "ข", "\u0301", "\u0308", "ǆ", "ﬁ", "Ⅸ"]
    + ["ch", "cH", "Ll", "И\u0306", "l·", "เก", "e\u0301"]  # sequences, so that contractions are common
)


def _mutations(text: str) -> list[str]:
    """Spellings the server may or may not consider equal to `text`."""
    stripped = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return [
        text.swapcase(), text.upper(), text.lower(), text + " ", text + "  ", text.rstrip(" "), stripped,
        unicodedata.normalize("NFD", text), unicodedata.normalize("NFC", text), text.replace("ß", "ss"),
        text.replace("ı", "i"), text.casefold(), text + "\u00a0", text + "\t",
    ]


@st.composite
def string_families(draw, pieces: list[str]):
    """A few random strings and random variants of each."""
    word = st.lists(st.sampled_from(pieces), max_size=6).map("".join)
    bases = draw(st.lists(word, min_size=2, max_size=4))
    out = list(bases)
    for base in bases:
        variants = _mutations(base)
        out += draw(st.lists(st.sampled_from(variants), min_size=1, max_size=3))
        # the case of some characters only ('ch' vs 'cH' differ under spanish2_ci)
        flips = draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))
        out.append("".join(c.swapcase() if flip else c for c, flip in zip(base, flips)))
    return out


@pytest.fixture(scope="module")
def conn(mariadb):
    name = f"test_{uuid.uuid4().hex[:12]}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    connection = mariadb.connect(name)
    try:
        yield connection
    finally:
        connection.close()
        mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _has_collation(conn, name: str) -> bool:
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE FULL_COLLATION_NAME = %s "
            "UNION SELECT 1 FROM information_schema.COLLATIONS WHERE COLLATION_NAME = %s",
            (name, name),
        )
        return bool(cursor.fetchall())


def _collation(conn, name: str, charset: str):
    if not _has_collation(conn, name):
        pytest.skip(f"this server has no {name}")
    with conn.cursor() as cursor:
        cursor.execute("SELECT DATABASE()")
        db = cursor.fetchone()[0]
    return load_collation(conn, name, charset, db)


def _representable(text: str, charset: str) -> bool:
    if charset == "latin1":
        try:
            text.encode("cp1252")
        except UnicodeEncodeError:
            return False
    if charset == "utf8mb3":
        return all(ord(c) < 0x10000 for c in text)
    return True


def _server_equalities(conn, collation: str, charset: str, texts: list[str]) -> dict[tuple[str, str], bool]:
    pairs = list(itertools.combinations(texts, 2))
    typed = f"CONVERT(%s USING {charset}) COLLATE {collation}"
    with conn.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"{typed} = {typed}" for _ in pairs), [t for pair in pairs for t in pair])
        row = cursor.fetchone()
    return {pair: bool(equal) for pair, equal in zip(pairs, row)}


def _check(conn, model, collation: str, charset: str, texts: list[str], exact: bool = True) -> None:
    texts = [text for text in dict.fromkeys(texts) if _representable(text, charset)]
    if len(texts) < 2:
        return
    for (a, b), server_equal in _server_equalities(conn, collation, charset, texts).items():
        ours = model.sort_key(a) == model.sort_key(b)
        if exact:
            assert ours == server_equal, f"{collation}: server says {a!r} {'=' if server_equal else '<>'} {b!r}"
        else:  # finer than the server: never equal where the server says different
            assert server_equal or not ours, f"{collation}: {a!r} and {b!r} share an identity but differ"


# --- the property -----------------------------------------------------------------------------


@pytest.mark.parametrize("collation, charset", MODELLED)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sort_keys_are_equal_exactly_when_the_server_says_so(conn, collation, charset, data):
    model = _collation(conn, collation, charset)
    assert model.kind in ("weights", "binary"), model.reason
    _check(conn, model, collation, charset, data.draw(string_families(ALPHABET)))


@pytest.mark.parametrize("collation, charset", UNMODELLED)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_unmodelled_collation_compares_by_value_never_coarser(conn, collation, charset, data):
    model = _collation(conn, collation, charset)
    assert model.kind == "raw"  # multi-level: not a concatenation of per-character weights
    _check(conn, model, collation, charset, data.draw(string_families(ALPHABET)), exact=False)


# --- examples -------------------------------------------------------------------------------------


def test_case_accents_and_trailing_spaces(conn):
    general = _collation(conn, "utf8mb4_general_ci", "utf8mb4")
    assert len({general.sort_key(t) for t in ("abc", "ABC", "Àbc", "abc ", "aBç   ")}) == 1
    assert general.sort_key("abc") != general.sort_key("abd")
    assert general.sort_key("abc") != general.sort_key(" abc")  # only trailing spaces pad
    assert general.sort_key("abc") != general.sort_key("abc\t")
    # general_ci weighs every supplementary character the same (U+FFFD)
    assert general.sort_key("😀") == general.sort_key("😁") == general.sort_key("\U00020000")
    nopad = _collation(conn, "utf8mb4_general_nopad_ci", "utf8mb4")
    assert nopad.sort_key("abc") == nopad.sort_key("ABC") != nopad.sort_key("abc ")
    binary = _collation(conn, "utf8mb4_bin", "utf8mb4")
    assert binary.kind == "binary" and binary.pad_space
    assert binary.sort_key("abc") == binary.sort_key("abc  ") != binary.sort_key("ABC")
    unicode = _collation(conn, "utf8mb4_unicode_ci", "utf8mb4")
    assert unicode.sort_key("Straße") == unicode.sort_key("STRASSE")
    assert unicode.sort_key("abc") == unicode.sort_key("abc\u00a0")  # NBSP weighs like a space
    _check(conn, unicode, "utf8mb4_unicode_ci", "utf8mb4", ["Straße", "STRASSE", "abc", "abc\u00a0", "ABC "])


def test_uca1400_contractions_are_found_and_used(conn):
    model = _collation(conn, "utf8mb4_uca1400_ai_ci", "utf8mb4")
    assert len(model.contractions) > 900  # DUCET 14.0 has 939 multi-character entries
    for sequence in ("И\u0306", "l·", "L·", "เก", "ເກ", "\u0fb2\u0f71\u0f80", "\u0627\u0653", "\U00011347\U0001133e"):
        assert sequence in model.contractions, sequence
    texts = ["И\u0306", "Й", "И", "и\u0306", "й", "l·", "l", "L·l", "เก", "ก", "เ", "เกข", "Й ", "aИ\u0306b"]
    _check(conn, model, "utf8mb4_uca1400_ai_ci", "utf8mb4", texts)
    # without its contraction 'И' + U+0306 would weigh as 'И' (the breve is ignorable): wrong
    assert model.sort_key("И\u0306") == model.sort_key("Й") != model.sort_key("И")


def test_spanish2_contractions(conn):
    model = _collation(conn, "utf8mb4_spanish2_ci", "utf8mb4")
    assert set(model.contractions) == {"ch", "Ch", "CH", "ll", "Ll", "LL"}
    _check(conn, model, "utf8mb4_spanish2_ci", "utf8mb4", ["ch", "CH", "cH", "c h", "llama", "LLAMA", "lLama"])


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci"])
def test_mariadb_base_collations_have_no_contractions(conn, collation):
    """Why dblog skips the contraction search for them: the same search finds nothing."""
    loaded = _collation(conn, collation, "utf8mb4")
    probe = WeightedCollation(collation, loaded.pad_space, loaded.units, loaded.space)
    _find_contractions(conn, probe, "utf8mb4")
    assert probe.contractions == {}


@pytest.mark.slow
def test_contraction_search_matches_an_exhaustive_scan(conn):
    """Every (character, mark) pair of planes 0-1 against the server: the structural search found
    every pair that contracts (about 90 s)."""
    model = _collation(conn, "utf8mb4_uca1400_ai_ci", "utf8mb4")
    marks = [c for c in range(0x110000) if unicodedata.category(chr(c))[0] == "M"] + [0xB7, 0x387, 0x30FC]
    char = "CONVERT(CHAR({} USING utf32) USING utf8mb4)"
    coll = "utf8mb4_uca1400_ai_ci"
    import json

    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT h.n, t.n FROM JSON_TABLE(%s, '$[*]' COLUMNS (n INT PATH '$')) t "
            f"JOIN (SELECT seq AS n FROM seq_0_to_131071 WHERE seq < 55296 OR seq > 57343) h "
            f"WHERE WEIGHT_STRING(CONCAT({char.format('h.n')}, {char.format('t.n')}) COLLATE {coll}) <> "
            f"CONCAT(WEIGHT_STRING({char.format('h.n')} COLLATE {coll}), "
            f"WEIGHT_STRING({char.format('t.n')} COLLATE {coll}))",
            (json.dumps(marks),),
        )
        pairs = {chr(h) + chr(t) for h, t in cursor.fetchall()}
    assert pairs and pairs <= set(model.contractions)
