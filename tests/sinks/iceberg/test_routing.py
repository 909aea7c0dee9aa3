"""Routing rules and event filters: validation messages, first-match-wins, shard keys, and the
check that two source tables never silently share one lake table."""

from __future__ import annotations

import re
import tomllib

import hypothesis.strategies as st
import pytest
from hypothesis import given
from pydantic import ValidationError

from dblog.core.events import TableId
from dblog.sinks.iceberg.routing import (
    IGNORABLE_EVENTS,
    SOURCE_DB_COLUMN,
    SOURCE_TABLE_COLUMN,
    Route,
    Router,
    RouteRule,
    RoutingError,
)

ORDERS = TableId("shop", "orders")
SHARD_0 = TableId("shop_0", "orders_0")
SHARD_1 = TableId("shop_1", "orders_7")

SHARDS = {"tables": [r"shop_\d+\.orders_\d+"], "target": "shop.orders_all", "ignore": ["truncate", "drop"]}


def test_table_without_rule_keeps_its_name_and_every_event():
    route = Router([SHARDS]).route(TableId("crm", "users"))
    assert route == Route(TableId("crm", "users"), TableId("crm", "users"))
    assert not route.sharded and route.rule is None
    assert not any(route.ignores(kind) for kind in IGNORABLE_EVENTS)


def test_rule_with_target_merges_shards_with_source_key_columns():
    router = Router([SHARDS])
    for shard in (SHARD_0, SHARD_1):
        route = router.route(shard)
        assert route.target == TableId("shop", "orders_all")
        assert route.sharded and route.rule == 0 and route.source == shard
        assert route.key_columns(["id"]) == (SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN, "id")
    assert (SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN) == ("_source_db", "_source_table")


def test_rule_without_target_only_filters():
    route = Router([{"tables": [r"shop\.orders"], "ignore": ["delete"]}]).route(ORDERS)
    assert route.target == ORDERS and not route.sharded
    assert route.key_columns(["a", "b"]) == ("a", "b")
    assert route.ignores("delete") and route.ignores_op("d")
    assert not route.ignores("insert") and not route.ignores_op("c") and not route.ignores_op("u")


def test_patterns_match_the_whole_name():
    router = Router([{"tables": [r"shop\.order"], "ignore": ["insert"]}])
    assert not router.route(ORDERS).ignores("insert")  # "shop.order" is only a prefix of shop.orders
    assert not router.route(TableId("myshop", "order")).ignores("insert")
    assert router.route(TableId("shop", "order")).ignores("insert")


def test_any_pattern_of_a_rule_matches():
    router = Router([{"tables": [r"a\.x", r"b\.y"], "target": "lake.xy"}])
    assert router.route(TableId("a", "x")).target == router.route(TableId("b", "y")).target == TableId("lake", "xy")
    assert router.route(TableId("a", "y")).target == TableId("a", "y")


def test_first_matching_rule_decides_target_and_filter():
    router = Router([
        {"tables": [r"shop\.orders"], "ignore": ["truncate"]},  # narrow first
        {"tables": [r"shop\..*"], "target": "lake.everything", "ignore": ["delete"]},
    ])
    orders = router.route(ORDERS)
    assert orders.rule == 0 and orders.target == ORDERS and not orders.sharded
    assert orders.ignores("truncate") and not orders.ignores("delete")  # rule 1's filter does not add up
    other = router.route(TableId("shop", "items"))
    assert other.rule == 1 and other.sharded and other.ignores("delete") and not other.ignores("truncate")


def test_snapshot_reads_are_never_ignored():
    route = Router([{"tables": [".*"], "ignore": sorted(IGNORABLE_EVENTS)}]).route(ORDERS)
    assert all(route.ignores(kind) for kind in IGNORABLE_EVENTS)
    assert not route.ignores("read") and not route.ignores_op("r")


@pytest.mark.parametrize("kind", ["inserts", "DELETE", "", "truncate table"])
def test_asking_about_an_unknown_event_kind_is_an_error(kind):
    with pytest.raises(ValueError, match="unknown event kind"):
        Router([]).route(ORDERS).ignores(kind)


def test_asking_about_an_unknown_op_is_an_error():
    with pytest.raises(ValueError, match="unknown row change op"):
        Router([]).route(ORDERS).ignores_op("x")


@pytest.mark.parametrize(
    "rule, messages",
    [
        ({"tables": [r"shop\.(orders"]}, [r"routes[1].tables", "not a valid regular expression", "e.g."]),
        ({"tables": [r"shop\..*"], "target": "orders"}, ["routes[1].target", "'database.table'", "e.g. 'shop.orders'"]),
        ({"tables": [r"shop\..*"], "target": "a.b.c"}, ["routes[1].target", "one dot"]),
        ({"tables": [r"shop\..*"], "target": "lake. orders"}, ["routes[1].target"]),
        ({"tables": [r"shop\..*"], "target": ".orders"}, ["routes[1].target"]),
        ({"tables": [r"shop\..*"], "target": "`shop`.`orders`"}, ["routes[1].target", "backticks"]),
        ({"tables": [r"shop\..*"], "ignore": ["truncate", "deletes"]},
         ["routes[1].ignore", "'deletes'", "delete, drop, insert, truncate, update"]),
        ({"tables": []}, ["routes[1].tables"]),
        ({"target": "shop.orders"}, ["routes[1].tables", "Field required"]),
        ({"tables": [r"shop\..*"], "targets": "shop.orders"}, ["routes[1].targets", "Extra inputs are not permitted"]),
        ("shop.orders", ["routes[1]"]),
    ],
)
def test_bad_rules_name_their_index_field_and_fix(rule, messages):
    with pytest.raises(RoutingError) as raised:
        Router([{"tables": ["ok\\.ok"]}, rule])
    for message in messages:
        assert message in str(raised.value)
    assert "Value error," not in str(raised.value)


def test_route_rule_is_the_config_model_of_sink_routes():
    data = tomllib.loads(
        """
        [[routes]]
        tables = ['shop_\\d+\\.orders_\\d+']
        target = "shop.orders_all"
        ignore = ["truncate", "drop"]

        [[routes]]
        tables = ['shop\\.audit']
        ignore = ["delete"]
        """
    )
    rules = [RouteRule.model_validate(entry) for entry in data["routes"]]
    router = Router(rules)
    assert router.rules == tuple(rules)
    assert router.route(SHARD_1).target == TableId("shop", "orders_all")
    assert router.route(TableId("shop", "audit")).ignores("delete")
    with pytest.raises(ValidationError, match="ignore"):
        RouteRule.model_validate({"tables": ["x"], "ignore": ["insert", "upsert"]})


def test_shards_may_share_a_target():
    Router([SHARDS]).check_targets([SHARD_0, SHARD_1, ORDERS])


def test_two_sharded_rules_may_share_a_target():
    router = Router([{"tables": [r"a\..*"], "target": "lake.t"}, {"tables": [r"b\..*"], "target": "lake.t"}])
    router.check_targets([TableId("a", "x"), TableId("b", "y")])


def test_target_equal_to_an_unrouted_table_collides():
    router = Router([{"tables": [r"shop_\d+\.orders_\d+"], "target": "shop.orders"}])
    with pytest.raises(RoutingError) as raised:
        router.check_targets([SHARD_0, ORDERS])
    message = str(raised.value)
    assert "shop_0.orders_0 and shop.orders" in message
    assert "keeps its own name" in message and "as a shard" in message and "[[iceberg.routes]]" in message


def test_collision_is_reported_whichever_table_comes_first():
    router = Router([{"tables": [r"shop_\d+\.orders_\d+"], "target": "shop.orders"}])
    with pytest.raises(RoutingError, match=r"shop\.orders and shop_0\.orders_0"):
        router.check_targets([ORDERS, SHARD_0])


def test_names_differing_only_in_case_collide():
    with pytest.raises(RoutingError, match=r"Shop\.Orders and shop\.orders"):
        Router([]).check_targets([TableId("Shop", "Orders"), ORDERS])


def test_same_table_listed_twice_is_not_a_collision():
    Router([]).check_targets([ORDERS, ORDERS])


# --- properties --------------------------------------------------------------------------------

DBS = ("shop", "Shop", "shop_0", "crm")
NAMES = ("orders", "orders_1", "Orders", "users")
TABLES = st.builds(TableId, st.sampled_from(DBS), st.sampled_from(NAMES))
PATTERNS = st.one_of(
    TABLES.map(lambda table: re.escape(str(table))),
    st.sampled_from([r"shop\..*", r".*\.orders.*", r"[^.]+\.users", r"shop_\d+\..*", r"(?i)shop\.orders"]),
)
TARGETS = st.one_of(st.none(), st.sampled_from(["shop.orders", "lake.orders", "crm.users", "SHOP.orders"]))
RULES = st.lists(
    st.fixed_dictionaries({
        "tables": st.lists(PATTERNS, min_size=1, max_size=3),
        "target": TARGETS,
        "ignore": st.lists(st.sampled_from(sorted(IGNORABLE_EVENTS)), max_size=3),
    }),
    max_size=5,
)


def first_matching(rules: list[dict], table: TableId) -> int | None:
    """The reference: the index of the first rule with a pattern matching the whole name."""
    for index, rule in enumerate(rules):
        if any(re.fullmatch(pattern, str(table)) for pattern in rule["tables"]):
            return index
    return None


@given(RULES, st.lists(TABLES, max_size=8))
def test_every_table_gets_the_route_of_its_first_matching_rule(rules, tables):
    router = Router(rules)
    for table in tables:
        route = router.route(table)
        index = first_matching(rules, table)
        assert route.source == table and route.rule == index
        if index is None:  # no rule: own name, nothing ignored
            assert route == Route(table, table)
            continue
        rule = rules[index]
        assert route.sharded == (rule["target"] is not None)
        assert route.target == (TableId.parse(rule["target"]) if rule["target"] else table)
        assert route.ignored == frozenset(rule["ignore"])
        assert route == router.route(table) == Router(rules).route(table)  # deterministic, cache or not


@given(RULES, TABLES, st.sampled_from(["lake.first", "lake.other"]), st.lists(TABLES, max_size=6))
def test_a_rule_put_first_wins_for_its_tables_and_shifts_the_rest(rules, table, target, others):
    before = Router(rules)
    after = Router([{"tables": [re.escape(str(table))], "target": target}, *rules])
    assert after.route(table).target == TableId.parse(target) and after.route(table).rule == 0
    for other in others:
        if other != table:
            old, new = before.route(other), after.route(other)
            assert (new.target, new.sharded, new.ignored) == (old.target, old.sharded, old.ignored)
            assert new.rule == (None if old.rule is None else old.rule + 1)


@given(RULES, st.lists(TABLES, max_size=8))
def test_check_targets_refuses_exactly_the_unsafe_sharing(rules, tables):
    router = Router(rules)
    routes = [router.route(table) for table in dict.fromkeys(tables)]
    unsafe = any(
        a.source != b.source
        and str(a.target).casefold() == str(b.target).casefold()
        and not (a.sharded and b.sharded)
        for a in routes
        for b in routes
    )
    if unsafe:
        with pytest.raises(RoutingError, match="would both land in lake table"):
            router.check_targets(tables)
    else:
        router.check_targets(tables)


@given(st.lists(st.fixed_dictionaries({"tables": st.lists(PATTERNS, min_size=1, max_size=2)}), max_size=4),
       st.lists(TABLES, max_size=8, unique_by=lambda table: str(table).casefold()))
def test_rules_without_target_never_collide(rules, tables):
    Router(rules).check_targets(tables)


@given(st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=4))
def test_only_known_event_words_are_accepted(words):
    rule = {"tables": [".*"], "ignore": words}
    if set(words) <= IGNORABLE_EVENTS:
        assert Router([rule]).route(ORDERS).ignored == frozenset(words)
    else:
        with pytest.raises(RoutingError, match="delete, drop, insert, truncate, update"):
            Router([rule])
