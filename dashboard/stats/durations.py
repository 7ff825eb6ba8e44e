"""Tool-call duration percentiles (p50 / p95 per tool): exact by percentile_cont on
PostgreSQL (PercentileCont) or window functions on SQLite while no rolled hour is involved,
from the merged log-scale histograms otherwise."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Sum

from dashboard.stats.parts import (
    WindowParts,
    merge,
    raw_settled_calls,
    rolled_groups,
    window_parts,
)
from dashboard.windows import Window
from tasks.errors import CANCELED_ERROR
from tasks.models import Task, ToolCall, ToolCallDurationHourly
from tasks.models import ToolCallStatus as S
from tasks.rollups import SETTLED_CALL, histogram_percentile, log_bucket


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
      AND status IN ({statuses}) AND NOT (status = %s AND error_class = %s)
      AND plan_mark <> 'planned'
      AND task_id NOT IN (SELECT id FROM {tasks} WHERE is_replay)
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


def sqlite_percentiles_sql(*, table: str, tasks: str, statuses: int) -> str:
    """The SQLite query, parameters: since, until, `statuses` status values, then the status
    and error class of a canceled call (left out); replays' calls are left out too."""
    return _SQLITE_PERCENTILES.format(
        table=table, tasks=tasks, statuses=", ".join(["%s"] * statuses)
    )


def _duration_histograms(parts: WindowParts) -> list[dict[str, Any]]:
    raw = (
        raw_settled_calls(parts)
        .filter(duration_ms__isnull=False)
        .annotate(bucket=log_bucket("duration_ms"))
        .values("tool", "bucket")
        .annotate(calls=Count("*"))
        .order_by()
    )
    rolled = rolled_groups(
        ToolCallDurationHourly, parts, keys=("tool", "bucket"), calls=Sum("calls")
    )
    rows = [{**row, "bucket": int(row["bucket"])} for row in [*raw, *rolled]]
    by_tool: dict[str, list[tuple[int, int]]] = {}
    for row in merge(rows, ("tool", "bucket"), ("calls",)):
        by_tool.setdefault(row["tool"], []).append((row["bucket"], row["calls"]))
    return [
        {
            "tool": tool,
            "calls": sum(n for _, n in histogram),
            "p50_ms": round(histogram_percentile(histogram, 0.5), 3),
            "p95_ms": round(histogram_percentile(histogram, 0.95), 3),
        }
        for tool, histogram in by_tool.items()
    ]


def duration_percentiles(
    window: Window, *, parts: WindowParts | None = None
) -> list[dict[str, Any]]:
    """[{tool, calls, p50_ms, p95_ms}] over settled calls with a measured duration.

    Exact (percentile_cont) while the window holds no rolled-up hour; otherwise read from the
    merged log-scale histograms (within 4.4% of the exact figure, tasks.rollups)."""
    parts = parts or window_parts(window)
    if parts.rolled is not None:
        return _duration_histograms(parts)
    if connection.vendor == "postgresql":
        rows = (
            raw_settled_calls(parts)
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
        table=connection.ops.quote_name(ToolCall._meta.db_table),
        tasks=connection.ops.quote_name(Task._meta.db_table),
        statuses=len(SETTLED_CALL),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [window.since, window.until, *SETTLED_CALL, S.FAILED, CANCELED_ERROR])
        return [
            {"tool": tool, "calls": n, "p50_ms": round(p50, 3), "p95_ms": round(p95, 3)}
            for tool, n, p50, p95 in cursor.fetchall()
        ]
