"""The tests' HTTP servers answer with Nagle's algorithm off on each connection, as gunicorn
(the production server) does. With it on, a response written in two sends (the headers, then
the body) waited for the client's delayed ACK of the first: 40 ms a request. That was most of
an API fuzzing shard's time (95 s -> 30 s), client and server idle, waiting on each other."""

from __future__ import annotations

import socket
from http.server import ThreadingHTTPServer
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer


class NoDelay:
    """A socketserver mixin: TCP_NODELAY on every accepted connection."""

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()  # the server class's
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


class NoDelayWSGIServer(NoDelay, ThreadedWSGIServer):
    """Django's live server (LiveServerThread.server_class)."""


class NoDelayHTTPServer(NoDelay, ThreadingHTTPServer):
    """The standard library's threading HTTP server, for the tests' stand-in services."""
