"""The offsets document (`dblog.core.offsets`) on disk, replaced atomically: write a temp
file, fsync, rename, fsync the directory, so a crash leaves either the old or the new
version, never a torn one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from dblog.core.offsets import DOCUMENT_ERRORS, Offsets, OffsetsError


class OffsetStore:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def load(self) -> Offsets | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise OffsetsError(f"cannot read offsets file {self.path}: {error.strerror}") from error
        try:
            return Offsets.from_json(json.loads(text))
        except DOCUMENT_ERRORS as error:
            raise OffsetsError(
                f"offsets file {self.path} is not valid ({error}); restore it from a backup, or delete it "
                "to start again from the current binlog position (with a fresh snapshot if startup is 'initial')"
            ) from error

    def save(self, offsets: Offsets) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(prefix=".offsets-", dir=directory)
            try:
                # Compact, by the C encoder (an `indent` makes json take its pure-Python one): a
                # snapshot of 10,000 tables queues 10,000 entries, saved at every commit.
                # `dblog status --json` shows the document indented.
                with os.fdopen(handle, "w") as out:
                    out.write(json.dumps(offsets.to_json(), sort_keys=True, separators=(",", ":")))
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temp, self.path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as error:
            raise OffsetsError(
                f"cannot write offsets file {self.path}: {error.strerror}; make its directory writable "
                "(nothing after the last committed offset is lost: a restart re-reads it)"
            ) from error
