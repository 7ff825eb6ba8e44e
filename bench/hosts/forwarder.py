"""A TCP forwarder from the bridge to a service that listens on the loopback only."""

from __future__ import annotations

import contextlib
import socket
import threading

from bench.hosts.namespaces import TCP_RTO_MAX_MS


class Forwarder:
    """Accepts TCP connections on `listen` and relays each, both ways, to `upstream`.

    One thread per direction of each connection: blocking `recv`/`sendall` release the
    interpreter lock, and a connection whose far end is partitioned simply blocks (no timeouts
    here: the hosts' own TCP stacks and clients decide when to give up, as on a real network).
    """

    def __init__(
        self, *, listen: tuple[str, int], upstream: tuple[str, int], rto_max_ms: int | None = None
    ) -> None:
        self.upstream = upstream
        self.rto_max_ms = rto_max_ms
        self.server = socket.create_server(listen, reuse_port=False)
        self.address: tuple[str, int] = self.server.getsockname()[:2]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name=f"forward-{self.address}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.rto_max_ms:
                with contextlib.suppress(OSError):  # before Linux 6.15
                    client.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, self.rto_max_ms)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            pair = [client, upstream]
            remaining = [2]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst, pair, remaining), daemon=True
                ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: list[socket.socket], remaining: list
    ) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)  # pass the end of the stream on
        except OSError:
            for sock in pair:  # one side broke: the whole connection does
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            remaining[0] -= 1
            if remaining[0]:
                return
            for sock in pair:
                self._open.discard(sock)
                sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._open)
        # shutdown() wakes the threads blocked in accept() and recv().
        for sock in [self.server, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.server.close()
