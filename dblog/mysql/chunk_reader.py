"""Keyset chunk reads: the SELECT half of the watermark algorithm (docs/algorithm.md, "The loop",
step 3).

A chunk is `key > last_key AND key <= max_key ORDER BY key LIMIT n`. Keyset paging (never
OFFSET) keeps every chunk an index range scan, and it stays correct while the table changes
under it: a row is found by its key, not by its position.

Composite keys are compared in the expanded form `(k1 > a) OR (k1 = a AND k2 > b) ...` rather
than with a row constructor `(k1, k2) > (a, b)`: MySQL and older MariaDB do not always turn a
row constructor into an index range, and the expanded form is correct on every version.

Chunk rows are parsed straight from the result's packets into normalized row dicts
(`RowsCursor`, `dblog.mysql.values.wire_normalizer`): pymysql's generic row parsing and its
conversion to datetime/Decimal objects, which dblog would only format back into text, cost more
than the rest of the snapshot path together. The packet framing, result header, column
definitions, EOF and error packets stay pymysql's.

Every SELECT runs on a `ServerSession` (autocommit, time_zone '+00:00'): each chunk sees the
latest committed data, at least everything the binlog reader has passed once
`ServerSession.wait_until_visible` returned (dblog.core.visibility).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Callable

import pymysql
import pymysql.connections
import pymysql.cursors
from pymysql.constants import COMMAND

from dblog.core.events import Key, TableId
from dblog.core.sql import quote_identifier
from dblog.mysql.schema import TableSchema
from dblog.mysql.server_session import ServerSession
from dblog.mysql.values import wire_normalizer

log = logging.getLogger("dblog")

__all__ = ["ChunkRequest", "ChunkQuery", "ChunkReader", "RowsCursor", "row_parser", "whole_table_query"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _sql_text(text: str) -> str:
    # The SQL is always executed with a parameter tuple, so pymysql %-formats it: a literal
    # percent sign (in a LIKE pattern, or a column name) must be doubled.
    return text.replace("%", "%%")


def _select_expression(schema: TableSchema, name: str) -> str:
    quoted = quote_identifier(name)
    if schema.column(name).data_type == "float":
        # A FLOAT's text form has 6 significant digits; as a DOUBLE it is exact (dblog.mysql.values).
        return f"CAST({quoted} AS DOUBLE) AS {quoted}"
    return quoted


def _table_name(table: TableId) -> str:
    return f"{quote_identifier(table.db)}.{quote_identifier(table.table)}"


def _key_comparison(columns: list[str], values: tuple, last_operator: str, or_equal: bool) -> tuple[str, list]:
    """Expanded lexicographic comparison of the key with `values`.

    `last_operator` is '>' (key > values) or '<' (key < values); `or_equal` adds the
    all-columns-equal term (key <= values).
    """
    terms: list[str] = []
    params: list[Any] = []
    for depth in range(len(columns)):
        parts = [f"{columns[i]} = %s" for i in range(depth)] + [f"{columns[depth]} {last_operator} %s"]
        terms.append("(" + " AND ".join(parts) + ")")
        params.extend(values[: depth + 1])
    if or_equal:
        terms.append("(" + " AND ".join(f"{column} = %s" for column in columns) + ")")
        params.extend(values)
    return "(" + " OR ".join(terms) + ")", params


@dataclass(frozen=True)
class ChunkRequest:
    """One read of a window: rows with `after_key < key <= max_key` (among those matching
    `condition`, an already-validated SQL predicate), normalized, in key order, at most `limit`,
    and no more once those kept took `max_bytes` on the wire (None: no byte bound).

    `limit` and `max_bytes` are the whole window's: with `parallel_reads = N` the window holds N
    chunks, and `ParallelChunkReads` reads it in N consecutive parts of `part_limit` rows and
    `part_bytes` bytes on N connections; `ChunkReader` reads any request whole on its one."""

    schema: TableSchema
    after_key: Key | None
    max_key: Key | None
    limit: int
    condition: str | None = None
    max_bytes: int | None = None
    parallel_reads: int = 1
    source: str | None = None  # a SELECT read instead of the table (see ChunkQuery)

    @property
    def part_limit(self) -> int:
        """The rows of one of the `parallel_reads` parts (rounded up, at least 1)."""
        return max(1, -(-self.limit // self.parallel_reads))

    @property
    def part_bytes(self) -> int | None:
        return None if self.max_bytes is None else max(1, self.max_bytes // self.parallel_reads)

    def part(self, after_key: Key | None, max_key: Key | None, limit: int, max_bytes: int | None) -> ChunkRequest:
        """One part of this read, itself read whole."""
        return replace(self, after_key=after_key, max_key=max_key, limit=limit, max_bytes=max_bytes,
                       parallel_reads=1)

    def query(self) -> ChunkQuery:
        return ChunkQuery(self.schema, self.limit, self.after_key, self.max_key, self.condition, self.source)


@dataclass(frozen=True)
class ChunkQuery:
    """Builds one chunk SELECT. Pure: no connection needed, so it is unit-tested on its own.

    `after_key` and `max_key` are normalized keys (as in RowChange.key); `condition` is an
    already-validated SQL predicate (a snapshot's additional condition), ANDed in parentheses.
    `source`: a SELECT whose rows are read instead of the table's (snapshot.select_overrides),
    giving every column of the table by name (`dblog.runtime.select_overrides` checks and
    completes it): it becomes a derived table, and the key bounds, order and limit apply to it
    as to the table. The SQL uses pymysql's %s placeholders: execute it with the returned
    params, even when they are empty.
    """

    schema: TableSchema
    limit: int
    after_key: Key | None = None
    max_key: Key | None = None
    condition: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if not self.schema.key_columns:
            raise ValueError(f"{self.schema.table} has no primary key: a chunk needs a key to page by")
        if self.limit < 1:
            raise ValueError(f"chunk limit must be at least 1, got {self.limit}")

    def build(self) -> tuple[str, tuple]:
        schema = self.schema
        columns = ", ".join(_sql_text(_select_expression(schema, name)) for name in schema.column_names)
        return self._select(columns, f"LIMIT {int(self.limit)}")

    def boundary_query(self) -> tuple[str, tuple]:
        """The SELECT of the key of the `limit`-th row of this chunk (none if it has fewer):
        where the next of several consecutive chunks starts (parallel reads)."""
        columns = ", ".join(_sql_text(_select_expression(self.schema, name)) for name in self.schema.key_columns)
        return self._select(columns, f"LIMIT 1 OFFSET {int(self.limit) - 1}")

    def _select(self, columns: str, limit_clause: str) -> tuple[str, tuple]:
        schema = self.schema
        key_sql = [_sql_text(quote_identifier(name)) for name in schema.key_columns]
        where: list[str] = []
        params: list[Any] = []
        if self.after_key is not None:
            clause, values = _key_comparison(key_sql, schema.key_params(self.after_key), ">", or_equal=False)
            where.append(clause)
            params.extend(values)
        if self.max_key is not None:
            clause, values = _key_comparison(key_sql, schema.key_params(self.max_key), "<", or_equal=True)
            where.append(clause)
            params.extend(values)
        if self.condition:
            where.append(f"({_sql_text(self.condition)})")
        sql = f"SELECT {columns} FROM {_source_text(schema.table, self.source)}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {', '.join(key_sql)} {limit_clause}"
        return sql, tuple(params)

    @staticmethod
    def max_key_query(schema: TableSchema, condition: str | None = None,
                      source: str | None = None) -> tuple[str, tuple]:
        """The SELECT of the largest key (optionally among rows matching `condition`, of `source`)."""
        if not schema.key_columns:
            raise ValueError(f"{schema.table} has no primary key: a chunk needs a key to page by")
        key_sql = [_sql_text(quote_identifier(name)) for name in schema.key_columns]
        columns = ", ".join(_sql_text(_select_expression(schema, name)) for name in schema.key_columns)
        sql = f"SELECT {columns} FROM {_source_text(schema.table, source)}"
        if condition:
            sql += f" WHERE ({_sql_text(condition)})"
        sql += " ORDER BY " + ", ".join(f"{column} DESC" for column in key_sql) + " LIMIT 1"
        return sql, ()


def _source_text(table: TableId, source: str | None) -> str:
    """What a chunk reads FROM: the table, or `source` as a derived table."""
    if source is None:
        return _sql_text(_table_name(table))
    return f"({_sql_text(source)}) AS `dblog_source`"


def whole_table_query(schema: TableSchema, condition: str | None = None, source: str | None = None) -> str:
    """The SELECT of every row of a table (or of `source`) with the columns a chunk selects, in
    no order: the read of a table that has no key to page by (`ChunkReader.read_whole`)."""
    columns = ", ".join(_sql_text(_select_expression(schema, name)) for name in schema.column_names)
    sql = f"SELECT {columns} FROM {_source_text(schema.table, source)}"
    if condition:
        sql += f" WHERE ({_sql_text(condition)})"
    return sql


# --- rows straight from the text protocol ---------------------------------------------------------

RowParser = Callable[[bytes], Any]  # one row packet's payload -> a row


def row_parser(names: list[str], normalizers: list[Callable[[bytes], Any]]) -> RowParser:
    """A parser of one row packet into {name: normalized value}; `normalizers[i]` gets the
    bytes of column i (never NULL: that is None without a call)."""
    columns = list(zip(names, normalizers))

    def parse(data: bytes) -> dict[str, Any]:
        row: dict[str, Any] = {}
        position = 0
        for name, normalize in columns:
            length = data[position]
            if length < 251:
                end = position + 1 + length
                row[name] = normalize(data[position + 1:end])
                position = end
                continue
            if length == 251:
                row[name] = None
                position += 1
                continue
            if length == 252:
                length = data[position + 1] | data[position + 2] << 8
                position += 3
            elif length == 253:
                length = int.from_bytes(data[position + 1:position + 4], "little")
                position += 4
            else:
                length = int.from_bytes(data[position + 1:position + 9], "little")
                position += 9
            end = position + length
            row[name] = normalize(data[position:end])
            position = end
        return row

    return parse


class ByteBoundReached(Exception):
    """A read made with `abandon=True` passed its byte bound: its result was left unread, so
    its connection must be dropped."""


class _ParsedResult(pymysql.connections.MySQLResult):
    """A result whose rows are made by a parser built from its column definitions.

    With `max_bytes`, rows stop being kept once those kept took that many bytes on the wire:
    the rest is read to its end (the protocol has no other way to end a result) and dropped
    unparsed, so a chunk holds at most `max_bytes` plus one row. With `abandon`, the rest is not
    read: ByteBoundReached is raised instead (the caller drops the connection)."""

    def __init__(
        self, connection: pymysql.Connection, make_parser: Callable[[Any], RowParser], max_bytes: int | None = None,
        abandon: bool = False,
    ) -> None:
        super().__init__(connection)
        self._make_parser = make_parser
        self._max_bytes = max_bytes
        self._abandon = abandon
        self.bytes_read = 0  # wire bytes of the rows kept
        self.cut_short = False  # rows were dropped for the byte bound

    def _read_rowdata_packet(self) -> None:
        parse = self._make_parser(self)
        read_packet = self.connection._read_packet
        rows = []
        append = rows.append
        size, max_bytes = 0, self._max_bytes
        while True:
            packet = read_packet()
            data = packet._data
            if data[0] == 0xFE and len(data) < 9 and self._check_packet_is_eof(packet):
                self.connection = None  # as pymysql does: no cycle
                break
            if max_bytes is not None and size >= max_bytes:
                self.cut_short = True
                if self._abandon:
                    raise ByteBoundReached(f"past {max_bytes:,} bytes")
                continue
            size += len(data)
            append(parse(data))
        self.bytes_read = size
        self.affected_rows = len(rows)
        self.rows = rows


class RowsCursor(pymysql.cursors.Cursor):
    """A cursor for one kind of SELECT whose rows `make_parser(result)` parses from their packets
    (`result.converters` and `result.fields` describe the columns, as pymysql read them)."""

    def __init__(
        self, connection: pymysql.Connection, make_parser: Callable[[Any], RowParser], max_bytes: int | None = None,
        abandon: bool = False,
    ) -> None:
        super().__init__(connection)
        self._make_parser = make_parser
        self._max_bytes = max_bytes
        self._abandon = abandon  # past max_bytes: raise ByteBoundReached, the rest left unread
        self.result: _ParsedResult | None = None

    def _query(self, q: str | bytes) -> int:
        self._send(q)
        return self.receive()

    def send(self, sql: str, params: tuple) -> None:
        """Send the query only: the server runs it and its result waits on the connection (in
        the socket's buffers, then the server blocks) until `receive()`. Queries sent on
        several connections this way run on the server while this thread parses another's."""
        query = self.mogrify(sql, params)
        self._send(query)
        self._executed = query  # as execute() records it (fetchall checks it)

    def _send(self, q: str | bytes) -> None:
        conn = self._get_db()
        self._clear_result()
        if isinstance(q, str):
            q = q.encode(conn.encoding)
        # pymysql's Connection.query and _read_query_result, with the result class swapped
        conn._execute_command(COMMAND.COM_QUERY, q)
        conn._result = None

    def receive(self) -> int:
        conn = self._get_db()
        result = self.result = _ParsedResult(conn, self._make_parser, self._max_bytes, self._abandon)
        result.read()
        conn._result = result
        if result.server_status is not None:
            conn.server_status = result.server_status
        conn._affected_rows = result.affected_rows
        self._do_get_result()
        return self.rowcount


def _normalized_rows(schema: TableSchema, names: list[str]) -> Callable[[Any], RowParser]:
    """Rows of a SELECT of `names` (columns of `schema`, as ChunkQuery selects them) as
    normalized dicts."""
    columns = [schema.column(name) for name in names]

    def make_parser(result: Any) -> RowParser:
        if len(result.converters) != len(columns):
            raise pymysql.err.ProgrammingError(
                f"expected {len(columns)} columns of {schema.table}, the server sent {len(result.converters)}")
        return row_parser(names, [wire_normalizer(column, encoding, converter)
                                  for column, (encoding, converter) in zip(columns, result.converters)])

    return make_parser


class ChunkRows(list):
    """A chunk's rows, and what its byte bound saw: the wire bytes of the rows (`bytes_read`)
    and whether rows past the bound were dropped (`cut_short`: the chunk ends early, not the
    table)."""

    bytes_read: int = 0
    cut_short: bool = False


def _chunk_rows(cursor: RowsCursor) -> ChunkRows:
    with cursor:
        rows = ChunkRows(cursor.fetchall())
        assert cursor.result is not None
        rows.bytes_read, rows.cut_short = cursor.result.bytes_read, cursor.result.cut_short
        return rows


class ChunkReader:
    """Chunks and maximum keys read on a `ServerSession`'s connection."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session

    def _fetch_rows(
        self, sql: str, params: tuple, make_parser: Callable[[Any], RowParser], max_bytes: int | None = None,
    ) -> "ChunkRows":
        def run(conn: pymysql.Connection) -> ChunkRows:
            cursor = RowsCursor(conn, make_parser, max_bytes)
            cursor.execute(sql, params)
            return _chunk_rows(cursor)

        return self.session.run(run)

    def max_key(self, schema: TableSchema, condition: str | None = None, source: str | None = None) -> Key | None:
        """The largest normalized key (among rows matching `condition`, of `source`); None for no rows."""
        key = list(schema.key_columns)
        rows = self._fetch_rows(*ChunkQuery.max_key_query(schema, condition, source), _normalized_rows(schema, key))
        return schema.key_of(rows[0]) if rows else None

    def read_whole(self, schema: TableSchema, condition: str | None = None, source: str | None = None,
                   max_bytes: int | None = None) -> tuple[ChunkRows, str, int]:
        """Every row of the table (of `source`, matching `condition`) in one consistent snapshot,
        and where in the binlog that snapshot is, exactly: MariaDB's `binlog_snapshot_file` and
        `binlog_snapshot_position` of a `START TRANSACTION WITH CONSISTENT SNAPSHOT` (the
        commits before it are all visible to it, none after). MariaDB only: MySQL has no such
        status without a lock. Past `max_bytes` on the wire the read stops at once: no row is
        returned (`cut_short`), and the connection is dropped (the rest of the result unread)."""
        sql = whole_table_query(schema, condition, source)

        def run(conn: pymysql.Connection) -> tuple[ChunkRows, str, int]:
            with conn.cursor(pymysql.cursors.Cursor) as cursor:
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cursor.execute("SHOW SESSION STATUS LIKE 'binlog\\_snapshot\\_%'")
                status = {_text(name).lower(): _text(value) for name, value in cursor.fetchall()}
                place = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
                rows_cursor = RowsCursor(conn, _normalized_rows(schema, schema.column_names), max_bytes, abandon=True)
                abandoned = False
                try:
                    rows_cursor.execute(sql, ())
                    rows = _chunk_rows(rows_cursor)
                except ByteBoundReached:  # the caller drops the connection, transaction and all
                    abandoned, rows = True, ChunkRows()
                    rows.cut_short = True
                finally:
                    if not abandoned:
                        cursor.execute("COMMIT")
            return (rows, *place)

        rows, file, position = self.session.run(run)
        if rows.cut_short:
            self.session.drop_connection()
        return rows, file, position

    def read_chunk(self, request: ChunkRequest) -> ChunkRows:
        """The rows `request` asks for, read whole on this connection (see `ChunkRows`)."""
        sql, params = request.query().build()
        schema = request.schema
        return self._fetch_rows(sql, params, _normalized_rows(schema, schema.column_names), request.max_bytes)

    def send_chunk(self, request: ChunkRequest) -> RowsCursor:
        """`read_chunk` in two steps: send the SELECT now, `receive_chunk` its rows later. No
        retry: on an error the caller drops the connection (`drop_connection`)."""
        sql, params = request.query().build()
        schema = request.schema
        cursor = RowsCursor(self.session.connection(), _normalized_rows(schema, schema.column_names),
                            request.max_bytes)
        cursor.send(sql, params)
        return cursor

    @staticmethod
    def receive_chunk(cursor: RowsCursor) -> ChunkRows:
        cursor.receive()
        return _chunk_rows(cursor)

    def boundary(self, request: ChunkRequest) -> Key | None:
        """The key of the `request.limit`-th row it asks for, None if there are fewer: reads only
        the key, so the next chunk can be read at once on another connection."""
        schema = request.schema
        sql, params = request.query().boundary_query()
        found = self._fetch_rows(sql, params, _normalized_rows(schema, list(schema.key_columns)))
        return schema.key_of(found[0]) if found else None
