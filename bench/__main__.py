"""`python -m bench run [--size smoke|full] [--only NAME ...]`, `python -m bench render` and
`python -m bench chaos [--short]` (the chaos suite, bench/chaos/).

Needs DATABASE_URL pointing at a PostgreSQL database (migrated on start) and, for the approval
benchmark, REDIS_URL. See bench/README.md."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from bench.common import SIZES, BenchError, git_dirty, setup_django


def exit_on_sigterm() -> None:
    """SIGTERM (a `kill`, a CI timeout) ends the run as Ctrl-C does: through every `with`
    block, so the rqworker and sweep subprocesses a benchmark started (each in its own
    session, out of reach of a signal to this process) are stopped, not left running to take
    the next run's jobs from the same Redis."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["chaos"]:
        # The chaos suite runs its own PostgreSQL and Redis: it sets Django up itself.
        from bench.chaos import main as chaos_main

        return chaos_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run benchmarks, write bench/results/*.json and results.md")
    run.add_argument("--size", choices=SIZES, default="full")
    run.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run at full size on a tree with uncommitted changes (results are marked dirty)",
    )
    run.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this benchmark (repeatable); others keep their last result",
    )
    sub.add_parser("list", help="list the benchmarks")
    sub.add_parser("chaos", help="the chaos suite (bench/chaos/; `chaos -h` for its options)")
    sub.add_parser("render", help="re-render bench/results.md from bench/results/*.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    exit_on_sigterm()

    from bench.report import render_to_file

    if args.command == "render":
        print(render_to_file())
        return 0
    if args.command == "run" and args.size == "full" and not args.allow_dirty:
        # Results are committed next to the code they measure: they must name one commit.
        try:
            dirty = git_dirty()
        except BenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if dirty:
            print(
                "error: the tree has uncommitted changes (" + ", ".join(dirty[:5]) + "); "
                "commit them (results record the commit) or pass --allow-dirty",
                file=sys.stderr,
            )
            return 2
    try:
        setup_django()
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from bench.runner import benchmarks, run_all

    if args.command == "list":
        print("\n".join(benchmarks()))
        return 0
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    # The pages link the collected static files by their hashed names (the manifest): a fresh
    # clone has none until they are collected, as `harness up` and `harness test` do.
    from django.conf import settings

    from harness_site.cli.common import static_collecting

    with static_collecting(Path(settings.STATIC_ROOT)):
        call_command("collectstatic", interactive=False, verbosity=0)
    from django.db import connection

    # Start from collected garbage: earlier runs leave dead rows that autovacuum may not have
    # reached yet, and the benchmarks update one task row hundreds of times a second.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    try:
        run_all(size=args.size, only=args.only)
    except (BenchError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_to_file())
    return 0


if __name__ == "__main__":
    sys.exit(main())
