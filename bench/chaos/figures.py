"""Running a fault and reading its figures: recoveries, effects executed and expected, the
invariants a run must keep."""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from typing import Any

from bench.chaos.clocks import ChaosError, say
from bench.chaos.results import Fault, FaultResult
from bench.chaos.suite import Chaos


def fault_run(chaos: Chaos, fault: Fault, *, count: int) -> FaultResult:
    result = FaultResult(fault.name, fault.title, fault.bound_s, fault.bound_text)
    started = time.monotonic()
    died_before = chaos.workers_died
    say(f"{fault.name}: {count} injection(s)")
    while result.injected < count:
        before = result.injected
        fault.run(chaos, result, min(fault.batch, count - result.injected))
        chaos.watch(result, timeout=90)
        if result.injected == before:
            raise ChaosError(f"{fault.name}: a batch injected nothing")
        _keep_workers(chaos)
    chaos.watch(result, timeout=120)
    _keep_workers(chaos)
    result.seconds = time.monotonic() - started
    result.figures.update(fault_figures(chaos, result))
    result.figures["workers_died"] = chaos.workers_died - died_before
    say(f"{fault.name}: {json.dumps(summary_row(result))}")
    return result


def _keep_workers(chaos: Chaos) -> None:
    """Replace the workers the fault killed (or that died: counted), and wait for the new ones
    to register (a FLUSHALL forgets the registrations of the others, which keep working)."""
    for process in [w for w in chaos.fleet.workers if w.poll() is not None]:
        chaos.workers_died += 1
        say(f"worker {process.pid} exited on its own with {process.returncode}")
        chaos.fleet.workers.remove(process)
    missing = chaos.pool_size - len(chaos.fleet.alive())
    chaos.fleet.spawn_workers(max(0, missing))


def fault_figures(chaos: Chaos, result: FaultResult) -> dict[str, Any]:
    """The invariants, from the database and the ledger."""
    from review.models import ReviewRequest
    from tasks.models import Task, TaskEvent

    ledger = chaos.ledger()
    expected = [key for keys in result.keys.values() for key in keys]
    statuses = dict(Task.objects.filter(id__in=result.tasks).values_list("id", "status"))
    lost = [str(t) for t, s in statuses.items() if s != "succeeded"]
    approvals = list(ReviewRequest.objects.filter(id__in=result.approvals).select_related())
    approvals_lost = consumed_unrun = asked_twice = 0
    for review in approvals:
        if review.status != "approved":
            continue
        key = review.arguments.get("key")
        if not ledger.get(key):
            approvals_lost += 1
        ran = TaskEvent.objects.filter(
            task_id=review.task_id,
            type="status",
            payload__to="running",
            created_at__gte=review.decided_at,
        ).exists()
        if not ran:
            consumed_unrun += 1
        asked_twice += ReviewRequest.objects.filter(
            task_id=review.task_id,
            kind=review.kind,
            id__gt=review.id,
            original_arguments=review.original_arguments,
        ).count()
    return {
        "tasks": len(result.tasks),
        "effects_expected": len(expected),
        "effects_executed": sum(1 for key in expected if ledger.get(key)),
        "effects_duplicated": sum(max(0, ledger.get(key, 0) - 1) for key in expected),
        "approvals_given": len(result.approvals),
        "approvals_lost": approvals_lost,
        "approvals_asked_twice": asked_twice,
        "approvals_consumed_without_run": consumed_unrun,
        "tasks_lost": len(lost),
        "lost_task_ids": lost[:10],
        "lost_statuses": dict(Counter(statuses[t] for t in statuses if str(t) in lost)),
    }


def summary_row(result: FaultResult) -> dict[str, Any]:
    recoveries = result.recoveries()
    finite = [r for r in recoveries if r != float("inf")]
    return {
        "fault": result.name,
        "injected": result.injected,
        **{k: v for k, v in result.figures.items() if not isinstance(v, list)},
        "recovery_median_s": round(statistics.median(recoveries), 2) if recoveries else None,
        "recovery_p95_s": round(_p95(recoveries), 2) if recoveries else None,
        "recovery_max_s": round(max(finite), 2) if finite else None,
        "unrecovered": len(recoveries) - len(finite),
        "bound_s": round(result.bound_s, 1),
        "seconds": round(result.seconds, 1),
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


INVARIANTS = (
    "workers_died",
    "spurious_redispatches",
    "effects_duplicated",
    "approvals_lost",
    "approvals_asked_twice",
    "approvals_consumed_without_run",
    "tasks_lost",
)


def violations(result: FaultResult) -> list[str]:
    found = [f"{k}={result.figures[k]}" for k in INVARIANTS if result.figures.get(k)]
    if result.figures.get("effects_executed") != result.figures.get("effects_expected"):
        found.append(
            f"effects executed {result.figures.get('effects_executed')} of "
            f"{result.figures.get('effects_expected')}"
        )
    over = [r for r in result.recoveries() if r > result.bound_s]
    if over:
        found.append(f"{len(over)} recoveries over the {result.bound_s:g}s bound")
    return found
