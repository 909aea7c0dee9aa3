"""Every column type dblog knows has its entry in the normalizer table (pure: no server).

A type missing from `NORMALIZERS_BY_TYPE` would not fail loudly: its values would go through
`normalize_unknown` (SELECT) or pymysql (wire), a best-effort form that need not match the
binlog's. So a type added to one of the schema's type sets must be added to the table too.
"""

from __future__ import annotations

import pytest

from dblog.mysql import schema
from dblog.mysql.schema import Column
from dblog.mysql.values import NORMALIZERS_BY_TYPE, selected_normalizer, wire_normalizer

# Every `*_TYPES` set of dblog.mysql.schema (INTEGER_TYPES, TEXT_TYPES, BINARY_TYPES, DATETIME_TYPES, ...)
SCHEMA_TYPE_SETS = {
    name: types for name, types in vars(schema).items() if name.endswith("_TYPES") and isinstance(types, frozenset)
}
# The types of the normal-form table in dblog.mysql.values' docstring that no schema set holds
OTHER_TYPES = ("year", "bit", "decimal", "float", "double", "real", "date", "time",
               "uuid", "inet6", "inet4", "enum", "set")
KNOWN_TYPES = sorted(set().union(*SCHEMA_TYPE_SETS.values(), OTHER_TYPES))


def test_the_schema_type_sets_are_found():
    assert {"INTEGER_TYPES", "TEXT_TYPES", "BINARY_TYPES", "DATETIME_TYPES"} <= set(SCHEMA_TYPE_SETS)


@pytest.mark.parametrize("data_type", KNOWN_TYPES)
def test_every_known_type_has_an_entry(data_type):
    assert data_type in NORMALIZERS_BY_TYPE


@pytest.mark.parametrize("data_type", KNOWN_TYPES)
def test_every_entry_builds_its_normalizers(data_type):
    column = Column(name="c", data_type=data_type, column_type=data_type, charset="utf8mb4",
                    datetime_precision=3, numeric_scale=2, enum_values=("a", "b"))
    assert selected_normalizer(column)(None) is None
    assert callable(wire_normalizer(column, "utf8", None))
