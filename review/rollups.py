"""Review SLA statistics (`/stats/reviews/`, `GET /api/v1/stats/reviews`) and their roll-ups.

Reviews are windowed by `requested_at`. Per rule (a review counts for each rule it matched),
tool, operator (who decided; "" for nobody) and `via` (where the decision was made): reviews
opened, approved, rejected, expired, approvals of edited arguments, notifications that failed,
decisions made without the decider having viewed the review page, and log-scale histograms of
the seconds to the first view by a user who may decide, to the decision, and on the page before
deciding. The review page always shows the diff or command under review, so "viewed the page"
is the signal for "opened the diff"; decisions made without a page view (the API, a link in a
message) count as `unviewed`, by `via`.

The sweep rolls each hour once it ended ROLL_LAG ago into ReviewHourly / ReviewTimeHourly
(`review_rollups_advance`). An hour is marked stale when one of its reviews is decided or
expired (review_transition), first viewed (review_viewed) or has a notification fail, and
rolled again; an hour with reviews still pending is also rolled again every RESETTLE_EVERY
while it is younger than RESETTLE_WITHIN. A roll holds the review roll lock, and marking an
hour stale waits for it, so a change committed during a roll is rolled by the next sweep. The
statistics read the rolled hours and the rest of
the window (its ragged start, the hours not rolled yet) from the reviews themselves, through the
same aggregation, so both agree.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Min, OuterRef, QuerySet, Subquery, Sum
from django.utils import timezone

from review.models import (
    DecisionReceipt,
    Notification,
    NotificationStatus,
    ReviewDaily,
    ReviewHourly,
    ReviewRequest,
    ReviewRolledHour,
    ReviewStatus,
    ReviewTimeDaily,
    ReviewTimeHourly,
    ReviewView,
)
from tasks.rollups import (
    BUCKETS_PER_DOUBLING,
    DAY,
    HOUR,
    MIN_BUCKETED,
    bucket_value,
    day_floor,
    hour_ceil,
    hour_floor,
    hours_advance,
    in_ranges,
    roll_lock,
    rolled_days_and_hours,
)

DIMS = ("rule", "tool", "operator", "via")
COUNTS = (
    "opened",
    "decided",
    "approved",
    "rejected",
    "expired",
    "edited",
    "notifications_failed",
    "unviewed",
)
TIMES = ("first_view", "decision", "on_page")
# The lock a review roll holds, and a change marking an hour stale waits for (roll_lock).
REVIEW_ROLL_LOCK = "review-rollups"
# Decisions made by a person (a standing rule, the sweep or a recovery decides for nobody).
HUMAN = (ReviewStatus.APPROVED, ReviewStatus.REJECTED, ReviewStatus.RESPONDED)

Key = tuple[datetime | None, str, str]


# --- writes ------------------------------------------------------------------------------------


def review_viewed(*, review: ReviewRequest, user: Any, now: datetime | None = None) -> None:
    """`user`, who may decide, opened the page of `review`: record their first view (once)."""
    if ReviewView.objects.filter(review_id=review.pk, user_id=user.pk).exists():
        return
    ReviewView.objects.bulk_create(
        [ReviewView(review_id=review.pk, user_id=user.pk, first_viewed_at=now or timezone.now())],
        ignore_conflicts=True,
    )
    review_rollups_stale(requested_at=review.requested_at)


def review_rollups_stale(*, requested_at: datetime) -> None:
    """A review opened at `requested_at` changed: roll its hour again.

    Holds the review roll lock until the (caller's) transaction ends, so that no roll can read
    the review before the change and then record the hour as fresh: a roll that already ran
    left a row to mark, a roll that runs next reads the change (as the task roll-ups'
    rollups_task_reopened). Part of the caller's transaction (no savepoint of its own)."""
    with transaction.atomic(savepoint=False):
        roll_lock(name=REVIEW_ROLL_LOCK, wait=True)
        ReviewRolledHour.objects.filter(hour=hour_floor(requested_at)).update(stale=True)


# --- aggregation -------------------------------------------------------------------------------


def _bucket(seconds: float) -> int:
    return math.floor(math.log(max(seconds, MIN_BUCKETED)) * BUCKETS_PER_DOUBLING / math.log(2))


def _facts(ranges: tuple[tuple[datetime, datetime], ...]) -> Iterable[dict[str, Any]]:
    """One dict per review opened in `ranges`, with what the statistics count of it."""
    decider_view = ReviewView.objects.filter(
        review_id=OuterRef("pk"), user_id=OuterRef("decided_by_id")
    ).values("first_viewed_at")[:1]
    via = (
        DecisionReceipt.objects.filter(review_id=OuterRef("pk")).order_by("-seq").values("via")[:1]
    )
    failed = (
        Notification.objects.filter(review_id=OuterRef("pk"), status=NotificationStatus.FAILED)
        .order_by()
        .values("review_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    rows = (
        ReviewRequest.objects.filter(in_ranges("requested_at", ranges))
        .annotate(
            first_view=Min("views__first_viewed_at"),
            decider_view=Subquery(decider_view),
            via=Subquery(via),
            failed=Subquery(failed),
        )
        .values(
            "requested_at",
            "tool",
            "status",
            "matched_rules",
            "decided_at",
            "decided_by__username",
            "edited_arguments",
            "first_view",
            "decider_view",
            "via",
            "failed",
        )
        .order_by()
    )
    yield from rows.iterator(chunk_size=2000)


def _fold(
    facts: Iterable[dict[str, Any]], *, hourly: bool
) -> tuple[dict[Key, Counter], dict[tuple[Key, str], Counter], int]:
    """(counts by (hour, dim, key), histograms by ((hour, dim, key), kind), pending reviews)."""
    counts: dict[Key, Counter] = defaultdict(Counter)
    hists: dict[tuple[Key, str], Counter] = defaultdict(Counter)
    pending = 0
    for fact in facts:
        hour = hour_floor(fact["requested_at"]) if hourly else None
        status = fact["status"]
        pending += status == ReviewStatus.PENDING
        human = status in HUMAN
        decider = (fact["decided_by__username"] or "") if human else ""
        viewed = fact["decider_view"] is not None and fact["decider_view"] <= fact["decided_at"]
        rules = [
            str(rule.get("name", "?")) for rule in fact["matched_rules"] if isinstance(rule, dict)
        ]
        keys = [("rule", rule) for rule in rules or ["(none)"]]
        keys += [("tool", fact["tool"]), ("operator", decider)]
        if human:
            keys.append(("via", fact["via"] or ""))
        # Integers, not booleans: a key of one review shows its counts as they are.
        add = Counter(
            opened=1,
            decided=int(human),
            approved=int(status == ReviewStatus.APPROVED),
            rejected=int(status == ReviewStatus.REJECTED),
            expired=int(status == ReviewStatus.EXPIRED),
            edited=int(status == ReviewStatus.APPROVED and fact["edited_arguments"] is not None),
            notifications_failed=fact["failed"] or 0,
            unviewed=int(human and not viewed),
        )
        times: dict[str, float] = {}
        if fact["first_view"] is not None:
            times["first_view"] = (fact["first_view"] - fact["requested_at"]).total_seconds()
        if human and fact["decided_at"] is not None:
            times["decision"] = (fact["decided_at"] - fact["requested_at"]).total_seconds()
            if viewed:
                times["on_page"] = (fact["decided_at"] - fact["decider_view"]).total_seconds()
        for dim, key in keys:
            counts[(hour, dim, key)].update(add)
            for kind, seconds in times.items():
                hists[((hour, dim, key), kind)][_bucket(seconds)] += 1
    return counts, hists, pending


# --- roll-ups ----------------------------------------------------------------------------------


def review_hours_roll(*, start: datetime, stop: datetime, now: datetime) -> None:
    """Replace the roll-up rows of the hours in [start, stop) (hour-aligned). Called under the
    review roll lock (review_rollups_advance), so that its reads and writes are one
    transaction no change can slip between unmarked."""
    counts, hists, _ = _fold(_facts(((start, stop),)), hourly=True)
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
        )
        ReviewTimeHourly.objects.bulk_create(
            ReviewTimeHourly(hour=hour, dim=dim, key=key[:150], kind=kind, bucket=bucket, reviews=n)
            for ((hour, dim, key), kind), histogram in hists.items()
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


# --- reads -------------------------------------------------------------------------------------


def _percentile(histogram: Counter, fraction: float) -> float | None:
    """percentile_cont over a histogram: interpolated between the values at the ranks around
    (n - 1) * fraction, each read as its bucket's middle (as dashboard.stats does)."""
    ordered = sorted(histogram.items())
    total = sum(n for _, n in ordered)
    if not total:
        return None
    rank = (total - 1) * fraction
    low = int(rank)

    def at(index: int) -> float:
        seen = 0
        for bucket, n in ordered:
            seen += n
            if seen > index:
                return bucket_value(bucket)
        return bucket_value(ordered[-1][0])

    below = at(low)
    return round(below + (rank - low) * (at(low + 1) - below), 1)


def _rolled(
    hourly: type, daily: type, start: datetime, stop: datetime
) -> tuple[QuerySet | None, QuerySet]:
    """The roll-up rows covering the rolled hours [start, stop): the daily sums of the whole
    UTC days inside it (None: there are none), the hourly rows of the hours around them."""
    days, hours = rolled_days_and_hours(start, stop)
    return (
        None if days is None else daily.objects.filter(day__gte=days[0], day__lt=days[1]),
        hourly.objects.filter(in_ranges("hour", hours)),
    )


def review_sla(
    *, since: datetime, until: datetime, rolled: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """{rule, tool, operator, via: [rows]} over reviews opened in [since, until): the counts
    of COUNTS, and p50 / p95 of TIMES (`<kind>_p50_s`, `<kind>_p95_s`; within 4.4%).
    `rolled=False` reads the reviews alone, ignoring the roll-ups (what they must equal)."""
    span = {"first": None}
    if rolled:
        span = ReviewRolledHour.objects.aggregate(first=Min("hour"), last=Max("hour"))
    raw: tuple[tuple[datetime, datetime], ...] = ((since, until),)
    counts: dict[Key, Counter] = defaultdict(Counter)
    hists: dict[tuple[Key, str], Counter] = defaultdict(Counter)
    if span["first"] is not None:
        start = max(hour_ceil(since), span["first"])
        stop = min(hour_floor(until), span["last"] + HOUR)
        if start < stop:
            raw = tuple((a, b) for a, b in ((since, start), (stop, until)) if a < b)
            # Summed over the window by PostgreSQL, its whole days from the daily sums and
            # the hours around them from the hourly ones: a few thousand rows reach Python
            # however many days and reviews the window holds.
            summed = {f"sum_{c}": Sum(c) for c in COUNTS}
            for rows in _rolled(ReviewHourly, ReviewDaily, start, stop):
                if rows is None:
                    continue
                for row in rows.values("dim", "key").annotate(**summed).order_by():
                    counts[(None, row["dim"], row["key"])].update(
                        {c: row[f"sum_{c}"] for c in COUNTS}
                    )
            days, hours = _rolled(ReviewTimeHourly, ReviewTimeDaily, start, stop)
            for dim, key, kind, histogram in (
                [] if days is None else days.values_list("dim", "key", "kind", "histogram")
            ):
                into = hists[((None, dim, key), kind)]
                for bucket, n in histogram.items():
                    into[int(bucket)] += n
            for row in (
                hours.values("dim", "key", "kind", "bucket").annotate(n=Sum("reviews")).order_by()
            ):
                key = (None, row["dim"], row["key"])
                hists[(key, row["kind"])][row["bucket"]] += row["n"]
    if raw:
        raw_counts, raw_hists, _ = _fold(_facts(raw), hourly=False)
        for key, n in raw_counts.items():
            counts[key].update(n)
        for key, histogram in raw_hists.items():
            hists[key].update(histogram)
    tables: dict[str, list[dict[str, Any]]] = {dim: [] for dim in DIMS}
    for (_, dim, key), n in sorted(
        counts.items(), key=lambda item: (-item[1]["opened"], item[0][2])
    ):
        row: dict[str, Any] = {"key": key, **{c: n[c] for c in COUNTS}}
        for kind in TIMES:
            histogram = hists.get(((None, dim, key), kind), Counter())
            row[f"{kind}_p50_s"] = _percentile(histogram, 0.5)
            row[f"{kind}_p95_s"] = _percentile(histogram, 0.95)
        tables[dim].append(row)
    return tables
