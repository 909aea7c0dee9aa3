"""Binlog events from bytes: dblog's own decoder (sans-IO).

`BinlogDecoder.decode(packet)` takes one event as the server's dump thread sends it (the packet
payload after its 0x00 status byte: 19-byte header, body, CRC32 when checksums are on) and returns
what dblog needs of it, as a small record, or None for events that change nothing for dblog. It
keeps the state a binlog reader must keep between events: the current file (from ROTATE), the
format (post-header lengths and checksum algorithm, from FORMAT_DESCRIPTION) and the table maps
by table id (`parse_table_map`, with the length-encoded integers and bitmaps of the format). Rows
are decoded later and only for tables the caller wants (`RowsRecord.rows(...)`), through readers
compiled once per table map (`dblog.mysql.binlog.rows`).

Event types are dispatched through one table, `EVENT_TYPES`: per event type its type codes, the
method that decodes it, the record it yields and what the binlog source does with that record
(`dblog.mysql.binlog.source` dispatches the records through the same table). Every event type a
server can send is in it: either handled, or known to need nothing from dblog, or refused. An
unknown type without the "ignorable" flag, an INCIDENT (the server lost events) and a rows event
whose table map is missing raise `BinlogDecodeError` with what to do. MySQL's partial
JSON updates (`binlog_row_value_options=PARTIAL_JSON`: PARTIAL_UPDATE_ROWS events) are update
rows events whose JSON after values may be diffs: they are applied to the before values
(`dblog.mysql.binlog.json_diff`). Compressed events (MariaDB
`log_bin_compress`, zlib; MySQL `binlog_transaction_compression`, zstd) are decompressed.
Row images with columns left out (`binlog_row_image=MINIMAL`/`NOBLOB`) decode to rows with those
columns missing; `DecodedRows.partial` says so, and the binlog adapter refuses them for captured
tables (a partial row would overwrite a full one with holes). A functional index's hidden column
(`MapColumn.functional`), which MySQL lists in some table maps but never logs, is not missing.

An event whose bytes do not decode raises one `UndecodableEvent` naming the event type and its
position, and for rows the table and column; whatever the cause (struct, index, unicode, JSON
errors). A table map whose columns do not decode, and a compressed rows event that does not
decompress, are kept with the reason (`TableMap.error`, `RowsRecord.error`), raised only when
rows of them are decoded: rows of tables the caller does not want never are, so such a table
never stops the stream.

Pure: no sockets, threads or clocks. `tests/mysql/test_binlog_decoder.py` drives it with an encoder of
the format written for the tests (hypothesis); `tests/mysql/test_binlog_differential.py` against a real
server and mysql-replication.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Callable
from uuid import UUID

from dblog.core.gtid import Gtid, flavor_of_version
from dblog.mysql.binlog.json_diff import JsonDiffError, JsonDiffRejected, finish_json_columns
from dblog.mysql.binlog.rows import (
    BIT,
    BLOB,
    DATE,
    DATETIME,
    DATETIME2,
    DOUBLE,
    ENUM,
    FLOAT,
    GEOMETRY,
    INT24,
    JSON,
    LONG,
    LONG_BLOB,
    LONGLONG,
    MEDIUM_BLOB,
    NEWDATE,
    NEWDECIMAL,
    NULL,
    SET,
    SHORT,
    STRING,
    TIME,
    TIME2,
    TIMESTAMP,
    TIMESTAMP2,
    TINY,
    TINY_BLOB,
    TYPED_ARRAY,
    VAR_STRING,
    VARCHAR,
    VECTOR,
    YEAR,
    BinlogFormatError,
    MapColumn,
    RowReader,
    SemanticType,
    TableMap,
    type_name,
)
from dblog.mysql.binlog.values import JsonDecodeError

__all__ = [
    "BinlogDecoder",
    "BinlogDecodeError",
    "UndecodableEvent",
    "GtidRecord",
    "QueryRecord",
    "XidRecord",
    "XaPrepareRecord",
    "RowsRecord",
    "HeartbeatRecord",
    "RotateRecord",
    "PayloadRecord",
    "HEADER_LENGTH",
    "EventType",
    "EVENT_TYPES",
    "record_handlers",
]

HEADER_LENGTH = 19

# Event types (MySQL's binlog_event.h; MariaDB's own from 160)
START_V3, QUERY, STOP, ROTATE, INTVAR, LOAD, SLAVE = 1, 2, 3, 4, 5, 6, 7
CREATE_FILE, APPEND_BLOCK, EXEC_LOAD, DELETE_FILE, NEW_LOAD, RAND = 8, 9, 10, 11, 12, 13
USER_VAR, FORMAT_DESCRIPTION, XID, BEGIN_LOAD_QUERY, EXECUTE_LOAD_QUERY, TABLE_MAP = 14, 15, 16, 17, 18, 19
PRE_GA_WRITE_ROWS, PRE_GA_UPDATE_ROWS, PRE_GA_DELETE_ROWS = 20, 21, 22
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
INCIDENT, HEARTBEAT, IGNORABLE, ROWS_QUERY = 26, 27, 28, 29
WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 30, 31, 32
GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS, TRANSACTION_CONTEXT, VIEW_CHANGE = 33, 34, 35, 36, 37
XA_PREPARE, PARTIAL_UPDATE_ROWS, TRANSACTION_PAYLOAD, HEARTBEAT_V2, GTID_TAGGED = 38, 39, 40, 41, 42
ANNOTATE_ROWS, BINLOG_CHECKPOINT, MARIADB_GTID, GTID_LIST, START_ENCRYPTION = 160, 161, 162, 163, 164
QUERY_COMPRESSED = 165
WRITE_ROWS_COMPRESSED_V1, UPDATE_ROWS_COMPRESSED_V1, DELETE_ROWS_COMPRESSED_V1 = 166, 167, 168
WRITE_ROWS_COMPRESSED, UPDATE_ROWS_COMPRESSED, DELETE_ROWS_COMPRESSED = 169, 170, 171

# The layout of each rows event type (`BinlogDecoder._rows`): type -> (op, v2 post-header with
# extra data, compressed). PARTIAL_UPDATE_ROWS is an UPDATE_ROWS whose JSON values may be diffs.
_ROWS_LAYOUTS = {
    WRITE_ROWS_V1: ("c", False, False), UPDATE_ROWS_V1: ("u", False, False), DELETE_ROWS_V1: ("d", False, False),
    WRITE_ROWS: ("c", True, False), UPDATE_ROWS: ("u", True, False), DELETE_ROWS: ("d", True, False),
    WRITE_ROWS_COMPRESSED_V1: ("c", False, True), UPDATE_ROWS_COMPRESSED_V1: ("u", False, True),
    DELETE_ROWS_COMPRESSED_V1: ("d", False, True),
    WRITE_ROWS_COMPRESSED: ("c", True, True), UPDATE_ROWS_COMPRESSED: ("u", True, True),
    DELETE_ROWS_COMPRESSED: ("d", True, True),
    PARTIAL_UPDATE_ROWS: ("u", True, False),
}

LOG_EVENT_IGNORABLE_F = 0x80
_BINLOG_IN_USE = 0x01  # LOG_EVENT_BINLOG_IN_USE_F, in the low byte of the header's flags
_FLAGS_OFFSET = 17
CHECKSUM_OFF, CHECKSUM_CRC32 = 0, 1

# MariaDB GTID event flags
FL_STANDALONE, FL_GROUP_COMMIT_ID, FL_PREPARED_XA, FL_COMPLETED_XA = 1, 2, 64, 128

_HEADER = struct.Struct("<IBIIIH")


class BinlogDecodeError(BinlogFormatError):
    """The binlog holds something dblog cannot (or must not) read past."""


class UndecodableEvent(BinlogDecodeError):
    """An event's bytes do not decode (a type or layout dblog does not know, or damage). Reading
    again gives the same bytes, so it is final; the message names the event, its position and,
    for rows, the table and column."""


def event_name(event_type: int) -> str:
    """The event type's name as mysqlbinlog prints it (`EVENT_TYPES`), for messages."""
    return _EVENT_NAMES.get(event_type, f"type {event_type}")


# What to do about an event dblog cannot decode (the message says which, and where).
_UNDECODABLE_REMEDY = (
    "dblog stops rather than skip changes. If the table need not be captured, leave it out of "
    "source.include / add it to source.exclude and start dblog again (it resumes from its committed "
    "offsets); otherwise report this message with the event (mysqlbinlog -vv --start-position and "
    "--stop-position around it) to dblog's maintainers"
)


# --- length-encoded integers, bitmaps and table maps -------------------------------------------

_NUMERIC = frozenset({TINY, SHORT, INT24, LONG, LONGLONG, NEWDECIMAL, FLOAT, DOUBLE, YEAR})

# Optional metadata field types (binlog_row_metadata)
_SIGNEDNESS, _DEFAULT_CHARSET, _COLUMN_CHARSET, _COLUMN_NAME, _SET_VALUES, _ENUM_VALUES = 1, 2, 3, 4, 5, 6
_GEOMETRY_TYPE, _SIMPLE_PRIMARY_KEY, _PRIMARY_KEY_WITH_PREFIX = 7, 8, 9
_ENUM_AND_SET_DEFAULT_CHARSET, _ENUM_AND_SET_COLUMN_CHARSET, _COLUMN_VISIBILITY = 10, 11, 12


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at `pos`: (value, position after it)."""
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    if first == 252:
        return buf[pos + 1] | buf[pos + 2] << 8, pos + 3
    if first == 253:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    if first == 254:
        return int.from_bytes(buf[pos + 1 : pos + 9], "little"), pos + 9
    raise BinlogFormatError(f"invalid length-encoded integer (first byte {first})")


def bits(data: bytes, count: int) -> list[bool]:
    """Bitmaps of the rows and NULL fields: bit i of byte i // 8, least significant first."""
    return [bool(data[i >> 3] & (1 << (i & 7))) for i in range(count)]


# Bytes of metadata per column type in a TABLE_MAP (sql/rpl_utility.cc, read_field_metadata;
# libs/mysql/binlog/event/rows_event.h, the table of column types). VECTOR: one byte, its length
# prefix's size (always 4), as a BLOB's (MySQL 9, read_field_metadata and calc_field_size).
_METADATA_BYTES = {
    TINY: 0, SHORT: 0, LONG: 0, NULL: 0, TIMESTAMP: 0, LONGLONG: 0, INT24: 0, DATE: 0, TIME: 0, DATETIME: 0,
    YEAR: 0, NEWDATE: 0, 0: 0,  # 0: the pre-5.0 DECIMAL
    FLOAT: 1, DOUBLE: 1, BLOB: 1, TINY_BLOB: 1, MEDIUM_BLOB: 1, LONG_BLOB: 1, GEOMETRY: 1, JSON: 1,
    TIMESTAMP2: 1, DATETIME2: 1, TIME2: 1, VECTOR: 1,
    VARCHAR: 2, VAR_STRING: 2, BIT: 2, NEWDECIMAL: 2, STRING: 2, ENUM: 2, SET: 2,
}


def _metadata(types: list[int], block: bytes, names: list[str] | None) -> list[int]:
    """Per-column metadata from the TABLE_MAP metadata block, decoded to one int per column:
    FLOAT/DOUBLE pack length, BLOB/GEOMETRY/JSON/VECTOR length bytes, VARCHAR max length, BIT
    (bytes << 8 | bits), NEWDECIMAL (precision << 8 | scale), STRING (real_type << 8 | length
    byte, as logged), temporal types the fraction digits; a typed array (a multi-valued index's
    hidden column) its element type, after which come the element type's own metadata bytes
    (a VARCHAR's length in 3 bytes: Field_typed_array::do_save_field_metadata). A type dblog does
    not know, whose metadata size it cannot tell, is refused naming its column (`names`)."""
    out: list[int] = []
    pos = 0
    for index, column_type in enumerate(types):
        if column_type == TYPED_ARRAY:
            element = block[pos]
            size = 3 if element == VARCHAR else _METADATA_BYTES.get(element)
            if size is None:
                raise BinlogFormatError(f"{_column_label(index, column_type, names)} is an array of type {element}, "
                                        "which dblog does not know")
            out.append(element)
            pos += 1 + size
            continue
        size = _METADATA_BYTES.get(column_type)
        if size is None:
            raise BinlogFormatError(f"{_column_label(index, column_type, names)} has a type dblog does not know")
        if column_type in (VARCHAR, VAR_STRING):
            out.append(block[pos] | block[pos + 1] << 8)
        elif column_type == BIT:
            out.append(block[pos + 1] << 8 | block[pos])  # bytes << 8 | bits
        elif size == 2:  # NEWDECIMAL, STRING, ENUM, SET
            out.append(block[pos] << 8 | block[pos + 1])
        elif size == 1:
            out.append(block[pos])
        else:
            out.append(0)
        pos += size
    if pos != len(block):
        raise BinlogFormatError(f"table map metadata is {len(block)} bytes, its column types use {pos}")
    return out


def _column_label(index: int, column_type: int, names: list[str] | None) -> str:
    name = names[index] if names is not None and index < len(names) else f"@{index + 1}"
    return f"column {name} ({type_name(column_type)})"


def _strings(buf: bytes, pos: int, end: int) -> list[str]:
    out = []
    while pos < end:
        length, pos = read_lenenc(buf, pos)
        out.append(buf[pos : pos + length].decode("utf-8", "replace"))
        pos += length
    return out


def _ints(buf: bytes, pos: int, end: int) -> list[int]:
    out = []
    while pos < end:
        value, pos = read_lenenc(buf, pos)
        out.append(value)
    return out


def _resolve_string_type(column_type: int, meta: int) -> tuple[int, int]:
    """STRING's metadata carries the real type (CHAR/BINARY, ENUM or SET) and the length:
    (real type, meta as used by the reader)."""
    if column_type != STRING:
        return column_type, meta
    byte0, byte1 = meta >> 8, meta & 0xFF
    if byte0 in (ENUM, SET):
        return byte0, byte1  # the pack length: 1-2 bytes (ENUM), 1-8 bytes (SET)
    # CHAR(n) with n * mbmaxlen > 255 stores two more length bits in byte0.
    return STRING, (((byte0 & 0x30) ^ 0x30) << 4) | byte1


# Character columns, counted in the DEFAULT_CHARSET / COLUMN_CHARSET lists (sql/log_event.cc,
# is_character_type of a field's real_type(): VECTOR too since MySQL 9.0, which logs it with the
# binary collation; MariaDB counts GEOMETRY as well). A typed array's real_type() is its element's
# (sql/field.h, Field_typed_array), so a CHAR ... ARRAY column counts as one.
_CHARACTER = frozenset({STRING, VAR_STRING, VARCHAR, BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, VECTOR})
_UNDECODED_MAP = (ValueError, LookupError, struct.error)


def parse_table_map(body: bytes, post_header_length: int, mariadb: bool) -> TableMap:
    """A TABLE_MAP event's body (after the common header, without checksum). When its columns do
    not decode, the map says why (`TableMap.error`) and has none: only rows of it fail, so a
    table dblog does not capture never stops the stream. Its id and names must decode."""
    id_size = 4 if post_header_length == 6 else 6
    table_id = int.from_bytes(body[:id_size], "little")
    pos = post_header_length
    db_length = body[pos]
    db = body[pos + 1 : pos + 1 + db_length].decode("utf-8", "replace")
    pos += 2 + db_length
    table_length = body[pos]
    table = body[pos + 1 : pos + 1 + table_length].decode("utf-8", "replace")
    pos += 2 + table_length
    if pos > len(body):
        raise IndexError("the event ends inside the table's name")
    try:
        return _map_columns(table_id, db, table, body, pos, mariadb)
    except _UNDECODED_MAP as error:
        return TableMap(table_id, db, table, (), error=str(error))


def _map_columns(table_id: int, db: str, table: str, body: bytes, pos: int, mariadb: bool) -> TableMap:
    count, pos = read_lenenc(body, pos)
    types = list(body[pos : pos + count])
    pos += count
    meta_length, pos = read_lenenc(body, pos)
    block = body[pos : pos + meta_length]
    pos += meta_length
    nullable = bits(body[pos : pos + (count + 7) // 8], count)
    pos += (count + 7) // 8
    if pos > len(body):
        raise IndexError(f"the event ends inside its {count} columns' types and metadata")
    fields = []  # optional metadata: (type, start, end), in the order logged
    while pos < len(body):
        kind = body[pos]
        length, pos = read_lenenc(body, pos + 1)
        fields.append((kind, pos, pos + length))
        pos += length
    names: list[str] | None = None
    for kind, start, end in fields:
        if kind == _COLUMN_NAME:
            names = _strings(body, start, end)
    if names is not None and len(names) != count:
        raise BinlogFormatError(f"it names {len(names)} of its {count} columns")
    metas = _metadata(types, block, names)

    resolved = [_resolve_string_type(t, m) for t, m in zip(types, metas)]
    unsigned = [False] * count
    collations: list[int | None] = [None] * count
    members: list[tuple[bytes, ...] | None] = [None] * count
    primary_key: list[int] = []
    character = [i for i, (t, m) in enumerate(resolved)
                 if t in _CHARACTER or (t == TYPED_ARRAY and m in _CHARACTER) or (mariadb and t == GEOMETRY)]
    enums_and_sets = [i for i, (t, _) in enumerate(resolved) if t in (ENUM, SET)]
    for kind, pos, end in fields:
        if kind == _SIGNEDNESS:
            numeric = [i for i, (t, _) in enumerate(resolved) if t in _NUMERIC]
            flags = bits(bytes(_reverse_bits(b) for b in body[pos:end]), len(numeric))  # MSB first
            for index, flag in zip(numeric, flags):
                unsigned[index] = flag
        elif kind in (_DEFAULT_CHARSET, _ENUM_AND_SET_DEFAULT_CHARSET):
            targets = character if kind == _DEFAULT_CHARSET else enums_and_sets
            values = _ints(body, pos, end)
            default, overrides = values[0], dict(zip(values[1::2], values[2::2]))
            for position, index in enumerate(targets):
                collations[index] = overrides.get(position, default)
        elif kind in (_COLUMN_CHARSET, _ENUM_AND_SET_COLUMN_CHARSET):
            targets = character if kind == _COLUMN_CHARSET else enums_and_sets
            for index, collation in zip(targets, _ints(body, pos, end)):
                collations[index] = collation
        elif kind in (_SET_VALUES, _ENUM_VALUES):
            wanted = SET if kind == _SET_VALUES else ENUM
            targets = [i for i, (t, _) in enumerate(resolved) if t == wanted]
            lists = []
            cursor = pos
            while cursor < end:
                member_count, cursor = read_lenenc(body, cursor)
                values = []
                for _ in range(member_count):
                    member_length, cursor = read_lenenc(body, cursor)
                    values.append(body[cursor : cursor + member_length])
                    cursor += member_length
                lists.append(tuple(values))
            for index, values in zip(targets, lists):
                members[index] = values
        elif kind == _SIMPLE_PRIMARY_KEY:
            primary_key = _ints(body, pos, end)
        elif kind == _PRIMARY_KEY_WITH_PREFIX:
            primary_key = _ints(body, pos, end)[0::2]
        # names (read above); geometry types, column visibility, vector dimensions and unknown
        # fields: nothing dblog needs
    columns = tuple(
        MapColumn(index, real_type, meta, nullable[index], names[index] if names else None, unsigned[index],
                  collations[index], members[index])
        for index, (real_type, meta) in enumerate(resolved)
    )
    return TableMap(table_id, db, table, columns, tuple(primary_key), names is not None,
                    frozenset(kind for kind, _, _ in fields))


def _reverse_bits(byte: int) -> int:
    return int(f"{byte:08b}"[::-1], 2)


# --- records --------------------------------------------------------------------------------------


@dataclass(slots=True)
class GtidRecord:
    """A transaction starts. `standalone`: no XID/COMMIT follows, the transaction is its one
    query (MariaDB DDL; on MySQL every GTID, whose DML opens with a BEGIN query). `gtid` None:
    MySQL's ANONYMOUS_GTID event, a transaction logged without a GTID (gtid_mode OFF or
    OFF_PERMISSIVE / ON_PERMISSIVE)."""

    gtid: Gtid | None
    standalone: bool
    server_id: int
    timestamp: int
    pos: int
    # MariaDB XA: "prepare" for the events an XA PREPARE ends, "complete" for the XA COMMIT /
    # XA ROLLBACK query that decides them later, under its own GTID; `xid` names the XA
    # transaction as the server's SQL does (X'gtrid',X'bqual',formatID).
    xa: str | None = None
    xid: str | None = None
    # Where the event starts in its file: where a transaction starts, its name in file-position
    # mode (dblog.core.file_positions)
    start: int = 0


@dataclass(slots=True)
class QueryRecord:
    db: str
    sql: str
    pos: int


@dataclass(slots=True)
class XidRecord:
    """The storage-engine commit of the open transaction; the event ends at `pos`."""

    pos: int


@dataclass(slots=True)
class XaPrepareRecord:
    """XA_PREPARE_LOG_EVENT: ends the events of an XA transaction. `one_phase`: it is `XA COMMIT
    ... ONE PHASE` (MySQL logs that with this event too), so the transaction commits here."""

    pos: int
    one_phase: bool = False


@dataclass(slots=True)
class HeartbeatRecord:
    file: str | None
    pos: int


@dataclass(slots=True)
class RotateRecord:
    file: str
    pos: int


@dataclass(slots=True)
class RowsRecord:
    """A rows event, not decoded yet: `rows()` decodes it (only worth it for wanted tables)."""

    table_map: TableMap
    op: str  # 'c', 'u' or 'd'
    body: bytes  # the rows part: column count, bitmaps, row images
    pos: int  # end of the event in the binlog (its header's log_pos)
    server_id: int
    timestamp: int
    event_type: int = WRITE_ROWS  # for error messages, with `file`
    file: str | None = None
    error: str | None = None  # why its rows cannot be read (raised by `rows()`, for a wanted table only)
    json_diffs: bool = False  # a PARTIAL_UPDATE_ROWS event: JSON after values may be diffs

    @property
    def db(self) -> str:
        return self.table_map.db

    @property
    def table(self) -> str:
        return self.table_map.table

    def rows(self, semantics: dict[str, SemanticType] | None = None) -> "DecodedRows":
        return decode_rows(self, semantics or {})


@dataclass(slots=True)
class DecodedRows:
    """Row images: for 'c' the inserted rows, for 'd' the deleted ones, for 'u' (before, after)
    pairs. `partial`: some columns were not logged (binlog_row_image MINIMAL or NOBLOB)."""

    images: list
    partial: bool


@dataclass(slots=True)
class PayloadRecord:
    """A MySQL compressed transaction (TRANSACTION_PAYLOAD): the records of its events, in order."""

    records: list


Record = (GtidRecord | QueryRecord | XidRecord | XaPrepareRecord | HeartbeatRecord | RotateRecord | RowsRecord
          | PayloadRecord)


def _missing(present: bytes, required: int) -> bool:
    """Some column of `required` (`TableMap.required`) is not in the `present` bitmap of a rows
    event (whose last byte's unused bits MySQL leaves set)."""
    return int.from_bytes(present, "little") & required != required


def position(file: str | None, pos: int) -> str:
    return f"{file or '(file unknown)'}:{pos}"


def _rows_failure(record: RowsRecord, problem: str, remedy: str = _UNDECODABLE_REMEDY) -> UndecodableEvent:
    table_map = record.table_map
    return UndecodableEvent(
        f"{problem} ({event_name(record.event_type)} event of {table_map.db}.{table_map.table} ending at "
        f"{position(record.file, record.pos)}). {remedy}"
    )


# What bytes that do not decode raise, whatever reads them (ValueError covers BinlogFormatError,
# JsonDecodeError and UnicodeDecodeError; LookupError IndexError and KeyError).
_UNDECODED_ROWS = (ValueError, LookupError, struct.error, ArithmeticError, TypeError)


def decode_rows(record: RowsRecord, semantics: dict[str, SemanticType]) -> DecodedRows:
    """The row images of `record`. `semantics`: what the schema adds to the map, by column name
    (see `dblog.mysql.binlog.rows.SemanticType`); readers are compiled with the first semantics given
    for a set of present columns, so clear `table_map.readers` when they change.

    Whatever does not decode raises one `UndecodableEvent` naming the table, the column (found
    again column by column: the compiled readers do not say), the event and its position."""
    table_map, body = record.table_map, record.body
    table = f"{table_map.db}.{table_map.table}"
    if table_map.error is not None:
        raise _rows_failure(record, f"the table map of {table} does not decode: {table_map.error}; "
                                    "its rows cannot be read")
    if record.error is not None:
        raise _rows_failure(record, f"a rows event of {table} does not decode: {record.error}")
    readers: tuple[RowReader, ...] = ()
    rows_start = 0
    try:
        count, pos = read_lenenc(body, 0)
        if count != len(table_map.columns):
            raise _rows_failure(record, f"a rows event of {table} has {count} columns, its table map "
                                        f"{len(table_map.columns)}: the binlog is damaged")
        width = (count + 7) // 8
        present = body[pos : pos + width]
        pos += width
        present_after = None
        if record.op == "u":
            present_after = body[pos : pos + width]
            pos += width
        if pos > len(body):
            raise IndexError("the event ends inside its column bitmaps")
        # Partial: a column the table really has is not logged (binlog_row_image MINIMAL or
        # NOBLOB). MySQL never logs a functional index's hidden column.
        required = table_map.required
        partial = _missing(present, required) or (present_after is not None and _missing(present_after, required))
        if not table_map.has_names:
            raise _rows_failure(record, f"the binlog has no column names for {table}",
                                "The server must run with binlog_row_metadata=FULL")
        try:
            before = _reader(table_map, present, semantics)
            after = _reader(table_map, present_after, semantics) if present_after is not None else before
        except BinlogFormatError as error:  # a column type dblog cannot decode
            raise _rows_failure(record, str(error)) from error
        readers = (before, after) if record.op == "u" else (before,)
        rows_start = pos
        images: list = []
        end = len(body)
        if record.json_diffs:
            images, complete, pos = _json_diff_images(record, semantics, pos, present, present_after)
            partial = partial or not complete
        elif record.op == "u":
            read_before, read_after = before.read, after.read
            while pos < end:
                old, pos = read_before(body, pos)
                new, pos = read_after(body, pos)
                images.append((old, new))
        else:
            read = before.read
            while pos < end:
                row, pos = read(body, pos)
                images.append(row)
        if pos != end:
            raise IndexError(f"its rows end {pos - end} bytes past its length")
    except UndecodableEvent:
        raise
    except JsonDiffRejected as error:
        raise _rows_failure(
            record, f"a partial JSON update of {table} does not apply to the row's before value ({error}), so its "
                    "after value cannot be known exactly",
            "Remedy: SET GLOBAL binlog_row_value_options = '' (and in the server's configuration; a session can "
            f"set it too), then snapshot {table}") from error
    except _UNDECODED_ROWS as error:
        # (a partial update's images hold value options and diffs the column readers do not read)
        failing = _failing_column(body, rows_start, readers) if readers and not record.json_diffs else None
        if failing is not None:
            column, reason = failing
            problem = f"column {column} of {table} does not decode with its table map ({reason})"
        else:
            problem = f"a rows event of {table} does not decode with its table map ({error})"
        raise _rows_failure(record, problem + ": the binlog is damaged or its table map does not describe it") \
            from error
    return DecodedRows(images, partial)


def _failing_column(body: bytes, pos: int, readers: tuple[RowReader, ...]) -> tuple[str, str] | None:
    """The first column, row by row from `pos`, that does not read (`RowReader.failing_column`)."""
    end = len(body)
    try:
        while pos < end:
            for reader in readers:  # an update: before and after image in turn
                failing = reader.failing_column(body, pos)
                if failing is not None:
                    return failing
                _, pos = reader.read(body, pos)
    except _UNDECODED_ROWS:
        pass
    return None


def _json_diff_images(record: RowsRecord, semantics: dict[str, SemanticType], pos: int, present: bytes,
                      present_after: bytes) -> tuple[list, bool, int]:
    """(before, after) pairs of a PARTIAL_UPDATE_ROWS event, whether every after image is whole, and the
    position after them. Each after image starts with value_options (a length-encoded integer; the one bit
    defined is PARTIAL_JSON_UPDATES = 1) and, when that bit is set, one bit per JSON column of the table,
    in the image or not, set when the column holds a diff list instead of its value; then the NULL bits and
    values as in any row image (sql/rpl_record.cc, pack_row and unpack_row; sql/rpl_record.h). JSON columns
    are read raw and finished by `finish_json_columns`."""
    table_map, body = record.table_map, record.body
    read_before = _reader(table_map, present, semantics, raw_json=True).read
    read_after = _reader(table_map, present_after, semantics, raw_json=True).read
    json_columns = [column.name or f"@{column.index + 1}" for column in table_map.columns if column.type == JSON]
    flag_bytes = (len(json_columns) + 7) // 8
    images: list = []
    complete = True
    while pos < len(body):
        before, pos = read_before(body, pos)
        options, pos = read_lenenc(body, pos)
        if options > 1:
            raise JsonDiffError(f"value_options {options} is not 0 or PARTIAL_JSON_UPDATES (1)")
        diffs: set[str] = set()
        if options:
            flags = bits(body[pos : pos + flag_bytes], len(json_columns))
            diffs = {name for name, flag in zip(json_columns, flags) if flag}
            pos += flag_bytes
        after, pos = read_after(body, pos)
        if finish_json_columns(before, after, json_columns, diffs):
            complete = False
        images.append((before, after))
    return images, complete, pos


def _reader(table_map: TableMap, present: bytes, semantics: dict[str, SemanticType],
            raw_json: bool = False) -> RowReader:
    """The compiled reader of `table_map` for this set of present columns (JSON columns as bytes
    with `raw_json`)."""
    key = (present, "raw json") if raw_json else present
    cached = table_map.readers.get(key)
    if cached is not None:
        return cached
    reader = RowReader(table_map, bits(present, len(table_map.columns)), semantics, raw_json)
    table_map.readers[key] = reader
    return reader


# --- the decoder ----------------------------------------------------------------------------------


def _decompress_mariadb(data: bytes, what: str) -> bytes:
    """MariaDB's compressed event payload: one header byte (0x80 | algorithm << 4 | n), the
    uncompressed length in n big-endian bytes, then a zlib stream."""
    if not data:
        raise BinlogDecodeError(f"an empty compressed {what}")
    header = data[0]
    algorithm, length_bytes = (header >> 4) & 0x07, header & 0x07
    if algorithm != 0 or not 1 <= length_bytes <= 4:
        raise BinlogDecodeError(f"a compressed {what} uses algorithm {algorithm}, which dblog does not know")
    expected = int.from_bytes(data[1 : 1 + length_bytes], "big")
    try:
        plain = zlib.decompress(data[1 + length_bytes :])
    except zlib.error as error:
        raise BinlogDecodeError(f"a compressed {what} does not decompress ({error})") from error
    if len(plain) != expected:
        raise BinlogDecodeError(f"a compressed {what} decompressed to {len(plain)} bytes, not {expected}")
    return plain


def _mariadb_xid(packet: bytes, pos: int) -> str:
    """The XID a MariaDB GTID event carries (formatID, gtrid and bqual lengths, their bytes),
    spelled as the server spells it in XA END / XA COMMIT: X'gtrid',X'bqual',formatID."""
    format_id, gtrid_length, bqual_length = struct.unpack_from("<iBB", packet, pos)
    data = packet[pos + 6 : pos + 6 + gtrid_length + bqual_length]
    return f"X'{data[:gtrid_length].hex()}',X'{data[gtrid_length:].hex()}',{format_id}"


def _varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned integer in MySQL's serialization format (libs/mysql/serialization/
    variable_length_integers.h, read_varlen_bytes_unsigned): (value, position after it). The
    first byte's trailing one bits, plus one, are the integer's byte count; the value's low bits
    follow them in that byte, the rest is in the next bytes, little-endian (9 bytes: all 64 bits
    in the last 8)."""
    if pos >= end:
        raise ValueError("it ends too early")
    first = data[pos]
    zeros = first ^ 0xFF
    size = (zeros & -zeros).bit_length() if zeros else 9
    if pos + size > end:
        raise ValueError("it ends inside a variable-length integer")
    if size == 1:
        return first >> 1, pos + 1
    rest = int.from_bytes(data[pos + 1 : pos + size], "little")
    return (rest if size == 9 else first >> size | rest << (8 - size)), pos + size


# Gtid_event::define_fields (libs/mysql/binlog/event/control_events.h): fields 0 gtid_flags, 1 the
# UUID, 2 the GNO, 3 the tag, then 4..11 (logical clocks, commit timestamps, transaction length,
# server versions, commit group ticket) that dblog does not need.
_GTID_EVENT_FIELDS = 12
_SERIALIZATION_FORMAT_VERSION = 1  # libs/mysql/serialization/serialization_format_version.h


def _tagged_gtid(data: bytes, start: int, end: int) -> Gtid:
    """The GTID of a GTID_TAGGED_LOG_EVENT (MySQL 8.3+), which holds Gtid_event's fields in MySQL's
    serialization format instead of GTID_LOG_EVENT's fixed layout (Gtid_event::Gtid_event and
    read_gtid_tagged_log_event, libs/mysql/binlog/event/control_events.cpp; the format:
    libs/mysql/serialization/readme.md, Serializer::operator>> and Serializer_default's
    decode_serializable_metadata). The body is one message: its id (the format version), its
    size in bytes from its first byte, the last field id that readers must not skip plus one
    (0: none), then each field as its id and its value; integers are variable-length
    (`_varlen`): the flags, the UUID as 16 one-byte integers, the GNO (signed: n << 1), the tag
    as its length and its characters. ValueError when the body is not that."""
    version, pos = _varlen(data, start, end)
    if version != _SERIALIZATION_FORMAT_VERSION:
        raise ValueError(f"its serialization format is version {version}; dblog reads version 1 (MySQL 8.3 to 9.x)")
    size, pos = _varlen(data, pos, end)
    if size > end - start:
        raise ValueError(f"it says it has {size} bytes but its body has {end - start}")
    end = start + size
    must_read, pos = _varlen(data, pos, end)
    if must_read > _GTID_EVENT_FIELDS:
        raise ValueError(f"it holds a field ({must_read - 1}) of a newer MySQL that readers must not skip")
    for field_id in range(4):  # written always, in order (no encode predicate)
        found, pos = _varlen(data, pos, end)
        if found != field_id:
            raise ValueError(f"field {field_id} is missing (field {found} instead)")
        if field_id == 1:
            sid = bytearray(16)
            for index in range(16):
                sid[index], pos = _varlen(data, pos, end)
        elif field_id == 3:
            length, pos = _varlen(data, pos, end)
            if pos + length > end:
                raise ValueError("it ends inside the tag")
            tag = data[pos : pos + length].decode("ascii")
            pos += length
        else:
            value, pos = _varlen(data, pos, end)
            if field_id == 2:
                gno = value >> 1 ^ -(value & 1)
    return Gtid.mysql(str(UUID(bytes=bytes(sid))), gno, tag)


class BinlogDecoder:
    """Decodes one event packet at a time; see the module docstring."""

    def __init__(self, flavor: str = "mariadb") -> None:
        self.mariadb = flavor == "mariadb"
        self.file: str | None = None
        self.checksum = False  # events end with a CRC32 (from the last FORMAT_DESCRIPTION)
        self.post_header: dict[int, int] = {}
        self.server_version = ""
        self.table_maps: dict[int, TableMap] = {}
        self._map_bytes: dict[int, bytes] = {}
        self._payload_pos = 0  # inside a TRANSACTION_PAYLOAD: its position (inner events have none)
        self.log_pos = 0  # where the last event read ends in `file`

    def decode(self, packet: bytes) -> Record | None:
        try:
            timestamp, event_type, server_id, size, log_pos, flags = _HEADER.unpack_from(packet, 0)
        except struct.error as error:
            raise BinlogDecodeError(f"a binlog event of {len(packet)} bytes is shorter than its header") from error
        if size != len(packet):
            raise BinlogDecodeError(f"a binlog event says it has {size} bytes but {len(packet)} arrived")
        event = _EVENT_TYPE_OF.get(event_type, _UNKNOWN_EVENT)
        if self.checksum and event.checksummed:
            body_end = size - 4
            if zlib.crc32(packet[:body_end]) != int.from_bytes(packet[body_end:], "little"):
                raise BinlogDecodeError(
                    f"binlog event of type {event_type} ending at {self.file}:{log_pos} fails its CRC32 checksum: "
                    "the binlog or the connection corrupted it"
                )
        else:
            body_end = size
        if log_pos:  # (0: an artificial event, or one inside a TRANSACTION_PAYLOAD)
            self.log_pos = log_pos
        try:
            return event.decode(self, packet, HEADER_LENGTH, body_end, event_type, timestamp, server_id, log_pos, flags)
        except BinlogDecodeError:
            raise
        except _UNDECODED_ROWS as error:  # a field past the end, a bad length, a bad value
            raise self._undecodable(event_type, log_pos, error) from error

    def _where(self, log_pos: int) -> str:
        return position(self.file, log_pos or self._payload_pos)

    def _undecodable(self, event_type: int, log_pos: int, error: Exception) -> UndecodableEvent:
        return UndecodableEvent(
            f"the {event_name(event_type)} event ending at {self._where(log_pos)} does not decode "
            f"({type(error).__name__}: {error}): dblog stops rather than skip it. Report this message with "
            "the event (mysqlbinlog -vv around that position) to dblog's maintainers"
        )

    # --- the event types' decoders (`EVENT_TYPES` below says which decodes which) ----------------
    # Each takes the packet, where its body starts and ends (without the checksum), the header's
    # fields, and returns the event's record, or None when it changes nothing for dblog.

    def _nothing(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                 log_pos: int, flags: int) -> None:
        return None

    def _unknown(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                 log_pos: int, flags: int) -> None:
        if flags & LOG_EVENT_IGNORABLE_F:
            return None
        raise BinlogDecodeError(
            f"unknown binlog event type {event_type} at {self.file}:{log_pos} (server {self.server_version}): "
            "dblog cannot tell whether it changes data, so it stops rather than skip it"
        )

    def _incident(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                  log_pos: int, flags: int) -> None:
        raise BinlogDecodeError(
            f"the binlog has an INCIDENT event at {self.file}:{log_pos}: the server lost changes it could not "
            "log (replicas stop here too). Snapshot the affected tables again after checking the server's log"
        )

    def _format_description(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                            server_id: int, log_pos: int, flags: int) -> None:
        body = packet[HEADER_LENGTH:]
        self.server_version = body[2:52].split(b"\0", 1)[0].decode("ascii", "replace")
        header_length = body[56]
        if header_length != HEADER_LENGTH:
            raise BinlogDecodeError(f"binlog events have {header_length}-byte headers; dblog reads 19-byte ones")
        # The checksum algorithm byte follows the post-header lengths, then 4 bytes: the event's
        # own CRC32, or nothing meaningful with checksums off (MySQL >= 5.6.1 and MariaDB always
        # write both).
        algorithm = body[-5]
        if algorithm not in (CHECKSUM_OFF, CHECKSUM_CRC32):
            raise BinlogDecodeError(f"binlog checksum algorithm {algorithm} is not supported (CRC32 or NONE)")
        self.checksum = algorithm == CHECKSUM_CRC32
        # Its CRC32 is of the event with LOG_EVENT_BINLOG_IN_USE_F clear. The server sets that
        # flag in a binlog file's FORMAT_DESCRIPTION while it writes the file (a running or
        # crashed server's file has it) and computes the CRC32 without it (sql/log_event.cc,
        # Log_event::write_header: "recording checksum of FD event computed with dropped possibly
        # active LOG_EVENT_BINLOG_IN_USE_F flag"), so that closing the file can clear the flag in
        # place (sql/binlog.cc); readers check it so too (libs/mysql/binlog/event/binlog_event.cpp,
        # Log_event_footer::event_checksum_test; MariaDB alike). Dump threads send it cleared.
        signed_flags = packet[_FLAGS_OFFSET] & ~_BINLOG_IN_USE
        signed = packet[:_FLAGS_OFFSET] + bytes([signed_flags]) + packet[_FLAGS_OFFSET + 1 : -4]
        if self.checksum and zlib.crc32(signed) != int.from_bytes(packet[-4:], "little"):
            raise BinlogDecodeError("the binlog's format description event fails its CRC32 checksum")
        lengths = body[57:-5]
        self.post_header = {code: length for code, length in enumerate(lengths, start=1)}
        self.mariadb = flavor_of_version(self.server_version) == "mariadb"
        return None

    def _rotate(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                log_pos: int, flags: int) -> RotateRecord:
        position = int.from_bytes(packet[start : start + 8], "little")
        self.file = packet[start + 8 : end].decode("utf-8", "replace")
        return RotateRecord(self.file, position)

    def _mariadb_gtid(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                      log_pos: int, flags: int) -> GtidRecord:
        seq, domain, gtid_flags = struct.unpack_from("<QIB", packet, start)
        record = GtidRecord(Gtid.mariadb(domain, server_id, seq), bool(gtid_flags & FL_STANDALONE), server_id,
                            timestamp, log_pos, start=log_pos - len(packet))
        if gtid_flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
            record.xa = "prepare" if gtid_flags & FL_PREPARED_XA else "complete"
            record.xid = _mariadb_xid(packet, start + 13 + (8 if gtid_flags & FL_GROUP_COMMIT_ID else 0))
        return record

    def _mysql_gtid(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                    log_pos: int, flags: int) -> GtidRecord:
        sid = packet[start + 1 : start + 17].hex()
        gno = int.from_bytes(packet[start + 17 : start + 25], "little")
        uuid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}"
        return GtidRecord(Gtid.mysql(uuid, gno), True, server_id, timestamp, log_pos, start=log_pos - len(packet))

    def _mysql_anonymous_gtid(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                              server_id: int, log_pos: int, flags: int) -> GtidRecord:
        """ANONYMOUS_GTID_LOG_EVENT: Gtid_event's layout (flags, a 16-byte SID, an 8-byte GNO, the
        logical clock...), written before each transaction a server logs without a GTID, with a
        GNO of 0, which MySQL's own reader checks (libs/mysql/binlog/event/control_events.cpp,
        Gtid_event::Gtid_event: "Assume this is an ANONYMOUS_GTID_LOG_EVENT ... if gno != 0:
        Invalid GNO")."""
        gno = int.from_bytes(packet[start + 17 : start + 25], "little")
        if end - start < 25 or gno != 0:
            raise BinlogDecodeError(f"the ANONYMOUS_GTID event ending at {self.file}:{log_pos} has GNO {gno}, not 0 "
                                    f"(or is {end - start} bytes short): it is no anonymous transaction's start")
        return GtidRecord(None, True, server_id, timestamp, log_pos, start=log_pos - len(packet))

    def _mysql_tagged_gtid(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                           server_id: int, log_pos: int, flags: int) -> GtidRecord:
        try:
            gtid = _tagged_gtid(packet, start, end)
        except ValueError as error:  # also a GtidError (a GNO or tag out of range), a tag not ASCII
            raise BinlogDecodeError(
                f"the tagged GTID event (type {GTID_TAGGED}) ending at {self.file}:{log_pos} cannot be read: {error}"
            ) from error
        return GtidRecord(gtid, True, server_id, timestamp, log_pos, start=log_pos - len(packet))

    def _xid(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
             log_pos: int, flags: int) -> XidRecord:
        return XidRecord(log_pos)

    def _xa_prepare(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                    log_pos: int, flags: int) -> XaPrepareRecord:
        return XaPrepareRecord(log_pos, bool(packet[start]))

    def _heartbeat(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                   log_pos: int, flags: int) -> HeartbeatRecord:
        name = packet[start:end].decode("utf-8", "replace")
        return HeartbeatRecord(name or self.file, log_pos)

    def _heartbeat_v2(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                      log_pos: int, flags: int) -> HeartbeatRecord:
        name, position, pos = self.file, log_pos, start
        while pos < end:
            kind = packet[pos]
            if kind == 0:  # the end mark: nothing follows it (not even a length)
                break
            length, pos = read_lenenc(packet, pos + 1)
            if kind == 1:
                name = packet[pos : pos + length].decode("utf-8", "replace")
            elif kind == 2:
                position, _ = read_lenenc(packet, pos)
            pos += length
        return HeartbeatRecord(name, position)

    def _query(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
               log_pos: int, flags: int) -> QueryRecord:
        db, text = self._query_text(packet, start, end)
        return QueryRecord(db, text.decode("utf-8", "replace"), log_pos)

    def _compressed_query(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                          server_id: int, log_pos: int, flags: int) -> QueryRecord:
        db, text = self._query_text(packet, start, end)
        return QueryRecord(db, _decompress_mariadb(text, "query event").decode("utf-8", "replace"), log_pos)

    def _query_text(self, packet: bytes, start: int, end: int) -> tuple[str, bytes]:
        """A query event's database and statement bytes."""
        post = self.post_header.get(QUERY, 13)
        db_length = packet[start + 8]
        status_length = int.from_bytes(packet[start + 11 : start + 13], "little")
        pos = start + post + status_length
        db = packet[pos : pos + db_length].decode("utf-8", "replace")
        pos += db_length + 1
        return db, packet[pos:end]

    # --- table maps and rows --------------------------------------------------------------------

    def _table_map(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
                   log_pos: int, flags: int) -> None:
        body = packet[start:end]
        post = self.post_header.get(TABLE_MAP, 8)
        id_size = 4 if post == 6 else 6
        table_id = int.from_bytes(body[:id_size], "little")
        if self._map_bytes.get(table_id) == body:
            return None  # the same map again (one per statement): keep its compiled readers
        table_map = parse_table_map(body, post, self.mariadb)
        if table_map.error is not None:  # raised if rows of a wanted table need it
            table_map.error += f" (TABLE_MAP event ending at {self._where(log_pos)})"
        self.table_maps[table_id] = table_map
        self._map_bytes[table_id] = body
        return None

    def _rows(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int, server_id: int,
              log_pos: int, flags: int) -> RowsRecord:
        op, v2, compressed = _ROWS_LAYOUTS[event_type]
        post = 6 if self.post_header.get(WRITE_ROWS_V1, 8) == 6 else 8
        id_size = 4 if post == 6 else 6
        table_id = int.from_bytes(packet[start : start + id_size], "little")
        pos = start + post
        if v2:
            extra = int.from_bytes(packet[pos : pos + 2], "little")
            pos += max(extra, 2)
        table_map = self.table_maps.get(table_id)
        if table_map is None:
            raise BinlogDecodeError(
                f"a rows event at {self.file}:{log_pos} refers to table id {table_id}, whose table map was not "
                "sent: the binlog is damaged or was read from the middle of a transaction"
            )
        body = packet[pos:end]
        error = None
        if compressed:
            # Only the row images are compressed: the column count and the present-columns
            # bitmap(s) before them are not.
            try:
                count, head = read_lenenc(body, 0)
                head += (count + 7) // 8 * (2 if op == "u" else 1)
                body = body[:head] + _decompress_mariadb(body[head:], "rows event")
            except (BinlogDecodeError, IndexError) as failure:  # raised if the table is wanted
                body, error = b"", str(failure)
        return RowsRecord(table_map, op, body, log_pos, server_id, timestamp, event_type, self.file, error)

    def _partial_update_rows(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                             server_id: int, log_pos: int, flags: int) -> RowsRecord:
        """An UPDATE_ROWS event (v2 layout) whose JSON after values may be diffs."""
        record = self._rows(packet, start, end, event_type, timestamp, server_id, log_pos, flags)
        record.json_diffs = True
        return record

    # --- MySQL compressed transactions ------------------------------------------------------------

    def _transaction_payload(self, packet: bytes, start: int, end: int, event_type: int, timestamp: int,
                             server_id: int, log_pos: int, flags: int) -> PayloadRecord:
        """MySQL `binlog_transaction_compression`: one event holding the whole transaction's
        events, zstd-compressed. The inner events carry no checksums."""
        size = compression = None
        uncompressed_size = None
        pos = start
        while pos < end:
            field, pos = read_lenenc(packet, pos)
            if field == 0:
                break
            length, pos = read_lenenc(packet, pos)
            value, _ = read_lenenc(packet, pos)
            if field == 1:
                size = value
            elif field == 2:
                compression = value
            elif field == 3:
                uncompressed_size = value
            pos += length
        payload = packet[pos:end]
        if size is not None and size != len(payload):
            raise BinlogDecodeError(f"a transaction payload says {size} bytes but holds {len(payload)}")
        if compression == 0:
            try:
                import zstandard
            except ImportError as error:  # a dependency of dblog: only a broken install lacks it
                raise BinlogDecodeError("the zstandard package is needed for compressed MySQL transactions") from error
            try:
                payload = zstandard.ZstdDecompressor().decompress(
                    payload, max_output_size=uncompressed_size or 0)
            except zstandard.ZstdError as error:
                raise BinlogDecodeError(f"a compressed transaction at {log_pos} does not decompress ({error})") from error
        elif compression not in (None, 255):
            raise BinlogDecodeError(f"a transaction payload uses compression type {compression}, unknown to dblog")
        records: list[Record] = []
        pos = 0
        checksum, self.checksum = self.checksum, False
        self._payload_pos = log_pos
        try:
            while pos < len(payload):
                inner_size = int.from_bytes(payload[pos + 9 : pos + 13], "little")
                inner = payload[pos : pos + inner_size]
                pos += inner_size
                record = self.decode(inner)
                if isinstance(record, PayloadRecord):  # not produced by servers; refuse rather than guess
                    raise BinlogDecodeError("a transaction payload holds another one")
                if record is not None:
                    # Inner events carry the payload's end as their position in the binlog.
                    _set_pos(record, log_pos)
                    records.append(record)
        finally:
            self.checksum = checksum
            self._payload_pos = 0
        return PayloadRecord(records)


def _set_pos(record: Record, log_pos: int) -> None:
    if hasattr(record, "pos") and not isinstance(record, RotateRecord):
        record.pos = log_pos


# --- the event table --------------------------------------------------------------------------------

EventDecoder = Callable[[BinlogDecoder, bytes, int, int, int, int, int, int, int], "Record | None"]


@dataclass(frozen=True, slots=True)
class EventType:
    """One kind of binlog event, everything dblog does with it in one place: its type codes (with
    their names as mysqlbinlog prints them, for messages), the `BinlogDecoder` method that decodes
    it, the record that yields (None: it yields none), and what the binlog source does with that
    record: the name of its `BinlogSource` method (named, not imported: the source sits above the
    decoder). `checksummed`: its CRC32 is checked before it is decoded (FORMAT_DESCRIPTION checks
    its own, computed with a header flag cleared). Adding an event type is one entry here, its
    decoder and record above, and its handler in the source; `tests/ops/test_binlog_event_table.py`
    checks that every code has one entry and every record one handler."""

    codes: dict[int, str]
    decode: EventDecoder
    record: type | None = None
    handler: str | None = None
    checksummed: bool = True


EVENT_TYPES: tuple[EventType, ...] = (
    EventType({FORMAT_DESCRIPTION: "FORMAT_DESCRIPTION"}, BinlogDecoder._format_description, checksummed=False),
    EventType({ROTATE: "ROTATE"}, BinlogDecoder._rotate, RotateRecord, "_rotate"),
    EventType({MARIADB_GTID: "GTID (MariaDB)"}, BinlogDecoder._mariadb_gtid, GtidRecord, "_begin"),
    EventType({GTID: "GTID"}, BinlogDecoder._mysql_gtid, GtidRecord, "_begin"),
    EventType({ANONYMOUS_GTID: "ANONYMOUS_GTID"}, BinlogDecoder._mysql_anonymous_gtid, GtidRecord, "_begin"),
    EventType({GTID_TAGGED: "GTID_TAGGED"}, BinlogDecoder._mysql_tagged_gtid, GtidRecord, "_begin"),
    EventType({QUERY: "QUERY"}, BinlogDecoder._query, QueryRecord, "_query"),
    EventType({QUERY_COMPRESSED: "QUERY_COMPRESSED"}, BinlogDecoder._compressed_query, QueryRecord, "_query"),
    EventType({TABLE_MAP: "TABLE_MAP"}, BinlogDecoder._table_map),  # kept by the decoder for the rows after it
    EventType({
        WRITE_ROWS_V1: "WRITE_ROWS_V1", UPDATE_ROWS_V1: "UPDATE_ROWS_V1", DELETE_ROWS_V1: "DELETE_ROWS_V1",
        WRITE_ROWS: "WRITE_ROWS", UPDATE_ROWS: "UPDATE_ROWS", DELETE_ROWS: "DELETE_ROWS",
        WRITE_ROWS_COMPRESSED_V1: "WRITE_ROWS_COMPRESSED_V1", UPDATE_ROWS_COMPRESSED_V1: "UPDATE_ROWS_COMPRESSED_V1",
        DELETE_ROWS_COMPRESSED_V1: "DELETE_ROWS_COMPRESSED_V1", WRITE_ROWS_COMPRESSED: "WRITE_ROWS_COMPRESSED",
        UPDATE_ROWS_COMPRESSED: "UPDATE_ROWS_COMPRESSED", DELETE_ROWS_COMPRESSED: "DELETE_ROWS_COMPRESSED",
    }, BinlogDecoder._rows, RowsRecord, "_rows"),
    EventType({PARTIAL_UPDATE_ROWS: "PARTIAL_UPDATE_ROWS"}, BinlogDecoder._partial_update_rows, RowsRecord, "_rows"),
    EventType({XID: "XID"}, BinlogDecoder._xid, XidRecord, "_commit"),
    EventType({XA_PREPARE: "XA_PREPARE"}, BinlogDecoder._xa_prepare, XaPrepareRecord, "_xa_prepare"),
    EventType({HEARTBEAT: "HEARTBEAT"}, BinlogDecoder._heartbeat, HeartbeatRecord, "_heartbeat"),
    EventType({HEARTBEAT_V2: "HEARTBEAT_V2"}, BinlogDecoder._heartbeat_v2, HeartbeatRecord, "_heartbeat"),
    EventType({TRANSACTION_PAYLOAD: "TRANSACTION_PAYLOAD"}, BinlogDecoder._transaction_payload, PayloadRecord,
              "_payload"),
    # The server lost changes: refused.
    EventType({INCIDENT: "INCIDENT"}, BinlogDecoder._incident),
    # Nothing dblog uses with binlog_format=ROW: statement-based helpers inside a statement's own
    # transaction (which dblog sees as a query), file and GTID bookkeeping, comments.
    EventType({
        START_V3: "START_V3", STOP: "STOP", INTVAR: "INTVAR", RAND: "RAND", USER_VAR: "USER_VAR",
        BEGIN_LOAD_QUERY: "BEGIN_LOAD_QUERY", EXECUTE_LOAD_QUERY: "EXECUTE_LOAD_QUERY", APPEND_BLOCK: "APPEND_BLOCK",
        DELETE_FILE: "DELETE_FILE", IGNORABLE: "IGNORABLE", ROWS_QUERY: "ROWS_QUERY",
        PREVIOUS_GTIDS: "PREVIOUS_GTIDS", TRANSACTION_CONTEXT: "TRANSACTION_CONTEXT", VIEW_CHANGE: "VIEW_CHANGE",
        ANNOTATE_ROWS: "ANNOTATE_ROWS", BINLOG_CHECKPOINT: "BINLOG_CHECKPOINT", GTID_LIST: "GTID_LIST",
        START_ENCRYPTION: "START_ENCRYPTION",
    }, BinlogDecoder._nothing),
    # Pre-5.0 LOAD DATA and pre-GA rows events, which no server dblog reads writes: refused as an
    # unknown type is (unless flagged ignorable).
    EventType({
        LOAD: "LOAD", SLAVE: "SLAVE", CREATE_FILE: "CREATE_FILE", EXEC_LOAD: "EXEC_LOAD", NEW_LOAD: "NEW_LOAD",
        PRE_GA_WRITE_ROWS: "PRE_GA_WRITE_ROWS", PRE_GA_UPDATE_ROWS: "PRE_GA_UPDATE_ROWS",
        PRE_GA_DELETE_ROWS: "PRE_GA_DELETE_ROWS",
    }, BinlogDecoder._unknown),
)

# Any other type: refused unless flagged ignorable.
_UNKNOWN_EVENT = EventType({}, BinlogDecoder._unknown)
_EVENT_TYPE_OF: dict[int, EventType] = {code: event for event in EVENT_TYPES for code in event.codes}
_EVENT_NAMES: dict[int, str] = {code: name for event in EVENT_TYPES for code, name in event.codes.items()}


def record_handlers(handler_class: type) -> dict[type, Callable]:
    """What `handler_class` (the binlog source) does with each record, by record class: the
    methods `EVENT_TYPES` names. Event types yielding the same record must name the same one."""
    handlers: dict[type, Callable] = {}
    for event in EVENT_TYPES:
        if event.record is None:
            continue
        handler = getattr(handler_class, event.handler)
        if handlers.setdefault(event.record, handler) is not handler:
            raise TypeError(f"{event.record.__name__} is handled by two methods of {handler_class.__name__}")
    return handlers
