"""The HTTP endpoint (`[http] port`): Prometheus metrics, liveness and readiness.

* `GET /metrics`: the registry of `dblog.runtime.metrics.Metrics` in Prometheus' text format
  (OpenMetrics when the scraper asks for it), rendered by prometheus_client.
* `GET /healthz`: 200 `{"status": "alive"}` while the process serves requests.
* `GET /readyz`: 200 `{"ready": true, ...}` when not stopping, the binlog reader is connected
  and the stream is at most `http.ready_max_lag_seconds` behind; else 503 with
  `{"ready": false, "reasons": [...], ...}` (`Metrics.readiness`).

A `ThreadingHTTPServer` in daemon threads: a scrape never runs on the engine's thread, and
reads only what the engine has counted (the collector's own cost is a few dict copies).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder

from dblog.runtime.metrics import Metrics

log = logging.getLogger("dblog.http")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class HttpEndpoint:
    """Listens on `host:port` (port 0: a free one, see `port`) from construction; serves from
    `start()` until `close()`."""

    def __init__(self, metrics: Metrics, host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        server_class = _Server6 if ":" in host else _Server
        self._server = server_class((host, port), _handler(metrics))
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="dblog-http", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> HttpEndpoint:
        self._thread.start()
        log.info("metrics on %s/metrics, health on /healthz and /readyz", self.url)
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HttpEndpoint:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve(metrics: Metrics, host: str, port: int) -> HttpEndpoint:
    """Start an endpoint; an address that cannot be bound raises OSError naming it."""
    try:
        endpoint = HttpEndpoint(metrics, host, port)
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {host}:{port} (http.host, http.port): {error.strerror}") from None
    return endpoint.start()


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "dblog"

        def do_GET(self) -> None:
            try:
                self._answer(urlsplit(self.path).path.rstrip("/") or "/")
            except Exception as error:  # a bug in a collector: say so, keep serving
                log.exception("GET %s failed", self.path)
                self._json(500, {"error": f"{type(error).__name__}: {error}"})

        def _answer(self, path: str) -> None:
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._send(200, content_type, encoder(metrics.registry))
            elif path == "/healthz":
                self._json(200, {"status": "alive"})
            elif path == "/readyz":
                ready, body = metrics.readiness()
                self._json(200 if ready else 503, body)
            else:
                self._json(404, {"error": f"no such path {path}: try /metrics, /healthz or /readyz"})

        def _json(self, status: int, body: dict) -> None:
            self._send(status, "application/json", (json.dumps(body) + "\n").encode())

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
