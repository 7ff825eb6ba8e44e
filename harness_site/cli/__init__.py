"""`harness`: the README commands.

    harness up [--host 127.0.0.1] [--port 8000] [--workers 2] [--no-demo]   run it all here
    harness test [pytest args...]                         make sure services exist, run pytest
    harness web | worker [--queues Q...] [--burst] | sweep    production: one process each

`up` supervises its children in their own process groups: Ctrl-C (SIGINT) or SIGTERM stops
exactly those groups, and a child that dies on its own stops everything with a non-zero exit.

This package holds `main` (the entry point of `./harness` and `python -m harness_site.cli`) and
its parser; each command lives in its own module: `up` (with `up_setup` and `supervisor`), `test`
in `testing` (with `bootstrap`, the services it makes exist), `replay` and `chaos` in `suites`,
`web`, `worker` and `sweep` in `production`; the command lines of the processes `up` and those
three run are written once, in `processes`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured

from harness_site.cli.bootstrap import NPM_PREFIX, NPM_TEST_PACKAGES
from harness_site.cli.common import CliError, child_env, say, static_collecting
from harness_site.cli.production import parsers_add
from harness_site.cli.redis_server import redis_embedded_command, redis_ping
from harness_site.cli.suites import cmd_chaos, cmd_replay
from harness_site.cli.testing import cmd_test
from harness_site.cli.up import cmd_up
from harness_site.cli.up_setup import admin_password_save, base_url_default, sandbox_report

__all__ = [
    "NPM_PREFIX",
    "NPM_TEST_PACKAGES",
    "CliError",
    "admin_password_save",
    "base_url_default",
    "build_parser",
    "child_env",
    "main",
    "redis_embedded_command",
    "redis_ping",
    "sandbox_report",
    "static_collecting",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description=(
            "Agent Harness: run it (up; in production web, worker, sweep), test it (test, "
            "replay), fault it (chaos)."
        ),
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
    up.set_defaults(handler=cmd_up)
    parsers_add(commands)
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
            return cmd_replay(argv[1:])
        if argv[:1] == ["chaos"]:
            return cmd_chaos(argv[1:])
        args = parser.parse_args(argv)
        return args.handler(args)
    except (CliError, ImproperlyConfigured) as exc:
        say(f"error: {exc}")
        return 2
