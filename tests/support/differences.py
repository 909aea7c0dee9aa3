"""What the differential tests report when dblog's records and a reference's differ: each
differing leaf of the two JSON documents as a path, so that a failure names the field.

    differences({"a": [1, 2]}, {"a": [1, 3]})  # [".a[1]: dblog 2 != Debezium 3"]
"""

from __future__ import annotations


def differences(ours, theirs, where: str = "", reference: str = "Debezium") -> list[str]:
    """Each leaf at which `ours` (dblog's) and `theirs` (`reference`'s) differ, as
    "<path>: dblog <ours> != <reference> <theirs>"; a key only one side has is "<missing>" on the
    other, lists of different lengths differ as wholes. `where`: the path of the documents given."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [problem for name in dict.fromkeys([*ours, *theirs])
                for problem in differences(ours.get(name, "<missing>"), theirs.get(name, "<missing>"),
                                           f"{where}.{name}", reference)]
    if isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple)) and len(ours) == len(theirs):
        return [problem for index, (a, b) in enumerate(zip(ours, theirs))
                for problem in differences(a, b, f"{where}[{index}]", reference)]
    return [] if ours == theirs else [f"{where}: dblog {ours!r} != {reference} {theirs!r}"]
