"""The single sign-on configuration, read from the environment once (by the settings module)
into one immutable `OidcConfig`. Every bad value fails start-up with a message naming its
variable; unset `HARNESS_OIDC_ISSUER` means no single sign-on at all."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

# The roles a group map may grant (harness_base.roles; repeated here because the settings
# module reads this before any app loads).
MAPPABLE_ROLES = ("operators", "creators", "viewers")
DEFAULT_SCOPES = "openid email profile"
DEFAULT_GROUPS_CLAIM = "groups"
# Asymmetric algorithms only: an HMAC-signed ID token would be signed with the client secret.
# How the client authenticates at the token endpoint (RFC 6749 2.3.1; OIDC Core 9).
TOKEN_AUTH_METHODS = ("client_secret_post", "client_secret_basic")
SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    # Kept out of the repr: Django's debug pages and logs print settings.
    client_secret: str = field(repr=False)
    scopes: str = DEFAULT_SCOPES
    groups_claim: str = DEFAULT_GROUPS_CLAIM
    # IdP group -> role.
    group_map: Mapping[str, str] = field(default_factory=dict)
    provider_name: str = ""
    sign_algo: str = "RS256"
    token_auth: str = "client_secret_post"

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    @property
    def display_name(self) -> str:
        return self.provider_name or urlsplit(self.issuer).hostname or self.issuer


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why `url` may not carry tokens, or None: https, or http to this machine only."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if not parts.hostname or parts.scheme not in ("https", "http"):
        return "is not an http(s) URL with a host"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return "must use https (plain http is allowed for loopback hosts only)"
    if parts.query or parts.fragment:
        return "must have no query or fragment"
    return None


def group_map_parse(raw: str, *, name: str = "HARNESS_OIDC_GROUP_MAP") -> dict[str, str]:
    """`idp-ops=operators,idp-dev=creators` -> {"idp-ops": "operators", ...}."""
    mapping: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        group, sep, role = (s.strip() for s in part.rpartition("="))
        if not sep or not group:
            raise ImproperlyConfigured(f"{name}: {part.strip()!r} is not IDP_GROUP=ROLE")
        if role not in MAPPABLE_ROLES:
            raise ImproperlyConfigured(
                f"{name}: {part.strip()!r} maps to {role!r}; roles are {', '.join(MAPPABLE_ROLES)}"
            )
        if mapping.get(group, role) != role:
            raise ImproperlyConfigured(f"{name}: {group!r} is mapped twice")
        mapping[group] = role
    return mapping


def oidc_config_from_env(environ: Mapping[str, str]) -> OidcConfig | None:
    """The configuration the `HARNESS_OIDC_*` variables describe, None without an issuer."""
    issuer = environ.get("HARNESS_OIDC_ISSUER", "").strip()
    if not issuer:
        return None
    problem = url_problem(issuer)
    if problem:
        raise ImproperlyConfigured(f"HARNESS_OIDC_ISSUER={issuer!r} {problem}")
    values = {}
    for key in ("CLIENT_ID", "CLIENT_SECRET"):
        values[key] = environ.get(f"HARNESS_OIDC_{key}", "").strip()
        if not values[key]:
            raise ImproperlyConfigured(
                f"HARNESS_OIDC_{key} is not set; single sign-on (HARNESS_OIDC_ISSUER) needs it"
            )
    scopes = " ".join(environ.get("HARNESS_OIDC_SCOPES", DEFAULT_SCOPES).replace(",", " ").split())
    if "openid" not in scopes.split():
        raise ImproperlyConfigured(f"HARNESS_OIDC_SCOPES={scopes!r} must include openid")
    algo = environ.get("HARNESS_OIDC_SIGN_ALGO", "RS256").strip()
    if algo not in SIGN_ALGORITHMS:
        raise ImproperlyConfigured(
            f"HARNESS_OIDC_SIGN_ALGO={algo!r}: expected one of {', '.join(SIGN_ALGORITHMS)}"
        )
    token_auth = environ.get("HARNESS_OIDC_TOKEN_AUTH", "").strip() or TOKEN_AUTH_METHODS[0]
    if token_auth not in TOKEN_AUTH_METHODS:
        raise ImproperlyConfigured(
            f"HARNESS_OIDC_TOKEN_AUTH={token_auth!r}: expected {' or '.join(TOKEN_AUTH_METHODS)}"
        )
    return OidcConfig(
        issuer=issuer,
        client_id=values["CLIENT_ID"],
        client_secret=values["CLIENT_SECRET"],
        scopes=scopes,
        groups_claim=environ.get("HARNESS_OIDC_GROUPS_CLAIM", "").strip() or DEFAULT_GROUPS_CLAIM,
        group_map=group_map_parse(environ.get("HARNESS_OIDC_GROUP_MAP", "")),
        provider_name=environ.get("HARNESS_OIDC_PROVIDER_NAME", "").strip(),
        sign_algo=algo,
        token_auth=token_auth,
    )


def local_login_checked(enabled: bool, oidc: OidcConfig | None) -> bool:
    """HARNESS_LOCAL_LOGIN checked: off needs single sign-on (only break-glass superusers would
    be left to sign in otherwise)."""
    if not enabled and oidc is None:
        raise ImproperlyConfigured(
            "HARNESS_LOCAL_LOGIN=off needs single sign-on: set HARNESS_OIDC_ISSUER (and its client)"
        )
    return enabled
