"""Deploy safety: the development SECRET_KEY never serves beyond loopback, `check --deploy`
reports it, the TLS settings follow the environment, pages carry a Content-Security-Policy, and the
one-time admin password lands in a file only its owner can read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness_base.env import DEFAULT_SECRET_KEY
from harness_site.cli.up_setup import admin_password_save
from tests.conftest import ROOT, manage_py

ENV_DROP = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
    env.update(HARNESS_DATA_DIR=str(tmp_path), PYTHONPATH=str(ROOT), **extra)
    return env


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
def test_up_refuses_the_default_secret_key_beyond_loopback(tmp_path, host):
    result = subprocess.run(
        [sys.executable, "-m", "harness_site.cli", "up", "--host", host, "--port", "8"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stdout + result.stderr
    assert not (tmp_path / "harness.sqlite3").exists(), "nothing may start"


def _run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def check_deploy() -> tuple[int, str]:
    code, out, err = manage_py("check", "--deploy", "--fail-level", "ERROR")
    return code, out + err


def test_check_deploy_reports_the_default_secret_key(settings):
    # Without SECRET_KEY in the environment the settings hold the default (what `harness up`
    # refuses beyond loopback: test_up_refuses_the_default_secret_key_beyond_loopback).
    settings.SECRET_KEY = DEFAULT_SECRET_KEY
    code, output = check_deploy()
    assert code != 0 and "harness.E001" in output
    settings.SECRET_KEY = "a-long-random-production-secret-" + "x7Qp" * 10
    code, output = check_deploy()
    assert "harness.E001" not in output


def test_djangos_system_checks_pass():
    # Models, URLs, admin, templates: the workers and sweepers the suite starts skip the checks
    # (tests/conftest.py manage_spawn), so this is where they run.
    code, out, err = manage_py("check", "--fail-level", "ERROR")
    assert code == 0, out + err


def test_an_operator_turns_on_secure_cookies_hsts_and_https_redirects(tmp_path):
    """The settings a TLS deployment needs follow its environment (Django's defaults would be
    there whatever the settings file said), and the Content-Security-Policy is enforced."""
    script = (
        "import json; from harness_site import settings as s; print(json.dumps(["
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, bool(getattr(s, 'CONTENT_SECURITY_POLICY', None))]))"
    )
    deployed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=_env(
            tmp_path,
            HARNESS_SECURE_COOKIES="1",
            SECURE_SSL_REDIRECT="1",
            SECURE_HSTS_SECONDS="31536000",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(deployed.stdout.splitlines()[-1]) == [True, True, True, 31536000, True]


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_scripts(client, operator):
    client.force_login(operator)
    response = client.get("/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "frame-ancestors 'none'" in policy


def test_the_generated_admin_password_is_in_a_file_only_its_owner_reads(tmp_path):
    stale = tmp_path / "admin-password.txt"
    stale.write_text("old")
    stale.chmod(0o644)
    path = admin_password_save(data_dir=tmp_path, password="s3cret-once")
    assert path.read_text().splitlines() == ["admin", "s3cret-once"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _production(tmp_path: Path, command: str, **extra: str) -> subprocess.CompletedProcess:
    return _run(tmp_path, "-m", "harness_site.cli", command, **extra)


@pytest.mark.parametrize("command", ["web", "worker", "sweep"])
def test_production_entry_points_refuse_to_start_without_their_configuration(tmp_path, command):
    result = _production(tmp_path, command)
    assert result.returncode == 2
    missing = result.stderr.rsplit("missing:", 1)[-1]
    assert all(name in missing for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY"))
    assert not (tmp_path / "harness.sqlite3").exists(), "nothing may start"


def test_production_refuses_the_development_secret_key_and_names_only_what_is_missing(tmp_path):
    from harness_base.env import DEFAULT_SECRET_KEY

    result = _production(
        tmp_path,
        "web",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
        SECRET_KEY=DEFAULT_SECRET_KEY,
    )
    assert result.returncode == 2
    missing = result.stderr.rsplit("missing:", 1)[-1]
    assert "REDIS_URL" in missing and "SECRET_KEY" in missing and "DATABASE_URL" not in missing
