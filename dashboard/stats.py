"""Failure statistics: selectors computed by SQL aggregation over a time window.

Nothing here loads individual rows into Python. Tool-call statistics read the window's whole
hours from the roll-ups the sweep maintains (tasks.rollups) and only the rest of the window
from ToolCall, then merge the two GROUP BYs; the duration percentiles are exact
(percentile_cont on PostgreSQL, window functions on SQLite) while no rolled hour is involved,
and merged log-scale histograms otherwise. Tool calls are windowed by `created_at`, tasks by
`finished_at`, reviews by `requested_at`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Max, Min, Q, Sum
from django.db.models.functions import Trunc

from dashboard.windows import Window
from review.models import ReviewRequest, ReviewStatus
from tasks.errors import error_normalise
from tasks.models import (
    Task,
    ToolCall,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStatus,
    ToolCallStepHourly,
)
from tasks.rollups import (
    FAILED_CALL,
    SETTLED_CALL,
    bucket_value,
    duration_bucket,
    hour_ceil,
    hour_floor,
    rolled_span,
)
from tasks.states import TERMINAL, TaskStatus

S = ToolCallStatus

FAILURE_GROUPS_LIMIT = 50


def _rate(failed: int, total: int) -> float | None:
    return round(failed / total, 4) if total else None


@dataclass(frozen=True)
class _Parts:
    """A window cut into whole hours the roll-ups cover (`rolled`, or None) and the ranges
    read from ToolCall itself (`raw`): the window's ragged start, and the hours not rolled yet."""

    rolled: tuple[datetime, datetime] | None
    raw: tuple[tuple[datetime, datetime], ...]


def _parts(window: Window) -> _Parts:
    span = rolled_span()
    if span is not None:
        start = max(hour_ceil(window.since), span[0])
        stop = min(hour_floor(window.until), span[1])
        if start < stop:
            raw = ((window.since, start), (stop, window.until))
            return _Parts(rolled=(start, stop), raw=tuple((a, b) for a, b in raw if a < b))
    return _Parts(rolled=None, raw=((window.since, window.until),))


def _settled_calls(parts: _Parts):
    in_ranges = Q()
    for since, until in parts.raw:
        in_ranges |= Q(created_at__gte=since, created_at__lt=until)
    return ToolCall.objects.filter(in_ranges, status__in=SETTLED_CALL)


def _rolled(
    model,
    parts: _Parts,
    *,
    keys: tuple[str, ...],
    where: Q | None = None,
    bucket: Any = None,
    **sums: Any,
) -> list[dict[str, Any]]:
    """GROUP BY `keys` over the roll-up rows of the window's rolled hours (narrowed by `where`;
    `bucket`: an expression to group by as "bucket"), with `sums` ({name: aggregate}) named as
    in the raw queries."""
    if parts.rolled is None:
        return []
    rows = model.objects.filter(where or Q(), hour__gte=parts.rolled[0], hour__lt=parts.rolled[1])
    if bucket is not None:
        rows = rows.annotate(bucket=bucket)
    rows = (
        rows.values(*keys)
        .annotate(**{f"sum_{name}": aggregate for name, aggregate in sums.items()})
        .order_by()
    )
    return [
        {**{key: row[key] for key in keys}, **{name: row[f"sum_{name}"] for name in sums}}
        for row in rows
    ]


def _failure_counts() -> dict[str, Any]:
    # COUNT(*) / COUNT(status): columns of toolcall_stats, so PostgreSQL answers the window
    # with an index-only scan.
    return {"calls": Count("*"), "failed": Count("status", filter=Q(status__in=FAILED_CALL))}


def _rolled_counts() -> dict[str, Any]:
    return {"calls": Sum("calls"), "failed": Sum("calls", filter=Q(status__in=FAILED_CALL))}


def _merge(rows, key: tuple[str, ...], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Sum `fields` of rows (from the raw calls and from the roll-ups) with equal `key`,
    sorted by key."""
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        k = tuple(row[name] for name in key)
        into = merged.setdefault(
            k, {**{name: row[name] for name in key}, **dict.fromkeys(fields, 0)}
        )
        for name in fields:
            into[name] += row[name] or 0
    return [merged[k] for k in sorted(merged)]


def _with_rate(rows) -> list[dict[str, Any]]:
    return [{**row, "rate": _rate(row["failed"], row["calls"])} for row in rows]


def failure_rate_by_tool(
    window: Window, over_time: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """[{tool, calls, failed, rate}] — settled tool calls per tool: the sums of the per-bucket
    rows of failure_rate_over_time (pass them in to save a scan of the window)."""
    rows = over_time if over_time is not None else failure_rate_over_time(window)
    return _with_rate(_merge(rows, ("tool",), ("calls", "failed")))


def failure_rate_by_mcp_server(by_tool: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{server, tools, calls, failed, rate}] — the per-tool rows of MCP tools
    (`<server>__<tool>`) summed per server."""
    rows = [
        {"server": row["tool"].partition("__")[0], "tools": 1, **row}
        for row in by_tool
        if "__" in row["tool"].strip("_")
    ]
    return _with_rate(_merge(rows, ("server",), ("tools", "calls", "failed")))


def failure_rate_by_step(window: Window, *, parts: _Parts | None = None) -> list[dict[str, Any]]:
    """[{step_index, calls, failed, rate}] — settled tool calls per step index."""
    parts = parts or _parts(window)
    raw = _settled_calls(parts).values("step_index").annotate(**_failure_counts()).order_by()
    rolled = _rolled(
        ToolCallStepHourly,
        parts,
        keys=("step_index",),
        calls=Sum("calls"),
        failed=Sum("failed"),
    )
    return _with_rate(_merge([*raw, *rolled], ("step_index",), ("calls", "failed")))


def failure_rate_over_time(window: Window, *, parts: _Parts | None = None) -> list[dict[str, Any]]:
    """[{tool, bucket, calls, failed, rate}] — per tool and hour/day bucket."""
    parts = parts or _parts(window)
    raw = (
        _settled_calls(parts)
        .annotate(bucket=Trunc("created_at", window.bucket))
        .values("tool", "bucket")
        .annotate(**_failure_counts())
        .order_by()
    )
    rolled = _rolled(
        ToolCallHourly,
        parts,
        keys=("tool", "bucket"),
        bucket=Trunc("hour", window.bucket),
        **_rolled_counts(),
    )
    rows = _merge([*raw, *rolled], ("bucket", "tool"), ("calls", "failed"))
    return _with_rate({"tool": r["tool"], "bucket": r["bucket"], **r} for r in rows)


def error_heatmap(window: Window, *, parts: _Parts | None = None) -> list[dict[str, Any]]:
    """[{tool, error_class, failed}] — failed tool calls by tool × error class."""
    parts = parts or _parts(window)
    raw = (
        _settled_calls(parts)
        .filter(status__in=FAILED_CALL)
        .values("tool", "error_class")
        .annotate(failed=Count("*"))
        .order_by()
    )
    rolled = _rolled(
        ToolCallHourly,
        parts,
        keys=("tool", "error_class"),
        where=Q(status__in=FAILED_CALL),
        failed=Sum("calls"),
    )
    return _merge([*raw, *rolled], ("tool", "error_class"), ("failed",))


def retry_distribution(window: Window, *, parts: _Parts | None = None) -> list[dict[str, Any]]:
    """[{retries, calls, succeeded, success_rate}] — executed calls by how many times they were
    retried (attempts - 1), and how many of those finally succeeded."""
    parts = parts or _parts(window)
    raw = (
        _settled_calls(parts)
        .filter(attempts__gte=1)
        .values("attempts")
        .annotate(calls=Count("*"), succeeded=Count("status", filter=Q(status=S.SUCCEEDED)))
        .order_by()
    )
    rolled = _rolled(
        ToolCallHourly,
        parts,
        keys=("attempts",),
        where=Q(attempts__gte=1),
        calls=Sum("calls"),
        succeeded=Sum("calls", filter=Q(status=S.SUCCEEDED)),
    )
    return [
        {
            "retries": row["attempts"] - 1,
            "calls": row["calls"],
            "succeeded": row["succeeded"],
            "success_rate": _rate(row["succeeded"], row["calls"]),
        }
        for row in _merge([*raw, *rolled], ("attempts",), ("calls", "succeeded"))
    ]


class PercentileCont(Aggregate):
    """PostgreSQL's ordered-set aggregate: percentile_cont(f) WITHIN GROUP (ORDER BY expr)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), **extra)


# percentile_cont by hand for SQLite: rank the durations per tool with window functions, then
# interpolate between the two ranks around (n - 1) * f. One row per tool leaves the database.
_SQLITE_PERCENTILES = """
WITH ranked AS (
    SELECT tool, duration_ms AS d,
           ROW_NUMBER() OVER (PARTITION BY tool ORDER BY duration_ms) - 1 AS i,
           COUNT(*) OVER (PARTITION BY tool) AS n
    FROM {table}
    WHERE created_at >= %s AND created_at < %s AND duration_ms IS NOT NULL
      AND status IN ({statuses})
), marks AS (
    SELECT tool, d, i, n, (n - 1) * 0.5 AS p50, (n - 1) * 0.95 AS p95 FROM ranked
), bounds AS (
    SELECT tool, n,
           MAX(CASE WHEN i = CAST(p50 AS INTEGER) THEN d END) AS lo50,
           MAX(CASE WHEN i = CAST(p50 AS INTEGER) + 1 THEN d END) AS hi50,
           MAX(p50 - CAST(p50 AS INTEGER)) AS f50,
           MAX(CASE WHEN i = CAST(p95 AS INTEGER) THEN d END) AS lo95,
           MAX(CASE WHEN i = CAST(p95 AS INTEGER) + 1 THEN d END) AS hi95,
           MAX(p95 - CAST(p95 AS INTEGER)) AS f95
    FROM marks GROUP BY tool, n
)
SELECT tool, n,
       lo50 + f50 * (COALESCE(hi50, lo50) - lo50),
       lo95 + f95 * (COALESCE(hi95, lo95) - lo95)
FROM bounds ORDER BY tool
"""


def sqlite_percentiles_sql(*, table: str, statuses: int) -> str:
    """The SQLite query, parameters: since, until, then `statuses` status values."""
    return _SQLITE_PERCENTILES.format(table=table, statuses=", ".join(["%s"] * statuses))


def _histogram_percentile(histogram: list[tuple[int, int]], fraction: float) -> float:
    """percentile_cont over a sorted [(bucket, count)] histogram: interpolated between the
    durations at the ranks around (n - 1) * fraction, each read as its bucket's middle."""
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


def _duration_histograms(parts: _Parts) -> list[dict[str, Any]]:
    raw = (
        _settled_calls(parts)
        .filter(duration_ms__isnull=False)
        .annotate(bucket=duration_bucket())
        .values("tool", "bucket")
        .annotate(calls=Count("*"))
        .order_by()
    )
    rolled = _rolled(ToolCallDurationHourly, parts, keys=("tool", "bucket"), calls=Sum("calls"))
    rows = [{**row, "bucket": int(row["bucket"])} for row in [*raw, *rolled]]
    by_tool: dict[str, list[tuple[int, int]]] = {}
    for row in _merge(rows, ("tool", "bucket"), ("calls",)):
        by_tool.setdefault(row["tool"], []).append((row["bucket"], row["calls"]))
    return [
        {
            "tool": tool,
            "calls": sum(n for _, n in histogram),
            "p50_ms": round(_histogram_percentile(histogram, 0.5), 3),
            "p95_ms": round(_histogram_percentile(histogram, 0.95), 3),
        }
        for tool, histogram in by_tool.items()
    ]


def duration_percentiles(window: Window, *, parts: _Parts | None = None) -> list[dict[str, Any]]:
    """[{tool, calls, p50_ms, p95_ms}] over settled calls with a measured duration.

    Exact (percentile_cont) while the window holds no rolled-up hour; otherwise read from the
    merged log-scale histograms (within 4.4% of the exact figure, tasks.rollups)."""
    parts = parts or _parts(window)
    if parts.rolled is not None:
        return _duration_histograms(parts)
    if connection.vendor == "postgresql":
        rows = (
            _settled_calls(parts)
            .filter(duration_ms__isnull=False)
            .values("tool")
            .annotate(
                calls=Count("*"),
                p50_ms=PercentileCont("duration_ms", 0.5),
                p95_ms=PercentileCont("duration_ms", 0.95),
            )
            .order_by("tool")
        )
        return [
            {**row, "p50_ms": round(row["p50_ms"], 3), "p95_ms": round(row["p95_ms"], 3)}
            for row in rows
        ]
    sql = sqlite_percentiles_sql(
        table=connection.ops.quote_name(ToolCall._meta.db_table), statuses=len(SETTLED_CALL)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [window.since, window.until, *SETTLED_CALL])
        return [
            {"tool": tool, "calls": n, "p50_ms": round(p50, 3), "p95_ms": round(p95, 3)}
            for tool, n, p50, p95 in cursor.fetchall()
        ]


def review_outcomes(window: Window) -> list[dict[str, Any]]:
    """[{tool, approved, edited, rejected, expired, canceled, pending}] — review requests
    opened in the window; `edited` = approved with edited arguments."""
    R = ReviewStatus
    approved = Q(status=R.APPROVED)
    return list(
        ReviewRequest.objects.filter(requested_at__gte=window.since, requested_at__lt=window.until)
        .values("tool")
        .annotate(
            approved=Count("status", filter=approved & Q(edited_arguments__isnull=True)),
            edited=Count("status", filter=approved & Q(edited_arguments__isnull=False)),
            rejected=Count("status", filter=Q(status=R.REJECTED)),
            expired=Count("status", filter=Q(status=R.EXPIRED)),
            canceled=Count("status", filter=Q(status=R.CANCELED)),
            pending=Count("status", filter=Q(status=R.PENDING)),
        )
        .order_by("tool")
    )


def _finished(window: Window):
    return Task.objects.filter(finished_at__gte=window.since, finished_at__lt=window.until)


def failure_groups(window: Window, *, limit: int = FAILURE_GROUPS_LIMIT) -> list[dict[str, Any]]:
    """[{fingerprint, error_class, message, tasks, first_seen, last_seen}] — failed tasks
    grouped by error fingerprint, largest group first."""
    rows = (
        _finished(window)
        .filter(status=TaskStatus.FAILED)
        .values("error_fingerprint")
        .annotate(
            tasks=Count("*"),
            first_seen=Min("finished_at"),
            last_seen=Max("finished_at"),
            error_class=Max("error_class"),
            sample=Max("error_message"),
        )
        .order_by("-tasks", "-last_seen")[:limit]
    )
    return [
        {
            "fingerprint": row["error_fingerprint"],
            "error_class": row["error_class"],
            "message": error_normalise(row["sample"]),
            "tasks": row["tasks"],
            "first_seen": row["first_seen"],
            "last_seen": row["last_seen"],
        }
        for row in rows
    ]


def task_outcomes(window: Window) -> dict[str, Any]:
    """Tasks that reached a terminal state in the window: counts per status, successes split
    into clean ones and those after failed tool calls, and the failure rate
    failed / (succeeded + failed) — operator cancels are not agent failures."""
    counts = dict(
        _finished(window)
        .filter(status__in=TERMINAL)
        .values_list("status")
        .annotate(n=Count("*"))
        .order_by()
    )
    succeeded = counts.get(TaskStatus.SUCCEEDED, 0)
    failed = counts.get(TaskStatus.FAILED, 0)
    rate = _rate(failed, succeeded + failed)
    # A tool call failed (the model saw the error and went on) or an attempt failed and was
    # retried: a success that needed it is not a clean one (`calls_failed`, set as the task
    # finished; a partial index answers the count).
    after_failures = (
        _finished(window).filter(status=TaskStatus.SUCCEEDED, calls_failed=True).count()
        if succeeded
        else 0
    )
    return {
        "succeeded": succeeded,
        "succeeded_clean": succeeded - after_failures,
        "succeeded_after_failed_calls": after_failures,
        "failed": failed,
        "canceled": counts.get(TaskStatus.CANCELED, 0),
        "failure_rate": rate,
        "failure_rate_pct": None if rate is None else round(rate * 100, 1),
    }


def error_class_mix(window: Window) -> list[dict[str, Any]]:
    """[{error_class, tasks}] — failed tasks in the window by error class, largest first."""
    return list(
        _finished(window)
        .filter(status=TaskStatus.FAILED)
        .values("error_class")
        .annotate(tasks=Count("*"))
        .order_by("-tasks", "error_class")
    )


# The tables of the statistics (rows of dicts), by their key in failure_statistics().
TABLES: dict[str, Callable[[Window], list[dict[str, Any]]]] = {
    "by_tool": failure_rate_by_tool,
    "by_step": failure_rate_by_step,
    "over_time": failure_rate_over_time,
    "heatmap": error_heatmap,
    "retries": retry_distribution,
    "durations": duration_percentiles,
    "reviews": review_outcomes,
    "groups": failure_groups,
}


# The tables read from tool calls (and their roll-ups): they take the window's parts.
_CALL_TABLES = {"by_step", "over_time", "heatmap", "retries", "durations"}


def failure_statistics(window: Window) -> dict[str, Any]:
    """Everything the statistics page and `GET /api/v1/stats/failures` show."""
    parts = _parts(window)
    tables = {
        key: table(window, parts=parts) if key in _CALL_TABLES else table(window)
        for key, table in TABLES.items()
        if key != "by_tool"
    }
    return {
        "window": {"since": window.since, "until": window.until, "bucket": window.bucket},
        "tasks": task_outcomes(window),
        "by_tool": (by_tool := failure_rate_by_tool(window, over_time=tables["over_time"])),
        "by_mcp_server": failure_rate_by_mcp_server(by_tool),
        **tables,
    }
