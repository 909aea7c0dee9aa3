"""The binlog half of dblog: transactions in commit order, as dblog.core.events records.

`BinlogSource` reads the binlog as a replica does and turns its event soup (GTID, table maps,
row events, XID, query events, heartbeats) into the shape the engine reasons in:

    TransactionStart(gtid) · RowChange* · TransactionEnd(gtid)      a DML transaction
    TransactionStart(gtid) · SchemaChange · TransactionEnd(gtid)     DDL
    TransactionStart(gtid) · SchemaChange · RowChange* · End         CREATE TABLE ... SELECT
    Heartbeat(file, pos)                                              idle, between transactions

A SchemaChange is every statement the server logged as text other than BEGIN, COMMIT,
ROLLBACK, SAVEPOINT and XA statements: DDL, but also TRUNCATE, CREATE USER, GRANT... Its `sql`
is the text as the server logged it with every credential replaced by `<secret>`
(`dblog.core.redaction`: passwords, password hashes, connection strings), here, before anything
else in dblog holds it. A transaction ends at its XID event, at a COMMIT or ROLLBACK query
(non-transactional tables), or right after its one query when the GTID event is flagged
standalone (DDL).

Every transaction yields Start and End, even one that touches no accepted table: the engine
learns from the GTIDs how far the stream has read (the watermark's "all of H seen").

Delivery contract (what the engine may rely on):

* `TransactionEnd` is the commit point. `position` (a GtidSet) is the start set plus every
  transaction whose End has been yielded; it is what to persist and resume from.
* A transaction whose End was yielded is never yielded again, across any number of lost and
  re-made connections: after a lost connection (or a KILLed dump thread) this class asks again
  from `position`, and drops any transaction already in `position` as a last guard.
* A connection lost in the *middle* of a transaction is invisible to the engine. Its Start
  and some of its events were yielded, not its End; the server sends it again from its
  beginning (the reader asks from the position it has read to), and this class skips as many
  of its events as it had yielded and goes on: no second Start, nothing yielded twice (the
  binlog is the same bytes, so the count is exact). A Start while a transaction is open is a
  broken contract, which `ChangeCapture` refuses.
* GTIDs come in binlog order and, on MariaDB, with sequence numbers growing in each domain
  (`gtid_strict_mode=ON`, checked at start). A GTID at or below what the stream has read is
  not dropped as "already delivered": it is a GTID logged out of order (the setting switched
  off meanwhile, or an old binlog written without it), and the source stops with a
  `BinlogError` naming the setting. (A position made of the last sequence number per domain
  could neither resume after such a transaction nor place it between two watermarks.)
* MariaDB XA: `XA PREPARE` logs a transaction's events under one GTID (flagged "prepared
  XA"), and `XA COMMIT` / `XA ROLLBACK` comes later as a query under its own GTID. The
  prepared transaction is yielded as Start and End with no rows; its row changes are held
  here and yielded inside the XA COMMIT's transaction (dropped at XA ROLLBACK), so nothing
  uncommitted reaches a window or a sink. They are yielded with the XA COMMIT transaction's
  coordinates (GTID, file, the XA COMMIT event's position, rows numbered from 0), like every
  row: positions never run backwards, and a sink that skips what its committed GTID set holds
  does not skip them. While some are held, every `TransactionEnd.resume`
  says where a new reader must start to hold them again: the stream's position before the
  oldest one's GTID. Started with `resume_from` (and `start` = the delivered position), the
  source reads from there, holds the prepared transactions it meets, and yields nothing that
  `start` holds. An XA COMMIT of a transaction prepared before the position the source read
  from (its changes unknown) stops it with a `BinlogError`. `XA COMMIT ... ONE PHASE` is an
  ordinary transaction.
* MySQL XA, read as MySQL's transaction boundary parser reads it (rpl_trx_boundary_parser.cc):
  `XA START` opens the transaction (its rows held), `XA END` is inside it, and the
  XA_PREPARE event ends it: committed there with `one_phase` set (`XA COMMIT ... ONE PHASE`),
  otherwise prepared and held as MariaDB's, until `XA COMMIT` / `XA ROLLBACK` under a GTID of its
  own. `CREATE TABLE ... START TRANSACTION` (CREATE TABLE ... SELECT since MySQL 8.0.21) is
  the DDL then its rows, ending at the XID; any other statement right after a MySQL GTID is the
  whole transaction (DDL implicitly commits).

Events are read by dblog's own dump session (`dblog.mysql.binlog.stream`) and decoded by its own
decoder (`dblog.mysql.binlog.decoder`, `dblog.mysql.binlog.rows`): the row values come out in dblog's normal
form (`dblog.mysql.values`) straight from the bytes, through readers compiled once per table map.
Types, widths and names come from the table map (with binlog_row_metadata=FULL), so a row logged
before a DDL is decoded as it was written. Below FULL the map has no names, keys, ENUM/SET members
(nor, under MariaDB's NO_LOG, signedness and charsets): they come from `history`, a schema history
(`dblog.mysql.table_history`) as of the source's start position that the source moves along with
every statement it yields, checked against what the map does log (`dblog.mysql.binlog.nameless_maps`:
a disagreement stops the source naming the table and column). The schema
(`schema_of(table)`) adds what the binlog cannot say (UUID / INET6 / INET4 columns) and the key
(`TableSchema.key_of`, which honours `source.key_columns`). When a table map disagrees with that
schema (the server applied DDL since the rows were logged), the rows carry the definition the
map describes as `RowChange.definition` (`dblog.mysql.binlog.definitions`), which keys them too.
For a table `schema_of` cannot find (dropped since the event was written) the rows are keyed by
the map's own primary-key metadata. Row images with missing columns (binlog_row_image MINIMAL or
NOBLOB) stop the source with an error naming the setting: a partial row would overwrite a full
one in every sink (a functional index's hidden column, never logged, is no missing column). An
event of a captured table that does not decode stops it with `BinlogUndecodable`, which names the
table, column, event and position; tables the filter leaves out are never decoded.

Tested on MariaDB 10.11. The MySQL path (GTID events, BEGIN ... XID, `uuid:n` positions, binary
JSON, compressed transactions, XA) is tested with encoded events only (no MySQL server installable).
Rows of a MySQL compressed transaction all carry the payload's position; their `row` numbers
run on across its events, so (file, pos, row) stays unique.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

import pymysql

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.events import (
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
from dblog.core.file_positions import FilePosition, position_before, transaction_at, transaction_end
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.redaction import redact_credentials
from dblog.core.resume_verdict import PURGED_REMEDY, RIGHT_SERVER, WAIT, resnapshot_choice
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.binlog.decoder import (
    BinlogDecodeError,
    BinlogDecoder,
    UndecodableEvent,
    GtidRecord,
    HeartbeatRecord,
    PayloadRecord,
    QueryRecord,
    RotateRecord,
    RowsRecord,
    XaPrepareRecord,
    XidRecord,
    event_name,
    position,
    record_handlers,
)
from dblog.mysql.binlog.definitions import (
    definition_in_force, definition_keyed_by, definition_of_map,
)
from dblog.mysql.binlog.nameless_maps import DefinitionMismatch, map_with_definition
from dblog.mysql.binlog.held_changes import MEMORY_BYTES, MEMORY_ROWS, HeldChanges, HeldChangesStore
from dblog.mysql.binlog.rows import SemanticType, TableMap
from dblog.mysql.binlog.stream import BinlogConnection
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import TableSchema
from dblog.mysql.server_errors import (
    ER_MASTER_FATAL_ERROR_READING_BINLOG, ER_QUERY_INTERRUPTED, SERVER_UNREACHABLE, error_code,
)
from dblog.mysql.server_session import server_flavor
from dblog.mysql.table_history import TableHistory

__all__ = ["BinlogSource", "BinlogError", "BinlogPurged", "BinlogUndecodable", "Rekeying"]

log = logging.getLogger("dblog.mysql.binlog")

# Errors after which reading again from `position` is the right move: the server went away, or
# the dump thread was interrupted (KILL QUERY).
_RECONNECT_CODES = SERVER_UNREACHABLE | {ER_QUERY_INTERRUPTED}

_NOT_SCHEMA_CHANGES = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT", "XA ")

_SPECIAL_TYPES = ("uuid", "inet6", "inet4", "vector")  # binary strings the schema says more of

# MySQL >= 8.0.21 logs CREATE TABLE ... SELECT as one transaction: the DDL, spelled with START
# TRANSACTION after its column list (sql/sql_show.cc, store_create_info), then the rows and an XID.
_STARTS_TRANSACTION = re.compile(r"^CREATE\b.*\)\s*START TRANSACTION\b", re.DOTALL)


class BinlogError(RuntimeError):
    """The binlog cannot be read as dblog needs it (configuration, or too many reconnects)."""


class BinlogPurged(BinlogError):
    """The server no longer has the binlog from the position dblog must resume at."""


class SourceDiverged(BinlogError):
    """The server lacks transactions dblog already delivered (a failover to a server with
    another history): final until the user chooses (`dblog.core.resume_verdict`)."""


class BinlogUndecodable(BinlogError):
    """An event dblog needs does not decode (a column type or layout it does not know, or a
    damaged binlog). Final: reading again gives the same bytes. The message names the table,
    the column, the event and its position, and what to do."""


# The server's own words (error 1236) for a position it never logged, as opposed to a purged
# one: MariaDB sql/sql_repl.cc check_slave_start_position ("... which is not in the master's
# binlog"), MySQL ER_SLAVE_HAS_MORE_GTIDS_THAN_MASTER ("Slave has more GTIDs than the master
# has") / ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE ("Replica has more GTIDs than the source has").
_NEVER_LOGGED = re.compile(r"not in the master's binlog|has more GTIDs than the (master|source)", re.IGNORECASE)
_PURGED = re.compile(r"purged", re.IGNORECASE)


def _refused_position(where: str, error: pymysql.err.MySQLError) -> BinlogError:
    """Error 1236 in the words that fit it: a position the server never logged (a failover to a
    server with another history) is no purged binlog, and the reverse."""
    said = error.args[1] if len(error.args) > 1 else str(error)
    if _NEVER_LOGGED.search(said):
        return SourceDiverged(
            f"the server refuses to send the binlog from {where}: it never logged those transactions (the "
            f"server said: {said}). These are transactions dblog delivered that this server never had (a "
            f"failover to a server that lagged, or diverged). Choices: {WAIT}; {RIGHT_SERVER}; or "
            f"{resnapshot_choice('the offsets file')}")
    if _PURGED.search(said):
        return BinlogPurged(
            f"the server cannot send the binlog from {where} ({said}): the binlog files holding it were "
            "purged (expire_logs_days / binlog_expire_logs_seconds or PURGE BINARY LOGS). Changes "
            f"made since are lost to dblog. Remedy: {PURGED_REMEDY}")
    return BinlogError(f"the server refuses to send the binlog from {where}: {said}; dblog check tells "
                       "whether it holds the position")


class _PreparedXa:
    """An XA transaction between XA PREPARE and XA COMMIT / ROLLBACK: its changes, where a new
    reader must start to read them again (the stream's position before its GTID), and the
    tables keyed anew since its changes were decoded (`BinlogSource.key_changed`)."""

    __slots__ = ("gtid", "xid", "resume", "changes", "rekeyed")

    def __init__(self, gtid: Gtid, xid: str, resume: GtidSet, changes: HeldChanges) -> None:
        self.gtid, self.xid, self.resume = gtid, xid, resume
        self.changes = changes  # in memory, or in the store's temporary file
        self.rekeyed: set[TableId] = set()


class Rekeying:
    """Keys RowChanges decoded before their table was keyed anew (`SchemaCatalog.set_key`: a
    signal's surrogate key for a table without a primary key) as a change decoded now is keyed
    (`BinlogSource._table_state`): by `schema_of(table)`'s key, or, for a change logged under an
    earlier definition (`RowChange.definition`), by that definition given the new key
    (`definition_keyed_by`). One per pass over some changes: it keeps each table's schema and
    each definition's re-keyed copy (one object per definition, as the engine expects)."""

    def __init__(self, schema_of: Callable[[TableId], TableSchema]) -> None:
        self._schema_of = schema_of
        self._schemas: dict[TableId, TableSchema | None] = {}
        self._definitions: dict[int, tuple[TableSchema, TableSchema]] = {}  # id(old): (old, re-keyed)

    def __call__(self, change: RowChange) -> None:
        table = change.table
        if table not in self._schemas:
            try:
                self._schemas[table] = self._schema_of(table)
            except LookupError:  # dropped since: keyed by the table map, keep that
                self._schemas[table] = None
        schema = self._schemas[table]
        if schema is None:
            return
        definition = change.definition
        if definition is not None:
            known = self._definitions.get(id(definition))
            if known is None or known[0] is not definition:
                known = self._definitions[id(definition)] = (definition, definition_keyed_by(definition, schema))
            change.definition = schema = known[1]
        if change.op == "u":
            key, old_key = schema.key_of(change.after), schema.key_of(change.before)
            change.key, change.before_key = key, (old_key if old_key != key else None)
        else:
            change.key = schema.key_of(change.after if change.after is not None else change.before)


class _TableState:
    """What the source keeps per table map: the table, whether it is wanted, its key function,
    the schema its readers were compiled with and, when the map disagrees with that schema (DDL
    applied by the server since the rows were logged), the definition the map describes."""

    __slots__ = ("table_map", "table", "wanted", "schema", "key_of", "semantics", "definition", "named",
                 "named_from")

    def __init__(self, table_map: TableMap, table: TableId, wanted: bool) -> None:
        self.table_map = table_map
        self.table = table
        self.wanted = wanted
        self.schema: TableSchema | None = None
        self.definition: TableSchema | None = None
        self.key_of: Callable[[dict], Key] | None = None
        self.semantics: dict[str, SemanticType] = {}
        # A map without names: completed from the history's definition `named_from`
        self.named: TableMap | None = None
        self.named_from: object = None


def _semantics(schema: TableSchema | None) -> dict[str, SemanticType]:
    if schema is None:
        return {}
    return {
        column.name: SemanticType(column.data_type if column.data_type in _SPECIAL_TYPES else None, column.charset)
        for column in schema.columns
    }


def _map_key_of(table_map: TableMap) -> Callable[[dict], Key]:
    names = tuple(table_map.columns[index].name for index in table_map.primary_key)
    return lambda row: tuple(row.get(name) for name in names)


class BinlogSource:
    """Iterate to get BinlogEvents in commit order, strictly after `start`. Blocks when caught
    up; yields a Heartbeat about every `heartbeat_seconds` while idle.

    `connection_settings`: the source's ConnectionSettings (TLS included), or a pymysql-style
    dict of them (host, port, user, password); the user needs REPLICATION SLAVE.
    `server_id`: the replica id this reader registers with; unique among the server's replicas.
    """

    def __init__(
        self,
        connection_settings: ConnectionSettings | Mapping[str, Any],
        server_id: int,
        start: GtidSet,
        schema_of: Callable[[TableId], TableSchema],
        table_filter: Callable[[TableId], bool],
        heartbeat_seconds: float = 1.0,
        *,
        flavor: str | None = None,
        max_reconnects: int = 10,
        resume_from: GtidSet | None = None,
        max_held_rows: int = MEMORY_ROWS,
        max_held_bytes: int = MEMORY_BYTES,
        connection_factory: Callable[[ConnectionSettings, int, float, str], BinlogConnection] = BinlogConnection,
        history: TableHistory | None = None,
        before_reconnect: Callable[[], None] | None = None,
        binlog_base: str | None = None,
    ) -> None:
        self._settings = ConnectionSettings.of(connection_settings)
        # File-position mode (dblog.core.file_positions) when set: the binlog files' base name.
        # Transactions are then named by where they start, and a connection asks for a file and
        # position, not GTIDs.
        self._binlog_base = binlog_base
        self._server_id = server_id
        self._schema_of = schema_of
        self._table_filter = table_filter
        # The definitions as of the stream's position, for table maps without column names
        # (binlog_row_metadata below FULL); None: the server logs FULL
        self._history = history
        self._heartbeat_seconds = heartbeat_seconds
        self._max_reconnects = max_reconnects
        # every prepared XA transaction's changes: (rows, bytes) in memory at most, all of them together
        self._held_changes = HeldChangesStore(max_held_rows, max_held_bytes)
        # Opens a dump session (tests pass one that serves encoded MySQL events: no MySQL server here)
        self._connection_factory = connection_factory
        # Called before each new connection after the first: raises SourceDiverged when the
        # server behind the address lacks what was delivered (a failover), before any read.
        self._before_reconnect = before_reconnect
        self._flavor = flavor or start.flavor or self._detect_flavor()
        positions = "mariadb" if binlog_base is not None else self._flavor  # (file mode: dblog.core.file_positions)
        self._position = start if start.flavor else GtidSet.empty(positions).union(start)
        # Where the stream has read to (every transaction it has passed, delivered or not): the
        # position a connection asks for. Behind `_position` only while a reader started at an
        # earlier run's `resume` reads again what it delivered, to rebuild its held XA transactions.
        self._read_to = self._position if resume_from is None else GtidSet.empty(positions).union(resume_from)
        self._connection: BinlogConnection | None = None
        self._decoder: BinlogDecoder | None = None
        self._binlog_identity: BinlogIdentity | None = None  # the server the open dump session reads
        self._closed = False
        self.reconnects = 0  # connections re-made after a lost one
        self.connected = False  # a dump connection is open (not between a lost one and the next)
        self.filtered_events = 0  # rows events of tables the filter leaves out, skipped undecoded
        # Told True / False when a dump connection opens / is lost (the reader process tells its parent).
        self.on_connection: Callable[[bool], None] | None = None
        # the transaction being read
        self._current: Gtid | None = None
        self._gtid_text: str | None = None  # its GTID in the records (None in file-position mode)
        self._current_server_id: int | None = None
        self._current_ts_ms: int | None = None
        self._standalone = False
        # Inside a MySQL compressed transaction: rows numbered so far (its events all carry the
        # payload's one position, so `row` alone keeps (file, pos, row) unique). None outside one.
        self._payload_rows: int | None = None
        self._skipping = False
        # A connection lost inside a transaction: (its GTID, how many of its events were
        # yielded). The server sends it again from its start; those events are skipped.
        self._cut: tuple[Gtid, int] | None = None
        self._yielded = 0  # events of the current transaction yielded (or skipped as yielded before)
        self._to_skip = 0
        # MariaDB XA: prepared transactions by XID, their changes held until XA COMMIT (emitted
        # then) or XA ROLLBACK (dropped); and the one being read, from its GTID to its XA PREPARE.
        self._held: dict[str, _PreparedXa] = {}
        self._preparing: _PreparedXa | None = None
        self._deciding: str | None = None  # the XID an XA COMMIT / ROLLBACK transaction decides
        self._tables: dict[int, _TableState] = {}  # by table id, for the decoder's current maps
        self._events = self._generate()

    # --- public -----------------------------------------------------------------------------

    @property
    def position(self) -> GtidSet:
        """The start set plus every transaction whose TransactionEnd has been yielded."""
        return self._position

    @property
    def resume(self) -> GtidSet | None:
        """Where a new reader must start to rebuild the held XA transactions (None: none held)."""
        return next(iter(self._held.values())).resume if self._held else None

    @property
    def flavor(self) -> str:
        return self._flavor

    def __iter__(self) -> Iterator[BinlogEvent]:
        return self._events  # the generator itself: one Python frame less per event than __next__

    def __next__(self) -> BinlogEvent:
        return next(self._events)

    def pending(self) -> bool:
        """Whether the next event's bytes are already here (the next iteration will not wait for
        the server); False when unsure (`BinlogConnection.pending`)."""
        connection = self._connection
        return connection is not None and connection.pending()

    def key_changed(self, table: TableId) -> None:
        """`schema_of(table)` now keys the table differently (`SchemaCatalog.set_key`). Rows are
        keyed as they are decoded, so the rows decoded from now on are keyed anew; those held
        for a prepared XA transaction were decoded before and are keyed again when its XA COMMIT
        releases them (`_release`): they become visible, and enter the window, there. (The
        reader process, `dblog.mysql.binlog.process`, re-keys every change of the table it
        receives from then on, the held ones included, which its child releases later.)"""
        for prepared in self._held.values():
            prepared.rekeyed.add(table)
        if self._preparing is not None:
            self._preparing.rekeyed.add(table)

    def close(self) -> None:
        """Stop reading. May be called from another thread to unblock a waiting iteration."""
        self._closed = True
        self.connected = False
        self._drop_connection()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __enter__(self) -> "BinlogSource":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- connection -------------------------------------------------------------------------

    def _detect_flavor(self) -> str:
        conn = self._settings.connect()
        try:
            return server_flavor(conn)
        finally:
            conn.close()

    def _generate(self) -> Iterator[BinlogEvent]:
        failures = 0
        opened = False
        while not self._closed:
            connection = self._connection = self._connection_factory(
                self._settings, self._server_id, self._heartbeat_seconds, self._flavor)
            # A new session starts with a rotate and a format description: nothing carries over.
            decoder = self._decoder = BinlogDecoder(self._flavor)
            self._tables.clear()
            try:
                if opened and self._before_reconnect is not None:
                    self._before_reconnect()
                opened = True
                if self._binlog_base is None:
                    connection.open(self._read_to)
                else:
                    connection.open(self._read_to, FilePosition.of(self._read_to, self._binlog_base))
                # Whose binlog the commit coordinates are in (another server's after a failover)
                self._binlog_identity = getattr(connection, "identity", None)
                self._connection_changed(True)
                decoder.checksum = connection.checksum  # for the events before the format description
                read, decode, handlers = connection.read_event, decoder.decode, _HANDLERS
                while True:
                    record = decode(read())
                    failures = 0
                    if record is not None:
                        yield from handlers[type(record)](self, record)
                    if self._closed:
                        return
            except pymysql.err.MySQLError as error:
                if self._closed:
                    return
                code = error_code(error)
                if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                    raise _refused_position(self._where_read_to(), error) from error
                if not isinstance(error, pymysql.err.InterfaceError) and code not in _RECONNECT_CODES:
                    raise
                problem = error
            except UndecodableEvent as error:
                raise BinlogUndecodable(str(error)) from error
            except BinlogDecodeError as error:
                raise BinlogError(str(error)) from error
            finally:
                self._drop_connection()
                if not self._closed:
                    self._connection_changed(False)
            if self._closed:
                return
            self._cut_transaction()
            failures += 1
            if failures > self._max_reconnects:
                raise BinlogError(f"binlog connection lost {failures} times in a row: {problem}") from problem
            self.reconnects += 1
            pause = min(2.0, 0.05 * 2**failures)
            log.warning("binlog connection lost (%s); reading again from %s in %.2f s",
                        problem, self._where_read_to(), pause)
            time.sleep(pause)

    def _where_read_to(self) -> str:
        if self._binlog_base is not None:
            return f"binlog position {FilePosition.of(self._read_to, self._binlog_base)}"
        return f"GTID position {self._read_to or 'the start'}"

    def _connection_changed(self, connected: bool) -> None:
        if connected != self.connected:
            self.connected = connected
            if self.on_connection is not None:
                self.on_connection(connected)

    # --- events -----------------------------------------------------------------------------

    # What the source does with each record the decoder yields: the methods the event table
    # (`dblog.mysql.binlog.decoder.EVENT_TYPES`) names, dispatched through `_HANDLERS`. Each
    # returns the events to yield (an iterable: a generator, or a tuple when it decides at once).

    def _rows(self, record: RowsRecord) -> Iterable[BinlogEvent]:
        if self._current is None:
            return ()
        if self._skipping or self._preparing or self._to_skip:
            return self._rows_aside(record)
        return self._row_changes(record)

    def _commit(self, record: XidRecord) -> Iterable[BinlogEvent]:
        if self._current is None:
            return ()
        file = self._decoder.file
        return self._end(BinlogCoordinate.of(file, record.pos, self._binlog_identity) if file else None)

    def _heartbeat(self, record: HeartbeatRecord) -> Iterable[BinlogEvent]:
        if self._current is not None:  # heartbeats come only between transactions anyway
            return ()
        file = record.file or self._decoder.file
        reached = None
        if self._binlog_base is not None and file and record.pos:
            reached = position_before(BinlogCoordinate.of(file, record.pos))
            if not self._position.issubset(reached):
                reached = None  # (a heartbeat naming a position behind the stream's: never moves it back)
        return (Heartbeat(file=file, pos=record.pos, reached=reached),)

    def _rotate(self, record: RotateRecord) -> Iterable[BinlogEvent]:
        return ()  # the decoder keeps the file name

    def _xa_prepare(self, record: XaPrepareRecord) -> Iterator[BinlogEvent]:
        if self._current is None:
            return
        prepared, self._preparing = self._preparing, None
        if record.one_phase:
            # MySQL's XA COMMIT ... ONE PHASE: the transaction commits here, its rows with it.
            yield from self._release(prepared, record.pos)
            return
        if prepared is not None:
            self._held[prepared.xid] = prepared
        yield from self._end()

    def _payload(self, record: PayloadRecord) -> Iterator[BinlogEvent]:
        """A MySQL compressed transaction: its events, in order, as if they came one by one."""
        self._payload_rows = 0
        try:
            for inner in record.records:
                yield from _HANDLERS[type(inner)](self, inner)
        finally:
            self._payload_rows = None

    def _begin(self, record: GtidRecord) -> Iterator[BinlogEvent]:
        gtid = record.gtid
        if self._binlog_base is not None:
            # Named by where it starts; records carry no GTID (as Debezium's without GTIDs)
            gtid, self._gtid_text = transaction_at(BinlogCoordinate.of(self._decoder.file, record.start)), None
            if gtid in self._read_to and self._cut is None:
                # The transaction a resumed reader starts at, delivered before: read again, skipped
                # (a file position can only name a transaction's start).
                self._current, self._skipping, self._standalone = gtid, True, record.standalone
                self._yielded = self._to_skip = 0
                self._deciding = record.xid if record.xa == "complete" else None
                return
        elif gtid is None:
            raise BinlogError(
                f"the binlog holds a transaction without a GTID (an ANONYMOUS_GTID event at "
                f"{position(self._decoder.file, record.start)}): the server's gtid_mode was switched from ON, and "
                "GTID positions cannot place such transactions. Set gtid_mode=ON again, or run dblog with "
                'source.position_mode = "file" (move the offsets file away and snapshot the captured tables: '
                "dblog cannot tell which of the transactions since were delivered)")
        else:
            self._gtid_text = str(gtid)
        self._standalone = record.standalone
        self._current_server_id, self._current_ts_ms = record.server_id, record.timestamp * 1000
        self._deciding = record.xid if record.xa == "complete" else None
        if self._cut is not None:
            # The transaction a lost connection cut is sent again from its start: go on where
            # it was cut, without a second Start (nothing of it reaches the engine twice).
            (cut, delivered), self._cut = self._cut, None
            if gtid != cut:
                raise BinlogError(f"after a lost connection inside transaction {cut} the server sent {gtid} first: "
                                  "the binlog changed under dblog (was it purged or reset?)")
            self._current, self._skipping = gtid, False
            self._to_skip, self._yielded = delivered, 0  # counted again as they come
            if record.xa == "prepare":
                self._preparing = _PreparedXa(gtid, record.xid, self._read_to, self._held_changes.hold())
            return
        if gtid in self._read_to:
            # A strict server never logs a sequence number at or below one it logged before in
            # the same domain; with gtid_strict_mode=OFF it can (SET gtid_seq_no, SET server_id,
            # errant or multi-source replica writes), and positions made of the last sequence
            # number per domain can then neither tell this transaction apart from one delivered
            # nor place the watermarks. Stop instead of dropping it as "already delivered".
            raise BinlogError(
                f"the binlog holds transaction {gtid} after position {self._read_to}: its sequence number is not "
                "above the last one of its domain, so the server logged it out of order (gtid_strict_mode=OFF, "
                "SET gtid_seq_no or a replica's errant writes). dblog cannot place it: set SET GLOBAL "
                "gtid_strict_mode=ON (and in the server's configuration), then move dblog's offsets file away "
                "and start again from the current position with a snapshot of the captured tables"
            )
        self._current = gtid
        self._yielded = self._to_skip = 0
        self._skipping = gtid in self._position  # delivered before the reader's restart; read again for XA
        if record.xa == "prepare":
            # Its changes are held, not yielded, until its XA COMMIT; a reader started anew
            # reads again from here to hold them again (`resume`).
            self._preparing = _PreparedXa(gtid, record.xid, self._read_to, self._held_changes.hold())
        if not self._skipping:
            yield TransactionStart(gtid=gtid, server_id=record.server_id, ts_ms=record.timestamp * 1000,
                                   file=self._decoder.file, pos=record.pos)

    def _end(self, commit: BinlogCoordinate | None = None) -> Iterator[BinlogEvent]:
        gtid, skipped = self._current, self._skipping
        self._current, self._skipping, self._to_skip = None, False, 0
        if self._deciding is not None:
            decided = self._held.pop(self._deciding, None)
            if decided is not None:
                decided.changes.close()
            self._deciding = None
        read_to, delivered = self._read_to, self._position
        if self._binlog_base is not None:  # the position moves to where the transaction ends
            gtid = transaction_end(BinlogCoordinate.of(self._decoder.file, self._decoder.log_pos))
        if skipped:
            self._read_to = read_to.with_gtid(gtid)
            return
        self._position = delivered.with_gtid(gtid)
        # The same set once a restarted reader has read past what it had delivered.
        self._read_to = self._position if read_to is delivered else read_to.with_gtid(gtid)
        yield TransactionEnd(gtid, commit, self.resume)

    def _cut_transaction(self) -> None:
        """The connection was lost: remember where a transaction it was inside was cut."""
        if self._current is not None:
            if self._preparing is not None:
                self._preparing.changes.close()
                self._preparing = None  # sent again in full: held again from its start
                if not self._skipping:
                    self._cut = (self._current, 0)
            elif not self._skipping:
                # Cut again before passing what an earlier cut left: those count as delivered too.
                self._cut = (self._current, self._yielded + self._to_skip)
        self._current, self._skipping, self._to_skip, self._deciding = None, False, 0, None

    def _rows_aside(self, record: RowsRecord) -> Iterator[RowChange]:
        """Rows of an XA transaction being prepared (held), or of a transaction resent after a
        cut (the first `_to_skip` were yielded before it)."""
        if self._preparing is not None:
            self._preparing.changes.extend(self._row_changes(record))
            return
        if self._skipping:
            return
        for change in self._row_changes(record):
            if self._to_skip:
                self._to_skip -= 1
                continue
            yield change

    def _query(self, record: QueryRecord) -> Iterator[BinlogEvent]:
        if self._current is None:
            return
        sql = record.sql.strip()
        keyword = sql.upper()
        if keyword == "BEGIN":
            self._standalone = False
            return
        if keyword in ("COMMIT", "ROLLBACK"):
            # COMMIT ends a group of non-transactional tables; ROLLBACK one whose
            # non-transactional changes happened anyway: both are the group's end.
            yield from self._end()
            return
        if self._flavor == "mysql" and keyword.startswith("XA "):
            yield from self._mysql_xa(keyword, record)
            return
        if self._deciding is not None and keyword.startswith(("XA COMMIT", "XA ROLLBACK")):
            yield from self._decide_xa(keyword.startswith("XA COMMIT"), record)
            return
        if not self._skipping and not keyword.startswith(_NOT_SCHEMA_CHANGES):
            self._yielded += 1
            if self._to_skip:
                self._to_skip -= 1
            else:
                change = SchemaChange(gtid=self._current, db=record.db, sql=redact_credentials(sql), source=SourceInfo(
                    self._gtid_text, self._decoder.file, record.pos, 0, self._current_server_id,
                    self._current_ts_ms))
                if self._history is not None:
                    self._history.schema_changed(change)  # (a credential cannot change a definition)
                yield change
        if self._standalone and not _STARTS_TRANSACTION.search(keyword):
            yield from self._end()

    def _mysql_xa(self, keyword: str, record: QueryRecord) -> Iterator[BinlogEvent]:
        """MySQL's XA statements, as its transaction boundary parser reads them (MariaDB flags
        its GTID events instead): `XA START` opens a transaction held like a prepared one until
        its XA_PREPARE event (one phase: commits there; else held until decided); `XA END` is
        inside it; `XA COMMIT` / `XA ROLLBACK` under a GTID of their own decide one prepared
        earlier; `XA ROLLBACK` inside the XA START's transaction ends it unprepared."""
        if keyword.startswith("XA START"):
            self._standalone = False
            if self._preparing is None:
                xid = keyword[len("XA START"):].strip()
                self._preparing = _PreparedXa(self._current, xid, self._read_to, self._held_changes.hold())
        elif keyword.startswith("XA ROLLBACK") and self._preparing is not None:
            # Rolled back before XA PREPARE: only changes to non-transactional tables are ever
            # logged for it, and those happened anyway (as with a plain ROLLBACK query).
            prepared, self._preparing = self._preparing, None
            yield from self._release(prepared, record.pos, storage_commit=False)
        elif keyword.startswith(("XA COMMIT", "XA ROLLBACK")):
            commit = keyword.startswith("XA COMMIT")
            self._deciding = keyword[len("XA COMMIT" if commit else "XA ROLLBACK"):].strip()
            yield from self._decide_xa(commit, record)

    def _decide_xa(self, commit: bool, record: QueryRecord) -> Iterator[BinlogEvent]:
        """XA COMMIT: the prepared transaction's changes, in this transaction; XA ROLLBACK:
        nothing of them. Either way the prepared one is forgotten at this transaction's end."""
        prepared = self._held.get(self._deciding)
        if commit and not self._skipping:
            if prepared is None:
                raise BinlogError(
                    f"XA COMMIT {self._deciding} (transaction {self._current}) commits an XA transaction prepared "
                    "before the position this reader started at: its changes are not known. "
                    "Snapshot the tables it changed (execute-snapshot) after moving dblog's offsets file away, "
                    "and decide prepared XA transactions (XA RECOVER) before dblog starts for the first time"
                )
            yield from self._release(prepared, record.pos)
            return
        yield from self._end()

    def _release(self, prepared: _PreparedXa | None, pos: int, storage_commit: bool = True) -> Iterator[BinlogEvent]:
        """The held changes of `prepared`, committed by the open transaction at `pos` (its XA
        COMMIT query, or MySQL's one-phase XA_PREPARE event), then that transaction's end.

        The changes were stamped and keyed when their XA PREPARE was read; they are keyed again
        where their table was keyed anew since (`key_changed`), and stamped again with the
        committing transaction's coordinates (GTID, file, position, row 0..n-1), as the rows of
        any other transaction are. A sink that keeps positions (the Iceberg sink's committed
        GTID set, its binlog sequence) would otherwise take them for changes it already holds:
        the PREPARE's GTID is delivered, as an empty transaction, long before."""
        changes = prepared.changes if prepared is not None else ()
        gtid, file = self._gtid_text, self._decoder.file
        server_id, ts_ms = self._current_server_id, self._current_ts_ms
        if not self._skipping:  # delivered before a restart, read again only to rebuild held ones
            skip = self._to_skip
            rekeyed = prepared.rekeyed if prepared is not None else ()
            rekey = Rekeying(self._schema_of) if rekeyed else None
            for row, change in enumerate(changes):  # read back from disk, if they were spilled
                if row >= skip:
                    change.source = SourceInfo(gtid, file, pos, row, server_id, ts_ms)
                    if rekey is not None and change.table in rekeyed:
                        rekey(change)  # keyed as of this commit, where it becomes visible
                    yield change
        self._yielded, self._to_skip = len(changes), 0
        if prepared is not None:
            changes.close()
        # A storage-engine commit: a chunk read after it must see its changes.
        yield from self._end(BinlogCoordinate.of(file, pos, self._binlog_identity) if file and storage_commit else None)

    # --- rows -------------------------------------------------------------------------------

    def _table_state(self, record: RowsRecord) -> _TableState:
        table_map = record.table_map
        state = self._tables.get(table_map.table_id)
        if state is None or state.table_map is not table_map:
            table = TableId(table_map.db, table_map.table)
            state = self._tables[table_map.table_id] = _TableState(table_map, table, self._table_filter(table))
        if state.wanted:
            if not table_map.has_names and table_map.error is None:  # (one that does not decode says why itself)
                table_map = self._named_map(state, record)
            try:
                schema = self._schema_of(state.table)
            except LookupError:
                # The table is gone (dropped since this event was written): decode what the binlog
                # says, keyed by its own primary-key metadata.
                schema = None
            if schema is not state.schema or state.key_of is None:
                # Checked once per new map or schema (a map repeats as the same object while its
                # bytes do): rows logged before DDL the server has applied since carry the
                # definition of their time, which also keys them.
                table_map.readers.clear()  # compiled with the old schema's semantics
                state.schema = schema
                state.definition = definition = definition_in_force(table_map, schema) if schema is not None else \
                    definition_of_map(table_map, state.table)
                if definition is not None:
                    schema = definition
                state.key_of = schema.key_of if schema is not None else _map_key_of(table_map)
                state.semantics = _semantics(schema)
        return state

    def _named_map(self, state: _TableState, record: RowsRecord) -> TableMap:
        """The map of `record` (without column names) completed from the history's definition of
        its table; the same object while that definition stays (its readers compiled once)."""
        table = state.table
        history = self._history
        definition = history.definition(table) if history is not None else None
        if definition is None:
            where = f"{event_name(record.event_type)} event ending at {position(record.file, record.pos)}"
            if history is None:
                raise BinlogUndecodable(
                    f"the binlog has no column names for {table} ({where}): the server logs binlog_row_metadata below "
                    "FULL and this reader keeps no schema history. Set binlog_row_metadata=FULL")
            raise BinlogUndecodable(
                f"the binlog has no column names for {table} ({where}; binlog_row_metadata below FULL) and the "
                "schema history does not hold the table as of this position. Set binlog_row_metadata=FULL, or "
                "snapshot the table")
        if state.named is None or state.named_from is not definition:
            try:
                state.named = map_with_definition(state.table_map, definition)
            except DefinitionMismatch as error:
                raise BinlogUndecodable(
                    f"{error}, at the {event_name(record.event_type)} event ending at "
                    f"{position(record.file, record.pos)}: binlog_row_metadata is below FULL, so dblog decodes "
                    f"{table}'s rows with its schema history's definition, which does not describe them. dblog stops "
                    "rather than decode them with a wrong definition. Set binlog_row_metadata=FULL (rows logged from "
                    "then on carry their own definition), or move the offsets file away and snapshot the table"
                ) from error
            state.named_from = definition
            state.key_of = None  # keyed and typed again from the new map
        return state.named

    def _row_changes(self, record: RowsRecord) -> Iterator[RowChange]:
        state = self._table_state(record)
        if not state.wanted:
            self.filtered_events += 1
            return
        if state.named is not None and not record.table_map.has_names:
            record.table_map = state.named
        table, key_of, definition = state.table, state.key_of, state.definition
        decoded = record.rows(state.semantics)
        if decoded.partial:
            raise BinlogError(
                f"the binlog holds a row image of {table} without all its columns: the server (or the writing "
                "session) runs with binlog_row_image=MINIMAL or NOBLOB. dblog needs binlog_row_image=FULL: set it "
                "globally (SET GLOBAL binlog_row_image = 'FULL' and in the server's configuration), then snapshot "
                "the tables changed meanwhile"
            )
        self._yielded += len(decoded.images)
        gtid_text = self._gtid_text
        base = self._payload_rows or 0  # rows before this event in its compressed transaction
        if self._payload_rows is not None:
            self._payload_rows = base + len(decoded.images)
        file, pos = self._decoder.file, record.pos
        server_id, ts_ms = record.server_id, record.timestamp * 1000
        op = record.op
        # each change's share of its event: what holding it costs, counted by the byte bounds
        size = len(record.body) // len(decoded.images) if decoded.images else 0
        if op == "c":
            for index, image in enumerate(decoded.images):
                yield RowChange(table, "c", key_of(image), None, image,
                                SourceInfo(gtid_text, file, pos, base + index, server_id, ts_ms), size=size, definition=definition)
        elif op == "d":
            for index, image in enumerate(decoded.images):
                yield RowChange(table, "d", key_of(image), image, None,
                                SourceInfo(gtid_text, file, pos, base + index, server_id, ts_ms), size=size, definition=definition)
        else:
            for index, (before, after) in enumerate(decoded.images):
                key, old_key = key_of(after), key_of(before)
                # Stored values, compared exactly: a respelling the collation calls equal ('abc' ->
                # 'ABC', 'abc' -> 'abc ') is a key change too, so sinks drop the old spelling.
                yield RowChange(table, "u", key, before, after, SourceInfo(gtid_text, file, pos, base + index, server_id, ts_ms),
                                old_key if old_key != key else None, size, definition)


# The source's handler of each record class, as the event table names them.
_HANDLERS = record_handlers(BinlogSource)
