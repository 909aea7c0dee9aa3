"""The table with a column of every MariaDB type and its rows (inserted, then updated), shared
by tests/mysql/test_values.py, test_wire_rows.py and test_binlog_differential.py, and (without
what Debezium cannot read: `debezium_columns`) by the Debezium differential tests."""

from __future__ import annotations

COLUMNS = """
    id INT PRIMARY KEY,
    ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
    mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
    dec_a DECIMAL(10,2), dec_b DECIMAL(65,30), dec_c DECIMAL(5,0),
    f FLOAT, d DOUBLE,
    dte DATE, dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
    ts0 TIMESTAMP NULL DEFAULT NULL, ts6 TIMESTAMP(6) NULL DEFAULT NULL,
    tm0 TIME, tm1 TIME(1), tm3 TIME(3), tm6 TIME(6), y YEAR,
    c CHAR(10), vc VARCHAR(100), tx TEXT, latin VARCHAR(20) CHARACTER SET latin1,
    bn BINARY(8), vb VARBINARY(20), bl BLOB,
    e ENUM('small','medium','large'), st SET('read','write','admin'),
    b1 BIT(1), b10 BIT(10), b64 BIT(64),
    j JSON, u UUID, ip6 INET6, ip4 INET4
"""

# SQL literals per row; missing columns are NULL.
ROWS: dict[int, dict[str, str]] = {
    1: dict(
        ti="-128", tiu="0", si="-32768", siu="0", mi="-8388608", miu="0", i="-2147483648", iu="0",
        bi="-9223372036854775808", biu="0",
        dec_a="-99999999.99",
        dec_b="-99999999999999999999999999999999999.999999999999999999999999999999",
        dec_c="-99999", f="-3.4028235e38", d="-1.7976931348623157e308",
        dte="'1000-01-01'", dt0="'1000-01-01 00:00:00'", dt3="'1000-01-01 00:00:00.001'",
        dt6="'9999-12-31 23:59:59.999999'", ts0="'1970-01-01 00:00:01'", ts6="'2038-01-19 03:14:07.999999'",
        tm0="'-838:59:59'", tm1="'-00:00:00.1'", tm3="'-12:34:56.789'", tm6="'-838:59:59.999999'", y="1901",
        c="'😀'", vc="'héllo 😀 wörld'", tx="'𝄞 music 🎵'", latin="'café'",
        bn="x'0102'", vb="x'00ff00'", bl="x'00'",
        e="'small'", st="''", b1="b'0'", b10="b'1000000001'", b64="b'0'",
        j="""'{"a": [1, 2.50, "😀"]}'""", u="'123e4567-e89b-12d3-a456-426614174000'",
        ip6="'::ffff:1.2.3.4'", ip4="'10.0.0.0'",
    ),
    2: dict(
        ti="127", tiu="255", si="32767", siu="65535", mi="8388607", miu="16777215", i="2147483647",
        iu="4294967295", bi="9223372036854775807", biu="18446744073709551615",
        dec_a="12.3", dec_b="0.000000000000000000000000000001", dec_c="99999", f="16777217", d="5e-324",
        dte="'9999-12-31'", dt0="'2024-02-29 12:00:00'", dt3="'2024-01-02 03:04:05.123'",
        dt6="'2024-01-02 03:04:05.000001'", ts0="'2038-01-19 03:14:07'", ts6="'1970-01-01 00:00:01.000001'",
        tm0="'838:59:59'", tm1="'00:00:00.9'", tm3="'-00:00:00.001'", tm6="'-00:00:00.000001'", y="2155",
        c="'abc  '", vc="''", tx="''", latin="''",
        bn="x'0000000000000000'", vb="x''", bl="x''",
        e="'bogus'", st="'admin,read'", b1="b'1'", b10="b'0'", b64="0xFFFFFFFFFFFFFFFF",
        j="'[]'", u="'00000000-0000-0000-0000-000000000000'", ip6="'::'", ip4="'0.0.0.0'",
    ),
    3: dict(
        dte="'0000-00-00'", dt0="'0000-00-00 00:00:00'", dt3="'0000-00-00 00:00:00'",
        dt6="'0000-00-00 00:00:00'", ts0="'0000-00-00 00:00:00'", ts6="'0000-00-00 00:00:00'",
        y="'0000'", f="0.1", d="0.1", dec_a="0", dec_b="-0.5", tm0="'00:00:00'", tm6="'00:00:00'",
        u="'ffffffff-ffff-ffff-ffff-ffffffffffff'", ip6="'2001:db8::'", ip4="'255.255.255.255'",
        e="'large'", st="'read,write,admin'", c="''", bn="x'ff00ff00ff00ff00'",
    ),
    4: {},  # every column NULL
    5: dict(
        f="3.14", d="0.30000000000000004", dec_a="-0.5", tm6="'-01:02:03.000001'", tm3="'12:00:00.5'",
        ts6="'2024-03-10 10:30:00.5'", dt0="'2024-03-10 02:30:00'",
        u="'6ccd780c-baba-1026-9564-5b8c656024db'", ip6="'fe80::1:0:0'", b10="b'1111111111'",
        j="""'{"nested": {"x": null}}'""", vc="'plain'",
    ),
}

UPDATES: dict[int, dict[str, str]] = {
    4: ROWS[1],  # NULL -> values
    2: {column: "NULL" for column in ROWS[2]},  # values -> NULL
    5: dict(f="123456.789", tm6="'-00:00:01.5'", u="'01234567-89ab-6def-8123-456789abcdef'", st="'write'",
            ip6="'2001:db8:0:0:1:0:0:1'", bn="x'01'", dec_b="1.5", y="'0000'", ts0="'0000-00-00 00:00:00'"),
}


def insert_sql(table: str, row_id: int, literals: dict[str, str]) -> str:
    names = ["id", *literals]
    values = [str(row_id), *literals.values()]
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(values)})"


# The same table as Debezium's MySQL connector reads it (the Debezium differential tests): without
# the columns it cannot read, with a few more kinds and rows.
# Debezium's MySQL connector cannot read MariaDB's UUID, INET4, INET6 columns.
UNREADABLE_BY_DEBEZIUM = ("u", "ip6", "ip4")
EXTRA_COLUMNS = """, t1 TINYINT(1), g GEOMETRY, pt POINT, r REAL, dt1 DATETIME(1), dt4 DATETIME(4), tm4 TIME(4),
    ts3 TIMESTAMP(3) NULL DEFAULT NULL, bt8 BIT(8), bt16 BIT(16)"""
EXTRA_ROWS = {
    6: dict(t1="1", g="ST_GeomFromText('LINESTRING(0 0,1 1)', 4326)", pt="POINT(1.5, -2)", r="1.5",
            dt1="'2024-01-01 00:00:00.1'", dt4="'1969-12-31 23:59:59.9999'", tm4="'-01:00:00.0001'",
            ts3="'2024-01-01 00:00:00.120'", bt8="b'10000001'", bt16="b'1000000000000001'"),
    7: dict(t1="-5", g="ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')", pt="ST_GeomFromText('POINT(0 0)', 3857)",
            r="-0.0", dt1="'1970-01-01 00:00:00.0'", dt4="'2024-06-01 12:00:00.5'", tm4="'23:59:59.9999'",
            ts3="'1970-01-01 00:00:01.001'", bt8="b'0'", bt16="b'1'"),
}


def debezium_columns() -> str:
    kept = [part for part in COLUMNS.split(",") if part.split()[0] not in UNREADABLE_BY_DEBEZIUM]
    return ",".join(kept) + EXTRA_COLUMNS


def debezium_rows() -> dict[int, dict[str, str]]:
    rows = {key: {c: v for c, v in row.items() if c not in UNREADABLE_BY_DEBEZIUM} for key, row in ROWS.items()}
    return {**rows, **EXTRA_ROWS}


def debezium_updates() -> dict[int, dict[str, str]]:
    return {key: {c: v for c, v in row.items() if c not in UNREADABLE_BY_DEBEZIUM} for key, row in UPDATES.items()}


# Debezium's value switches the differential tests run the every-type table under, as a user's
# connector JSON sets them (dblog gets them through `convert`): the defaults and two sets
# that change every encoding they can.
DEBEZIUM_SETTINGS: dict[str, dict[str, str]] = {
    "defaults": {},  # skipped.operations=t: the TRUNCATE writes nothing in either
    "string-connect-none-skipped": {"decimal.handling.mode": "string", "time.precision.mode": "connect",
                                    "skipped.operations": "none"},
    "isostring-double-precise-urlsafe-skip-updates": {
        "time.precision.mode": "isostring", "decimal.handling.mode": "double",
        "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "base64-url-safe",
        "skipped.operations": "u,t"},
}
