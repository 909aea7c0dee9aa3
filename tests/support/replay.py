"""Replaying a keyed table's change records strictly: what proves a snapshot and the stream
after it meet exactly (no change the snapshot's rows hold comes again)."""

from __future__ import annotations


def strict_replay(changes: list[dict], table: str) -> dict:
    """Replay a keyed table's records strictly: `r` and `c` only of a key not held (an `r` may
    also restate a held row: snapshot rows come first), `u` and `d` only of a key held, whose
    `before` is the row held. A change the snapshot's rows already hold, streamed again after
    them, breaks it (a `c` of a key held, a `u` from a stale row, a `d` of a key gone)."""
    rows: dict = {}
    for index, change in enumerate(changes):
        if change["source"]["table"] != table:
            continue
        op, before, after = change["op"], change.get("before"), change.get("after")
        key = (before or after)["id"]
        if op == "c":
            assert key not in rows, f"record {index}: c of id {key}, already held: {rows[key]}"
        elif op in ("u", "d"):
            assert rows.get(key) == before, f"record {index}: {op} of id {key} from {before}, held {rows.get(key)}"
        if op == "d":
            del rows[key]
        else:
            if op == "u" and after["id"] != key:
                del rows[key]
            rows[after["id"]] = after
    return rows
