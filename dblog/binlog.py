"""The binlog half of dblog: transactions in commit order, as dblog.events records.

`BinlogSource` wraps pymysqlreplication's `BinLogStreamReader` and turns its event soup
(GTID, table maps, row events, XID, query events, heartbeats) into the shape the engine
reasons in:

    TransactionStart(gtid) · RowChange* · TransactionEnd(gtid)      a DML transaction
    TransactionStart(gtid) · SchemaChange · TransactionEnd(gtid)     DDL
    TransactionStart(gtid) · SchemaChange · RowChange* · End         CREATE TABLE ... SELECT
    Heartbeat(file, pos)                                              idle, between transactions

A SchemaChange is every statement the server logged as text other than BEGIN, COMMIT,
ROLLBACK, SAVEPOINT and XA statements: DDL, but also TRUNCATE, CREATE USER, GRANT... Its `sql`
is the text as the client sent it (it can hold a password: do not log it blindly). A
transaction ends at its XID event, at a COMMIT or ROLLBACK query (non-transactional tables),
or right after its one query when the GTID event is flagged standalone (DDL).

Every transaction yields Start and End, even one that touches no accepted table: the engine
learns from the GTIDs how far the stream has read (the watermark's "all of H seen").

Delivery contract (what the engine may rely on):

* `TransactionEnd` is the commit point. `position` (a GtidSet) is the start set plus every
  transaction whose End has been yielded; it is what to persist and resume from.
* A transaction whose End was yielded is never yielded again, across any number of lost and
  re-made connections. pymysqlreplication reconnects on its own after a lost connection, from
  `stream.auto_position`, which it otherwise never moves (DESIGN.md pitfall): this class sets
  `auto_position` to `position` at every End, reconnects itself for the errors the library
  raises instead of handling (a KILLed dump thread), and drops any transaction already in
  `position` as a last guard.
* A connection lost in the *middle* of a transaction means its Start and some of its
  RowChanges were yielded but not its End. After the reconnect the same transaction is sent
  again from its beginning, so the engine sees a fresh `TransactionStart` with the same GTID
  before any End. The engine must treat a Start that arrives while a transaction is open as
  "discard the open transaction's uncommitted row changes". (A Start with a different GTID
  cannot follow an unfinished transaction: the server resends from `position`.)

Row values are normalized with dblog.values.normalize_binlog using `schema_of(table)`, the
table's current schema. Columns are matched by name (the server must run with
binlog_row_metadata=FULL); a column the schema does not know (DDL not yet seen by the
schema cache) is normalized on a best-effort basis (`normalize_unknown`), and so is every
column of a table for which `schema_of` raises LookupError (e.g. dblog.schema.TableNotFound: the
table was dropped after the event was written); such rows are keyed by the binlog's own
primary-key metadata.

Tested on MariaDB 10.11. The MySQL path (GtidEvent, BEGIN ... XID, `uuid:n` positions) follows the
same library calls but is untested here (no MySQL server installable); so are XA transactions.
On MySQL an *empty* start set makes the library start at the current binlog position, not at
the beginning, and MySQL also sends heartbeats while skipping already-executed events.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from dblog.events import (
    BinlogEvent,
    Heartbeat,
    Key,
    RowChange,
    SchemaChange,
    SourceInfo,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.gtid import Gtid, GtidSet
from dblog.schema import TableSchema
from dblog.server_errors import SERVER_UNREACHABLE
from dblog.values import binlog_normalizer, normalize_binlog, normalize_unknown
from dblog.visibility import BinlogCoordinate

__all__ = ["BinlogSource", "BinlogError"]

# MariaDB Gtid_log_event flags (sql/log_event.h)
FL_STANDALONE = 1  # no COMMIT/XID follows: the group is this one event (DDL)

# Errors after which reading again from `position` is the right move. 2013/2006 are mostly
# handled inside pymysqlreplication already; the rest it raises.
# The server went away, or the dump thread was interrupted (KILL QUERY): read on from the last
# delivered transaction.
_RECONNECT_CODES = SERVER_UNREACHABLE | {1317}  # ER_QUERY_INTERRUPTED

_ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236  # e.g. "Could not find GTID state requested by slave …"

_NOT_SCHEMA_CHANGES = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT", "XA ")


class BinlogError(RuntimeError):
    """The binlog cannot be read as dblog needs it (configuration, or too many reconnects)."""


class BinlogPurged(BinlogError):
    """The server no longer has the binlog from the position dblog must resume at."""


RowDecoder = Callable[[dict, dict], dict]


class _Normalizers(dict):
    """Column name -> binlog normalizer; a name the schema does not know (yet) gets the
    best-effort one, and the binlog's placeholder names an error."""

    def __init__(self, normalizers: dict, table: TableId) -> None:
        super().__init__(normalizers)
        self.table = table

    def __missing__(self, name: str) -> Callable[[Any], Any]:
        if name.startswith("UNKNOWN_COL"):
            raise BinlogError(
                f"the binlog has no column names for {self.table}: the server must run with binlog_row_metadata=FULL"
            )
        return normalize_unknown


class BinlogSource:
    """Iterate to get BinlogEvents in commit order, strictly after `start`. Blocks when caught
    up; yields a Heartbeat about every `heartbeat_seconds` while idle.

    `connection_settings`: pymysql.connect keyword arguments (host, port, user, password);
    the user needs REPLICATION SLAVE and SELECT on information_schema.
    `server_id`: the replica id this reader registers with; unique among the server's replicas.
    """

    def __init__(
        self,
        connection_settings: dict,
        server_id: int,
        start: GtidSet,
        schema_of: Callable[[TableId], TableSchema],
        table_filter: Callable[[TableId], bool],
        heartbeat_seconds: float = 1.0,
        *,
        flavor: str | None = None,
        max_reconnects: int = 10,
    ) -> None:
        self._settings = dict(connection_settings)
        self._settings.setdefault("charset", "utf8mb4")
        # Without a read timeout a silently dead connection blocks forever; the library keeps the
        # heartbeat period under half of it, and treats the timeout as a lost connection.
        self._settings.setdefault("read_timeout", int(max(30, heartbeat_seconds * 10)))
        self._server_id = server_id
        self._schema_of = schema_of
        self._table_filter = table_filter
        self._heartbeat_seconds = heartbeat_seconds
        self._max_reconnects = max_reconnects
        self._flavor = flavor or start.flavor or self._detect_flavor()
        self._position = start if start.flavor else GtidSet.empty(self._flavor).union(start)
        self._stream: BinLogStreamReader | None = None
        self._closed = False
        self.reconnects = 0  # reconnects made by this class (the library's own are not counted)
        # the transaction being read
        self._current: Gtid | None = None
        self._standalone = False
        self._skipping = False
        self._decoders: dict[TableId, tuple[TableSchema, RowDecoder]] = {}
        self._events = self._generate()

    # --- public -----------------------------------------------------------------------------

    @property
    def position(self) -> GtidSet:
        """The start set plus every transaction whose TransactionEnd has been yielded."""
        return self._position

    @property
    def flavor(self) -> str:
        return self._flavor

    def __iter__(self) -> Iterator[BinlogEvent]:
        return self._events  # the generator itself: one Python frame less per event than __next__

    def __next__(self) -> BinlogEvent:
        return next(self._events)

    def close(self) -> None:
        """Stop reading. May be called from another thread to unblock a waiting iteration."""
        self._closed = True
        self._drop_stream()

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # already broken: nothing left to release
                pass

    def __enter__(self) -> "BinlogSource":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- connection -------------------------------------------------------------------------

    def _detect_flavor(self) -> str:
        conn = pymysql.connect(**self._settings)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                version = str(cursor.fetchone()[0])
        finally:
            conn.close()
        return "mariadb" if "mariadb" in version.lower() else "mysql"

    def _open_stream(self) -> BinLogStreamReader:
        return BinLogStreamReader(
            connection_settings=dict(self._settings),  # the library mutates its copy
            server_id=self._server_id,
            resume_stream=True,
            blocking=True,  # non-blocking mode loses the tail on MariaDB (DESIGN.md)
            auto_position=str(self._position),
            is_mariadb=self._flavor == "mariadb",
            only_events=[
                MariadbGtidEvent,
                GtidEvent,
                QueryEvent,
                XidEvent,
                XAPrepareEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
                HeartbeatLogEvent,
            ],  # the library also reads table maps, rotations and format descriptions itself
            slave_heartbeat=self._heartbeat_seconds,
            enable_logging=False,
        )

    def _generate(self) -> Iterator[BinlogEvent]:
        failures = 0
        while not self._closed:
            self._stream = self._open_stream()
            try:
                for event in self._stream:
                    failures = 0
                    yield from self._handle(event)
                    if self._closed:
                        return
                # Blocking mode only ends on an EOF packet (e.g. the dump thread was killed).
                problem: Exception = BinlogError("the server ended the binlog stream")
            except pymysql.err.MySQLError as error:
                if self._closed:
                    return
                code = error.args[0] if error.args else None
                if code == _ER_MASTER_FATAL_ERROR_READING_BINLOG:
                    raise BinlogPurged(
                        f"the server cannot send the binlog from GTID position {self._position or 'the start'} "
                        f"({error.args[1] if len(error.args) > 1 else error}): the binlog files holding it were "
                        "purged (expire_logs_days / binlog_expire_logs_seconds or PURGE BINARY LOGS). Changes "
                        "made since are lost to dblog. Remedy: move the offsets file away and start again (with "
                        "snapshot.startup = \"initial\" every captured table is snapshotted from the current "
                        "position), or keep the offsets and send execute-snapshot for the tables you need; "
                        "and keep binlogs longer than dblog may be stopped"
                    ) from error
                if not isinstance(error, pymysql.err.InterfaceError) and code not in _RECONNECT_CODES:
                    raise
                problem = error
            finally:
                self._drop_stream()
            if self._closed:
                return
            failures += 1
            if failures > self._max_reconnects:
                raise BinlogError(f"binlog connection lost {failures} times in a row: {problem}") from problem
            self.reconnects += 1
            time.sleep(min(2.0, 0.05 * 2**failures))

    # --- events -----------------------------------------------------------------------------

    def _handle(self, event: Any) -> Iterator[BinlogEvent]:
        if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
            if self._current is not None and not self._skipping:
                yield from self._row_changes(event)
        elif isinstance(event, MariadbGtidEvent):
            gtid = Gtid.mariadb(event.domain_id, event.server_id, event.gtid_seq_no)
            yield from self._begin(gtid, event, standalone=bool(event.flags & FL_STANDALONE))
        elif isinstance(event, GtidEvent):
            # MySQL: DDL is GTID + one query; DML is GTID + BEGIN ... XID (see QueryEvent below).
            yield from self._begin(Gtid.parse(event.gtid), event, standalone=True)
        elif isinstance(event, XidEvent):
            if self._current is not None:
                file = self._file()
                yield from self._end(BinlogCoordinate.of(file, event.packet.log_pos) if file else None)
        elif isinstance(event, XAPrepareEvent):
            if self._current is not None:
                yield from self._end()
        elif isinstance(event, QueryEvent):
            if self._current is not None:
                yield from self._query(event)
        elif isinstance(event, HeartbeatLogEvent):
            if self._current is None:  # heartbeats come only between transactions anyway
                yield Heartbeat(file=event.ident or self._file(), pos=event.packet.log_pos)

    def _file(self) -> str | None:
        return self._stream.log_file if self._stream is not None else None

    def _begin(self, gtid: Gtid, event: Any, standalone: bool) -> Iterator[BinlogEvent]:
        # An open transaction here was cut by a lost connection and is being resent: the fresh
        # Start tells the engine to drop what it had of it (see the module docstring).
        self._current = gtid
        self._standalone = standalone
        self._skipping = gtid in self._position  # already delivered: a library reconnect resent it
        if not self._skipping:
            yield TransactionStart(
                gtid=gtid,
                server_id=event.packet.server_id,
                ts_ms=event.timestamp * 1000,
                file=self._file(),
                pos=event.packet.log_pos,
            )

    def _end(self, commit: BinlogCoordinate | None = None) -> Iterator[BinlogEvent]:
        gtid, skipped = self._current, self._skipping
        self._current, self._skipping = None, False
        if skipped:
            return
        self._position = self._position.with_gtid(gtid)
        if self._stream is not None:
            # The library reconnects from auto_position: keep it at what has been delivered.
            self._stream.auto_position = str(self._position)
        yield TransactionEnd(gtid, commit)

    def _query(self, event: QueryEvent) -> Iterator[BinlogEvent]:
        sql = event.query.strip()
        keyword = sql.upper()
        if keyword == "BEGIN":
            self._standalone = False
            return
        if keyword in ("COMMIT", "ROLLBACK"):
            # COMMIT ends a group of non-transactional tables; ROLLBACK one whose
            # non-transactional changes happened anyway: both are the group's end.
            yield from self._end()
            return
        if not self._skipping and not keyword.startswith(_NOT_SCHEMA_CHANGES):
            db = event.schema.decode("utf-8", "replace") if isinstance(event.schema, bytes) else event.schema
            yield SchemaChange(gtid=self._current, db=db, sql=sql)
        if self._standalone:
            yield from self._end()

    # --- rows -------------------------------------------------------------------------------

    def _decoder(self, table: TableId, event: Any) -> tuple[Callable[[dict], Key], RowDecoder]:
        try:
            schema = self._schema_of(table)
        except LookupError:
            # The table is gone (dropped since this event was written): decode what the binlog
            # says, keyed by its own primary-key metadata.
            return self._fallback_decoder(event)
        cached = self._decoders.get(table)
        if cached is not None and cached[0] is schema:
            return schema.key_of, cached[1]
        columns = {column.name: column for column in schema.columns}
        normalizers = _Normalizers({name: binlog_normalizer(column) for name, column in columns.items()}, table)

        def none_value(name: str, none_sources: dict) -> Any:
            source = none_sources.get(name)
            if source is None or source == "null":
                return None  # a real NULL (the common case)
            column = columns.get(name)
            return normalize_binlog(column, None, source) if column else None

        def decode(values: dict, none_sources: dict) -> dict:
            return {
                name: normalizers[name](value) if value is not None else none_value(name, none_sources)
                for name, value in values.items()
            }

        self._decoders[table] = (schema, decode)
        return schema.key_of, decode

    @staticmethod
    def _fallback_decoder(event: Any) -> tuple[Callable[[dict], Key], RowDecoder]:
        primary_key = event.primary_key or ()
        key_columns = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key)

        def decode(values: dict, none_sources: dict) -> dict:
            return {name: normalize_unknown(value) for name, value in values.items()}

        return (lambda row: tuple(row.get(name) for name in key_columns)), decode

    def _row_changes(self, event: Any) -> Iterator[RowChange]:
        table = TableId(event.schema, event.table)
        if not self._table_filter(table):
            return
        key_of, decode = self._decoder(table, event)
        gtid_text = str(self._current)
        file, pos = self._file(), event.packet.log_pos
        server_id, ts_ms = event.packet.server_id, event.timestamp * 1000
        rows = event.rows
        if isinstance(event, (WriteRowsEvent, DeleteRowsEvent)):
            insert = isinstance(event, WriteRowsEvent)
            for index, row in enumerate(rows):
                source = SourceInfo(gtid_text, file, pos, index, server_id, ts_ms)
                image = decode(row["values"], row["none_sources"])
                if insert:
                    yield RowChange(table, "c", key_of(image), None, image, source)
                else:
                    yield RowChange(table, "d", key_of(image), image, None, source)
            return
        for index, row in enumerate(rows):
            source = SourceInfo(gtid_text, file, pos, index, server_id, ts_ms)
            before = decode(row["before_values"], row["before_none_sources"])
            after = decode(row["after_values"], row["after_none_sources"])
            key, old_key = key_of(after), key_of(before)
            # Stored values, compared exactly: a respelling the collation calls equal ('abc' ->
            # 'ABC', 'abc' -> 'abc ') is a key change too, so sinks drop the old spelling.
            yield RowChange(table, "u", key, before, after, source, old_key if old_key != key else None)
