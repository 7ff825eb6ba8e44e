"""`http_request` reaches only allowlisted origins (scheme, host and port), never a loopback,
private or link-local address unless the operator allowed that network, and connects to the
address it checked (a second DNS answer cannot redirect it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tasks.tools import PermanentToolError, registry
from tasks.tools.registry import ToolContext
from tests.conftest import http_serving


class Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, "host": self.headers.get("Host")})
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with http_serving(Recorder) as httpd:
        httpd.seen = []
        yield httpd


@pytest.fixture
def call(tmp_path):
    def call(url: str) -> dict:
        spec = registry.get("http_request")
        ctx = ToolContext(
            task_id="t", call_id="0.0.0", workspace=tmp_path, timeout_s=5, stop=threading.Event()
        )
        return spec.func(ctx, spec.args_model.model_validate({"url": url}))

    return call


def test_an_allowlisted_host_does_not_open_its_other_ports(call, server, settings):
    """`localhost` on the list used to reach any port on it: the app, Redis, anything."""
    settings.HARNESS_HTTP_ALLOWLIST = ["localhost", "127.0.0.1"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.0/8"]
    port = server.server_address[1]
    for url in (f"http://localhost:{port}/", f"http://127.0.0.1:{port}/", "http://127.0.0.1:6379/"):
        with pytest.raises(PermanentToolError, match="not allowed"):
            call(url)
    assert server.seen == []


def test_loopback_is_refused_even_when_its_origin_is_listed(call, server, settings):
    port = server.server_address[1]
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = []
    for host in ("127.0.0.1", "localhost"):
        with pytest.raises(PermanentToolError, match="loopback, private or link-local"):
            call(f"http://{host}:{port}/")
    assert server.seen == []


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "10.0.0.1", "192.168.1.1", "[::1]", "[::ffff:127.0.0.1]"]
)
def test_private_and_link_local_addresses_are_refused_before_connecting(call, settings, address):
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://{address}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = []
    with pytest.raises(PermanentToolError, match="loopback, private or link-local"):
        call(f"http://{address}/latest/meta-data/")


def test_an_explicitly_allowed_network_is_reached_on_the_listed_port(call, server, settings):
    port = server.server_address[1]
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://localhost:{port}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.1/32"]
    assert call(f"http://localhost:{port}/hello")["status"] == 200
    assert server.seen == [{"path": "/hello", "host": f"localhost:{port}"}]


def test_the_connection_goes_to_the_checked_address(call, server, settings, monkeypatch):
    """A name that answers differently on a second lookup (DNS rebinding) cannot redirect the
    request: the harness resolves once, checks, and connects to that address, keeping the
    Host header. (The resolver is swapped for one that rebinds: no DNS server to stand up.)"""
    port = server.server_address[1]
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://rebind.test:{port}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.1/32"]
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding(host, *args, **kwargs):
        if host == "rebind.test":
            # First answer: the allowed address; any later one: the cloud metadata service.
            return real(next(answers, "169.254.169.254"), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    assert call(f"http://rebind.test:{port}/x")["status"] == 200
    assert server.seen == [{"path": "/x", "host": f"rebind.test:{port}"}]
