"""What `harness up` settles before it starts anything: the guard on the development SECRET_KEY,
the base URL of links, the admin user and its one-time password file, and what it reports about
the command sandbox and single sign-on."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from harness_base.env import DEFAULT_SECRET_KEY
from harness_site.cli.common import LOCAL_HOSTS, CliError, say


def admin_ensure(*, username: str = "admin") -> str | None:
    """The demo superuser (also an operator). Returns the password when it was just set:
    a new random one is printed once; HARNESS_ADMIN_PASSWORD, when set, always wins."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user_model = get_user_model()
    wanted = os.environ.get("HARNESS_ADMIN_PASSWORD") or None
    user = user_model.objects.filter(username=username).first()
    password: str | None = None
    if user is None:
        password = wanted or secrets.token_urlsafe(12)
        user = user_model.objects.create_superuser(username=username, email="", password=password)
    elif wanted is not None and not user.check_password(wanted):
        user.set_password(wanted)
        user.save(update_fields=["password"])
        password = wanted
    user.groups.add(Group.objects.get(name="operators"))
    return password


def secret_key_guard(*, host: str) -> None:
    """Serving beyond loopback with the development SECRET_KEY would let anyone forge
    sessions: refuse, saying how to fix it."""
    if (
        host in LOCAL_HOSTS
        or os.environ.get("SECRET_KEY", DEFAULT_SECRET_KEY) != DEFAULT_SECRET_KEY
    ):
        return
    raise CliError(
        f"--host {host} serves beyond this machine, but SECRET_KEY is the development default "
        "(anyone could forge sessions): set SECRET_KEY to a long random value, e.g. "
        "SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )


def admin_password_save(*, data_dir: Path, password: str) -> Path:
    """The one-time admin password, also in a file only this user can read (the terminal
    scrolls; the file stays until deleted)."""
    path = data_dir / "admin-password.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"admin\n{password}\n")
    os.chmod(path, 0o600)  # an older file may have been created with other bits
    return path


def sandbox_report() -> None:
    """Say how commands will run: sandboxed, refused (what is missing), or UNSANDBOXED."""
    from agent.tools.sandbox import SandboxUnavailable, bwrap_binary, sandbox_check, sandbox_mode

    if sandbox_mode() == "off":
        say(
            "WARNING: HARNESS_SANDBOX=off: run_command runs UNSANDBOXED, as this user, with "
            "this machine's files, processes and network. Never use it with untrusted models."
        )
        return
    try:
        sandbox_check()
    except SandboxUnavailable as exc:
        say(f"warning: run_command will refuse to run: {exc}")
        return
    say(f"command sandbox: bubblewrap ({bwrap_binary()})")


def sso_report() -> None:
    """With single sign-on configured, the provider's discovery document must check out now
    (accounts.oidc), not at the first login."""
    from django.conf import settings

    from accounts.oidc import oidc_discovery

    if settings.HARNESS_OIDC is None:
        return
    try:
        oidc_discovery(settings.HARNESS_OIDC)
    except ImproperlyConfigured as exc:
        raise CliError(f"single sign-on: {exc}") from None
    local = "on" if settings.HARNESS_LOCAL_LOGIN else "off (break-glass superusers only)"
    say(f"single sign-on: {settings.HARNESS_OIDC.issuer}; password login {local}")


def base_url_default(*, host: str, port: int) -> str:
    """Where people reach `harness up --host/--port` (links in notifications and the API): a
    wildcard address becomes this machine's name, an IPv6 address is bracketed."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"
