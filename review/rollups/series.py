"""The review SLA over time (`review_sla_series`): per hour or UTC day of `requested_at`,
reviews opened, breaches of their target, those still open, and the p50 / p95 time to
decision. Read as review_sla reads its tables: the rolled hours from the roll-ups (whole UTC
days from the daily sums when the buckets are days), the rest of the window from the reviews.
Each review counts once: the rows of one dimension (`tool`) are summed."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from django.db.models import Max, Min, Sum

from review.models import (
    ReviewDaily,
    ReviewHourly,
    ReviewRequest,
    ReviewRolledHour,
    ReviewStatus,
    ReviewTimeDaily,
    ReviewTimeHourly,
)
from review.rollups.aggregation import facts, fold
from review.rollups.sla import percentile
from tasks.rollups import HOUR, day_floor, hour_ceil, hour_floor, in_ranges, rolled_days_and_hours

# Every review has one tool: summing its rows counts each review once.
_ONCE = {"dim": "tool"}


class _Buckets:
    """Sums per bucket of the series, from any part of the window."""

    def __init__(self, of: Callable[[datetime], datetime]) -> None:
        self.of = of
        self.counts: dict[datetime, Counter[str]] = defaultdict(Counter)
        self.times: dict[datetime, Counter[int]] = defaultdict(Counter)

    def add(self, at: datetime, **counts: int) -> None:
        self.counts[self.of(at)].update(counts)

    def add_time(self, at: datetime, bucket: int, reviews: int) -> None:
        self.times[self.of(at)][bucket] += reviews


def _read_rolled(into: _Buckets, start: datetime, stop: datetime, *, daily: bool) -> None:
    days, hours = rolled_days_and_hours(start, stop) if daily else (None, ((start, stop),))
    sums = {"opened": Sum("opened"), "breached": Sum("breached")}
    for rows, period in (
        (ReviewHourly.objects.filter(in_ranges("hour", hours)), "hour"),
        (
            None if days is None else ReviewDaily.objects.filter(day__gte=days[0], day__lt=days[1]),
            "day",
        ),
    ):
        if rows is None:
            continue
        for row in rows.filter(**_ONCE).values(period).annotate(**sums).order_by():
            into.add(row[period], opened=row["opened"], breached=row["breached"])
    for row in (
        ReviewTimeHourly.objects.filter(in_ranges("hour", hours), kind="decision", **_ONCE)
        .values("hour", "bucket")
        .annotate(n=Sum("reviews"))
        .order_by()
    ):
        into.add_time(row["hour"], row["bucket"], row["n"])
    if days is not None:
        for day, histogram in ReviewTimeDaily.objects.filter(
            day__gte=days[0], day__lt=days[1], kind="decision", **_ONCE
        ).values_list("day", "histogram"):
            for bucket, n in histogram.items():
                into.add_time(day, int(bucket), n)
    for hour, pending in ReviewRolledHour.objects.filter(
        hour__gte=start, hour__lt=stop, pending__gt=0
    ).values_list("hour", "pending"):
        into.add(hour, still_open=pending)


def _read_raw(into: _Buckets, ranges: tuple[tuple[datetime, datetime], ...]) -> None:
    counts, hists, _ = fold(facts(ranges), hourly=True)
    # Folded hourly: every key has its hour.
    for (hour, dim, _key), n in counts.items():
        if dim == _ONCE["dim"] and hour is not None:
            into.add(hour, opened=n["opened"], breached=n["breached"])
    for ((hour, dim, _key), kind), histogram in hists.items():
        if dim == _ONCE["dim"] and kind == "decision" and hour is not None:
            for bucket, reviews in histogram.items():
                into.add_time(hour, bucket, reviews)
    pending = ReviewRequest.objects.filter(
        in_ranges("requested_at", ranges), status=ReviewStatus.PENDING
    )
    for at in pending.values_list("requested_at", flat=True):
        into.add(at, still_open=1)


def review_sla_series(
    *, since: datetime, until: datetime, bucket: Literal["hour", "day"]
) -> list[dict[str, Any]]:
    """[{bucket, opened, breached, still_open, decision_p50_s, decision_p95_s}] by bucket start
    (hours, or UTC days), for the buckets with reviews opened in [since, until). `still_open`:
    pending when the hour was last rolled (rolled again while young, and when one is decided)."""
    into = _Buckets(hour_floor if bucket == "hour" else day_floor)
    span = ReviewRolledHour.objects.aggregate(first=Min("hour"), last=Max("hour"))
    raw: tuple[tuple[datetime, datetime], ...] = ((since, until),)
    if span["first"] is not None:
        start = max(hour_ceil(since), span["first"])
        stop = min(hour_floor(until), span["last"] + HOUR)
        if start < stop:
            raw = tuple((a, b) for a, b in ((since, start), (stop, until)) if a < b)
            _read_rolled(into, start, stop, daily=bucket == "day")
    if raw:
        _read_raw(into, raw)
    return [
        {
            "bucket": at,
            "opened": into.counts[at]["opened"],
            "breached": into.counts[at]["breached"],
            "still_open": into.counts[at]["still_open"],
            "decision_p50_s": percentile(into.times[at], 0.5),
            "decision_p95_s": percentile(into.times[at], 0.95),
        }
        for at in sorted(set(into.counts) | set(into.times))
    ]
