"""Statistics roll-ups: the sweep folds settled tool calls into per-hour rows
(`ToolCallHourly`, `ToolCallStepHourly`, `ToolCallDurationHourly`) so that the failure
statistics of any window read a few thousand summary rows instead of every call in it.

An hour is rolled once it ended ROLL_LAG ago, oldest first, at most MAX_HOURS_PER_RUN per sweep
(a first sweep over a large history backfills in several runs). Rolling an hour replaces its
rows, so rolling again is always safe. Calls without a final outcome when their hour is rolled
(awaiting review, retry wait, running, unknown outcome) are counted in `RolledHour.unsettled`,
and such hours are rolled again (every RESETTLE_EVERY) while they are younger than
RESETTLE_WITHIN: a call that settles later still reaches the statistics. (A call that settles
later than that is not counted; nor is a call whose final status an operator changes.)

The statistics (`dashboard.stats`) read rolled hours from here and the rest of a window —
the part of an hour at its start and the hours not rolled yet at its end — from ToolCall.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Count, F, FloatField, Max, Min, Q, Value
from django.db.models.functions import Floor, Greatest, Ln, Trunc

from tasks.models import (
    RolledHour,
    SweepRun,
    ToolCall,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStatus,
    ToolCallStepHourly,
)

S = ToolCallStatus
FAILED_CALL = (S.FAILED, S.TIMED_OUT, S.UNKNOWN_OUTCOME)
# Calls with an outcome. Denied / rejected calls are policy decisions, not tool failures.
SETTLED_CALL = (S.SUCCEEDED, *FAILED_CALL)
# Statuses no call leaves again (an unknown outcome is settled for the statistics but an
# operator's decision may still turn it into a success or a failure).
FINAL_CALL = (S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.DENIED, S.REJECTED)

HOUR = timedelta(hours=1)
ROLL_LAG = timedelta(minutes=5)
RESETTLE_WITHIN = timedelta(days=2)
RESETTLE_EVERY = timedelta(minutes=2)
MAX_HOURS_PER_RUN = 48
MAX_RESETTLE_PER_RUN = 48
# Duration histogram resolution: BUCKETS_PER_DOUBLING buckets per factor of two, so a bucket's
# geometric middle is within 2^(1/16) - 1 ≈ 4.4% of every duration in it.
BUCKETS_PER_DOUBLING = 8
MIN_DURATION_MS = 0.001
_LOCK_NAME = "rollups"


def hour_floor(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_ceil(at: datetime) -> datetime:
    floor = hour_floor(at)
    return floor if floor == at else floor + HOUR


def duration_bucket():
    """SQL expression: the histogram bucket of `duration_ms` (floor(log2(ms) * per doubling))."""
    return Floor(
        Ln(Greatest(F("duration_ms"), Value(MIN_DURATION_MS), output_field=FloatField()))
        * Value(BUCKETS_PER_DOUBLING / math.log(2))
    )


def bucket_value(bucket: int) -> float:
    """The duration (ms) a bucket stands for: its geometric middle."""
    return 2 ** ((bucket + 0.5) / BUCKETS_PER_DOUBLING)


def _hour_of_created():
    return Trunc("created_at", "hour", tzinfo=UTC)


def rolled_span() -> tuple[datetime, datetime] | None:
    """[first, end) of the hours the roll-ups cover, or None before the first roll."""
    span = RolledHour.objects.aggregate(first=Min("hour"), last=Max("hour"))
    if span["first"] is None:
        return None
    return span["first"], span["last"] + HOUR


def toolcall_hours_roll(*, start: datetime, stop: datetime, now: datetime) -> None:
    """Replace the roll-up rows of the hours in [start, stop) (hour-aligned) by aggregates of
    their tool calls, in one transaction."""
    calls = ToolCall.objects.filter(created_at__gte=start, created_at__lt=stop)
    settled = calls.filter(status__in=SETTLED_CALL).annotate(hour=_hour_of_created())
    by_key = settled.values("hour", "tool", "status", "error_class", "attempts").annotate(
        n=Count("*")
    )
    by_step = settled.values("hour", "step_index").annotate(
        n=Count("*"), failed=Count("status", filter=Q(status__in=FAILED_CALL))
    )
    by_duration = (
        settled.filter(duration_ms__isnull=False)
        .annotate(bucket=duration_bucket())
        .values("hour", "tool", "bucket")
        .annotate(n=Count("*"))
    )
    unsettled = dict(
        calls.exclude(status__in=FINAL_CALL)
        .annotate(hour=_hour_of_created())
        .values_list("hour")
        .annotate(n=Count("*"))
        .order_by()
    )
    hours = []
    at = start
    while at < stop:
        hours.append(at)
        at += HOUR
    with transaction.atomic():
        for model in (ToolCallHourly, ToolCallStepHourly, ToolCallDurationHourly, RolledHour):
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
        RolledHour.objects.bulk_create(
            RolledHour(hour=hour, unsettled=unsettled.get(hour, 0), rolled_at=now) for hour in hours
        )


def _roll_lock() -> bool:
    """Take the roll-up lock for the current transaction; False if another sweeper holds it.
    Lock contract: the SweepRun row named "rollups" (select_for_update, skip_locked)."""
    SweepRun.objects.get_or_create(
        name=_LOCK_NAME, defaults={"started_at": _epoch(), "finished_at": _epoch()}
    )
    return SweepRun.objects.select_for_update(skip_locked=True).filter(name=_LOCK_NAME).exists()


def _epoch() -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC)


def rollups_advance(*, now: datetime) -> int:
    """The sweep's step: roll the next finished hours, then the young hours that had unsettled
    calls. Returns how many hours were rolled. Safe to run from several sweepers at once (one
    rolls, the others skip)."""
    with transaction.atomic():
        if not _roll_lock():
            return 0
        end = hour_floor(now - ROLL_LAG)
        span = rolled_span()
        if span is None:
            oldest = ToolCall.objects.aggregate(at=Min("created_at"))["at"]
            if oldest is None:
                return 0
            start = hour_floor(oldest)
        else:
            start = span[1]
        stop = min(end, start + MAX_HOURS_PER_RUN * HOUR)
        rolled = 0
        if start < stop:
            toolcall_hours_roll(start=start, stop=stop, now=now)
            rolled += int((stop - start) / HOUR)
        young = RolledHour.objects.filter(
            unsettled__gt=0, hour__gte=now - RESETTLE_WITHIN, rolled_at__lte=now - RESETTLE_EVERY
        ).order_by("rolled_at", "hour")[:MAX_RESETTLE_PER_RUN]
        for hour in list(young.values_list("hour", flat=True)):
            toolcall_hours_roll(start=hour, stop=hour + HOUR, now=now)
            rolled += 1
    return rolled
