"""`http_request`: an HTTP call to an origin on the operator's allowlist (HARNESS_HTTP_ALLOWLIST).

The allowlist names origins: `https://api.example.com` (default port), `http://127.0.0.1:8080`,
`https://*.example.com:8443`; a bare host means https on 443 and http on 80 only. The host is
resolved once, every address it resolves to is checked against loopback, private, link-local
and other special ranges (refused unless HARNESS_HTTP_ALLOW_NETWORKS lists them), and the
connection goes to the address that passed the check, never to a second lookup (no DNS
rebinding); the Host header and TLS server name stay the URL's host. A URL with userinfo
(`user@host`) or a backslash, which URL parsers (and people) read differently, and a `Host`
or framing header (`Content-Length`, `Transfer-Encoding`, `Connection`, ...) in `headers` are
invalid arguments. Redirects are never followed.

Responses the model can act on (2xx, 3xx, 4xx other than 429) are results; rate limiting, 5xx
and connection failures are transient errors so the harness retries them with backoff. Every
request carries `Idempotency-Key: <task id>:<call id>`, so a retried call is recognisable
server-side.

The modules, from the bottom: `args` (HttpRequestArgs), `origins` (the allowlist: Origin,
origin_parse, url_allowed, host_allowed), `addresses` (address_check, PinnedTransport),
`request` (the tool: http_request).
"""

from __future__ import annotations

from agent.tools.http.origins import host_allowed, url_allowed
from agent.tools.http.request import http_request

__all__ = ["host_allowed", "http_request", "url_allowed"]
