"""What every `harness` command uses: the checkout's root, messages and errors for the user,
the environment and command line of a child process (manage.py), waiting on a condition, and the
lock around collecting static files."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


def say(message: str) -> None:
    print(f"harness: {message}", file=sys.stderr, flush=True)


class CliError(Exception):
    """A failure the user can act on; printed without a traceback."""


def wait_until(predicate: Callable[[], object], *, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def django_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    import django

    django.setup()


def manage(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


@contextmanager
def static_collecting(static_root: Path) -> Iterator[None]:
    """Held around `collectstatic` into `static_root` (hashed names, each new file compressed
    once: harness_site/staticfiles.py): one run at a time per folder, since `harness up` and
    `harness test` share the checkout's."""
    say(f"static files: {static_root} (compressing what changed)")
    static_root.mkdir(parents=True, exist_ok=True)
    with open(static_root.with_name(f"{static_root.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
