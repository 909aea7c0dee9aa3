"""DDL on Kafka, as Debezium writes it: TRUNCATE as an `op: "t"` record on the table's topic
(when `skipped_operations` lets it, as Debezium's `skipped.operations`), other DDL naming a
captured table on the schema change topic (`<name>`, keyed by the database name), with its
start-up records at a first start (`dblog.sinks.schema_history`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from dblog.core.ddl import DdlChange
from dblog.core.events import SchemaChange, TableId
from dblog.sinks.envelope import statement_gtid, truncate_record
from dblog.sinks.kafka import connect_schema
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.encoding import RecordEncoding, TableDescriptions
from dblog.sinks.kafka.output import Output
from dblog.sinks.kafka.topics import Topics
from dblog.sinks.schema_history import (database_record, dropped_database, start_records, streamed_changes,
                                        streamed_records)


class SchemaChanges:
    def __init__(self, connector: str, captures: Callable[[TableId], bool], definitions: TableDescriptions | None,
                 encoding: RecordEncoding, topics: Topics, output: Output, delivery: Delivery,
                 context: list[tuple[str, bytes]]) -> None:
        self.settings = encoding.settings
        self._connector = connector
        self._captures = captures
        # Where schema-change records' table definitions come from (None: records without them)
        self._definitions = definitions
        self._encoding = encoding
        self._topics = topics
        self._output = output
        self._delivery = delivery
        self._context = context  # Debezium's context headers
        self._skipped = frozenset(self.settings.skipped_operations)  # Debezium's skipped.operations
        self._dropped_database = None  # the GTID of the last DROP DATABASE written (one record, many calls)

    def write(self, change: SchemaChange, ddl: DdlChange) -> None:
        """TRUNCATE: an `op: "t"` record (null key) on each captured table's topic, unless
        `skipped_operations` holds `t` (the default, Debezium's). Other DDL naming a captured
        table: a record on the schema change topic, keyed by the database name."""
        now_ns = time.time_ns()
        now = now_ns // 1_000_000
        if ddl.kind == "truncate":
            if "t" in self._skipped:  # Debezium's default skipped.operations
                return
            for table in ddl.tables:
                if self._captures(table):
                    self._topics.connect()
                    topic = self._topics.table_topic(table)
                    value = truncate_record(table, statement_gtid(change), self._connector, now, now_ns,
                                            change.source)["value"]
                    if self._output.transforms is not None:
                        self._output.emit(table, topic, None, value, [*self._context])
                        continue
                    self._delivery.send(topic, None, self._encoding.value_bytes(table, topic, value), self._context)
            return
        if not self.settings.schema_changes:
            return
        source = dataclasses.replace(change.source, gtid=statement_gtid(change))
        database = dropped_database(change.sql, change.db)
        if database is not None:  # reaches the sink as a DROP of each known table: one record, Debezium's
            if any(self._captures(table) for table in ddl.tables) and self._dropped_database != change.gtid:
                self._dropped_database = change.gtid
                self._send([database_record(change.sql, database, source, self._connector, now_ns)])
            return
        changes = streamed_changes(change.sql, ddl, self._captures)
        if changes:
            definitions = {}
            if self._definitions is not None:  # as of the statement: the schema history's, it applied
                for kind, table in changes:
                    definition = self._definitions.definition(table) if kind != "DROP" else None
                    if definition is not None:
                        definitions[table] = definition
            self._send(streamed_records(change.sql, changes, definitions, source, self._connector, now_ns))

    def first_start(self, tables: list[TableId], marked_rows_follow: bool) -> None:
        """Debezium's snapshot records of the captured tables on the schema change topic (SET,
        DROP TABLE IF EXISTS, DROP/CREATE DATABASE, USE, CREATE TABLE), once: at the first start,
        before anything else, so the first commit covers them."""
        if not self.settings.schema_changes or self._definitions is None or not tables:
            return
        snapshot = self._definitions.snapshot(tables)
        self._send(start_records(snapshot, tables, self._connector, time.time_ns(),
                                 last="true" if marked_rows_follow else "last"))

    def _send(self, records: list[dict]) -> None:
        if not records:
            return
        self._topics.connect()
        topic = self._topics.ready(self._topics.schema_change_topic())
        for record in records:  # the transforms may drop, change or route them (sink.kafka.transforms)
            self._output.record(topic, record["key"], record["value"], connect_schema.SCHEMA_CHANGE_KEY,
                                connect_schema.SCHEMA_CHANGE_VALUE, self._context)
        self._delivery.poll()
