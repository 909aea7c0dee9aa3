"""The schema history: each captured table's definition as of the binlog position the stream has
reached, built from the binlog's own DDL, as Debezium's schema history builds it.

Debezium's MySQL connector applies each DDL statement it reads to in-memory tables and stores the
statements with their positions, so that a restart replays them up to its offset. dblog keeps
the definitions themselves: `DefinitionHistory` starts from definitions read from the server (at
a first start: every captured table's) and applies each statement read from the binlog to them
(`dblog.core.definition_ddl`); its `document()` is saved with the offsets, so a restart goes on
from the definitions as of the restart position, not from the server's present ones. What a
schema-change record describes a table by, and the column defaults of the rows' Kafka schemas,
are then those of the rows' own moment, whatever DDL the server applied since.

Definitions read from the server carry the read's bracket: the executed GTID sets before and
after the read. The server had applied every statement in `before`, and none outside `after`, to
what was read. A statement read from the binlog is applied to a table read that way only when
its GTID is outside `after`; inside it, the read may already hold it: `apply` asks for the
tables to be read again (`Applied.unresolved`) and names the tables whose records since that
read described a later definition than their rows' (`Applied.ahead`), which the caller reports.
Once the stream's position covers `after` (`passed`), the bracket is dropped. Reads happen at a
first start (every captured table), for a statement that `definition_ddl` cannot apply exactly
(the tables it changes), and for a captured table the history does not hold (a restart from
offsets written without a history, a table the configuration captures since). A read is exact
when no DDL of its tables lies between the stream's position and the read; when one does, the
stream reads that DDL before it reaches `after`, and `apply` says so.

Which tables are kept: the captured ones, and every table of a database that holds a captured
one (so that `CREATE TABLE _t_new LIKE t`, `ALTER TABLE _t_new ...`, `RENAME TABLE t TO _t_old,
_t_new TO t`, as gh-ost and pt-online-schema-change run, give `t` its exact new definition). A
captured table known not to exist is kept as absent. The databases' default character sets and
the server's are kept too: a new table's columns take them. Pure: no I/O, no clock.

On a server logging `binlog_row_metadata` below FULL (MySQL's MINIMAL, MariaDB's NO_LOG) the
row path also takes each column's name, the key and what else the TABLE_MAP lacks from these
definitions (`dblog.mysql.binlog.nameless_maps`); the binlog source keeps a copy of its own, as of
the position it has read to (`dblog.mysql.binlog.source`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from dblog.core.definition_ddl import DdlEffect, apply_ddl
from dblog.core.events import TableId
from dblog.core.gtid import Flavor, Gtid, GtidSet
from dblog.core.table_definition import TableDefinition, table_from_json, table_to_json

__all__ = ["DefinitionHistory", "Applied", "HISTORY_VERSION"]

HISTORY_VERSION = 1


@dataclass(frozen=True)
class _Read:
    """When a definition was read from the server: between these executed GTID sets."""

    before: GtidSet
    after: GtidSet


@dataclass
class Applied:
    """What one statement did to the history."""

    # Tables the statement changes, with their definitions after it (None: gone), as applied
    tables: dict[TableId, TableDefinition | None] = field(default_factory=dict)
    # Captured tables whose definition after the statement must be read from the server, and why
    unresolved: dict[TableId, str] = field(default_factory=dict)
    # Tables read from the server before this statement whose read already held it (or may have):
    # their records since the read described a later definition than their rows'
    ahead: list[TableId] = field(default_factory=list)


class DefinitionHistory:
    """Definitions as of the stream's position. `captures` says which tables are captured (not
    saved: the configuration gives it again at each start)."""

    def __init__(self, captures: Callable[[TableId], bool], server_charset: str | None = None) -> None:
        self._captures = captures
        self._tables: dict[TableId, TableDefinition | None] = {}  # None: a captured table known not to exist
        self._databases: dict[str, str | None] = {}  # default character set (None: not known)
        self._server_charset = server_charset
        self._reads: dict[TableId, _Read] = {}
        self._captured_databases: set[str] | None = None  # databases holding a captured table (cached)
        self._document: dict[str, Any] | None = None  # cached until the next change

    # --- what it holds ----------------------------------------------------------------------

    def definition(self, table: TableId) -> TableDefinition | None:
        """The table's definition as of the stream's position (None: absent or not held)."""
        return self._tables.get(table)

    def holds(self, table: TableId) -> bool:
        """Whether the history knows the table, as defined or as absent."""
        return table in self._tables

    def tables(self) -> list[TableId]:
        return [table for table, definition in self._tables.items() if definition is not None]

    def database_charset(self, db: str) -> str | None:
        return self._databases.get(db)

    def knows_database(self, db: str) -> bool:
        return db in self._databases

    def server_charset(self) -> str | None:
        return self._server_charset

    def read_brackets(self) -> dict[TableId, tuple[GtidSet, GtidSet]]:
        """The tables read from the server whose read the stream has not passed yet."""
        return {table: (read.before, read.after) for table, read in self._reads.items()}

    # --- KnownDefinitions, for definition_ddl ---------------------------------------------------

    def vouches_absent(self, table: TableId) -> bool:
        return table in self._tables and self._tables[table] is None

    def tables_in(self, db: str) -> list[TableId]:
        return [table for table in self._tables if table.db == db]

    # --- changes ------------------------------------------------------------------------------

    def adopt(self, definitions: dict[TableId, TableDefinition | None], before: GtidSet, after: GtidSet,
              databases: dict[str, str | None] | None = None, server_charset: str | None = None) -> None:
        """Definitions read from the server between `before` and `after` (None: the table did not
        exist), and the databases' default character sets read with them."""
        read = _Read(before, after)
        for table, definition in definitions.items():
            if definition is None and not self._captures(table):
                self._tables.pop(table, None)
                self._reads.pop(table, None)
                continue
            self._tables[table] = definition
            self._reads[table] = read
        if databases:
            self._databases.update(databases)
        if server_charset is not None:
            self._server_charset = server_charset
        self._changed()

    def apply(self, sql: str, db: str, gtid: Gtid) -> Applied:
        """Apply the DDL statement `sql` (default database `db`) read from the binlog at `gtid`."""
        effect: DdlEffect = apply_ddl(sql, db, self)
        involved = [*effect.tables, *effect.unresolved]
        if not involved and not effect.databases:
            return Applied()
        applied = Applied(ahead=[table for table in involved
                                 if table in self._reads and gtid in self._reads[table].after])
        if applied.ahead:
            # A read of these tables may already hold the statement: applying it again could be
            # wrong (ADD of a column already there). The tables are read again instead.
            effect = DdlEffect(unresolved={table: "read from the server before this statement, which that read may "
                                           "hold already" for table in involved}, databases=effect.databases)
        for table, definition in effect.tables.items():
            self._reads.pop(table, None)
            if definition is None:
                if self._captures(table):
                    self._tables[table] = None
                else:
                    self._tables.pop(table, None)
                applied.tables[table] = None
            elif self._keeps(table, definition):
                self._tables[table] = definition
                applied.tables[table] = definition
            else:
                self._tables.pop(table, None)
        for table, reason in effect.unresolved.items():
            self._reads.pop(table, None)
            self._tables.pop(table, None)
            if self._captures(table):
                applied.unresolved[table] = reason
        for database, charset in effect.databases.items():
            if charset is None:
                self._databases.pop(database, None)
            else:
                self._databases[database] = charset
        self._changed()
        return applied

    def passed(self, position: GtidSet) -> None:
        """The stream has read every transaction of `position`: reads it covers are exact now."""
        done = [table for table, read in self._reads.items() if read.after.issubset(position)]
        if done:
            for table in done:
                del self._reads[table]
            self._document = None

    def _keeps(self, table: TableId, definition: TableDefinition | None = None) -> bool:
        """Captured tables, and the tables of a database holding one (the renames of online
        schema change tools go through them)."""
        if self._captures(table):
            return True
        if self._captured_databases is None:
            self._captured_databases = {held.db for held, known in self._tables.items()
                                        if known is not None and self._captures(held)}
        return table.db in self._captured_databases

    def _changed(self) -> None:
        self._captured_databases = None
        self._document = None

    # --- saved with the offsets -----------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        """The history as a JSON-able document (the same object until it changes: the offset
        store writes it only when it is a new one)."""
        if self._document is None:
            tables: dict[str, dict[str, Any]] = {}
            for table, definition in self._tables.items():
                tables.setdefault(table.db, {})[table.table] = None if definition is None else table_to_json(
                    definition)
            reads: dict[tuple[str, str], list[list[str]]] = {}
            for table, read in self._reads.items():
                reads.setdefault((str(read.before), str(read.after)), []).append([table.db, table.table])
            self._document = {
                "version": HISTORY_VERSION,
                "server_charset": self._server_charset,
                "databases": dict(self._databases),
                "tables": tables,
                "reads": [{"before": before, "after": after, "tables": names}
                          for (before, after), names in reads.items()],
            }
        return self._document

    @classmethod
    def from_document(cls, document: dict[str, Any], captures: Callable[[TableId], bool],
                      flavor: Flavor) -> DefinitionHistory:
        """The history `document()` gave; ValueError, KeyError or TypeError when it is not one."""
        if document.get("version") != HISTORY_VERSION:
            raise ValueError(f"schema history version {document.get('version')!r}, not {HISTORY_VERSION}")
        history = cls(captures, document["server_charset"])
        history._databases = dict(document["databases"])
        for db, tables in document["tables"].items():
            for name, data in tables.items():
                table = TableId(db, name)
                history._tables[table] = None if data is None else table_from_json(table, data)
        for read in document["reads"]:
            bracket = _Read(GtidSet.parse(read["before"], flavor), GtidSet.parse(read["after"], flavor))
            for db, name in read["tables"]:
                history._reads[TableId(db, name)] = bracket
        history._document = document
        return history

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefinitionHistory):
            return NotImplemented
        return (self._tables, self._databases, self._server_charset, self._reads) == (
            other._tables, other._databases, other._server_charset, other._reads)

    __hash__ = None  # type: ignore[assignment]

