"""Java's regular expressions as Kafka Connect's routers use them, in Python's `re`.

RegexRouter and ByLogicalTableRouter take a Java regex and a Java replacement string: a topic is
rewritten when the regex matches all of it (`Matcher.matches()`), and the new name is
`Matcher.replaceFirst(replacement)`: the *first* match found by searching from the start (the
leftmost, as `re.search` finds it) replaced, the rest of the name kept. The replacement is Java's:
`$n` (the longest run of digits that still names a group), `${name}`, `\\x` for a literal x; a
group that took no part in the match adds nothing.

The regex syntax both engines share is most of it; Java's named groups `(?<name>…)` and
`\\Q…\\E` quoting are translated. Other Java-only constructs (`\\p{Alpha}` POSIX classes, …)
are refused when the configuration is read, naming the key.
"""

from __future__ import annotations

import re

__all__ = ["JavaRegexError", "compile_java", "check_replacement", "replace_first_if_matches"]


class JavaRegexError(ValueError):
    """A regex or replacement dblog cannot take; the message says why."""


_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


def compile_java(pattern: str) -> re.Pattern:
    """`pattern` (Java syntax) compiled by Python's `re`; JavaRegexError when it cannot be."""
    translated = _unquote(pattern)
    translated = _NAMED_GROUP.sub("(?P<", translated)
    try:
        return re.compile(translated)
    except re.error as error:
        raise JavaRegexError(f"{pattern!r} is not a regex dblog can use ({error}); dblog reads Java's syntax "
                             "as far as Python's re shares it (no \\p{…} classes)") from None


def _unquote(pattern: str) -> str:
    """Java's `\\Q…\\E` literal quoting, spelled out as escaped characters."""
    out, index = [], 0
    while index < len(pattern):
        if pattern.startswith("\\Q", index):
            end = pattern.find("\\E", index + 2)
            literal = pattern[index + 2:] if end < 0 else pattern[index + 2:end]
            out.append(re.escape(literal))
            index = len(pattern) if end < 0 else end + 2
        elif pattern[index] == "\\" and index + 1 < len(pattern):
            out.append(pattern[index:index + 2])
            index += 2
        else:
            out.append(pattern[index])
            index += 1
    return "".join(out)


def _parts(replacement: str, groups: int, names: dict[str, int]) -> list[str | int]:
    """The replacement as literal text and group numbers, as Java's Matcher reads it."""
    parts: list[str | int] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\":
            index += 1
            if index == len(replacement):
                raise JavaRegexError(f"{replacement!r}: character to be escaped is missing (a trailing \\)")
            parts.append(replacement[index])
            index += 1
        elif char == "$":
            index += 1
            if index == len(replacement):
                raise JavaRegexError(f"{replacement!r}: illegal group reference: group index is missing")
            if replacement[index] == "{":
                end = replacement.find("}", index)
                name = replacement[index + 1:end] if end > 0 else ""
                if end < 0 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                    raise JavaRegexError(f"{replacement!r}: ${{…}} must name a group (letters and digits)")
                if name not in names:
                    raise JavaRegexError(f"{replacement!r}: no group with name {{{name}}} in the regex")
                parts.append(names[name])
                index = end + 1
                continue
            if not replacement[index].isdigit() or not replacement[index].isascii():
                raise JavaRegexError(f"{replacement!r}: illegal group reference after $ (write \\$ for a $)")
            number = int(replacement[index])
            if number > groups:
                raise JavaRegexError(f"{replacement!r}: no group {number} in the regex (it has {groups})")
            index += 1
            while index < len(replacement) and replacement[index].isdigit() and replacement[index].isascii():
                longer = number * 10 + int(replacement[index])
                if longer > groups:
                    break
                number = longer
                index += 1
            parts.append(number)
        else:
            parts.append(char)
            index += 1
    return parts


def check_replacement(regex: re.Pattern, replacement: str) -> list[str | int]:
    """The parsed replacement for `regex`; JavaRegexError where Java's Matcher would throw."""
    return _parts(replacement, regex.groups, dict(regex.groupindex))


def replace_first_if_matches(regex: re.Pattern, parts: list[str | int], text: str) -> str | None:
    """Kafka Connect's routers: None unless `regex` matches all of `text`; else `text` with its
    first match replaced (Java's `matches()` then `replaceFirst()`)."""
    if regex.fullmatch(text) is None:
        return None
    match = regex.search(text)
    expanded = "".join(part if isinstance(part, str) else (match.group(part) or "") for part in parts)
    return text[:match.start()] + expanded + text[match.end():]
