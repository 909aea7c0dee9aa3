"""TLS to the source server, as the MySQL client (`--ssl-mode`) and Debezium (`database.ssl.mode`)
know it, on every connection dblog opens (`ConnectionSettings.connect`).

Modes:

- `disabled`: plaintext, even when the server offers TLS;
- `preferred` (the default, as both): TLS when the server offers it, without verifying its
  certificate; plaintext only when the server offers no TLS at all;
- `required`: TLS or no connection; the certificate is not verified;
- `verify_ca`: TLS, and the server's certificate must chain to `ca` (the system's trusted CAs
  when `ca` is unset); its name is not checked;
- `verify_identity`: as `verify_ca`, and the certificate must name the host dblog connects to.

pymysql 1.2.4 negotiates TLS inside `_request_authentication`: after the server's greeting (its
capability flags) and before the credentials, it sends a short SSL request, wraps the socket
(`ctx.wrap_socket(server_hostname=host)`) and only then authenticates. Given a context it
refuses a server without `CLIENT.SSL` ("SSL is required but the server doesn't support it");
given none it tries TLS and falls back to plaintext silently. `TlsConnection` sets the context
itself and checks the server's `CLIENT.SSL` flag first, so that `required` and stronger refuse a
server without TLS before anything secret is sent, with an error that names `source.tls.mode`
and what to do; certificate and handshake failures become `TlsError`s that say the same.

Settings carry the PEM texts, not paths: they are pickled to the binlog reader process and
shipped to Spark executors, which then need no files. The client key is loaded through an
anonymous in-memory file (memfd) where the platform has one: `ssl` loads certificates only
from paths.
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import Iterator

import pymysql
import pymysql.connections
from pymysql.constants import CLIENT

from dblog.mysql.server_errors import CR_SSL_CONNECTION_ERROR, ER_ACCESS_DENIED_ERROR, error_code

__all__ = ["MODES", "TlsConnection", "TlsError", "TlsSettings"]

MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
MIN_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_HOSTNAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


class TlsError(pymysql.err.OperationalError):
    """TLS to the source could not be set up as configured (the message names the setting and
    what to do). Code CR_SSL_CONNECTION_ERROR: not a lost server, so nothing waits and retries for it."""

    def __str__(self) -> str:
        return str(self.args[1]) if len(self.args) > 1 else super().__str__()


@dataclass(frozen=True)
class TlsSettings:
    """`[source.tls]` resolved: PEM texts instead of paths, the key's passphrase instead of its
    `_env`/`_file` form. `where` is the config section the errors name."""

    mode: str = "preferred"
    ca: str | None = field(default=None, repr=False)  # PEM: the CA(s) the server's certificate must chain to
    cert: str | None = field(default=None, repr=False)  # PEM: the client certificate (chain)
    key: str | None = field(default=None, repr=False)  # PEM: the client certificate's private key
    key_password: str | None = field(default=None, repr=False)
    min_version: str = "TLSv1.2"
    where: str = "source.tls"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"{self.where}.mode: {self.mode!r} is not one of {', '.join(MODES)}")
        if self.min_version not in MIN_VERSIONS:
            raise ValueError(f"{self.where}.min_version: {self.min_version!r} is not one of "
                             f"{', '.join(MIN_VERSIONS)}")

    @property
    def required(self) -> bool:
        """No connection without TLS (`required` and the verifying modes)."""
        return self.mode not in ("disabled", "preferred")

    def context(self) -> ssl.SSLContext | None:
        """The SSLContext of these settings (None: `disabled`), built once per distinct settings."""
        return None if self.mode == "disabled" else _context(self)


@functools.lru_cache(maxsize=16)
def _context(settings: TlsSettings) -> ssl.SSLContext:
    where = settings.where
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MIN_VERSIONS[settings.min_version]
    if settings.mode in ("verify_ca", "verify_identity"):
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = settings.mode == "verify_identity"
        if settings.ca:
            try:
                context.load_verify_locations(cadata=settings.ca)
            except (ssl.SSLError, ValueError) as error:
                raise TlsError(CR_SSL_CONNECTION_ERROR,
                               f"{where}.ca holds no usable PEM certificate ({_reason(error)}): point it at the "
                               "PEM file of the CA that issued the server's certificate") from None
        else:
            context.load_default_certs()
    else:  # preferred, required: encrypted, not verified (the MySQL client's and Debezium's meaning)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.cert or settings.key:
        if not settings.cert:
            raise TlsError(CR_SSL_CONNECTION_ERROR, f"{where}.key is set without {where}.cert: set both (the "
                                                    "client certificate and its private key), or neither")
        try:
            with _pem_path(settings.cert) as cert, _pem_path(settings.key) as key:
                context.load_cert_chain(cert, key, password=settings.key_password or None)
        except (ssl.SSLError, ValueError) as error:
            hint = (f"check {where}.key_password (the key's passphrase)" if "decrypt" in str(error).lower()
                    or "password" in str(error).lower() or settings.key_password else
                    f"if the key is encrypted, set {where}.key_password (or key_password_env / key_password_file)")
            raise TlsError(CR_SSL_CONNECTION_ERROR,
                           f"{where}.cert / {where}.key: the client certificate and key cannot be loaded "
                           f"({_reason(error)}): they must be PEM files of one certificate and its private key; "
                           f"{hint}") from None
    return context


@contextlib.contextmanager
def _pem_path(text: str | None) -> Iterator[str | None]:
    """A path holding `text` while the block runs: an anonymous memory file (Linux), else a
    file only this user may read, deleted afterwards."""
    if text is None:
        yield None
        return
    data = text.encode()
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("dblog-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="dblog-tls-") as directory:  # mode 0700
        path = os.path.join(directory, "pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
            file.write(data)
        yield path


def _reason(error: BaseException) -> str:
    return getattr(error, "verify_message", None) or getattr(error, "reason", None) or str(error) or type(error).__name__


class TlsConnection(pymysql.connections.Connection):
    """A pymysql connection whose TLS follows `tls` (see the module docstring)."""

    def __init__(self, *, tls: TlsSettings, **options) -> None:
        self.tls_settings = tls
        context = tls.context()  # a bad ca/cert/key fails here, before any socket is opened
        defer = options.pop("defer_connect", False)
        super().__init__(**options, ssl_disabled=True, defer_connect=True)
        if context is not None:  # pymysql's own switches, read by _request_authentication
            self.ssl, self.ctx, self._ssl_required = True, context, tls.required
        if not defer:
            self.connect()

    def _request_authentication(self) -> None:
        tls, where = self.tls_settings, self.tls_settings.where
        if tls.required and not self.server_capabilities & CLIENT.SSL:
            raise TlsError(
                CR_SSL_CONNECTION_ERROR,
                f"{where}.mode = \"{tls.mode}\", but the server at {self.host}:{self.port} offers no TLS (nothing was "
                "sent to it): enable TLS on the server (its ssl_cert and ssl_key settings), or, to let credentials "
                f"and data cross the network unencrypted, set {where}.mode = \"preferred\" or \"disabled\"")
        try:
            super()._request_authentication()
        except ssl.SSLCertVerificationError as error:
            raise TlsError(CR_SSL_CONNECTION_ERROR, self._verification_failure(error)) from None
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            raise  # the connection broke mid-handshake: a lost server, as any other OSError
        except ssl.SSLError as error:
            raise TlsError(
                CR_SSL_CONNECTION_ERROR,
                f"the TLS handshake with the server at {self.host}:{self.port} failed ({_reason(error)}; "
                f"{where}.mode = \"{tls.mode}\", min_version {tls.min_version}): if the server wants a client "
                f"certificate set {where}.cert and {where}.key; if it supports no TLS version at or above "
                f"{where}.min_version, lower that; else check the server's TLS settings") from None
        except pymysql.err.OperationalError as error:
            if error_code(error) == ER_ACCESS_DENIED_ERROR:
                raise type(error)(ER_ACCESS_DENIED_ERROR, f"{error.args[1]}. {self._access_hint()}") from None
            raise

    def _verification_failure(self, error: ssl.SSLCertVerificationError) -> str:
        tls, where = self.tls_settings, self.tls_settings.where
        if error.verify_code in _HOSTNAME_MISMATCH:
            return (f"the server's certificate does not name {self.host} ({_reason(error)}; {where}.mode = "
                    f"\"verify_identity\"): set source.host to a name the certificate carries (its subject "
                    f"alternative names), have the server's certificate reissued for {self.host}, or set "
                    f"{where}.mode = \"verify_ca\" to verify the issuer only")
        trusted = f"the CA in {where}.ca" if tls.ca else f"the system's trusted CAs ({where}.ca is unset)"
        return (f"the certificate of the server at {self.host}:{self.port} was not verified against {trusted} "
                f"({_reason(error)}; {where}.mode = \"{tls.mode}\"): set {where}.ca to the PEM file of the CA that "
                f"issued the server's certificate, or set {where}.mode = \"required\" to encrypt without "
                "verifying")

    def _access_hint(self) -> str:
        where, tls = self.tls_settings.where, self.tls_settings
        hint = "check source.user and source.password"
        if not self._secure:
            return (f"{hint}; if the account REQUIREs SSL or X509 (SHOW GRANTS) or the server sets "
                    f"require_secure_transport, connect over TLS: with {where}.mode = \"{tls.mode}\" this connection "
                    "was not encrypted")
        if not tls.cert:
            return (f"{hint}; if the account REQUIREs X509 (a client certificate; SHOW GRANTS), set {where}.cert "
                    f"and {where}.key")
        return f"{hint}; if the account REQUIREs a certificate SUBJECT or ISSUER, check {where}.cert"
