"""Statistics roll-ups: the sweep folds settled tool calls into per-hour rows
(`ToolCallHourly`, `ToolCallStepHourly`, `ToolCallDurationHourly`, by `created_at`) and
finished tasks likewise (`TaskHourly`, `TaskWaitHourly`, by `finished_at`), so that the
failure statistics of any window read a few thousand summary rows instead of every call and
task in it.

An hour is rolled once it ended ROLL_LAG ago, oldest first, at most MAX_HOURS_PER_RUN per sweep
(a first sweep over a large history backfills in several runs). Rolling an hour replaces its
rows, so rolling again is always safe. Calls without a final outcome when their hour is rolled
(awaiting review, retry wait, running, unknown outcome) are counted in `RolledHour.unsettled`,
and such hours are rolled again (every RESETTLE_EVERY) while they are younger than
RESETTLE_WITHIN: a call that settles later still reaches the statistics. (A call that settles
later than that is not counted; nor is a call whose final status an operator changes.) A task
that leaves its terminal status (an operator's retry or rollback) marks its finished hour
`stale` (`rollups_task_reopened`, from task_transition), and the sweep rolls that hour again
whatever its age.

Each roll of an hour also re-sums its UTC day into the daily tables (`ToolCallDaily`,
`ToolCallStepDaily`, `ToolCallDurationDaily`, `TaskDaily`, `TaskWaitDaily`: DAILY), so a late
change that rolls an hour again (a call settling, a task reopened) reaches its day too.

The statistics (`dashboard.stats`) read a window's whole UTC days from the daily tables, the
other rolled hours from the hourly ones (`rolled_days_and_hours`), and the rest of the window —
the part of an hour at its start and the hours not rolled yet at its end — from ToolCall.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    Max,
    Min,
    Model,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Floor, Greatest, Ln, Trunc, TruncDay

from tasks.errors import CANCELED_ERROR
from tasks.models import (
    RolledHour,
    SweepRun,
    Task,
    TaskDaily,
    TaskHourly,
    TaskWaitDaily,
    TaskWaitHourly,
    ToolCall,
    ToolCallDaily,
    ToolCallDurationDaily,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStatus,
    ToolCallStepDaily,
    ToolCallStepHourly,
)
from tasks.states import TERMINAL

S = ToolCallStatus
FAILED_CALL = (S.FAILED, S.TIMED_OUT, S.UNKNOWN_OUTCOME)
# Calls with an outcome. Denied / rejected calls are policy decisions, not tool failures.
SETTLED_CALL = (S.SUCCEEDED, *FAILED_CALL)
# A call stopped because an operator canceled its task: `failed` with this error class, but an
# operator's decision, not the tool's failure. Every statistic leaves it out (`settled_calls`),
# like denied and rejected calls. Both columns are in ToolCall's `toolcall_stats` index and in
# ToolCallHourly's key, so the filter costs no heap access.
CANCELED_CALL = Q(status=S.FAILED, error_class=CANCELED_ERROR)
# Statuses no call leaves again (an unknown outcome is settled for the statistics but an
# operator's decision may still turn it into a success or a failure).
FINAL_CALL = (S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.DENIED, S.REJECTED)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
ROLL_LAG = timedelta(minutes=5)
RESETTLE_WITHIN = timedelta(days=2)
RESETTLE_EVERY = timedelta(minutes=2)
MAX_HOURS_PER_RUN = 48
MAX_RESETTLE_PER_RUN = 48
# Histogram resolution (call durations, human waits): BUCKETS_PER_DOUBLING buckets per factor
# of two, so a bucket's geometric middle is within 2^(1/16) - 1 ≈ 4.4% of every value in it.
BUCKETS_PER_DOUBLING = 8
MIN_BUCKETED = 0.001
# The SweepRun rows whose lock a roll holds (roll_lock): the task roll-ups' and the review
# roll-ups' (review.rollups).
ROLL_LOCK = "rollups"

# Every table a roll of an hour replaces (RolledHour, the record of the roll, last).
ROLLUP_MODELS = (
    ToolCallHourly,
    ToolCallStepHourly,
    ToolCallDurationHourly,
    TaskHourly,
    TaskWaitHourly,
    RolledHour,
)

# The key of a task roll-up row, and what is summed, min'd or max'd over it.
TASK_KEYS = ("status", "error_class", "error_fingerprint", "calls_failed")
# How a task roll-up's columns combine over hours (the others are sums).
TASK_COMBINED = {"first_seen": Min, "last_seen": Max, "sample": Max}
TASK_COLUMNS = (
    "tasks",
    "first_seen",
    "last_seen",
    "sample",
    "with_rejected",
    "with_edited",
    "waited_review",
    "review_wait_sum",
    "waited_held",
    "held_wait_sum",
)


@dataclass(frozen=True)
class Daily:
    """A daily table: the sums over each UTC day of an hourly one's rows with equal `keys`."""

    hourly: type[Model]
    daily: type[Model]
    keys: tuple[str, ...]
    # {column: aggregate over the day's hours}
    columns: dict[str, type[Aggregate]]


DAILY = (
    Daily(
        ToolCallHourly, ToolCallDaily, ("tool", "status", "error_class", "attempts"), {"calls": Sum}
    ),
    Daily(ToolCallStepHourly, ToolCallStepDaily, ("step_index",), {"calls": Sum, "failed": Sum}),
    Daily(ToolCallDurationHourly, ToolCallDurationDaily, ("tool", "bucket"), {"calls": Sum}),
    Daily(
        TaskHourly,
        TaskDaily,
        TASK_KEYS,
        {column: TASK_COMBINED.get(column, Sum) for column in TASK_COLUMNS},
    ),
    Daily(TaskWaitHourly, TaskWaitDaily, ("kind", "bucket"), {"tasks": Sum}),
)
# The daily table of each hourly one.
DAILY_OF = {table.hourly: table for table in DAILY}

# The time a finished task waited for a human, by kind: for a review, and held by an operator
# (kept apart: a task held and resumed never waited for a review).
WAIT_FIELDS = {"review": "review_wait_s", "held": "held_wait_s"}


def hour_floor(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_ceil(at: datetime) -> datetime:
    floor = hour_floor(at)
    return floor if floor == at else floor + HOUR


def day_floor(at: datetime) -> datetime:
    """The UTC midnight at or before `at` (daily roll-ups are UTC days)."""
    return hour_floor(at).replace(hour=0)


def day_ceil(at: datetime) -> datetime:
    floor = day_floor(at)
    return floor if floor == at else floor + DAY


def log_bucket(field: str):
    """SQL expression: the histogram bucket of `field` (floor(log2(value) * per doubling))."""
    return Floor(
        Ln(Greatest(F(field), Value(MIN_BUCKETED), output_field=FloatField()))
        * Value(BUCKETS_PER_DOUBLING / math.log(2))
    )


def bucket_value(bucket: int) -> float:
    """The value (a duration in ms, a wait in s) a bucket stands for: its geometric middle."""
    return 2 ** ((bucket + 0.5) / BUCKETS_PER_DOUBLING)


def _hour_of(field: str):
    return Trunc(field, "hour", tzinfo=UTC)


def rolled_span() -> tuple[datetime, datetime] | None:
    """[first, end) of the hours the roll-ups cover, or None before the first roll."""
    span = RolledHour.objects.aggregate(first=Min("hour"), last=Max("hour"))
    if span["first"] is None:
        return None
    return span["first"], span["last"] + HOUR


def rolled_days_and_hours(
    start: datetime, stop: datetime
) -> tuple[tuple[datetime, datetime] | None, tuple[tuple[datetime, datetime], ...]]:
    """Rolled hours [start, stop) cut into the whole UTC days inside them ([first, last) or
    None) and the hour ranges around those days: what a window reads from the daily sums and
    what from the hourly rows."""
    first_day, last_day = day_ceil(start), day_floor(stop)
    if first_day >= last_day:
        return None, ((start, stop),)
    around = ((start, first_day), (last_day, stop))
    return (first_day, last_day), tuple((a, b) for a, b in around if a < b)


def in_ranges(field: str, ranges: tuple[tuple[datetime, datetime], ...]) -> Q:
    """`field` in one of `ranges` ([since, until)); no ranges match nothing."""
    where = Q(pk__in=[])
    for since, until in ranges:
        where |= Q(**{f"{field}__gte": since, f"{field}__lt": until})
    return where


def settled_calls(calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """The calls of `calls` with an outcome of the tool: settled, and not stopped by a cancel;
    a replay's calls (answered from a recording) are not the tools' outcomes."""
    return (
        calls.filter(status__in=SETTLED_CALL).exclude(CANCELED_CALL).filter(task__is_replay=False)
    )


def calls_failed_q() -> Q:
    """A call that failed (not canceled) or needed more than one attempt: a task with one did
    not succeed cleanly (`Task.calls_failed`)."""
    return (Q(status__in=FAILED_CALL) & ~CANCELED_CALL) | Q(attempts__gt=1)


def finished_tasks(ranges: tuple[tuple[datetime, datetime], ...]) -> QuerySet[Task]:
    """Tasks in a terminal status whose `finished_at` is in one of `ranges` ([since, until))."""
    return Task.objects.filter(
        in_ranges("finished_at", ranges), status__in=TERMINAL, is_replay=False
    )


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


def wait_histogram(tasks: QuerySet[Task], kind: str, *keys: str) -> QuerySet:
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


def hours_roll(*, start: datetime, stop: datetime, now: datetime) -> None:
    """Replace the roll-up rows of the hours in [start, stop) (hour-aligned) by aggregates of
    their tool calls and finished tasks, in one transaction."""
    calls = ToolCall.objects.filter(created_at__gte=start, created_at__lt=stop)
    settled = settled_calls(calls).annotate(hour=_hour_of("created_at"))
    by_key = settled.values("hour", "tool", "status", "error_class", "attempts").annotate(
        n=Count("*")
    )
    by_step = settled.values("hour", "step_index").annotate(
        n=Count("*"), failed=Count("status", filter=Q(status__in=FAILED_CALL))
    )
    by_duration = (
        settled.filter(duration_ms__isnull=False)
        .annotate(bucket=log_bucket("duration_ms"))
        .values("hour", "tool", "bucket")
        .annotate(n=Count("*"))
    )
    unsettled = dict(
        calls.exclude(status__in=FINAL_CALL)
        .annotate(hour=_hour_of("created_at"))
        .values_list("hour")
        .annotate(n=Count("*"))
        .order_by()
    )
    tasks = finished_tasks(((start, stop),)).annotate(hour=_hour_of("finished_at"))
    hours = []
    at = start
    while at < stop:
        hours.append(at)
        at += HOUR
    with transaction.atomic():
        for model in ROLLUP_MODELS:
            model.objects.filter(hour__gte=start, hour__lt=stop).delete()
        ToolCallHourly.objects.bulk_create(
            ToolCallHourly(
                hour=row["hour"],
                tool=row["tool"],
                status=row["status"],
                error_class=row["error_class"],
                attempts=row["attempts"],
                calls=row["n"],
            )
            for row in by_key.order_by()
        )
        ToolCallStepHourly.objects.bulk_create(
            ToolCallStepHourly(
                hour=row["hour"], step_index=row["step_index"], calls=row["n"], failed=row["failed"]
            )
            for row in by_step.order_by()
        )
        ToolCallDurationHourly.objects.bulk_create(
            ToolCallDurationHourly(
                hour=row["hour"], tool=row["tool"], bucket=int(row["bucket"]), calls=row["n"]
            )
            for row in by_duration.order_by()
        )
        TaskHourly.objects.bulk_create(
            TaskHourly(**row)
            for row in tasks.values("hour", *TASK_KEYS).annotate(**task_aggregates()).order_by()
        )
        TaskWaitHourly.objects.bulk_create(
            TaskWaitHourly(
                hour=row["hour"], kind=kind, bucket=int(row["bucket"]), tasks=row["tasks"]
            )
            for kind in WAIT_FIELDS
            for row in wait_histogram(tasks, kind, "hour")
        )
        RolledHour.objects.bulk_create(
            RolledHour(hour=hour, unsettled=unsettled.get(hour, 0), rolled_at=now) for hour in hours
        )
        days_roll(days=sorted({day_floor(hour) for hour in hours}))


def days_roll(*, days: list[datetime]) -> None:
    """Replace the daily sums of these UTC days from their rolled hours (in the caller's
    transaction, after the hours): a day's sums follow each roll of one of its hours."""
    for table in DAILY:
        table.daily.objects.filter(day__in=days).delete()
        rows = (
            table.hourly.objects.filter(in_ranges("hour", tuple((day, day + DAY) for day in days)))
            .annotate(rolled_day=TruncDay("hour", tzinfo=UTC))
            .values("rolled_day", *table.keys)
            .annotate(**{f"sum_{c}": aggregate(c) for c, aggregate in table.columns.items()})
            .order_by()
        )
        table.daily.objects.bulk_create(
            table.daily(
                day=row["rolled_day"],
                **{key: row[key] for key in table.keys},
                **{c: row[f"sum_{c}"] for c in table.columns},
            )
            for row in rows
        )


def roll_lock(*, name: str = ROLL_LOCK, wait: bool = False) -> bool:
    """Take the roll-up lock `name` for the current transaction; False if another transaction
    holds it (or, with `wait`, block until it is free). Lock contract: the SweepRun row named
    `name` (select_for_update); taken after any task or review row."""
    rows = SweepRun.objects.filter(name=name)
    rows = rows.select_for_update() if wait else rows.select_for_update(skip_locked=True)
    if rows.exists():
        return True
    # Not there yet (made once, by the first roll or change), or held by another transaction.
    SweepRun.objects.get_or_create(
        name=name, defaults={"started_at": _epoch(), "finished_at": _epoch()}
    )
    return rows.exists()


def rollups_task_reopened(*, finished_at: datetime) -> None:
    """A task that finished at `finished_at` is leaving its terminal status (task_transition,
    in its transaction): mark that hour stale, so the sweep rolls it again.

    Holds the roll-up lock until the transaction ends, so that no roll can read the task as
    finished and then record the hour as fresh: a roll that already ran left a row to mark, a
    roll that runs next reads the task reopened."""
    roll_lock(wait=True)
    RolledHour.objects.filter(hour=hour_floor(finished_at)).update(stale=True)


def _epoch() -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC)


def rollups_advance(*, now: datetime) -> int:
    """The sweep's step: roll the next finished hours, then the stale hours and the young hours
    that had unsettled calls. Returns how many hours were rolled. Safe to run from several
    sweepers at once (one rolls, the others skip)."""
    with transaction.atomic():
        if not roll_lock():
            return 0
        span = rolled_span()
        if span is None:
            oldest = [
                ToolCall.objects.aggregate(at=Min("created_at"))["at"],
                Task.objects.filter(status__in=TERMINAL).aggregate(at=Min("finished_at"))["at"],
            ]
            if not any(oldest):
                return 0
            start = hour_floor(min(at for at in oldest if at is not None))
        else:
            start = span[1]
        return hours_advance(
            start=start, now=now, rolled=RolledHour, open_field="unsettled", roll=hours_roll
        )


def hours_advance(
    *,
    start: datetime,
    now: datetime,
    rolled: type[Model],
    open_field: str,
    roll: Callable[..., None],
) -> int:
    """Under the caller's roll lock: `roll` the finished hours from `start` (at most
    MAX_HOURS_PER_RUN), then the `rolled` hours marked stale and the young ones that had
    `open_field` things still open, oldest roll first. Returns how many hours were rolled."""
    stop = min(hour_floor(now - ROLL_LAG), start + MAX_HOURS_PER_RUN * HOUR)
    count = 0
    if start < stop:
        roll(start=start, stop=stop, now=now)
        count += int((stop - start) / HOUR)
    young_and_open = Q(
        **{f"{open_field}__gt": 0},
        hour__gte=now - RESETTLE_WITHIN,
        rolled_at__lte=now - RESETTLE_EVERY,
    )
    again = rolled.objects.filter(Q(stale=True) | young_and_open).order_by("rolled_at", "hour")
    for hour in list(again[:MAX_RESETTLE_PER_RUN].values_list("hour", flat=True)):
        roll(start=hour, stop=hour + HOUR, now=now)
        count += 1
    return count
