"""The committed offsets: where to restart from after a stop or a crash.

One small JSON document, replaced atomically (write a temp file, fsync, rename, fsync the
directory), so a crash leaves either the old or the new version, never a torn one. It is
written only after the sink has durably taken every event emitted before the checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dblog.gtid import GtidError, GtidSet

FORMAT_VERSION = 1


class OffsetsError(RuntimeError):
    pass


@dataclass
class Offsets:
    flavor: str
    position: GtidSet
    snapshot: dict[str, Any] = field(default_factory=dict)
    channels: dict[str, Any] = field(default_factory=dict)  # e.g. Kafka signal topic offsets
    # Where the binlog reader starts when that is before `position`: XA transactions prepared
    # and not yet decided are read again from there (transactions in `position` are not
    # delivered twice). Written only when set.
    resume: GtidSet | None = None

    def to_json(self) -> dict[str, Any]:
        data = {
            "version": FORMAT_VERSION,
            "flavor": self.flavor,
            "gtid_position": str(self.position),
            "snapshot": self.snapshot,
            "channels": self.channels,
        }
        if self.resume is not None:
            data["gtid_resume"] = str(self.resume)
        return data


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
            data = json.loads(text)
            flavor = data["flavor"]
            return Offsets(
                flavor=flavor,
                position=GtidSet.parse(data["gtid_position"], flavor),
                snapshot=data.get("snapshot") or {},
                channels=data.get("channels") or {},
                resume=GtidSet.parse(data["gtid_resume"], flavor) if data.get("gtid_resume") is not None else None,
            )
        except (ValueError, KeyError, TypeError, GtidError) as error:
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
                with os.fdopen(handle, "w") as out:
                    json.dump(offsets.to_json(), out, indent=1, sort_keys=True)
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
