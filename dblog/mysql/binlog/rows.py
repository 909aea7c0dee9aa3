"""Table maps and row images: from a rows event's bytes to normalized row dicts, fast.

A TABLE_MAP event describes the columns a following rows event carries (types, per-column
metadata, nullability and, with `binlog_row_metadata=FULL`, names, signedness, charsets, ENUM/SET
members and the primary key; below FULL the source completes it from its schema history:
`dblog.mysql.binlog.nameless_maps`). The server logs one before every statement, so on an OLTP load there
is one per row or two: the decoder (`dblog.mysql.binlog.decoder.parse_table_map`) parses a map into
the `TableMap` and `MapColumn`s described here only when a table id's map bytes change, and the
map carries the `RowReader`s compiled for it, once, and reused for every row of that table.

A `RowReader` turns one row image into a dict. For every pattern of NULL columns it generates,
once, a straight-line Python function: consecutive fixed-width numeric columns read by one
precompiled `struct` unpack, strings sliced and decoded in place, DECIMAL/temporal/ENUM/SET
through the converters of `dblog.mysql.binlog.values`, and the dict built as one literal. That is the
difference with a generic decoder, which dispatches on the column type for every value of every
row. The generated code only refers to names bound in its namespace (column names included), never
to text taken from the binlog.

Pure: no I/O. The schema (`dblog.mysql.schema.TableSchema`, from information_schema) is consulted only
for what the binlog cannot say: that a 16-byte binary column is a UUID or INET6, or a 4-byte one an
INET4, or a binary string a (MariaDB) VECTOR. Everything else (types, widths, signedness,
charsets, members) comes from the map, so a row logged before a DDL that the schema already
reflects is still decoded as it was written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from dblog.mysql.binlog import values as bv

__all__ = ["TableMap", "MapColumn", "RowReader", "SemanticType", "BinlogFormatError"]


class BinlogFormatError(ValueError):
    """Bytes that do not decode as the binlog format says they should."""


# MySQL field types (include/field_types.h)
TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = 1, 2, 3, 4, 5, 6, 7, 8, 9
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT = 10, 11, 12, 13, 14, 15, 16
TIMESTAMP2, DATETIME2, TIME2 = 17, 18, 19
TYPED_ARRAY = 20  # a multi-valued index's hidden column (MySQL 8.0.17-8.0.19 log it in table maps)
VECTOR = 242  # MySQL 9.0
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING, GEOMETRY = 249, 250, 251, 252, 253, 254, 255

_INTEGER_STRUCT = {TINY: "bB", SHORT: "hH", LONG: "iI", LONGLONG: "qQ"}  # (signed, unsigned) formats
_TYPE_NAMES = {
    TINY: "TINYINT", SHORT: "SMALLINT", LONG: "INT", FLOAT: "FLOAT", DOUBLE: "DOUBLE", NULL: "NULL",
    TIMESTAMP: "TIMESTAMP (pre-5.6)", LONGLONG: "BIGINT", INT24: "MEDIUMINT", DATE: "DATE", TIME: "TIME (pre-5.6)",
    DATETIME: "DATETIME (pre-5.6)", YEAR: "YEAR", NEWDATE: "NEWDATE", VARCHAR: "VARCHAR", BIT: "BIT",
    TIMESTAMP2: "TIMESTAMP", DATETIME2: "DATETIME", TIME2: "TIME", JSON: "JSON", NEWDECIMAL: "DECIMAL",
    ENUM: "ENUM", SET: "SET", TINY_BLOB: "TINYBLOB", MEDIUM_BLOB: "MEDIUMBLOB", LONG_BLOB: "LONGBLOB",
    BLOB: "BLOB", VAR_STRING: "VAR_STRING", STRING: "CHAR", GEOMETRY: "GEOMETRY", VECTOR: "VECTOR",
    TYPED_ARRAY: "typed array (multi-valued index)",
    140: "BLOB COMPRESSED (MariaDB)", 141: "VARCHAR COMPRESSED (MariaDB)",  # MYSQL_TYPE_{BLOB,VARCHAR}_COMPRESSED
}


def type_name(column_type: int) -> str:
    return _TYPE_NAMES.get(column_type, f"type {column_type}")


# MySQL names the hidden generated column of a functional key part (8.0.13+: INDEX ((expr)),
# multi-valued INDEX ((CAST(... AS ... ARRAY)))) "!hidden!<index>!<key part>!<n>"
# (sql/sql_table.cc, make_functional_index_column_name).
HIDDEN_COLUMN_PREFIX = "!hidden!"

BINARY_COLLATION = 63


@dataclass(frozen=True)
class MapColumn:
    """One column as a TABLE_MAP event describes it."""

    index: int
    type: int  # the real type: a CHAR column's STRING carrying ENUM/SET is resolved to ENUM/SET
    meta: int  # the type's metadata (widths, precision/scale, fsp, length bytes...), decoded
    nullable: bool
    name: str | None = None
    unsigned: bool = False
    collation: int | None = None  # character, ENUM and SET columns
    members: tuple[bytes, ...] | None = None  # ENUM and SET, as logged: in the column's charset

    @property
    def type_name(self) -> str:
        return type_name(self.type)

    @property
    def functional(self) -> bool:
        """Named as MySQL names the hidden column of a functional key part. MySQL never logs its
        value (sql/rpl_record.cc, pack_row: hidden generated columns are cleared from every row
        image's bitmap, whatever binlog_row_image says); 8.0.13-8.0.19 still list it in the table
        map, 8.0.20+ leave it out (sql/log_event.cc, Table_map_log_event: Replicated_columns_view
        OUTBOUND). Such a name in a row image is a user's column, read as any other."""
        return self.name is not None and self.name.startswith(HIDDEN_COLUMN_PREFIX)

    def describe(self) -> str:
        """`name` (TYPE), or its position when the map has no names, for error messages."""
        return f"{self.name or f'@{self.index + 1}'} ({self.type_name})"


@dataclass
class TableMap:
    table_id: int
    db: str
    table: str
    columns: tuple[MapColumn, ...]
    primary_key: tuple[int, ...] = ()  # column indexes, from the map's metadata (FULL only)
    has_names: bool = False
    # The optional metadata fields the map logs (their type codes): what binlog_row_metadata
    # gave it (dblog.mysql.binlog.nameless_maps)
    metadata_fields: frozenset = frozenset()
    readers: dict = field(default_factory=dict, repr=False)  # present bitmap (, "raw json") -> RowReader
    # Why the map's columns could not be read (None: they were). Raised only when rows of the
    # table are decoded, so a table dblog does not capture never stops the stream.
    error: str | None = None
    # The columns a full row image holds, as the bits of a little-endian bitmap: all but
    # functional index columns.
    required: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.required = sum(1 << column.index for column in self.columns if not column.functional)


# --- compiled row readers --------------------------------------------------------------------------


@dataclass(frozen=True)
class SemanticType:
    """What the schema says a column holds beyond its storage type (None: nothing more)."""

    data_type: str | None = None  # 'uuid', 'inet6', 'inet4', 'vector'
    charset: str | None = None  # the column's charset name, when the map's collation id is unknown


def _collation_charset(collation: int | None) -> str | None:
    if collation is None:
        return None
    if collation == BINARY_COLLATION:
        return "binary"
    try:
        import pymysql.charset

        return pymysql.charset.charset_by_id(collation).name
    except KeyError:
        return None


class _Column:
    """How one column is read, as pieces of generated code (see RowReader._compile)."""

    __slots__ = ("fmt", "size", "convert", "length_bytes", "finish", "reader", "name")

    def __init__(self, name: str, *, fmt: str | None = None, size: int = 0, convert: Callable | None = None,
                 length_bytes: int = 0, finish: Callable | None = None, reader: Callable | None = None) -> None:
        self.name = name
        self.fmt = fmt  # a struct format character: merged with its fixed-width neighbours
        self.size = size  # fixed width in bytes (fmt and reader columns)
        self.convert = convert  # applied to what `fmt` unpacked (None: the value as is)
        self.length_bytes = length_bytes  # variable-length: a little-endian length of this many bytes
        self.finish = finish  # variable-length: the value's bytes -> its normal form
        self.reader = reader  # fixed-width, not a struct: reader(buf, pos) -> value


def _plan_column(column: MapColumn, semantic: SemanticType | None, table: str, raw_json: bool) -> _Column:
    t, meta, name = column.type, column.meta, column.name or f"@{column.index + 1}"
    if t in _INTEGER_STRUCT:
        return _Column(name, fmt=_INTEGER_STRUCT[t][column.unsigned], size=struct.calcsize(_INTEGER_STRUCT[t][0]))
    if t == INT24:
        signed = not column.unsigned
        return _Column(name, size=3, reader=lambda buf, pos: int.from_bytes(buf[pos : pos + 3], "little", signed=signed))
    if t == FLOAT:
        return _Column(name, fmt="f", size=4, convert=bv.float32_shortest)
    if t == DOUBLE:
        return _Column(name, fmt="d", size=8)
    if t == YEAR:
        return _Column(name, fmt="B", size=1, convert=bv.year_value)
    if t == NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        return _Column(name, size=bv.decimal_size(precision, scale), reader=bv.decimal_reader(precision, scale))
    if t in (DATE, NEWDATE):
        return _Column(name, size=3, reader=lambda buf, pos: bv.date_value(int.from_bytes(buf[pos : pos + 3], "little")))
    if t == DATETIME2:
        return _Column(name, size=5 + bv.fraction_size(meta), reader=bv.datetime2_reader(meta))
    if t == TIMESTAMP2:
        return _Column(name, size=4 + bv.fraction_size(meta), reader=bv.timestamp2_reader(meta))
    if t == TIME2:
        return _Column(name, size=3 + bv.fraction_size(meta), reader=bv.time2_reader(meta))
    if t == DATETIME:
        return _Column(name, fmt="Q", size=8, convert=bv.old_datetime_value)
    if t == TIMESTAMP:
        return _Column(name, size=4, reader=bv.old_timestamp_reader)
    if t == TIME:
        return _Column(name, size=3, reader=lambda buf, pos: bv.old_time_value(
            int.from_bytes(buf[pos : pos + 3], "little", signed=True)))
    if t == BIT:
        size = (meta >> 8) + (1 if meta & 0xFF else 0)
        return _Column(name, size=size, reader=lambda buf, pos: int.from_bytes(buf[pos : pos + size], "big"))
    if t in (ENUM, SET):
        if column.members is None:
            raise BinlogFormatError(
                f"the binlog has no member names for {column.type_name} column {name} of {table}: "
                "the server must run with binlog_row_metadata=FULL"
            )
        # The server logs the members in the column's charset (latin1 'café' as b'caf\xe9').
        charset = _collation_charset(column.collation) or (semantic.charset if semantic is not None else None)
        text = bv.text_decoder(charset if charset != "binary" else None)
        members = tuple(text(member) for member in column.members)
        make = bv.enum_reader if t == ENUM else bv.set_reader
        return _Column(name, size=meta, reader=make(members, meta))
    if t in (VARCHAR, VAR_STRING, STRING):
        max_length = meta
        return _Column(name, length_bytes=1 if max_length < 256 else 2,
                       finish=_bytes_finisher(column, semantic, max_length if t == STRING else None))
    if t in (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, GEOMETRY):
        return _Column(name, length_bytes=meta, finish=_bytes_finisher(column, semantic, None))
    if t == JSON:  # raw: the binary document, or a partial update's diff list (dblog.mysql.binlog.json_diff)
        return _Column(name, length_bytes=meta, finish=bytes if raw_json else bv.mysql_json_text)
    if t == VECTOR:  # like a BLOB: `meta` length bytes, then little-endian float32s
        return _Column(name, length_bytes=meta, finish=bv.float_vector)
    raise BinlogFormatError(f"column {name} of {table} has a type dblog cannot decode: {column.type_name}")


def _bytes_finisher(column: MapColumn, semantic: SemanticType | None, fixed_length: int | None) -> Callable:
    special = semantic.data_type if semantic else None
    if special == "uuid":
        return bv.uuid_text
    if special == "inet6":
        return bv.inet6_text
    if special == "inet4":
        return bv.inet4_text
    if special == "vector":  # MariaDB 11.7's VECTOR: float32s in a binary string
        return bv.float_vector
    charset = _collation_charset(column.collation)
    if charset is None and semantic is not None:
        charset = semantic.charset
    if column.type == GEOMETRY or charset == "binary":
        # BINARY(n) is right-trimmed of its 0x00 padding in the binlog; the column holds n bytes.
        return bv.padded_b64(fixed_length) if fixed_length else bv.b64
    return bv.text_decoder(charset)


class RowReader:
    """Reads row images of one table map with a given set of present columns (the rows event's
    bitmap: all of them under binlog_row_image=FULL). `raw_json`: JSON columns come out as their
    bytes, not as text."""

    def __init__(self, table_map: TableMap, present: list[bool], semantics: dict[str, SemanticType],
                 raw_json: bool = False) -> None:
        table = f"{table_map.db}.{table_map.table}"
        self.logged = [column for column, here in zip(table_map.columns, present) if here]
        self.columns = [_plan_column(column, semantics.get(column.name or ""), table, raw_json)
                        for column in self.logged]
        self.names = tuple(column.name for column in self.columns)
        self.null_bytes = (len(self.columns) + 7) // 8
        self._by_nulls: dict[bytes, Callable[[bytes, int], tuple[dict, int]]] = {}

    def failing_column(self, buf: bytes, pos: int) -> tuple[str, str] | None:
        """For an error message: the first column of the row image at `pos` whose value does not
        read (past the end of `buf`, or refused by its converter), described, and why; None if
        all read.
        Column by column, with the bounds checks the compiled reader leaves out for speed."""
        end = len(buf)
        nulls = buf[pos : pos + self.null_bytes]
        pos += self.null_bytes
        if pos > end:
            return "(the row's NULL bitmap)", "the event ends inside it"
        for index, column in enumerate(self.columns):
            if nulls[index >> 3] & (1 << (index & 7)):
                continue
            try:
                if column.length_bytes:
                    width = column.length_bytes
                    length = int.from_bytes(buf[pos : pos + width], "little")
                    start, pos = pos + width, pos + width + length
                    if pos > end:
                        raise IndexError(f"its {length}-byte value runs past the end of the event")
                    column.finish(buf[start:pos])
                    continue
                if pos + column.size > end:
                    raise IndexError(f"its {column.size}-byte value runs past the end of the event")
                if column.fmt is not None:
                    value = struct.unpack_from("<" + column.fmt, buf, pos)[0]
                    if column.convert is not None:
                        column.convert(value)
                else:
                    column.reader(buf, pos)
                pos += column.size
            except Exception as error:  # noqa: BLE001 - whatever the converter raised is the reason
                return self.logged[index].describe(), f"{type(error).__name__}: {error}"
        return None

    def read(self, buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        """One row image at `pos`: (row, position after it)."""
        end = pos + self.null_bytes
        nulls = buf[pos:end]
        function = self._by_nulls.get(nulls)
        if function is None:
            if len(self._by_nulls) >= 1024:  # a pathological variety of NULL patterns
                self._by_nulls.clear()
            function = self._by_nulls[nulls] = self._compile(nulls)
        return function(buf, end)

    def _compile(self, nulls: bytes) -> Callable[[bytes, int], tuple[dict, int]]:
        namespace: dict[str, Any] = {"from_bytes": int.from_bytes}
        lines = ["def read_row(buf, pos):"]
        values: list[str] = []
        run: list[tuple[int, _Column]] = []  # consecutive struct columns not yet emitted

        def flush_run() -> None:
            if not run:
                return
            fmt = "<" + "".join(column.fmt for _, column in run)
            unpack = f"u{run[0][0]}"
            namespace[unpack] = struct.Struct(fmt).unpack_from
            targets = [f"v{index}" for index, _ in run]
            lines.append(f"    {', '.join(targets)}{',' if len(targets) == 1 else ''} = {unpack}(buf, pos)")
            lines.append(f"    pos += {struct.calcsize(fmt)}")
            for index, column in run:
                if column.convert is not None:
                    namespace[f"c{index}"] = column.convert
                    lines.append(f"    v{index} = c{index}(v{index})")
            run.clear()

        for index, column in enumerate(self.columns):
            values.append(f"v{index}")
            if nulls[index >> 3] & (1 << (index & 7)):
                flush_run()
                lines.append(f"    v{index} = None")
                continue
            if column.fmt is not None:
                run.append((index, column))
                continue
            flush_run()
            if column.reader is not None:
                namespace[f"r{index}"] = column.reader
                lines.append(f"    v{index} = r{index}(buf, pos)")
                lines.append(f"    pos += {column.size}")
                continue
            width = column.length_bytes
            if width == 1:
                lines.append("    n = buf[pos]")
            elif width == 2:
                lines.append("    n = buf[pos] | buf[pos + 1] << 8")
            else:
                lines.append(f"    n = from_bytes(buf[pos:pos + {width}], 'little')")
            namespace[f"f{index}"] = column.finish
            lines.append(f"    pos += {width}")
            lines.append(f"    v{index} = f{index}(buf[pos:pos + n])")
            lines.append("    pos += n")
        flush_run()
        for index, name in enumerate(self.names):
            namespace[f"k{index}"] = name
        lines.append("    return {" + ", ".join(f"k{i}: v{i}" for i in range(len(values))) + "}, pos")
        code = "\n".join(lines)
        compiled = _COMPILED.get(code)
        if compiled is None:
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            compiled = _COMPILED[code] = compile(code, f"<row reader {','.join(self.names)[:60]}>", "exec")
        exec(compiled, namespace)  # the same code, with this table's converters
        return namespace["read_row"]


# Generated reader source -> its compiled code. Compiling took most of the first change of each
# table (py-spy: a fifth of the reader process's time streaming over 5,000 tables); tables of
# one shape, as one per tenant or shard, generate the same source and compile it once.
_COMPILED: dict[str, Any] = {}
_COMPILED_MAX = 4096
