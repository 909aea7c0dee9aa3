"""Kafka clients the runtime opens outside the sink (the signal channel, the notifications
producer, `dblog signal --via kafka`, the preflight check's admin client): a connection failure
caused by TLS or SASL settings becomes a ConfigError naming the setting
(`dblog.sinks.kafka.security.diagnose`), so the engine stops with the remedy instead of reporting
an unreachable broker or retrying a login that cannot succeed.

A refused login is not an outage: kafka-python retries it until its bootstrap timeout (10–30 s)
as if the broker were down, so the login is tried once first (`refusal`), and a refusal stops
the client before it is built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka.errors import KafkaError

from dblog.runtime.config import ConfigError
from dblog.sinks.kafka.security import KafkaSecurity, diagnose, refusal
from dblog.signals.kafka_channel import KafkaSignalChannelError


@contextmanager
def kafka_failure_explained(bootstrap: str, security: KafkaSecurity, what: str) -> Iterator[None]:
    """Run the block unless the brokers refuse `security`'s login or certificate; if it fails to
    reach Kafka because of TLS or SASL, raise ConfigError saying why (what: e.g. "the signal
    topic"). Other failures pass through unchanged."""
    refused = refusal(security, bootstrap)
    if refused is not None:
        raise _explained(bootstrap, security, what, refused)
    try:
        yield
    except (KafkaError, KafkaSignalChannelError) as error:
        problem = diagnose(security, bootstrap)
        if problem is None:
            raise
        raise _explained(bootstrap, security, what, problem) from error


def _explained(bootstrap: str, security: KafkaSecurity, what: str, problem: str) -> ConfigError:
    return ConfigError(f"cannot connect to Kafka at {bootstrap} for {what} ({security.describe()}): {problem}")
