"""`manage.py replay_cases [--tag T] [--model M] [--on-divergence stop|sandbox]` (behind
`./harness replay`): replay every saved case (docs/replay.md), print a compact table (case,
passed, first divergence, cost) and exit 1 when one fails."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agent.replay_suite import replay_suite


class Command(BaseCommand):
    help = "Replay every saved case against the current code; exit 1 when one fails."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tag", help="only the cases with this tag")
        parser.add_argument(
            "--model",
            help="a candidate model: a model spec as JSON, or a model name for cases recorded "
            "with an OpenAI-compatible model (default: the recorded decisions)",
        )
        parser.add_argument("--on-divergence", choices=["stop", "sandbox"], default="stop")
        parser.add_argument("--user", help="run the replays as this user (for the audit log)")

    def handle(self, *args, **options) -> None:
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user {options['user']!r}")
        rows = replay_suite(
            tag=options["tag"],
            model=options["model"],
            on_divergence=options["on_divergence"],
            user=user,
        )
        width = max([len("case"), *(len(r.case) for r in rows)])
        self.stdout.write(f"{'case':<{width}}  passed  {'cost_usd':>10}  first divergence")
        for r in rows:
            passed = "yes" if r.passed else "NO"
            self.stdout.write(
                f"{r.case:<{width}}  {passed:<6}  {r.cost_usd:>10.6f}  {r.first_divergence[:120]}"
            )
        failed = sum(not r.passed for r in rows)
        self.stdout.write(f"{len(rows)} case(s), {failed} failed")
        if failed:
            raise SystemExit(1)
