"""Finished-task tables, from TaskHourly and Task merged (`_task_groups`): failure groups,
the totals task_outcomes and human_waits sum, the error-class mix and the human waits."""

from __future__ import annotations

from typing import Any

from django.db.models import Max, Min, Q, Sum

from dashboard.stats.parts import (
    WindowParts,
    merge,
    ratio,
    rolled_groups,
    window_parts,
)
from dashboard.windows import Window
from tasks.errors import error_normalise
from tasks.models import TaskHourly, TaskWaitHourly
from tasks.rollups import (
    TASK_KEYS,
    finished_tasks,
    histogram_percentile,
    task_aggregates,
    wait_histogram,
)
from tasks.states import TaskStatus

FAILURE_GROUPS_LIMIT = 50


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _greatest(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


# How the task roll-ups' columns combine over hours (SQL) and with the raw rows (Python);
# the others are sums.
_TASK_ROLLED = {
    "first_seen": (Min, _least),
    "last_seen": (Max, _greatest),
    "sample": (Max, _greatest),
}


def _task_groups(
    parts: WindowParts, keys: tuple[str, ...], fields: tuple[str, ...], where: Q | None = None
) -> list[dict[str, Any]]:
    """[{*keys, *fields}]: the window's finished tasks (narrowed by `where`) grouped by `keys`
    (of TASK_KEYS), with `fields` of tasks.rollups.task_aggregates — the rolled hours read
    from TaskHourly, the rest from Task, merged."""
    assert set(keys) <= set(TASK_KEYS), keys
    aggregates = task_aggregates()
    raw = (
        finished_tasks(parts.raw)
        .filter(where or Q())
        .values(*keys)
        .annotate(**{name: aggregates[name] for name in fields})
        .order_by()
    )
    # {name: aggregate}, as rolled_groups takes its sums.
    sums: dict[str, Any] = {name: _TASK_ROLLED.get(name, (Sum, None))[0](name) for name in fields}
    rolled = rolled_groups(TaskHourly, parts, keys=keys, where=where, **sums)
    combine = {name: _TASK_ROLLED[name][1] for name in fields if name in _TASK_ROLLED}
    return merge([*raw, *rolled], keys, fields, combine)


def failure_groups(
    window: Window, *, parts: WindowParts | None = None, limit: int = FAILURE_GROUPS_LIMIT
) -> list[dict[str, Any]]:
    """[{fingerprint, error_class, message, tasks, first_seen, last_seen}] — failed tasks
    grouped by error fingerprint, largest group first."""
    rows = _task_groups(
        parts or window_parts(window),
        ("error_fingerprint", "error_class"),
        ("tasks", "first_seen", "last_seen", "sample"),
        where=Q(status=TaskStatus.FAILED),
    )
    rows.sort(key=lambda row: (-row["tasks"], -row["last_seen"].timestamp()))
    return [
        {
            "fingerprint": row["error_fingerprint"],
            "error_class": row["error_class"],
            "message": error_normalise(row["sample"]),
            "tasks": row["tasks"],
            "first_seen": row["first_seen"],
            "last_seen": row["last_seen"],
        }
        for row in rows[:limit]
    ]


_TOTALS = (
    "tasks",
    "with_rejected",
    "with_edited",
    "waited_review",
    "review_wait_sum",
    "waited_held",
    "held_wait_sum",
)


def task_totals(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{status, calls_failed, tasks, with_*, waited_*, *_wait_sum}] over the tasks that finished in
    the window: what task_outcomes and human_waits sum (pass it to both to read it once)."""
    return _task_groups(parts or window_parts(window), ("status", "calls_failed"), _TOTALS)


def task_outcomes(
    window: Window, *, parts: WindowParts | None = None, totals: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Tasks that reached a terminal state in the window: counts per status, successes split
    into clean ones and those after failed tool calls (and how many had a call a person
    rejected or edited), and the failure rate
    failed / (succeeded + failed) — operator cancels are not agent failures."""
    if totals is None:
        totals = task_totals(window, parts=parts)
    counts: dict[tuple[str, bool], int] = {
        (row["status"], row["calls_failed"]): row["tasks"] for row in totals
    }
    succeeded_rows = [row for row in totals if row["status"] == TaskStatus.SUCCEEDED]

    def count(status: str) -> int:
        return counts.get((status, False), 0) + counts.get((status, True), 0)

    succeeded = count(TaskStatus.SUCCEEDED)
    failed = count(TaskStatus.FAILED)
    rate = ratio(failed, succeeded + failed)
    # A tool call failed (the model saw the error and went on) or an attempt failed and was
    # retried: a success that needed it is not a clean one (`calls_failed`, set as the task
    # finished).
    after_failures = counts.get((TaskStatus.SUCCEEDED, True), 0)
    return {
        "succeeded": succeeded,
        "succeeded_clean": succeeded - after_failures,
        "succeeded_after_failed_calls": after_failures,
        # Successes after a person rejected a call, or approved one with edited arguments.
        "succeeded_with_rejected_calls": sum(row["with_rejected"] for row in succeeded_rows),
        "succeeded_with_edited_calls": sum(row["with_edited"] for row in succeeded_rows),
        "failed": failed,
        "canceled": count(TaskStatus.CANCELED),
        "failure_rate": rate,
        "failure_rate_pct": None if rate is None else round(rate * 100, 1),
    }


def error_class_mix(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{error_class, tasks}] — failed tasks in the window by error class, largest first."""
    rows = _task_groups(
        parts or window_parts(window),
        ("error_class",),
        ("tasks",),
        where=Q(status=TaskStatus.FAILED),
    )
    return sorted(rows, key=lambda row: (-row["tasks"], row["error_class"]))


# The human waits, by kind: the label the page and the CSV use.
WAIT_KINDS = {"review": "waiting for review", "held": "held by an operator"}


def human_waits(
    window: Window, *, parts: WindowParts | None = None, totals: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """[{kind, label, tasks, share, total_s, mean_s, p50_s, p95_s}] — how long the tasks that
    finished in the window waited for a human, review waits and operator holds apart: how
    many waited (`share` of the finished tasks), in all, on average and the p50 / p95 of
    those that waited (from log-scale histograms, within 4.4%)."""
    parts = parts or window_parts(window)
    if totals is None:
        totals = task_totals(window, parts=parts)
    finished = sum(row["tasks"] for row in totals)
    raw = [
        {**row, "kind": kind, "bucket": int(row["bucket"])}
        for kind in WAIT_KINDS
        for row in wait_histogram(finished_tasks(parts.raw), kind)
    ]
    rolled = rolled_groups(TaskWaitHourly, parts, keys=("kind", "bucket"), tasks=Sum("tasks"))
    histograms: dict[str, list[tuple[int, int]]] = {kind: [] for kind in WAIT_KINDS}
    for row in merge([*raw, *rolled], ("kind", "bucket"), ("tasks",)):
        histograms[row["kind"]].append((row["bucket"], row["tasks"]))
    rows = []
    for kind, label in WAIT_KINDS.items():
        waited = sum(row[f"waited_{kind}"] for row in totals)
        total_s = sum(row[f"{kind}_wait_sum"] or 0 for row in totals)
        histogram = histograms[kind]
        rows.append(
            {
                "kind": kind,
                "label": label,
                "tasks": waited,
                "share": ratio(waited, finished),
                "total_s": round(total_s, 3),
                "mean_s": round(total_s / waited, 3) if waited else None,
                "p50_s": round(histogram_percentile(histogram, 0.5), 3) if histogram else None,
                "p95_s": round(histogram_percentile(histogram, 0.95), 3) if histogram else None,
            }
        )
    return rows
