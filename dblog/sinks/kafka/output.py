"""Where a record goes once it is made: through sink.kafka.transforms when there are (Kafka
Connect applies them to every record: a router may rename the topic, the unwrap passes records
that are not change events as they are), then to the producer. Records that are not row
changes (schema changes, transaction and heartbeat records) come with their fixed schemas.
"""

from __future__ import annotations

from dblog.core.events import TableId
from dblog.sinks.base import SinkError
from dblog.sinks.kafka.delivery import Delivery
from dblog.sinks.kafka.encoding import RecordEncoding
from dblog.sinks.kafka.topics import Topics
from dblog.sinks.kafka.transforms import Record, TransformChain, TransformError


class Output:
    def __init__(self, transforms: TransformChain | None, encoding: RecordEncoding, topics: Topics,
                 delivery: Delivery) -> None:
        self.transforms = transforms  # None: none, the records as Debezium writes them
        self._encoding = encoding
        self._topics = topics
        self._delivery = delivery
        settings = encoding.settings
        # the transforms see the Connect schemas when they are written, or when route_by_field must
        # check its column's type (Debezium's Struct.getString fails on another type, even on a null)
        self._transform_schemas = settings.schemas or any(
            getattr(item, "route_by_field", "") for item in settings.transforms)

    def record(self, topic: str, key: dict, value: dict, key_schema: dict, value_schema: dict,
               headers: list[tuple[str, bytes]] | None = None, partition: int = -1) -> None:
        """A record that is not a row change, with its schemas: through the transforms when there
        are (each with its own copy of `headers`: the unwrap adds to them), else to `topic`."""
        if self.transforms is not None:
            self.emit(None, topic, key, value, None if headers is None else [*headers], key_schema=key_schema,
                      value_schema=value_schema, envelope=False, partition=partition)
            return
        self._delivery.send(topic, self._encoding.payload(key_schema, key), self._encoding.payload(value_schema, value),
                            headers, partition)

    def emit(self, table: TableId | None, topic: str, key: dict | None, value: dict | None,
             headers: list | None = None, key_schema: dict | None = None, value_schema: dict | None = None,
             partition: int = -1,
             envelope: bool = True) -> None:
        """One record through the transforms, then to the topic they chose. `table` names the
        change's table (its schemas); None with `key_schema` / `value_schema` for other records."""
        encoding = self._encoding
        if self._transform_schemas and table is not None:
            key_schema = encoding.key_schema(table, topic, key) if key is not None else None
            value_schema = encoding.value_schema(table, topic, value) if value is not None else None
        elif not self._transform_schemas:
            key_schema = value_schema = None
        record = Record(topic, key, key_schema, value, value_schema, [] if headers is None else headers,
                        envelope and value is not None, tombstone=value is None)
        try:
            record = self.transforms.apply(record)
        except TransformError as error:
            raise SinkError(f"cannot write a record of {table or topic} to Kafka: {error}") from None
        if record is None:
            return
        self._topics.routed(record.topic)
        key_bytes = None if record.key is None else encoding.payload(record.key_schema, record.key)
        value_bytes = None if record.tombstone else encoding.payload(record.value_schema, record.value)
        self._delivery.send(record.topic, key_bytes, value_bytes, record.headers or None, partition)
