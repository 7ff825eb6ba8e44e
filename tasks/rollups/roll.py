"""Rolling hours: replace the hourly roll-up rows of a range of hours (`hours_roll`) and re-sum
their UTC days (`days_roll`)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Count, Q
from django.db.models.functions import Trunc, TruncDay

from tasks.models import (
    RolledHour,
    TaskHourly,
    TaskWaitHourly,
    ToolCall,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStepHourly,
)
from tasks.rollups.periods import day_floor, in_ranges
from tasks.rollups.queries import (
    finished_tasks,
    log_bucket,
    settled_calls,
    task_aggregates,
    wait_histogram,
)
from tasks.rollups.tables import (
    DAILY,
    DAY,
    FAILED_CALL,
    FINAL_CALL,
    HOUR,
    ROLLUP_MODELS,
    TASK_KEYS,
    WAIT_FIELDS,
)


def _hour_of(field: str) -> Trunc:
    return Trunc(field, "hour", tzinfo=UTC)


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
        table.daily._default_manager.filter(day__in=days).delete()
        rows = (
            table.hourly._default_manager.filter(
                in_ranges("hour", tuple((day, day + DAY) for day in days))
            )
            .annotate(rolled_day=TruncDay("hour", tzinfo=UTC))
            .values("rolled_day", *table.keys)
            .annotate(**{f"sum_{c}": aggregate(c) for c, aggregate in table.columns.items()})
            .order_by()
        )
        table.daily._default_manager.bulk_create(
            table.daily(
                day=row["rolled_day"],
                **{key: row[key] for key in table.keys},
                **{c: row[f"sum_{c}"] for c in table.columns},
            )
            for row in rows
        )
