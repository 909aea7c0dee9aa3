"""How to reach the source: one picklable value that every connection dblog opens is made from
(the engine's sessions and chunk reads, the binlog dump, also in the reader process, the signal
table, `dblog signal`, and the Spark tasks of a distributed backfill), so that none of them can
miss the TLS settings (`dblog.mysql.tls`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import pymysql

from dblog.mysql.tls import TlsConnection, TlsSettings

__all__ = ["ConnectionSettings"]


@dataclass(frozen=True)
class ConnectionSettings:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    tls: TlsSettings = field(default_factory=TlsSettings)

    @classmethod
    def of(cls, settings: ConnectionSettings | Mapping[str, Any]) -> ConnectionSettings:
        """`settings` itself, or the settings of a pymysql-style dict (host, port, user, password
        or passwd; `LocalMariaDB.connection_settings`, the benchmarks')."""
        if isinstance(settings, ConnectionSettings):
            return settings
        options = dict(settings)
        if "passwd" in options:  # pymysql's old name for it
            options["password"] = options.pop("passwd")
        unknown = sorted(set(options) - {"host", "port", "user", "password", "tls"})
        if unknown:
            raise TypeError(f"unknown connection settings: {', '.join(unknown)}")
        return cls(**options)

    def with_tls(self, tls: TlsSettings) -> ConnectionSettings:
        return replace(self, tls=tls)

    def connect(self, *, program_name: str | None = None, autocommit: bool = True,
                **options: Any) -> pymysql.Connection:
        """A new utf8mb4 connection (autocommit unless told otherwise); `options`: more of
        pymysql.connect's keyword arguments (read_timeout, connect_timeout, database, ...)."""
        if program_name:
            options["program_name"] = program_name
        options.setdefault("charset", "utf8mb4")
        return TlsConnection(tls=self.tls, host=self.host, port=self.port, user=self.user, password=self.password,
                             autocommit=autocommit, **options)
