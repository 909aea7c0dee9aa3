"""Commits made on a second thread, so that the binlog loop never waits for a slow sink.

An Iceberg commit is a Spark job of a second or more; done on the loop's thread it stops the
binlog and the snapshot reads for that long, every commit interval. Here the loop cuts a batch
(`Sink.detach`, instant) with the checkpoint of that moment and reads on, while one committer
thread makes the batch durable (`Sink.commit`), saves the offsets and runs the sink's
housekeeping. The offsets file therefore still only ever names what the sink holds, and
batches commit one at a time, in order. The committer's JVM work and the loop's Python work
overlap: pyspark's calls into the JVM release the GIL.

While a commit is under way the loop keeps writing into the next batch; it waits for the
committer only when that batch reaches twice `sink.batch_rows` (memory stays bounded) or for a
commit that must be complete when it returns (stop, DDL). A failed commit is raised on the
loop's thread at its next commit, as a synchronous one would have been.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from dblog.core.offsets import Offsets
from dblog.sinks.base import Sink

log = logging.getLogger("dblog.engine")


class BackgroundCommits:
    def __init__(self, sink: Sink, save_offsets: Callable[[Offsets], None]) -> None:
        self._sink = sink
        self._save_offsets = save_offsets
        self._lock = threading.Condition()
        self._job: tuple[object, Offsets, Callable[[float], None] | None] | None = None  # the batch being committed
        self._failure: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="dblog-committer", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._job is not None

    def submit(self, offsets: Offsets, on_committed: Callable[[float], None] | None = None) -> None:
        """Cut a batch of everything written so far and commit it with `offsets` behind the
        loop's back; waits first if the previous commit is still under way. `on_committed` is
        told, on the committer's thread, how long the commit and the offsets save took."""
        self.wait()
        batch = self._sink.detach()
        with self._lock:
            self._job = (batch, offsets, on_committed)
            self._lock.notify_all()

    def wait(self) -> None:
        """Return once no commit is under way; raise the last commit's failure, if any."""
        with self._lock:
            while self._job is not None and self._failure is None:
                self._lock.wait()
            self.raise_failure()

    def raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def close(self) -> None:
        """Let a commit under way finish (its offsets are then saved), and stop the thread."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._thread.join()

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._job is None and not self._closed:
                    self._lock.wait()
                if self._job is None:
                    return
                batch, offsets, on_committed = self._job
            try:
                started = time.monotonic()
                self._sink.commit(batch, offsets)
                self._save_offsets(offsets)
                if on_committed is not None:
                    on_committed(time.monotonic() - started)
                self._sink.after_commit()
            except BaseException as error:  # noqa: BLE001 - handed to the loop's thread
                log.debug("background commit failed", exc_info=True)
                with self._lock:
                    self._failure = error
            with self._lock:
                self._job = None
                self._lock.notify_all()
