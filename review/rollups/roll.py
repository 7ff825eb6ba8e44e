"""Rolling the hours of reviews: replace their hourly rows (`review_hours_roll`), re-sum their
UTC days (`review_days_roll`), and the sweep's step (`review_rollups_advance`) under the review
roll lock (REVIEW_ROLL_LOCK)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from django.db import transaction
from django.db.models import Sum

from review.models import (
    ReviewDaily,
    ReviewHourly,
    ReviewRequest,
    ReviewRolledHour,
    ReviewStatus,
    ReviewTimeDaily,
    ReviewTimeHourly,
)
from review.rollups.aggregation import COUNTS, facts, fold
from tasks.rollups import DAY, HOUR, day_floor, hour_floor, hours_advance, roll_lock

# The lock a review roll holds, and a change marking an hour stale waits for (roll_lock).
REVIEW_ROLL_LOCK = "review-rollups"


def review_hours_roll(*, start: datetime, stop: datetime, now: datetime) -> None:
    """Replace the roll-up rows of the hours in [start, stop) (hour-aligned). Called under the
    review roll lock (review_rollups_advance), so that its reads and writes are one
    transaction no change can slip between unmarked."""
    counts, hists, _ = fold(facts(((start, stop),)), hourly=True)
    pending = Counter(
        hour_floor(at)
        for at in ReviewRequest.objects.filter(
            requested_at__gte=start, requested_at__lt=stop, status=ReviewStatus.PENDING
        ).values_list("requested_at", flat=True)
    )
    hours = []
    at = start
    while at < stop:
        hours.append(at)
        at += HOUR
    with transaction.atomic():
        for model in (ReviewHourly, ReviewTimeHourly, ReviewRolledHour):
            model.objects.filter(hour__gte=start, hour__lt=stop).delete()
        ReviewHourly.objects.bulk_create(
            ReviewHourly(hour=hour, dim=dim, key=key[:150], **{c: n[c] for c in COUNTS})
            for (hour, dim, key), n in counts.items()
            if hour is not None  # folded hourly: every key has its hour
        )
        ReviewTimeHourly.objects.bulk_create(
            ReviewTimeHourly(hour=hour, dim=dim, key=key[:150], kind=kind, bucket=bucket, reviews=n)
            for ((hour, dim, key), kind), histogram in hists.items()
            if hour is not None
            for bucket, n in histogram.items()
        )
        ReviewRolledHour.objects.bulk_create(
            ReviewRolledHour(hour=hour, pending=pending.get(hour, 0), rolled_at=now)
            for hour in hours
        )
        review_days_roll(days=sorted({day_floor(hour) for hour in hours}))


# The daily sums and the hourly roll-ups they sum.
DAILY = ((ReviewHourly, ReviewDaily), (ReviewTimeHourly, ReviewTimeDaily))


def review_days_roll(*, days: list[datetime]) -> None:
    """Replace the daily sums of these UTC days from their rolled hours (in the caller's
    transaction): a day's sum follows each roll of one of its hours."""
    ReviewDaily.objects.filter(day__in=days).delete()
    ReviewTimeDaily.objects.filter(day__in=days).delete()
    for day in days:
        hours = {"hour__gte": day, "hour__lt": day + DAY}
        ReviewDaily.objects.bulk_create(
            ReviewDaily(
                day=day, dim=row["dim"], key=row["key"], **{c: row[f"sum_{c}"] for c in COUNTS}
            )
            for row in ReviewHourly.objects.filter(**hours)
            .values("dim", "key")
            .annotate(**{f"sum_{c}": Sum(c) for c in COUNTS})
            .order_by()
        )
        histograms: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
        for row in (
            ReviewTimeHourly.objects.filter(**hours)
            .values("dim", "key", "kind", "bucket")
            .annotate(n=Sum("reviews"))
            .order_by()
        ):
            histograms[(row["dim"], row["key"], row["kind"])][str(row["bucket"])] = row["n"]
        ReviewTimeDaily.objects.bulk_create(
            ReviewTimeDaily(day=day, dim=dim, key=key, kind=kind, histogram=histogram)
            for (dim, key, kind), histogram in histograms.items()
        )


def review_rollups_advance(*, now: datetime) -> int:
    """The sweep's step: roll the next finished hours of reviews, then the stale ones and the
    young ones with pending reviews. Returns how many hours were rolled. Safe to run from
    several sweepers at once (one rolls, the others skip)."""
    with transaction.atomic():
        if not roll_lock(name=REVIEW_ROLL_LOCK):
            return 0
        last = ReviewRolledHour.objects.order_by("-hour").values_list("hour", flat=True).first()
        if last is None:
            first = ReviewRequest.objects.order_by("requested_at").values_list(
                "requested_at", flat=True
            )
            oldest = first.first()
            if oldest is None:
                return 0
            start = hour_floor(oldest)
        else:
            start = last + HOUR
        return hours_advance(
            start=start,
            now=now,
            rolled=ReviewRolledHour,
            open_field="pending",
            roll=review_hours_roll,
        )
