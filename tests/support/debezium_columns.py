"""Tables, rows and changes under Debezium's column options (`options`), with the columns'
defaults and zero dates: the case of tests/sinks/kafka/test_connect_differential.py (every
change streamed by Debezium in Kafka Connect and by dblog) and
test_connect_snapshot_differential.py (dblog's snapshot rows against the connector's streamed
creates). What the options cover:

* column.exclude.list: a column of a table (its name written in another case), a primary key
  column (it stays in the key), the unique column of a table without a primary key;
* column.mask.with.N.chars on a VARCHAR (NULL too), an ENUM, a DATE (its schema only);
* column.mask.hash.ALGO.with.salt.SALT (SHA-256, a salt with a dot) on a VARCHAR and a CHAR(10)
  (the digest cut to 10), and .v2. (MD5) on a SET (cut to its length, 3);
* column.truncate.to.4.chars on TEXT (UTF-16 units: an emoji counts two), VARBINARY (bytes), a
  DECIMAL and a TIMESTAMP (Debezium cuts the ZonedTimestamp text), and on a column also masked
  (the truncation wins);
* column.propagate.source.type and datatype.propagate.source.type (the source type's schema
  parameters) on plain, masked, hashed, truncated and message-key columns;
* the columns' defaults in the Connect schemas, a column of each type that has one; zero dates
  in NOT NULL and nullable columns with and without a default;
* message.key.columns on a table with a primary key (two nullable columns, listed in another
  order than the table's, one with a default and a row where it is null: the key converter
  writes the default) and on one without; a change of the message key is a key change (delete,
  tombstone, create and their headers), a change of the primary key alone an update.

Not covered (documented in docs/configuration.md, "Columns"): a truncation that would split a
surrogate pair (Java writes a lone surrogate)."""

from __future__ import annotations

TABLES = {
    "p": """id INT PRIMARY KEY, email VARCHAR(100) DEFAULT 'x@y', code CHAR(10), bio TEXT, secret VARCHAR(50), photo VARBINARY(20),
            size ENUM('s','m','l'), tags SET('a','b'), amount DECIMAL(10,2), born DATE,
            ts TIMESTAMP NULL DEFAULT NULL, note VARCHAR(30) DEFAULT 'a note', nick VARCHAR(20) DEFAULT 'zz'""",
    "log": "seq INT NOT NULL, who VARCHAR(20), msg VARCHAR(50), UNIQUE KEY (seq)",
    "k": "id INT PRIMARY KEY, v VARCHAR(10)",
    # Debezium writes each column's default into its field's schema, encoded as its values are
    "dflt": """id INT PRIMARY KEY, i INT NOT NULL DEFAULT 5, n INT NULL, s VARCHAR(10) DEFAULT 'it''s',
               s2 VARCHAR(10) NOT NULL, dec1 DECIMAL(10,2) DEFAULT 1.50, dt DATETIME DEFAULT '2020-01-02 03:04:05',
               dt3 DATETIME(3) DEFAULT '2020-01-02 03:04:05.250', d DATE NOT NULL DEFAULT '2020-01-02',
               ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, b TINYINT(1) DEFAULT 1, e ENUM('a','b') NOT NULL DEFAULT 'b',
               bi BIGINT UNSIGNED DEFAULT 7, f DOUBLE DEFAULT 2.5, fl FLOAT DEFAULT 0.1, bits BIT(3) DEFAULT b'101',
               y YEAR DEFAULT 2020, tm TIME DEFAULT '01:02:03', tm2 TIME(2) DEFAULT '-01:02:03.5', vb VARBINARY(4) DEFAULT 'ab',
               bn BINARY(3) DEFAULT 'a', st SET('x','y') DEFAULT 'x,y', tx TEXT, neg INT DEFAULT -3""",
    # a zero date: Debezium writes the column's default, else the epoch in a NOT NULL column, else null
    "zero": """id INT PRIMARY KEY, a DATE NOT NULL DEFAULT '2020-01-02', b DATE NOT NULL,
               c DATETIME NOT NULL DEFAULT '2020-01-02 03:04:05', e DATETIME(6) NOT NULL,
               f TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, g DATE NULL DEFAULT '2020-01-02', z DATE NULL,
               h TIMESTAMP NOT NULL DEFAULT '2020-01-01 00:00:00', h3 TIMESTAMP(3) NULL DEFAULT '2020-01-01 00:00:00.500',
               zn DATE NULL DEFAULT '0000-00-00'""",
}
INSERTS = [
    """INSERT INTO {db}.p VALUES (1, 'ann@example.com', 'AB12', 'héllo 😀 wörld', 'x', x'0102030405', 'm', 'a,b',
       12345.67, '2000-01-01', '2024-01-01 00:00:00', 'a long note', NULL)""",
    "INSERT INTO {db}.p (id, code) VALUES (2, 'CD')",
    "INSERT INTO {db}.p (id, email, code, bio, nick) VALUES (3, 'c@x', 'EF', 'a😀bc', 'n')",
    "INSERT INTO {db}.p (id, email, code) VALUES (4, NULL, 'GH')",  # a null message key field with a default
    "INSERT INTO {db}.log VALUES (1, 'ann', 'hi'), (2, 'bob', 'yo')",
    "INSERT INTO {db}.k VALUES (1, 'v1')",
    "INSERT INTO {db}.dflt (id, s2) VALUES (1, 'q')",
    "SET STATEMENT sql_mode = '' FOR INSERT INTO {db}.zero VALUES (1, '0000-00-00', '0000-00-00', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00', '0000-00-00', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00')",
]
CHANGES = [
    "UPDATE {db}.p SET email = 'ann@new.example' WHERE id = 1",  # the message key changes
    "UPDATE {db}.p SET id = 20 WHERE id = 2",  # the primary key alone: an update
    "UPDATE {db}.p SET nick = 'nicky', bio = 'zzzzzzz', note = NULL WHERE id = 3",
    "DELETE FROM {db}.p WHERE id = 3",
    "UPDATE {db}.log SET msg = 'changed' WHERE seq = 1",
    "UPDATE {db}.log SET who = 'carl' WHERE seq = 2",
    "DELETE FROM {db}.log WHERE seq = 1",
    "UPDATE {db}.k SET id = 5 WHERE id = 1",  # an excluded primary key column changes
]
# records per table: the inserts, then the changes (a key change: 3, a delete: 2 with its tombstone)
EXPECTED = {"p": (4, 3 + 1 + 1 + 2), "log": (2, 1 + 3 + 2), "k": (1, 3), "dflt": (1, 0), "zero": (1, 0)}


def options(db: str) -> dict[str, str]:
    return {
        "column.exclude.list": rf"{db}\.P\.secret,{db}\.log\.seq,{db}\.k\.id",
        "column.mask.with.5.chars": rf"{db}\.p\.(nick|size|born|note)",
        "column.mask.hash.SHA-256.with.salt.s4lt.x": rf"{db}\.p\.email,{db}\.p\.code",
        "column.mask.hash.v2.MD5.with.salt.pepper": rf"{db}\.p\.tags",
        "column.truncate.to.4.chars": rf"{db}\.p\.(bio|photo|amount|ts|note)",
        "message.key.columns": f"{db}.p:code,email;{db}.log:who",
        # the source type's schema parameters: on masked, truncated and plain columns, by column
        # and by data type (a VARCHAR column of each table, the hashed and key columns among them)
        "column.propagate.source.type": rf"{db}\.p\.(id|amount|nick|size|tags|ts|born)",
        "datatype.propagate.source.type": r".+\.VARCHAR",
    }
