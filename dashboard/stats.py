"""Failure statistics: selectors computed by SQL aggregation over a time window.

Nothing here loads individual rows into Python: every function is one GROUP BY (the duration
percentiles use percentile_cont on PostgreSQL and window functions on SQLite). Tool calls are
windowed by `created_at`, tasks by `finished_at`, reviews by `requested_at`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Max, Min, Q
from django.db.models.functions import Trunc

from dashboard.windows import Window
from review.models import ReviewRequest, ReviewStatus
from tasks.errors import error_normalise
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.states import TERMINAL, TaskStatus

S = ToolCallStatus
FAILED_CALL = (S.FAILED, S.TIMED_OUT, S.UNKNOWN_OUTCOME)
# Calls with an outcome. Denied / rejected calls are policy decisions, not tool failures.
SETTLED_CALL = (S.SUCCEEDED, *FAILED_CALL)
FAILURE_GROUPS_LIMIT = 50


def _rate(failed: int, total: int) -> float | None:
    return round(failed / total, 4) if total else None


def _settled_calls(window: Window):
    return ToolCall.objects.filter(
        created_at__gte=window.since, created_at__lt=window.until, status__in=SETTLED_CALL
    )


def _failure_counts() -> dict[str, Any]:
    # COUNT(*) / COUNT(status): columns of toolcall_stats, so PostgreSQL answers the window
    # with an index-only scan.
    return {"calls": Count("*"), "failed": Count("status", filter=Q(status__in=FAILED_CALL))}


def _with_rate(rows) -> list[dict[str, Any]]:
    return [{**row, "rate": _rate(row["failed"], row["calls"])} for row in rows]


def failure_rate_by_tool(
    window: Window, over_time: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """[{tool, calls, failed, rate}] — settled tool calls per tool: the sums of the per-bucket
    rows of failure_rate_over_time (pass them in to save a scan of the window)."""
    totals: dict[str, dict[str, Any]] = {}
    for row in over_time if over_time is not None else failure_rate_over_time(window):
        total = totals.setdefault(row["tool"], {"tool": row["tool"], "calls": 0, "failed": 0})
        total["calls"] += row["calls"]
        total["failed"] += row["failed"]
    return _with_rate(totals[tool] for tool in sorted(totals))


def failure_rate_by_step(window: Window) -> list[dict[str, Any]]:
    """[{step_index, calls, failed, rate}] — settled tool calls per step index."""
    return _with_rate(
        _settled_calls(window)
        .values("step_index")
        .annotate(**_failure_counts())
        .order_by("step_index")
    )


def failure_rate_over_time(window: Window) -> list[dict[str, Any]]:
    """[{tool, bucket, calls, failed, rate}] — per tool and hour/day bucket."""
    return _with_rate(
        _settled_calls(window)
        .annotate(bucket=Trunc("created_at", window.bucket))
        .values("tool", "bucket")
        .annotate(**_failure_counts())
        .order_by("bucket", "tool")
    )


def error_heatmap(window: Window) -> list[dict[str, Any]]:
    """[{tool, error_class, failed}] — failed tool calls by tool × error class."""
    return list(
        _settled_calls(window)
        .filter(status__in=FAILED_CALL)
        .values("tool", "error_class")
        .annotate(failed=Count("*"))
        .order_by("tool", "error_class")
    )


def retry_distribution(window: Window) -> list[dict[str, Any]]:
    """[{retries, calls, succeeded, success_rate}] — executed calls by how many times they were
    retried (attempts - 1), and how many of those finally succeeded."""
    rows = (
        _settled_calls(window)
        .filter(attempts__gte=1)
        .values("attempts")
        .annotate(calls=Count("*"), succeeded=Count("status", filter=Q(status=S.SUCCEEDED)))
        .order_by("attempts")
    )
    return [
        {
            "retries": row["attempts"] - 1,
            "calls": row["calls"],
            "succeeded": row["succeeded"],
            "success_rate": _rate(row["succeeded"], row["calls"]),
        }
        for row in rows
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


def duration_percentiles(window: Window) -> list[dict[str, Any]]:
    """[{tool, calls, p50_ms, p95_ms}] over settled calls with a measured duration."""
    if connection.vendor == "postgresql":
        rows = (
            _settled_calls(window)
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
    """Tasks that reached a terminal state in the window: counts per status and the failure
    rate failed / (succeeded + failed) — operator cancels are not agent failures."""
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
    return {
        "succeeded": succeeded,
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


def failure_statistics(window: Window) -> dict[str, Any]:
    """Everything the statistics page and `GET /api/v1/stats/failures` show."""
    tables = {key: table(window) for key, table in TABLES.items() if key != "by_tool"}
    return {
        "window": {"since": window.since, "until": window.until, "bucket": window.bucket},
        "tasks": task_outcomes(window),
        "by_tool": failure_rate_by_tool(window, over_time=tables["over_time"]),
        **tables,
    }
