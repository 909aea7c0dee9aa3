"""Table routing and event filters: where each captured table lands in the lake, and which of
its events are dropped on the way. TiDB DM's router rules and binlog event filters, in one rule.

A rule names source tables by regular expressions over "db.table" (full match, like
`source.include`) and says where they land (`target`, a "db.table" of the lake catalog), which
of their events to drop (`ignore`), or both:

    [[iceberg.routes]]                       # merge the shards of orders into one lake table
    tables = ['shop_\\d+\\.orders_\\d+']
    target = "shop.orders"
    ignore = ["truncate", "drop"]         # a shard's TRUNCATE/DROP must not empty the merged table

The FIRST rule with a matching pattern decides everything for a table (its target and its
filter); later rules are never consulted for it, so put narrow rules before broad ones. A table
no rule matches lands under its own name, with every event kept.

A rule with a target is a merge of shards. Each shard numbers its keys on its own (every
shard's auto-increment starts at 1), so the target's key is the source key plus two columns,
`_source_db` and `_source_table`, and rows of different shards never collide. The columns are
added whenever a rule has a target, even if it matches one table today: the target's key then
does not change when a second shard appears.

Filters act on the binlog only. Snapshot reads (op "r") are the table's current content and are
never dropped, as DM's full dump is not filtered by its binlog event filters.

This module is pure: no Spark, no I/O. `RouteRule` is the pydantic model of one
`[[iceberg.routes]]` entry; `Router` applies a list of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dblog.core.events import TableId, valid_table_patterns

SOURCE_DB_COLUMN = "_source_db"
SOURCE_TABLE_COLUMN = "_source_table"

# Events a rule can drop: the three row events, and the two statements that would empty or
# remove the target table.
IGNORABLE_EVENTS = frozenset({"insert", "update", "delete", "truncate", "drop"})
# Snapshot reads can be asked about (the answer is always no), so callers can map every op.
EVENT_KINDS = IGNORABLE_EVENTS | {"read"}
OP_EVENT_KINDS = {"c": "insert", "u": "update", "d": "delete", "r": "read"}

_LAKE_TABLE = re.compile(r"[^.\s`]+\.[^.\s`]+")  # exactly one dot: <db>.<table> under the catalog


class RoutingError(ValueError):
    pass


class RouteRule(BaseModel):
    """One `[[iceberg.routes]]` entry."""

    model_config = ConfigDict(extra="forbid")

    tables: list[str] = Field(min_length=1)  # regexes over "db.table", full match
    target: str | None = None  # "db.table" in the lake catalog; set = merge the matches as shards
    ignore: list[str] = Field(default_factory=list)  # events to drop, from IGNORABLE_EVENTS

    @field_validator("tables")
    @classmethod
    def _valid_patterns(cls, patterns: list[str]) -> list[str]:
        return valid_table_patterns(patterns)

    @field_validator("target")
    @classmethod
    def _lake_table_name(cls, target: str | None) -> str | None:
        if target is not None and not _LAKE_TABLE.fullmatch(target):
            raise ValueError(
                f"target {target!r} must be a plain 'database.table' (one dot, no spaces or backticks), "
                "e.g. 'shop.orders'"
            )
        return target

    @field_validator("ignore")
    @classmethod
    def _known_events(cls, events: list[str]) -> list[str]:
        for event in events:
            if event not in IGNORABLE_EVENTS:
                raise ValueError(
                    f"{event!r} is not an event that can be ignored; use some of: "
                    + ", ".join(sorted(IGNORABLE_EVENTS))
                )
        return events


@dataclass(frozen=True, slots=True)
class Route:
    """Where one source table's changes land, and which of its events are dropped."""

    source: TableId
    target: TableId
    sharded: bool = False  # target's key starts with SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN
    ignored: frozenset[str] = frozenset()
    rule: int | None = None  # index of the rule that matched, None when none did

    def ignores(self, event_kind: str) -> bool:
        """Whether events of this kind ("insert", "update", "delete", "truncate", "drop", or
        "read" for snapshot rows, never ignored) are dropped for this table."""
        if event_kind not in EVENT_KINDS:
            # A typo here would silently keep (or drop) events: refuse it.
            raise ValueError(
                f"unknown event kind {event_kind!r}; expected one of {', '.join(sorted(EVENT_KINDS))}"
            )
        return event_kind in self.ignored

    def ignores_op(self, op: str) -> bool:
        """`ignores` for a RowChange op (c, u, d, r)."""
        if op not in OP_EVENT_KINDS:
            raise ValueError(f"unknown row change op {op!r}; expected one of c, u, d, r")
        return self.ignores(OP_EVENT_KINDS[op])

    def key_columns(self, source_key: Sequence[str]) -> tuple[str, ...]:
        """The target's key columns for a source table keyed by `source_key`."""
        if self.sharded:
            return (SOURCE_DB_COLUMN, SOURCE_TABLE_COLUMN, *source_key)
        return tuple(source_key)


@dataclass(frozen=True, slots=True)
class _CompiledRule:
    patterns: tuple[re.Pattern[str], ...]
    target: TableId | None
    ignored: frozenset[str]

    def matches(self, name: str) -> bool:
        return any(pattern.fullmatch(name) for pattern in self.patterns)


class Router:
    """Applies routing rules in order: the first rule matching a table decides its route."""

    def __init__(self, rules: Iterable[RouteRule | Mapping]) -> None:
        self.rules: tuple[RouteRule, ...] = tuple(_validated(index, rule) for index, rule in enumerate(rules))
        self._compiled = tuple(
            _CompiledRule(
                patterns=tuple(re.compile(pattern) for pattern in rule.tables),
                target=TableId.parse(rule.target) if rule.target else None,
                ignored=frozenset(rule.ignore),
            )
            for rule in self.rules
        )
        self._routes: dict[TableId, Route] = {}  # route() runs per event; tables are few

    def route(self, table: TableId) -> Route:
        route = self._routes.get(table)
        if route is None:
            route = self._routes[table] = self._first_match(table)
        return route

    def _first_match(self, table: TableId) -> Route:
        name = str(table)
        for index, rule in enumerate(self._compiled):
            if rule.matches(name):
                if rule.target is None:
                    return Route(table, table, False, rule.ignored, index)
                return Route(table, rule.target, True, rule.ignored, index)
        return Route(table, table)

    def check_targets(self, tables: Iterable[TableId]) -> None:
        """Refuse a mapping where a lake table would receive two different source tables and at
        least one of them is not sharded: without the `_source_*` key columns their keys would
        overwrite each other. Shards routed to one target never collide.

        Names are compared case-insensitively: Spark resolves table names that way by default,
        so `Shop.orders` and `shop.orders` would be one lake table."""
        claimed: dict[str, Route] = {}
        for table in dict.fromkeys(tables):
            route = self.route(table)
            key = str(route.target).casefold()
            earlier = claimed.setdefault(key, route)
            if earlier is route or (earlier.sharded and route.sharded):
                continue
            raise RoutingError(
                f"{earlier.source} and {route.source} would both land in lake table {route.target}"
                f" ({_how(earlier)}; {_how(route)}), and their keys could collide: add a [[iceberg.routes]] rule"
                " giving one of them another target, or route both with one target to merge them as shards"
            )


def _how(route: Route) -> str:
    if route.rule is None:
        return f"{route.source} keeps its own name"
    if route.sharded:
        return f"{route.source} by routes[{route.rule}], as a shard"
    return f"{route.source} by routes[{route.rule}], which has no target"


def _validated(index: int, rule: RouteRule | Mapping) -> RouteRule:
    try:
        return rule if isinstance(rule, RouteRule) else RouteRule.model_validate(rule)
    except ValidationError as error:
        problems = "; ".join(
            f"routes[{index}]{_place(item['loc'])}: {item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        )
        raise RoutingError(problems) from None


def _place(loc: tuple) -> str:
    """pydantic's error location as written in TOML terms: `.ignore[2]`."""
    return "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in loc)
