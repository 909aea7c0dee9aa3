"""An incremental snapshot Debezium had in flight, as dblog's snapshot progress
(dblog.runtime.debezium_incremental), and the keys in its offset, read from the Java
serialization stream the JDK's own ObjectOutputStream writes (dblog.runtime.java_key_array)."""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
from decimal import Decimal

import pytest

from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.runtime.debezium_incremental import SnapshotNotContinued, check_key_width, snapshot_progress
from dblog.runtime.debezium_offsets import DebeziumOffset, DebeziumOffsetsError, ServerFacts, hand_over
from dblog.runtime.java_key_array import key_of_hex
from dblog.runtime.java_offset_file import JavaStreamError
from dblog.runtime.offset_store import OffsetStore

# What ObjectOutputStream.writeObject(new Object[]{Integer.valueOf(5)}) writes (JDK 17), as
# Debezium's HexConverter spells it
INTEGER_5 = ("aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200116a6176"
             "612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62"
             "657286ac951d0b94e08b020000787000000005")
INTEGER_900 = INTEGER_5[:-8] + f"{900:08x}"
# new Object[]{new java.util.Date(0L)}: a class dblog does not map (written by the same JDK)
DATE_0 = ("aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000e6a617661"
          "2e7574696c2e44617465686a81014b59741903000078707708000000000000000078")
COLLECTIONS = json.dumps([
    {"incremental_snapshot_collections_id": "shop.orders", "incremental_snapshot_collections_additional_condition":
     "status = 'open'", "incremental_snapshot_collections_surrogate_key": None,
     "incremental_snapshot_collections_correlation_id": "s1"},
    {"incremental_snapshot_collections_id": "shop.items", "incremental_snapshot_collections_additional_condition":
     None, "incremental_snapshot_collections_surrogate_key": "sku",
     "incremental_snapshot_collections_correlation_id": "s1"}])

WRITER = """
import java.io.*; import java.math.*; import java.util.*;
public class WriteKeys { public static void main(String[] a) throws Exception {
  BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
  for (String line; (line = in.readLine()) != null; ) {
    List<Object> values = new ArrayList<>();
    if (!line.isEmpty()) for (String part : line.split("\\t")) {
      String v = part.substring(2);
      switch (part.charAt(0)) {
        case 'i': values.add(Integer.valueOf(v)); break;
        case 'l': values.add(Long.valueOf(v)); break;
        case 's': values.add(new String(Base64.getDecoder().decode(v), "UTF-8")); break;
        case 'b': values.add(Base64.getDecoder().decode(v)); break;
        case 'd': values.add(new BigDecimal(v)); break;
        case 'g': values.add(new BigInteger(v)); break;
        default: values.add(null);
      }
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) { out.writeObject(values.toArray()); }
    StringBuilder hex = new StringBuilder();
    for (byte x : bytes.toByteArray()) hex.append(String.format("%02x", x));
    System.out.println(hex);
  }
}}"""


def _random_key(generator: random.Random) -> list[tuple[str, str, object]]:
    """(the writer's kind, its text, the value dblog normalizes it to) per column."""
    columns = []
    for _ in range(generator.randint(0, 4)):
        kind = generator.choice("ilsbdgn")
        if kind in "il":
            number = generator.randint(-2**31, 2**31 - 1) if kind == "i" else generator.randint(-2**63, 2**63 - 1)
            columns.append((kind, str(number), number))
        elif kind == "s":
            text = "".join(generator.choice(["a", "é", "\x00", "😀", "中", " "]) for _ in range(generator.randint(0, 6)))
            columns.append((kind, base64.b64encode(text.encode()).decode(), text))
        elif kind == "b":
            raw = bytes(generator.randrange(256) for _ in range(generator.randint(0, 20)))
            columns.append((kind, base64.b64encode(raw).decode(), base64.b64encode(raw).decode()))
        elif kind == "d":
            text = f"{generator.choice(['-', ''])}{generator.randint(0, 10**20)}.{generator.randint(0, 999):03d}"
            columns.append((kind, text, format(Decimal(text), "f")))
        elif kind == "g":
            number = generator.randint(-10**30, 10**30)
            columns.append((kind, str(number), number))
        else:
            columns.append(("n", "-", None))
    return columns


@pytest.mark.skipif(shutil.which("java") is None, reason="no JVM")
def test_keys_written_by_javas_own_object_output_stream(tmp_path):
    """300 random keys of every kind a MySQL key reads as through JDBC, serialized by the JDK as
    Debezium serializes them, read back as dblog's normalized key values."""
    generator = random.Random(39)
    keys = [_random_key(generator) for _ in range(300)]
    source = tmp_path / "WriteKeys.java"
    source.write_text(WRITER)
    lines = "".join("\t".join(f"{kind}:{text}" for kind, text, _ in key) + "\n" for key in keys)
    written = subprocess.run(["java", str(source)], input=lines, capture_output=True, text=True, check=True,
                             timeout=120).stdout.split()
    assert len(written) == len(keys)
    for key, hex_text in zip(keys, written):
        assert key_of_hex(hex_text) == tuple(value for _, _, value in key), hex_text
        assert key_of_hex(hex_text.upper()) == key_of_hex(hex_text)


@pytest.mark.parametrize("text, says", [
    ("zz", "not hex"), ("aced0004", "not a Java Object Serialization stream"),
    (INTEGER_5[:-4], "ends at byte"), (INTEGER_5 + "70", "1 bytes follow"),
    (DATE_0, "class java.util.Date"),
])
def test_what_is_not_a_key_dblog_maps_is_refused(text, says):
    with pytest.raises(JavaStreamError, match=says):
        key_of_hex(text)


def test_the_snapshot_in_flight_becomes_dblogs_progress():
    progress = snapshot_progress({"incremental_snapshot_collections": COLLECTIONS,
                                  "incremental_snapshot_primary_key": INTEGER_5,
                                  "incremental_snapshot_maximum_key": INTEGER_900,
                                  "incremental_snapshot_correlation_id": "s1"})
    first, second = progress.queue
    assert (first.table, first.condition, first.surrogate_key) == (TableId("shop", "orders"), "status = 'open'", None)
    assert first.started and (first.last_key, first.max_key) == ((5,), (900,))
    assert (second.table, second.condition, second.surrogate_key) == (TableId("shop", "items"), None, "sku")
    assert not second.started and second.last_key is None and progress.snapshot_id == "s1"


def test_before_its_first_chunk_the_table_is_read_from_its_start():
    progress = snapshot_progress({"incremental_snapshot_collections": COLLECTIONS,
                                  "incremental_snapshot_maximum_key": INTEGER_900})
    assert progress.current.started and progress.current.last_key is None and progress.current.max_key == (900,)
    progress = snapshot_progress({"incremental_snapshot_collections": COLLECTIONS})
    assert not progress.current.started and progress.current.max_key is None  # dblog reads the maximum itself
    assert snapshot_progress({"gtids": "0-1-5"}) is None


@pytest.mark.parametrize("offset, says", [
    ({"incremental_snapshot_collections": COLLECTIONS, "incremental_snapshot_primary_key": INTEGER_5},
     "primary_key is set but not"),
    ({"incremental_snapshot_collections": COLLECTIONS, "incremental_snapshot_primary_key": "aced0005",
      "incremental_snapshot_maximum_key": INTEGER_900}, "primary_key cannot be read"),
    ({"incremental_snapshot_collections": json.dumps([{"incremental_snapshot_collections_id": "orders"}])},
     "not a db.table name"),
])
def test_a_snapshot_that_cannot_be_continued_exactly_says_why(offset, says):
    with pytest.raises(SnapshotNotContinued, match=says):
        snapshot_progress(offset)


def test_the_hand_over_saves_the_progress_or_refuses_naming_the_tables(tmp_path):
    facts = ServerFacts("mariadb", 1, GtidSet.parse("0-1-20", "mariadb"), GtidSet.parse("0-1-3", "mariadb"),
                        ["binlog.000003"], lambda file, pos: "0-1-7")
    store = OffsetStore(tmp_path / "offsets.json")
    offset = {"gtids": "0-1-9", "incremental_snapshot_collections": COLLECTIONS,
              "incremental_snapshot_primary_key": INTEGER_5, "incremental_snapshot_maximum_key": INTEGER_900}
    hand_over(store, DebeziumOffset("c", "shop", offset), facts, "t", replace=False)
    saved = store.load()
    assert saved.position == GtidSet.parse("0-1-9", "mariadb")
    assert [entry["table"] for entry in saved.snapshot["queue"]] == ["shop.orders", "shop.items"]
    assert saved.snapshot["queue"][0]["last_key"] == [5] and saved.snapshot["queue"][0]["max_key"] == [900]
    broken = {**offset, "incremental_snapshot_primary_key": "aced0005"}
    with pytest.raises(DebeziumOffsetsError, match="in flight \\(of shop.orders, shop.items\\).*execute-snapshot"):
        hand_over(OffsetStore(tmp_path / "other.json"), DebeziumOffset("c", "shop", broken), facts, "t",
                  replace=False)


def test_keys_of_another_width_than_the_tables_key_here_are_refused():
    progress = snapshot_progress({"incremental_snapshot_collections": COLLECTIONS,
                                  "incremental_snapshot_primary_key": INTEGER_5,
                                  "incremental_snapshot_maximum_key": INTEGER_900})
    check_key_width(progress, lambda table: ("id",))
    with pytest.raises(SnapshotNotContinued, match="keys have 1 columns, shop.orders's key here \\(id, line\\) 2"):
        check_key_width(progress, lambda table: ("id", "line"))
    with pytest.raises(SnapshotNotContinued, match="has no primary key on this server"):
        check_key_width(progress, lambda table: ())
