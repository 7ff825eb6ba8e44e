"""The suite's table (bench/chaos.md) and the commit it ran on."""

from __future__ import annotations

import statistics
import subprocess
from collections import Counter
from typing import Any

from bench.chaos.clocks import CLOCKS, ROOT, SLACK_S
from bench.chaos.figures import _median, _p95, violations
from bench.chaos.results import FaultResult


def render(results: list[FaultResult], *, meta: dict[str, Any]) -> str:
    head = (
        "| fault | injected | tasks | effects expected / executed / duplicated | approvals "
        "given / lost / asked twice / consumed unrun | tasks lost | recovery median / p95 (s) "
        "| bound (s) | ok |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    total = Counter()
    all_recoveries: list[float] = []
    for r in results:
        f = r.figures
        rec = r.recoveries()
        all_recoveries += rec
        for key in ("tasks", "effects_expected", "effects_executed", "effects_duplicated",
                    "approvals_given", "approvals_lost", "approvals_asked_twice",
                    "approvals_consumed_without_run", "tasks_lost"):  # fmt: skip
            total[key] += f.get(key, 0)
        total["injected"] += r.injected
        lines.append(
            f"| {r.title} | {r.injected} | {f['tasks']} | {f['effects_expected']} / "
            f"{f['effects_executed']} / {f['effects_duplicated']} | {f['approvals_given']} / "
            f"{f['approvals_lost']} / {f['approvals_asked_twice']} / "
            f"{f['approvals_consumed_without_run']} | {f['tasks_lost']} | "
            f"{_fmt(statistics.median(rec) if rec else None)} / {_fmt(_p95(rec) if rec else None)}"
            f" | ≤ {r.bound_s:g} ({r.bound_text}) | {'yes' if not violations(r) else 'NO'} |"
        )
    ok = all(not violations(r) for r in results)
    lines.append(
        f"| **total** | **{total['injected']}** | {total['tasks']} | {total['effects_expected']}"
        f" / {total['effects_executed']} / {total['effects_duplicated']} | "
        f"{total['approvals_given']} / {total['approvals_lost']} / "
        f"{total['approvals_asked_twice']} / {total['approvals_consumed_without_run']} | "
        f"{total['tasks_lost']} | {_fmt(_median(all_recoveries))}"
        f" / {_fmt(_p95(all_recoveries) if all_recoveries else None)} | | "
        f"{'yes' if ok else 'NO'} |"
    )
    notes = []
    for r in results:
        for v in violations(r):
            notes.append(f"- {r.name}: {v}")
    return (
        "# Chaos suite\n\n"
        f"`./harness chaos{' --short' if meta.get('short') else ''}` on commit "
        f"`{meta.get('commit', '?')}`{' (dirty tree)' if meta.get('dirty') else ''}, "
        f"{meta.get('date')}, {meta.get('cpus')} CPUs, load average {meta.get('load')} at the "
        f"start; {meta.get('seconds', 0):.0f} s in all. {meta.get('note', '')}\n\n"
        + head
        + "\n".join(lines)
        + "\n\n"
        + ("Violations:\n" + "\n".join(notes) + "\n\n" if notes else "")
        + CLOCKS_NOTE
    )


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return "∞" if value == float("inf") else f"{value:.2f}"


CLOCKS_NOTE = (
    "Clocks: heartbeat {HARNESS_HEARTBEAT_S} s, stale after {HARNESS_STALE_AFTER_S} s, sweep "
    "every {HARNESS_SWEEP_INTERVAL_S} s, requeue grace {HARNESS_REQUEUE_GRACE_S} s, horse grace "
    "{HARNESS_HORSE_GRACE_S} s, idle-in-transaction timeout {HARNESS_DB_IDLE_IN_TRANSACTION_S} "
    "s; slack for a loaded machine {slack} s. Recovery: from the fault "
    "to the task's next progress (a new lease, a new checkpoint, a pause for a person, or, for "
    "an approval, its effect), polled every 0.1 s. Effects are `ledger_append` executions "
    "counted per key in the external ledger; an outcome lost with its worker is settled by the "
    "operator after a look at the ledger (mark done / run again), as the product asks.\n"
).format(slack=SLACK_S, **CLOCKS)


def git_state() -> tuple[str, bool]:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = [
        line
        for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
        if not line.endswith("bench/chaos.md")
    ]
    return git("rev-parse", "--short", "HEAD"), bool(dirty)
