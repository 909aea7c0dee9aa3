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

Every SELECT runs in autocommit mode on a session whose time_zone is '+00:00': each chunk must
see the latest committed data (at least everything the binlog reader has passed, see
`wait_until_visible` and dblog.core.visibility), never a snapshot held open by an earlier
transaction, and TIMESTAMP values must come back in UTC like the binlog's (see dblog.mysql.values).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable

import pymysql
import pymysql.connections
import pymysql.cursors
from pymysql.constants import COMMAND
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_exponential

from dblog.core.events import Key, TableId
from dblog.core.gtid import GtidSet
from dblog.core.sql import quote_identifier
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.schema import TableSchema, load_schema, text_of
from dblog.mysql.server_errors import connection_lost
from dblog.mysql.values import SESSION_TIME_ZONE_SQL, wire_normalizer

log = logging.getLogger("dblog")

__all__ = ["ChunkQuery", "ChunkReader", "RowsCursor", "row_parser"]


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
class ChunkQuery:
    """Builds one chunk SELECT. Pure: no connection needed, so it is unit-tested on its own.

    `after_key` and `max_key` are normalized keys (as in RowChange.key); `condition` is an
    already-validated SQL predicate (a snapshot's additional condition), ANDed in parentheses.
    The SQL uses pymysql's %s placeholders: execute it with the returned params, even when
    they are empty.
    """

    schema: TableSchema
    limit: int
    after_key: Key | None = None
    max_key: Key | None = None
    condition: str | None = None

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
        sql = f"SELECT {columns} FROM {_sql_text(_table_name(schema.table))}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {', '.join(key_sql)} {limit_clause}"
        return sql, tuple(params)

    @staticmethod
    def max_key_query(schema: TableSchema, condition: str | None = None) -> tuple[str, tuple]:
        """The SELECT of the largest key (optionally among rows matching `condition`)."""
        if not schema.key_columns:
            raise ValueError(f"{schema.table} has no primary key: a chunk needs a key to page by")
        key_sql = [_sql_text(quote_identifier(name)) for name in schema.key_columns]
        columns = ", ".join(_sql_text(_select_expression(schema, name)) for name in schema.key_columns)
        sql = f"SELECT {columns} FROM {_sql_text(_table_name(schema.table))}"
        if condition:
            sql += f" WHERE ({_sql_text(condition)})"
        sql += " ORDER BY " + ", ".join(f"{column} DESC" for column in key_sql) + " LIMIT 1"
        return sql, ()


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


class _ParsedResult(pymysql.connections.MySQLResult):
    """A result whose rows are made by a parser built from its column definitions.

    With `max_bytes`, rows stop being kept once those kept took that many bytes on the wire:
    the rest is read to its end (the protocol has no other way to end a result) and dropped
    unparsed, so a chunk holds at most `max_bytes` plus one row."""

    def __init__(
        self, connection: pymysql.Connection, make_parser: Callable[[Any], RowParser], max_bytes: int | None = None,
    ) -> None:
        super().__init__(connection)
        self._make_parser = make_parser
        self._max_bytes = max_bytes
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
    ) -> None:
        super().__init__(connection)
        self._make_parser = make_parser
        self._max_bytes = max_bytes
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
        result = self.result = _ParsedResult(conn, self._make_parser, self._max_bytes)
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


class KeyColumnsError(ValueError):
    """Columns given as the key of a table cannot serve as one; `problem` says why ("has
    NULLable key columns ['code']", ...)."""

    def __init__(self, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.problem = problem


_UNIQUE_INDEXES_SQL = (
    "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0"
)


class VisibilityTimeout(RuntimeError):
    """Commits the binlog reader already read did not become visible to SELECTs in time."""


def _poll(missing: Callable[[], str | None], timeout: float, what: str) -> bool:
    """Call `missing` (what is not visible yet, None once it all is) until it returns None,
    pausing 0.5 ms, 1 ms, ... up to 100 ms between calls, for at most `timeout` seconds.
    Returns whether it had to wait (the first call found something missing)."""
    lacking = missing()
    if lacking is None:
        return False
    lacking = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.0005, max=0.1),
        retry=retry_if_result(lambda result: result is not None),
        retry_error_callback=lambda state: state.outcome.result(),
    )(missing)
    if lacking is not None:
        raise VisibilityTimeout(
            f"{what} did not become visible to SELECTs within {timeout:g} s ({lacking}). A semi-sync primary "
            "waiting for a replica's ACK holds commits back: check its replicas, or raise "
            "snapshot.visibility_timeout_seconds"
        )
    return True


class ChunkReader:
    """Reads chunks, max keys, schemas and the executed GTID set over one autocommit connection.

    `connect` makes a new pymysql connection; it is called again to replace a lost one (once per
    call: a second failure is raised). `collations=False`: schemas without their key columns'
    collations (`load_schema`), for a reader that only keys rows (the binlog reader process).
    """

    def __init__(
        self, connect: Callable[[], pymysql.Connection], key_columns: dict[TableId, tuple[str, ...]] | None = None,
        collations: bool = True,
    ) -> None:
        self._connect = connect
        self._collations = collations
        self._conn: pymysql.Connection | None = None
        self._schemas: dict[TableId, TableSchema] = {}
        self._keys = dict(key_columns or {})  # keys of tables without a primary key
        self._flavor: str | None = None
        # The last coordinate a read view was seen to reach (forgotten with the connection:
        # the server behind it may be another one then).
        self._visible: BinlogCoordinate | None = None

    # --- connection ---------------------------------------------------------------------------

    def _connection(self) -> pymysql.Connection:
        if self._conn is None:
            conn = self._connect()
            try:
                if conn.charset != "utf8mb4":
                    conn.set_character_set("utf8mb4")  # 4-byte characters must survive
                conn.autocommit(True)
                with conn.cursor() as cursor:
                    cursor.execute(SESSION_TIME_ZONE_SQL)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def drop_connection(self) -> None:
        """Close the connection (e.g. results left unread on it); the next query opens a new one."""
        conn, self._conn = self._conn, None
        self._visible = None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _with_connection(self, work: Callable[[pymysql.Connection], Any]) -> Any:
        for attempt in (1, 2):
            try:
                return work(self._connection())
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as error:
                self.drop_connection()
                if not connection_lost(error) or attempt == 2:
                    raise

    def _fetch(self, sql: str, params: tuple = ()) -> tuple:
        def run(conn: pymysql.Connection) -> tuple:
            with conn.cursor(pymysql.cursors.Cursor) as cursor:  # tuples, whatever the default
                cursor.execute(sql, params)
                return cursor.fetchall()

        return self._with_connection(run)

    def _fetch_rows(
        self, sql: str, params: tuple, make_parser: Callable[[Any], RowParser], max_bytes: int | None = None,
    ) -> "ChunkRows":
        def run(conn: pymysql.Connection) -> ChunkRows:
            cursor = RowsCursor(conn, make_parser, max_bytes)
            cursor.execute(sql, params)
            return _chunk_rows(cursor)

        return self._with_connection(run)

    def close(self) -> None:
        self.drop_connection()

    def __enter__(self) -> "ChunkReader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- server facts ---------------------------------------------------------------------------

    def flavor(self) -> str:
        """'mariadb' or 'mysql', from VERSION()."""
        if self._flavor is None:
            version = self._fetch("SELECT VERSION()")[0][0]
            self._flavor = "mariadb" if "mariadb" in str(version).lower() else "mysql"
        return self._flavor

    def executed_gtids(self) -> GtidSet:
        """The server's executed GTID set: a watermark (MariaDB @@gtid_binlog_pos, MySQL @@gtid_executed)."""
        flavor = self.flavor()
        variable = "@@GLOBAL.gtid_binlog_pos" if flavor == "mariadb" else "@@GLOBAL.gtid_executed"
        text = self._fetch(f"SELECT {variable}")[0][0] or ""
        if isinstance(text, bytes):
            text = text.decode()
        return GtidSet.parse(text.replace("\n", ""), flavor=flavor)

    def visible_coordinate(self) -> BinlogCoordinate:
        """MariaDB: the binlog coordinate up to which a read view opened now sees every commit
        (`binlog_snapshot_file/position` of a consistent snapshot; see dblog.core.visibility).
        A read view opened later sees at least as much."""
        def run(conn: pymysql.Connection) -> dict[str, str]:
            with conn.cursor(pymysql.cursors.Cursor) as cursor:
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                try:
                    cursor.execute("SHOW SESSION STATUS LIKE 'binlog\\_snapshot\\_%'")
                    return {text_of(name).lower(): text_of(value) for name, value in cursor.fetchall()}
                finally:
                    cursor.execute("COMMIT")

        status = self._with_connection(run)
        return BinlogCoordinate.of(status["binlog_snapshot_file"], status["binlog_snapshot_position"])

    def binlog_end(self) -> BinlogCoordinate | None:
        """MariaDB: where the binlog ends now (None on MySQL). Read right after
        `executed_gtids`, it lies past every commit of that set: MariaDB counts a commit in
        `@@gtid_binlog_pos` before a SELECT can see it, but writes the commit's GTID and events
        under the lock SHOW MASTER STATUS takes. A chunk that waits until read views reach it
        (`wait_until_visible`) sees the whole set."""
        if self.flavor() != "mariadb":
            return None
        file, pos = self._fetch("SHOW MASTER STATUS")[0][:2]
        return BinlogCoordinate.of(text_of(file), pos)

    def wait_until_visible(self, position: GtidSet, must_see: BinlogCoordinate | None, timeout: float) -> bool:
        """Return once a SELECT started now sees every transaction the binlog reader consumed:
        MariaDB, every commit up to `must_see` (None: nothing to wait for);
        MySQL, `position` within `@@gtid_executed`. Usually at once; otherwise those commits
        are between the binlog and the storage engine (microseconds, or until a semi-sync
        replica's ACK), and this polls with a growing pause. Returns whether it had to wait."""
        def missing() -> str | None:
            if self.flavor() != "mariadb":
                executed = self.executed_gtids()
                lacking = position - executed
                return f"@@gtid_executed lacks {lacking}" if lacking else None
            if must_see is None or (self._visible is not None and self._visible >= must_see):
                return None  # nothing to wait for, or already seen visible
            seen = self._visible = self.visible_coordinate()
            return None if seen >= must_see else f"read views see the binlog up to {seen}, not {must_see}"

        return _poll(missing, timeout, "commits the binlog reader has already read")

    # --- tables -----------------------------------------------------------------------------------

    def schema(self, table: TableId) -> TableSchema:
        """The table's schema, loaded once and cached until `forget_schema`. A table without a
        primary key gets the key given for it (`source.key_columns`, a signal's surrogate key)."""
        cached = self._schemas.get(table)
        if cached is None:
            cached = self._with_connection(lambda conn: load_schema(conn, table, self._collations))
            key = self._keys.get(table)
            if key and cached.key_columns:
                log.warning("%s has a primary key %s: the key given for it, %s, is not used", table,
                            cached.key_columns, key)
            elif key:
                self.check_key(cached, key)
                cached = dataclasses.replace(cached, key_columns=key)
            self._schemas[table] = cached
        return cached

    def set_key(self, table: TableId, columns: tuple[str, ...]) -> None:
        """Key a table without a primary key by `columns` from now on (checked: unique, NOT NULL)."""
        previous = self._keys.get(table)
        self._keys[table] = tuple(columns)
        self.forget_schema(table)
        try:
            self.schema(table)
        except KeyColumnsError:
            if previous is None:
                del self._keys[table]
            else:
                self._keys[table] = previous
            raise

    def given_keys(self) -> dict[TableId, tuple[str, ...]]:
        """The keys given for tables without a primary key so far (`source.key_columns`, `set_key`)."""
        return dict(self._keys)

    def check_key(self, schema: TableSchema, key: tuple[str, ...]) -> None:
        """Keyset paging and the window's dedupe both need a unique, NOT NULL key: a duplicate
        would make a chunk skip rows, a NULL would never match. Raises KeyColumnsError."""
        missing = [name for name in key if not schema.has_column(name)]
        nullable = [c.name for c in schema.columns if c.name in key and c.nullable]
        unique_indexes = self._fetch(_UNIQUE_INDEXES_SQL, (schema.table.db, schema.table.table))
        indexes: dict[str, set[str]] = {}
        for index, column in unique_indexes:
            indexes.setdefault(text_of(index), set()).add(text_of(column))
        if missing or nullable or not any(columns <= set(key) for columns in indexes.values()):
            problem = (f"has no column {missing}" if missing else f"has NULLable key columns {nullable}" if nullable
                       else f"has no UNIQUE index over {list(key)} (or some of them)")
            raise KeyColumnsError(
                f"{schema.table} cannot be keyed by {list(key)}: it {problem}; name NOT NULL columns covered by a "
                "UNIQUE index (or add a primary key)", problem,
            )

    def forget_schema(self, table: TableId | None = None) -> None:
        """Drop the cached schema of `table` (of every table when None), e.g. after DDL."""
        if table is None:
            self._schemas.clear()
        else:
            self._schemas.pop(table, None)

    def max_key(self, schema: TableSchema, condition: str | None = None) -> Key | None:
        """The largest normalized key (among rows matching `condition`); None for no rows."""
        key = list(schema.key_columns)
        rows = self._fetch_rows(*ChunkQuery.max_key_query(schema, condition), _normalized_rows(schema, key))
        return schema.key_of(rows[0]) if rows else None

    def estimated_rows(self, table: TableId) -> int | None:
        """The server's row-count estimate (information_schema), for progress and ETA only."""
        rows = self._fetch(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (table.db, table.table),
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def global_variables(self, names: tuple[str, ...]) -> dict[str, str]:
        """The server's global variables of these names (lower case) that it has."""
        rows = self._fetch(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
        return {text_of(name).lower(): text_of(value) for name, value in rows}

    def semi_sync_after_sync(self) -> bool:
        """Whether the server waits for a replica's ACK between writing a transaction to the
        binlog and making it visible (MariaDB rpl_semi_sync_master_*, MySQL 8 rpl_semi_sync_source_*)."""
        variables = self.global_variables((
            "rpl_semi_sync_master_enabled", "rpl_semi_sync_master_wait_point",
            "rpl_semi_sync_source_enabled", "rpl_semi_sync_source_wait_point"))
        settings = {name.replace("_source_", "_master_"): value.upper() for name, value in variables.items()}
        return (settings.get("rpl_semi_sync_master_enabled") == "ON"
                and settings.get("rpl_semi_sync_master_wait_point") == "AFTER_SYNC")

    def read_chunk(
        self,
        schema: TableSchema,
        after_key: Key | None,
        max_key: Key | None,
        limit: int,
        condition: str | None = None,
        max_bytes: int | None = None,
    ) -> ChunkRows:
        """Rows with after_key < key <= max_key, normalized, in key order, at most `limit`, and
        no more once those kept took `max_bytes` on the wire (see `ChunkRows`)."""
        sql, params = ChunkQuery(schema, limit, after_key, max_key, condition).build()
        return self._fetch_rows(sql, params, _normalized_rows(schema, schema.column_names), max_bytes)

    def send_chunk(
        self,
        schema: TableSchema,
        after_key: Key | None,
        max_key: Key | None,
        limit: int,
        condition: str | None = None,
        max_bytes: int | None = None,
    ) -> RowsCursor:
        """`read_chunk` in two steps: send the SELECT now, `receive_chunk` its rows later. No
        retry: on an error the caller drops the connection (`drop_connection`)."""
        sql, params = ChunkQuery(schema, limit, after_key, max_key, condition).build()
        cursor = RowsCursor(self._connection(), _normalized_rows(schema, schema.column_names), max_bytes)
        cursor.send(sql, params)
        return cursor

    @staticmethod
    def receive_chunk(cursor: RowsCursor) -> ChunkRows:
        cursor.receive()
        return _chunk_rows(cursor)

    def boundary(
        self, schema: TableSchema, after_key: Key | None, max_key: Key | None, rows: int, condition: str | None = None,
    ) -> Key | None:
        """The key of the `rows`-th row after `after_key` (up to `max_key`), None if there are
        fewer: reads only the key, so the next chunk can be read at once on another connection."""
        sql, params = ChunkQuery(schema, rows, after_key, max_key, condition).boundary_query()
        found = self._fetch_rows(sql, params, _normalized_rows(schema, list(schema.key_columns)))
        return schema.key_of(found[0]) if found else None
