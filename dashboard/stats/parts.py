"""A window cut into the hours the roll-ups cover and the ranges read from the rows
themselves (WindowParts), and what every table does with the two: group the roll-up rows
(`rolled_groups`), read the raw settled calls (`raw_settled_calls`), merge both (`merge`), and
the ratio and histogram percentile they report."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from dashboard.windows import Window
from tasks.models import ToolCall
from tasks.models.rollups import Hourly
from tasks.rollups import (
    CANCELED_CALL,
    DAILY_OF,
    hour_ceil,
    hour_floor,
    in_ranges,
    rolled_days_and_hours,
    rolled_span,
    settled_calls,
)


def ratio(failed: int, total: int) -> float | None:
    return round(failed / total, 4) if total else None


@dataclass(frozen=True)
class WindowParts:
    """A window cut into whole hours the roll-ups cover (`rolled`, or None) and the ranges
    read from ToolCall and Task themselves (`raw`): the window's ragged start, and the hours
    not rolled yet. Compute it once per page (`window_parts`) and pass it to every table."""

    rolled: tuple[datetime, datetime] | None
    raw: tuple[tuple[datetime, datetime], ...]


def window_parts(window: Window) -> WindowParts:
    span = rolled_span()
    if span is not None:
        start = max(hour_ceil(window.since), span[0])
        stop = min(hour_floor(window.until), span[1])
        if start < stop:
            raw = ((window.since, start), (stop, window.until))
            return WindowParts(rolled=(start, stop), raw=tuple((a, b) for a, b in raw if a < b))
    return WindowParts(rolled=None, raw=((window.since, window.until),))


def raw_settled_calls(parts: WindowParts):
    return settled_calls(ToolCall.objects.filter(in_ranges("created_at", parts.raw)))


# The roll-up rows of calls with a tool outcome (ToolCallHourly keeps canceled calls apart by
# status and error class; the step and duration roll-ups never hold them).
ROLLED_SETTLED = ~CANCELED_CALL


def rolled_groups(
    model: type[Hourly],
    parts: WindowParts,
    *,
    keys: tuple[str, ...],
    where: Q | None = None,
    bucket: Callable[[str], Any] | None = None,
    hourly: bool = False,
    **sums: Any,
) -> list[dict[str, Any]]:
    """GROUP BY `keys` over the roll-up rows of the window's rolled hours (narrowed by `where`;
    `bucket`: an expression of the period's column to group by as "bucket"), with `sums`
    ({name: aggregate}) named as in the raw queries. The whole UTC days among those hours are
    read from the daily sums of `model` (tasks.rollups.DAILY), the other hours from `model`
    itself; `hourly` reads every hour from `model` (hourly buckets)."""
    if parts.rolled is None:
        return []
    days, hours = (None, (parts.rolled,)) if hourly else rolled_days_and_hours(*parts.rolled)
    # (the rows, their period's column): the hours, and the days' sums.
    tables: list[tuple[QuerySet[Any], str]] = [
        (model._default_manager.filter(in_ranges("hour", hours)), "hour")
    ]
    if days is not None:
        daily = DAILY_OF[model].daily._default_manager.filter(day__gte=days[0], day__lt=days[1])
        tables.append((daily, "day"))
    queries = []
    for rows, period in tables:
        rows = rows.filter(where or Q())
        if bucket is not None:
            rows = rows.annotate(bucket=bucket(period))
        queries.append(
            rows.values(*keys)
            .annotate(**{f"sum_{name}": aggregate for name, aggregate in sums.items()})
            .order_by()
        )
    # One round trip: the days' and the hours' groups, merged by the caller.
    rows = queries[0].union(*queries[1:], all=True) if len(queries) > 1 else queries[0]
    return [
        {**{key: row[key] for key in keys}, **{name: row[f"sum_{name}"] for name in sums}}
        for row in rows
    ]


def _sum(a: Any, b: Any) -> Any:
    return (a or 0) + (b or 0)


def merge(
    rows: Iterable[Mapping[str, Any]],
    key: tuple[str, ...],
    fields: tuple[str, ...],
    combine: Mapping[str, Callable[[Any, Any], Any]] | None = None,
) -> list[dict[str, Any]]:
    """Combine `fields` of rows (from the raw rows and from the roll-ups) with equal `key`,
    sorted by key: summed, unless `combine` names another function for a field."""
    combine = combine or {}
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        k = tuple(row[name] for name in key)
        into = merged.get(k)
        if into is None:
            merged[k] = {name: row[name] for name in key} | {
                name: _sum(row[name], 0) if name not in combine else row[name] for name in fields
            }
            continue
        for name in fields:
            into[name] = combine.get(name, _sum)(into[name], row[name])
    return [merged[k] for k in sorted(merged)]
