"""One rows event's transaction encoded as a dump thread sends it (`transaction`, in a
`Packaging`: flavour, checksums, rows-event version, compression), and decoded back by dblog's
decoder (`decode`, `decoded_rows`). Shared by tests/mysql/test_binlog_decoder.py and
test_mysql_json_opaque.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from support import binlog_encoder as be

from dblog.mysql.binlog.decoder import BinlogDecoder, GtidRecord, PayloadRecord, QueryRecord, RotateRecord, RowsRecord, XidRecord

MYSQL_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@dataclass(frozen=True)
class Packaging:
    flavor: str = "mariadb"
    checksum: bool = True
    version: int = 1  # rows events v1 or v2 (v2 with extra data)
    compressed: bool = False  # MariaDB log_bin_compress
    payload: str | None = None  # MySQL binlog_transaction_compression: 'zstd' or 'none'
    pad_bitmaps: bool = False  # MySQL leaves the present-columns bitmaps' unused bits set
    null_padding: int = 0  # MariaDB sets the NULL bitmaps' unused bits


@st.composite
def packagings(draw, flavor: str | None = None) -> Packaging:
    flavor = flavor or draw(st.sampled_from(["mariadb", "mysql"]))
    mariadb = flavor == "mariadb"
    return Packaging(
        flavor, draw(st.booleans()), draw(st.sampled_from([1, 2])),
        compressed=mariadb and draw(st.booleans()),
        payload=None if mariadb else draw(st.sampled_from([None, "zstd", "none"])),
        pad_bitmaps=not mariadb and draw(st.booleans()),
        null_padding=draw(st.sampled_from([0, 0xFF, 0x55])),
    )


def transaction(table: be.Table, op: str, rows: list, packaging: Packaging, **rows_kw: Any) -> list[bytes]:
    """The packets of one transaction holding one rows event, as a dump thread sends them."""
    p = packaging
    writer = be.BinlogWriter(p.flavor, p.checksum)
    writer.rotate("binlog.000007")
    writer.format_description()
    rows_kw = dict(version=p.version, compressed=p.compressed, pad_bitmaps=p.pad_bitmaps,
                   null_padding=p.null_padding, extra=b"\x00\x01\x02" if p.version == 2 else b"", **rows_kw)
    if p.flavor == "mariadb":
        writer.mariadb_gtid(42, domain=3)
        writer.table_map(table)
        writer.rows(table, op, rows, **rows_kw)
        writer.xid(9)
        return writer.packets
    writer.mysql_gtid(MYSQL_UUID, 42)
    if p.payload is None:
        writer.query("BEGIN")
        writer.table_map(table)
        writer.rows(table, op, rows, **rows_kw)
        writer.xid(9)
        return writer.packets
    rows_type, rows_body = be.rows_event_body(table, op, rows, **rows_kw)
    inner = [be.inner_event(be.QUERY, be.query_body("BEGIN")),
             be.inner_event(be.TABLE_MAP, be.table_map_body(table, flavor="mysql")),
             be.inner_event(rows_type, rows_body), be.inner_event(be.XID, be.xid_body(9))]
    writer.add(be.TRANSACTION_PAYLOAD, be.transaction_payload_body(inner, p.payload))
    return writer.packets


def decode(packets: list[bytes], flavor: str = "mariadb", checksum: bool = True) -> tuple[BinlogDecoder, list]:
    """Decode `packets` in order; `checksum`: what the dump session announced (BinlogSource sets
    it before the first event, the artificial rotate that precedes the format description)."""
    decoder = BinlogDecoder(flavor)
    decoder.checksum = checksum
    records = []
    for packet in packets:
        record = decoder.decode(packet)
        if isinstance(record, PayloadRecord):
            records.extend(record.records)
        elif record is not None:
            records.append(record)
    return decoder, records


def decoded_rows(packets: list[bytes], packaging: Packaging, semantics: dict | None = None):
    """(RowsRecord, DecodedRows) of the one rows event in `packets`; checks the framing around it."""
    flavor = packaging.flavor
    _, records = decode(packets, flavor, packaging.checksum)
    kinds = [type(record) for record in records]
    expected_kinds = [RotateRecord, GtidRecord] + ([QueryRecord] if flavor == "mysql" else []) + [RowsRecord, XidRecord]
    assert kinds == expected_kinds, f"records around the rows event: {kinds}"
    (rows_record,) = [record for record in records if isinstance(record, RowsRecord)]
    return rows_record, rows_record.rows(semantics or {})
