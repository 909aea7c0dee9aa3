"""The binlog source: read as a replica, decoded by dblog, in commit order.

    stream.py    the dump session (I/O): a connection registered as a replica, event bytes
    decoder.py   events from bytes (pure): checksums, rotations, compressed events, table maps
    rows.py      row readers compiled per table map (pure)
    values.py    column values straight into dblog's normal form (pure)
    source.py    BinlogSource: transactions, row changes, DDL and heartbeats, exactly once
    process.py   the source in a child process (`source.reader_process`)
"""

from dblog.mysql.binlog.source import BinlogError, BinlogPurged, BinlogSource, BinlogUndecodable, SourceDiverged

__all__ = ["BinlogSource", "BinlogError", "BinlogPurged", "BinlogUndecodable", "SourceDiverged"]
