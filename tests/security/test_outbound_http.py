"""`http_request` reaches only allowlisted origins (scheme, host and port), never a loopback,
private or link-local address unless the operator allowed that network, and connects to the
address it checked (a second DNS answer cannot redirect it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from tasks.tools import PermanentToolError, registry
from tasks.tools.registry import ToolContext
from tests.conftest import http_serving


class Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, "host": self.headers.get("Host")})
        if self.path == "/moved":
            # To the IPv6 loopback on this port: were it followed, the pinned connection
            # would land here again.
            self.send_response(307)
            self.send_header("Location", f"http://[::1]:{self.server.server_address[1]}/admin")
        else:
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
    def call(url: str, **args: object) -> dict:
        spec = registry.get("http_request")
        ctx = ToolContext(
            task_id="t", call_id="0.0.0", workspace=tmp_path, timeout_s=5, stop=threading.Event()
        )
        return spec.func(ctx, spec.args_model.model_validate({"url": url, **args}))

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


# --- URL forms (issue 26) ---------------------------------------------------------------------
# The loopback origin is allowed in these tests, so each form that used to get through reached
# the recorder; what must hold is that what the allowlist and a reviewer read is what is sent.


@pytest.fixture
def loopback_allowed(server, settings) -> int:
    port = server.server_address[1]
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://127.0.0.1:{port}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.1/32"]
    return port


def test_a_url_with_userinfo_is_refused(call, server, loopback_allowed):
    """`http://api.example.com@127.0.0.1/` reads as api.example.com to a person; userinfo
    would also ride along as an Authorization header."""
    for url in (
        f"http://a@127.0.0.1:{loopback_allowed}/",
        f"http://allowed.example:443@127.0.0.1:{loopback_allowed}/",
        f"http://user:secret@127.0.0.1:{loopback_allowed}/",
    ):
        with pytest.raises(ValidationError, match="user name or password"):
            call(url)
    assert server.seen == []


def test_a_url_with_a_backslash_is_refused(call, server, loopback_allowed):
    """A browser (WHATWG) reads `\\` as `/`, so `http://allowed.example\\@127.0.0.1/` is a link
    to allowed.example there, and a request to 127.0.0.1 here."""
    for url in (
        f"http://allowed.example\\@127.0.0.1:{loopback_allowed}/",
        f"http://127.0.0.1:{loopback_allowed}\\@allowed.example/",
        f"http://127.0.0.1:{loopback_allowed}/\\admin",
    ):
        with pytest.raises(ValidationError, match="backslash"):
            call(url)
    assert server.seen == []


def test_a_host_header_cannot_override_the_urls_host(call, server, loopback_allowed):
    """A `Host` of the model's would send the allowed address's virtual hosting to another
    name; framing headers could split the request at a proxy."""
    for name in ("Host", "host", "HOST", "Transfer-Encoding", "Content-Length", "Connection"):
        with pytest.raises(ValidationError, match="set from the URL and the body"):
            call(f"http://127.0.0.1:{loopback_allowed}/", headers={name: "internal.admin"})
    for headers in ({"X-Ok": "a\r\nHost: internal.admin"}, {"Host\r\nX": "1"}, {"": "1"}):
        with pytest.raises(ValidationError):
            call(f"http://127.0.0.1:{loopback_allowed}/", headers=headers)
    assert server.seen == []
    # Other headers go through; Host stays the URL's.
    call(f"http://127.0.0.1:{loopback_allowed}/ok", headers={"X-Trace": "1"})
    assert server.seen == [{"path": "/ok", "host": f"127.0.0.1:{loopback_allowed}"}]


def test_a_redirect_to_the_ipv6_loopback_is_returned_not_followed(call, server, loopback_allowed):
    """Regression (already held): redirects are never followed, so a 307 to `[::1]` comes back
    to the model, whose next request to it is checked like any other."""
    result = call(f"http://127.0.0.1:{loopback_allowed}/moved")
    assert result["status"] == 307
    assert result["headers"]["location"] == f"http://[::1]:{loopback_allowed}/admin"
    assert [seen["path"] for seen in server.seen] == ["/moved"]
    with pytest.raises(PermanentToolError, match="not allowed"):
        call(result["headers"]["location"])
    assert len(server.seen) == 1


@pytest.mark.parametrize(
    "url", ["http://LOCALHOST:{port}/", "HTTP://LocalHost:{port}/", "http://LOCALHOST.:{port}/"]
)
def test_upper_case_and_trailing_dot_hosts_are_checked_like_the_name(
    call, server, settings, monkeypatch, url
):
    """Regression (already held): the allowlist matches `LOCALHOST.` as `localhost`, and the
    address it resolves to is still checked, so loopback stays refused."""
    port = server.server_address[1]
    real = socket.getaddrinfo

    def absolute_names(host, *args, **kwargs):
        # As a DNS resolver answers the absolute name (/etc/hosts here does not know it).
        return real(host.rstrip(".") if host.lower() == "localhost." else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", absolute_names)
    settings.HARNESS_HTTP_ALLOWLIST = [f"http://localhost:{port}"]
    settings.HARNESS_HTTP_ALLOW_NETWORKS = []
    with pytest.raises(PermanentToolError, match="loopback, private or link-local"):
        call(url.format(port=port))
    settings.HARNESS_HTTP_ALLOWLIST = ["https://allowed.example"]
    with pytest.raises(PermanentToolError, match="not allowed"):
        call(url.format(port=port))
    assert server.seen == []
