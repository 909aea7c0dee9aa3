"""What a DDL statement from the binlog does to the tables it names, in one word.

A binlog QueryEvent carries the statement text as the client sent it (MariaDB/MySQL dialect)
and the session's default database. `classify_ddl` reduces it to a `DdlChange`: a kind, the
tables it affects (qualified with the default database when written bare, so a statement run
from another default database still names its tables), for ADD COLUMN the added columns, and for
renames the new names. Sinks decide from the kind alone whether they can follow the change (add a
column) or must stop and say so.

Kinds, from most to least consequential (`SEVERITY`). An ALTER TABLE with several clauses gets
the kind of its most consequential clause, and lists every added column whatever its kind:

    other          not understood, or rows changed without row events (DROP/TRUNCATE/EXCHANGE
                   PARTITION, IMPORT TABLESPACE, ADD SYSTEM VERSIONING): nothing can be assumed
    primary_key    ADD/DROP PRIMARY KEY, a column defined PRIMARY KEY: the identity of every row
    rename_table   RENAME TABLE, ALTER TABLE ... RENAME TO: the rows now live under another name
    modify_column  MODIFY, CHANGE, RENAME COLUMN, CONVERT TO CHARACTER SET: values may change type
    drop_column    DROP COLUMN
    add_column     ADD COLUMN, ADD (a INT, b INT)
    other_alter    indexes, constraints, defaults, engine, comment, partitioning layout,
                   OPTIMIZE/ANALYZE/REPAIR TABLE: harmless to the data

Whole-statement kinds: create_table, drop_table, truncate, drop_database. `CREATE OR REPLACE
TABLE` is a drop_table (the old rows are gone without row events). Temporary tables are never
captured, so `CREATE/DROP TEMPORARY TABLE` is "other" with no tables: it must not be mistaken for
the real table of the same name. Statements about no table (GRANT, CREATE USER, CREATE DATABASE,
views, routines) are "other" with no tables.

`DROP DATABASE|SCHEMA [IF EXISTS] db` is drop_database: it names its database, never its tables,
and the server logs no DROP TABLE for them. `KnownTables` keeps the tables the DDL read so far
leaves in place, and turns the statement into one drop_table per table of the database (what a
DROP TABLE of each gives), so that sinks and snapshots treat those tables as dropped.

How the text is read, and why not with sqlglot's parser: on real MariaDB DDL sqlglot 30.30
falls back to an opaque `Command` (ALTER ONLINE/IGNORE, ADD (a INT, b INT), CONVERT TO, RENAME
TABLE, ADD CHECK, CHANGE IF EXISTS, WAIT n) or raises (partition clauses), and its tokenizer
rejects identifiers that start with a digit (`shop.2019_orders`) and drops executable comments
(`/*!50100 ... */`, which the server runs). Classification only needs the leading words of each
clause, so this module has its own small lexer (below, the server's rules for quotes and
comments) and reads clauses by their first words. sqlglot's parser is the oracle in the tests:
where it parses a statement, both must agree. Nothing here raises on odd input: what is not
understood is "other".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from dblog.core.events import TableId

SEVERITY = (
    "other",
    "primary_key",
    "rename_table",
    "modify_column",
    "drop_column",
    "add_column",
    "other_alter",
)
KINDS = frozenset(SEVERITY) | {"create_table", "drop_table", "truncate", "drop_database"}


@dataclass(frozen=True, slots=True)
class DdlChange:
    kind: str
    tables: tuple[TableId, ...] = ()
    added_columns: tuple[str, ...] = ()  # ADD COLUMN clauses, in statement order
    # RENAME TABLE / ALTER TABLE ... RENAME TO: (old name, new name), in statement order (an
    # ALTER that also changes the key keeps its more consequential kind, and its rename here)
    renamed: tuple[tuple[TableId, TableId], ...] = ()
    database: str | None = None  # DROP DATABASE: the database (its tables are not named: `table_drops`)
    replaced: bool = False  # CREATE OR REPLACE TABLE: a drop_table whose table exists afterwards


def classify_ddl(sql: str, db: str = "") -> DdlChange:
    """Classify one statement; `db` is the event's default database ("" when none)."""
    statements = _split_statements(_lex(sql))
    if len(statements) != 1:  # a QueryEvent holds one statement; anything else is not ours to guess
        return DdlChange("other")
    return _Statement(statements[0], db).classify()


def table_drops(ddl: DdlChange, tables: Iterable[TableId]) -> list[DdlChange]:
    """A DROP DATABASE as the DROP TABLE of each of `tables` in its database, in name order."""
    return [DdlChange("drop_table", (table,)) for table in sorted(set(tables)) if table.db == ddl.database]


class KnownTables:
    """The source's tables as the DDL read since a listing of them (the engine's start) leaves
    them: DROP DATABASE does not name the tables it drops, this says which they are."""

    def __init__(self, tables: Iterable[TableId] = ()) -> None:
        self.tables = set(tables)

    def follow(self, ddl: DdlChange) -> list[DdlChange]:
        """Take `ddl` in, and return it as the changes sinks act on: a DROP DATABASE of known
        tables as one drop_table per table, anything else as it is."""
        if ddl.kind == "drop_database":
            drops = table_drops(ddl, self.tables)
            self.tables.difference_update(drop.tables[0] for drop in drops)
            return drops or [ddl]
        if ddl.kind == "create_table" or ddl.replaced:
            self.tables.update(ddl.tables)
        elif ddl.kind == "drop_table":
            self.tables.difference_update(ddl.tables)
        for old, new in ddl.renamed:
            self.tables.discard(old)
            self.tables.add(new)
        return [ddl]


# --- the lexer ---------------------------------------------------------------------------------


class Token(NamedTuple):
    kind: str  # "word" (unquoted), "quoted" (`backticks`), "string" ('...' or "..."), "punct"
    text: str  # words as written; quoted names and strings without quotes and escapes

    @property
    def word(self) -> str | None:
        """The upper-cased keyword this token can be, None for quoted names, strings, punctuation."""
        return self.text.upper() if self.kind == "word" else None


_WORD = re.compile(r"[0-9A-Za-z_$\u0080-\U0010ffff]+")  # MySQL identifiers may start with a digit
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d{0,6}")  # /*!50100 ... */ and MariaDB's /*M!100100 ... */


def _lex(sql: str) -> list[Token]:
    """Tokens of `sql` by the server's rules; comments dropped, executable comments unwrapped.
    Never fails: an unterminated quote or comment runs to the end of the text."""
    return [token for token, _, _ in lex_spans(sql)]


def lex_spans(sql: str) -> list[tuple[Token, int, int]]:
    """`_lex`'s tokens, each with where it stands in `sql` (`sql[start:end]`: its text as written,
    quotes included)."""
    tokens: list[tuple[Token, int, int]] = []
    i, n = 0, len(sql)
    in_executable_comment = False
    while i < n:
        char = sql[i]
        if char.isspace():
            i += 1
        elif char == "#" or (sql.startswith("--", i) and (i + 2 == n or sql[i + 2].isspace() or sql[i + 2] < " ")):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            executable = _EXECUTABLE_COMMENT.match(sql, i)
            if executable:  # its body is code the server ran
                in_executable_comment = True
                i = executable.end()
            else:
                end = sql.find("*/", i + 2)
                i = n if end < 0 else end + 2
        elif in_executable_comment and sql.startswith("*/", i):
            in_executable_comment = False
            i += 2
        elif char in "'\"`":
            text, end = _quoted(sql, i)
            tokens.append((Token("quoted" if char == "`" else "string", text), i, end))
            i = end
        elif match := _WORD.match(sql, i):
            tokens.append((Token("word", match.group()), i, match.end()))
            i = match.end()
        else:
            tokens.append((Token("punct", char), i, i + 1))
            i += 1
    return tokens


def _quoted(sql: str, start: int) -> tuple[str, int]:
    """The content of the quoted run at `start` and the index after it. A doubled quote stands
    for itself; in strings a backslash escapes the next character (backticks have no escapes)."""
    quote = sql[start]
    parts: list[str] = []
    i = start + 1
    while i < len(sql):
        char = sql[i]
        if char == quote:
            if sql.startswith(quote, i + 1):
                parts.append(quote)
                i += 2
                continue
            return "".join(parts), i + 1
        if char == "\\" and quote != "`" and i + 1 < len(sql):
            parts.append(sql[i + 1])
            i += 2
            continue
        parts.append(char)
        i += 1
    return "".join(parts), len(sql)


def _split_statements(tokens: list[Token]) -> list[list[Token]]:
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token == Token("punct", ";"):
            statements.append([])
        else:
            statements[-1].append(token)
    return [statement for statement in statements if statement]


def _split_top_level(tokens: list[Token], separator: str = ",") -> list[list[Token]]:
    """`tokens` cut at separators outside parentheses (ALTER clauses, column lists)."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.kind == "punct":
            if token.text == "(":
                depth += 1
            elif token.text == ")":
                depth = max(depth - 1, 0)
            elif token.text == separator and depth == 0:
                parts.append([])
                continue
        parts[-1].append(token)
    return parts


# --- reading tokens ----------------------------------------------------------------------------


class _Cursor:
    """A position in a token list. Looking past the end gives None, never an IndexError."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def word(self, ahead: int = 0) -> str | None:
        token = self.peek(ahead)
        return token.word if token else None

    def accept(self, *words: str) -> bool:
        """Consume `words` if the next tokens are exactly these keywords."""
        if all(self.word(offset) == word for offset, word in enumerate(words)):
            self.pos += len(words)
            return True
        return False

    def accept_punct(self, text: str) -> bool:
        if self.peek() == Token("punct", text):
            self.pos += 1
            return True
        return False

    def name(self) -> str | None:
        """Consume one identifier: a bare word, a `quoted` name, or a "name" (ANSI_QUOTES mode)."""
        token = self.peek()
        if token is None or token.kind == "punct":
            return None
        self.pos += 1
        return token.text

    def table(self, db: str) -> TableId | None:
        """Consume `table` or `db`.`table`, qualified with `db` when bare."""
        first = self.name()
        if first is None:
            return None
        if self.accept_punct("."):
            second = self.name()
            return TableId(first, second) if second is not None else None
        return TableId(db, first)

    def rest(self) -> list[Token]:
        return self.tokens[self.pos:]


# --- statements --------------------------------------------------------------------------------

# Clause openers that only touch indexes, constraints, table options or partition layout.
_HARMLESS_CLAUSES = frozenset(
    """ALGORITHM LOCK FORCE ORDER ENABLE DISABLE WITH WITHOUT VALIDATION DEFAULT CHARACTER CHARSET
    COLLATE ENGINE TYPE COMMENT AUTO_INCREMENT ROW_FORMAT KEY_BLOCK_SIZE AVG_ROW_LENGTH CHECKSUM
    TABLE_CHECKSUM PAGE_CHECKSUM COMPRESSION CONNECTION DATA INDEX DELAY_KEY_WRITE ENCRYPTION
    ENCRYPTED ENCRYPTION_KEY_ID INSERT_METHOD MAX_ROWS MIN_ROWS PACK_KEYS PASSWORD STATS_AUTO_RECALC
    STATS_PERSISTENT STATS_SAMPLE_PAGES TABLESPACE STORAGE UNION TRANSACTIONAL PAGE_COMPRESSED
    PAGE_COMPRESSION_LEVEL IETF_QUOTES SEQUENCE AUTOEXTEND_SIZE START SECONDARY_ENGINE
    SECONDARY_ENGINE_ATTRIBUTE ENGINE_ATTRIBUTE SECONDARY_LOAD SECONDARY_UNLOAD PARTITION
    REMOVE UPGRADE COALESCE REORGANIZE ANALYZE CHECK OPTIMIZE REBUILD REPAIR""".split()
)
# ADD/DROP followed by these is not about a column.
_INDEX_WORDS = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK"})
_TABLE_MAINTENANCE = frozenset({"OPTIMIZE", "ANALYZE", "REPAIR"})


class _Statement:
    def __init__(self, tokens: list[Token], db: str) -> None:
        self.cursor = _Cursor(tokens)
        self.db = db

    def classify(self) -> DdlChange:
        cursor = self.cursor
        if cursor.accept("ALTER"):
            return self._alter()
        if cursor.accept("CREATE"):
            return self._create()
        if cursor.accept("DROP"):
            return self._drop()
        if cursor.accept("TRUNCATE"):
            cursor.accept("TABLE")
            table = cursor.table(self.db)
            return DdlChange("truncate", (table,)) if table else DdlChange("other")
        if cursor.accept("RENAME"):
            return self._rename()
        if cursor.word() in _TABLE_MAINTENANCE:
            cursor.pos += 1
            cursor.accept("NO_WRITE_TO_BINLOG") or cursor.accept("LOCAL")
            if cursor.accept("TABLE") or cursor.accept("TABLES"):
                tables = self._table_list()
                if tables:
                    return DdlChange("other_alter", tables)
        return DdlChange("other")

    def _table_list(self) -> tuple[TableId, ...]:
        """`a, db.b, ...`; empty when a name is missing."""
        tables = []
        while True:
            table = self.cursor.table(self.db)
            if table is None:
                return ()
            tables.append(table)
            if not self.cursor.accept_punct(","):
                return tuple(dict.fromkeys(tables))

    # ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] name [WAIT n | NOWAIT] clause, clause, ...
    def _alter(self) -> DdlChange:
        cursor = self.cursor
        while cursor.accept("ONLINE") or cursor.accept("OFFLINE") or cursor.accept("IGNORE"):
            pass
        if not cursor.accept("TABLE"):
            return DdlChange("other")  # ALTER DATABASE / VIEW / USER / SEQUENCE ...
        cursor.accept("IF", "EXISTS")
        table = cursor.table(self.db)
        if table is None:
            return DdlChange("other")
        if cursor.accept("WAIT"):
            cursor.pos += 1
        cursor.accept("NOWAIT")
        kinds: list[str] = []
        added: list[str] = []
        renamed: list[tuple[TableId, TableId]] = []
        for clause in _split_top_level(cursor.rest()):
            if clause:
                kind, columns = _alter_clause(_Cursor(clause))
                kinds.append(kind)
                added.extend(columns)
                if kind == "rename_table":  # RENAME [TO | AS] new_name
                    target = _Cursor(clause[1:])
                    target.accept("TO") or target.accept("AS")
                    new_name = target.table(self.db)
                    if new_name is not None:
                        renamed.append((table, new_name))
        kind = _most_consequential(kinds) if kinds else "other_alter"  # bare ALTER TABLE t rebuilds
        return DdlChange(kind, (table,), tuple(added), tuple(renamed))

    # CREATE [OR REPLACE] [TEMPORARY] TABLE ... | CREATE [...] INDEX name ... ON table
    def _create(self) -> DdlChange:
        cursor = self.cursor
        replace = cursor.accept("OR", "REPLACE")
        if cursor.accept("TEMPORARY"):
            return DdlChange("other")
        if cursor.accept("TABLE"):
            cursor.accept("IF", "NOT", "EXISTS")
            table = cursor.table(self.db)
            if table is None:
                return DdlChange("other")
            return DdlChange("drop_table", (table,), replaced=True) if replace else DdlChange("create_table", (table,))
        while cursor.word() in ("ONLINE", "OFFLINE", "UNIQUE", "FULLTEXT", "SPATIAL"):
            cursor.pos += 1
        if cursor.accept("INDEX"):
            return self._index_on(primary_key=False)
        return DdlChange("other")

    # DROP [TEMPORARY] TABLE[S] [IF EXISTS] a, b ... | DROP INDEX name ON table | DROP DATABASE db
    def _drop(self) -> DdlChange:
        cursor = self.cursor
        if cursor.accept("TEMPORARY"):
            return DdlChange("other")
        if cursor.accept("DATABASE") or cursor.accept("SCHEMA"):
            cursor.accept("IF", "EXISTS")
            database = cursor.name()
            if database is None or cursor.peek() is not None:
                return DdlChange("other")
            return DdlChange("drop_database", database=database)
        if cursor.accept("TABLE") or cursor.accept("TABLES"):
            cursor.accept("IF", "EXISTS")
            tables = self._table_list()
            return DdlChange("drop_table", tables) if tables else DdlChange("other")
        cursor.accept("ONLINE") or cursor.accept("OFFLINE")
        if cursor.accept("INDEX"):
            cursor.accept("IF", "EXISTS")
            index = cursor.name()
            return self._index_on(primary_key=index is not None and index.upper() == "PRIMARY")
        return DdlChange("other")

    def _index_on(self, primary_key: bool) -> DdlChange:
        """The rest of CREATE/DROP INDEX: find `ON table`."""
        cursor = self.cursor
        while cursor.peek() is not None and not cursor.accept("ON"):
            cursor.pos += 1
        table = cursor.table(self.db)
        if table is None:
            return DdlChange("other")
        return DdlChange("primary_key" if primary_key else "other_alter", (table,))

    # RENAME TABLE[S] [IF EXISTS] a TO b, c TO d: the affected tables are the sources
    def _rename(self) -> DdlChange:
        cursor = self.cursor
        if not (cursor.accept("TABLE") or cursor.accept("TABLES")):
            return DdlChange("other")  # RENAME USER
        sources, renamed = [], []
        for pair in _split_top_level(cursor.rest()):
            read = rename_pair(pair, self.db)
            if read is None:
                return DdlChange("other")
            source, target, _ = read
            sources.append(source)
            renamed.append((source, target))
        if not sources:
            return DdlChange("other")
        return DdlChange("rename_table", tuple(dict.fromkeys(sources)), renamed=tuple(renamed))


def rename_pair(pair: list[Token], db: str | None) -> tuple[TableId, TableId, bool] | None:
    """One `[IF EXISTS] a [WAIT n | NOWAIT] TO b` of RENAME TABLE: (a, b, whether nothing follows
    b), or None when it does not name both."""
    cursor = _Cursor(pair)
    cursor.accept("IF", "EXISTS")
    source = cursor.table(db)
    if cursor.accept("WAIT"):
        cursor.pos += 1
    cursor.accept("NOWAIT")
    target = cursor.table(db) if source is not None and cursor.accept("TO") else None
    if source is None or target is None:
        return None
    return source, target, cursor.peek() is None


def _most_consequential(kinds: list[str]) -> str:
    return min(kinds, key=SEVERITY.index)


# --- ALTER TABLE clauses -----------------------------------------------------------------------


def _alter_clause(cursor: _Cursor) -> tuple[str, tuple[str, ...]]:
    """The kind of one ALTER TABLE clause and the columns it adds."""
    opener = cursor.word()
    cursor.pos += 1
    if opener == "ADD":
        return _add(cursor)
    if opener == "DROP":
        return _drop_clause(cursor), ()
    if opener in ("MODIFY", "CHANGE"):
        cursor.accept("COLUMN")
        return ("primary_key" if _declares_primary_key(cursor.rest()) else "modify_column"), ()
    if opener == "RENAME":
        if cursor.accept("COLUMN"):
            return "modify_column", ()
        if cursor.word() in ("INDEX", "KEY"):
            return "other_alter", ()
        return "rename_table", ()  # RENAME [TO | AS] new_name
    if opener == "ALTER":  # ALTER [COLUMN] c SET/DROP DEFAULT, SET [IN]VISIBLE; ALTER INDEX/CHECK ...
        return "other_alter", ()
    if opener == "CONVERT":
        # CONVERT TO CHARACTER SET re-encodes every text column; MariaDB's CONVERT PARTITION/TABLE
        # moves rows between a partition and a table.
        return ("modify_column" if cursor.word() == "TO" else "other"), ()
    if opener in _HARMLESS_CLAUSES:
        return "other_alter", ()
    # Anything else, among them TRUNCATE/EXCHANGE PARTITION and IMPORT/DISCARD TABLESPACE,
    # which change rows without row events.
    return "other", ()


def _add(cursor: _Cursor) -> tuple[str, tuple[str, ...]]:
    """ADD [COLUMN] [IF NOT EXISTS] col def | ADD [COLUMN] (elements) | ADD index/constraint."""
    if cursor.accept("COLUMN"):
        cursor.accept("IF", "NOT", "EXISTS")
        return _added_elements(cursor)
    if cursor.accept("IF", "NOT", "EXISTS"):
        return _added_elements(cursor)
    if cursor.word() == "PARTITION":
        return "other_alter", ()
    if cursor.word() == "SYSTEM" and cursor.word(1) == "VERSIONING":
        return "other", ()  # hidden row_start/row_end columns, and DELETE stops deleting history
    if cursor.word() == "PERIOD" and cursor.word(1) == "FOR":
        return "other_alter", ()  # an application-time period over existing columns
    return _added_elements(cursor)


def _added_elements(cursor: _Cursor) -> tuple[str, tuple[str, ...]]:
    if cursor.accept_punct("("):
        # ADD (a INT, b INT, INDEX (a)): MySQL takes a table element list here.
        body = cursor.rest()
        if body and body[-1] == Token("punct", ")"):
            body = body[:-1]
        kinds, added = [], []
        for element in _split_top_level(body):
            if element:
                kind, columns = _table_element(_Cursor(element))
                kinds.append(kind)
                added.extend(columns)
        return (_most_consequential(kinds) if kinds else "other"), tuple(added)
    return _table_element(cursor)


def _table_element(cursor: _Cursor) -> tuple[str, tuple[str, ...]]:
    """A column definition, or a key/constraint definition, as in CREATE TABLE's list."""
    opener = cursor.word()
    if opener == "PRIMARY":
        return "primary_key", ()
    if opener == "CONSTRAINT":
        cursor.pos += 1
        cursor.accept("IF", "NOT", "EXISTS")
        if cursor.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cursor.name()  # the constraint's symbol
        cursor.accept("IF", "NOT", "EXISTS")
        return ("primary_key" if cursor.word() == "PRIMARY" else "other_alter"), ()
    if opener in _INDEX_WORDS:
        return "other_alter", ()
    column = cursor.name()
    if column is None:
        return "other", ()
    return ("primary_key" if _declares_primary_key(cursor.rest()) else "add_column"), (column,)


def _drop_clause(cursor: _Cursor) -> str:
    opener = cursor.word()
    if opener == "PRIMARY":
        return "primary_key"
    if opener in ("INDEX", "KEY", "CONSTRAINT"):
        # The primary key is also the index (and constraint) named PRIMARY.
        cursor.pos += 1
        cursor.accept("IF", "EXISTS")
        name = cursor.name()
        return "primary_key" if name is not None and name.upper() == "PRIMARY" else "other_alter"
    if opener in ("FOREIGN", "CHECK"):
        return "other_alter"
    if opener == "PARTITION":
        return "other"  # its rows are deleted without row events
    if opener == "SYSTEM" and cursor.word(1) == "VERSIONING":
        return "other"
    if opener == "PERIOD" and cursor.word(1) == "FOR":
        return "other_alter"
    cursor.accept("COLUMN")
    cursor.accept("IF", "EXISTS")
    return "drop_column" if cursor.name() is not None else "other"


def _declares_primary_key(definition: list[Token]) -> bool:
    """Whether a column definition says PRIMARY KEY, or bare KEY (MySQL's short form; UNIQUE KEY
    is not primary). Only words outside parentheses count: `CHECK (...)`, `AS (...)` hold
    expressions, and strings/quoted names are never words."""
    depth = 0
    previous = None
    for token in definition:
        if token.kind == "punct" and token.text in "()":
            depth += 1 if token.text == "(" else -1
        elif depth == 0 and token.word == "KEY" and previous != "UNIQUE":
            return True
        if depth == 0:
            previous = token.word
    return False
