"""What the pages and the API show: the failure statistics (every table, TABLES) and the
review SLA statistics (review.rollups.review_sla)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from dashboard.stats.durations import duration_percentiles
from dashboard.stats.parts import WindowParts, window_parts
from dashboard.stats.reviews import review_outcomes
from dashboard.stats.task_tables import failure_groups, human_waits, task_outcomes, task_totals
from dashboard.stats.tool_calls import (
    error_heatmap,
    failure_rate_by_mcp_server,
    failure_rate_by_step,
    failure_rate_by_tool,
    failure_rate_over_time,
    retry_distribution,
)
from dashboard.windows import Window
from review.rollups import review_sla, review_sla_series
from review.rollups.targets import configured_targets, rule_target_s
from review.selectors import reviews_past_target

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
    "waits": human_waits,
}


class _RolledTable(Protocol):
    def __call__(
        self, window: Window, *, parts: WindowParts | None = None
    ) -> list[dict[str, Any]]: ...


# The tables read from the roll-ups (and the raw rows of the rest): they take the window's parts.
_ROLLED_TABLES: dict[str, _RolledTable] = {
    "by_step": failure_rate_by_step,
    "over_time": failure_rate_over_time,
    "heatmap": error_heatmap,
    "retries": retry_distribution,
    "durations": duration_percentiles,
    "groups": failure_groups,
}


def failure_statistics(window: Window) -> dict[str, Any]:
    """Everything the statistics page and `GET /api/v1/stats/failures` show."""
    parts = window_parts(window)
    totals = task_totals(window, parts=parts)
    tables = {
        key: _ROLLED_TABLES[key](window, parts=parts) if key in _ROLLED_TABLES else table(window)
        for key, table in TABLES.items()
        if key not in ("by_tool", "waits")
    }
    return {
        "window": {"since": window.since, "until": window.until, "bucket": window.bucket},
        "tasks": task_outcomes(window, parts=parts, totals=totals),
        "waits": human_waits(window, parts=parts, totals=totals),
        "by_tool": (by_tool := failure_rate_by_tool(window, over_time=tables["over_time"])),
        "by_mcp_server": failure_rate_by_mcp_server(by_tool),
        **tables,
    }


def review_sla_statistics(window: Window) -> dict[str, Any]:
    """Everything `/stats/reviews/` and `GET /api/v1/stats/reviews` show."""
    tables = review_sla(since=window.since, until=window.until)
    configured = configured_targets()
    for row in tables["rule"]:
        row["target_s"] = rule_target_s({"name": row["key"]}, configured=configured)
    return {
        "window": {"since": window.since, "until": window.until, "bucket": window.bucket},
        **{f"by_{dim}": rows for dim, rows in tables.items()},
        "target_s": rule_target_s(None),
        # Decided or expired later than their target: each review once (by tool).
        "breached": sum(row["breached"] for row in tables["tool"]),
        "past_target": reviews_past_target(now=window.until),
        "series": review_sla_series(since=window.since, until=window.until, bucket=window.bucket),
    }
