"""Debezium's `snapshot.select.statement.overrides` (dblog: `snapshot.select_overrides`): a
table's snapshot reads rows from the user's SELECT instead of the table.

Keyset chunking composes with an arbitrary SELECT by reading it as a derived table: every
chunk is `SELECT <the table's columns> FROM (<override>) AS dblog_source WHERE key > last AND
key <= max ORDER BY key LIMIT n`, and the maximum key is read from it the same way
(`dblog.mysql.chunk_reader.ChunkQuery.source`). So the SELECT must give the table's key
columns, by their names: without them no chunk can be bounded nor a row matched with the
binlog's changes, and the statement is refused naming the missing columns. The other columns
are taken by name too; one the SELECT leaves out is NULL in the rows (Debezium reads a result
set's columns by position, so its statements give them all anyway), and a column that is not
the table's is refused (a misspelling would otherwise be lost).

Checked when a table's read starts, against the server (`LIMIT 0` of the derived table: its
column names), not at configuration time: the table may not exist yet.
"""

from __future__ import annotations

import pymysql

from dblog.core.sql import quote_identifier
from dblog.mysql.schema import TableSchema, text_of
from dblog.mysql.server_session import ServerSession


class OverrideRefused(ValueError):
    """The override cannot be read as the table's rows (the message says why and what to do)."""


def override_source(server: ServerSession, schema: TableSchema, select: str) -> str:
    """The SELECT a chunk reads from for `schema`'s table: the override with every column of
    the table by name (NULL for those it leaves out). Raises OverrideRefused."""
    statement = select.strip().rstrip(";").strip()
    if not statement.lower().startswith(("select", "with", "(")):
        raise OverrideRefused(f"snapshot.select_overrides for {schema.table}: {statement[:80]!r} is not a SELECT")

    def columns_of(conn: pymysql.Connection) -> list[str]:
        with conn.cursor(pymysql.cursors.Cursor) as cursor:
            cursor.execute(f"SELECT * FROM ({statement.replace('%', '%%')}) AS `dblog_override` LIMIT 0", ())
            return [text_of(entry[0]) for entry in cursor.description]

    try:
        given = server.run(columns_of)
    except pymysql.err.MySQLError as error:
        raise OverrideRefused(f"snapshot.select_overrides for {schema.table}: the server refused it: "
                              f"{error.args[-1] if error.args else error}") from None
    by_name = {name.lower(): name for name in given}
    missing_key = [name for name in schema.key_columns if name.lower() not in by_name]
    if missing_key:
        raise OverrideRefused(
            f"snapshot.select_overrides for {schema.table}: the SELECT does not give the key column(s) "
            f"{', '.join(missing_key)}: dblog reads it in chunks ordered and bounded by the table's key, and matches "
            f"its rows with the binlog's changes by it; select them (e.g. SELECT * FROM {schema.table} WHERE …)")
    unknown = [name for name in given if not schema.has_column(name) and
               name.lower() not in {column.lower() for column in schema.column_names}]
    if unknown:
        raise OverrideRefused(f"snapshot.select_overrides for {schema.table}: {', '.join(unknown)} "
                              f"{'is not a column' if len(unknown) == 1 else 'are not columns'} of the table; a "
                              "snapshot row has the table's columns only")
    parts = []
    for name in schema.column_names:
        quoted = quote_identifier(name)
        found = by_name.get(name.lower())
        parts.append(f"`dblog_override`.{quote_identifier(found)} AS {quoted}" if found else f"NULL AS {quoted}")
    return f"SELECT {', '.join(parts)} FROM ({statement}) AS `dblog_override`"
