"""The schema history the engine keeps (`dblog.core.definition_history`), and the reads from the
server it takes: the captured tables' definitions at a first start (or when the offsets hold no
history), the tables of a statement it cannot apply, and a captured table it does not hold.
Each read is bracketed by the server's executed GTID set before and after it.

`definition(table)` is the table's definition as of where the stream is: what the Kafka sink's
schema-change records and column defaults take (`KafkaSink`'s `definitions`). The engine hands
every statement to `schema_changed` before the sink sees it, and saves `document()` with the
offsets; `restore` starts from a saved one. Without a history (a sink that describes no tables,
on a server logging FULL row metadata) `definition` reads the server's present definition.

On a server logging `binlog_row_metadata` below FULL the binlog source keeps a second one,
restored from the engine's document as of where it starts reading: its `definition(table)` names
and completes the table maps it decodes (`dblog.mysql.binlog.nameless_maps`), and it applies each
statement as it reads it, ahead of the engine's.
"""

from __future__ import annotations

import logging
from typing import Callable

from dblog.core.definition_history import DefinitionHistory
from dblog.core.events import SchemaChange, TableId
from dblog.core.gtid import Flavor, GtidSet
from dblog.core.table_definition import TableDefinition
from dblog.mysql.table_definitions import SchemaSnapshot, TableDefinitions

log = logging.getLogger("dblog")


class TableHistory:
    def __init__(self, reader: TableDefinitions, executed: Callable[[], GtidSet],
                 captures: Callable[[TableId], bool]) -> None:
        self._reader = reader
        self._executed = executed  # the server's executed GTID set, now
        self._captures = captures
        self.history: DefinitionHistory | None = None

    # --- starting -------------------------------------------------------------------------------

    def restore(self, document: dict | None, flavor: Flavor) -> None:
        """The history saved with the offsets (None: they hold none; `seed` reads one)."""
        self.history = None if document is None else DefinitionHistory.from_document(document, self._captures, flavor)

    def seed(self, tables: list[TableId], why: str | None = None) -> None:
        """Start the history from the server's definitions of `tables` (the captured ones), read
        now, unless it holds one already. `why`: logged when the stream is not where they were read."""
        if self.history is not None:
            return
        before = self._executed()
        definitions = self._reader.load(tables)
        server_charset, databases = self._reader.charsets()
        after = self._executed()
        self.history = DefinitionHistory(self._captures, server_charset)
        self.history.adopt({table: definitions.get(table) for table in tables}, before, after, databases)
        if why is not None:
            log.warning("%s: the definitions of the %d captured tables are read from the server as of %s; DDL the "
                        "binlog holds before that is reported as it is read", why, len(tables), after or "now")

    def snapshot(self, tables: list[TableId]) -> SchemaSnapshot:
        """What Debezium's snapshot describes `tables` by (the Kafka sink's start-up records),
        read now; at a first start the history starts from its definitions."""
        before = self._executed()
        snapshot = self._reader.snapshot(tables)
        server_charset, databases = self._reader.charsets()
        after = self._executed()
        if self.history is None:
            self.history = DefinitionHistory(self._captures, server_charset)
            self.history.adopt({table: snapshot.definitions.get(table) for table in tables}, before, after, databases)
        return snapshot

    # --- following the binlog ---------------------------------------------------------------------

    def definition(self, table: TableId) -> TableDefinition | None:
        """The table's definition as of the stream's position (None: it does not exist)."""
        history = self.history
        if history is None:
            return self._reader.load([table]).get(table)
        if not history.holds(table) and self._captures(table):
            log.info("%s is not in the schema history (captured since the offsets were written?): its definition is "
                     "read from the server", table)
            self._read([table])
        return history.definition(table)

    def schema_changed(self, change: SchemaChange) -> None:
        """Apply a statement read from the binlog; read what it does not say from the server."""
        history = self.history
        if history is None:
            return
        applied = history.apply(change.sql, change.db, change.gtid)
        if applied.ahead:
            log.warning("statement %s changes %s, whose definition was read from the server after it: their records "
                        "since that read described them with it already applied; read again now",
                        change.gtid, ", ".join(map(str, applied.ahead)))
        elif applied.unresolved:
            log.info("statement %s: the definitions of %s are read from the server (%s); exact unless the server has "
                     "changed them again since (reported when the binlog shows it)", change.gtid,
                     ", ".join(map(str, applied.unresolved)), "; ".join(sorted(set(applied.unresolved.values()))))
        if applied.unresolved:
            self._read(list(applied.unresolved))

    def document(self, position: GtidSet) -> dict | None:
        """The history as of `position` (the offsets' checkpoint) to save with them."""
        if self.history is None:
            return None
        self.history.passed(position)
        return self.history.document()

    def _read(self, tables: list[TableId]) -> None:
        history = self.history
        before = self._executed()
        definitions = self._reader.load(tables)
        databases = None
        if any(not history.knows_database(table.db) for table in tables):
            _, present = self._reader.charsets()
            databases = {db: charset for db, charset in present.items() if not history.knows_database(db)}
        after = self._executed()
        history.adopt({table: definitions.get(table) for table in tables}, before, after, databases)
