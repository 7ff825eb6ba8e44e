"""The two ways in: a password (Django's, limited to break-glass superusers when
HARNESS_LOCAL_LOGIN=off) and the OpenID Connect authorization code flow.

mozilla-django-oidc runs the flow (state, nonce and PKCE kept in the session, the code
exchanged at the token endpoint); this backend adds what it leaves out: the endpoints come from
the provider's discovery document, and the ID token's signature, issuer, audience, expiry,
issue time and nonce are all verified (the library skips the audience and the issuer). Anything
wrong refuses the login (SuspiciousOperation), it never signs anyone in."""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import quote_plus

import jwt
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from requests.auth import HTTPBasicAuth

from accounts.config import OidcConfig
from accounts.flows.oidc_login import oidc_login_complete
from accounts.oidc import TIMEOUT_S, oidc_config, oidc_discovery

logger = logging.getLogger(__name__)

# Clock skew allowed between the provider and this machine (exp, iat, nbf).
LEEWAY_S = 60
# What mozilla-django-oidc reads from settings, fixed here: the flow always uses a nonce and
# PKCE (S256), never accepts an unsigned token and keeps no token in the session.
_FIXED_SETTINGS: dict[str, Any] = {
    "OIDC_USE_NONCE": True,
    "OIDC_USE_PKCE": True,
    "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
    "OIDC_ALLOW_UNSECURED_JWT": False,
    "OIDC_VERIFY_SSL": True,
    "OIDC_VERIFY_KID": True,
    "OIDC_TIMEOUT": TIMEOUT_S,
    "OIDC_STORE_ACCESS_TOKEN": False,
    "OIDC_STORE_ID_TOKEN": False,
    "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
}


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, answered from HARNESS_OIDC and the fixed choices."""
    if attr in _FIXED_SETTINGS:
        return _FIXED_SETTINGS[attr]
    if attr == "OIDC_RP_SCOPES":
        return _config().scopes
    return import_from_settings(attr, *default)


def _config() -> OidcConfig:
    config = oidc_config()
    if config is None:
        raise SuspiciousOperation("single sign-on is not configured")
    return config


class LocalPasswordBackend(ModelBackend):
    """Django's password login while HARNESS_LOCAL_LOGIN=off: only a superuser (the break-glass
    account, created with `manage.py createsuperuser`) gets in; everyone else signs in through
    the provider. It guards every password form (the login page and the admin's alike)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and not user.is_superuser:
            logger.warning("password login of %s refused: HARNESS_LOCAL_LOGIN=off", username)
            return None
        if user is not None:
            logger.warning("break-glass password login of superuser %s", username)
        return user


class OidcBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds a backend for every request of a signed-in user (auth.get_user):
        # nothing here reads the network; the endpoints are looked up when a login needs them.
        self.UserModel = get_user_model()

    OIDC_RP_CLIENT_ID = property(lambda self: _config().client_id)
    OIDC_RP_CLIENT_SECRET = property(lambda self: _config().client_secret)
    OIDC_RP_SIGN_ALGO = property(lambda self: _config().sign_algo)
    OIDC_RP_IDP_SIGN_KEY = None
    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: oidc_discovery()["token_endpoint"])
    OIDC_OP_USER_ENDPOINT = property(lambda self: oidc_discovery().get("userinfo_endpoint"))
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: oidc_discovery()["jwks_uri"])

    def get_user(self, user_id):
        # A session's user, while active (mozilla-django-oidc's own does not ask): a person
        # deactivated on /people/ is signed out at their next request.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def authenticate(self, request, **kwargs):
        # Only the callback view passes a nonce and a code verifier: a password form posted
        # to a URL with ?code=&state= must not start a code exchange.
        if oidc_config() is None or "nonce" not in kwargs or "code_verifier" not in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The code exchanged at the token endpoint, the client authenticated as
        HARNESS_OIDC_TOKEN_AUTH says: in the form, or by HTTP Basic with the id and secret
        form-encoded first (RFC 6749 2.3.1; mozilla-django-oidc sends them raw, which a
        secret holding `+`, `:` or `%` does not survive)."""
        auth = None
        if _config().token_auth == "client_secret_basic":
            auth = HTTPBasicAuth(
                quote_plus(payload.pop("client_id")), quote_plus(payload.pop("client_secret"))
            )
        response = requests.post(
            self.OIDC_OP_TOKEN_ENDPOINT, data=payload, auth=auth, timeout=TIMEOUT_S
        )
        self.raise_token_response_error(response)
        return response.json()

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The ID token's claims, once its signature (by a key of the provider's JWKS, with
        the configured algorithm), issuer, audience (this client), expiry, issue time and
        nonce (this sign-in's) all check out."""
        config = _config()
        if not isinstance(token, str):
            raise SuspiciousOperation("the provider sent no ID token")
        try:
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            raise SuspiciousOperation("the ID token is not a signed JWT") from None
        if alg != config.sign_algo:
            raise SuspiciousOperation(
                f"the ID token is signed with {alg!r}, not {config.sign_algo}"
            )
        key = self.retrieve_matching_jwk(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[config.sign_algo],
                audience=config.client_id,
                issuer=config.issuer,
                leeway=LEEWAY_S,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise SuspiciousOperation("the ID token has expired") from None
        except jwt.InvalidAudienceError:
            raise SuspiciousOperation("the ID token was issued to another client (aud)") from None
        except jwt.InvalidIssuerError:
            raise SuspiciousOperation("the ID token comes from another issuer (iss)") from None
        except jwt.ImmatureSignatureError:
            raise SuspiciousOperation("the ID token is not valid yet (iat/nbf)") from None
        except jwt.InvalidSignatureError:
            raise SuspiciousOperation("the ID token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the ID token is not valid: {exc}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != config.client_id:
            raise SuspiciousOperation("the ID token names several audiences but not us as azp")
        nonce, claimed = kwargs.get("nonce"), claims.get("nonce")
        if not (nonce and isinstance(claimed, str) and hmac.compare_digest(claimed, nonce)):
            raise SuspiciousOperation("the ID token's nonce is not this sign-in's")
        if not isinstance(claims["sub"], str) or not 0 < len(claims["sub"]) <= 255:
            raise SuspiciousOperation("the ID token's subject (sub) is not a short string")
        return claims

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        try:
            return super().retrieve_matching_jwk(token)
        except (KeyError, TypeError, ValueError, jwt.PyJWTError) as exc:
            raise SuspiciousOperation(
                f"no key of the provider's JWKS fits the ID token ({exc!r})"
            ) from None

    def get_or_create_user(self, access_token, id_token, payload):
        """The user behind the verified ID token, matched by (issuer, sub) only; the userinfo
        answer (where providers often put the groups) counts only if it is about that `sub`."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = self.get_userinfo(access_token, id_token, payload)
            if not isinstance(info, dict) or info.get("sub") != payload["sub"]:
                raise SuspiciousOperation("the userinfo answer is about another subject")
            claims = {**info, **payload}
        return oidc_login_complete(config=_config(), claims=claims)
