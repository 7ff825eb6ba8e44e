from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from agent.tools.http import host_allowed
from tasks.tools import PermanentToolError, ToolError, TransientToolError, registry
from tests.conftest import http_serving


class Handler(BaseHTTPRequestHandler):
    """A loopback server: the path picks the response; every request is recorded."""

    def _respond(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        self.server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                "idempotency_key": self.headers.get("Idempotency-Key"),
            }
        )
        status, headers, payload = 200, {"Content-Type": "application/json"}, b""
        if self.path == "/ok":
            payload = json.dumps(self.server.requests[-1]).encode()
        elif self.path == "/missing":
            status, payload = 404, b'{"detail": "not found"}'
        elif self.path == "/unavailable":
            status, headers["Retry-After"] = 503, "7"
            payload = b"down for maintenance"
        elif self.path == "/ratelimited":
            status = 429
        elif self.path == "/redirect":
            status, headers["Location"] = 302, "http://elsewhere.invalid/"
        elif self.path == "/big":
            headers["Content-Type"] = "text/plain"
            payload = b"z" * 100_000
        elif self.path == "/slow":
            time.sleep(5)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("X-Internal", "not for the model")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _respond

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def server(settings) -> Iterator[ThreadingHTTPServer]:
    with http_serving(Handler) as httpd:
        settings.HARNESS_HTTP_ALLOWLIST = [f"http://127.0.0.1:{httpd.server_address[1]}"]
        settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.1/32"]
        httpd.requests = []
        yield httpd


def url(server: ThreadingHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_a_200_is_a_result_and_carries_the_idempotency_key(call, server):
    result = call(
        "http_request",
        {
            "method": "POST",
            "url": url(server, "/ok"),
            "headers": {"idempotency-key": "forged"},
            "body": "hello",
        },
    )

    assert result["status"] == 200
    assert result["truncated"] is False
    assert result["headers"]["content-type"] == "application/json"
    assert "x-internal" not in result["headers"]
    echoed = json.loads(result["body"])
    assert echoed["method"] == "POST"
    assert echoed["body"] == "hello"
    assert echoed["idempotency_key"] == "task-1:call-1"


def test_a_404_is_a_result_the_model_sees(call, server):
    result = call("http_request", {"url": url(server, "/missing")})

    assert result["status"] == 404
    assert json.loads(result["body"]) == {"detail": "not found"}


def test_the_status_and_body_are_shown_to_people_even_when_the_call_fails(call, ctx, server):
    call("http_request", {"url": url(server, "/missing")})
    with pytest.raises(TransientToolError):
        call("http_request", {"method": "DELETE", "url": url(server, "/unavailable")})
    shown = {part.name: bytes(part.head) for part in ctx.output.parts()}
    assert json.loads(shown["HTTP 404 body"]) == {"detail": "not found"}
    assert "HTTP 503 body" in shown


def test_a_503_is_transient_with_retry_after(call, server):
    with pytest.raises(TransientToolError) as excinfo:
        call("http_request", {"method": "DELETE", "url": url(server, "/unavailable")})

    assert excinfo.value.error_class == "transient"
    assert excinfo.value.retry_after_s == 7
    assert "503" in str(excinfo.value)


def test_a_429_is_transient(call, server):
    with pytest.raises(TransientToolError, match="429"):
        call("http_request", {"url": url(server, "/ratelimited")})


def test_a_refused_connection_is_transient(call, settings):
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.1/32"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        settings.HARNESS_HTTP_ALLOWLIST = [f"http://127.0.0.1:{port}"]

        with pytest.raises(TransientToolError, match="connection failed"):
            call("http_request", {"url": f"http://127.0.0.1:{port}/"})


def test_a_slow_server_times_out_as_transient(call, server):
    started = time.monotonic()

    with pytest.raises(TransientToolError, match="timed out"):
        call("http_request", {"url": url(server, "/slow"), "timeout_s": 0.3})
    assert time.monotonic() - started < 3


def test_redirects_are_returned_not_followed(call, server):
    result = call("http_request", {"url": url(server, "/redirect")})

    assert result["status"] == 302
    assert result["headers"]["location"] == "http://elsewhere.invalid/"
    assert [r["path"] for r in server.requests] == ["/redirect"]


def test_large_bodies_are_truncated(call, server):
    result = call("http_request", {"url": url(server, "/big")})

    assert result["truncated"] is True
    assert result["body"].startswith("z" * 64 * 1024)
    assert result["body"].endswith("[truncated at 64 KiB]")


def test_head_returns_no_body(call, server):
    result = call("http_request", {"method": "HEAD", "url": url(server, "/ok")})

    assert (result["status"], result["body"]) == (200, "")


@pytest.mark.parametrize("allowlist", [[], ["localhost", "*.127.0.0.1"]])
def test_a_host_not_on_the_allowlist_is_refused_before_any_request(
    call, server, settings, allowlist
):
    settings.HARNESS_HTTP_ALLOWLIST = allowlist

    with pytest.raises(PermanentToolError) as excinfo:
        call("http_request", {"url": url(server, "/ok")})

    assert "'127.0.0.1'" in str(excinfo.value)
    assert "HARNESS_HTTP_ALLOWLIST" in str(excinfo.value)
    assert server.requests == []


def test_a_call_stopped_before_it_starts_sends_nothing(call, ctx, server):
    ctx.stop.set()

    with pytest.raises(ToolError) as excinfo:
        call("http_request", {"url": url(server, "/ok")})

    assert excinfo.value.error_class == "canceled"
    assert server.requests == []


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("api.example.com", True),
        ("API.Example.COM", True),
        ("deep.api.example.com", True),
        ("example.com", False),
        ("badexample.com", False),
        ("example.com.evil.net", False),
        ("status.internal", True),
        ("other.internal", False),
    ],
)
def test_allowlist_matches_exact_hosts_and_subdomain_wildcards(host, allowed):
    assert host_allowed(host, ["*.example.com", "status.internal"]) is allowed


@pytest.mark.parametrize(
    "arguments",
    [
        {"url": "ftp://example.com/file"},
        {"url": "example.com/path"},
        {"url": "http:///nohost"},
        {"url": "https://example.com", "method": "TRACE"},
        {"url": "https://example.com", "headers": {"X-Count": 3}},
        {"url": "https://example.com", "timeout_s": 120},
        {"url": "https://example.com", "follow_redirects": True},
    ],
)
def test_bad_arguments_are_rejected(arguments):
    with pytest.raises(ValidationError):
        registry.get("http_request").args_model.model_validate(arguments)


def test_preview_shows_method_url_and_body(ctx):
    spec = registry.get("http_request")
    args = spec.args_model.model_validate(
        {"method": "PUT", "url": "https://api.example.com/items/1", "body": '{"name": "x"}'}
    )

    preview = spec.preview(ctx, args)

    assert preview.splitlines()[0] == "PUT https://api.example.com/items/1"
    assert '{"name": "x"}' in preview
    assert (spec.risk, spec.side_effect, spec.idempotent) == ("external", True, False)
