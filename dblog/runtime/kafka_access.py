"""Kafka clients the runtime opens outside the sink (the signal channel, the notifications
producer, `dblog signal --via kafka`): a connection failure caused by TLS or SASL settings
becomes a ConfigError naming the setting (`dblog.sinks.kafka.security.diagnose`), so the engine
stops with the remedy instead of reporting an unreachable broker or retrying a login that cannot
succeed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka.errors import KafkaError

from dblog.runtime.config import ConfigError
from dblog.sinks.kafka.security import KafkaSecurity, diagnose
from dblog.signals.kafka_channel import KafkaSignalChannelError


@contextmanager
def kafka_failure_explained(bootstrap: str, security: KafkaSecurity, what: str) -> Iterator[None]:
    """Run the block; if it fails to reach Kafka because of TLS or SASL, raise ConfigError saying
    why (what: e.g. "the signal topic"). Other failures pass through unchanged."""
    try:
        yield
    except (KafkaError, KafkaSignalChannelError) as error:
        problem = diagnose(security, bootstrap)
        if problem is None:
            raise
        raise ConfigError(f"cannot connect to Kafka at {bootstrap} for {what} ({security.describe()}): {problem}") \
            from error
