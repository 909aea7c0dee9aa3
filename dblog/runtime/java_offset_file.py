"""Kafka's file offset store, read without a JVM: the file Debezium Server
(`debezium.source.offset.storage.file.filename`) and the embedded engine (`offset.storage.file.filename`)
keep their offsets in.

Kafka's `FileOffsetBackingStore.save()` (connect/runtime/…/storage/FileOffsetBackingStore.java) copies
its `Map<ByteBuffer, ByteBuffer>` into a `HashMap<byte[], byte[]>` (a null key or value stays null)
and writes it with one `ObjectOutputStream.writeObject`. So the file is a Java Object Serialization
stream (Java Object Serialization Specification, chapter 6 "Object Serialization Stream Protocol",
https://docs.oracle.com/en/java/javase/17/docs/specs/serialization/protocol.html) holding:

    magic 0xACED, version 5
    TC_OBJECT, TC_CLASSDESC "java.util.HashMap" (fields `float loadFactor`, `int threshold`;
        flags SC_SERIALIZABLE|SC_WRITE_METHOD), TC_ENDBLOCKDATA, TC_NULL (no serializable superclass)
    the two field values (big-endian float, int)
    HashMap.writeObject's block data: TC_BLOCKDATA 8, int buckets, int size
    size × (key, value): each TC_NULL, or TC_ARRAY with the class "[B" (a new TC_CLASSDESC the
        first time, then TC_REFERENCE to it), an int length and the bytes; or TC_REFERENCE to an
        array read before
    TC_ENDBLOCKDATA

This parser reads that, and only that: any other content (another map type, other element types,
a truncated file) is refused with JavaStreamError saying what was found where.
"""

from __future__ import annotations

import struct
from pathlib import Path

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_ARRAY = 0x75
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
BASE_WIRE_HANDLE = 0x7E0000
SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02

HASHMAP = "java.util.HashMap"
BYTE_ARRAY = "[B"


class JavaStreamError(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0
        self.handles: list[object] = []  # what each wire handle (0x7E0000 + index) names

    def take(self, size: int, what: str) -> bytes:
        if self.at + size > len(self.data):
            raise JavaStreamError(f"the stream ends at byte {len(self.data)} inside {what} (a truncated file)")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def byte(self, what: str) -> int:
        return self.take(1, what)[0]

    def unpack(self, form: str, what: str):
        return struct.unpack(">" + form, self.take(struct.calcsize(">" + form), what))[0]

    def utf(self, what: str) -> str:
        # Java's "modified UTF-8"; class and field names here are ASCII
        return self.take(self.unpack("H", what), what).decode("utf-8", "replace")

    def expect(self, code: int, what: str) -> None:
        found = self.byte(what)
        if found != code:
            raise JavaStreamError(f"byte {self.at - 1}: expected {what} (0x{code:02X}), found 0x{found:02X}; "
                                  f"{_LIMIT}")

    def new_handle(self, value: object) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def reference(self, what: str) -> object:
        handle = self.unpack("I", what) - BASE_WIRE_HANDLE
        if not 0 <= handle < len(self.handles):
            raise JavaStreamError(f"byte {self.at - 4}: a reference to handle 0x{handle + BASE_WIRE_HANDLE:X}, "
                                  "which the stream never assigned")
        return self.handles[handle]


_LIMIT = ("this is not a file Kafka's FileOffsetBackingStore wrote (a HashMap of byte arrays in a Java "
          "Object Serialization stream), the only layout dblog reads")


class _ClassDesc:
    def __init__(self, name: str, flags: int, fields: list[tuple[str, str]]) -> None:
        self.name, self.flags, self.fields = name, flags, fields


def _class_desc(reader: _Reader, what: str) -> _ClassDesc:
    code = reader.byte(what)
    if code == TC_REFERENCE:
        desc = reader.reference(what)
        if not isinstance(desc, _ClassDesc):
            raise JavaStreamError(f"byte {reader.at - 4}: {what} refers to something that is not a class")
        return desc
    if code != TC_CLASSDESC:
        raise JavaStreamError(f"byte {reader.at - 1}: expected {what} (TC_CLASSDESC), found 0x{code:02X}; {_LIMIT}")
    name = reader.utf("a class name")
    reader.take(8, "a serialVersionUID")
    desc = _ClassDesc(name, 0, [])
    reader.new_handle(desc)
    desc.flags = reader.byte("class flags")
    for _ in range(reader.unpack("H", "a field count")):
        type_code = chr(reader.byte("a field type"))
        field = reader.utf("a field name")
        if type_code in "[L":
            raise JavaStreamError(f"class {name} has an object field {field!r}; {_LIMIT}")
        desc.fields.append((type_code, field))
    if reader.byte("class annotations") != TC_ENDBLOCKDATA:
        raise JavaStreamError(f"class {name} carries annotations; {_LIMIT}")
    if reader.byte("the superclass") != TC_NULL:
        raise JavaStreamError(f"class {name} has a serializable superclass; {_LIMIT}")
    return desc


_PRIMITIVES = {"B": "b", "C": "H", "D": "d", "F": "f", "I": "i", "J": "q", "S": "h", "Z": "?"}


def _bytes_or_null(reader: _Reader, what: str) -> bytes | None:
    code = reader.byte(what)
    if code == TC_NULL:
        return None
    if code == TC_REFERENCE:
        value = reader.reference(what)
        if not isinstance(value, bytes):
            raise JavaStreamError(f"byte {reader.at - 4}: {what} refers to something that is not a byte array")
        return value
    if code != TC_ARRAY:
        raise JavaStreamError(f"byte {reader.at - 1}: expected {what} (a byte array or null), found 0x{code:02X}; "
                              f"{_LIMIT}")
    desc = _class_desc(reader, f"the class of {what}")
    if desc.name != BYTE_ARRAY:
        raise JavaStreamError(f"{what} is a {desc.name} array, not a byte array; {_LIMIT}")
    handle = reader.new_handle(None)
    length = reader.unpack("i", "an array length")
    if length < 0:
        raise JavaStreamError(f"byte {reader.at - 4}: a negative array length {length}")
    value = reader.take(length, f"{what} ({length} bytes)")
    reader.handles[handle] = value
    return value


def parse_offset_file(data: bytes) -> dict[bytes | None, bytes | None]:
    """The map a FileOffsetBackingStore file holds: key bytes -> value bytes (either may be None)."""
    reader = _Reader(data)
    if len(data) < 4 or reader.unpack("H", "the magic") != STREAM_MAGIC:
        raise JavaStreamError(f"not a Java Object Serialization stream (no 0xACED magic); {_LIMIT}")
    version = reader.unpack("H", "the version")
    if version != STREAM_VERSION:
        raise JavaStreamError(f"Java serialization stream version {version}; dblog reads version {STREAM_VERSION}")
    reader.expect(TC_OBJECT, "the map object (TC_OBJECT)")
    desc = _class_desc(reader, "the map's class")
    if desc.name != HASHMAP or desc.flags != SC_SERIALIZABLE | SC_WRITE_METHOD:
        raise JavaStreamError(f"the stream holds a {desc.name}, not a {HASHMAP}; {_LIMIT}")
    reader.new_handle(desc)  # the object itself takes the next handle
    for type_code, field in desc.fields:  # loadFactor, threshold: not needed to read the entries
        if type_code not in _PRIMITIVES:
            raise JavaStreamError(f"field {field!r} of type {type_code!r}; {_LIMIT}")
        reader.unpack(_PRIMITIVES[type_code], f"field {field}")
    reader.expect(TC_BLOCKDATA, "HashMap.writeObject's block data (TC_BLOCKDATA)")
    if reader.byte("the block length") != 8:
        raise JavaStreamError(f"HashMap's block data is not 8 bytes (buckets, size); {_LIMIT}")
    reader.unpack("i", "the bucket count")
    size = reader.unpack("i", "the map size")
    if size < 0:
        raise JavaStreamError(f"a negative map size {size}")
    entries: dict[bytes | None, bytes | None] = {}
    for index in range(size):
        key = _bytes_or_null(reader, f"key {index}")
        entries[key] = _bytes_or_null(reader, f"value {index}")
    reader.expect(TC_ENDBLOCKDATA, "the end of the map (TC_ENDBLOCKDATA)")
    if reader.at != len(data):
        raise JavaStreamError(f"{len(data) - reader.at} bytes follow the map at byte {reader.at}; {_LIMIT}")
    return entries


def read_offset_file(path: str | Path) -> dict[bytes | None, bytes | None]:
    """parse_offset_file of the file at `path`; OSError when it cannot be read."""
    return parse_offset_file(Path(path).read_bytes())
