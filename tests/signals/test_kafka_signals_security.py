"""The Kafka signal channel over SASL_SSL (`secured_broker`): a signal sent with each mechanism's
user is read back by the channel with the same options; a channel with a wrong password sees
nothing (it cannot log in) and the engine names the setting (tests/sinks/kafka/test_kafka_security.py)."""

from __future__ import annotations

import uuid

import pytest
from support import eventually
from support.fixtures.broker import USERS

from dblog.signals.kafka_channel import KafkaSignalChannel, KafkaSignalChannelError, send_signal

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("mechanism", list(USERS))
def test_signals_go_through_a_sasl_ssl_topic_with_each_mechanism(mechanism, secured_broker):
    topic = f"signals-{uuid.uuid4().hex[:8]}"
    secured_broker.create_topic(topic)
    options = secured_broker.client_options(*USERS[mechanism], mechanism)
    send_signal(secured_broker.bootstrap, topic, "conn", "log", {"message": "hi"}, "s-1", client_options=options)
    with KafkaSignalChannel(secured_broker.bootstrap, topic, "conn", discovery_interval=0.1,
                            client_options=options) as channel:
        received = []
        eventually(lambda: received.extend(channel.poll(200)) or received, timeout=30, message="the signal")
    assert received == [("s-1", "log", {"message": "hi"})]


def test_a_channel_that_cannot_log_in_raises(secured_broker):
    user, _ = USERS["SCRAM-SHA-256"]
    options = secured_broker.client_options(user, "wrong", "SCRAM-SHA-256")
    with pytest.raises(KafkaSignalChannelError):
        KafkaSignalChannel(secured_broker.bootstrap, "any", "conn", connect_timeout=3, client_options=options)
