"""How every Kafka client of dblog connects: TLS and SASL settings, resolved, and the functions
that turn them into kafka-python's client options (`client_options`) and, for the Kafka sink's
data producer (confluent-kafka, i.e. librdkafka), librdkafka's properties (`librdkafka_options`).

The signal channel, the notifications producer, `dblog signal --via kafka` and the admin clients
that create topics pass `client_options(security)` to kafka-python, the data sink's producer
`librdkafka_options(security)` to librdkafka, so one `[kafka]` section secures them all alike. `KafkaSecurity` holds resolved values (secrets read
from their `_env` / `_file` already, by `dblog.runtime.config.KafkaConfig.security()`); its
repr and kafka-python's own debug log of its configuration show the secrets as `[hidden]`.

kafka-python reports a refused login or an untrusted certificate in several ways, depending on
the broker: real Kafka answers a wrong SCRAM password with SASL_AUTHENTICATION_FAILED (raised
as `SaslAuthenticationFailedError`), while a broker that answers with an RFC 5802 server error
(`e=invalid-proof`) or a TLS handshake that fails make kafka-python retry until its bootstrap
times out, which reads like "the brokers are down". `diagnose` tells these apart: it repeats the
TLS handshake and the SASL exchange once, on its own socket, with kafka-python's own SSL context
and SASL mechanism, and says which setting is wrong; the callers then stop instead of retrying
something that cannot succeed. `refusal` is the part of that answer a retry cannot change: the
runtime's kafka-python clients ask it before they connect, so a refused login stops them at once
instead of after their bootstrap timeout (10–30 s of retries).
"""

from __future__ import annotations

import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import Literal

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class _Hidden(str):
    """A secret handed to kafka-python: the string itself, but its repr (which kafka-python's
    debug log of its configuration prints) shows no secret."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'[hidden]'"


@dataclass(frozen=True)
class KafkaSecurity:
    """The `[kafka]` section's security settings, with the secrets resolved."""

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca: str | None = None  # None: the system's trust store
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def describe(self) -> str:
        """How dblog connects, for messages (no secret): e.g. "SASL_SSL, SCRAM-SHA-512 as 'dblog'"."""
        if self.uses_sasl:
            return f"{self.protocol}, {self.sasl_mechanism} as {self.sasl_username!r}"
        return self.protocol


PLAINTEXT = KafkaSecurity()


def client_options(security: KafkaSecurity | None) -> dict:
    """kafka-python's keyword arguments for `security`, the same for KafkaProducer,
    KafkaConsumer and KafkaAdminClient."""
    security = security or PLAINTEXT
    options: dict = {"security_protocol": security.protocol}
    if security.uses_sasl:
        options.update(sasl_mechanism=security.sasl_mechanism, sasl_plain_username=security.sasl_username,
                       sasl_plain_password=_Hidden(security.sasl_password or ""))
    if security.uses_tls:
        options.update(ssl_cafile=security.ssl_ca, ssl_certfile=security.ssl_cert, ssl_keyfile=security.ssl_key,
                       ssl_check_hostname=security.ssl_check_hostname)
        if security.ssl_key_password:
            options["ssl_password"] = _Hidden(security.ssl_key_password)
    return options


def librdkafka_options(security: KafkaSecurity | None) -> dict:
    """The same settings as librdkafka's configuration properties, for the Kafka sink's data
    producer (confluent-kafka): the names differ, the meaning is the same. No CA file: librdkafka
    probes the system's usual trust store locations ("probe"), as kafka-python uses the system's
    trust store."""
    security = security or PLAINTEXT
    options: dict = {"security.protocol": security.protocol}
    if security.uses_sasl:
        options.update({"sasl.mechanism": security.sasl_mechanism, "sasl.username": security.sasl_username,
                        "sasl.password": _Hidden(security.sasl_password or "")})
    if security.uses_tls:
        options["ssl.ca.location"] = security.ssl_ca or "probe"
        if security.ssl_cert:
            options.update({"ssl.certificate.location": security.ssl_cert, "ssl.key.location": security.ssl_key})
        if security.ssl_key_password:
            options["ssl.key.password"] = _Hidden(security.ssl_key_password)
        options["ssl.endpoint.identification.algorithm"] = "https" if security.ssl_check_hostname else "none"
    return options


def quiet_client_logs() -> None:
    """kafka-python logs each failed connection attempt at ERROR, dozens a second while a broker is
    down, and librdkafka (the data producer) does the same; the sink's errors say what failed.
    Their logs stay as configured when the user set their level, or run at debug level."""
    for client in (logging.getLogger("kafka"), logging.getLogger("librdkafka")):
        if client.level == logging.NOTSET and not logging.getLogger().isEnabledFor(logging.DEBUG):
            client.setLevel(logging.CRITICAL)


def ssl_context(security: KafkaSecurity) -> ssl.SSLContext:
    """The SSL context kafka-python builds from `client_options(security)` (with its own code),
    or a ValueError naming the setting whose file cannot be used."""
    from kafka.net.transport import KafkaSSLTransport

    if security.ssl_ca:
        try:
            ssl.create_default_context(cafile=security.ssl_ca)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"kafka.ssl_ca: cannot load {security.ssl_ca} as PEM CA certificates ({_reason(error)}); "
                             "give the PEM file of the CA that signed the brokers' certificates") from None
    if security.ssl_cert:
        try:
            ssl.create_default_context().load_cert_chain(security.ssl_cert, security.ssl_key,
                                                         security.ssl_key_password)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"kafka.ssl_cert / kafka.ssl_key: cannot load the client certificate {security.ssl_cert} "
                             f"with the key {security.ssl_key} ({_reason(error)}); give PEM files of a certificate "
                             "and its key, and kafka.ssl_key_password if the key is encrypted") from None
    config = dict(KafkaSSLTransport.DEFAULT_CONFIG)
    config.update({key: value for key, value in client_options(security).items() if key in config})
    return KafkaSSLTransport._build_ssl_context(config)


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or getattr(error, "reason", None) or str(error)


def check_files(security: KafkaSecurity) -> None:
    """ValueError naming the setting if a CA, certificate or key file cannot be used."""
    if security.uses_tls:
        ssl_context(security)


class _Unsettled(str):
    """A diagnosis a retry may change: the broker closed the connection mid-exchange (it may be
    restarting, or it may want what the settings lack)."""

    __slots__ = ()


def refusal(security: KafkaSecurity, bootstrap: str, timeout: float = 10.0) -> str | None:
    """`diagnose`'s answer when retrying cannot change it: a refused login, an untrusted or
    misnamed certificate, a mechanism the broker does not offer, a file that cannot be loaded.
    None when the brokers take the login, cannot be reached, or closed the connection midway."""
    problem = diagnose(security, bootstrap, timeout)
    return None if isinstance(problem, _Unsettled) else problem


def diagnose(security: KafkaSecurity, bootstrap: str, timeout: float = 10.0) -> str | None:
    """Why a Kafka client with `security` could not connect to `bootstrap`, when the reason is
    one of TLS or SASL: a message naming the setting and the remedy. None when the brokers
    cannot be reached at all, or when TLS and SASL succeed (then the cause lies elsewhere)."""
    if security.protocol == "PLAINTEXT":
        return None
    try:
        context = ssl_context(security) if security.uses_tls else None
    except ValueError as error:
        return str(error)
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]") or "localhost"
        try:
            sock = socket.create_connection((host, int(port)), timeout=timeout)
        except (OSError, ValueError):
            continue  # unreachable: try the next one
        try:
            if context is not None:
                problem = _tls_problem(context, sock, host, server, security)
                if isinstance(problem, str):
                    return problem
                sock = problem
            if security.uses_sasl:
                return _sasl_problem(sock, host, server, security)
            return None
        finally:
            sock.close()
    return None


def _tls_problem(context: ssl.SSLContext, sock: socket.socket, host: str, server: str, security: KafkaSecurity):
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as error:
        if "hostname" in (error.verify_message or "").lower() or "ip address mismatch" in str(error).lower():
            return (f"TLS: the certificate of the Kafka broker {server} is not issued for {host!r} "
                    f"({error.verify_message}); connect by a name the certificate holds (kafka.bootstrap_servers), "
                    "or set kafka.ssl_check_hostname = false to skip the name check")
        trusted = f"the CA in kafka.ssl_ca ({security.ssl_ca})" if security.ssl_ca else "the system's trust store"
        return (f"TLS: the certificate of the Kafka broker {server} is not signed by a CA dblog trusts "
                f"({error.verify_message}; dblog trusts {trusted}); set kafka.ssl_ca to the PEM file of the CA "
                "that signed the brokers' certificates")
    except ssl.SSLError as error:
        return (f"TLS: the handshake with the Kafka broker {server} failed ({error.reason or error}); check that "
                f"this listener speaks TLS (kafka.security_protocol = {security.protocol!r}) and, if the brokers "
                "require client certificates, kafka.ssl_cert / kafka.ssl_key")
    except OSError as error:  # the broker closed the connection: e.g. it wants a client certificate
        return _Unsettled(f"TLS: the Kafka broker {server} closed the connection during the TLS handshake "
                          f"({error}); check kafka.security_protocol, and kafka.ssl_cert / kafka.ssl_key if it "
                          "requires client certificates")


def _sasl_problem(sock: socket.socket, host: str, server: str, security: KafkaSecurity) -> str | None:
    from kafka.errors import for_code
    from kafka.net.sasl import get_sasl_mechanism
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    protocol = KafkaProtocol(client_id="dblog-diagnose")
    who = (f"kafka.sasl_username = {security.sasl_username!r} with kafka.sasl_mechanism = "
           f"{security.sasl_mechanism!r}")
    refused = (f"SASL: the Kafka broker {server} refused the login of {who}; check kafka.sasl_username and "
               "kafka.sasl_password (or sasl_password_env / sasl_password_file), and that the user exists for "
               "this mechanism")

    def call(request):
        protocol.send_request(request)
        sock.sendall(protocol.send_bytes())
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            responses = protocol.receive_bytes(data)
            if responses:
                return responses[0][1]

    try:
        handshake = call(SaslHandshakeRequest(version=1, mechanism=security.sasl_mechanism))
        if security.sasl_mechanism not in handshake.mechanisms:
            return (f"SASL: the Kafka broker {server} does not offer kafka.sasl_mechanism = "
                    f"{security.sasl_mechanism!r} (it offers {', '.join(handshake.mechanisms) or 'none'}); "
                    "set kafka.sasl_mechanism to one of those")
        mechanism = get_sasl_mechanism(security.sasl_mechanism)(host=host, **client_options(security))
        while not mechanism.is_done():
            answer = call(SaslAuthenticateRequest(version=1, auth_bytes=mechanism.auth_bytes()))
            if answer.error_code:
                return f"{refused} ({for_code(answer.error_code).__name__}: {answer.error_message})"
            if answer.auth_bytes.startswith(b"e="):  # RFC 5802 server-error, e.g. e=invalid-proof
                return f"{refused} (the broker answers {answer.auth_bytes.decode(errors='replace')})"
            try:
                mechanism.receive(answer.auth_bytes)
            except Exception:  # noqa: BLE001 - the server's answer does not prove it knows the password
                return refused
    except (OSError, ConnectionError) as error:
        return _Unsettled(f"SASL: the Kafka broker {server} closed the connection during the login of {who} "
                          f"({error}); check kafka.security_protocol (does this listener take SASL?) and the "
                          "credentials")
    except Exception:  # noqa: BLE001 - a protocol error: not a credentials problem we can name
        return None
    return None
