"""The tests' Kafka broker: Apache Kafka itself (`lab.apache_kafka`), with TLS, SASL and ACLs.

`with LocalBroker() as broker:` … `broker.bootstrap` is "127.0.0.1:<port>" (PLAINTEXT).

Secured: `LocalBroker(cert=..., key=...)` adds a TLS listener (PEM server certificate and key;
`client_ca` also requires client certificates signed by it, and then `client_cert` and
`client_key` are the ones the broker's own clients present), `authentication=True` a SASL one
(`mechanisms`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for users made with
`create_user(name, password, mechanism)`: SCRAM users through Kafka's Admin API
(AlterUserScramCredentials, stored in the cluster's metadata, so kept over a restart), PLAIN
users in the listener's JAAS configuration (a PLAIN user added while the broker runs restarts
it). `bootstrap` is then that listener; a PLAINTEXT listener (`admin_bootstrap`) stays for the
lab's own set-up, where the client is `User:ANONYMOUS`.

ACLs are on for a secured broker (KRaft's StandardAuthorizer, nothing allowed without an ACL):
the super users are `User:ANONYMOUS` (the PLAINTEXT and controller listeners) and the lab's
admin user (`client_options()` with no user). `allow(user, operation, resource_type, name)`
grants, `allow_everything(user)` grants a test user all it needs.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, NewTopic, ResourcePattern,
                         ResourceType, ScramMechanism, UserScramCredentialUpsertion)
from kafka.errors import TopicAlreadyExistsError

from dblog.sinks.kafka.security import SASL_MECHANISMS, KafkaSecurity, client_options
from lab.apache_kafka import ApacheKafka, KafkaUnavailable, free_port

BrokerUnavailable = KafkaUnavailable
ADMIN_USER = "dblog-lab-admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER = "kafka-cluster"  # the name of the one Cluster resource
JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _pkcs8(key_pem: str) -> str:
    """Kafka's PEM keystore reads PKCS#8 keys only; trustme writes the traditional OpenSSL form."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(key_pem).read_bytes(), password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class LocalBroker:
    def __init__(self, startup_timeout: float = 120.0, stop_timeout: float = 10.0, *, cert: str | None = None,
                 key: str | None = None, client_ca: str | None = None, ca: str | None = None,
                 client_cert: str | None = None, client_key: str | None = None,
                 authentication: bool = False, mechanisms: tuple[str, ...] = SASL_MECHANISMS) -> None:
        if bool(cert) != bool(key):
            raise ValueError("cert and key go together")
        if client_ca and not (cert and client_cert and client_key):
            raise ValueError("client_ca requires client certificates over TLS: give cert and key, and "
                             "client_cert and client_key (signed by client_ca) for the broker's own clients")
        for mechanism in mechanisms:
            if mechanism not in SASL_MECHANISMS:
                raise ValueError(f"mechanism {mechanism!r}: use one of {', '.join(SASL_MECHANISMS)}")
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self.ca = ca  # the CA of `cert`, which the broker's own clients trust
        self.client_cert, self.client_key = client_cert, client_key  # what they present (client_ca)
        self.authentication = authentication
        self.mechanisms = tuple(mechanisms)
        self._secured_port = 0  # the TLS/SASL listener's (kept over restarts)
        self.kafka = ApacheKafka(startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self._admin = (ADMIN_USER, uuid.uuid4().hex)
        self._plain_users: dict[str, str] = {}  # PLAIN users: in the listener's JAAS config
        self._scram_users: list[tuple[str, str, str]] = []  # made before start(): made at start
        self._dir: tempfile.TemporaryDirectory | None = None

    @property
    def secured(self) -> bool:
        return bool(self.cert) or self.authentication

    @property
    def protocol(self) -> str:
        return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                (True, True): "SASL_SSL"}[(bool(self.cert), self.authentication)]

    @property
    def cluster_id(self) -> str:
        return self.kafka.cluster_id

    @property
    def process(self):
        return self.kafka.process

    @property
    def port(self) -> int:
        """The port of `bootstrap`."""
        return self._secured_port if self.secured else self.kafka.port

    @property
    def admin_bootstrap(self) -> str:
        """The PLAINTEXT listener, where the lab's set-up is `User:ANONYMOUS`, a super user."""
        return self.kafka.bootstrap

    @property
    def bootstrap(self) -> str:
        if not self.secured:
            return self.kafka.bootstrap
        if not self.running:
            raise BrokerUnavailable("the broker is not started: call start() or use `with LocalBroker() as broker`")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.kafka.running

    # --- users and ACLs ---------------------------------------------------------------------

    def create_user(self, name: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
        """A user who may log in with `mechanism`, as `kafka-configs --alter --add-config
        'SCRAM-SHA-512=[password=…]' --entity-type users` makes one (SCRAM: effective at once, also
        while the broker runs; PLAIN: the listener's JAAS config, so a running broker restarts)."""
        if not self.authentication:
            raise BrokerUnavailable("create_user needs LocalBroker(authentication=True)")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: use one of {', '.join(SASL_MECHANISMS)}")
        if mechanism == "PLAIN":
            self._plain_users[name] = password
            if self.running:
                self.restart()
        elif self.running:
            self._upsert_scram([(name, password, mechanism)])
        else:
            self._scram_users.append((name, password, mechanism))

    def _upsert_scram(self, users: list[tuple[str, str, str]]) -> None:
        if not users:
            return
        errors = {}
        with self._admin_client() as admin:
            for name, password, mechanism in users:  # one per request: Kafka refuses a user twice in one
                upsert = UserScramCredentialUpsertion(name, getattr(ScramMechanism, mechanism.replace("-", "_")),
                                                      password, iterations=4096)
                errors.update({user: error for user, error in admin.alter_user_scram_credentials([upsert]).items()
                               if error})
        if errors:
            raise BrokerUnavailable(f"AlterUserScramCredentials failed: {errors}")

    def allow(self, user: str, operation: str, resource_type: str = "TOPIC", name: str = "*",
              pattern: str = "LITERAL") -> None:
        """ALLOW `User:user` `operation` (READ, WRITE, CREATE, DESCRIBE, ALL, …) on a resource
        (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID; name "*": all of them), as kafka-acls --add."""
        self._create_acls([(user, operation, resource_type, name, pattern)])

    def allow_everything(self, user: str) -> None:
        """All operations on every topic, group and transactional id, and on the cluster."""
        self._create_acls([(user, "ALL", kind, CLUSTER if kind == "CLUSTER" else "*", "LITERAL")
                           for kind in ("TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER")])

    def _create_acls(self, entries: list[tuple[str, str, str, str, str]]) -> None:
        acls = [ACL(f"User:{user}", "*", ACLOperation[operation], ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType[kind], name, ACLResourcePatternType[pattern]))
                for user, operation, kind, name, pattern in entries]
        with self._admin_client() as admin:
            failed = admin.create_acls(acls)["failed"]
        if failed:
            raise BrokerUnavailable(f"CreateAcls failed: {failed}")

    def _admin_client(self):
        from contextlib import closing

        return closing(KafkaAdminClient(bootstrap_servers=self.admin_bootstrap, request_timeout_ms=30000))

    def client_options(self, user: str | None = None, password: str | None = None,
                       mechanism: str | None = None) -> dict:
        """kafka-python options to connect to `bootstrap`: as `user` (default: the lab's admin
        user, a super user), with `mechanism` (default: the first of `mechanisms`)."""
        security = KafkaSecurity(
            protocol=self.protocol,
            sasl_mechanism=(mechanism or self.mechanisms[0]) if self.authentication else None,
            sasl_username=(user or self._admin[0]) if self.authentication else None,
            sasl_password=(password if user else self._admin[1]) if self.authentication else None,
            ssl_ca=self.ca if self.cert else None,
            ssl_cert=self.client_cert if self.client_ca else None,
            ssl_key=self.client_key if self.client_ca else None,
        )
        return client_options(security)

    # --- life cycle -------------------------------------------------------------------------

    def _properties(self) -> dict[str, str]:
        kafka = self.kafka
        if not self.secured:
            return {}
        name, listener = self.protocol, f"{self.protocol}://127.0.0.1:{self._secured_port}"
        prefix = f"listener.name.{name.lower()}."
        properties = {
            "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},CONTROLLER://127.0.0.1:{kafka.controller_port},{listener}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},{listener}",
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{name}:{name}",
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
            "allow.everyone.if.no.acl.found": "false",
        }
        if self.cert:
            keystore = Path(self._dir.name) / "keystore.pem"
            keystore.write_text(_pkcs8(self.key) + Path(self.cert).read_text())
            properties.update({f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(keystore)})
            if self.client_ca:
                properties.update({f"{prefix}ssl.truststore.type": "PEM",
                                   f"{prefix}ssl.truststore.location": self.client_ca,
                                   f"{prefix}ssl.client.auth": "required",
                                   # a certificate's CN is its user (for SSL without SASL)
                                   "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT"})
        if self.authentication:
            properties[f"{prefix}sasl.enabled.mechanisms"] = ",".join(self.mechanisms)
            for mechanism in self.mechanisms:
                options = "".join(f' user_{user}="{password}"' for user, password in
                                  {self._admin[0]: self._admin[1], **self._plain_users}.items()) \
                    if mechanism == "PLAIN" else ""
                properties[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = \
                    f"{JAAS_MODULES[mechanism]} required{options};"
        return properties

    def start(self) -> "LocalBroker":
        if self.running:
            return self
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="dblog-broker-")
        first = not self.kafka.port
        self.kafka.port = self.kafka.port or free_port()
        self.kafka.controller_port = self.kafka.controller_port or free_port()
        self._secured_port = (self._secured_port or free_port()) if self.secured else 0
        self.kafka.extra_properties = self._properties()
        self.kafka.start()
        if first and self.authentication:
            self._upsert_scram([(self._admin[0], self._admin[1], mechanism)
                                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        self._upsert_scram(self._scram_users)
        self._scram_users = []
        return self

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the broker (SIGTERM) and start it again on the same ports after `down_seconds`:
        its topics, users and ACLs are kept, as a real broker keeps them."""
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after `stop_timeout` seconds; the data stays. Idempotent."""
        self.kafka.stop()

    def kill(self) -> None:
        """SIGKILL, as a crash (the data stays for `start()`)."""
        self.kafka.kill()

    def close(self) -> None:
        self.kafka.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalBroker {self.protocol} 127.0.0.1:{self.port} {state}>"

    def log_tail(self, characters: int = 3000) -> str:
        """The end of the broker's output, for error messages."""
        return self.kafka.log_tail(characters)

    # --- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 30.0) -> None:
        """Create `name` (nothing happens if it exists) and wait until its metadata shows it."""
        with self._admin_client() as admin:
            try:
                admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
            except TopicAlreadyExistsError:
                pass
        consumer = KafkaConsumer(bootstrap_servers=self.admin_bootstrap, request_timeout_ms=int(timeout * 1000))
        try:
            deadline = time.monotonic() + timeout
            while not consumer.partitions_for_topic(name):
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"topic {name!r} was created but does not show in the metadata after {timeout}s")
                time.sleep(0.05)
                consumer.topics()  # a metadata refresh
        finally:
            consumer.close()
