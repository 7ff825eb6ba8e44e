"""Single sign-on is configured from the environment; every mistake stops start-up with a
message naming the variable, and without HARNESS_OIDC_ISSUER nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from accounts.config import MAPPABLE_ROLES, oidc_config_from_env
from harness_base.roles import ROLE_PERMISSIONS
from tests.conftest import ROOT, free_port, manage_py
from tests.sso.fixtures import CLIENT_ID, CLIENT_SECRET

BASE = {
    "HARNESS_OIDC_ISSUER": "https://idp.example.com/realms/main",
    "HARNESS_OIDC_CLIENT_ID": "harness",
    "HARNESS_OIDC_CLIENT_SECRET": "s3cret",
}


def test_a_full_configuration_is_read():
    config = oidc_config_from_env(
        {**BASE, "HARNESS_OIDC_GROUP_MAP": "idp-ops=operators, idp-dev=creators,all=viewers"}
    )
    assert config.group_map == {"idp-ops": "operators", "idp-dev": "creators", "all": "viewers"}
    assert config.scopes == "openid email profile"
    assert config.groups_claim == "groups"
    assert config.display_name == "idp.example.com"
    assert oidc_config_from_env({}) is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"HARNESS_OIDC_ISSUER": "http://idp.example.com"}, "HARNESS_OIDC_ISSUER.*https"),
        ({"HARNESS_OIDC_CLIENT_SECRET": ""}, "HARNESS_OIDC_CLIENT_SECRET"),
        ({"HARNESS_OIDC_CLIENT_ID": " "}, "HARNESS_OIDC_CLIENT_ID"),
        ({"HARNESS_OIDC_GROUP_MAP": "idp-ops=admins"}, "HARNESS_OIDC_GROUP_MAP.*admins"),
        ({"HARNESS_OIDC_GROUP_MAP": "idp-ops"}, "HARNESS_OIDC_GROUP_MAP.*IDP_GROUP=ROLE"),
        ({"HARNESS_OIDC_GROUP_MAP": "a=viewers,a=operators"}, "HARNESS_OIDC_GROUP_MAP.*twice"),
        ({"HARNESS_OIDC_SCOPES": "email profile"}, "HARNESS_OIDC_SCOPES.*openid"),
        ({"HARNESS_OIDC_SIGN_ALGO": "HS256"}, "HARNESS_OIDC_SIGN_ALGO"),
        ({"HARNESS_OIDC_TOKEN_AUTH": "private_key_jwt"}, "HARNESS_OIDC_TOKEN_AUTH"),
    ],
)
def test_a_bad_value_names_its_variable(extra, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        oidc_config_from_env({**BASE, **extra})


def test_a_loopback_issuer_may_use_plain_http():
    assert oidc_config_from_env({**BASE, "HARNESS_OIDC_ISSUER": "http://127.0.0.1:9000"})


def test_the_group_map_grants_exactly_the_roles():
    assert set(MAPPABLE_ROLES) == set(ROLE_PERMISSIONS)


def _run(argv: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_OIDC", "DATABASE"))}
    env.update(HARNESS_DATA_DIR=str(tmp_path), PYTHONPATH=str(ROOT), **extra)
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_local_login_off_without_single_sign_on_stops_start_up(tmp_path):
    result = _run(
        ["-m", "harness_site.cli", "up", "--port", str(free_port())],
        tmp_path,
        HARNESS_LOCAL_LOGIN="off",
    )

    assert result.returncode == 2
    assert "error: HARNESS_LOCAL_LOGIN=off needs single sign-on" in result.stderr
    assert not (tmp_path / "harness.sqlite3").exists(), "nothing may start"


def test_an_issuer_that_is_not_the_providers_stops_start_up(idp, tmp_path, settings):
    # The provider calls itself http://127.0.0.1:PORT; "localhost" reaches it but is not it.
    wrong = idp.issuer.replace("127.0.0.1", "localhost")
    sso = {
        "HARNESS_OIDC_CLIENT_ID": CLIENT_ID,
        "HARNESS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "SECRET_KEY": "a-long-random-production-secret-" + "x7Qp" * 10,
    }

    up = _run(
        ["-m", "harness_site.cli", "up", "--port", str(free_port())],
        tmp_path,
        HARNESS_OIDC_ISSUER=wrong,
        **sso,
    )
    assert up.returncode == 2
    assert f"HARNESS_OIDC_ISSUER={wrong!r}" in up.stderr and "not the configured one" in up.stderr
    assert not (tmp_path / "harness.sqlite3").exists(), "nothing may start"

    # `manage.py check --deploy` with the same environment, read as the settings read it.
    settings.SECRET_KEY = sso["SECRET_KEY"]
    check = ("check", "--deploy", "--fail-level", "ERROR")
    settings.HARNESS_OIDC = oidc_config_from_env({**sso, "HARNESS_OIDC_ISSUER": wrong})
    code, out, err = manage_py(*check)
    assert code != 0 and "harness.E010" in out + err
    settings.HARNESS_OIDC = oidc_config_from_env({**sso, "HARNESS_OIDC_ISSUER": idp.issuer})
    code, out, err = manage_py(*check)
    assert "harness.E010" not in out + err


@pytest.mark.django_db
def test_without_an_issuer_there_is_no_single_sign_on(client):
    assert b"Sign in with" not in client.get("/accounts/login/").content
    assert client.get("/accounts/oidc/login/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404


@pytest.mark.django_db
def test_a_provider_that_does_not_answer_is_a_clear_page_not_a_server_error(client, settings):
    settings.HARNESS_OIDC = oidc_config_from_env(
        {**BASE, "HARNESS_OIDC_ISSUER": f"http://127.0.0.1:{free_port()}"}
    )

    response = client.get("/accounts/oidc/login/")

    assert response.status_code == 502
    assert b"cannot be reached" in response.content
