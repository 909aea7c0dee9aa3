"""Credentials in statement text (`dblog.core.redaction`, issue 36 item 7): the forms MySQL and
MariaDB write to their binlogs, replaced exactly; statements without one left as they are; and,
over generated account, server, replication and table statements with arbitrary passwords in
every quoting MySQL and MariaDB accept, no byte of the password left, whatever surrounds it.

Where the forms come from:
- MySQL 8.0+: sql/sql_rewrite.cc (mysql/mysql-server), Consumer_type::BINLOG: CREATE USER and
  ALTER USER always `IDENTIFIED WITH '<plugin>' AS '<hash>'` (Rewriter_create_user /
  Rewriter_alter_user::append_user_auth_info, the plugin quoted by append_query_string); SET
  PASSWORD as `ALTER USER '<user>'@'<host>' IDENTIFIED WITH '<plugin>' AS '<hash>' [RETAIN CURRENT
  PASSWORD]` (Rewriter_set_password::rewrite); the hash's bytes escaped by append_query_string
  (backslash escapes). The manual's "Passwords and Logging" lists the statements so rewritten.
  MySQL's text logs write `<secret>` bare (`PASSWORD <secret>`, `MASTER_PASSWORD = <secret>`):
  the form redact_credentials writes too.
- MariaDB 10.11: read back from its binlog (mariadb-binlog) after running each statement:
  CREATE/ALTER USER, GRANT … IDENTIFIED BY and SET STATEMENT … FOR … as sent, SET PASSWORD as
  `SET PASSWORD FOR 'u'@'%'='*<hash>'`; CREATE/ALTER SERVER and CHANGE MASTER not at all. The
  engine test tests/engine/test_credentials_in_the_binlog.py reads them from the server itself.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from dblog.core.ddl import classify_ddl
from dblog.core.redaction import SECRET, redact_credentials

HASH = "$A$005$\x01k'9\\Zq\x7fA;b=Rx~bbJ2wL5I.WwD3ntGgHr0rrXgMtXEbWyGu1YN8Ab/8DrQ0Cm/Rmh2"  # salt bytes 1..127


def mysql_quoted(text: str) -> str:
    """A string literal as MySQL's append_query_string writes it (escape_string_for_mysql)."""
    escapes = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}
    return "'" + "".join(escapes.get(char, char) for char in text) + "'"


# (statement as the server logs it, as dblog passes it on)
LOGGED = [
    # MySQL 8.0 / 8.4 / 9.x binlog forms (sql_rewrite.cc, Consumer_type::BINLOG)
    (f"CREATE USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {mysql_quoted(HASH)}",
     f"CREATE USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET}"),
    (f"CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {mysql_quoted(HASH)} "
     "REQUIRE SSL WITH MAX_USER_CONNECTIONS 5 PASSWORD EXPIRE INTERVAL 90 DAY ACCOUNT UNLOCK PASSWORD HISTORY 3 "
     "PASSWORD REUSE INTERVAL 30 DAY PASSWORD REQUIRE CURRENT FAILED_LOGIN_ATTEMPTS 3 PASSWORD_LOCK_TIME 2",
     f"CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET} "
     "REQUIRE SSL WITH MAX_USER_CONNECTIONS 5 PASSWORD EXPIRE INTERVAL 90 DAY ACCOUNT UNLOCK PASSWORD HISTORY 3 "
     "PASSWORD REUSE INTERVAL 30 DAY PASSWORD REQUIRE CURRENT FAILED_LOGIN_ATTEMPTS 3 PASSWORD_LOCK_TIME 2"),
    ("CREATE USER 'nopw'@'%' IDENTIFIED WITH 'caching_sha2_password'",  # no password: nothing to hide
     "CREATE USER 'nopw'@'%' IDENTIFIED WITH 'caching_sha2_password'"),
    (f"ALTER USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {mysql_quoted(HASH)} RETAIN CURRENT PASSWORD",
     f"ALTER USER 'app'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET} RETAIN CURRENT PASSWORD"),
    ("ALTER USER 'old'@'localhost' IDENTIFIED WITH 'mysql_native_password' AS "
     "'*6C8989366EAF75BB670AD8EA7A7FC1176A95CEF4'",
     f"ALTER USER 'old'@'localhost' IDENTIFIED WITH 'mysql_native_password' AS {SECRET}"),
    (f"CREATE USER 'mfa'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {mysql_quoted(HASH)} AND IDENTIFIED WITH "
     "'authentication_ldap_sasl' AS 'uid=u1_ldap,ou=People,dc=example,dc=com' "
     "AND IDENTIFIED WITH 'authentication_fido'",
     f"CREATE USER 'mfa'@'%' IDENTIFIED WITH 'caching_sha2_password' AS {SECRET} AND IDENTIFIED WITH "
     f"'authentication_ldap_sasl' AS {SECRET} AND IDENTIFIED WITH 'authentication_fido'"),
    ("ALTER USER 'mfa'@'%' MODIFY 2 FACTOR IDENTIFIED WITH 'authentication_webauthn' AS 0x0a1b2c3d",
     f"ALTER USER 'mfa'@'%' MODIFY 2 FACTOR IDENTIFIED WITH 'authentication_webauthn' AS {SECRET}"),
    ("ALTER USER 'u'@'%' COMMENT 'rotated by ops' ATTRIBUTE '{\"team\": \"db\"}'",  # no credential
     "ALTER USER 'u'@'%' COMMENT 'rotated by ops' ATTRIBUTE '{\"team\": \"db\"}'"),
    ("GRANT SELECT ON `shop`.* TO 'app'@'%' AS 'admin'@'%' WITH ROLE DEFAULT",  # AS names an account here
     "GRANT SELECT ON `shop`.* TO 'app'@'%' AS 'admin'@'%' WITH ROLE DEFAULT"),
    # MariaDB 10.11 binlog forms (as sent)
    ("CREATE USER 'u1'@'%' IDENTIFIED BY 'plainpw1'", f"CREATE USER 'u1'@'%' IDENTIFIED BY {SECRET}"),
    ("CREATE OR REPLACE USER 'u4'@'%' IDENTIFIED BY 'plainpw7'",
     f"CREATE OR REPLACE USER 'u4'@'%' IDENTIFIED BY {SECRET}"),
    ("ALTER USER 'u1'@'%' IDENTIFIED BY 'plainpw2'", f"ALTER USER 'u1'@'%' IDENTIFIED BY {SECRET}"),
    ("SET PASSWORD FOR 'u1'@'%'='*D1CE18AFDC8104A3853E0176BEC20E21B62976F7'", f"SET PASSWORD FOR 'u1'@'%'={SECRET}"),
    ("GRANT SELECT ON *.* TO 'u1'@'%' IDENTIFIED BY 'plainpw4'",
     f"GRANT SELECT ON *.* TO 'u1'@'%' IDENTIFIED BY {SECRET}"),
    ("GRANT ALL ON shop.* TO 'a'@'h' IDENTIFIED BY PASSWORD '*AB12', 'b'@'h' IDENTIFIED BY 'pw' WITH GRANT OPTION",
     f"GRANT ALL ON shop.* TO 'a'@'h' IDENTIFIED BY PASSWORD {SECRET}, 'b'@'h' IDENTIFIED BY {SECRET} "
     "WITH GRANT OPTION"),
    ("CREATE USER 'u3'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('plainpw6')",
     f"CREATE USER 'u3'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD({SECRET})"),
    ("CREATE USER 'e'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('pw') OR unix_socket",
     f"CREATE USER 'e'@'%' IDENTIFIED VIA ed25519 USING PASSWORD({SECRET}) OR unix_socket"),
    ("ALTER USER 'u3'@'%' IDENTIFIED WITH mysql_native_password AS '*0123456789ABCDEF0123456789ABCDEF01234567'",
     f"ALTER USER 'u3'@'%' IDENTIFIED WITH mysql_native_password AS {SECRET}"),
    ("SET STATEMENT max_statement_time=100 FOR CREATE USER 'u6'@'%' IDENTIFIED BY 'plainpw11'",
     f"SET STATEMENT max_statement_time=100 FOR CREATE USER 'u6'@'%' IDENTIFIED BY {SECRET}"),
    ("CREATE TABLE shop.t (id INT PRIMARY KEY) COMMENT='x' CONNECTION='mysql://r:plainpw12@127.0.0.1:3306/d/t'",
     f"CREATE TABLE shop.t (id INT PRIMARY KEY) COMMENT='x' CONNECTION='{SECRET}'"),
    ("ALTER TABLE shop.t CONNECTION='mysql://r:plainpw13@127.0.0.1/d/t'", f"ALTER TABLE shop.t CONNECTION='{SECRET}'"),
    ("CREATE TABLE shop.t2 (id INT PRIMARY KEY) PASSWORD='plainpw14'",
     f"CREATE TABLE shop.t2 (id INT PRIMARY KEY) PASSWORD='{SECRET}'"),
    # the servers do not log these (see the module's docstring); redacted all the same
    ("CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'r', PASSWORD 'pw', HOST '127.0.0.1')",
     f"CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'r', PASSWORD {SECRET}, HOST '127.0.0.1')"),
    ("ALTER SERVER s OPTIONS (PASSWORD 'pw2')", f"ALTER SERVER s OPTIONS (PASSWORD {SECRET})"),
    ("CHANGE MASTER 'x' TO MASTER_HOST='h', MASTER_USER='r', MASTER_PASSWORD='pw'",
     f"CHANGE MASTER 'x' TO MASTER_HOST='h', MASTER_USER='r', MASTER_PASSWORD={SECRET}"),
    ("CHANGE REPLICATION SOURCE TO SOURCE_HOST='h', SOURCE_USER='r', SOURCE_PASSWORD = 'pw' FOR CHANNEL 'c'",
     f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='h', SOURCE_USER='r', SOURCE_PASSWORD = {SECRET} FOR CHANNEL 'c'"),
    ("START REPLICA USER='r' PASSWORD='pw' FOR CHANNEL 'c'",
     f"START REPLICA USER='r' PASSWORD={SECRET} FOR CHANNEL 'c'"),
    ("ALTER USER 'u'@'%' IDENTIFIED BY 'new' REPLACE 'old' RETAIN CURRENT PASSWORD",
     f"ALTER USER 'u'@'%' IDENTIFIED BY {SECRET} REPLACE {SECRET} RETAIN CURRENT PASSWORD"),
    ("SET PASSWORD FOR 'u'@'%' = 'new' REPLACE 'old'", f"SET PASSWORD FOR 'u'@'%' = {SECRET} REPLACE {SECRET}"),
    ("SET PASSWORD = OLD_PASSWORD('pw')", f"SET PASSWORD = OLD_PASSWORD({SECRET})"),
    ("CLONE INSTANCE FROM 'donor'@'h':3306 IDENTIFIED BY 'pw'",
     f"CLONE INSTANCE FROM 'donor'@'h':3306 IDENTIFIED BY {SECRET}"),
    ("CREATE USER u IDENTIFIED BY _utf8mb4'pw', v IDENTIFIED BY X'7077'",
     f"CREATE USER u IDENTIFIED BY {SECRET}, v IDENTIFIED BY {SECRET}"),
    ("CREATE TABLE s.t (id INT) ENGINE=CONNECT TABLE_TYPE=MYSQL OPTION_LIST='user=r,password=pw'",
     f"CREATE TABLE s.t (id INT) ENGINE=CONNECT TABLE_TYPE=MYSQL OPTION_LIST='{SECRET}'"),
    ("CREATE TABLE s.t (id INT) ENGINE=SPIDER COMMENT='wrapper \"mysql\", host \"h\", password \"pw\"'",
     f"CREATE TABLE s.t (id INT) ENGINE=SPIDER COMMENT='{SECRET}'"),
    # SHOW CREATE TABLE of that table, as dblog's first start writes it to the schema change topic
    ("CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
     "COLLATE=utf8mb4_general_ci COMMENT='x' CONNECTION='mysql://r:plainpw13@127.0.0.1/d/t'",
     "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
     f"COLLATE=utf8mb4_general_ci COMMENT='x' CONNECTION='{SECRET}'"),
]

# Statements without a credential, among them the words that mark one elsewhere
UNCHANGED = [
    "CREATE TABLE shop.users (id INT PRIMARY KEY, password VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'a hash', "
    "user_password CHAR(41), connection VARCHAR(20) DEFAULT 'tcp', KEY (password))",
    "ALTER TABLE shop.users ALTER COLUMN password SET DEFAULT 'x', RENAME COLUMN connection TO conn",
    "ALTER TABLE shop.users ADD COLUMN c INT AS (id * 2) STORED, ALGORITHM=INPLACE, LOCK=NONE",
    "CREATE TABLE shop.s SELECT 'a' AS name, 'b' AS other",
    "CREATE TABLE shop.p (id INT) PARTITION BY LIST COLUMNS(id) (PARTITION p0 VALUES IN (1) COMMENT 'first')",
    "ALTER USER 'u'@'%' PASSWORD EXPIRE INTERVAL 90 DAY",
    "ALTER USER 'u'@'%' DISCARD OLD PASSWORD",
    "ALTER USER 'u'@'%' ACCOUNT LOCK",
    "DROP USER IF EXISTS 'u'@'%', 'v'@'localhost'",
    "RENAME USER 'u'@'%' TO 'v'@'%'",
    "CREATE ROLE 'reader'",
    "GRANT 'reader' TO 'u'@'%'",
    "REVOKE SELECT ON shop.* FROM 'u'@'%'",
    "SET DEFAULT ROLE 'reader' FOR 'u'@'%'",
    "DROP SERVER IF EXISTS s",
    "TRUNCATE TABLE shop.orders",
    "CREATE USER 'u'@'%' IDENTIFIED BY RANDOM PASSWORD",
    "SET PASSWORD FOR 'u'@'%' TO RANDOM",
    "KILL CONNECTION 42",
]


@pytest.mark.parametrize("logged, redacted", LOGGED)
def test_each_logged_form_loses_exactly_its_credentials(logged, redacted):
    assert redact_credentials(logged) == redacted
    assert redact_credentials(redacted) == redacted
    assert classify_ddl(redacted, "shop") == classify_ddl(logged, "shop")


@pytest.mark.parametrize("statement", UNCHANGED)
def test_statements_without_a_credential_are_left_as_written(statement):
    assert redact_credentials(statement) == statement


# --- generated statements -------------------------------------------------------------------

START, END = "Pw0x[", "]pW1"  # around each generated password: a redaction ending early leaves END


@st.composite
def passwords(draw) -> str:
    """Arbitrary text between markers, quotes, backslashes, comment and statement openers included."""
    middle = draw(st.text(st.one_of(st.sampled_from("'\"`\\;#-/*() \t\n\x00\x1a=@$"),
                                    st.characters(blacklist_categories=("Cs",))), max_size=20))
    return START + middle + END


def literals(password: str) -> st.SearchStrategy[str]:
    """Every way a client or a server spells a string literal holding `password`."""
    backslashed = mysql_quoted(password)
    doubled = "'" + password.replace("\\", "\\\\").replace("'", "''") + "'"
    double_quoted = '"' + password.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return st.sampled_from([backslashed, doubled, double_quoted, "_utf8mb4" + backslashed, "_binary " + doubled,
                            "X'" + password.encode().hex() + "'", "0x" + password.encode().hex()])


ACCOUNTS = st.sampled_from(["'app'@'%'", "`app`@`10.0.0.%`", "app", "'o''neil'@'localhost'", "CURRENT_USER()"])
PLUGINS = st.sampled_from(["caching_sha2_password", "'caching_sha2_password'", "mysql_native_password", "ed25519",
                           "authentication_ldap_sasl"])
SUFFIXES = st.sampled_from(["", " REQUIRE SSL", " WITH MAX_QUERIES_PER_HOUR 10", " PASSWORD EXPIRE NEVER",
                            " COMMENT 'note'", " ACCOUNT LOCK", " RETAIN CURRENT PASSWORD", " /* why */",
                            " DEFAULT ROLE 'reader'"])

# {a}: an account, {p}: a plugin, {l} and {m}: password literals, {s}: a suffix
TEMPLATES = [
    "CREATE USER {a} IDENTIFIED BY {l}{s}",
    "CREATE USER IF NOT EXISTS {a} IDENTIFIED WITH {p} BY {l}{s}",
    "CREATE USER {a} IDENTIFIED WITH {p} AS {l}{s}",
    "create or replace user {a} identified by password {l}{s}",
    "CREATE USER {a} IDENTIFIED VIA {p} USING PASSWORD({l}) OR unix_socket{s}",
    "CREATE USER {a} IDENTIFIED VIA {p} USING {l}{s}",
    "CREATE USER {a} IDENTIFIED BY {l} AND IDENTIFIED WITH {p} AS {m}{s}",
    "CREATE USER {a} IDENTIFIED BY RANDOM PASSWORD INITIAL AUTHENTICATION IDENTIFIED BY {l}{s}",
    "CREATE USER {a} IDENTIFIED BY {l}, {a} IDENTIFIED WITH {p} AS {m}{s}",
    "ALTER USER {a} IDENTIFIED BY {l} REPLACE {m}{s}",
    "ALTER USER IF EXISTS {a} IDENTIFIED WITH {p} AS {l}{s}",
    "ALTER USER {a} ADD 2 FACTOR IDENTIFIED WITH {p} BY {l}{s}",
    "SET PASSWORD FOR {a} = {l}{s}",
    "SET PASSWORD FOR {a} = PASSWORD({l})",
    "SET PASSWORD = OLD_PASSWORD({l})",
    "SET PASSWORD FOR {a}={l} REPLACE {m}",
    "GRANT SELECT, INSERT ON shop.* TO {a} IDENTIFIED BY {l}{s}",
    "GRANT ALL PRIVILEGES ON *.* TO {a} IDENTIFIED BY PASSWORD {l} WITH GRANT OPTION",
    "SET STATEMENT max_statement_time=10 FOR CREATE USER {a} IDENTIFIED BY {l}{s}",
    "/*!80000 CREATE USER {a} IDENTIFIED WITH {p} AS {l} */",
    "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'r', PASSWORD {l}, HOST 'h', PORT 3306)",
    "ALTER SERVER s OPTIONS (PASSWORD {l})",
    "CHANGE MASTER TO MASTER_HOST='h', MASTER_PASSWORD={l}, MASTER_PORT=3306",
    "CHANGE REPLICATION SOURCE TO SOURCE_USER='r', SOURCE_PASSWORD = {l} FOR CHANNEL 'c'",
    "START SLAVE USER='r' PASSWORD={l}",
    "CLONE INSTANCE FROM {a}:3306 IDENTIFIED BY {l}",
    "CREATE TABLE shop.f (id INT PRIMARY KEY, password CHAR(8)) ENGINE=FEDERATED CONNECTION={l}",
    "CREATE OR REPLACE TABLE shop.f (id INT PRIMARY KEY) ENGINE=FEDERATED CONNECTION = {l} COMMENT 'x'",
    "ALTER TABLE shop.f ADD COLUMN c INT, CONNECTION={l}",
    "CREATE TABLE shop.c (id INT) ENGINE=CONNECT TABLE_TYPE=MYSQL OPTION_LIST={l}",
    "CREATE TABLE shop.p (id INT) PASSWORD={l}",
]


@st.composite
def credential_statements(draw, template: str) -> tuple[str, list[str]]:
    """(`template` filled in, the passwords in it)"""
    first, second = draw(passwords()), draw(passwords())
    statement = template.format(a=draw(ACCOUNTS), p=draw(PLUGINS), s=draw(SUFFIXES),
                                l=draw(literals(first)), m=draw(literals(second)))
    return statement, [first, second] if "{m}" in template else [first]


REVEALING = (START, END, START.encode().hex(), END.encode().hex())  # as written, or hex-encoded


@pytest.mark.parametrize("template", TEMPLATES)
@settings(max_examples=30)  # per statement shape: its 7 spellings of a literal, several times over
@given(data=st.data())
def test_no_generated_password_survives_whatever_its_quoting(template, data):
    statement, secrets = data.draw(credential_statements(template))
    redacted = redact_credentials(statement)
    assert not [piece for piece in REVEALING if piece in redacted], (secrets, statement, redacted)
    assert SECRET in redacted
    assert redact_credentials(redacted) == redacted
    assert classify_ddl(redacted, "shop") == classify_ddl(statement, "shop")


@given(st.text())
def test_any_text_redacts_without_failing_and_only_once(text):
    redacted = redact_credentials(text)
    assert redact_credentials(redacted) == redacted
    assert classify_ddl(redacted, "shop") == classify_ddl(text, "shop")


VOCABULARY = st.sampled_from([
    "CREATE", "ALTER", "TABLE", "USER", "SET", "PASSWORD", "OLD_PASSWORD", "IDENTIFIED", "BY", "AS", "USING",
    "REPLACE", "WITH", "VIA", "CONNECTION", "OPTION_LIST", "COMMENT", "GRANT", "TO", "STATEMENT", "FOR", "DROP",
    "RENAME", "ADD", "COLUMN", "DATABASE", "TRUNCATE", "t", "db.t", "`q`", "'s'", "'pw'", '"d"', "_binary", "X",
    "0x41", "1", ",", ".", "(", ")", ";", "=", "@", "/*", "*/", "/*!", "--", "#", "\n", "'", "\\",
])


@settings(max_examples=500)
@given(st.lists(VOCABULARY, max_size=25), st.sampled_from([" ", ""]))
def test_statement_shaped_noise_redacts_once_and_keeps_its_classification(words, separator):
    text = separator.join(words)
    redacted = redact_credentials(text)
    assert redact_credentials(redacted) == redacted
    assert classify_ddl(redacted, "shop") == classify_ddl(text, "shop")
