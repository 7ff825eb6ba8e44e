"""The provider's discovery document (`/.well-known/openid-configuration` of
HARNESS_OIDC_ISSUER), fetched once per process and checked before anything uses it: its
`issuer` is exactly the configured one and every endpoint is https (or loopback http)."""

from __future__ import annotations

import threading
import time
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accounts.config import OidcConfig, url_problem

DISCOVERY_TTL_S = 3600.0
TIMEOUT_S = 10.0
REQUIRED_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri")

_cache: dict[str, tuple[float, dict[str, Any]]] = {}
_lock = threading.Lock()


def oidc_config() -> OidcConfig | None:
    return getattr(settings, "HARNESS_OIDC", None)


def _fetch(config: OidcConfig) -> dict[str, Any]:
    where = f"HARNESS_OIDC_ISSUER={config.issuer!r}: {config.discovery_url}"
    try:
        response = requests.get(config.discovery_url, timeout=TIMEOUT_S)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ImproperlyConfigured(f"{where} did not answer with a JSON document ({exc})") from None
    if not isinstance(document, dict):
        raise ImproperlyConfigured(f"{where} is not a JSON object")
    if document.get("issuer") != config.issuer:
        raise ImproperlyConfigured(
            f"{where} names the issuer {document.get('issuer')!r}, not the configured one"
        )
    for key in REQUIRED_ENDPOINTS:
        if not document.get(key):
            raise ImproperlyConfigured(f"{where} has no {key}")
    for key in (*REQUIRED_ENDPOINTS, "userinfo_endpoint"):
        problem = document.get(key) and url_problem(str(document[key]).split("?", 1)[0])
        if problem:
            raise ImproperlyConfigured(f"{where}: its {key} {document[key]!r} {problem}")
    methods = document.get("code_challenge_methods_supported")
    if methods is not None and "S256" not in methods:
        raise ImproperlyConfigured(f"{where}: the provider does not offer PKCE with S256")
    # Omitted means client_secret_basic only (OpenID Connect Discovery 1.0, section 3).
    auth_methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if config.token_auth not in auth_methods:
        raise ImproperlyConfigured(
            f"{where}: the token endpoint does not take {config.token_auth} "
            f"(HARNESS_OIDC_TOKEN_AUTH; it takes {', '.join(map(str, auth_methods))})"
        )
    algorithms = document.get("id_token_signing_alg_values_supported") or []
    if config.sign_algo not in algorithms:
        raise ImproperlyConfigured(
            f"{where}: the provider does not sign ID tokens with {config.sign_algo} "
            f"(HARNESS_OIDC_SIGN_ALGO; it offers {', '.join(map(str, algorithms)) or 'none'})"
        )
    return document


def oidc_discovery(config: OidcConfig | None = None, *, refresh: bool = False) -> dict[str, Any]:
    """The checked discovery document; raises ImproperlyConfigured naming HARNESS_OIDC_ISSUER."""
    config = config or oidc_config()
    if config is None:
        raise ImproperlyConfigured("single sign-on is not configured (HARNESS_OIDC_ISSUER)")
    with _lock:
        cached = _cache.get(config.discovery_url)
        if cached and not refresh and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
            return cached[1]
    document = _fetch(config)
    with _lock:
        _cache[config.discovery_url] = (time.monotonic(), document)
    return document
