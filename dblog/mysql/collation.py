"""Key equality as the server sees it: collation sort keys computed in Python from the server's weights.

Under a case- or accent-insensitive collation the server holds 'abc', 'ABC', 'Àbc' and (PAD SPACE)
'abc ' as ONE primary-key value. dblog keeps every key exactly as stored (`RowChange.key`: what
sinks key by), and compares keys the server's way through an *identity*: each string key value
replaced by its `sort_key` under the column's collation, so two values have the same identity
exactly when the server says `a = b`.

Nothing here is a hand-written collation table. `load_collation` asks the server, once per
collation and process:

* the weight of every code point the column's charset can hold (`WEIGHT_STRING` of each one,
  1.1M for utf8mb4, in one query grouped by 256-code-point page; parsed lazily per page);
* PAD SPACE or NO PAD (`'a' = 'a '`): PAD SPACE collations compare as if the shorter string were
  padded with spaces, i.e. trailing weights equal to the space's weight do not count (that also
  covers characters weighing the same as a space, e.g. U+00A0 under utf8mb4_unicode_ci);
* contractions: sequences the server weighs as one unit, not as the concatenation of their
  characters (utf8mb4_uca1400_ai_ci: 'И'+U+0306 is 'Й', 'l·', Thai/Lao prevowel + consonant, Indic
  two-part vowels ...; utf8mb4_spanish2_ci: 'ch', 'll'). The server does not list them, so they
  are found by asking it for the weight of candidate sequences and keeping those whose weight
  differs from the concatenation: every pair whose first character starts a canonical or
  compatibility decomposition and whose second is a combining mark or a later decomposition
  character, every pair of letters/marks inside one 128-code-point block of a non-ideographic
  script (Thai-style prevowels), every pair of Latin/Greek/Cyrillic letters (language
  tailorings), then longer sequences grown from those found and every decomposition sequence.
  A key is then weighed like the server does it: longest contraction first, else the
  character's own weight. MariaDB's base utf8mb4_general_ci, unicode_ci and unicode_520_ci have
  no contractions (MariaDB loads none for UCA 4.0.0 / 5.2.0; tests/mysql/test_collation.py checks it),
  so they skip the search.

Collations whose equality is plain binary (`*_bin`, the `binary` charset) need no weights: the
identity is the value itself, minus trailing spaces under PAD SPACE. A collation this module
cannot model exactly (multi-level: uca1400 `_as_`/`_cs` variants, thai_520_w2; Czech and Thai
8-bit collations; multi-byte Asian charsets) gets the value itself as identity too, which is
*finer* than the server's equality, never coarser: two different keys are never confused, only
collation-equal spellings are not merged. That is safe for the watermark window: a change
always names the stored spelling of the row it touches (its before-image is the row as stored),
so a chunk row is still dropped by exact value.

Cost: the first load of a collation takes about 0.7 s (weights; 1.4 s without MariaDB's
SEQUENCE engine) plus 2-5 s for the contraction search when one is needed; a sort key then
costs about a microsecond for a short key (one `str.translate`).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import unicodedata
from typing import Any, Callable, Iterable

import pymysql
import pymysql.cursors

from dblog.mysql.server_errors import refused_by_server

__all__ = ["Collation", "load_collation", "binary_collation", "RAW"]

log = logging.getLogger("dblog.mysql.collation")

# Charsets whose characters are Unicode code points (CHAR(n USING utf32) converts to them).
UNICODE_CHARSETS = {"utf8mb4": 0x10FFFF, "utf8mb3": 0xFFFF, "utf8": 0xFFFF, "ucs2": 0xFFFF,
                    "utf16": 0x10FFFF, "utf16le": 0x10FFFF, "utf32": 0x10FFFF}
# Single-byte collations that are not "one weight string per character" (multi-pass or
# reordering): equality follows the raw value for them.
_UNMODELLED = re.compile(r"^(latin2_czech_cs|cp1250_czech_cs|tis620_.*)$")
# MariaDB collations known to have no contractions (checked by tests/mysql/test_collation.py).
_CONTRACTION_FREE = re.compile(r"^[a-z0-9]+_(general|general_nopad|general_mysql500|unicode|unicode_nopad|"
                               r"unicode_520|unicode_520_nopad)_ci$")
_MAX_CONTRACTION = 6  # MY_UCA_MAX_CONTRACTION
_SURROGATES = (0xD800, 0xDFFF)


class Collation:
    """Sort keys of one collation: `sort_key(a) == sort_key(b)` exactly when the server says
    `a = b` under it. `kind` is 'weights' (computed from server weights), 'binary' (the value,
    trailing spaces dropped under PAD SPACE) or 'raw' (the value: equality not modelled, finer
    than the server's)."""

    def __init__(self, name: str, kind: str, pad_space: bool, reason: str = "") -> None:
        self.name = name
        self.kind = kind
        self.pad_space = pad_space
        self.reason = reason  # why 'raw'
        # binary and raw: the value; PAD SPACE compares as if padded, so trailing spaces never count
        self.sort_key: Callable[[str], Any] = _rstrip_spaces if pad_space else _same

    def __repr__(self) -> str:
        return f"Collation({self.name!r}, {self.kind}, {'PAD SPACE' if self.pad_space else 'NO PAD'})"


def _same(value: Any) -> Any:
    return value


def _rstrip_spaces(text: str) -> str:
    return text.rstrip(" ")


RAW = Collation("raw", "raw", False, "no collation")


def binary_collation(pad_space: bool) -> Collation:
    return Collation("binary", "binary", pad_space)


class _Units(dict):
    """code point -> the character's weights, one str character per weight unit (so that
    `str.translate` builds a sort key in C). Filled lazily from the server's page strings."""

    def __init__(self, pages: dict[int, list[str] | str], unit_hex: int) -> None:
        super().__init__()
        self._pages = pages
        self._unit_hex = unit_hex  # hex digits per weight unit: 4 (16-bit) or 2 (8-bit)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # pickled for Spark tasks (snapshot.distributed): no lock
        return {name: value for name, value in self.__dict__.items() if name != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def decode(self, hex_weights: str) -> str:
        step = self._unit_hex
        return "".join(chr(int(hex_weights[i : i + step], 16)) for i in range(0, len(hex_weights), step))

    def __missing__(self, code: int) -> str:
        with self._lock:  # another thread may be parsing the same page
            page = self._pages.pop(code >> 8, None)
            if page is not None:
                base = code & ~0xFF
                for offset, hex_weights in enumerate(page.split(",") if isinstance(page, str) else page):
                    if hex_weights != "-":
                        self[base + offset] = self.decode(hex_weights)
            found = self.get(code)
        if found is None:
            # Not a LookupError: str.translate would silently keep the character as it is.
            raise NoWeight(f"no weight for U+{code:04X}")
        return found


class NoWeight(ValueError):
    """A character the collation's charset cannot hold."""


class WeightedCollation(Collation):
    """A collation modelled as per-character weights plus contractions."""

    def __init__(self, name: str, pad_space: bool, units: _Units, space: str) -> None:
        super().__init__(name, "weights", pad_space)
        self.units = units
        self.space = space  # the space's weight: one unit
        self.contractions: dict[str, str] = {}  # sequence (2+ characters) -> weight units
        self._heads: dict[str, int] = {}  # first character -> longest contraction starting with it
        self._tails: frozenset[str] = frozenset()  # every non-first character of a contraction
        self.sort_key = self._sort_key

    def add_contraction(self, sequence: str, weights_hex: str) -> None:
        self.contractions[sequence] = self.units.decode(weights_hex)
        head = sequence[0]
        self._heads[head] = max(self._heads.get(head, 0), len(sequence))
        self._tails = self._tails | frozenset(sequence[1:])

    def weights(self, text: str) -> str:
        """The weight units of `text`, before PAD SPACE trimming."""
        if not self._tails or self._tails.isdisjoint(text):
            return text.translate(self.units)
        # Like the server's scanner: at each position the longest contraction, else one character.
        out: list[str] = []
        i, n = 0, len(text)
        units, heads, contractions = self.units, self._heads, self.contractions
        while i < n:
            longest = heads.get(text[i])
            if longest:
                for length in range(min(longest, n - i), 1, -1):
                    found = contractions.get(text[i : i + length])
                    if found is not None:
                        out.append(found)
                        i += length
                        break
                else:
                    out.append(units[ord(text[i])])
                    i += 1
            else:
                out.append(units[ord(text[i])])
                i += 1
        return "".join(out)

    def _sort_key(self, text: str) -> Any:
        try:
            weights = self.weights(text)
        except NoWeight:
            # A character outside the charset cannot come from the column; keep such a value
            # distinct from every weight string (bytes never equal str).
            return text.encode("utf-8", "surrogatepass")
        return weights.rstrip(self.space) if self.pad_space else weights


# --- loading from the server -----------------------------------------------------------------

_cache: dict[tuple[str, str], Collation] = {}
_lock = threading.Lock()


def _rows(conn, sql: str, params: Any = None) -> tuple:
    with conn.cursor(pymysql.cursors.Cursor) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, (bytes, bytearray)) else value


def _ident(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise ValueError(f"unexpected charset or collation name {name!r}")
    return name


def load_collation(conn, collation: str | None, charset: str | None, db: str | None = None) -> Collation:
    """The `Collation` of a string column (information_schema CHARACTER_SET_NAME and
    COLLATION_NAME), loaded once per server version and collation. `db` is any database the
    connection may read, for MariaDB's SEQUENCE tables (faster; optional)."""
    if charset == "binary" or collation == "binary":
        return binary_collation(False)
    if not collation or not charset:
        return RAW
    version = str(_rows(conn, "SELECT VERSION()")[0][0])
    key = (version, collation)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            try:
                cached = _load(conn, _ident(collation), _ident(charset), db)
            except (pymysql.err.MySQLError, ValueError) as error:
                if not _refused(error):
                    raise  # a lost connection: the caller retries
                # The server refused a query (an old server without JSON_TABLE, say): compare by value.
                cached = Collation(collation, "raw", False, f"could not read its weights: {error}")
            if cached.kind == "raw":
                log.warning("key equality under collation %s follows the stored value (%s)", collation, cached.reason)
            _cache[key] = cached
        return cached


def _refused(error: Exception) -> bool:
    """The server rejected the statement itself (not a lost connection, shutdown or kill), or
    what it answered does not parse as weights (ValueError)."""
    return isinstance(error, ValueError) or refused_by_server(error)


def _convert(expression: str, charset: str) -> str:
    return f"CONVERT({expression} USING {charset})"


def _load(conn, collation: str, charset: str, db: str | None) -> Collation:
    typed = f"CONVERT(%s USING {charset}) COLLATE {collation}"
    pad_space = bool(_rows(conn, f"SELECT {typed} = {typed}", ("a", "a "))[0][0])
    if collation.endswith("_bin"):
        return binary_collation(pad_space)
    if _UNMODELLED.match(collation):
        return Collation(collation, "raw", pad_space, "a multi-pass collation")
    if charset in UNICODE_CHARSETS:
        pages, unit_hex = _unicode_pages(conn, collation, charset, UNICODE_CHARSETS[charset], db), 4
    else:
        maxlen = _rows(conn, "SELECT MAXLEN FROM information_schema.CHARACTER_SETS WHERE CHARACTER_SET_NAME = %s",
                       (charset,))
        if not maxlen or int(maxlen[0][0]) != 1:
            return Collation(collation, "raw", pad_space, f"charset {charset} is not modelled")
        pages, unit_hex = _single_byte_pages(conn, collation, charset), 2
    units = _Units(pages, unit_hex)
    space = units[ord(" ")]
    if len(space) != 1:
        return Collation(collation, "raw", pad_space, f"a multi-level collation (a space weighs {len(space)} units)")
    model = WeightedCollation(collation, pad_space, units, space)
    # Multi-level collations (accent/case-sensitive UCA) put all primary weights before all
    # secondary ones: their weight string is not a concatenation per character.
    probes = ["ab", "ba", "Ab", "a1", "1a", "a-", "z.", "a é" if unit_hex == 4 else "a z"]
    server = _server_weights(conn, model, charset, probes)
    if any(weights != model.weights(text) for text, weights in zip(probes, server)):
        return Collation(collation, "raw", pad_space, "a multi-level collation")
    if unit_hex == 4 and not _CONTRACTION_FREE.match(collation):
        _find_contractions(conn, model, charset)
    return model


def _unicode_pages(conn, collation: str, charset: str, maxchar: int, db: str | None) -> dict[int, str]:
    weight = f"COALESCE(HEX(WEIGHT_STRING({_convert('CHAR(n USING utf32)', charset)} COLLATE {collation})), '-')"
    select = (f"SELECT n >> 8, GROUP_CONCAT({weight} ORDER BY n SEPARATOR ',') FROM ({{numbers}}) numbers "
              f"WHERE (n < {_SURROGATES[0]} OR n > {_SURROGATES[1]}) AND n <= {maxchar} GROUP BY n >> 8")
    rows: list = []
    if db:
        try:
            seq = f"SELECT seq AS n FROM `{db.replace('`', '``')}`.seq_0_to_{maxchar}"
            rows = list(_rows(conn, select.format(numbers=seq)))
        except pymysql.err.MySQLError:  # no SEQUENCE engine (MySQL), or no access to `db`
            rows = []
    if not rows:
        digits = "SELECT 0 d " + " ".join(f"UNION ALL SELECT {i}" for i in range(1, 16))
        numbers = (f"SELECT %s + a.d * 4096 + b.d * 256 + c.d * 16 + e.d AS n "
                   f"FROM ({digits}) a, ({digits}) b, ({digits}) c, ({digits}) e")
        for plane in range((maxchar >> 16) + 1):
            rows.extend(_rows(conn, select.format(numbers=numbers), (plane << 16,)))
    pages = {int(page): _text(weights) for page, weights in rows}
    for page, weights in pages.items():
        if weights.count(",") != 255:
            raise ValueError(f"page {page:#x} of {collation} came back incomplete (group_concat_max_len too small?)")
    return pages


def _single_byte_pages(conn, collation: str, charset: str) -> dict[int, list[str]]:
    rows = _rows(
        conn,
        f"SELECT HEX(CONVERT(CHAR(seq USING {charset}) USING utf8mb4)), "
        f"COALESCE(HEX(WEIGHT_STRING(CHAR(seq USING {charset}) COLLATE {collation})), '-') "
        "FROM JSON_TABLE(%s, '$[*]' COLUMNS (seq INT PATH '$')) bytes",
        (json.dumps(list(range(256))),),
    )
    pages: dict[int, list[str]] = {}
    for byte, (utf8_hex, weights) in enumerate(rows):
        text = bytes.fromhex(_text(utf8_hex) or "").decode("utf-8", "replace")
        if len(text) != 1 or (text == "?" and byte != 0x3F):
            continue  # a byte the charset does not map
        code = ord(text)
        page = pages.setdefault(code >> 8, ["-"] * 256)
        page[code & 0xFF] = _text(weights)
    return pages


def _server_weights(conn, model: WeightedCollation, charset: str, texts: list[str]) -> list[str]:
    """The server's weight units of each text (one query)."""
    if not texts:
        return []
    expression = _convert("CONVERT(UNHEX(s) USING utf8mb4)", charset)
    rows = _rows(
        conn,
        f"SELECT i, HEX(WEIGHT_STRING({expression} COLLATE {model.name})) "
        "FROM JSON_TABLE(%s, '$[*]' COLUMNS (i FOR ORDINALITY, s TEXT PATH '$')) probes ORDER BY i",
        (json.dumps([text.encode("utf-8").hex() for text in texts]),),
    )
    return [model.units.decode(_text(weights) or "") for _, weights in rows]


# --- contraction search --------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _unicode_candidates() -> tuple[frozenset[str], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """From Python's Unicode database: (decomposition sequences, their first characters, marks
    and later decomposition characters, letters of non-ideographic scripts, Latin/Greek/Cyrillic
    letters)."""
    sequences: set[str] = set()
    tails: set[int] = {0x00B7, 0x0387, 0x30FC, 0x309D, 0x309E, 0x30FD, 0x30FE, 0xFF70, 0xFF9E, 0xFF9F}
    script_letters: list[int] = []
    for code in (*range(0x32400), *range(0xE0000, 0xE0200)):  # every assigned code point
        char = chr(code)
        category = unicodedata.category(char)
        if category[0] == "M":
            tails.add(code)
        elif category in ("Lo", "Lm") and code < 0x20000:
            name = unicodedata.name(char, "")
            if name and not name.startswith(_IDEOGRAPHIC):
                script_letters.append(code)
        if unicodedata.decomposition(char):
            sequences.update(_decompositions(char))
    heads = {ord(sequence[0]) for sequence in sequences}
    tails.update(ord(part) for sequence in sequences for part in sequence[1:])
    latin = [code for code in (*range(0x250), *range(0x370, 0x530)) if unicodedata.category(chr(code))[0] == "L"]
    return frozenset(sequences), tuple(sorted(heads)), tuple(sorted(tails)), tuple(script_letters), tuple(latin)


_IDEOGRAPHIC = ("CJK ", "HANGUL", "TANGUT", "YI SYLLABLE", "EGYPTIAN HIEROGLYPH", "CUNEIFORM",
                "KHITAN", "NUSHU", "ANATOLIAN HIEROGLYPH", "BAMUM", "LINEAR B", "CANADIAN SYLLABICS")


def _decompositions(char: str) -> Iterable[str]:
    mapping = unicodedata.decomposition(char)
    if mapping:
        parts = "".join(chr(int(part, 16)) for part in mapping.split() if not part.startswith("<"))
        if len(parts) >= 2:
            yield parts
    for form in ("NFD", "NFKD"):
        full = unicodedata.normalize(form, char)
        if len(full) >= 2:
            yield full


def _char(column: str, charset: str) -> str:
    return _convert(f"CHAR({column} USING utf32)", charset)


def _extensions(conn, model: WeightedCollation, charset: str, prefixes: list[str], tails: list[int],
                same_block: bool = False) -> list[tuple[str, str]]:
    """(prefix + tail, server weight hex) for every prefix and tail whose server weight is not the
    prefix's followed by the tail's: a contraction, computed on the server. With `same_block`,
    `tails` are offsets into the 128-code-point block of the prefix's last character."""
    if not prefixes or not tails:
        return []
    c, maxchar = model.name, UNICODE_CHARSETS[charset]
    prefix = _convert("CONVERT(UNHEX(p.s) USING utf8mb4)", charset)
    tail = "(p.b + t.n)" if same_block else "t.n"
    joined = f"CONCAT({prefix}, {_char(tail, charset)})"
    rows = _rows(
        conn,
        f"SELECT p.i, {tail}, HEX(WEIGHT_STRING({joined} COLLATE {c})) "
        "FROM JSON_TABLE(%s, '$[*]' COLUMNS (i FOR ORDINALITY, s TEXT PATH '$.s', b INT PATH '$.b')) p "
        "JOIN JSON_TABLE(%s, '$[*]' COLUMNS (n INT PATH '$')) t "
        f"WHERE ({tail} < {_SURROGATES[0]} OR {tail} > {_SURROGATES[1]}) AND {tail} <= {maxchar} "
        f"AND WEIGHT_STRING({joined} COLLATE {c}) <> "
        f"CONCAT(WEIGHT_STRING({prefix} COLLATE {c}), WEIGHT_STRING({_char(tail, charset)} COLLATE {c}))",
        (json.dumps([{"s": text.encode("utf-8").hex(), "b": ord(text[-1]) & ~127} for text in prefixes]),
         json.dumps(tails)),
    )
    return [(prefixes[int(i) - 1] + chr(int(code)), _text(weights)) for i, code, weights in rows]


def _find_contractions(conn, model: WeightedCollation, charset: str) -> None:
    maxchar = UNICODE_CHARSETS[charset]
    sequences, heads, tails, script_letters, latin = _unicode_candidates()
    below = lambda codes: [code for code in codes if code <= maxchar]  # noqa: E731
    heads, tails, script_letters = below(heads), below(tails), below(script_letters)
    found = _extensions(conn, model, charset, [chr(code) for code in heads], tails)
    found += _extensions(conn, model, charset, [chr(code) for code in script_letters], list(range(128)),
                         same_block=True)
    found += _extensions(conn, model, charset, [chr(code) for code in latin], list(latin))
    # Longer ones: grow each contraction found by one character while that changes its weight.
    latin_chars = {chr(code) for code in latin}
    while found:
        for sequence, weights in found:
            model.add_contraction(sequence, weights)
        grow = sorted({sequence for sequence, _ in found if len(sequence) < _MAX_CONTRACTION})
        found = _extensions(conn, model, charset, grow, tails)
        found += _extensions(conn, model, charset, grow, list(range(128)), same_block=True)
        found += _extensions(conn, model, charset, [text for text in grow if latin_chars.issuperset(text)], list(latin))
        found = [(text, weights) for text, weights in found if text not in model.contractions]
    # Decomposition sequences (e.g. Tibetan U+0FB2 U+0F71 U+0F80): any piece of one that the
    # model weighs differently from the server is a contraction.
    pieces = {sequence[i:j] for sequence in sequences
              if len(sequence) <= _MAX_CONTRACTION and max(map(ord, sequence)) <= maxchar
              for i in range(len(sequence)) for j in range(i + 2, len(sequence) + 1)}
    for length in range(2, _MAX_CONTRACTION + 1):
        texts = sorted(text for text in pieces if len(text) == length)
        for text, server in zip(texts, _server_weights(conn, model, charset, texts)):
            if server != model.weights(text):
                model.add_contraction(text, "".join(f"{ord(unit):04X}" for unit in server))
