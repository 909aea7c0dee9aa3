"""Java `.properties` files, read as `java.util.Properties.load` reads them.

Kafka Connect loads a connector's `.properties` file with `Properties.load`, so a Debezium
configuration means what that method makes of it: `key=value`, `key: value` or `key value`;
`#` and `!` comment lines; a line ending in an odd number of backslashes continues on the next
one (whose leading blanks are dropped); escapes `\\t \\n \\r \\f \\uXXXX`, and a backslash before
any other character stands for that character (`\\=`, `\\:`, `\\ `, `\\\\`; `\\.` is a plain `.`,
which matters for regexes written in such files). The last of a repeated key wins.

Written here rather than taken from a library: the format fits in a page, and the one
maintained parser on the registry (jproperties) needs `six` and reads `#:` comments as metadata,
which Java does not.
"""

from __future__ import annotations

import re

_BLANKS = " \t\f"
_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE_END = re.compile(r"\r\n|\r|\n")


class PropertiesError(ValueError):
    pass


def parse_properties(text: str) -> dict[str, str]:
    properties: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            key = _unescape(key)
        except PropertiesError as error:
            raise PropertiesError(f"line {number}, the key: {error}") from None
        try:
            properties[key] = _unescape(value)
        except PropertiesError as error:  # the value may be a password: named by its key, never quoted
            raise PropertiesError(f"line {number}, the value of {key}: {error}") from None
    return properties


def _logical_lines(text: str):
    """(line number, text) of each key-value line, continuations joined, comments and blank
    lines dropped. A comment does not continue, but a continued line starting with `#` is
    part of the value."""
    natural = iter(enumerate(_NATURAL_LINE_END.split(text), start=1))
    for number, line in natural:
        line = line.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            following = next(natural, None)
            line = line[:-1] + ("" if following is None else following[1].lstrip(_BLANKS))
        yield number, line


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes: the last one is not itself escaped."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped `=`, `:` or blank; blanks, at most one `=` or `:`,
    and blanks again separate it from the value."""
    end = 0
    while end < len(line) and line[end] not in _SEPARATORS and line[end] not in _BLANKS:
        end += 2 if line[end] == "\\" else 1
    key, rest = line[:end], line[end:].lstrip(_BLANKS)
    if rest[:1] and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1:index + 2]
        if escaped == "u":
            digits = text[index + 2:index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesError("malformed \\uxxxx escape (write four hex digits after \\u)")
            out.append(chr(int(digits, 16)))
            index += 6
        else:
            out.append(_ESCAPES.get(escaped, escaped))  # a lone backslash at the very end is dropped
            index += 2
    # \uD83D\uDE00 (a surrogate pair, as Java writes characters beyond the BMP) is one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
