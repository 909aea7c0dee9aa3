"""A TCP proxy of the tests' own, in front of a database server, for network faults and failover:
what a virtual IP, a DNS switch or a cloud proxy (RDS Proxy, ProxySQL in front of a promoted
replica) does to dblog's connections.

    proxy = TcpProxy(("127.0.0.1", primary.port))   # dblog connects to 127.0.0.1:proxy.port
    proxy.switch(("127.0.0.1", replica.port))        # failover: open connections cut, new ones go there
    proxy.cut()                                      # the network is down: connections reset, new ones refused
    proxy.restore()
    proxy.stall()                                    # bytes stop flowing, sockets stay open (no FIN, no RST)
    proxy.resume()

One thread accepts; each connection has two pump threads. Nothing in dblog imports it.
"""

from __future__ import annotations

import socket
import struct
import threading

__all__ = ["TcpProxy"]

_BUFFER = 65536


class TcpProxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._connections: list[tuple[socket.socket, socket.socket]] = []
        self._down = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()

    # --- faults -----------------------------------------------------------------------------

    def switch(self, target: tuple[str, int]) -> None:
        """New connections go to `target`; the open ones are cut (their server is gone)."""
        with self._lock:
            self.target = target
        self._reset_all()

    def cut(self) -> None:
        """The network is down: open connections are reset, new ones closed at once."""
        with self._lock:
            self._down = True
        self._reset_all()

    def restore(self) -> None:
        with self._lock:
            self._down = False

    def stall(self) -> None:
        """No byte goes through in either direction; every socket stays open."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self._listener.close()
        self._reset_all()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the pumps ----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down, target = self._down, self.target
            if down:
                _reset(client)
                continue
            try:
                server = socket.create_connection(target, timeout=5)
                server.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._connections.append((client, server))
                self.accepted += 1
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink, client, server), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, client: socket.socket, server: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_BUFFER)
                if not data:
                    break
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        self._forget(client, server)

    def _forget(self, client: socket.socket, server: socket.socket) -> None:
        with self._lock:
            if (client, server) in self._connections:
                self._connections.remove((client, server))
        _reset(client)
        _reset(server)

    def _reset_all(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for client, server in connections:
            _reset(client)
            _reset(server)


def _reset(connection: socket.socket) -> None:
    """Close at once (SO_LINGER 0: unsent data dropped), waking the pump blocked reading it."""
    for step in (lambda: connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)),
                 lambda: connection.shutdown(socket.SHUT_RDWR), connection.close):
        try:
            step()
        except OSError:
            pass
