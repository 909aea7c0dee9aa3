"""SQL text that every layer writes the same way (MySQL/MariaDB and Spark SQL both quote
identifiers with backticks)."""

from __future__ import annotations


def quote_identifier(name: str) -> str:
    """`name` in backticks, embedded backticks doubled."""
    return "`" + name.replace("`", "``") + "`"
