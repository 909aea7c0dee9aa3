"""Kafka ACLs as dblog names them: the message of a denied operation, with the kafka-acls line
that grants it, and the check of a user's operations on topics that exist.

The check asks the broker itself (the Metadata request's authorized operations, KIP-430): what a
user may do there is the broker's answer, whatever its authorizer, super users or ACL patterns —
dblog never evaluates ACLs itself. A topic that does not exist yet has no answer to give; the
run names a missing WRITE on it at its first write.
"""

from __future__ import annotations

from typing import Any

from dblog.sinks.kafka.security import KafkaSecurity


def missing_acl(operation: str, resource_type: str, name: str, security: KafkaSecurity, bootstrap: str,
                reason: str) -> str:
    """The message of an authorization failure: the ACL missing (operation, resource, principal)
    and the kafka-acls command that grants it."""
    principal = _principal(security)
    option = {"topic": "--topic", "group": "--group", "cluster": "--cluster"}[resource_type]
    target = f"{option} {name}" if resource_type != "cluster" else option
    return (f"Kafka denied {operation} on {resource_type} {name!r} to {principal} ({reason}): no ACL allows it; "
            f"grant it with `kafka-acls --bootstrap-server {bootstrap} --add --allow-principal {principal} "
            f"--operation {operation.title()} {target}`, then run dblog again")


def grant_lines(operation: str, topics: list[str], security: KafkaSecurity, bootstrap: str) -> str:
    """The kafka-acls commands that grant `operation` on each of `topics`."""
    principal = _principal(security)
    return "; ".join(f"`kafka-acls --bootstrap-server {bootstrap} --add --allow-principal {principal} "
                     f"--operation {operation.title()} --topic {topic}`" for topic in topics)


def denied_topics(admin: Any, topics: list[str], operation: str) -> list[str]:
    """Those of the existing `topics` on which the broker says this client may not `operation`
    (READ, WRITE, …). Topics the broker gives no answer for (no authorized operations in its
    reply: a broker before Kafka 2.3) are not reported."""
    if not topics:
        return []
    denied = []
    for topic in admin.describe_topics(topics):
        allowed = topic.get("authorized_operations")
        if not allowed:  # not answered: nothing to claim
            continue
        if operation not in allowed and "ALL" not in allowed:
            denied.append(topic.get("topic") or topic.get("name"))
    return denied


def _principal(security: KafkaSecurity) -> str:
    return f"User:{security.sasl_username}" if security.sasl_username else "this client's principal"
