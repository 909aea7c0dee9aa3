"""Debezium's MySQL connector offsets, taken over: `dblog run --debezium-offsets SOURCE` starts
where Debezium stopped (docs/debezium.md, "Taking over Debezium's offsets").

Where they are read from (SOURCE):
- `topic:NAME`: a Kafka Connect worker's offsets topic (`offset.storage.topic`). Each record's key
  is the JSON `["<connector name>", {"server": "<topic.prefix>"}]`, its value the offset's JSON
  (JsonConverter, schemas off); the last record of a key wins and a null value resets it.
- a path: Kafka's file offset store, as Debezium Server and the embedded engine write it
  (`dblog.runtime.java_offset_file`), the same keys and values inside.

What an offset says (Debezium's MySqlOffsetContext / BinlogSourceInfo): `gtids` is the set of
transactions completed before the one to restart in (MySQL `uuid:1-5`; MariaDB `0-1-5`); `file`
and `pos` are where that transaction starts in the binlog; `event` and `row` how many of its
events, and rows of the next event, Debezium already emitted; `snapshot` set while its initial
snapshot runs; `incremental_snapshot_*` an incremental snapshot in flight.

dblog's position is a GTID set of completed transactions, so the hand-over starts from `gtids`
(MariaDB without them: `BINLOG_GTID_POS(file, pos)`, the server's own GTID position at that byte).
The transaction Debezium was inside is read again, and what Debezium emitted of it (its `event` and
`row` skips, counted as Debezium counts them: dblog.runtime.debezium_skips, over the binlog's
events from `file`/`pos`) is saved with the offsets as a cut (dblog.core.delivered_cut) whose
changes dblog drops. An incremental snapshot in flight becomes dblog's snapshot progress
(dblog.runtime.debezium_incremental): its table goes on after Debezium's last key, the others
queued. Everything else is refused with a reason: an unfinished initial snapshot, a snapshot key
dblog cannot read, file/pos without GTIDs on MySQL, another server's offsets, a position the
server purged.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.delivered_cut import DeliveredCut
from dblog.core.events import TableId
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidError, GtidSet
from dblog.core.offsets import Offsets, OffsetsError
from dblog.core.progress import SnapshotProgress
from dblog.runtime.debezium_incremental import (SnapshotNotContinued, check_key_width, snapshot_collections,
                                                snapshot_progress)
from dblog.runtime.debezium_skips import (Annotations, LoggedEvent, SkipsUnknown, cut_after_event, delivered_cut,
                                          open_transaction)

log = logging.getLogger(__name__)

TOPIC_PREFIX = "topic:"


class DebeziumOffsetsError(OffsetsError):
    pass


@dataclass(frozen=True)
class DebeziumOffset:
    connector: str
    server: str  # the topic.prefix (Debezium's source partition {"server": …})
    offset: dict[str, Any]

    @property
    def tables_in_flight(self) -> list[str]:
        """The tables of an incremental snapshot in flight (its `incremental_snapshot_collections`)."""
        return snapshot_collections(self.offset.get("incremental_snapshot_collections"))


def offsets_of(records: Iterable[tuple[bytes | None, bytes | None]], origin: str) -> list[DebeziumOffset]:
    """The offsets the (key, value) records leave, in order: the last record per key wins, a null
    value removes the key (Kafka Connect's offset reset)."""
    latest: dict[tuple[str, str], dict[str, Any] | None] = {}
    for key, value in records:
        if key is None:
            continue
        try:
            name, partition = json.loads(key)
            server = partition["server"]
            latest[(str(name), str(server))] = None if value is None else json.loads(value)
        except (ValueError, TypeError, KeyError) as error:
            raise DebeziumOffsetsError(
                f"{origin} holds a key that is not a Debezium MySQL connector's [name, {{\"server\": prefix}}]: "
                f"{key[:200]!r} ({error})") from None
    return [DebeziumOffset(name, server, offset) for (name, server), offset in latest.items() if offset is not None]


def read_file_store(path: str | Path) -> list[DebeziumOffset]:
    from dblog.runtime.java_offset_file import JavaStreamError, read_offset_file

    try:
        entries = read_offset_file(path)
    except OSError as error:
        raise DebeziumOffsetsError(f"cannot read Debezium's offset file {path}: {error.strerror}") from None
    except JavaStreamError as error:
        raise DebeziumOffsetsError(f"Debezium's offset file {path}: {error}") from None
    return offsets_of(entries.items(), str(path))


def read_offsets_topic(bootstrap: str, topic: str, options: dict[str, Any] | None = None,
                       timeout: float = 30.0) -> list[DebeziumOffset]:
    """A Kafka Connect worker's offsets topic, read from its start to its end (kafka-python)."""
    from kafka import KafkaConsumer, TopicPartition

    origin = f"offsets topic {topic}"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **(options or {}))
    records: list[tuple[bytes | None, bytes | None]] = []
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise DebeziumOffsetsError(f"the {origin} does not exist on {bootstrap}; give the Kafka Connect worker's "
                                       "offset.storage.topic")
        parts = [TopicPartition(topic, number) for number in sorted(partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        deadline = time.monotonic() + timeout
        while any(consumer.position(part) < ends[part] for part in parts):
            if time.monotonic() > deadline:
                raise DebeziumOffsetsError(f"could not read the {origin} to its end within {timeout:.0f} s")
            # One key lives in one partition: the order within it is the order that matters
            for batch in consumer.poll(200).values():
                records.extend((record.key, record.value) for record in batch)
    finally:
        consumer.close()
    return offsets_of(records, origin)


def read_debezium_offsets(source: str, bootstrap: str | None, kafka_options: dict[str, Any] | None = None
                          ) -> list[DebeziumOffset]:
    if source.startswith(TOPIC_PREFIX):
        if not bootstrap:
            raise DebeziumOffsetsError(f"--debezium-offsets {source}: no Kafka cluster to read it from; set "
                                       "kafka.bootstrap_servers (or --bootstrap-servers with --debezium-config)")
        return read_offsets_topic(bootstrap, source[len(TOPIC_PREFIX):], kafka_options)
    return read_file_store(source)


def choose(offsets: list[DebeziumOffset], server: str, origin: str) -> DebeziumOffset:
    """The offset of the connector whose topic.prefix is `server` (dblog's `name`)."""
    mine = [offset for offset in offsets if offset.server == server]
    if len(mine) == 1:
        return mine[0]
    found = ", ".join(f"{offset.connector!r} (topic.prefix {offset.server!r})" for offset in offsets) or "none"
    if not mine:
        raise DebeziumOffsetsError(
            f"{origin} holds no offsets of a connector with topic.prefix {server!r} (dblog's `name`); it holds: "
            f"{found}. Set `name` to the prefix of the connector you take over from")
    raise DebeziumOffsetsError(f"{origin} holds offsets of several connectors with topic.prefix {server!r}: {found}; "
                               "keep one (dblog takes over one connector)")


@dataclass(frozen=True)
class ServerFacts:
    """What the hand-over checks against, read from the source server."""
    flavor: str
    server_id: int
    executed: GtidSet
    purged: GtidSet
    binlog_files: list[str]
    binlog_gtid_pos: Callable[[str, int], str]  # MariaDB's BINLOG_GTID_POS(file, pos)
    # SHOW BINLOG EVENTS IN file FROM pos LIMIT n; None: not read (the skips are not known)
    binlog_events: Callable[[str, int, int], list[LoggedEvent]] | None = None
    # a table's primary key columns (() when it has none); None: not read
    key_columns: Callable[[TableId], tuple[str, ...]] | None = None
    # File-position mode (source.position_mode; dblog.core.file_positions): whose binlog, else None
    binlog: BinlogIdentity | None = None


def position_of(chosen: DebeziumOffset, facts: ServerFacts, origin: str) -> tuple[GtidSet, list[str]]:
    """The GTID set dblog starts from for Debezium's `chosen` offset, and the warnings to log;
    DebeziumOffsetsError when Debezium's offset cannot be taken over exactly."""
    offset = chosen.offset
    what = f"{origin}, connector {chosen.connector!r}"
    if offset.get("snapshot") in (True, "true"):
        raise DebeziumOffsetsError(
            f"{what}: Debezium stopped during its initial snapshot (offset `snapshot`: true), which it would restart; "
            "there is no streaming position to take over. Let Debezium finish its snapshot, or start dblog without "
            "--debezium-offsets (snapshot.startup = \"initial\" reads every table)")
    server_id = offset.get("server_id")
    if server_id is not None and int(server_id) != facts.server_id:
        raise DebeziumOffsetsError(
            f"{what}: the offset was read from server_id {server_id}, the source is server_id {facts.server_id}; "
            "these are another server's offsets: point source.host at the server Debezium read. (On a replica the "
            "offset holds the server_id of the primary that wrote the last event, and dblog refuses it too: take the "
            "offset over on the primary, or remove `server_id` from it if you know it is this server's)")
    gtids = offset.get("gtids")
    warnings: list[str] = []
    if facts.binlog is not None:
        return _file_position_of(offset, facts, what)
    if gtids:
        try:
            position = GtidSet.parse(str(gtids).replace("\n", ""), facts.flavor)
        except GtidError as error:
            raise DebeziumOffsetsError(f"{what}: its gtids {gtids!r} are not a {facts.flavor} GTID set ({error})") from None
    elif offset.get("file") and facts.flavor == "mariadb":
        file, pos = _binlog_file_and_pos(offset, facts, what)
        # Debezium's MySQL connector on MariaDB sees no transaction start: its `pos` may lie
        # inside a transaction, where BINLOG_GTID_POS counts that transaction as done
        start = transaction_start(facts, file, pos) if facts.binlog_events is not None else None
        text = facts.binlog_gtid_pos(file, pos if start is None else start)
        position = GtidSet.parse(text or "", "mariadb")
    elif offset.get("file"):
        raise DebeziumOffsetsError(
            f"{what}: the offset holds binlog file {offset['file']} and position {offset.get('pos')} but no `gtids` "
            "(Debezium ran with gtid_mode OFF), and dblog reads this server by GTIDs (source.position_mode = "
            '"gtid"): set source.position_mode = "file" (or "auto"), as Debezium reads it')
    else:
        raise DebeziumOffsetsError(f"{what}: the offset holds neither `gtids` nor `file`: {offset}")
    lost = facts.purged - position
    if lost:
        raise DebeziumOffsetsError(
            f"{what}: the server purged transactions Debezium had not read (its position {position or 'the start'}, "
            f"the server's binlogs start after {facts.purged}); the changes since are lost to both tools: start without --debezium-offsets and snapshot the tables")
    unknown = position - facts.executed
    if unknown:
        raise DebeziumOffsetsError(
            f"{what}: the offset's {position} holds transactions this server never logged (its binlog ends at "
            f"{facts.executed or 'its start'}): another server's offsets, "
            "or a binlog reset; point source.host at the server Debezium read")
    return position, warnings


def snapshot_in_flight(chosen: DebeziumOffset, facts: ServerFacts, origin: str) -> SnapshotProgress | None:
    """dblog's snapshot progress continuing Debezium's incremental snapshot in flight (None: none)."""
    try:
        progress = snapshot_progress(chosen.offset)
        if progress is not None and facts.key_columns is not None:
            check_key_width(progress, facts.key_columns)
    except SnapshotNotContinued as error:
        tables = ", ".join(chosen.tables_in_flight)
        raise DebeziumOffsetsError(
            f"{origin}, connector {chosen.connector!r}: an incremental snapshot was in flight (of {tables}) and dblog "
            f"cannot continue it exactly: {error}. Stop it in Debezium (a stop-snapshot signal) and let it commit an "
            f"offset, or take over and then send `dblog signal execute-snapshot` for {tables}") from None
    if progress is not None:
        current = progress.current
        log.info("Debezium's incremental snapshot goes on in dblog: %s from %s (up to %s), then %s", current.table,
                 "its start" if current.last_key is None else f"after key {current.last_key}",
                 current.max_key if current.max_key is not None else "its maximum key, read now",
                 ", ".join(str(entry.table) for entry in progress.queue[1:]) or "no other table")
    return progress


# Events read past Debezium's `event` count to find the rows event its `row` count is of (a
# table map, an annotation and a Rows_query event may lie between); events per SHOW BINLOG EVENTS
_EVENTS_AFTER_SKIPS = 16
_EVENTS_PER_READ = 1000


def transaction_start(facts: ServerFacts, file: str, pos: int) -> int | None:
    """Where the transaction open at `file`:`pos` starts (None: `pos` lies between transactions),
    the binlog file read from its start (a take-over reads it once); MySQL's and MariaDB's events
    (`open_transaction`)."""
    at, state = 4, None  # the first event follows the file's magic number
    while at < pos:
        events = [logged for logged in facts.binlog_events(file, at, _EVENTS_PER_READ) if logged.end <= pos]
        if not events:
            break
        state, at = open_transaction(events, state), events[-1].end
    return state.start if state is not None else None


def delivered_of(chosen: DebeziumOffset, facts: ServerFacts, origin: str) -> tuple[DeliveredCut | None, list[str]]:
    """What Debezium already emitted of the transaction it stopped inside (its `event` and `row`
    counts from the transaction's start at `file`/`pos`), as the changes dblog drops when it reads
    that transaction; None when it emitted none of it. When the counts cannot be placed, None and
    a warning: the transaction is read again whole."""
    offset = chosen.offset
    event, row = int(offset.get("event", 0) or 0), int(offset.get("row", 0) or 0)
    if not (event or row):
        return None, []
    file, pos = offset.get("file"), offset.get("pos")
    where = f"the transaction Debezium stopped inside (it had emitted {event} of its events and {row} rows of the next)"
    try:
        if not file or pos is None or facts.binlog_events is None:
            raise SkipsUnknown("the offset names no binlog file and position" if facts.binlog_events is not None
                               else "the binlog was not read")
        file, pos = str(file), int(pos)
        if file not in facts.binlog_files:
            raise SkipsUnknown(f"its binlog file {file} is not on the server")
        if not event:  # Debezium saw no transaction start: `pos` ends the rows event it emitted from
            cut = cut_after_event(file, transaction_start(facts, file, pos) or 0, pos, row)
            log.info("%s: dblog skips its changes logged before %s:%d row %d", where, cut.file, cut.pos, cut.rows)
            return cut, []
        # MariaDB's ANNOTATE_ROWS reach Debezium only when asked for: never by its MySQL
        # connector, whose offsets on MariaDB hold no `gtids`; its MariaDB connector's do
        annotations = (Annotations.NOT_SENT if facts.flavor != "mariadb" or not offset.get("gtids")
                       else Annotations.UNKNOWN)
        cut, note = delivered_cut(file, facts.binlog_events(file, pos, event + _EVENTS_AFTER_SKIPS), event, row,
                                  annotations)
    except SkipsUnknown as error:
        return None, [f"{where}: dblog reads that transaction again in full, so its records Debezium already sent "
                      f"come twice ({error})"]
    log.info("%s: dblog skips its changes logged before %s:%d row %d", where, cut.file, cut.pos, cut.rows)
    return cut, [note] if note else []
def _binlog_file_and_pos(offset: dict, facts: ServerFacts, what: str) -> tuple[str, int]:
    """The offset's binlog `file` and `pos`, refused when the server no longer has that file."""
    file, pos = str(offset["file"]), int(offset.get("pos", 4))
    if file not in facts.binlog_files:
        raise DebeziumOffsetsError(
            f"{what}: its binlog file {file} is not on the server (its binlogs: "
            f"{', '.join(facts.binlog_files) or 'none'}): purged, or another server's. The changes since are "
            "lost to both tools: start without --debezium-offsets and snapshot the tables")
    return file, pos


def _file_position_of(offset: dict, facts: ServerFacts, what: str) -> tuple[GtidSet, list[str]]:
    """File-position mode: Debezium's `file` and `pos` as dblog's position. Debezium's `pos` may
    point inside the transaction it stopped in (at its XID or a rows event, with `event` / `row`
    to skip): dblog reads that transaction again from its start, and drops what Debezium sent
    of it as in GTID mode (`delivered_of`)."""
    if not offset.get("file"):
        raise DebeziumOffsetsError(
            f"{what}: the offset holds no binlog `file` (only {sorted(offset)}), and dblog reads this server by binlog "
            'file and position: set source.position_mode = "gtid" to start from its `gtids`')
    file, pos = _binlog_file_and_pos(offset, facts, what)
    start = transaction_start(facts, file, pos) if facts.binlog_events is not None else None
    at = FilePosition(file, pos if start is None else start)
    warnings = []
    if at.pos != pos and not (offset.get("event") or offset.get("row")):  # (else `delivered_of` tells)
        warnings.append(
            f"Debezium's offset ({file}:{pos}) lies inside the transaction starting at {at}, with no events or rows "
            "to skip: dblog reads that transaction again in full, so its records Debezium already sent come twice")
    return at.position(), warnings


def hand_over(store, chosen: DebeziumOffset, facts: ServerFacts, origin: str, replace: bool) -> list[str]:
    """Write dblog's offsets (at `store`, an OffsetStore) from Debezium's `chosen` offset; the
    warnings to log. dblog's own offsets there are kept unless `replace`."""
    existing = store.load()
    if existing is not None and not replace:
        raise DebeziumOffsetsError(
            f"dblog's own offsets are at {store.path} (at {existing.position or 'the start'}) and --debezium-offsets "
            f"gives Debezium's ({origin}); which one is right only you know: remove --debezium-offsets to resume "
            "dblog's, or add --replace-offsets to start from Debezium's")
    position, warnings = position_of(chosen, facts, origin)
    progress = snapshot_in_flight(chosen, facts, origin)
    delivered, notes = delivered_of(chosen, facts, origin)
    offsets = Offsets(facts.flavor, position, progress.to_json() if progress is not None else {}, delivered=delivered,
                      binlog=facts.binlog)
    store.save(offsets)
    log.info("took over Debezium's offsets (%s, connector %r): dblog starts after %s", origin, chosen.connector,
             offsets.describe_position())
    return warnings + notes


def server_facts(server, file_positions: bool = False) -> ServerFacts:
    """ServerFacts read through `server` (a dblog.mysql.server_session.ServerSession), read by
    binlog file and position when `file_positions`."""
    from dblog.mysql.binlog_retention import binlog_files, purged_gtids
    from dblog.mysql.schema import text_of

    def binlog_gtid_pos(file: str, pos: int) -> str:
        value = server.fetch("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0][0]
        if value is None:
            raise DebeziumOffsetsError(f"the server has no GTID position at {file}:{pos} (BINLOG_GTID_POS is NULL): "
                                       "not an event boundary of its binlog, or another server's offsets")
        return text_of(value)

    def binlog_events(file: str, pos: int, limit: int) -> list[LoggedEvent]:
        rows = server.fetch(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {int(limit)}", (file,))
        # Log_name, Pos, Event_type, Server_id, End_log_pos, Info
        return [LoggedEvent(int(row[1]), int(row[4]), text_of(row[2]), text_of(row[5] or "")) for row in rows]

    def key_columns(table: TableId) -> tuple[str, ...]:
        rows = server.fetch("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
                            "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
                            (table.db, table.table))
        return tuple(text_of(row[0]) for row in rows)

    return ServerFacts(flavor=server.flavor(), server_id=int(server.fetch("SELECT @@server_id")[0][0]),
                       executed=server.executed_gtids(), purged=purged_gtids(server),
                       binlog_files=binlog_files(server), binlog_gtid_pos=binlog_gtid_pos,
                       binlog_events=binlog_events, key_columns=key_columns,
                       binlog=server.files_identity() if file_positions else None)


def take_over(config, source: str, replace: bool) -> None:
    """`--debezium-offsets SOURCE`: dblog's offsets file (config.offsets.path) written from
    Debezium's offset of the connector whose topic.prefix is config.name."""
    from dblog.runtime.engine import Engine
    from dblog.sinks.kafka.security import client_options
    from dblog.runtime.offset_store import OffsetStore
    from dblog.sinks.base import Sink

    origin = source if source.startswith(TOPIC_PREFIX) else f"offset file {source}"
    options = client_options(config.kafka.security()) if source.startswith(TOPIC_PREFIX) else None
    chosen = choose(read_debezium_offsets(source, config.kafka.bootstrap_servers, options), config.name, origin)
    from dblog.mysql.server_requirements import REQUIRED_VARIABLES, position_mode

    with Engine(config, sink=Sink()).server as server:  # a sink that takes nothing: only the server is used
        mode = position_mode(server.global_variables(REQUIRED_VARIABLES), server.flavor(), config.source.position_mode)
        facts = server_facts(server, mode == "file")
    for warning in hand_over(OffsetStore(config.offsets.path), chosen, facts, origin, replace):
        log.warning("%s", warning)
