"""The keys in Debezium's incremental-snapshot offset, read without a JVM.

Debezium's AbstractIncrementalSnapshotContext stores the last key it emitted and the table's
maximum key (`incremental_snapshot_primary_key`, `incremental_snapshot_maximum_key`) as the hex
text (HexConverter) of one `ObjectOutputStream.writeObject(Object[])`: a Java Object Serialization
stream (Java Object Serialization Specification, chapter 6, "Object Serialization Stream
Protocol") holding an array of the key's column values as JDBC read them.

This reads such an array into dblog's normalized key values (dblog.mysql.values): Integer, Long,
Short, Byte and BigInteger as int; String as str; byte[] as base64 text; BigDecimal as its exact
decimal text (JDBC's BigDecimal carries the column's scale); Boolean as int (MySQL's BOOLEAN is a
TINYINT). Any other class (dates and times, whose Java forms depend on the connector's settings)
is refused naming it: JavaStreamError.
"""

from __future__ import annotations

import base64
import struct
from decimal import Decimal
from typing import Any

from dblog.runtime.java_offset_file import JavaStreamError

_MAGIC, _VERSION = 0xACED, 5
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY = 0x70, 0x71, 0x72, 0x73, 0x74, 0x75
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_LONGSTRING, TC_BLOCKDATALONG = 0x77, 0x78, 0x7C, 0x7A
_BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD = 0x01
_PRIMITIVES = {"B": "b", "C": "H", "D": "d", "F": "f", "I": "i", "J": "q", "S": "h", "Z": "?"}
_INTEGERS = {"java.lang.Integer", "java.lang.Long", "java.lang.Short", "java.lang.Byte"}


class _Class:
    def __init__(self, name: str) -> None:
        self.name = name
        self.flags = 0
        self.fields: list[tuple[str, str]] = []  # (type code, name)
        self.parent: _Class | None = None


class _Object:
    def __init__(self, java_class: _Class) -> None:
        self.java_class = java_class
        self.fields: dict[str, Any] = {}


class _Stream:
    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.handles = data, 0, []

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise JavaStreamError(f"the serialized key ends at byte {len(self.data)}, inside a value")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def unpack(self, form: str) -> Any:
        return struct.unpack(">" + form, self.take(struct.calcsize(">" + form)))[0]

    def text(self, size: int) -> str:
        # Java's modified UTF-8: NUL as C0 80, supplementary characters as surrogate pairs
        raw = self.take(size).replace(b"\xc0\x80", b"\x00")
        return raw.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass").decode("utf-16")

    def handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def reference(self) -> Any:
        index = self.unpack("I") - _BASE_HANDLE
        if not 0 <= index < len(self.handles):
            raise JavaStreamError(f"byte {self.at - 4}: a reference to a handle the stream never assigned")
        return self.handles[index]

    def class_desc(self) -> _Class | None:
        code = self.unpack("B")
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            found = self.reference()
            if not isinstance(found, _Class):
                raise JavaStreamError(f"byte {self.at - 4}: a class reference to something else")
            return found
        if code != TC_CLASSDESC:
            raise JavaStreamError(f"byte {self.at - 1}: expected a class description, found 0x{code:02X}")
        java_class = _Class(self.text(self.unpack("H")))
        self.take(8)  # serialVersionUID
        self.handle(java_class)
        java_class.flags = self.unpack("B")
        for _ in range(self.unpack("H")):
            code = chr(self.unpack("B"))
            name = self.text(self.unpack("H"))
            if code in "[L":
                self.content()  # the field's class name, a string
            java_class.fields.append((code, name))
        self.annotations()
        java_class.parent = self.class_desc()
        return java_class

    def annotations(self) -> None:
        """Block data and objects up to TC_ENDBLOCKDATA (a class's or a writeObject's extras)."""
        while True:
            code = self.data[self.at] if self.at < len(self.data) else None
            if code == TC_ENDBLOCKDATA:
                self.at += 1
                return
            if code == TC_BLOCKDATA:
                self.at += 1
                self.take(self.unpack("B"))
            elif code == TC_BLOCKDATALONG:
                self.at += 1
                self.take(self.unpack("i"))
            else:
                self.content()

    def content(self) -> Any:
        code = self.unpack("B")
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            return self.reference()
        if code in (TC_STRING, TC_LONGSTRING):
            value = self.text(self.unpack("H" if code == TC_STRING else "q"))
            self.handle(value)
            return value
        if code == TC_ARRAY:
            java_class = self.class_desc()
            index = self.handle(None)
            length = self.unpack("i")
            name = java_class.name if java_class is not None else "?"
            if name == "[B":
                value: Any = self.take(length)
            elif name[1:2] in _PRIMITIVES:
                value = [self.unpack(_PRIMITIVES[name[1]]) for _ in range(length)]
            else:
                value = [self.content() for _ in range(length)]
            self.handles[index] = value
            return value
        if code == TC_OBJECT:
            java_class = self.class_desc()
            if java_class is None:
                raise JavaStreamError(f"byte {self.at}: an object without a class")
            value = _Object(java_class)
            self.handle(value)
            chain = []
            while java_class is not None:
                chain.append(java_class)
                java_class = java_class.parent
            for described in reversed(chain):  # the superclass's fields first
                for type_code, name in described.fields:
                    value.fields[name] = (self.unpack(_PRIMITIVES[type_code]) if type_code in _PRIMITIVES
                                          else self.content())
                if described.flags & SC_WRITE_METHOD:
                    self.annotations()
            return value
        raise JavaStreamError(f"byte {self.at - 1}: a serialized value of kind 0x{code:02X}, which a key never holds")


def _big_integer(value: Any) -> int:
    magnitude = value.fields.get("magnitude")
    return int(value.fields.get("signum", 0)) * int.from_bytes(bytes(magnitude or b""), "big")


def _key_value(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, _Object):
        name = value.java_class.name
        if name in _INTEGERS:
            return int(value.fields["value"])
        if name == "java.lang.Boolean":
            return int(bool(value.fields["value"]))
        if name == "java.math.BigInteger":
            return _big_integer(value)
        if name == "java.math.BigDecimal":
            unscaled = _big_integer(value.fields["intVal"])
            return format(Decimal(unscaled).scaleb(-int(value.fields["scale"])), "f")
        raise JavaStreamError(f"a key value of class {name}, which dblog does not map to its own key values")
    raise JavaStreamError(f"a key value of type {type(value).__name__}, which dblog does not map to its key values")


def key_of_hex(text: str) -> tuple[Any, ...]:
    """The key whose serialized Object[] `text` spells in hex (HexConverter's, either case)."""
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise JavaStreamError("the serialized key is not hex text") from None
    stream = _Stream(data)
    if len(data) < 4 or stream.unpack("H") != _MAGIC or stream.unpack("H") != _VERSION:
        raise JavaStreamError("the serialized key is not a Java Object Serialization stream (no 0xACED 0005)")
    array = stream.content()
    if stream.at != len(data):
        raise JavaStreamError(f"{len(data) - stream.at} bytes follow the serialized key")
    if not isinstance(array, list):
        raise JavaStreamError("the serialized key is not an array")
    return tuple(_key_value(value) for value in array)
