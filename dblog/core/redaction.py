"""Credentials in SQL text read from the server, replaced before anything else in dblog sees it.

Why. The binlog holds account and connection statements as the server logged them, and dblog
passes a statement's text on: the schema change topic's `ddl`, the JSON-lines schema-change
records, a TABLE_SCAN_RESTARTED notification's reason. What the servers write:
- MariaDB (10.11, read from its binlog): the statement as the client sent it, plain password
  included: `CREATE USER 'u'@'%' IDENTIFIED BY 'pw'`, `ALTER USER …`, `GRANT … TO … IDENTIFIED BY
  'pw'`, `IDENTIFIED VIA ed25519 USING PASSWORD('pw')`, `SET STATEMENT … FOR CREATE USER …`;
  `SET PASSWORD FOR 'u'@'%'='*<hash>'` with the password's hash.
- MySQL 8.0+ rewrites the password into its hash for the binlog (the manual, "Passwords and
  Logging"; sql/sql_rewrite.cc, Consumer_type::BINLOG): `CREATE USER 'u'@'%' IDENTIFIED WITH
  'caching_sha2_password' AS '$A$005$…'`, SET PASSWORD as `ALTER USER … IDENTIFIED WITH '<plugin>'
  AS '<hash>'`. A hash is a credential too: it can be guessed at offline, and a
  mysql_native_password hash is all a client needs to log in.
- Both write a table's connection string as given: `CREATE TABLE … CONNECTION='mysql://user:pw@
  host/db/t'` (FEDERATED, CONNECT, Spider; InnoDB keeps the option too), and SHOW CREATE TABLE
  shows it. CREATE/ALTER SERVER and CHANGE MASTER / CHANGE REPLICATION SOURCE are not written to
  the binlog (MySQL runs the first under Disable_binlog_guard, sql/sql_servers.cc; MariaDB 10.11
  writes none of them), yet their passwords are redacted all the same.

What `redact_credentials(sql)` replaces, leaving the rest as written:
- in account statements (CREATE/ALTER USER, SET PASSWORD, and a GRANT or CLONE from its
  IDENTIFIED on): the value after BY, AS, USING, REPLACE and SET PASSWORD's `=`. The plugin of
  IDENTIFIED WITH / VIA stays, and so do account names, REQUIRE, COMMENT, ATTRIBUTE;
- in any statement: the value after a word ending in PASSWORD (`PASSWORD('pw')`, OLD_PASSWORD,
  `PASSWORD [=] 'pw'` of CREATE SERVER, START REPLICA or a table option, MASTER_PASSWORD,
  SOURCE_PASSWORD), and the string after CONNECTION or OPTION_LIST (a connection string, whole);
- in table statements: a COMMENT holding a Spider `password "…"` parameter, whole.
A value is the literal right after its marker, past `=` or `(` and a character set introducer
(`_binary'…'`, `X'…'`): a string, or a hex or bit number (`0x…`). Quotes and escapes are read by
the server's rules (`dblog.core.ddl`'s lexer); a string that does not end runs to the end of the
text, and is replaced whole. Free text (comments, COMMENT strings other than Spider's) is not read
for passwords.

The replacement is `<secret>`, bare, as MySQL's own text logs write it: a statement replayed as is
then fails instead of setting a known password. In CREATE/ALTER TABLE it is `'<secret>'`, a
string, so that what parses the statement (Debezium's DDL parser, a schema history) still can.
"""

from __future__ import annotations

import re

from dblog.core.ddl import Token, lex_spans

SECRET = "<secret>"

_AUTH_MARKERS = frozenset({"BY", "AS", "USING", "REPLACE"})
_CONNECTION_OPTIONS = frozenset({"CONNECTION", "OPTION_LIST"})
_NUMBER_LITERAL = re.compile(r"0[xX][0-9A-Fa-f]*|0[bB][01]*")  # a hash may be written as 0x…
_INTRODUCER = re.compile(r"_[0-9A-Za-z]+|[xXbBnN]")  # _utf8mb4'…', X'…', B'…', N'…'
_SPIDER_PASSWORD = re.compile(r"\bpassword\s+[\"']", re.IGNORECASE)
_EQUALS = Token("punct", "=")

Span = tuple[Token, int, int]


def redact_credentials(sql: str) -> str:
    """`sql` with every credential replaced by `<secret>` (see the module's docstring); the text
    itself when it holds none."""
    spans = lex_spans(sql)
    tokens = [token for token, _, _ in spans]
    start = _statement_start(tokens)
    head = tuple(token.word for token in tokens[start:start + 6])
    table_statement = _is_table_statement(head)
    authenticating = head[:2] in (("CREATE", "USER"), ("ALTER", "USER"), ("SET", "PASSWORD")) or (
        head[:4] == ("CREATE", "OR", "REPLACE", "USER"))
    cuts: list[tuple[int, int]] = []
    for index, token in enumerate(tokens):
        word = token.word
        if index >= start and word == "IDENTIFIED":
            authenticating = True
        elif (word is not None and (word.endswith("PASSWORD") or word in _CONNECTION_OPTIONS)) or (
                authenticating and index >= start and (word in _AUTH_MARKERS or token == _EQUALS)):
            cuts += _value_after(spans, index)
        elif table_statement and word == "COMMENT":
            cuts += [cut for cut in _value_after(spans, index)
                     if _SPIDER_PASSWORD.search(sql, cut[0], cut[1])]
    if not cuts:
        return sql
    replacement = f"'{SECRET}'" if table_statement else SECRET
    pieces, at = [], 0
    for cut_start, cut_end in sorted(set(cuts)):
        if cut_start < at:  # one value found from two markers (SET PASSWORD = PASSWORD('…'))
            continue
        pieces += [sql[at:cut_start], replacement]
        at = cut_end
    return "".join(pieces) + sql[at:]


def _statement_start(tokens: list[Token]) -> int:
    """Where the statement proper starts: after MariaDB's `SET STATEMENT var=value, … FOR`."""
    if [token.word for token in tokens[:2]] != ["SET", "STATEMENT"]:
        return 0
    depth = 0
    for index, token in enumerate(tokens[2:], 2):
        if token.kind == "punct" and token.text in "()":
            depth += 1 if token.text == "(" else -1
        elif depth == 0 and token.word == "FOR":
            return index + 1
    return 0


def _is_table_statement(head: tuple[str | None, ...]) -> bool:
    """CREATE [OR REPLACE] [TEMPORARY] TABLE, ALTER [ONLINE | OFFLINE | IGNORE] TABLE."""
    words = [word for word in head if word not in ("OR", "REPLACE", "TEMPORARY", "ONLINE", "OFFLINE", "IGNORE")]
    return words[:1] in (["CREATE"], ["ALTER"]) and words[1:2] == ["TABLE"]


def _value_after(spans: list[Span], index: int) -> list[tuple[int, int]]:
    """Where the literal after the marker at `index` stands ([] when none follows it)."""
    at = index + 1
    while at < len(spans) and spans[at][0] in (_EQUALS, Token("punct", "(")):
        at += 1
    if at >= len(spans):
        return []
    token, start, end = spans[at]
    if (token.kind == "word" and _INTRODUCER.fullmatch(token.text) and at + 1 < len(spans)
            and spans[at + 1][0].kind == "string"):
        return [(start, spans[at + 1][2])]
    if token.kind == "string" or (token.kind == "word" and _NUMBER_LITERAL.fullmatch(token.text)):
        return [(start, end)]
    return []
