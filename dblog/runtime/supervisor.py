"""Keep the engine running through a lost database: restart it from its committed offsets.

A server restart, a failover of its address or a dropped connection is handled exactly as a
crash is: the engine is torn down and started again from its last committed offsets, which the
`kill -9` tests prove loses nothing and, replayed, duplicates nothing. Between attempts it waits
with exponential backoff (tenacity: 0.5 s doubling up to 30 s); after `source.reconnect_timeout_seconds`
of consecutive failures it gives up with the last error (never with "forever"); meanwhile
`waiting_for_source_since` says since when it waits (/readyz, the metrics). A run that lasted a minute or more
starts a new count, so a server restarted once a day never exhausts it.

A sink whose target cannot be reached (`SinkUnavailable`: Kafka brokers down) is waited for
the same way. Errors that waiting cannot fix (bad configuration, a purged binlog, a server that
lacks transactions dblog delivered (SourceDiverged), an event dblog
cannot decode, a sink refusing a change, an unwritable offsets file) stop at once with their message.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from dblog.mysql.binlog import BinlogError, BinlogPurged, BinlogUndecodable, SourceDiverged
from dblog.mysql.server_errors import server_unreachable
from dblog.runtime.config import Config
from dblog.runtime.engine import Engine
from dblog.runtime.engine_stats import EngineStats
from dblog.sinks.base import SinkError

log = logging.getLogger("dblog")

_STEADY_RUN_SECONDS = 60.0


def is_transient(error: BaseException) -> bool:
    """Whether restarting from the committed offsets after a wait can succeed."""
    # the same binlog again would fail the same way; a diverged server waits for the user's choice
    if isinstance(error, (BinlogPurged, BinlogUndecodable, SourceDiverged)):
        return False
    return isinstance(error, (BinlogError, ConnectionError)) or server_unreachable(error)


def error_kind(error: BaseException) -> str:
    """What an error that ended an engine run is about, for `dblog_engine_errors_total{kind}`:
    the sink (its target, or a change it refused), the source (the database or its binlog), or
    anything else (configuration, offsets file, a bug)."""
    if isinstance(error, SinkError):
        return "sink"
    if isinstance(error, (BinlogError, ConnectionError)) or server_unreachable(error):
        return "source"
    return "other"


class Supervisor:
    """`Supervisor(config).run()` streams until `stop()` (e.g. on SIGTERM) or a lasting error."""

    def __init__(self, config: Config, make_engine: Callable[[Config], Engine] = Engine) -> None:
        self.config = config
        self._make_engine = make_engine
        self._stopped = threading.Event()
        self._engine: Engine | None = None
        self._failing_since: float | None = None
        self.restarts = 0
        # What made the last restart necessary, until an engine starts again (/readyz shows it).
        self.last_error: BaseException | None = None
        # When (Unix time) the engine began waiting for its source database, until it starts again.
        self.waiting_for_source_since: float | None = None
        self.stats = EngineStats()  # handed to every engine: the metrics count on across restarts

    @property
    def engine(self) -> Engine | None:
        """The engine started last (it may have failed since; None before the first)."""
        return self._engine

    @property
    def stopped(self) -> bool:
        """`stop()` was called."""
        return self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()
        if self._engine is not None:
            self._engine.stop()

    def run(self) -> None:
        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            wait=wait_exponential(multiplier=0.5, min=0.5, max=30),
            stop=self._given_up,
            sleep=self._stopped.wait,  # stop() cuts a backoff short
            before_sleep=self._log_restart,
            reraise=True,
        )
        retrying(self._run_once)

    def _run_once(self) -> None:
        if self._stopped.is_set():
            return
        started = time.monotonic()
        try:
            engine = self._engine = self._make_engine(self.config)
            engine.stats = self.stats
            try:
                if not self._stopped.is_set():
                    engine.start()
                    self.last_error = None  # the source answers again: that error is past
                    self.waiting_for_source_since = None
                    engine.run()  # closes the engine when it returns or raises
            finally:
                engine.close()
            self._failing_since = None
        except BaseException as error:
            if isinstance(error, Exception):
                self.stats.failed(error_kind(error))
            if time.monotonic() - started >= _STEADY_RUN_SECONDS or self._failing_since is None:
                self._failing_since = time.monotonic()
            raise

    def _given_up(self, state: RetryCallState) -> bool:
        if self._stopped.is_set():
            return True
        limit = self.config.source.reconnect_timeout_seconds
        if limit == "forever":
            return False
        return time.monotonic() - (self._failing_since or time.monotonic()) > limit

    def _log_restart(self, state: RetryCallState) -> None:
        self.restarts += 1
        error = self.last_error = state.outcome.exception() if state.outcome else None
        if not isinstance(error, SinkError) and self.waiting_for_source_since is None:
            self.waiting_for_source_since = time.time()
        log.warning(
            "lost %s (%s); restarting from the committed offsets in %.1f s",
            "the sink" if isinstance(error, SinkError) else "the source database", error,
            state.next_action.sleep if state.next_action else 0,
        )
