"""The resume verdict (dblog.core.resume_verdict) against a model of histories: a server can
continue dblog's stream exactly when it logged every transaction dblog delivered, whatever its
own sequence numbers (issue 40: a new primary numbered past dblog's is no longer taken for one
that holds them)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dblog.core.gtid import Gtid, GtidSet
from dblog.core.resume_verdict import ServerHistory, describe_refusal, judge_resume, refusal_text

DOMAINS = ("0", "1", "2")


def _position(last: dict[str, Gtid]) -> GtidSet:
    return GtidSet.parse(",".join(str(gtid) for gtid in last.values()), "mariadb")


@st.composite
def histories(draw):
    """Per domain: the old primary's transactions (server ids 1-3, numbered 1..n), the prefix the
    new server shares, then the new server's own ones (server ids 4-5: another server's writes),
    and how far dblog delivered along the old history."""
    model = {}
    for domain in draw(st.lists(st.sampled_from(DOMAINS), unique=True, max_size=3)):
        old = draw(st.lists(st.integers(1, 3), max_size=8))
        shared = draw(st.integers(0, len(old)))
        own = draw(st.lists(st.integers(4, 5), max_size=8))
        delivered = draw(st.integers(0, len(old)))
        model[domain] = (old, old[:shared] + own, shared, delivered)
    return model


def _server(model) -> ServerHistory:
    logged, per_server = {}, {}
    for domain, (_, new, _, _) in model.items():
        for seq, server_id in enumerate(new, 1):
            logged[domain] = per_server[(domain, server_id)] = Gtid.mariadb(int(domain), server_id, seq)
    return ServerHistory("mariadb", "server_id 4", _position(logged), GtidSet.empty("mariadb"),
                         tuple(per_server.values()))


def _delivered(model) -> GtidSet:
    return _position({domain: Gtid.mariadb(int(domain), old[count - 1], count)
                      for domain, (old, _, _, count) in model.items() if count})


@given(histories())
def test_mariadb_verdict_is_whether_the_server_logged_every_delivered_transaction(model):
    verdict = judge_resume(_delivered(model), _server(model))
    holds = all(count <= shared for _, _, shared, count in model.values())
    assert verdict.ok == holds
    if not holds:
        numbered_past = any(count > shared and len(new) >= count for _, new, shared, count in model.values())
        assert verdict.kind == ("diverged" if numbered_past else "behind")
        what, choices = describe_refusal(verdict, _delivered(model), _server(model), "offsets.json")
        assert "never had" in what and 'snapshot.startup = "initial"' in choices
        assert ("wait for it to catch up" in choices) == (verdict.kind == "behind")


UUIDS = ("3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22ab58-82db-22f2-8f44-d91bb5530673")


@st.composite
def mysql_sets(draw):
    pieces = []
    for uuid in draw(st.lists(st.sampled_from(UUIDS), unique=True, max_size=2)):
        numbers = sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=8)))
        pieces.append(uuid + "".join(f":{n}" for n in numbers))
    return GtidSet.parse(",".join(pieces), "mysql")


@given(mysql_sets(), mysql_sets(), mysql_sets())
def test_mysql_verdict_is_executed_covers_delivered_then_nothing_needed_purged(delivered, executed, purged):
    verdict = judge_resume(delivered, ServerHistory("mysql", "server_uuid x", executed, purged))
    if not delivered.issubset(executed):
        assert verdict.kind == "behind" and verdict.missing == delivered - executed
        assert str(delivered - executed) in refusal_text(verdict, delivered,
                                                         ServerHistory("mysql", "x", executed, purged), "o.json")
    elif not purged.issubset(delivered):
        assert verdict.kind == "purged" and verdict.lost == purged - delivered
    else:
        assert verdict.ok


def test_a_replica_without_log_slave_updates_applied_but_cannot_send():
    delivered = GtidSet.parse("0-1-10", "mariadb")
    server = ServerHistory("mariadb", "server_id 2", GtidSet.parse("1-2-3", "mariadb"), GtidSet.empty("mariadb"),
                           (Gtid.parse("1-2-3"),), applied=GtidSet.parse("0-1-10,1-2-3", "mariadb"))
    verdict = judge_resume(delivered, server)
    assert verdict.kind == "not_logged"
    assert "log_slave_updates" in refusal_text(verdict, delivered, server, "o.json")


def test_a_position_gtids_cannot_decide_is_a_clear_refusal():
    """A MariaDB position that is not a prefix per domain (no server id to look up): refused, no
    exception."""
    delivered = GtidSet.parse("0-1-10", "mariadb") - GtidSet.parse("0-1-3", "mariadb")
    server = ServerHistory("mariadb", "server_id 1", GtidSet.parse("0-1-10", "mariadb"), GtidSet.empty("mariadb"),
                           (Gtid.parse("0-1-10"),))
    verdict = judge_resume(delivered, server)
    assert verdict.kind == "undecidable"
    text = refusal_text(verdict, delivered, server, "o.json")
    assert "cannot tell" in text and "point source.host/source.port" in text


def test_purged_keeps_its_own_message_and_remedy():
    delivered = GtidSet.parse("0-1-5", "mariadb")
    server = ServerHistory("mariadb", "server_id 1", GtidSet.parse("0-1-9", "mariadb"),
                           GtidSet.parse("0-1-7", "mariadb"), (Gtid.parse("0-1-9"),))
    verdict = judge_resume(delivered, server)
    assert verdict.kind == "purged"
    text = refusal_text(verdict, delivered, server, "o.json")
    assert "purged" in text and "Remedy: move the offsets file away" in text and "never had" not in text
