"""The binlog read and decoded in a second process: `BinlogReaderProcess` (`source.reader_process`).

The engine's loop is one Python thread: reading the binlog socket, decoding row events, the
watermark window and the sink all share one core's worth of GIL. `BinlogReaderProcess` runs
`dblog.mysql.binlog.BinlogSource` in a child process and hands the engine batches of the events it
yields, pickled through a pipe, so that decoding (about 20 µs per OLTP row here) happens on
another core and the engine only unpickles (about 4 µs per row). It offers what the engine uses of
`BinlogSource`: iteration of BinlogEvents in commit order, `position`, `key_changed`, and
`close()` (also from another thread); the child's BinlogError / BinlogPurged (and pymysql
errors) are raised again in the engine's process with their type and message, after every
event the child yielded before them.

The child. Started with `subprocess` (fork + exec, as multiprocessing's "spawn" does, never a
bare fork of a process that may have other threads; without multiprocessing's resource-tracker
process and without re-running the parent's `__main__` module). It gets its arguments through a
control pipe, builds its own `ChunkReader` for `schema_of` (with the engine's given keys) and
applies the engine's table filter itself (`source.includes(table) or table == signal table`,
from the configuration). It dies with the engine: it watches the control pipe, whose only
writer is the engine's process, and exits at its end of file, i.e. on `close()` or when the
engine's process dies however it dies (SIGKILL included); `close()` also waits for it, and kills
it after a grace period.

Batching rule (the child). Events are appended to a batch, which is sent
- when it holds `batch_events` events (512): a big transaction, or a backlog, moves in bulk;
- when its row changes took `BATCH_BYTES` (8 MiB) in the binlog: rows of large BLOBs move a few
  at a time, so that a batch in each of its places (below) stays small whatever the rows;
- at a TransactionEnd or Heartbeat, when the socket has no further byte already received
  (`BinlogSource.pending`): the child is about to wait for the server, so nothing is held back
  while it waits; a caught-up stream sends each transaction as it commits;
- at a TransactionEnd or Heartbeat, when `flush_seconds` (2 ms) have passed since the last
  send: under a steady stream that never leaves the socket empty, no event waits longer.
An event never waits in a batch for the server; the added latency is at most about 2 ms plus
one pipe hop.

Backpressure. The child writes each pickled batch into the pipe itself, and the pipe holds
`pipe_bytes` (1 MiB, F_SETPIPE_SZ; Linux's default 64 KiB where that is refused): when the engine
is behind, the pipe fills and the write blocks the child, which stops reading the socket, and the
server waits, as it would for an engine reading in-process. In flight at once: what the pipe
holds (about 60 batches of OLTP transactions), plus the batch being written, the one the child
builds and the one the engine iterates, each at most `batch_events` events and about
`BATCH_BYTES`. (A sender thread
with a bounded queue, tried first, halved the throughput: the decoding thread holds the GIL and
the sender waited up to the 5 ms switch interval for it at every batch.)

Schemas. The child decodes with its own schema cache: it forgets it when it yields a
SchemaChange itself, exactly where the engine (in one process) forgets its own on dispatching
that event, before any later row is decoded. Keys set at run time (`SchemaCatalog.set_key`, a
signal's surrogate key for a table without a primary key) are known to the engine only: after
one, the engine calls `key_changed(table)` and from then on this class re-keys that table's
RowChanges in the engine's process with the engine's own `schema_of(table)` (`Rekeying`: rows
decoded by the child before the change, still in flight, included, and the rows of an XA
transaction prepared before it that the child releases at its XA COMMIT), which is what an
in-process BinlogSource keys them with.

Cost. The work is split, not saved: the child pickles (about 3 µs per row on top of decoding)
and the engine unpickles, so dblog as a whole spends some 30-50% more CPU per binlog row
(benchmarks/oltp.py --reader-process, on 2 cores). It pays where decoding would otherwise wait
for the engine's one thread: with a core to spare, or a busy machine where two runnable
processes get two shares of it; a snapshot under writers gains most (the child decodes while
the engine reads a chunk, so windows close sooner). Start-up: the child is a new interpreter
that imports the decoder, pymysql and the configuration model and connects: its first event
arrives about 0.3 s after start here (in-process: 25 ms); `started_seconds` says it. It loads no
collations (`ChunkReader(collations=False)`): they serve the engine's window, not the decoder.
"""

from __future__ import annotations

import io
import logging
import math
import operator
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.events import (
    BinlogEvent,
    Heartbeat,
    RowChange,
    SchemaChange,
    SourceInfo,
    TableId,
    TransactionEnd,
    TransactionStart,
)
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import Gtid, GtidSet
from dblog.core.visibility import BinlogCoordinate
from dblog.mysql.binlog.source import BinlogError, Rekeying
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.schema import TableSchema

try:
    import fcntl
except ImportError:  # not POSIX: the class cannot run there (pass_fds) but the engine still imports
    fcntl = None

__all__ = ["BinlogReaderProcess"]

log = logging.getLogger("dblog")

BATCH_EVENTS = 512
BATCH_BYTES = 8 << 20  # a batch's row changes, as the binlog carried them: rows of large BLOBs go a few at a time
PIPE_BYTES = 1 << 20
FLUSH_SECONDS = 0.002
_CLOSE_GRACE_SECONDS = 5.0
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota (a
    container limited to 1.5 CPUs has 2 usable cores however many the host shows)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def _cgroup_quota(root: Path) -> float | None:
    """CPUs of the cgroup quota (v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`);
    None when unlimited or unreadable."""
    try:
        limit, period = (root / "cpu.max").read_text().split()[:2]
        return None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def reader_process_wanted(setting: bool | str) -> bool:
    """`source.reader_process` resolved: "auto" means on where a second core is usable (on one
    core the child only adds the pickling's CPU) and the platform is POSIX."""
    if setting == "auto":
        return os.name == "posix" and usable_cores() >= 2
    return bool(setting)
_SIZE, _LARGE_SIZE = struct.Struct("!i"), struct.Struct("!Q")  # multiprocessing.connection's framing


@dataclass
class _ReaderArguments:
    """What the child needs, sent pickled through the control pipe."""

    connection_settings: ConnectionSettings  # TLS settings included: the child connects as the engine does
    server_id: int
    start: GtidSet
    flavor: str | None
    heartbeat_seconds: float
    source_config: Any  # dblog.runtime.config.SourceConfig: its `captures` is the engine's filter
    signal_table: TableId | None
    key_columns: dict[TableId, tuple[str, ...]]
    batch_events: int
    flush_seconds: float
    log_level: int
    resume_from: GtidSet | None = None
    # The engine's log format (its root handler's formatter, pickled: `--log-format json` is
    # JSON in this process too); None: the default text format.
    log_formatter: logging.Formatter | None = None
    # The schema history's document as of `start` (binlog_row_metadata below FULL: the child
    # decodes nameless table maps with it); None: the server logs FULL
    definitions: dict | None = None
    # Where the engine keeps its offsets: a refusal at a reconnect names it in its choices
    offsets_path: str | None = None
    # File-position mode (dblog.core.file_positions): whose binlog the positions point into
    binlog_identity: BinlogIdentity | None = None


@dataclass
class _Failure:
    """What ended the child's iteration: the exception (pickled, when it survives a round
    trip), else its type name and message; and the child's traceback, for the log."""

    error: bytes | None
    kind: str
    message: str
    traceback: str


# --- pickling: events as constructor calls ----------------------------------------------------

# The slots dataclasses' own pickling (object.__reduce_ex__, then a __setstate__ that walks
# dataclasses.fields() in Python) costs the engine more per row than the rest of the unpickling
# together; as `(class, field values)` they are rebuilt by one call each. The child pickles
# every event it decodes (its costliest step after decoding), so the commonest objects get
# flatter forms still: a RowChange with its SourceInfo's fields in one tuple, a Gtid rebuilt
# without re-validating what the child's decoder built (and a transaction's Start and End share
# one, pickled once). Measured on a backlog's batches: 3.9 -> 2.7 µs per row change to pickle,
# the unpickling as before.
def _reducer(cls: type) -> Callable[[Any], tuple]:
    fields = cls.__slots__
    values = operator.attrgetter(*fields) if len(fields) > 1 else (lambda obj: (getattr(obj, fields[0]),))
    return lambda obj: (cls, values(obj))


def _row_change_reduced(change: RowChange) -> tuple:
    source = change.source
    return (_row_change, (change.table, change.op, change.key, change.before, change.after, change.before_key,
                          change.size, change.definition, source.gtid, source.file, source.pos, source.row,
                          source.server_id, source.ts_ms, source.snapshot, source.initial_marker))


def _row_change(table: TableId, op: str, key: tuple, before: Any, after: Any, before_key: Any, size: int,
                definition: Any, *source: Any) -> RowChange:
    return RowChange(table, op, key, before, after, SourceInfo(*source), before_key, size, definition)


_new_object = object.__new__


def _gtid(source: str, seq: int, server_id: int | None) -> Gtid:
    gtid = _new_object(Gtid)
    gtid.__dict__.update(source=source, seq=seq, server_id=server_id)  # frozen: no __setattr__, no checks
    return gtid


_gtid_fields = operator.attrgetter("source", "seq", "server_id")
_coordinate_fields = operator.attrgetter("sequence", "pos", "file", "server")

_REDUCERS: dict[type, Callable[[Any], tuple]] = {
    cls: _reducer(cls) for cls in (SourceInfo, TransactionStart, TransactionEnd, SchemaChange, Heartbeat)
}
_REDUCERS[RowChange] = _row_change_reduced
_REDUCERS[Gtid] = lambda gtid: (_gtid, _gtid_fields(gtid))
_REDUCERS[BinlogCoordinate] = lambda coordinate: (BinlogCoordinate, _coordinate_fields(coordinate))


def _dumps(item: object) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _REDUCERS
    pickler.dump(item)
    return buffer.getvalue()


# --- the engine's side -------------------------------------------------------------------------


class BinlogReaderProcess:
    """Iterate to get BinlogEvents in commit order, strictly after `start`, read and decoded by
    a child process (see the module docstring). Arguments as `BinlogSource`'s, except:

    `source_config` and `signal_table`: the child keeps the events of tables for which
    `source_config.includes(table) or table == signal_table`.
    `schemas`: the engine's SchemaCatalog. Its given keys (`source.key_columns`, surrogate keys
    set before this starts) key the child's schemas; its `schema` re-keys the tables named to
    `key_changed` later.
    """

    def __init__(
        self,
        connection_settings: ConnectionSettings | Mapping[str, Any],
        server_id: int,
        start: GtidSet,
        source_config: Any,
        signal_table: TableId | None,
        schemas: Any,
        heartbeat_seconds: float = 1.0,
        *,
        flavor: str | None = None,
        batch_events: int = BATCH_EVENTS,
        pipe_bytes: int = PIPE_BYTES,
        flush_seconds: float = FLUSH_SECONDS,
        resume_from: GtidSet | None = None,
        definitions: dict | None = None,
        offsets_path: str | None = None,
        binlog_identity: BinlogIdentity | None = None,
    ) -> None:
        self._schema_of: Callable[[TableId], TableSchema] = schemas.schema
        flavor = flavor or start.flavor
        self._flavor = flavor
        positions = "mariadb" if binlog_identity is not None else flavor  # (file mode: dblog.core.file_positions)
        start = start if start.flavor or positions is None else GtidSet.empty(positions).union(start)
        self._closed = False
        self._cpu_at_close: float | None = None
        self._close_lock = threading.Lock()
        self._rekeyed: set[TableId] = set()
        # The batch being iterated, its iterator, and how far `position` has counted in it.
        self._batch: list[BinlogEvent] = []
        self._iterator = iter(self._batch)
        self._counted: tuple[int, GtidSet] = (0, start)
        self.started_seconds: float | None = None  # from start to the child's first batch of events
        # The child's BinlogSource as of its last message: connected, reconnects, filtered_events.
        self._source_state: tuple[bool, int, int] = (False, 0, 0)
        self._started = time.perf_counter()
        arguments = _ReaderArguments(
            ConnectionSettings.of(connection_settings), server_id, start, flavor, heartbeat_seconds, source_config, signal_table,
            schemas.given_keys(), batch_events, flush_seconds,
            log.getEffectiveLevel(), resume_from, _picklable_formatter(), definitions, offsets_path, binlog_identity,
        )
        control_read, control_write = os.pipe()
        data_read, data_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE, repr(sys.path), str(control_read), str(data_write)],
                pass_fds=(control_read, data_write), stdin=subprocess.DEVNULL, close_fds=True,
            )
        except BaseException:
            for fd in (control_read, control_write, data_read, data_write):
                os.close(fd)
            raise
        os.close(control_read)
        os.close(data_write)
        try:
            if fcntl is not None:
                fcntl.fcntl(data_read, getattr(fcntl, "F_SETPIPE_SZ", 1031), pipe_bytes)
        except OSError:  # above /proc/sys/fs/pipe-max-size, or not Linux: the default size
            pass
        self._control = Connection(control_write, readable=False)
        # Read as multiprocessing's Connection frames messages (the child sends with one), from a
        # file object whose close() is idempotent: the generator's `finally` may run at garbage
        # collection, after a Connection's __del__ had closed the descriptor (a second close
        # could hit a descriptor reused meanwhile).
        self._data = io.open(data_read, "rb", buffering=pipe_bytes)
        self._control.send_bytes(pickle.dumps(arguments, protocol=pickle.HIGHEST_PROTOCOL))
        self._events = self._generate()

    # --- public -------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def flavor(self) -> str | None:
        return self._flavor

    @property
    def position(self) -> GtidSet:
        """The start set plus every transaction whose TransactionEnd has been yielded."""
        batch = self._batch
        consumed = len(batch) - self._iterator.__length_hint__()
        counted, position = self._counted
        for index in range(counted, consumed):
            event = batch[index]
            if type(event) is TransactionEnd:
                position = position.with_gtid(event.gtid)
        self._counted = (consumed, position)
        return position

    def __iter__(self) -> Iterator[BinlogEvent]:
        return self._events

    def __next__(self) -> BinlogEvent:
        return next(self._events)

    @property
    def connected(self) -> bool:
        """Whether the child holds an open dump connection (as of its last message; it sends one
        when the connection is lost or made again)."""
        return self._source_state[0] and not self._closed and self._process.poll() is None

    @property
    def reconnects(self) -> int:
        return self._source_state[1]

    @property
    def filtered_events(self) -> int:
        return self._source_state[2]

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the child has used (Linux /proc; None where unreadable);
        after close(), what it had used when closed."""
        if self._closed:
            return self._cpu_at_close
        return _process_cpu_seconds(self._process.pid)

    def key_changed(self, table: TableId) -> None:
        """`schemas.schema(table)` keys the table differently from now on: key its RowChanges
        with it, those the child decoded before the change included."""
        self._rekeyed.add(table)
        batch = self._batch
        self._rekey(batch, len(batch) - self._iterator.__length_hint__())

    def close(self) -> None:
        """Stop the child, and so the iteration: it ends (without an error) at the end of the
        events already received. May be called from another thread; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._cpu_at_close = _process_cpu_seconds(self._process.pid)
            self._closed = True
            self._control.close()  # the child's watchdog sees the end of the pipe and exits
        try:
            self._process.wait(_CLOSE_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> "BinlogReaderProcess":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the stream -----------------------------------------------------------------------------

    def _generate(self) -> Iterator[BinlogEvent]:
        read, loads = self._data.read, pickle.loads

        def receive() -> bytes:
            header = read(4)
            if len(header) < 4:
                raise EOFError
            (size,) = _SIZE.unpack(header)
            if size == -1:  # over 2 GiB
                (size,) = _LARGE_SIZE.unpack(read(8))
            message = read(size)
            if len(message) < size:
                raise EOFError
            return message

        try:
            while not self._closed:
                try:
                    message = receive()
                except (EOFError, OSError):
                    if self._closed:
                        return
                    try:
                        code = self._process.wait(_CLOSE_GRACE_SECONDS)
                    except subprocess.TimeoutExpired:
                        code = "none yet"
                    raise BinlogError(f"the binlog reader process (pid {self._process.pid}) ended with exit code "
                                      f"{code} without a word (see its output above)") from None
                item = loads(message)
                if type(item) is _Failure:
                    raise self._error(item)
                base, batch, self._source_state = item
                if self.started_seconds is None and batch:  # not the message saying it connected
                    self.started_seconds = time.perf_counter() - self._started
                if self._rekeyed:
                    self._rekey(batch, 0)
                self._counted = (0, base)
                self._batch = batch
                iterator = self._iterator = iter(batch)
                yield from iterator
        finally:
            self._data.close()

    def _rekey(self, batch: list[BinlogEvent], start: int) -> None:
        rekeyed, rekey = self._rekeyed, Rekeying(self._schema_of)
        for index in range(start, len(batch)):
            event = batch[index]
            if type(event) is RowChange and event.table in rekeyed:
                rekey(event)

    def _error(self, failure: _Failure) -> BaseException:
        error: BaseException | None = None
        if failure.error is not None:
            try:
                error = pickle.loads(failure.error)
            except Exception:
                error = None
        if error is None:
            error = BinlogError(f"{failure.kind}: {failure.message}")
        error.add_note(f"raised in the binlog reader process (pid {self._process.pid}):\n{failure.traceback}")
        return error


def _process_cpu_seconds(pid: int) -> float | None:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# --- the child --------------------------------------------------------------------------------

# What the child runs (python -c): the parent's sys.path, as multiprocessing's spawn sets it,
# then the control and data pipes' descriptors.
_CHILD_CODE = (
    "import ast, sys; sys.path[:] = ast.literal_eval(sys.argv[1]); "
    "from dblog.mysql.binlog.process import _child_main; _child_main(int(sys.argv[2]), int(sys.argv[3]))"
)


def _child_main(control_fd: int, data_fd: int) -> None:
    # A Ctrl-C or a service manager's SIGTERM to the whole process group is the engine's to
    # handle: it stops, then closes this process (or its death does).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    control = Connection(control_fd, writable=False)
    data = Connection(data_fd, readable=False)
    try:
        arguments: _ReaderArguments = pickle.loads(control.recv_bytes())
    except (EOFError, OSError):
        os._exit(0)  # the engine went away before it said anything
    threading.Thread(target=_exit_with_parent, args=(control,), name="dblog-parent-watch", daemon=True).start()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(arguments.log_formatter
                         or logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_from_the_reader)
    logging.basicConfig(level=arguments.log_level, handlers=[handler])
    try:
        _read(arguments, data.send_bytes)
    except BrokenPipeError:
        pass  # the engine's end of the data pipe is closed: nobody left to tell
    except BaseException as error:  # the engine raises it again, after the events sent before it
        try:
            data.send_bytes(_dumps(_failure(error)))
        except BrokenPipeError:
            pass
    os._exit(0)


def _from_the_reader(record: logging.LogRecord) -> bool:
    """Every line of this process says it comes from the binlog reader."""
    record.msg = f"binlog reader: {record.msg}"
    return True


def _picklable_formatter() -> logging.Formatter | None:
    """The formatter of the engine's first root log handler, if it survives pickling."""
    for handler in logging.getLogger().handlers:
        if handler.formatter is not None:
            try:
                return pickle.loads(pickle.dumps(handler.formatter))
            except Exception:
                return None
    return None


def _exit_with_parent(control: Connection) -> None:
    """The engine's process holds the only write end of the control pipe: its end of file means
    close() or the engine's death, whichever way it died."""
    try:
        while True:
            control.recv_bytes()
    except BaseException:
        pass
    os._exit(0)


def _failure(error: BaseException) -> _Failure:
    text = "".join(traceback.format_exception(error))
    try:
        pickled = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(pickled)  # some exceptions pickle but cannot be rebuilt
    except Exception:
        pickled = None
    return _Failure(pickled, type(error).__name__, str(error), text)


def _read(arguments: _ReaderArguments, send: Callable[[bytes], None]) -> None:
    import pymysql

    from dblog.mysql.binlog.source import BinlogSource
    from dblog.mysql.source_connection import SourceConnection

    settings = arguments.connection_settings
    # Its schemas key rows and name UUID/INET columns; the collations that make keys comparable
    # (WEIGHT_STRING of every code point, seconds for some) serve the engine's window only.
    reader = SourceConnection(settings.connect, arguments.key_columns, collations=False)
    try:
        reader.server.flavor()  # connected now, not at the first row event
    except pymysql.MySQLError:
        reader.server.drop_connection()  # the source's own reconnects deal with an unreachable server
    config, signal_table = arguments.source_config, arguments.signal_table
    wanted: dict[TableId, bool] = {}

    def table_filter(table: TableId) -> bool:
        accepted = wanted.get(table)
        if accepted is None:  # regexes per table, not per table map
            accepted = wanted[table] = config.includes(table) or table == signal_table
        return accepted

    reader.schemas.wanted = table_filter  # many tables touched: their schemas loaded in batches
    binlog_base = arguments.binlog_identity.base_name if arguments.binlog_identity is not None else None
    reader.server.file_positions = binlog_base is not None
    history = None
    if arguments.definitions is not None:
        from dblog.mysql.table_definitions import TableDefinitions
        from dblog.mysql.table_history import TableHistory

        # every table whose rows the source decodes: the signal table's too
        history = TableHistory(TableDefinitions(reader.schemas.session.run), reader.server.executed_gtids, table_filter)
        history.restore(arguments.definitions, arguments.start.flavor or arguments.flavor)

    def check_server() -> None:
        """Before the dump connects again (maybe to another server behind the address): refused
        unless the server holds every transaction this reader read, as the engine's own
        connections are (SourceDiverged, BinlogPurged: raised again in the engine's process)."""
        from dblog.mysql.server_history import refuse_unless_resumable, refuse_unless_resumable_at
        from dblog.mysql.server_session import ServerSession

        with ServerSession(settings.connect) as server:
            address, offsets_path = f"{settings.host}:{settings.port}", arguments.offsets_path or "the offsets file"
            identity = arguments.binlog_identity
            if identity is None:
                refuse_unless_resumable(server, address, source.position, offsets_path)
            else:  # file-position mode: the server whose binlog the position points into, still holding it
                refuse_unless_resumable_at(server, address, FilePosition.of(source.position, identity.base_name),
                                           identity, offsets_path)

    source = BinlogSource(settings, arguments.server_id, arguments.start, reader.schemas.schema, table_filter,
                          arguments.heartbeat_seconds, flavor=arguments.flavor, resume_from=arguments.resume_from,
                          max_reconnects=config.binlog_reconnects, max_held_rows=config.max_held_xa_rows,
                          max_held_bytes=config.max_held_xa_bytes, history=history,
                          before_reconnect=check_server, binlog_base=binlog_base)
    limit, flush_seconds = arguments.batch_events, arguments.flush_seconds
    monotonic, pending = time.monotonic, source.pending
    batch: list[BinlogEvent] = []
    size = 0  # the batch's row changes' sizes (RowChange.size)
    append = batch.append
    base = source.position

    def state() -> tuple[bool, int, int]:
        return source.connected, source.reconnects, source.filtered_events

    # A lost or new connection is told at once, in an empty batch (the events before it follow in
    # the batch being built: `base` is where that one starts).
    source.on_connection = lambda connected: send(_dumps((base, [], state())))
    last_sent = monotonic()
    try:
        for event in source:
            append(event)
            kind = type(event)
            if kind is RowChange:
                size += event.size
                if len(batch) < limit and size < BATCH_BYTES:
                    continue
            elif kind is TransactionStart:
                if len(batch) < limit:
                    continue
            elif kind is SchemaChange:
                reader.schemas.forget_schema()  # as the engine does on this event: later rows see the new schema
                if len(batch) < limit:
                    continue
            elif len(batch) < limit and monotonic() - last_sent < flush_seconds and pending():
                continue  # TransactionEnd or Heartbeat, with more of the stream already here
            send(_dumps((base, batch, state())))
            base = source.position
            batch = []
            append = batch.append
            size = 0
            last_sent = monotonic()
    finally:
        if batch:  # what was yielded before an error reaches the engine before the error
            send(_dumps((base, batch, state())))
        source.close()
        reader.close()
