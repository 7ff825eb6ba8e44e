"""`harness web`, `harness worker` and `harness sweep`: the production entry points. Each runs
one process in the foreground (exec'd, so a service manager's or container runtime's signals
reach it directly), reads the same configuration as `harness up`, and refuses to start without
the configuration production needs (PRODUCTION_REQUIRES), naming what is missing."""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness_base.env import DEFAULT_SECRET_KEY
from harness_site.cli.common import ROOT, CliError, child_env, django_setup, say, static_collecting
from harness_site.cli.processes import sweep_command, web_command, worker_command
from harness_site.cli.up_setup import sandbox_report

# Without these a process would quietly fall back to a development default: SQLite in the data
# directory, the embedded Redis of `harness up`, the published development SECRET_KEY.
PRODUCTION_REQUIRES = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")
# Held around `migrate` so web servers starting together migrate one at a time.
_MIGRATE_LOCK = 0x6861726E657373  # "harness"


def production_guard() -> None:
    missing = [name for name in PRODUCTION_REQUIRES if not os.environ.get(name, "").strip()]
    if os.environ.get("SECRET_KEY") == DEFAULT_SECRET_KEY:
        missing.append("SECRET_KEY (it is the development default)")
    if missing:
        raise CliError(
            f"production needs {', '.join(PRODUCTION_REQUIRES)}; missing: {', '.join(missing)} "
            "(README: Deployment)"
        )


def _exec(argv: Sequence[str]) -> None:
    os.chdir(ROOT)
    os.execve(argv[0], list(argv), child_env())


def migrate_lock_wait(cursor: Any, *, poll_s: float = 0.25) -> None:
    """Take the migration lock, trying it every `poll_s` seconds (jittered) rather than waiting
    in pg_advisory_lock: a session blocked in that statement holds a snapshot, and a CREATE
    INDEX CONCURRENTLY in the migrating session waits for every older snapshot, so the two
    deadlock and PostgreSQL aborts one of the starting web servers."""
    said = False
    while True:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_MIGRATE_LOCK])
        if cursor.fetchone()[0]:
            return
        if not said:
            say("another web server is migrating the database: waiting for it")
            said = True
        time.sleep(poll_s * (0.5 + random.random()))


def _migrate() -> None:
    from django.core.management import call_command
    from django.db import connection

    locking = connection.vendor == "postgresql"
    if locking:
        with connection.cursor() as cursor:
            migrate_lock_wait(cursor)
    try:
        call_command("migrate", interactive=False, verbosity=1)
    finally:
        if locking:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATE_LOCK])


def cmd_web(args: argparse.Namespace) -> int:
    """Static files collected, the database migrated and the roles made, then gunicorn."""
    production_guard()
    if not 1 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: expected 1-65535")
    if args.processes < 1:
        raise CliError(f"--processes {args.processes}: expected at least 1")
    django_setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from harness_base.roles import roles_ensure

    with static_collecting(Path(settings.STATIC_ROOT)):
        call_command("collectstatic", interactive=False, verbosity=0)
    _migrate()
    roles_ensure()
    connections.close_all()
    say(f"web: serving on {args.host}:{args.port} ({args.processes} process(es))")
    _exec(web_command(host=args.host, port=args.port, processes=args.processes))
    return 0  # not reached: exec replaced this process


def queues_parse(requested: Sequence[str] | None) -> list[str]:
    """`--queues a,b c` in the order given; every name must be one of HARNESS_QUEUES."""
    from django.conf import settings

    known = list(settings.HARNESS_QUEUES)
    if not requested:
        return known
    queues = [name for part in requested for name in part.split(",") if name.strip()]
    unknown = [name for name in queues if name not in known]
    if unknown or not queues:
        raise CliError(f"--queues {' '.join(unknown)}: expected names from {', '.join(known)}")
    return queues


def cmd_worker(args: argparse.Namespace) -> int:
    production_guard()
    django_setup()
    queues = queues_parse(args.queues)
    sandbox_report()
    say(f"worker: queues {', '.join(queues)}{' (burst)' if args.burst else ''}")
    _exec(worker_command(queues=queues, burst=args.burst))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    production_guard()
    django_setup()
    _exec(sweep_command(interval=args.interval))
    return 0


def parsers_add(commands: argparse._SubParsersAction) -> None:
    """The three subcommands, on `harness`'s parser."""
    web = commands.add_parser("web", help="production: the web server (gunicorn)")
    web.add_argument("--host", default="127.0.0.1", help="address to serve on")
    web.add_argument("--port", type=int, default=8000)
    web.add_argument(
        "--processes", type=int, default=2, help="gunicorn worker processes (default 2)"
    )
    web.set_defaults(handler=cmd_web)
    worker = commands.add_parser("worker", help="production: one rqworker")
    worker.add_argument(
        "--queues",
        nargs="+",
        metavar="QUEUE",
        help="queues to serve, highest priority first (default: all, HARNESS_QUEUES)",
    )
    worker.add_argument("--burst", action="store_true", help="exit once the queues are empty")
    worker.set_defaults(handler=cmd_worker)
    sweep = commands.add_parser("sweep", help="production: the sweeper loop")
    sweep.add_argument(
        "--interval", type=float, default=None, help="seconds (default HARNESS_SWEEP_INTERVAL_S)"
    )
    sweep.set_defaults(handler=cmd_sweep)
