"""How long the runtime's Kafka clients take to give up on a login the broker refuses: the
notifications producer, the signal channel's consumer and `dblog signal --via kafka`'s producer
(`dblog.runtime.kafka_access`), each built with a wrong SASL password against a private Apache
Kafka broker (`lab.localbroker`, SASL_SSL, a test CA made by trustme), in this process, until
the ConfigError that names `kafka.sasl_password`. The limit of each figure is the same client
built with the right password (a login that succeeds), in the same run.

Before dblog tried the login once itself (`dblog.sinks.kafka.security.refusal`), kafka-python
retried the refused login until its bootstrap timeout: 30 s for the notifications producer,
10 s for the others. This measure was the `took < 60` assertion of
`tests/sinks/kafka/test_kafka_security.py` (a timing assertion is not a test).

    python -m benchmarks --only kafka-refusal --name kafka-refusal
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from benchmarks.figures import Figure
from dblog.runtime.config import ConfigError
from dblog.runtime.kafka_access import kafka_failure_explained
from dblog.sinks.kafka.security import KafkaSecurity, client_options, quiet_client_logs
from lab.localbroker import LocalBroker

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

USER, PASSWORD, MECHANISM = "bench-refusal", "right-secret-7", "SCRAM-SHA-256"


def _clients(bootstrap: str, topic: str) -> dict[str, Callable[[dict], Callable[[], None]]]:
    """Per client: build it with these client options, returning how to close it."""
    from dblog.signals.kafka_channel import KafkaSignalChannel, send_signal
    from dblog.signals.notifications import KafkaNotifier

    def notifications(options: dict) -> Callable[[], None]:
        return KafkaNotifier(bootstrap, topic, "bench", options).close

    def signal_channel(options: dict) -> Callable[[], None]:
        return KafkaSignalChannel(bootstrap, topic, "bench", client_options=options).close

    def signal_cli(options: dict) -> Callable[[], None]:
        send_signal(bootstrap, topic, "bench", "log", {"message": "bench"}, uuid.uuid4().hex, client_options=options)
        return lambda: None

    return {"notifications": notifications, "signal_channel": signal_channel, "signal_cli": signal_cli}


def _seconds(bootstrap: str, security: KafkaSecurity, build: Callable[[dict], Callable[[], None]]) -> tuple[float, str]:
    """The time to build the client (or to be refused), and the refusal's message ("" if none)."""
    started = time.perf_counter()
    try:
        with kafka_failure_explained(bootstrap, security, "the benchmark"):
            close = build(client_options(security))
    except ConfigError as refused:
        return time.perf_counter() - started, str(refused)
    took = time.perf_counter() - started
    close()
    return took, ""


def measure_kafka_refusal(context: BenchContext) -> None:
    import trustme

    section = "kafka-refusal"
    quiet_client_logs()
    with tempfile.TemporaryDirectory(prefix="bench-refusal-") as folder:
        ca, paths = trustme.CA(), {name: str(Path(folder) / f"{name}.pem") for name in ("ca", "cert", "key")}
        server = ca.issue_cert("127.0.0.1", "localhost")
        ca.cert_pem.write_to_path(paths["ca"])
        for index, pem in enumerate(server.cert_chain_pems):
            pem.write_to_path(paths["cert"], append=index > 0)
        server.private_key_pem.write_to_path(paths["key"])
        broker = LocalBroker(cert=paths["cert"], key=paths["key"], ca=paths["ca"], authentication=True)
        broker.create_user(USER, PASSWORD, MECHANISM)
        with broker as running:
            running.allow_everything(USER)
            topic = f"bench-refusal-{uuid.uuid4().hex[:8]}"
            running.create_topic(topic)
            right = KafkaSecurity("SASL_SSL", MECHANISM, USER, PASSWORD, ssl_ca=paths["ca"])
            wrong = KafkaSecurity("SASL_SSL", MECHANISM, USER, "wrong-password", ssl_ca=paths["ca"])
            for name, build in _clients(running.bootstrap, topic).items():
                accepted, _ = _seconds(running.bootstrap, right, build)
                context.report(Figure(
                    f"kafka_refusal.login.{name}", section, f"{name}: built with the right password",
                    round(accepted * 1000, 1), "ms"))
                refused, message = _seconds(running.bootstrap, wrong, build)
                context.report(Figure(
                    f"kafka_refusal.refused.{name}", section, f"{name}: a wrong password refused",
                    round(refused * 1000, 1), "ms", limit=f"kafka_refusal.login.{name}",
                    check="a ConfigError naming kafka.sasl_password, without the password",
                    check_ok="kafka.sasl_password" in message and "wrong-password" not in message))
