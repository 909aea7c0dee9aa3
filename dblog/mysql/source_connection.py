"""One connection to the source seen three ways, as most callers need them together: the
server session (facts, watermarks, visibility), the schema catalog and the chunk reader."""

from __future__ import annotations

from typing import Callable

import pymysql

from dblog.core.events import TableId
from dblog.mysql.chunk_reader import ChunkReader
from dblog.mysql.schema_catalog import SchemaCatalog
from dblog.mysql.server_session import ServerSession


class SourceConnection:
    def __init__(self, connect: Callable[[], pymysql.Connection],
                 key_columns: dict[TableId, tuple[str, ...]] | None = None, collations: bool = True) -> None:
        self.server = ServerSession(connect)
        self.schemas = SchemaCatalog(self.server, key_columns, collations)
        self.chunks = ChunkReader(self.server)

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> SourceConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
