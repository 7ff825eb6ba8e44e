"""The single sign-on rig: a real OpenID provider (the certified `oidc-provider` package under
node, tests/sso/provider.mjs) with this app registered as its client, Django configured to use
it, a sign-in driven in Chromium, and a stand-in token endpoint that passes the provider's
answer on with the ID token changed in exactly one way (re-signed with the provider's own key
unless the change is the signature). Import the fixtures where they are used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from accounts.config import OidcConfig
from accounts.oidc import oidc_discovery
from tests.conftest import ROOT, free_port, http_serving, wait_for

CLIENT_ID = "harness-test-client"
CLIENT_SECRET = "harness-test-secret-0123456789abcdef"
# A client of the provider that authenticates with HTTP Basic, its secret full of the
# characters Basic needs form-encoded.
BASIC_CLIENT_ID = "harness-basic:client"
BASIC_CLIENT_SECRET = "s3cret+/:=%~ with space"
GROUP_MAP = {"idp-ops": "operators", "idp-dev": "creators", "idp-read": "viewers"}
PROVIDER_NAME = "Test IdP"
NPM_PREFIX = ROOT / ".data" / "npm"
KID = "test-signing-key"


def rsa_jwk(kid: str = KID) -> dict[str, Any]:
    """A new RSA private key as a JWK."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


@dataclass
class Idp:
    issuer: str
    state_file: Path
    signing_jwk: dict[str, Any]
    log: Path
    state: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.state_file)

    def account(self, name: str, *, groups: list[str], email: str | None = None) -> None:
        """Create or change an account in the provider (read at its next sign-in)."""
        entry: dict[str, Any] = {"groups": groups}
        if email is not None:
            entry["email"] = email
        self.state.setdefault("accounts", {})[name] = entry
        self.save()

    def discovery(self) -> dict[str, Any]:
        return requests.get(f"{self.issuer}/.well-known/openid-configuration", timeout=5).json()


@pytest.fixture(scope="session")
def idp_server(live_server, tmp_path_factory) -> Iterator[Idp]:
    """The provider, once per test session: its client's redirect URI is the live server's."""
    node = shutil.which("node")
    if node is None or not (NPM_PREFIX / "node_modules" / "oidc-provider").is_dir():
        pytest.fail("node and oidc-provider are missing: run the tests with ./harness test")
    tmp = tmp_path_factory.mktemp("idp")
    # Node resolves `import "oidc-provider"` from the script's own folder up: run a copy from
    # the folder npm installed it in.
    script = NPM_PREFIX / f"sso-provider-{os.getpid()}.mjs"
    script.write_text((Path(__file__).parent / "provider.mjs").read_text())
    port = free_port()
    idp = Idp(
        issuer=f"http://127.0.0.1:{port}",
        state_file=tmp / "state.json",
        signing_jwk=rsa_jwk(),
        log=tmp / "provider.log",
    )
    idp.save()
    (tmp / "jwks.json").write_text(json.dumps({"keys": [idp.signing_jwk]}))
    env = dict(
        os.environ,
        PORT=str(port),
        STATE_FILE=str(idp.state_file),
        JWKS_FILE=str(tmp / "jwks.json"),
        CLIENT_ID=CLIENT_ID,
        CLIENT_SECRET=CLIENT_SECRET,
        BASIC_CLIENT_ID=BASIC_CLIENT_ID,
        BASIC_CLIENT_SECRET=BASIC_CLIENT_SECRET,
        REDIRECT_URI=f"{live_server.url}/accounts/oidc/callback/",
    )
    with open(idp.log, "ab") as log:
        process = subprocess.Popen(
            [node, str(script)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=NPM_PREFIX
        )

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the provider exited:\n{idp.log.read_text()}")
        try:
            return idp.discovery().get("issuer") == idp.issuer
        except requests.RequestException:
            return False

    try:
        wait_for(answers, 30, interval=0.1, message="the OpenID provider to answer")
        yield idp
    finally:
        process.terminate()
        process.wait(timeout=10)
        script.unlink(missing_ok=True)


@pytest.fixture
def idp(idp_server: Idp) -> Idp:
    """The provider with no accounts configured and its own token endpoint."""
    idp_server.state = {"accounts": {}}
    idp_server.save()
    return idp_server


def sso_config(idp: Idp) -> OidcConfig:
    return OidcConfig(
        issuer=idp.issuer,
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        scopes="openid email profile groups",
        group_map=GROUP_MAP,
        provider_name=PROVIDER_NAME,
    )


@pytest.fixture
def sso(settings, idp: Idp, roles) -> OidcConfig:
    """Django signing in through the provider (password login still on)."""
    config = sso_config(idp)
    settings.HARNESS_OIDC = config
    settings.HARNESS_LOCAL_LOGIN = True
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "accounts.backends.OidcBackend",
    ]
    oidc_discovery(config, refresh=True)
    return config


@pytest.fixture
def local_login_off(settings, sso: OidcConfig) -> OidcConfig:
    """HARNESS_LOCAL_LOGIN=off: the backends the settings module then configures."""
    settings.HARNESS_LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = [
        "accounts.backends.LocalPasswordBackend",
        "accounts.backends.OidcBackend",
    ]
    return sso


@dataclass
class SsoVisit:
    """A browser context's page, and the callback URLs the provider sent it to."""

    page: Any
    callbacks: list[str]


@pytest.fixture
def sso_login(browser, live_server, idp: Idp) -> Callable[..., SsoVisit]:
    """sso_login("alice") -> a fresh browser (no cookies) that pressed "Sign in with Test IdP"
    on the login page and signed in at the provider as alice; the page is back on this app
    (wherever the callback sent it)."""

    def login(name: str) -> SsoVisit:
        page = browser.new_context().new_page()
        page.set_default_timeout(20_000)
        callbacks: list[str] = []
        page.on(
            "request",
            lambda r: callbacks.append(r.url) if "/accounts/oidc/callback/" in r.url else None,
        )
        page.goto(f"{live_server.url}/accounts/login/")
        page.click(f"text=Sign in with {PROVIDER_NAME}")
        page.wait_for_url(f"{idp.issuer}/**")
        page.fill("input[name=login]", name)
        page.fill("input[name=password]", "any password: the provider's development form")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: url.startswith(live_server.url))
        page.wait_for_load_state("load")
        return SsoVisit(page=page, callbacks=callbacks)

    return login


# --- the stand-in token endpoint --------------------------------------------------------------


def tampered(id_token: str, how: str, signing_jwk: dict[str, Any]) -> str:
    """`id_token` changed in one way: `intact` (re-signed, nothing changed), `forged` (signed
    by another key under the provider's key id), `expired`, `wrong_audience`, `wrong_issuer`,
    `wrong_nonce`, `unsigned` (alg none)."""
    claims = jwt.decode(id_token, options={"verify_signature": False})
    key = RSAAlgorithm.from_jwk(json.dumps(signing_jwk))
    now = int(time.time())
    if how == "forged":
        key = RSAAlgorithm.from_jwk(json.dumps(rsa_jwk()))
    elif how == "expired":
        claims.update(iat=now - 7200, exp=now - 3600, auth_time=now - 7200)
    elif how == "wrong_audience":
        claims["aud"] = "another-client-of-this-provider"
    elif how == "wrong_issuer":
        claims["iss"] = "https://idp.attacker.example"
    elif how == "wrong_nonce":
        claims["nonce"] = "a-nonce-from-another-sign-in"
    elif how == "unsigned":
        return jwt.encode(claims, None, algorithm="none")
    elif how != "intact":
        raise ValueError(how)
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": signing_jwk["kid"]})


@pytest.fixture
def token_standin(idp: Idp, sso: OidcConfig) -> Iterator[Callable[[str], None]]:
    """token_standin(how): from now on the provider's discovery names a stand-in token
    endpoint that forwards the code exchange to the real one and alters the ID token `how`."""
    upstream = idp.discovery()["token_endpoint"]
    mode = {"how": "intact"}

    class StandIn(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            answer = requests.post(
                upstream,
                data=body,
                headers={"Content-Type": self.headers.get("Content-Type", "")},
                timeout=10,
            )
            data = answer.json()
            if answer.status_code == 200:
                data["id_token"] = tampered(data["id_token"], mode["how"], idp.signing_jwk)
            out = json.dumps(data).encode()
            self.send_response(answer.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(StandIn) as httpd:
        idp.state["token_endpoint"] = f"http://127.0.0.1:{httpd.server_address[1]}/token"
        idp.save()
        oidc_discovery(sso, refresh=True)

        def use(how: str) -> None:
            mode["how"] = how

        try:
            yield use
        finally:
            idp.state.pop("token_endpoint", None)
            idp.save()
            oidc_discovery(sso, refresh=True)
