"""A loopback TCP proxy a test can cut: forwarding to a real server, closed (connections
refused), or silent (connections accepted and never answered: a host gone behind a partition).
Tests point a process at it to take its database away and give it back without touching the
server other tests share."""

from __future__ import annotations

import socket
import threading

from tests.conftest import free_port


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    for sock in (source, sink):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class TcpProxy:
    def __init__(self, *, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def open(self, *, silent: bool = False) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener, silent), daemon=True).start()

    def close(self) -> None:
        """Stop listening and cut every connection made through the proxy."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            except OSError:
                pass
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self, listener: socket.socket, silent: bool) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._track(client)
            if silent:
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._track(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()
