"""Table schemas, loaded once and cached until DDL (with, per table, the definition in force
where the binlog stream is when it is an earlier one: `definition`), and the keys given to tables without a
primary key (`source.key_columns`, a signal's surrogate key): checked to be unique and NOT NULL,
since keyset paging and the window's dedupe both need that."""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable

from dblog.core.events import TableId
from dblog.mysql.schema import TableSchema, list_tables, load_schema, load_schemas, text_of
from dblog.mysql.server_session import ServerSession

log = logging.getLogger("dblog")


class KeyColumnsError(ValueError):
    """Columns given as the key of a table cannot serve as one; `problem` says why ("has
    NULLable key columns ['code']", ...)."""

    def __init__(self, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.problem = problem


# Schemas loaded one by one before a catalog with `wanted` set loads them in batches, and the
# largest batch: a few tables cost a query each, thousands a query per MISSES_BATCH.
MISSES_ALONE = 50
MISSES_BATCH = 1000

_UNIQUE_INDEXES_SQL = (
    "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0"
)


class SchemaCatalog:
    """`collations=False`: schemas without their key columns' collations (`load_schema`), for a
    reader that only keys rows (the binlog reader process)."""

    def __init__(self, session: ServerSession, key_columns: dict[TableId, tuple[str, ...]] | None = None,
                 collations: bool = True) -> None:
        self.session = session
        self._collations = collations
        self._schemas: dict[TableId, TableSchema] = {}
        # Tables whose binlog rows are, for now, of another definition than the server's (DDL it
        # applied since they were logged): that definition, until the stream's next DDL.
        self.in_force: dict[TableId, TableSchema] = {}
        self._keys = dict(key_columns or {})  # keys of tables without a primary key
        # Which tables may be asked for (the captured ones): set, a catalog that keeps missing
        # loads, beyond MISSES_ALONE tables, the schemas of the next wanted tables of the
        # missed table's database in a batch (streaming over thousands of tables).
        self.wanted: Callable[[TableId], bool] | None = None
        self._misses = 0
        self._listed: dict[str, list[TableId]] = {}  # database -> its tables, listed once a batch is due

    def schema(self, table: TableId) -> TableSchema:
        """The table's schema, loaded once and cached until `forget_schema`. A table without a
        primary key gets the key given for it (`source.key_columns`, a signal's surrogate key)."""
        cached = self._schemas.get(table)
        if cached is None:
            self._misses += 1
            if self.wanted is not None and self._misses > MISSES_ALONE:
                self._preload_database(table)
                cached = self._schemas.get(table)
            if cached is None:
                cached = self._adopt(self.session.run(lambda conn: load_schema(conn, table, self._collations)))
        return cached

    def definition(self, table: TableId) -> TableSchema:
        """The table's definition in force where the binlog stream is (what sinks type its
        rows by): the one its rows were logged under when `redefine` was told so, else `schema`.
        Chunk reads use `schema`, the server's (a window over DDL its stream has not reached
        yet is discarded at that DDL)."""
        in_force = self.in_force.get(table)
        return in_force if in_force is not None else self.schema(table)

    def redefine(self, table: TableId, definition: TableSchema) -> None:
        """The stream's rows of `table` are of `definition` from here until `forget_schema`."""
        self.in_force[table] = definition

    def _preload_database(self, table: TableId) -> None:
        """`table` and up to MISSES_BATCH wanted tables of its database not loaded yet, in one
        batch: streaming that touches thousands of tables pays two queries per batch, not
        three per table (10,000 tables: 0.5 s in all instead of 30 s)."""
        listed = self._listed.get(table.db)
        if listed is None:
            listed = self._listed[table.db] = self.session.run(lambda conn: list_tables(conn, table.db))
        wanted = self.wanted
        batch = [table]
        for other in listed:
            if len(batch) >= MISSES_BATCH:
                break
            if other not in self._schemas and other != table and wanted(other):
                batch.append(other)
        self.preload(batch)

    def _adopt(self, loaded: TableSchema) -> TableSchema:
        """Cache a loaded schema, keyed by the key given for it when it has no primary key."""
        table = loaded.table
        key = self._keys.get(table)
        if key and loaded.key_columns:
            log.warning("%s has a primary key %s: the key given for it, %s, is not used", table,
                        loaded.key_columns, key)
        elif key:
            self.check_key(loaded, key)
            loaded = dataclasses.replace(loaded, key_columns=key)
        self._schemas[table] = loaded
        return loaded

    def preload(self, tables: list[TableId]) -> int:
        """Load the schemas of those of `tables` not cached yet, many per query (`load_schemas`):
        what a snapshot of thousands of tables does before their reads, instead of three queries
        per table as each starts. A table that does not exist, or whose given key cannot serve,
        is left to `schema` (which raises where the table is used). Returns how many were loaded."""
        missing = [table for table in dict.fromkeys(tables) if table not in self._schemas]
        if not missing:
            return 0
        loaded = self.session.run(lambda conn: load_schemas(conn, missing, self._collations))
        adopted = 0
        for schema in loaded.values():
            try:
                self._adopt(schema)
                adopted += 1
            except KeyColumnsError:
                pass  # raised again by schema(), where the table is read
        return adopted

    def cached(self, table: TableId) -> bool:
        """Whether the schema of `table` is loaded (no query to answer `schema`)."""
        return table in self._schemas

    def set_key(self, table: TableId, columns: tuple[str, ...]) -> None:
        """Key a table without a primary key by `columns` from now on (checked: unique, NOT NULL)."""
        previous = self._keys.get(table)
        self._keys[table] = tuple(columns)
        self.forget_schema(table)
        try:
            self.schema(table)
        except KeyColumnsError:
            if previous is None:
                del self._keys[table]
            else:
                self._keys[table] = previous
            raise

    def given_keys(self) -> dict[TableId, tuple[str, ...]]:
        """The keys given for tables without a primary key so far (`source.key_columns`, `set_key`)."""
        return dict(self._keys)

    def check_key(self, schema: TableSchema, key: tuple[str, ...]) -> None:
        """Keyset paging and the window's dedupe both need a unique, NOT NULL key: a duplicate
        would make a chunk skip rows, a NULL would never match. Raises KeyColumnsError."""
        missing = [name for name in key if not schema.has_column(name)]
        nullable = [c.name for c in schema.columns if c.name in key and c.nullable]
        unique_indexes = self.session.fetch(_UNIQUE_INDEXES_SQL, (schema.table.db, schema.table.table))
        indexes: dict[str, set[str]] = {}
        for index, column in unique_indexes:
            indexes.setdefault(text_of(index), set()).add(text_of(column))
        if missing or nullable or not any(columns <= set(key) for columns in indexes.values()):
            problem = (f"has no column {missing}" if missing else f"has NULLable key columns {nullable}" if nullable
                       else f"has no UNIQUE index over {list(key)} (or some of them)")
            raise KeyColumnsError(
                f"{schema.table} cannot be keyed by {list(key)}: it {problem}; name NOT NULL columns covered by a "
                "UNIQUE index (or add a primary key)", problem,
            )

    def forget_schema(self, table: TableId | None = None) -> None:
        """Drop the cached schema of `table` (of every table when None), e.g. after DDL."""
        if table is None:
            self._schemas.clear()
            self.in_force.clear()
            self._listed.clear()  # tables may have been created, dropped or renamed
        else:
            self._schemas.pop(table, None)
            self.in_force.pop(table, None)
