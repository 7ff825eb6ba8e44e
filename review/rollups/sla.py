"""Reading the review SLA statistics of a window (`review_sla`): its rolled hours from the
roll-ups (whole UTC days from the daily sums), the rest from the reviews themselves."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Max, Min, QuerySet, Sum

from review.models import (
    ReviewDaily,
    ReviewHourly,
    ReviewRolledHour,
    ReviewTimeDaily,
    ReviewTimeHourly,
)
from review.rollups.aggregation import COUNTS, DIMS, TIMES, Key, facts, fold
from tasks.rollups import (
    HOUR,
    histogram_percentile,
    hour_ceil,
    hour_floor,
    in_ranges,
    rolled_days_and_hours,
)


def percentile(histogram: Counter[int], fraction: float) -> float | None:
    """percentile_cont over a histogram (tasks.rollups.histogram_percentile, as the statistics
    read theirs), rounded to 0.1 s; None for an empty one."""
    ordered = sorted(histogram.items())
    if not sum(n for _, n in ordered):
        return None
    return round(histogram_percentile(ordered, fraction), 1)


def _rolled(
    hourly: type[ReviewHourly] | type[ReviewTimeHourly],
    daily: type[ReviewDaily] | type[ReviewTimeDaily],
    start: datetime,
    stop: datetime,
) -> tuple[QuerySet[Any] | None, QuerySet[Any]]:
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
    counts: dict[Key, Counter[str]] = defaultdict(Counter)
    hists: dict[tuple[Key, str], Counter[int]] = defaultdict(Counter)
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
                for summed_row in rows.values("dim", "key").annotate(**summed).order_by():
                    counts[(None, summed_row["dim"], summed_row["key"])].update(
                        {c: summed_row[f"sum_{c}"] for c in COUNTS}
                    )
            days, hours = _rolled(ReviewTimeHourly, ReviewTimeDaily, start, stop)
            for dim, name, kind, histogram in (
                [] if days is None else days.values_list("dim", "key", "kind", "histogram")
            ):
                into = hists[((None, dim, name), kind)]
                for bucket, n in histogram.items():
                    into[int(bucket)] += n
            for hour_row in (
                hours.values("dim", "key", "kind", "bucket").annotate(n=Sum("reviews")).order_by()
            ):
                at: Key = (None, hour_row["dim"], hour_row["key"])
                hists[(at, hour_row["kind"])][hour_row["bucket"]] += hour_row["n"]
    if raw:
        raw_counts, raw_hists, _ = fold(facts(raw), hourly=False)
        for counted, n in raw_counts.items():
            counts[counted].update(n)
        for hist_key, raw_histogram in raw_hists.items():
            hists[hist_key].update(raw_histogram)
    tables: dict[str, list[dict[str, Any]]] = {dim: [] for dim in DIMS}
    for (_, dim, key), n in sorted(
        counts.items(), key=lambda item: (-item[1]["opened"], item[0][2])
    ):
        row: dict[str, Any] = {"key": key, **{c: n[c] for c in COUNTS}}
        for kind in TIMES:
            histogram = hists.get(((None, dim, key), kind), Counter())
            row[f"{kind}_p50_s"] = percentile(histogram, 0.5)
            row[f"{kind}_p95_s"] = percentile(histogram, 0.95)
        tables[dim].append(row)
    return tables
