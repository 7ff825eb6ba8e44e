"""The aggregations the rolls and the statistics share, so both count alike: log-scale
histogram buckets, the settled calls, the finished tasks, what a task roll-up row holds and the
human-wait histograms."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.db.models import Count, F, FloatField, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Floor, Greatest, Ln

from tasks.models import Task, ToolCall
from tasks.rollups.periods import in_ranges
from tasks.rollups.tables import (
    BUCKETS_PER_DOUBLING,
    CANCELED_CALL,
    FAILED_CALL,
    MIN_BUCKETED,
    SETTLED_CALL,
    WAIT_FIELDS,
)
from tasks.states import TERMINAL

# A plan task's dry-run calls (ToolCall.plan_mark) and the phases of a task still in, or
# ended in, its dry run (Task.plan_phase): never in the statistics (agent.runtime.plan).
PLANNED = "planned"
PLAN_DRY_PHASES = ("planning", "rejected")


def log_bucket(field: str) -> Floor:
    """SQL expression: the histogram bucket of `field` (floor(log2(value) * per doubling))."""
    return Floor(
        Ln(Greatest(F(field), Value(MIN_BUCKETED), output_field=FloatField()))
        * Value(BUCKETS_PER_DOUBLING / math.log(2))
    )


def bucket_value(bucket: int) -> float:
    """The value (a duration in ms, a wait in s) a bucket stands for: its geometric middle."""
    return 2 ** ((bucket + 0.5) / BUCKETS_PER_DOUBLING)


def histogram_percentile(histogram: list[tuple[int, int]], fraction: float) -> float:
    """percentile_cont over a sorted, non-empty [(bucket, count)] histogram: interpolated
    between the values at the ranks around (n - 1) * fraction, each read as its bucket's
    middle. The statistics and the review SLA read their histograms with it."""
    rank = (sum(n for _, n in histogram) - 1) * fraction
    low = int(rank)

    def at(index: int) -> float:
        seen = 0
        for bucket, n in histogram:
            seen += n
            if seen > index:
                return bucket_value(bucket)
        return bucket_value(histogram[-1][0])

    below = at(low)
    return below + (rank - low) * (at(low + 1) - below)


def settled_calls(calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """The calls of `calls` with an outcome of the tool: settled, and not stopped by a cancel;
    a replay's calls (answered from a recording) and a plan's dry run's (`planned`: simulated,
    or run on its copy) are not the tools' outcomes."""
    return (
        calls.filter(status__in=SETTLED_CALL)
        .exclude(CANCELED_CALL)
        .filter(task__is_replay=False)
        .exclude(plan_mark=PLANNED)
    )


def calls_failed_q() -> Q:
    """A call that failed (not canceled) or needed more than one attempt: a task with one did
    not succeed cleanly (`Task.calls_failed`)."""
    return (Q(status__in=FAILED_CALL) & ~CANCELED_CALL) | Q(attempts__gt=1)


def finished_tasks(ranges: tuple[tuple[datetime, datetime], ...]) -> QuerySet[Task]:
    """Tasks in a terminal status whose `finished_at` is in one of `ranges` ([since, until));
    not replays, nor plan tasks that ended in their dry run (or with their plan rejected)."""
    return Task.objects.filter(
        in_ranges("finished_at", ranges), status__in=TERMINAL, is_replay=False
    ).exclude(plan_phase__in=PLAN_DRY_PHASES)


def task_aggregates() -> dict[str, Any]:
    """What a TaskHourly row holds of its group of finished tasks (the statistics compute the
    same over the tasks of the window's hours that are not rolled)."""
    return {
        "tasks": Count("*"),
        "first_seen": Min("finished_at"),
        "last_seen": Max("finished_at"),
        "sample": Max("error_message"),
        "with_rejected": Count("calls_rejected", filter=Q(calls_rejected__gt=0)),
        "with_edited": Count("calls_edited", filter=Q(calls_edited__gt=0)),
        "waited_review": Count("review_wait_s", filter=Q(review_wait_s__gt=0)),
        "review_wait_sum": Sum("review_wait_s"),
        "waited_held": Count("held_wait_s", filter=Q(held_wait_s__gt=0)),
        "held_wait_sum": Sum("held_wait_s"),
    }


def wait_histogram(tasks: QuerySet[Task], kind: str, *keys: str) -> QuerySet[Task, Any]:
    """[{*keys, bucket, tasks}]: the tasks of `tasks` that waited for a human (`kind`, one of
    WAIT_FIELDS) by log-scale bucket of the seconds waited."""
    field = WAIT_FIELDS[kind]
    return (
        tasks.filter(**{f"{field}__gt": 0})
        .annotate(bucket=log_bucket(field))
        .values(*keys, "bucket")
        .annotate(tasks=Count("*"))
        .order_by()
    )
