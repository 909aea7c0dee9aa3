"""MySQL's partial JSON updates: the diff list that stands for a JSON column's after value, applied to its
before value (`binlog_row_value_options=PARTIAL_JSON`, MySQL 8.0.3+).

With that option an UPDATE that changes a JSON column only through JSON_SET, JSON_REPLACE and JSON_REMOVE is
logged as a PARTIAL_UPDATE_ROWS_EVENT (type 39) whose after image may hold, for such a column, the changes
instead of the document (the row layout is read by `dblog.mysql.binlog.decoder`). The before image is not
affected: under binlog_row_image=FULL, which dblog requires, it holds the whole document, so the after value
is the before value with the diffs applied, exactly as a MySQL replica computes it (sql/rpl_record.cc,
unpack_row -> Field_json::unpack_diff -> apply_json_diffs).

The diff list (sql-common/json_diff.cc, Json_diff_vector::write_binary / read_binary, read_json_diff): a
4-byte little-endian length (the JSON column's usual length prefix, stripped by the row reader), then diffs
until that length is used up, each

    operation   1 byte: REPLACE = 0, INSERT = 1, REMOVE = 2 (enum_json_diff_operation)
    path        net_field_length, then the path's text (Json_path::to_string: "$", then ".key" or
                ."quoted key" for members, "[n]", "[last]" or "[last-n]" for array cells)
    value       not for REMOVE: net_field_length, then a binary JSON document (json_binary.h)

Each diff is applied in order (json_diff.cc, apply_json_diff, on the path's exact location: no wildcards, no
auto-wrapping of a non-array into an array):

* REPLACE: the value at the path must exist; it is replaced.
* INSERT: the path's parent must exist. In an object the member must not exist yet; it is added, and the
  object keeps MySQL's key order (by length, then bytewise: Json_key_comparator). In an array the value is
  inserted at the cell's position (an index past the end appends: Json_array_index::position).
* REMOVE: the member, or the array cell within bounds, must exist; it is removed.

A diff MySQL would reject (enum_json_diff_status::REJECTED; a replica stops with ER_COULD_NOT_APPLY_JSON_DIFF)
raises `JsonDiffRejected`; bytes that do not decode raise `JsonDiffError`.

Pure. `tests/mysql/test_mysql_partial_json.py` drives it against a simple model of the three operations and
through events laid out as MySQL writes them.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Collection, Sequence

from dblog.mysql.binlog.values import JsonDecodeError, json_document_text, mysql_json_text, mysql_json_value

__all__ = ["REPLACE", "INSERT", "REMOVE", "ArrayCell", "JsonDiff", "JsonDiffError", "JsonDiffRejected",
           "read_json_diffs", "parse_path", "apply_json_diffs", "finish_json_columns"]

REPLACE, INSERT, REMOVE = 0, 1, 2
_OPERATION_NAMES = {REPLACE: "REPLACE", INSERT: "INSERT", REMOVE: "REMOVE"}


class JsonDiffError(ValueError):
    """A diff list that does not decode: the binlog is damaged."""


class JsonDiffRejected(ValueError):
    """A diff that does not apply to the before value (MySQL rejects it too)."""


@dataclass(frozen=True)
class ArrayCell:
    """An array path leg: [index], or [last-index] when `from_end`."""

    index: int
    from_end: bool = False

    def position(self, length: int) -> tuple[int, bool]:
        """(position, within bounds) in an array of `length` elements (json_path.h, Json_array_index)."""
        if self.from_end:
            return (length - self.index - 1 if self.index < length else 0), self.index < length
        return min(self.index, length), self.index < length


Leg = str | ArrayCell  # a member name, or an array cell


@dataclass(frozen=True)
class JsonDiff:
    operation: int
    path: tuple[Leg, ...]
    value: Any  # the new value (a document of mysql_json_value); None for REMOVE
    path_text: str

    def __str__(self) -> str:
        return f"{_OPERATION_NAMES[self.operation]} {self.path_text}"


# --- reading -----------------------------------------------------------------------------------------


def _net_field_length(data: bytes, pos: int) -> tuple[int, int]:
    """MySQL's net_field_length (the length-encoded integer of the protocol): (value, position after it)."""
    first = data[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or pos + 1 + width > len(data):
        raise JsonDiffError(f"a JSON diff has an invalid length (first byte {first})")
    return int.from_bytes(data[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def _field(data: bytes, pos: int, what: str) -> tuple[bytes, int]:
    length, pos = _net_field_length(data, pos)
    if pos + length > len(data):
        raise JsonDiffError(f"a JSON diff's {what} of {length} bytes runs past the diff list")
    return data[pos : pos + length], pos + length


def read_json_diffs(data: bytes) -> list[JsonDiff]:
    """The diffs of a diff list (without its 4-byte length prefix)."""
    diffs = []
    pos = 0
    try:
        while pos < len(data):
            operation = data[pos]
            if operation not in _OPERATION_NAMES:
                raise JsonDiffError(f"a JSON diff has operation {operation}, not REPLACE, INSERT or REMOVE")
            raw_path, pos = _field(data, pos + 1, "path")
            path_text = raw_path.decode("utf-8")
            value = None
            if operation != REMOVE:
                raw_value, pos = _field(data, pos, "value")
                if not raw_value:
                    raise JsonDiffError(f"a JSON diff ({_OPERATION_NAMES[operation]} {path_text}) has an empty value")
                value = mysql_json_value(raw_value)
            diffs.append(JsonDiff(operation, parse_path(path_text), value, path_text))
    except (IndexError, struct.error, UnicodeDecodeError, JsonDecodeError) as error:
        raise JsonDiffError(f"a JSON diff does not decode ({error})") from error
    return diffs


def parse_path(text: str) -> tuple[Leg, ...]:
    """The legs of a path as MySQL writes it in a diff (sql-common/json_path.cc: "$", then members ".key" or
    ."quoted", array cells "[n]", "[last]", "[last-n]"; whitespace between tokens is allowed, as the
    server's parser allows it). Wildcards, ranges and "**" locate no single value: MySQL never writes them
    in a diff, and they are refused."""
    pos = _skip_space(text, 0)
    if not text.startswith("$", pos):
        raise JsonDiffError(f"the JSON path {text!r} does not start with '$'")
    pos += 1
    legs: list[Leg] = []
    while True:
        pos = _skip_space(text, pos)
        if pos == len(text):
            return tuple(legs)
        if text[pos] == ".":
            leg, pos = _member(text, _skip_space(text, pos + 1))
        elif text[pos] == "[":
            leg, pos = _array_cell(text, _skip_space(text, pos + 1))
        else:
            raise JsonDiffError(f"the JSON path {text!r} has {text[pos:]!r} where a '.' or '[' leg should start")
        legs.append(leg)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _member(text: str, pos: int) -> tuple[str, int]:
    if text.startswith('"', pos):  # a JSON string: find its closing quote, skipping escapes
        end = pos + 1
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise JsonDiffError(f"the JSON path {text!r} has an unterminated quoted member")
        try:
            return json.loads(text[pos : end + 1]), end + 1
        except ValueError as error:
            raise JsonDiffError(f"the JSON path {text!r} has a member that is no JSON string ({error})") from error
    end = pos
    while end < len(text) and text[end] not in ".[" and not text[end].isspace():
        end += 1
    name = text[pos:end]
    if not name or "*" in name:
        raise JsonDiffError(f"the JSON path {text!r} has a member leg that names no single member")
    return name, end


def _array_cell(text: str, pos: int) -> tuple[ArrayCell, int]:
    from_end = text.startswith("last", pos)
    index = 0
    if from_end:
        pos = _skip_space(text, pos + 4)
        if text.startswith("-", pos):
            index, pos = _number(text, _skip_space(text, pos + 1))
    else:
        index, pos = _number(text, pos)
    pos = _skip_space(text, pos)
    if not text.startswith("]", pos):
        raise JsonDiffError(f"the JSON path {text!r} has an array leg that is no single cell")
    return ArrayCell(index, from_end), pos + 1


def _number(text: str, pos: int) -> tuple[int, int]:
    end = pos
    while end < len(text) and text[end] in "0123456789":
        end += 1
    if end == pos:
        raise JsonDiffError(f"the JSON path {text!r} has an array leg without an index")
    return int(text[pos:end]), end


# --- applying ----------------------------------------------------------------------------------------

_MISSING = object()


def _seek(document: Any, legs: Sequence[Leg]) -> Any:
    """The value at `legs` (json_diff.cc, seek_exact_path), or _MISSING."""
    for leg in legs:
        if isinstance(document, list) and isinstance(leg, ArrayCell):
            position, within = leg.position(len(document))
            if not within:
                return _MISSING
            document = document[position]
        elif isinstance(document, dict) and isinstance(leg, str) and leg in document:
            document = document[leg]
        else:
            return _MISSING
    return document


def _key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def _apply(document: Any, diff: JsonDiff) -> bool:
    """Applies `diff` in place (the document is never the root itself: paths have a leg); False if rejected."""
    if not diff.path:
        return False
    parent, last = _seek(document, diff.path[:-1]), diff.path[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if diff.operation == INSERT:
            if last in parent:
                return False
            items = sorted([*parent.items(), (last, diff.value)], key=lambda item: _key_order(item[0]))
            parent.clear()
            parent.update(items)
            return True
        if last not in parent:
            return False
        if diff.operation == REPLACE:
            parent[last] = diff.value
        else:
            del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, ArrayCell):
        position, within = last.position(len(parent))
        if diff.operation == INSERT:
            parent.insert(position, diff.value)
            return True
        if not within:
            return False
        if diff.operation == REPLACE:
            parent[position] = diff.value
        else:
            del parent[position]
        return True
    return False


def apply_json_diffs(document: Any, diffs: Sequence[JsonDiff]) -> Any:
    """`document` (of mysql_json_value) with `diffs` applied in order; it is changed in place."""
    for diff in diffs:
        if not _apply(document, diff):
            raise JsonDiffRejected(f"{diff} does not apply: the before value has no such "
                                   f"{'parent' if diff.operation == INSERT else 'value'}"
                                   f"{' or already has that member' if diff.operation == INSERT else ''}")
    return document


# --- the JSON columns of a partial update's row ------------------------------------------------------


def finish_json_columns(before: dict, after: dict, columns: Sequence[str], diffs: Collection[str]) -> list[str]:
    """The JSON `columns` of one row pair read as raw bytes (binary JSON; in `after`, for the columns in
    `diffs`, a diff list), turned into MySQL's JSON text in place: full values are rendered, diffs applied to
    the before document. Returns the columns whose diff has no before value in the image (binlog_row_image
    MINIMAL or NOBLOB); they are left out of `after`, which is then a partial image. Raises JsonDiffError or
    JsonDiffRejected, with the column named."""
    without_base = []
    for name in columns:
        old = before.get(name)
        new = after.get(name, _MISSING)
        try:
            if name in diffs and new is not None and new is not _MISSING:
                if name not in before:
                    without_base.append(name)
                    del after[name]
                elif old is None:
                    raise JsonDiffRejected("the before value is NULL")
                else:
                    document = apply_json_diffs(mysql_json_value(old), read_json_diffs(new))
                    after[name] = json_document_text(document)
            elif new is not None and new is not _MISSING:
                after[name] = mysql_json_text(new)
            if old is not None:
                before[name] = mysql_json_text(old)
        except (JsonDiffError, JsonDiffRejected) as error:
            raise type(error)(f"column {name}: {error}") from error
        except (IndexError, struct.error, UnicodeDecodeError, JsonDecodeError) as error:
            raise JsonDiffError(f"column {name}: the JSON value does not decode ({error})") from error
    return without_base
