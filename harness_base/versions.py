"""The harness's own version, as every checkpoint records it (agent.versions) and every worker
announces it (/ops/): the package version (PEP 440) of pyproject.toml and the git commit when
known. `HARNESS_VERSION` (setting or environment) overrides the version, `HARNESS_COMMIT`
the commit: a deploy that ships no .git sets the commit, and a test plays an older worker."""

from __future__ import annotations

import functools
import os
import subprocess
import tomllib
from pathlib import Path

from django.conf import settings
from packaging.version import InvalidVersion, Version

_ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _package_version() -> str:
    try:
        with open(_ROOT / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0"


@functools.cache
def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else ""


def harness_version() -> dict[str, str]:
    """{"version": the package version, "commit": the git sha or ""}."""
    version = getattr(settings, "HARNESS_VERSION", "") or os.environ.get("HARNESS_VERSION", "")
    commit = getattr(settings, "HARNESS_COMMIT", "") or os.environ.get("HARNESS_COMMIT", "")
    return {"version": version or _package_version(), "commit": commit or _git_commit()}


def version_newer(version: str, than: str) -> bool:
    """Whether harness `version` is a later release than `than` (PEP 440); a version either
    side cannot parse is never newer (an unreadable record does not strand a task)."""
    try:
        return Version(version) > Version(than)
    except InvalidVersion:
        return False
