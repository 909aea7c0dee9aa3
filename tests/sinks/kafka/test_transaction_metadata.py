"""Debezium's transaction metadata as dblog builds it (dblog.sinks.kafka.transaction_metadata), without
a server: the blocks' orders, BEGIN / END and their counts, DDL without BEGIN / END, and END's
data_collections in the iteration order of Java's own HashMap (checked against a JVM when the
JDK is installed: Debezium keeps the counts in a java.util.HashMap)."""

from __future__ import annotations

import random
import shutil
import string
import subprocess

import pytest

from dblog.sinks.kafka.transaction_metadata import (
    TransactionMetadata,
    java_hash_map_order,
    java_string_hash,
)


def test_blocks_count_the_events_of_the_transaction_and_of_each_table():
    metadata = TransactionMetadata()
    metadata.started("0-1-7", 1_700_000_000_000)
    begin, first = metadata.event("shop.b", 1_700_000_000_000)
    assert begin == {"key": {"id": "0-1-7"}, "value": {"status": "BEGIN", "id": "0-1-7", "event_count": None,
                                                       "data_collections": None, "ts_ms": 1_700_000_000_000}}
    assert first == {"id": "0-1-7", "total_order": 1, "data_collection_order": 1}
    blocks = [metadata.event(table, 1_700_000_001_000) for table in ("shop.a", "shop.a", "shop.b")]
    assert [begin for begin, _ in blocks] == [None, None, None]  # one BEGIN
    assert [block for _, block in blocks] == [
        {"id": "0-1-7", "total_order": 2, "data_collection_order": 1},
        {"id": "0-1-7", "total_order": 3, "data_collection_order": 2},
        {"id": "0-1-7", "total_order": 4, "data_collection_order": 2},
    ]
    (end,) = metadata.ended()
    assert end["key"] == {"id": "0-1-7"}
    value = end["value"]
    assert (value["status"], value["id"], value["event_count"], value["ts_ms"]) == ("END", "0-1-7", 4,
                                                                                   1_700_000_001_000)
    assert sorted(value["data_collections"], key=lambda c: c["data_collection"]) == [
        {"data_collection": "shop.a", "event_count": 2}, {"data_collection": "shop.b", "event_count": 2}]
    assert metadata.event("shop.a", None) == (None, None)  # between transactions: no block


def test_a_transaction_without_captured_changes_gets_begin_and_end_with_no_events():
    metadata = TransactionMetadata()
    metadata.started("0-1-9", 5000)
    begin, end = metadata.ended()
    assert begin["value"]["status"] == "BEGIN" and begin["value"]["ts_ms"] == 5000
    assert end["value"] == {"status": "END", "id": "0-1-9", "event_count": 0, "data_collections": [], "ts_ms": 5000}


def test_ddl_opens_no_transaction():
    metadata = TransactionMetadata()
    metadata.started("0-1-11", 5000)
    metadata.schema_changed()
    assert metadata.event("shop.t", 5000) == (None, None)  # e.g. the rows of CREATE TABLE ... SELECT
    assert metadata.ended() == []
    metadata.started("0-1-12", 6000)  # the next one is a transaction again
    assert metadata.event("shop.t", 6000)[1]["total_order"] == 1


def test_java_string_hash():
    # Java's String.hashCode() of these (java printed them), with overflow to negative and a non-BMP character.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("shop.orders") == 570_428_637
    assert java_string_hash("polygenelubricants") == -2_147_483_648
    assert java_string_hash("😀") == 1_772_899


def _table_names(count: int, seed: int) -> list[str]:
    chance = random.Random(seed)
    names = []
    while len(names) < count:
        name = "".join(chance.choice(string.ascii_lowercase + "_") for _ in range(chance.randint(1, 12)))
        name = f"db{chance.randint(0, 3)}.{name}"
        if name not in names:
            names.append(name)
    return names


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java) to run Java's HashMap")
def test_data_collections_come_in_the_order_of_javas_hash_map(tmp_path):
    cases = [_table_names(count, seed) for seed, count in enumerate([1, 2, 5, 12, 13, 20, 25, 49, 100])]
    program = tmp_path / "Order.java"
    program.write_text("""
import java.util.*;
public class Order {
    public static void main(String[] args) throws Exception {
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            String line = in.nextLine();
            Map<String, Long> map = new HashMap<>();
            for (String key : line.split(" ")) map.put(key, 1L);
            System.out.println(String.join(" ", map.keySet()));
        }
    }
}
""")
    result = subprocess.run(["java", str(program)], input="\n".join(" ".join(case) for case in cases) + "\n",
                            capture_output=True, text=True, timeout=120, check=True)
    javas = [line.split(" ") for line in result.stdout.splitlines()]
    assert javas == [java_hash_map_order(case) for case in cases]
