"""Hours and UTC days: their bounds, the span the roll-ups cover (`rolled_span`), rolled hours
cut into whole days and the hours around them (`rolled_days_and_hours`), and ranges as a
filter (`in_ranges`)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Max, Min, Q

from tasks.models import RolledHour
from tasks.rollups.tables import DAY, HOUR


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
