"""The committed offsets: where to restart from after a stop or a crash.

One small JSON document: the binlog position (a GTID set; on a server read without GTIDs a binlog
file and offset with the server's identity, `dblog.core.file_positions`), the snapshot's progress and pause
state, the positions of signal channels outside the binlog, where a restarted reader must
start when prepared XA transactions are held, and the schema history as of the position (the
table definitions `dblog.core.definition_history` keeps: the store saves it beside the document,
in a file of its own written only when it changed). `dblog.runtime.offset_store` writes it
atomically, only after the sink has durably taken every event emitted before the checkpoint
(docs/algorithm.md, "Offsets").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.delivered_cut import DeliveredCut
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidError, GtidSet

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
    # The schema history's document as of `position` (DefinitionHistory.document()); None when
    # the engine keeps none (its sink describes no table definitions)
    definitions: dict[str, Any] | None = None
    # Of the first transaction after `position`, the changes already delivered by the tool dblog
    # took over from (Debezium's `event`/`row`); written only when set
    delivered: DeliveredCut | None = None
    # File-position mode (no GTIDs): whose binlog `position` points into; the document then
    # holds the file and offset (`binlog_file`, `binlog_pos`, `transaction_delivered`), not GTIDs
    binlog: BinlogIdentity | None = None

    def __post_init__(self) -> None:
        # An Offsets is a cut: it holds its own copy of the channel positions, never the
        # engine's live dict. A commit in the background saves it seconds later, after the loop
        # has polled (and acted on) further signals: a shared dict would save their positions
        # with a snapshot state that lacks their effect. (`snapshot` is the progress's JSON,
        # built afresh at each cut; GtidSets are immutable.)
        self.channels = copy.deepcopy(self.channels)

    def to_json(self, definitions: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"version": FORMAT_VERSION, "flavor": self.flavor}
        binlog = self.binlog
        if binlog is None:
            data["gtid_position"] = str(self.position)
        else:
            at = FilePosition.of(self.position, binlog.base_name)
            data.update(position_mode="file", binlog_file=at.file, binlog_pos=at.pos, server_id=binlog.server_id)
            if at.delivered:
                data["transaction_delivered"] = True
            if binlog.server_uuid:
                data["server_uuid"] = binlog.server_uuid
        data.update(snapshot=self.snapshot, channels=self.channels)
        if self.resume is not None:
            if binlog is None:
                data["gtid_resume"] = str(self.resume)
            else:
                resume = FilePosition.of(self.resume, binlog.base_name)
                data.update(resume_binlog_file=resume.file, resume_binlog_pos=resume.pos)
        if definitions and self.definitions is not None:
            data["definitions"] = self.definitions
        if self.delivered is not None:
            data["delivered"] = self.delivered.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Offsets:
        """The document `to_json` wrote; ValueError, KeyError, TypeError or GtidError when it is
        not one."""
        flavor = data["flavor"]
        binlog = None
        if data.get("position_mode", "gtid") == "file":
            file = data["binlog_file"]
            if not isinstance(file, str) or not isinstance(data["binlog_pos"], int):
                raise TypeError("binlog_file must be a string and binlog_pos a number")
            at = FilePosition(file, data["binlog_pos"], bool(data.get("transaction_delivered")))
            binlog = BinlogIdentity(int(data["server_id"]), file.rpartition(".")[0], data.get("server_uuid"))
            position = at.position()
            resume = FilePosition(data["resume_binlog_file"], int(data["resume_binlog_pos"])).position() \
                if data.get("resume_binlog_file") is not None else None
        elif data.get("position_mode", "gtid") == "gtid":
            position = GtidSet.parse(data["gtid_position"], flavor)
            resume = GtidSet.parse(data["gtid_resume"], flavor) if data.get("gtid_resume") is not None else None
        else:
            raise ValueError(f"position_mode {data['position_mode']!r} is neither \"gtid\" nor \"file\"")
        return cls(
            flavor=flavor,
            position=position,
            snapshot=data.get("snapshot") or {},
            channels=data.get("channels") or {},
            resume=resume,
            definitions=data.get("definitions"),
            delivered=DeliveredCut.from_json(data["delivered"]) if data.get("delivered") is not None else None,
            binlog=binlog,
        )

    @property
    def position_mode(self) -> str:
        return "gtid" if self.binlog is None else "file"

    def describe_position(self) -> str:
        """The position as a user reads it."""
        if self.binlog is None:
            return str(self.position) or "(the start)"
        return f"binlog {FilePosition.of(self.position, self.binlog.base_name)} of {self.binlog.describe()}"


DOCUMENT_ERRORS = (ValueError, KeyError, TypeError, GtidError)
