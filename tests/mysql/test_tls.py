"""`[source.tls]` against real servers: the TLS-only MariaDB (`tls_mariadb`: a test CA, a server
certificate for "localhost" only, require_secure_transport, accounts REQUIRE SSL and REQUIRE
X509) and the session server, which offers no TLS. Each refusal names the setting and what to
do; what is encrypted is read from the server's side (its Ssl_cipher of the session)."""

from __future__ import annotations

import pickle

import pymysql
import pytest

from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.tls import TlsError
from dblog.runtime.config import ConfigError, parse_config
from support.fixtures.tls import KEY_PASSWORD, SERVER_NAME


def _settings(server, user: str, host: str = SERVER_NAME, password: str | None = None, **tls) -> ConnectionSettings:
    data = {"source": {"host": host, "port": server.db.port, "user": user,
                       "password": server.password if password is None else password, "tls": tls}}
    return parse_config(data).source.connection_settings()


def _cipher(connection: pymysql.Connection) -> str:
    """The session's cipher as the server reports it ('' when not encrypted)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return cursor.fetchone()[1]


def test_verify_identity_connects_by_the_name_the_certificate_carries(tls_mariadb):
    with _settings(tls_mariadb, tls_mariadb.x509_user, **tls_mariadb.tls("verify_identity")).connect() as connection:
        assert _cipher(connection)
        # and the server sees this session encrypted too
        assert all(cipher for _, _, cipher in tls_mariadb.sessions(tls_mariadb.x509_user))


def test_verify_identity_refuses_a_certificate_for_another_name(tls_mariadb):
    settings = _settings(tls_mariadb, tls_mariadb.ssl_user, host="127.0.0.1", **tls_mariadb.tls("verify_identity"))
    with pytest.raises(TlsError) as refused:
        settings.connect()
    message = refused.value.args[1]
    assert "does not name 127.0.0.1" in message and 'source.tls.mode = "verify_identity"' in message
    assert "source.host" in message and '"verify_ca"' in message  # what to do
    # the same address with the CA verified only is fine
    with _settings(tls_mariadb, tls_mariadb.ssl_user, host="127.0.0.1",
                   **tls_mariadb.tls("verify_ca", client_certificate=False)).connect() as connection:
        assert _cipher(connection)


def test_verify_ca_refuses_a_server_certificate_of_another_ca(tls_mariadb):
    tls = tls_mariadb.tls("verify_ca", client_certificate=False, ca=str(tls_mariadb.other_ca))
    with pytest.raises(TlsError) as refused:
        _settings(tls_mariadb, tls_mariadb.ssl_user, **tls).connect()
    message = refused.value.args[1]
    assert "not verified against the CA in source.tls.ca" in message and '"verify_ca"' in message
    assert "set source.tls.ca to the PEM file of the CA" in message
    # without a ca the system's trusted CAs do not know the test CA either
    with pytest.raises(TlsError, match="the system's trusted CAs"):
        _settings(tls_mariadb, tls_mariadb.ssl_user, mode="verify_ca").connect()


def test_required_refuses_a_server_without_tls_before_sending_the_credentials(mariadb):
    # A wrong password: had the credentials gone out, the server would say "Access denied".
    settings = ConnectionSettings.of(dict(mariadb.connection_settings, password="not-the-password"))
    for mode in ("required", "verify_ca", "verify_identity"):
        with pytest.raises(TlsError) as refused:
            ConnectionSettings(settings.host, settings.port, settings.user, settings.password,
                               parse_config({"source": {"tls": {"mode": mode}}}).source.tls.settings()).connect()
        message = refused.value.args[1]
        assert f'source.tls.mode = "{mode}"' in message and "offers no TLS (nothing was sent to it)" in message
        assert "enable TLS on the server" in message and '"preferred"' in message
        assert "not-the-password" not in message


def test_preferred_uses_tls_when_offered_and_plaintext_only_when_not(mariadb, tls_mariadb):
    with _settings(tls_mariadb, tls_mariadb.ssl_user, mode="preferred").connect() as connection:
        assert _cipher(connection)  # the TLS server: encrypted (an account REQUIRE SSL, accepted)
    plain = ConnectionSettings.of(mariadb.connection_settings)
    assert plain.tls.mode == "preferred"  # the default
    with plain.connect() as connection:
        assert _cipher(connection) == ""  # the session server offers no TLS: plaintext


def test_disabled_is_refused_by_a_server_requiring_tls_with_the_setting_named(tls_mariadb):
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _settings(tls_mariadb, tls_mariadb.ssl_user, mode="disabled").connect()
    assert refused.value.args[0] == 1045
    assert 'source.tls.mode = "disabled"' in refused.value.args[1] and "REQUIREs SSL or X509" in refused.value.args[1]


def test_an_x509_account_needs_the_client_certificate(tls_mariadb):
    user = tls_mariadb.x509_user
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _settings(tls_mariadb, user, **tls_mariadb.tls("verify_identity", client_certificate=False)).connect()
    assert refused.value.args[0] == 1045
    assert "REQUIREs X509" in str(refused.value) and "set source.tls.cert and source.tls.key" in str(refused.value)
    with _settings(tls_mariadb, user, **tls_mariadb.tls("required")).connect() as connection:
        assert _cipher(connection)
        with connection.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
            assert cursor.fetchone()[1] in ("TLSv1.2", "TLSv1.3")


def test_an_encrypted_client_key_with_its_passphrase_from_the_environment(tls_mariadb, monkeypatch, tmp_path):
    tls = tls_mariadb.tls("verify_identity", key=str(tls_mariadb.encrypted_client_key),
                          key_password_env="DBLOG_TEST_KEY_PASSWORD", min_version="TLSv1.3")
    monkeypatch.setenv("DBLOG_TEST_KEY_PASSWORD", KEY_PASSWORD)
    with _settings(tls_mariadb, tls_mariadb.x509_user, **tls).connect() as connection:
        with connection.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
            assert cursor.fetchone()[1] == "TLSv1.3"
    monkeypatch.setenv("DBLOG_TEST_KEY_PASSWORD", "wrong-passphrase")
    with pytest.raises(TlsError) as refused:
        _settings(tls_mariadb, tls_mariadb.x509_user, **tls).connect()
    assert "source.tls.key_password" in str(refused.value) and "wrong-passphrase" not in str(refused.value)
    monkeypatch.delenv("DBLOG_TEST_KEY_PASSWORD")
    with pytest.raises(ConfigError, match="source.tls.key_password_env names 'DBLOG_TEST_KEY_PASSWORD'"):
        _settings(tls_mariadb, tls_mariadb.x509_user, **tls)


def test_settings_carry_the_pem_texts_and_survive_pickling(tls_mariadb):
    """What the binlog reader process and Spark executors receive: no file is read there."""
    settings = _settings(tls_mariadb, tls_mariadb.x509_user, **tls_mariadb.tls("verify_identity"))
    assert settings.tls.ca == tls_mariadb.ca.read_text() and "PRIVATE KEY" in settings.tls.key
    assert tls_mariadb.password not in repr(settings) and "PRIVATE KEY" not in repr(settings)
    with pickle.loads(pickle.dumps(settings)).connect() as connection:
        assert _cipher(connection)


@pytest.mark.parametrize(("tls", "named"), [
    ({"ca": "/nonexistent/ca.pem", "mode": "verify_ca"}, "source.tls.ca: cannot read /nonexistent/ca.pem"),
    ({"ca": "PLACEHOLDER"}, 'set mode = "verify_ca"'),
    ({"mode": "sometimes"}, "source.tls.mode"),
    ({"min_version": "TLSv1.1"}, "source.tls.min_version"),
    ({"key": "k.pem"}, "key is set without cert"),
])
def test_bad_tls_settings_name_the_setting(tmp_path, tls, named):
    tls = {key: str(tmp_path / "ca.pem") if value == "PLACEHOLDER" else value for key, value in tls.items()}
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        parse_config({"source": {"tls": tls}}).source.connection_settings()


def test_a_file_that_is_not_pem_is_refused_by_name(tmp_path):
    (tmp_path / "ca.der").write_bytes(b"\x30\x82\x01\x0a")
    with pytest.raises(ConfigError, match="source.tls.ca: .* is not a PEM file"):
        parse_config({"source": {"tls": {"mode": "verify_ca", "ca": str(tmp_path / "ca.der")}}}).source.connection_settings()


def test_dblog_run_stops_at_once_on_a_tls_refusal_naming_the_setting(mariadb, tls_mariadb, tmp_path):
    """Not retried as a lost server would be (for source.reconnect_timeout_seconds): exit 1 with
    the message, no traceback."""
    import subprocess
    import sys

    import tomli_w

    cases = [
        ({"host": "127.0.0.1", "port": tls_mariadb.db.port, "user": tls_mariadb.x509_user,
          "password": tls_mariadb.password, "tls": {**tls_mariadb.tls("verify_identity")}},
         'source.tls.mode = "verify_identity"'),
        ({"port": mariadb.port, "user": mariadb.user, "tls": {"mode": "required"}},
         'source.tls.mode = "required", but the server'),
    ]
    for source, named in cases:
        path = tmp_path / "dblog.toml"
        path.write_text(tomli_w.dumps({"source": source, "offsets": {"path": str(tmp_path / "offsets.json")},
                                       "sink": {"path": str(tmp_path / "changes.jsonl")}}))
        done = subprocess.run([sys.executable, "-m", "dblog.cli", "run", "--config", str(path)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        assert named in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert tls_mariadb.password not in done.stderr
