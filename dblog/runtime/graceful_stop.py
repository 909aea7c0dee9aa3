"""SIGTERM and SIGINT for `dblog run`: the first stops cleanly within a deadline, the second
(or the deadline) exits at once.

Exiting at once commits nothing more: the offsets stay at the last commit, which is always a
consistent cut (the sink holds all it claims), so the next start re-reads what came after,
as after a crash (`kill -9` loses nothing either: tests/engine/test_engine.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Callable

log = logging.getLogger("dblog")

EXIT_UNCLEAN = 1


class GracefulStop:
    """`stop()` asks the running engine to stop cleanly; `exit(code)` ends the process now."""

    def __init__(self, stop: Callable[[], None], timeout_seconds: float,
                 exit: Callable[[int], None] = os._exit) -> None:
        self._stop = stop
        self.timeout_seconds = timeout_seconds
        self._exit = exit
        self._requested = threading.Event()
        self._deadline: threading.Timer | None = None

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.handle)

    def handle(self, signum: int, frame=None) -> None:
        name = signal.Signals(signum).name
        if self._requested.is_set():
            self._exit_now(f"{name} again while stopping: exiting now without committing more "
                           "(the next start re-reads from the last committed offsets)")
            return
        self._requested.set()
        log.info("%s: stopping cleanly (finishing the transaction being read, flushing the sink, committing "
                 "the offsets) within %g s; send it again to exit at once", name, self.timeout_seconds)
        self._deadline = threading.Timer(self.timeout_seconds, self._exit_now, args=(
            f"could not stop cleanly within stop_timeout_seconds = {self.timeout_seconds:g}: exiting now without "
            "committing more (the next start re-reads from the last committed offsets)",))
        self._deadline.daemon = True
        self._deadline.start()
        self._stop()

    def finished(self) -> None:
        """The clean stop is done: the deadline no longer applies."""
        if self._deadline is not None:
            self._deadline.cancel()

    def _exit_now(self, reason: str) -> None:
        log.error("%s", reason)
        for handler in logging.getLogger().handlers:  # os._exit skips logging's own flush
            handler.flush()
        self._exit(EXIT_UNCLEAN)
