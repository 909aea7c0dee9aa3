"""A DDL statement from the binlog applied to the table definitions it changes, as the server
applied it: what Debezium's DDL parser does to the tables of its schema history.

`apply_ddl(sql, db, known)` reads one statement (the text a QueryEvent carries, with its default
database `db`) and returns a `DdlEffect`: each table's definition after the statement (None: the
table is gone), the databases' default character sets it set, and the tables whose definition the
statement changes in a way this module does not derive exactly (`unresolved`, with the reason).
Nothing is guessed: a clause, column attribute, type or default not understood leaves every table
of the statement unresolved, and the caller reads those from the server (`dblog.core.
definition_history` says when that is exact). `known` answers what the definitions were before.

What is applied: CREATE TABLE (columns, PRIMARY KEY and UNIQUE indexes, column-level keys, the
table's character set and comment; `LIKE`), CREATE OR REPLACE, ALTER TABLE (ADD / DROP / MODIFY /
CHANGE / RENAME COLUMN with FIRST and AFTER, ALTER COLUMN SET / DROP DEFAULT, ADD / DROP /
RENAME of unique indexes and the primary key, CONVERT TO CHARACTER SET, the default character set
and comment, RENAME TO; every clause that touches no column is passed over), RENAME TABLE (swaps
included), DROP TABLE, CREATE / DROP INDEX, CREATE / ALTER / DROP DATABASE. A column is described
as the statement spells it, as Debezium's parser describes it (`INT` is `int`, where the server
states `int(11)`): its type lower-cased with its dimensions, `UNSIGNED`/`ZEROFILL`; its character
set as given (or by its collation's prefix), else the table's; its default in information_schema's
form on MariaDB (`'x'` quoted, numbers as written, `NULL`, `current_timestamp()`, an expression
as written); AUTO_INCREMENT, ON UPDATE and generation in `extra`. The server's own rules that the
text does not show are applied too: a primary key column is NOT NULL, a dropped column leaves
its indexes, a renamed one is renamed in them, an unnamed unique index is named after its first
column (`c`, `c_2`, ...), a table without a primary key is keyed by its first unique index of NOT
NULL columns.

What is left unresolved (read from the server instead): CREATE TABLE ... SELECT, a TIMESTAMP
column whose NULL / DEFAULT depend on `explicit_defaults_for_timestamp`, types spelled otherwise
than information_schema's names (`NATIONAL CHAR`, `SERIAL`, `DEC`), `CHARACTER SET binary`
columns, CONVERT TO CHARACTER SET over TEXT columns (the server may widen them), system
versioning, and anything not understood. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Protocol

from dblog.core.ddl import Token, _Cursor, _lex, _split_statements, _split_top_level, classify_ddl, rename_pair
from dblog.core.events import TableId
from dblog.core.table_definition import PRIMARY, ColumnDefinition, TableDefinition, key_of

__all__ = ["KnownDefinitions", "DdlEffect", "apply_ddl"]


class KnownDefinitions(Protocol):
    """The definitions before a statement."""

    def definition(self, table: TableId) -> TableDefinition | None:
        """The table's definition; None when it does not exist or is not known."""

    def vouches_absent(self, table: TableId) -> bool:
        """Whether a table without a definition certainly does not exist (CREATE TABLE IF NOT
        EXISTS of a table that may exist unseen changes nothing on the server)."""

    def tables_in(self, db: str) -> list[TableId]:
        """The known tables of a database (DROP DATABASE drops them)."""

    def database_charset(self, db: str) -> str | None:
        """The database's default character set (a new table's without its own), None if unknown."""

    def server_charset(self) -> str | None:
        """The server's `character_set_server` (a new database's without its own)."""


@dataclass
class DdlEffect:
    """What a statement did to the definitions."""

    tables: dict[TableId, TableDefinition | None] = field(default_factory=dict)  # after it; None: gone
    unresolved: dict[TableId, str] = field(default_factory=dict)  # table -> why its definition is not derived
    databases: dict[str, str | None] = field(default_factory=dict)  # default charset after it; None: dropped


class Unapplicable(Exception):
    """The statement cannot be applied exactly; the message says what is not understood."""


def apply_ddl(sql: str, db: str, known: KnownDefinitions) -> DdlEffect:
    """What the statement `sql` (run with default database `db`) does to the definitions."""
    statements = _split_statements(_lex(sql))
    work = _Work(known)
    try:
        if len(statements) != 1:
            raise Unapplicable("not one statement")
        _Statement(statements[0], db, work, sql).apply()
    except Unapplicable as problem:
        change = classify_ddl(sql, db)
        tables = [*change.tables, *(new for _, new in change.renamed)]
        return DdlEffect(unresolved={table: str(problem) for table in dict.fromkeys(tables)})
    return work.effect()


# --- the definitions while a statement is applied ---------------------------------------------


class _Work:
    """The definitions `known` had, with the statement's changes so far on top."""

    def __init__(self, known: KnownDefinitions) -> None:
        self.known = known
        self.changed: dict[TableId, TableDefinition | None] = {}
        self.unresolved: dict[TableId, str] = {}
        self.databases: dict[str, str | None] = {}

    def get(self, table: TableId) -> TableDefinition | None:
        if table in self.unresolved:
            return None
        if table in self.changed:
            return self.changed[table]
        return self.known.definition(table)

    def put(self, table: TableId, definition: TableDefinition | None) -> None:
        self.unresolved.pop(table, None)
        self.changed[table] = definition

    def unknown(self, table: TableId, reason: str) -> None:
        self.changed.pop(table, None)
        self.unresolved[table] = reason

    def is_unresolved(self, table: TableId) -> bool:
        return table in self.unresolved

    def vouches_absent(self, table: TableId) -> bool:
        if table in self.changed:
            return self.changed[table] is None
        return table not in self.unresolved and self.known.vouches_absent(table)

    def database_charset(self, db: str) -> str | None:
        if db in self.databases:
            return self.databases[db]
        return self.known.database_charset(db)

    def effect(self) -> DdlEffect:
        return DdlEffect(dict(self.changed), dict(self.unresolved), dict(self.databases))


# --- a table while a statement changes it -----------------------------------------------------


class _Table:
    def __init__(self, definition: TableDefinition) -> None:
        self.id = definition.table
        self.columns = list(definition.columns)
        self.unique = [(name, tuple(parts)) for name, parts in definition.unique_keys]
        self.charset = definition.charset
        self.comment = definition.comment
        # Columns this statement added or named (lower case): ALTER TABLE's clauses name the
        # table's columns as they were before it (RENAME COLUMN a TO b, RENAME COLUMN b TO a
        # swaps them), so one clause naming another's column is not applied one after the other
        self.fresh: set[str] = set()

    @classmethod
    def new(cls, table: TableId, charset: str | None) -> _Table:
        return cls(TableDefinition(table, (), (), charset, ""))

    def find(self, name: str) -> int | None:
        folded = name.lower()
        return next((index for index, column in enumerate(self.columns) if column.name.lower() == folded), None)

    def existing(self, name: str) -> int | None:
        """The index of the column a clause names, which must be one the table had before it."""
        if name.lower() in self.fresh:
            raise Unapplicable(f"a clause naming column {name!r}, which another clause of the statement adds or names")
        return self.find(name)

    def index(self, name: str) -> int:
        found = self.existing(name)
        if found is None:
            raise Unapplicable(f"{self.id} has no column {name!r}")
        return found

    def place(self, column: ColumnDefinition, place: tuple[str, str | None] | None, at: int | None) -> None:
        """Put `column` at `at` (its old index) or where `place` says (FIRST, AFTER x), else last."""
        if place is not None:
            where, after = place
            at = 0 if where == "FIRST" else self.index(after) + 1  # type: ignore[arg-type]
        self.columns.insert(len(self.columns) if at is None else at, column)

    def rename_in_keys(self, old: str, new: str) -> None:
        folded = old.lower()
        self.unique = [(name, tuple(new if part is not None and part.lower() == folded else part for part in parts))
                       for name, parts in self.unique]

    def drop_from_keys(self, column: str) -> None:
        folded = column.lower()
        kept = []
        for name, parts in self.unique:
            parts = tuple(part for part in parts if part is None or part.lower() != folded)
            if parts:
                kept.append((name, parts))
        self.unique = kept

    def find_key(self, name: str) -> int | None:
        folded = name.lower()
        return next((index for index, (key, _) in enumerate(self.unique) if key.lower() == folded), None)

    def add_key(self, name: str | None, parts: tuple[str | None, ...], primary: bool = False) -> None:
        """A unique index (the primary key: first), named as the server names it when unnamed."""
        if primary:
            if self.find_key(PRIMARY) is not None:
                raise Unapplicable(f"{self.id} has a primary key already")
            self.unique.insert(0, (PRIMARY, parts))
            return
        if name is None:  # MySQL's make_unique_key_name: the first column's name, then _2, _3, ...
            base = next((part for part in parts if part is not None), None)
            if base is None:
                raise Unapplicable("an unnamed unique index of expressions")
            name, suffix = base, 2
            while self.find_key(name) is not None or name.upper() == PRIMARY:
                name, suffix = f"{base}_{suffix}", suffix + 1
        self.unique.append((name, parts))

    def drop_key(self, name: str) -> None:
        found = self.find_key(name)
        if found is not None:  # not a unique index: no key changes
            del self.unique[found]

    def build(self) -> TableDefinition:
        primary = next((parts for name, parts in self.unique if name == PRIMARY), ())
        in_primary = {part.lower() for part in primary if part is not None}
        columns = []
        for position, column in enumerate(self.columns, 1):
            if column.name.lower() in in_primary and column.nullable:  # a primary key column is NOT NULL
                column = dataclasses.replace(column, nullable=False,
                                             default=None if column.default == "NULL" else column.default)
            columns.append(dataclasses.replace(column, position=position) if column.position != position else column)
        names = [column.name.lower() for column in columns]
        if len(set(names)) != len(names):
            raise Unapplicable(f"{self.id} would have two columns of one name")
        return TableDefinition(self.id, tuple(columns), key_of(columns, self.unique), self.charset, self.comment,
                               tuple(self.unique))


# --- column definitions -----------------------------------------------------------------------

# information_schema's type names dblog describes columns by (Debezium's parser knows them too).
_TYPES = frozenset("""bit tinyint smallint mediumint int integer bigint real double float decimal numeric date time
    timestamp datetime year char varchar binary varbinary tinyblob blob mediumblob longblob tinytext text mediumtext
    longtext enum set json geometry point linestring polygon multipoint multilinestring multipolygon
    geometrycollection bool boolean uuid inet4 inet6 vector""".split())
# Types whose values have a character set (Debezium: java.sql.Types CHAR / VARCHAR).
_CHARACTER_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
_TEXT_TYPES = frozenset({"tinytext", "text", "mediumtext"})  # CONVERT TO may widen them
_NOW = frozenset({"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"})
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NUMBER_PIECE = re.compile(r"\d+(?:[eE]\d*)?")
_REFERENCE_ACTIONS = (("RESTRICT",), ("CASCADE",), ("SET", "NULL"), ("SET", "DEFAULT"), ("NO", "ACTION"))
_NOT_A_DEFAULT = object()


@dataclass
class _ColumnSpec:
    """A column definition as the statement writes it."""

    name: str
    base: str  # the type's name, lower-case
    column_type: str
    charset: str | None = None
    nullable: bool | None = None  # None: not said
    default: object = _NOT_A_DEFAULT  # the DEFAULT clause's value, information_schema's form
    extra: list[str] = field(default_factory=list)
    comment: str = ""
    primary: bool = False
    unique: bool = False
    place: tuple[str, str | None] | None = None  # ("FIRST", None) / ("AFTER", column)

    def definition(self, table_charset: str | None) -> ColumnDefinition:
        generated = any(part.endswith("GENERATED") for part in self.extra)
        if self.base == "timestamp" and not generated and (
                (self.nullable is None and self.default != "NULL")
                or (self.nullable is False and self.default is _NOT_A_DEFAULT)):
            # explicit_defaults_for_timestamp=OFF makes such a column NOT NULL DEFAULT
            # CURRENT_TIMESTAMP (ON UPDATE ...); the statement does not say which the server had
            raise Unapplicable(f"TIMESTAMP column {self.name!r} without NULL, or NOT NULL without DEFAULT "
                               "(explicit_defaults_for_timestamp decides)")
        nullable = (self.nullable is not False) and not self.primary
        if self.default is not _NOT_A_DEFAULT:
            default = self.default
        elif nullable:
            default = "NULL"  # information_schema's COLUMN_DEFAULT of a nullable column without one
        else:
            default = None
        if default == "NULL" and not nullable:
            default = None
        charset = self.charset
        if self.base in _CHARACTER_TYPES and charset is None:
            charset = table_charset
        elif self.base not in _CHARACTER_TYPES:
            charset = None
        return ColumnDefinition(self.name, 0, self.column_type, charset, nullable, default,  # type: ignore[arg-type]
                                " ".join(self.extra), self.comment)


def _collation_charset(collation: str) -> str:
    """A collation's character set, by its name's prefix (`utf8mb4_bin` is utf8mb4's, as Debezium
    infers it); names without one (`uca1400_ai_ci`, `binary`) are not read."""
    charset, underscore, _ = collation.partition("_")
    if not underscore or not charset or charset.lower() == "uca1400":
        raise Unapplicable(f"collation {collation!r} names no character set")
    return charset


def _name(cursor: _Cursor, what: str) -> str:
    token = cursor.peek()
    if token is None or token.kind not in ("word", "quoted", "string"):
        raise Unapplicable(f"no {what}")
    cursor.pos += 1
    return token.text


def _value_token(cursor: _Cursor, what: str) -> str:
    cursor.accept_punct("=")
    return _name(cursor, what)


def _parenthesized(cursor: _Cursor) -> list[Token]:
    """The tokens between a `(` at the cursor and its `)`, consumed."""
    if not cursor.accept_punct("("):
        raise Unapplicable("'(' expected")
    depth, start = 1, cursor.pos
    while True:
        token = cursor.peek()
        if token is None:
            raise Unapplicable("unbalanced parentheses")
        cursor.pos += 1
        if token.kind == "punct" and token.text == "(":
            depth += 1
        elif token.kind == "punct" and token.text == ")":
            depth -= 1
            if depth == 0:
                return cursor.tokens[start:cursor.pos - 1]


def _text(tokens: list[Token]) -> str:
    """Tokens back into text, for an expression kept as written."""
    parts = []
    for token in tokens:
        if token.kind == "string":
            parts.append("'" + token.text.replace("'", "''") + "'")
        elif token.kind == "quoted":
            parts.append("`" + token.text.replace("`", "``") + "`")
        else:
            parts.append(token.text)
    return " ".join(parts)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _data_type(cursor: _Cursor) -> tuple[str, str, str | None]:
    """(base type, COLUMN_TYPE, character set given) of the type at the cursor."""
    base = (cursor.word() or "").lower()
    if base not in _TYPES:
        token = cursor.peek()
        raise Unapplicable(f"type {token.text if token else 'missing'!r}")
    cursor.pos += 1
    if base == "double":
        cursor.accept("PRECISION")
    arguments = ""
    if cursor.peek() == Token("punct", "("):
        inside = _parenthesized(cursor)
        if base in ("enum", "set"):
            members = [token for token in inside if token != Token("punct", ",")]
            if not members or any(token.kind != "string" for token in members):
                raise Unapplicable(f"{base} members")
            arguments = ",".join(_quoted(token.text) for token in members)
        else:
            parts = "".join(token.text for token in inside)
            if not re.fullmatch(r"\d+(,\d+)?", parts):
                raise Unapplicable(f"{base} dimensions {parts!r}")
            arguments = parts
    unsigned = zerofill = False
    charset = None
    while True:
        if cursor.accept("UNSIGNED"):
            unsigned = True
        elif cursor.accept("SIGNED"):
            unsigned = False
        elif cursor.accept("ZEROFILL"):
            zerofill = True
        elif base in _CHARACTER_TYPES and cursor.accept("BINARY"):
            pass  # the character set's binary collation: the character set stays
        elif base in _CHARACTER_TYPES and (cursor.accept("CHARACTER", "SET") or cursor.accept("CHARSET")):
            charset = _value_token(cursor, "character set")
        elif cursor.word() in ("ASCII", "UNICODE", "BYTE"):
            raise Unapplicable(f"{cursor.word()} type option")
        else:
            break
    if charset is not None and charset.lower() == "binary":
        raise Unapplicable("a CHARACTER SET binary column (the server makes it a binary type)")
    column_type = base + (f"({arguments})" if arguments or base in ("enum", "set") else "")
    if unsigned or zerofill:
        column_type += " unsigned"
    if zerofill:
        column_type += " zerofill"
    return base, column_type, charset


def _now(cursor: _Cursor) -> str | None:
    """CURRENT_TIMESTAMP / NOW() / LOCALTIME[STAMP], [(n)], as information_schema says it."""
    if cursor.word() not in _NOW:
        return None
    cursor.pos += 1
    precision = ""
    if cursor.peek() == Token("punct", "("):
        inside = _parenthesized(cursor)
        precision = "".join(token.text for token in inside)
        if precision and not precision.isdigit():
            raise Unapplicable(f"fractional digits {precision!r}")
    return f"current_timestamp({precision})"


def _number(cursor: _Cursor) -> str | None:
    """A signed number literal as written (`-2.5`, `1e3`), or None (nothing consumed)."""
    start = cursor.pos
    text = ""
    token = cursor.peek()
    if token is not None and token.kind == "punct" and token.text in "+-":
        text, cursor.pos = token.text, cursor.pos + 1
    while True:  # `1.5e-3` comes as 1 . 5e - 3
        token = cursor.peek()
        if token is None:
            break
        if token.kind == "word" and _NUMBER_PIECE.fullmatch(token.text) and text[-1:] in ("", ".", "+", "-"):
            text += token.text
        elif token == Token("punct", ".") and "." not in text and "e" not in text.lower():
            text += "."
        elif token.kind == "punct" and token.text in "+-" and text[-1:] in ("e", "E"):
            text += token.text
        else:
            break
        cursor.pos += 1
    if _NUMBER.fullmatch(text):
        return text
    cursor.pos = start
    return None


def _default_value(cursor: _Cursor) -> str:
    """A DEFAULT clause's value in information_schema's form on MariaDB."""
    token = cursor.peek()
    if token is None:
        raise Unapplicable("DEFAULT without a value")
    if token == Token("punct", "("):
        return "(" + _text(_parenthesized(cursor)) + ")"  # an expression: no literal default
    if cursor.accept("NULL"):
        return "NULL"
    now = _now(cursor)
    if now is not None:
        return now
    word = token.word
    if word is not None and cursor.peek(1) is not None and cursor.peek(1).kind == "string":
        if word.startswith("_") or word == "N":  # a character set introducer
            cursor.pos += 1
        elif word in ("X", "B"):
            cursor.pos += 2
            return word.lower() + "'" + cursor.tokens[cursor.pos - 1].text + "'"
        else:
            raise Unapplicable(f"default {word} literal")  # DATE '…', TIMESTAMP '…'
    if cursor.peek() is not None and cursor.peek().kind == "string":
        text = ""
        while cursor.peek() is not None and cursor.peek().kind == "string":  # adjacent literals concatenate
            text += cursor.peek().text
            cursor.pos += 1
        return _quoted(text)
    number = _number(cursor)
    if number is not None:
        return number
    if word is not None and re.fullmatch(r"0X[0-9A-F]+|0B[01]+", word):
        raise Unapplicable(f"default {token.text}")
    if word is not None and word not in ("TRUE", "FALSE") and cursor.peek(1) == Token("punct", "("):
        cursor.pos += 1
        return token.text.lower() + "(" + _text(_parenthesized(cursor)) + ")"  # MariaDB: DEFAULT f(...)
    raise Unapplicable(f"default {token.text!r}")


def _column_spec(cursor: _Cursor, name: str, in_alter: bool) -> _ColumnSpec:
    """The rest of a column definition (after its name): type and attributes."""
    base, column_type, charset = _data_type(cursor)
    spec = _ColumnSpec(name, base, column_type, charset)
    while cursor.peek() is not None:
        if cursor.accept("NOT", "NULL"):
            spec.nullable = False
        elif cursor.accept("NULL"):
            spec.nullable = True
        elif cursor.accept("DEFAULT"):
            spec.default = _default_value(cursor)
        elif cursor.accept("ON", "UPDATE"):
            now = _now(cursor)
            if now is None:
                raise Unapplicable("ON UPDATE of no timestamp")
            spec.extra.append("on update " + now)
        elif cursor.accept("AUTO_INCREMENT"):
            spec.extra.append("auto_increment")
        elif cursor.accept("UNIQUE"):
            cursor.accept("KEY") or cursor.accept("INDEX")
            spec.unique = True
        elif cursor.accept("PRIMARY", "KEY") or cursor.accept("KEY"):
            spec.primary = True
        elif cursor.accept("COMMENT"):
            spec.comment = _name(cursor, "comment")
        elif cursor.accept("COLLATE"):
            collation = _value_token(cursor, "collation")
            if spec.charset is None and base in _CHARACTER_TYPES:
                spec.charset = _collation_charset(collation)
        elif base in _CHARACTER_TYPES and (cursor.accept("CHARACTER", "SET") or cursor.accept("CHARSET")):
            spec.charset = _value_token(cursor, "character set")
        elif cursor.word() in ("COLUMN_FORMAT", "STORAGE", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "SRID",
                               "REF_SYSTEM_ID"):
            cursor.pos += 1
            _value_token(cursor, "attribute value")
        elif cursor.accept("COMPRESSED"):
            if cursor.accept_punct("="):
                _name(cursor, "compression method")
        elif cursor.accept("VISIBLE"):
            pass
        elif cursor.accept("INVISIBLE"):
            spec.extra.append("INVISIBLE")
        elif cursor.accept("GENERATED", "ALWAYS", "AS") or cursor.accept("AS"):
            _parenthesized(cursor)
            stored = cursor.accept("STORED") or cursor.accept("PERSISTENT")
            cursor.accept("VIRTUAL")
            spec.extra.append("STORED GENERATED" if stored else "VIRTUAL GENERATED")
        elif cursor.accept("REFERENCES"):
            _reference(cursor)
        elif cursor.word() in ("CONSTRAINT", "CHECK"):
            if cursor.accept("CONSTRAINT") and cursor.word() != "CHECK":
                _name(cursor, "constraint name")
            if not cursor.accept("CHECK"):
                raise Unapplicable("CONSTRAINT without CHECK in a column definition")
            _parenthesized(cursor)
            cursor.accept("NOT")
            cursor.accept("ENFORCED")
        elif cursor.accept("WITHOUT", "SYSTEM", "VERSIONING"):
            pass
        elif in_alter and cursor.accept("FIRST"):
            spec.place = ("FIRST", None)
        elif in_alter and cursor.accept("AFTER"):
            spec.place = ("AFTER", _name(cursor, "column after"))
        else:
            token = cursor.peek()
            raise Unapplicable(f"column attribute {token.text!r}")  # type: ignore[union-attr]
    return spec


def _reference(cursor: _Cursor) -> None:
    """REFERENCES t [(cols)] [MATCH x] [ON DELETE a] [ON UPDATE a] (its ON UPDATE is no timestamp's)."""
    _name(cursor, "referenced table")
    if cursor.accept_punct("."):
        _name(cursor, "referenced table")
    if cursor.peek() == Token("punct", "("):
        _parenthesized(cursor)
    if cursor.accept("MATCH"):
        _name(cursor, "match type")
    while cursor.accept("ON"):
        if not (cursor.accept("DELETE") or cursor.accept("UPDATE")):
            raise Unapplicable("ON of a reference")
        if not any(cursor.accept(*action) for action in _REFERENCE_ACTIONS):
            raise Unapplicable("reference action")


def _key_parts(cursor: _Cursor) -> tuple[str | None, ...]:
    """`(a, b(10) DESC, (expr))`: the columns of an index (None for an expression)."""
    parts: list[str | None] = []
    for part in _split_top_level(_parenthesized(cursor)):
        if not part:
            raise Unapplicable("an empty key part")
        if part[0] == Token("punct", "("):
            parts.append(None)
        elif part[0].kind in ("word", "quoted"):
            parts.append(part[0].text)
        else:
            raise Unapplicable("key part")
    return tuple(parts)


def _index_definition(cursor: _Cursor) -> tuple[str | None, tuple[str | None, ...]]:
    """`[name] [USING t] (parts) [options]` after INDEX / KEY / UNIQUE [INDEX|KEY]."""
    name = None
    cursor.accept("IF", "NOT", "EXISTS")
    if cursor.peek() != Token("punct", "(") and cursor.word() not in ("USING", "TYPE"):
        name = _name(cursor, "index name")
    if cursor.accept("USING") or cursor.accept("TYPE"):
        _name(cursor, "index type")
    parts = _key_parts(cursor)
    return name, parts  # index options after the parts change no definition


def _table_element(cursor: _Cursor, table: _Table) -> None:
    """One element of CREATE TABLE's list (or ALTER TABLE ADD's)."""
    symbol = None
    if cursor.accept("CONSTRAINT"):
        cursor.accept("IF", "NOT", "EXISTS")
        if cursor.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            symbol = _name(cursor, "constraint name")
    word = cursor.word()
    if cursor.accept("PRIMARY", "KEY"):
        if cursor.accept("USING") or cursor.accept("TYPE"):
            _name(cursor, "index type")
        table.add_key(PRIMARY, _key_parts(cursor), primary=True)
    elif cursor.accept("UNIQUE"):
        cursor.accept("INDEX") or cursor.accept("KEY")
        name, parts = _index_definition(cursor)
        table.add_key(name or symbol, parts)  # CONSTRAINT c UNIQUE (a): the index is called c
    elif word in ("INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK") or (
            word == "PERIOD" and cursor.word(1) == "FOR" and cursor.word(2) != "SYSTEM_TIME"):
        return  # changes no column and no unique index
    elif word == "PERIOD":
        raise Unapplicable("system versioning")
    else:
        name = _name(cursor, "column name")
        _add_column(table, _column_spec(cursor, name, in_alter=False))


def _add_column(table: _Table, spec: _ColumnSpec, at: int | None = None) -> None:
    table.place(spec.definition(table.charset), spec.place, at)
    table.fresh.add(spec.name.lower())
    if spec.primary:
        table.add_key(PRIMARY, (spec.name,), primary=True)
    if spec.unique:
        table.add_key(None, (spec.name,))


# --- table options ----------------------------------------------------------------------------

# Options that change no definition; each takes a value (`ENGINE=InnoDB`, `ROW_FORMAT DYNAMIC`).
_VALUED_OPTIONS = frozenset("""ENGINE TYPE AUTO_INCREMENT AVG_ROW_LENGTH CHECKSUM TABLE_CHECKSUM PAGE_CHECKSUM
    COMPRESSION CONNECTION DELAY_KEY_WRITE ENCRYPTION ENCRYPTED ENCRYPTION_KEY_ID INSERT_METHOD KEY_BLOCK_SIZE
    MAX_ROWS MIN_ROWS PACK_KEYS PASSWORD ROW_FORMAT STATS_AUTO_RECALC STATS_PERSISTENT STATS_SAMPLE_PAGES TABLESPACE
    STORAGE TRANSACTIONAL PAGE_COMPRESSED PAGE_COMPRESSION_LEVEL IETF_QUOTES SEQUENCE AUTOEXTEND_SIZE
    SECONDARY_ENGINE SECONDARY_ENGINE_ATTRIBUTE ENGINE_ATTRIBUTE ALGORITHM LOCK""".split())


def _table_options(cursor: _Cursor, table: _Table) -> None:
    """Table options up to the end (or a PARTITION BY, which changes no definition)."""
    while cursor.peek() is not None:
        if cursor.accept_punct(","):
            continue
        if cursor.accept("DEFAULT"):
            if cursor.word() not in ("CHARACTER", "CHARSET", "COLLATE"):
                raise Unapplicable("DEFAULT table option")
            continue
        if cursor.accept("CHARACTER", "SET") or cursor.accept("CHARSET"):
            table.charset = _value_token(cursor, "character set")
            if table.charset.lower() == "default":
                raise Unapplicable("CHARACTER SET DEFAULT")
        elif cursor.accept("COLLATE"):
            collation = _value_token(cursor, "collation")
            charset = _collation_charset(collation)
            if table.charset is None or table.charset.lower() != charset.lower():
                table.charset = charset
        elif cursor.accept("COMMENT"):
            table.comment = _value_token(cursor, "comment")
        elif cursor.accept("UNION"):
            cursor.accept_punct("=")
            _parenthesized(cursor)
        elif cursor.word() in ("DATA", "INDEX") and cursor.word(1) == "DIRECTORY":
            cursor.pos += 2
            _value_token(cursor, "directory")
        elif cursor.word() in _VALUED_OPTIONS:
            cursor.pos += 1
            _value_token(cursor, "option value")
        elif cursor.word() in ("PARTITION", "PARTITIONS", "SUBPARTITION"):
            return
        else:
            token = cursor.peek()
            raise Unapplicable(f"table option {token.text!r}")  # type: ignore[union-attr]


# --- statements -------------------------------------------------------------------------------

# ALTER TABLE clauses that change no column, no unique index and no table default.
_NO_CHANGE_CLAUSES = frozenset("""ALGORITHM LOCK FORCE ORDER ENABLE DISABLE VALIDATION DISCARD IMPORT TRUNCATE
    COALESCE REORGANIZE EXCHANGE ANALYZE CHECK OPTIMIZE REBUILD REPAIR REMOVE UPGRADE PARTITION SECONDARY_LOAD
    SECONDARY_UNLOAD""".split())


class _Statement:
    def __init__(self, tokens: list[Token], db: str, work: _Work, sql: str) -> None:
        self.cursor = _Cursor(tokens)
        self.db = db
        self.work = work
        self.sql = sql

    def apply(self) -> None:
        cursor = self.cursor
        if cursor.accept("CREATE"):
            self._create()
        elif cursor.accept("ALTER"):
            self._alter()
        elif cursor.accept("DROP"):
            self._drop()
        elif cursor.accept("RENAME"):
            if cursor.accept("TABLE") or cursor.accept("TABLES"):
                self._rename_tables()
        # anything else (TRUNCATE, OPTIMIZE, GRANT, views, routines, ...) defines no table;
        # a statement that changes one in a way not read here is caught below
        elif classify_ddl(self.sql, self.db).kind not in ("other", "truncate", "other_alter"):
            raise Unapplicable("statement")

    def _table(self) -> TableId:
        table = self.cursor.table(self.db)
        if table is None:
            raise Unapplicable("no table name")
        return table

    # CREATE [OR REPLACE] [TEMPORARY] TABLE [IF NOT EXISTS] t ... | CREATE [...] INDEX | CREATE DATABASE
    def _create(self) -> None:
        cursor = self.cursor
        replace = cursor.accept("OR", "REPLACE")
        if cursor.accept("TEMPORARY"):
            return  # never a captured table; the server logs none of its DDL in row format anyway
        if cursor.accept("DATABASE") or cursor.accept("SCHEMA"):
            self._create_database(if_not_exists=cursor.accept("IF", "NOT", "EXISTS"))
            return
        if cursor.accept("TABLE"):
            self._create_table(replace)
            return
        while cursor.word() in ("ONLINE", "OFFLINE", "FULLTEXT", "SPATIAL"):
            cursor.pos += 1
        unique = cursor.accept("UNIQUE")
        if cursor.accept("INDEX"):
            cursor.accept("IF", "NOT", "EXISTS")
            name = _name(cursor, "index name")
            if cursor.accept("USING") or cursor.accept("TYPE"):
                _name(cursor, "index type")
            if not cursor.accept("ON"):
                raise Unapplicable("CREATE INDEX without ON")
            table_id = self._table()
            parts = _key_parts(cursor)
            if unique:
                self._change(table_id, lambda table: table.add_key(name, parts))
            return
        # CREATE USER / VIEW / PROCEDURE / TRIGGER / ...: no table definition

    def _create_table(self, replace: bool) -> None:
        cursor = self.cursor
        if_not_exists = cursor.accept("IF", "NOT", "EXISTS")
        table_id = self._table()
        work = self.work
        if if_not_exists and not replace and (work.get(table_id) is not None or not work.vouches_absent(table_id)):
            if work.get(table_id) is None:
                work.unknown(table_id, "CREATE TABLE IF NOT EXISTS of a table that may exist")
            return  # it exists: the server changed nothing
        if cursor.accept("LIKE") or (cursor.peek() == Token("punct", "(") and cursor.word(1) == "LIKE"):
            wrapped = cursor.accept_punct("(")
            cursor.accept("LIKE")
            source = self._table()
            if wrapped and not cursor.accept_punct(")"):
                raise Unapplicable("CREATE TABLE (LIKE ...)")
            original = work.get(source)
            if original is None:
                work.unknown(table_id, f"created LIKE {source}, whose definition is not known")
            else:
                work.put(table_id, dataclasses.replace(original, table=table_id))
            return
        if cursor.peek() != Token("punct", "("):
            raise Unapplicable("CREATE TABLE ... SELECT")
        elements = _parenthesized(cursor)
        rest = cursor.rest()
        if (elements and elements[0].word in ("SELECT", "WITH", "VALUES", "TABLE")) or any(
                token.word in ("SELECT", "AS", "IGNORE", "REPLACE", "VALUES") for token in rest):
            raise Unapplicable("CREATE TABLE ... SELECT")
        if any(token.word == "VERSIONING" for token in rest):
            raise Unapplicable("system versioning")
        # The options come after the columns, but their character set is every column's default.
        table = _Table.new(table_id, work.database_charset(table_id.db))
        _table_options(_Cursor(rest), table)
        if table.charset is None:
            raise Unapplicable(f"the default character set of database {table_id.db!r} is not known")
        for element in _split_top_level(elements):
            _table_element(_Cursor(element), table)
        if not table.columns:
            raise Unapplicable("a table of no columns")
        work.put(table_id, table.build())

    def _create_database(self, if_not_exists: bool) -> None:
        name = _name(self.cursor, "database name")
        if if_not_exists and self.work.database_charset(name) is not None:
            return
        charset = self._database_charset()
        if charset is None:
            charset = self.work.known.server_charset()
        self.work.databases[name] = charset

    def _database_charset(self) -> str | None:
        """[DEFAULT] CHARACTER SET / COLLATE options of CREATE / ALTER DATABASE."""
        cursor = self.cursor
        charset = collation_charset = None
        while cursor.peek() is not None:
            if cursor.accept("DEFAULT"):
                continue
            if cursor.accept("CHARACTER", "SET") or cursor.accept("CHARSET"):
                charset = _value_token(cursor, "character set")
            elif cursor.accept("COLLATE"):
                collation_charset = _collation_charset(_value_token(cursor, "collation"))
            elif cursor.word() in ("COMMENT", "ENCRYPTION", "READ"):
                cursor.pos += 1
                cursor.accept("ONLY")
                _value_token(cursor, "database option")
            else:
                raise Unapplicable("database option")
        return charset or collation_charset

    # ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] t [WAIT n | NOWAIT] clause, ... | ALTER DATABASE
    def _alter(self) -> None:
        cursor = self.cursor
        while cursor.accept("ONLINE") or cursor.accept("OFFLINE") or cursor.accept("IGNORE"):
            pass
        if cursor.accept("DATABASE") or cursor.accept("SCHEMA"):
            name = self.db if cursor.word() in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE") else \
                _name(cursor, "database name")
            if cursor.accept("UPGRADE"):
                return
            charset = self._database_charset()
            if charset is not None:
                self.work.databases[name] = charset
            return
        if not cursor.accept("TABLE"):
            return  # ALTER VIEW / USER / SEQUENCE / EVENT / ...: no table definition
        cursor.accept("IF", "EXISTS")
        table_id = self._table()
        if cursor.accept("WAIT"):
            cursor.pos += 1
        cursor.accept("NOWAIT")
        clauses = [clause for clause in _split_top_level(cursor.rest()) if clause]
        renamed_to = None
        definition = self.work.get(table_id)
        if definition is None:
            self.work.unknown(table_id, "ALTER TABLE of a table whose definition is not known")
            for clause in clauses:  # its new name is as unknown
                if clause[0].word == "RENAME" and (len(clause) < 2 or clause[1].word not in ("COLUMN", "INDEX", "KEY")):
                    target = _Cursor(clause[1:])
                    target.accept("TO") or target.accept("AS")
                    new = target.table(self.db)
                    if new is not None and new != table_id:
                        self.work.put(table_id, None)
                        self.work.unknown(new, f"renamed from {table_id}, whose definition is not known")
            return
        table = _Table(definition)
        for clause in clauses:
            new_name = _alter_clause(_Cursor(clause), table, self.db, self.work)
            if new_name is not None:
                renamed_to = new_name
        if renamed_to is not None and renamed_to != table_id:
            table.id = renamed_to
            self.work.put(table_id, None)
            self.work.put(renamed_to, table.build())
        else:
            self.work.put(table_id, table.build())

    # DROP [TEMPORARY] TABLE[S] [IF EXISTS] a, b | DROP INDEX i ON t | DROP DATABASE d
    def _drop(self) -> None:
        cursor = self.cursor
        if cursor.accept("TEMPORARY"):
            return
        if cursor.accept("DATABASE") or cursor.accept("SCHEMA"):
            cursor.accept("IF", "EXISTS")
            name = _name(cursor, "database name")
            effect = self.drop_database(name)
            self.work.changed.update(effect.tables)
            self.work.databases.update(effect.databases)
            return
        if cursor.accept("TABLE") or cursor.accept("TABLES"):
            cursor.accept("IF", "EXISTS")
            while True:
                self.work.put(self._table(), None)
                if not cursor.accept_punct(","):
                    break
            return
        cursor.accept("ONLINE") or cursor.accept("OFFLINE")
        if cursor.accept("INDEX"):
            cursor.accept("IF", "EXISTS")
            name = _name(cursor, "index name")
            if not cursor.accept("ON"):
                raise Unapplicable("DROP INDEX without ON")
            self._change(self._table(), lambda table: table.drop_key(name))

    def drop_database(self, name: str) -> DdlEffect:
        """DROP DATABASE: each known table of it is gone, and its character set."""
        tables = {table: None for table in self.work.known.tables_in(name)}
        tables.update({table: None for table in self.work.changed if table.db == name})
        return DdlEffect(tables=tables, databases={name: None})  # type: ignore[arg-type]

    def _change(self, table_id: TableId, change) -> None:
        definition = self.work.get(table_id)
        if definition is None:
            self.work.unknown(table_id, "changed, and its definition is not known")
            return
        table = _Table(definition)
        change(table)
        self.work.put(table_id, table.build())

    # RENAME TABLE a TO b [, c TO d ...], one after the other (a swap through a third name works)
    def _rename_tables(self) -> None:
        for pair in _split_top_level(self.cursor.rest()):
            read = rename_pair(pair, self.db)
            if read is None or not read[2]:
                raise Unapplicable("RENAME TABLE pair")
            source, target, _ = read
            definition = self.work.get(source)
            unknown = self.work.is_unresolved(source) or definition is None
            self.work.put(source, None)
            if unknown:
                self.work.unknown(target, f"renamed from {source}, whose definition is not known")
            else:
                self.work.put(target, dataclasses.replace(definition, table=target))


def _alter_clause(cursor: _Cursor, table: _Table, db: str, work: _Work) -> TableId | None:
    """Apply one ALTER TABLE clause to `table`; returns the new name of RENAME TO."""
    word = cursor.word()
    if word == "ADD":
        cursor.pos += 1
        _add_clause(cursor, table)
    elif word == "DROP":
        cursor.pos += 1
        _drop_clause(cursor, table)
    elif word in ("MODIFY", "CHANGE"):
        cursor.pos += 1
        cursor.accept("COLUMN")
        if_exists = cursor.accept("IF", "EXISTS")
        old = _name(cursor, "column name")
        new = None if word == "MODIFY" else _name(cursor, "new column name")
        at = table.existing(old)
        if at is None:
            if if_exists:
                return None
            raise Unapplicable(f"{table.id} has no column {old!r}")
        if new is None:  # MODIFY keeps the name as the table has it (`MODIFY V` of column v: still v)
            new = old = table.columns[at].name
        spec = _column_spec(cursor, new, in_alter=True)
        del table.columns[at]
        table.fresh.add(new.lower())
        if new != old:
            table.rename_in_keys(old, new)
        _add_column(table, spec, at)
    elif word == "RENAME":
        cursor.pos += 1
        if cursor.accept("COLUMN"):
            old = _name(cursor, "column name")
            if not cursor.accept("TO"):
                raise Unapplicable("RENAME COLUMN without TO")
            new = _name(cursor, "new column name")
            at = table.index(old)
            table.columns[at] = dataclasses.replace(table.columns[at], name=new)
            table.rename_in_keys(old, new)
            table.fresh.add(new.lower())
        elif cursor.accept("INDEX") or cursor.accept("KEY"):
            old = _name(cursor, "index name")
            if not cursor.accept("TO"):
                raise Unapplicable("RENAME INDEX without TO")
            new = _name(cursor, "new index name")
            found = table.find_key(old)
            if found is not None:
                table.unique[found] = (new, table.unique[found][1])
        else:
            cursor.accept("TO") or cursor.accept("AS")
            new_table = cursor.table(db)
            if new_table is None or cursor.peek() is not None:
                raise Unapplicable("RENAME TO")
            return new_table
    elif word == "ALTER":
        cursor.pos += 1
        if cursor.word() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return None  # visibility, enforcement: no definition
        cursor.accept("COLUMN")
        name = _name(cursor, "column name")
        at = table.index(name)
        column = table.columns[at]
        if cursor.accept("SET", "DEFAULT"):
            default = _default_value(cursor)
            column = dataclasses.replace(column, default=None if default == "NULL" and not column.nullable else default)
        elif cursor.accept("DROP", "DEFAULT"):
            column = dataclasses.replace(column, default="NULL" if column.nullable else None)
        elif cursor.accept("SET", "VISIBLE") or cursor.accept("SET", "INVISIBLE"):
            extra = [part for part in column.extra.split() if part != "INVISIBLE"]
            if cursor.tokens[cursor.pos - 1].word == "INVISIBLE":
                extra.append("INVISIBLE")
            column = dataclasses.replace(column, extra=" ".join(extra))
        else:
            raise Unapplicable("ALTER COLUMN")
        if cursor.peek() is not None:
            raise Unapplicable("ALTER COLUMN")
        table.columns[at] = column
    elif word == "CONVERT":
        cursor.pos += 1
        if cursor.accept("PARTITION"):  # MariaDB: CONVERT PARTITION p TO TABLE x makes a table x
            _name(cursor, "partition name")
            if not cursor.accept("TO", "TABLE"):
                raise Unapplicable("CONVERT PARTITION")
            new_table = cursor.table(db)
            if new_table is None:
                raise Unapplicable("CONVERT PARTITION")
            work.unknown(new_table, "made from a partition of another table")
            return None
        if cursor.accept("TABLE"):  # MariaDB: CONVERT TABLE x TO PARTITION p: x becomes a partition
            old_table = cursor.table(db)
            if old_table is None:
                raise Unapplicable("CONVERT TABLE")
            work.put(old_table, None)
            return None
        if not cursor.accept("TO"):
            raise Unapplicable("CONVERT")
        if not (cursor.accept("CHARACTER", "SET") or cursor.accept("CHARSET")):
            raise Unapplicable("CONVERT TO")
        charset = _value_token(cursor, "character set")
        if cursor.accept("COLLATE"):
            _value_token(cursor, "collation")
        if charset.lower() in ("default", "binary") or any(
                column.column_type.split("(")[0] in _TEXT_TYPES and column.charset is not None
                for column in table.columns):
            raise Unapplicable("CONVERT TO CHARACTER SET over TEXT columns (the server may widen them)")
        table.charset = charset
        table.columns = [dataclasses.replace(column, charset=charset) if column.charset is not None else column
                         for column in table.columns]
    elif word in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UNION") or word in _VALUED_OPTIONS or (
            word in ("DATA", "INDEX") and cursor.word(1) == "DIRECTORY"):
        _table_options(cursor, table)
    elif word in ("WITH", "WITHOUT") and cursor.word(1) == "VALIDATION":
        pass
    elif word in _NO_CHANGE_CLAUSES:
        pass
    else:
        token = cursor.peek()
        raise Unapplicable(f"ALTER TABLE clause {token.text if token else ''!r}")
    return None


def _add_clause(cursor: _Cursor, table: _Table) -> None:
    """ADD [COLUMN] [IF NOT EXISTS] col ... | ADD (cols) | ADD index / key / constraint / partition."""
    column = cursor.accept("COLUMN")
    if_not_exists = cursor.accept("IF", "NOT", "EXISTS")
    word = cursor.word()
    if not column and word in ("PARTITION",):
        return
    if not column and word == "SYSTEM":
        raise Unapplicable("system versioning")
    if not column and word == "PERIOD":
        if cursor.word(2) == "SYSTEM_TIME":
            raise Unapplicable("system versioning")
        return
    if not column and word in ("CONSTRAINT", "PRIMARY", "UNIQUE", "INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN",
                               "CHECK"):
        _table_element(cursor, table)
        return
    if cursor.peek() == Token("punct", "("):
        for element in _split_top_level(_parenthesized(cursor)):
            element_cursor = _Cursor(element)
            name = _name(element_cursor, "column name")
            if if_not_exists and table.find(name) is not None:
                continue
            _add_column(table, _column_spec(element_cursor, name, in_alter=False))
        return
    name = _name(cursor, "column name")
    if if_not_exists and table.find(name) is not None:
        return
    if table.find(name) is not None:
        raise Unapplicable(f"{table.id} has a column {name!r} already")
    _add_column(table, _column_spec(cursor, name, in_alter=True))


def _drop_clause(cursor: _Cursor, table: _Table) -> None:
    if cursor.accept("PRIMARY", "KEY"):
        table.drop_key(PRIMARY)
        return
    if cursor.word() in ("INDEX", "KEY", "CONSTRAINT"):
        cursor.pos += 1
        cursor.accept("IF", "EXISTS")
        table.drop_key(_name(cursor, "index name"))  # a CHECK or FOREIGN KEY constraint: no key
        return
    if cursor.word() in ("FOREIGN", "CHECK", "PARTITION") or (
            cursor.word() == "PERIOD" and cursor.word(1) == "FOR" and cursor.word(2) != "SYSTEM_TIME"):
        return
    if cursor.word() in ("SYSTEM", "PERIOD"):
        raise Unapplicable("system versioning")
    cursor.accept("COLUMN")
    if_exists = cursor.accept("IF", "EXISTS")
    name = _name(cursor, "column name")
    if cursor.peek() is not None:
        cursor.accept("RESTRICT") or cursor.accept("CASCADE")
        if cursor.peek() is not None:
            raise Unapplicable("DROP COLUMN")
    at = table.existing(name)
    if at is None:
        if if_exists:
            return
        raise Unapplicable(f"{table.id} has no column {name!r}")
    del table.columns[at]
    table.drop_from_keys(name)
