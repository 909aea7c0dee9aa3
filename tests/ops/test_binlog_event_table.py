"""Binlog events are dispatched through one table (issue 37): `dblog.mysql.binlog.decoder.EVENT_TYPES`
holds, per event type, its type codes, its decoder, the record it yields and the binlog source's
handler of that record; the decoder and the source both dispatch through it, by dict lookup.

Checked here: every event type code the decoder defines has exactly one entry; every record
class the decoder yields has exactly one handler, a method of `BinlogSource`; and neither module
branches on event types or record classes itself (no `type(record) is` chain, no `event_type ==`
chain): adding an event type is an entry in the table, not an edit of chains in several files.
The modules are read through their `__file__`, so this checks the code that is imported."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

from dblog.mysql.binlog import decoder, source

pytestmark = pytest.mark.timeout(60)


def event_type_codes() -> dict[str, int]:
    """The event type constants the decoder defines: the assignments after its `# Event types`
    comment, up to the first blank line."""
    lines = Path(decoder.__file__).read_text().splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("# Event types"))
    block = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        block.append(line)
    namespace: dict[str, int] = {}
    exec(compile("\n".join(block), "event type codes", "exec"), namespace)  # plain int assignments
    codes = {name: value for name, value in namespace.items() if not name.startswith("__")}
    assert codes and all(isinstance(value, int) for value in codes.values()), codes
    return codes


def record_classes() -> set[type]:
    return set(typing.get_args(decoder.Record))


def test_every_event_type_code_has_exactly_one_entry_in_the_table() -> None:
    codes = event_type_codes()
    assert len(codes) > 50  # MySQL's 1..42 and MariaDB's 160..171
    entries_of = {code: [event for event in decoder.EVENT_TYPES if code in event.codes] for code in codes.values()}
    missing = sorted(name for name, code in codes.items() if not entries_of[code])
    doubled = sorted(name for name, code in codes.items() if len(entries_of[code]) > 1)
    assert not missing, f"event types with no entry in EVENT_TYPES: {missing}"
    assert not doubled, f"event types with more than one entry in EVENT_TYPES: {doubled}"
    listed = {code for event in decoder.EVENT_TYPES for code in event.codes}
    assert listed <= set(codes.values()), f"codes in EVENT_TYPES with no constant: {sorted(listed - set(codes.values()))}"
    for event in decoder.EVENT_TYPES:
        assert callable(event.decode), event
        assert (event.record is None) == (event.handler is None), f"{event.codes}: a record needs a handler"


def test_every_record_has_one_handler_on_the_source_and_the_source_dispatches_through_them() -> None:
    handlers: dict[type, set[str]] = {}
    for event in decoder.EVENT_TYPES:
        if event.record is not None:
            handlers.setdefault(event.record, set()).add(event.handler)
    assert set(handlers) == record_classes(), "every record the decoder yields is handled, and only those"
    for record, names in handlers.items():
        assert len(names) == 1, f"{record.__name__} is handled by {sorted(names)}"
        (name,) = names
        assert inspect.isfunction(getattr(source.BinlogSource, name, None)), f"BinlogSource has no {name}"
    assert source._HANDLERS == {record: getattr(source.BinlogSource, next(iter(names)))
                                for record, names in handlers.items()}


def test_unknown_codes_are_refused_unless_ignorable() -> None:
    """A code outside the table takes the unknown entry: refused, skipped when flagged ignorable."""
    unknown = next(code for code in range(1, 256) if code not in decoder._EVENT_TYPE_OF)
    header = decoder._HEADER
    for flags, refused in ((0, True), (decoder.LOG_EVENT_IGNORABLE_F, False)):
        packet = header.pack(0, unknown, 1, decoder.HEADER_LENGTH, 100, flags)
        if refused:
            with pytest.raises(decoder.BinlogDecodeError, match=f"unknown binlog event type {unknown}"):
                decoder.BinlogDecoder().decode(packet)
        else:
            assert decoder.BinlogDecoder().decode(packet) is None


def _branches_on_event_kinds(module) -> list[str]:
    """Comparisons (==, is, in, ...) whose operand is a `type(...)` call, a record class or an
    event type code, and `isinstance` against a record class: dispatch done outside the table."""
    path = Path(module.__file__)
    tree = ast.parse(path.read_text())
    record_names = {record.__name__ for record in record_classes()}
    watched = record_names | set(event_type_codes())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name) and operand.func.id == "type":
                    found.append(f"{path.name}:{node.lineno} compares type(...)")
                elif isinstance(operand, ast.Name) and operand.id in watched:
                    found.append(f"{path.name}:{node.lineno} compares with {operand.id}")
                elif isinstance(operand, (ast.Tuple, ast.Set, ast.List)) and any(
                        isinstance(item, ast.Name) and item.id in watched for item in operand.elts):
                    found.append(f"{path.name}:{node.lineno} tests membership among event kinds")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and module is source):
            kinds = node.args[1]
            names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            if any(isinstance(name, ast.Name) and name.id in record_names for name in names):
                found.append(f"{path.name}:{node.lineno} isinstance of a record class")
    return found


@pytest.mark.parametrize("module", [decoder, source], ids=["decoder", "source"])
def test_no_chain_on_event_types_or_record_classes_outside_the_table(module) -> None:
    assert _branches_on_event_kinds(module) == []
