"""Debezium's heartbeats (a sink's heartbeat interval and action query: its plugin's `heartbeat`,
dblog.sinks.registry): the clock of the engine's loop that says when one is due, the sink's
heartbeat record, and the action query run on the source with it. Messages name the action
query's setting as the sink's plugin names it (`SinkPlugin.setting`).

When: as Debezium's binlog connectors, a heartbeat is checked where the reader hands over an
event, and is due once the interval has passed since the last one (or since the start). dblog's
loop checks at each transaction's end and at each idle tick of the binlog reader
(`source.heartbeat_seconds`, 1 s by default), so an idle server gets its heartbeat within that
tick of being due (Debezium's MySQL connector, idle, only sees the server's own heartbeat events,
every 48 s by default). A beat writes the record (the sink: `Sink.heartbeat`), then runs the
action query, in that order, as Debezium's composite heartbeat does.

The action query runs on a connection of its own, in autocommit, kept across beats. Its classic
use: a write to a heartbeat table of a captured database, so that a server whose captured tables
see no writes still logs something (for Debezium, an offset to commit; for dblog, a recent
timestamp to measure the lag by, and a heartbeat table change on its topic). A statement the
server refuses (no right, no such database, bad SQL: Debezium stops on SQLSTATE 42000 and
3D000) stops dblog with the server's message; a lost connection or another error is logged and
tried again at the next beat, as Debezium logs it.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import pymysql

from dblog.mysql.server_errors import REFUSED_AS_WRITTEN, error_code
from dblog.runtime.config import ConfigError
from dblog.sinks.base import Sink

log = logging.getLogger("dblog.heartbeat")

class Heartbeats:
    """Decides when a heartbeat is due (`clock`: seconds, monotonic) and makes it: the sink's
    record, then the action query on the source (`connect`: a new connection to it)."""

    def __init__(self, interval_ms: int, sink: Sink, action_query: str | None = None,
                 connect: Callable[[], pymysql.Connection] | None = None,
                 clock: Callable[[], float] = time.monotonic, now_ms: Callable[[], int] | None = None,
                 action_query_setting: str = "the heartbeat action query") -> None:
        if interval_ms <= 0:
            raise ValueError("a heartbeat interval is positive")
        self.interval = interval_ms / 1000
        self.sink = sink
        self.action_query = action_query
        self.action_query_setting = action_query_setting  # for messages: where the user fixes it
        self._connect = connect
        self._clock = clock
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)
        self._due = clock() + self.interval  # the first one an interval after the start, as Debezium's timer
        self._connection: pymysql.Connection | None = None
        self.beats = 0

    def tick(self) -> bool:
        """Beat if one is due; whether it did."""
        now = self._clock()
        if now < self._due:
            return False
        self._due = now + self.interval
        self.sink.heartbeat(self._now_ms())
        if self.action_query is not None:
            self._run_action_query()
        self.beats += 1
        return True

    def _run_action_query(self) -> None:
        try:
            if self._connection is None:
                self._connection = self._connect()
                self._connection.autocommit(True)
            with self._connection.cursor() as cursor:
                cursor.execute(self.action_query)
        except pymysql.MySQLError as error:
            if error_code(error) in REFUSED_AS_WRITTEN or isinstance(error, pymysql.ProgrammingError):
                raise ConfigError(f"{self.action_query_setting}: the source refused it ({error.args[-1]}); "
                                  "fix the statement or grant dblog's user what it needs") from None
            log.warning("heartbeat action query failed (tried again at the next heartbeat): %s", error)
            self.close()

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as error:  # noqa: BLE001 - a closed or broken connection is being dropped
                log.debug("closing the heartbeat connection: %s", error)
