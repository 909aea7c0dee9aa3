"""The offsets document (`dblog.core.offsets`) on disk, replaced atomically: write a temp
file, fsync, rename, fsync the directory, so a crash leaves either the old or the new
version, never a torn one.

The schema history's definitions (`Offsets.definitions`) go to a file of their own beside it,
`<offsets file>.definitions-<digest>.json`, named by a digest of its content and referenced by
the document (`definitions_file`): written, durably, before the document that names it, and only
when the history changed (at a DDL statement; every other commit names the same file, the
history object unchanged, without serializing it again), so a schema of thousands of tables does
not make every commit write megabytes. Files no saved document names are removed after a save.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dblog.core.offsets import DOCUMENT_ERRORS, Offsets, OffsetsError

DEFINITIONS_INFIX = ".definitions-"


class OffsetStore:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._definitions_saved: tuple[Any, str] | None = None  # (the document object saved, its file name)
        self._named: str | None | bool = False  # the definitions file the last saved document named (False: none saved)

    def load(self) -> Offsets | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise OffsetsError(f"cannot read offsets file {self.path}: {error.strerror}") from error
        try:
            data = json.loads(text)
            name = data.pop("definitions_file", None)
            if name is not None:
                data["definitions"] = self._load_definitions(name)
            return Offsets.from_json(data)
        except DOCUMENT_ERRORS as error:
            raise OffsetsError(
                f"offsets file {self.path} is not valid ({error}); restore it from a backup, or delete it "
                "to start again from the current binlog position (with a fresh snapshot if startup is 'initial')"
            ) from error

    def _load_definitions(self, name: str) -> dict[str, Any]:
        path = self.path.parent / name
        if not name.startswith(self.path.name + DEFINITIONS_INFIX) or "/" in name:
            raise ValueError(f"definitions_file {name!r} is not one of this offsets file's")
        try:
            return json.loads(path.read_text())
        except OSError as error:
            raise OffsetsError(
                f"offsets file {self.path} names the schema history file {path}, which cannot be read "
                f"({error.strerror}); restore both from the same backup, or delete the offsets file to start again "
                "from the current binlog position") from error

    def save(self, offsets: Offsets) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            data = offsets.to_json(definitions=False)
            if offsets.definitions is not None:
                data["definitions_file"] = self._save_definitions(offsets.definitions)
            # Compact, by the C encoder (an `indent` makes json take its pure-Python one): a
            # snapshot of 10,000 tables queues 10,000 entries, saved at every commit.
            # `dblog status --json` shows the document indented.
            self._replace(self.path, json.dumps(data, sort_keys=True, separators=(",", ":")))
            self._fsync_directory()
            named = data.get("definitions_file")
            if named != self._named:  # the others are no saved document's any more
                self._remove_other_definitions(named)
                self._named = named
        except OSError as error:
            raise OffsetsError(
                f"cannot write offsets file {self.path}: {error.strerror}; make its directory writable "
                "(nothing after the last committed offset is lost: a restart re-reads it)"
            ) from error

    def _save_definitions(self, document: dict[str, Any]) -> str:
        """The file name of `document`, written (durably) unless it is there already."""
        saved = self._definitions_saved
        if saved is not None and saved[0] is document:
            return saved[1]
        text = json.dumps(document, sort_keys=True, separators=(",", ":"))
        name = f"{self.path.name}{DEFINITIONS_INFIX}{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"
        path = self.path.parent / name
        if not path.exists():
            self._replace(path, text)
            self._fsync_directory()  # on disk before a document names it
        self._definitions_saved = (document, name)
        return name

    def _remove_other_definitions(self, keep: str | None) -> None:
        if self._definitions_saved is not None and self._definitions_saved[1] != keep:
            self._definitions_saved = None  # its file goes
        for path in self.path.parent.glob(f"{self.path.name}{DEFINITIONS_INFIX}*.json"):
            if path.name != keep:
                path.unlink(missing_ok=True)

    def _replace(self, path: Path, text: str) -> None:
        handle, temp = tempfile.mkstemp(prefix=".offsets-", dir=path.parent)
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def _fsync_directory(self) -> None:
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
