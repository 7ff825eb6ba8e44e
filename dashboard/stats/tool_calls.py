"""Tool-call failure tables: failure rate per tool, MCP server, step and time bucket, the
tool × error-class heatmap and the retry distribution."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Trunc

from dashboard.stats.parts import (
    ROLLED_SETTLED,
    WindowParts,
    merge,
    ratio,
    raw_settled_calls,
    rolled_groups,
    window_parts,
)
from dashboard.windows import Window
from tasks.models import ToolCallHourly, ToolCallStepHourly
from tasks.models import ToolCallStatus as S
from tasks.rollups import FAILED_CALL


def _failure_counts() -> dict[str, Any]:
    # COUNT(*) / COUNT(status): columns of toolcall_stats, so PostgreSQL answers the window
    # with an index-only scan.
    return {"calls": Count("*"), "failed": Count("status", filter=Q(status__in=FAILED_CALL))}


def _rolled_counts() -> dict[str, Any]:
    return {"calls": Sum("calls"), "failed": Sum("calls", filter=Q(status__in=FAILED_CALL))}


def _with_rate(rows) -> list[dict[str, Any]]:
    return [{**row, "rate": ratio(row["failed"], row["calls"])} for row in rows]


def failure_rate_by_tool(
    window: Window, over_time: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """[{tool, calls, failed, rate}] — settled tool calls per tool: the sums of the per-bucket
    rows of failure_rate_over_time (pass them in to save a scan of the window)."""
    rows = over_time if over_time is not None else failure_rate_over_time(window)
    return _with_rate(merge(rows, ("tool",), ("calls", "failed")))


def failure_rate_by_mcp_server(by_tool: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{server, tools, calls, failed, rate}] — the per-tool rows of MCP tools
    (`<server>__<tool>`) summed per server."""
    rows = [
        {"server": row["tool"].partition("__")[0], "tools": 1, **row}
        for row in by_tool
        if "__" in row["tool"].strip("_")
    ]
    return _with_rate(merge(rows, ("server",), ("tools", "calls", "failed")))


def failure_rate_by_step(
    window: Window, *, parts: WindowParts | None = None
) -> list[dict[str, Any]]:
    """[{step_index, calls, failed, rate}] — settled tool calls per step index."""
    parts = parts or window_parts(window)
    raw = raw_settled_calls(parts).values("step_index").annotate(**_failure_counts()).order_by()
    rolled = rolled_groups(
        ToolCallStepHourly,
        parts,
        keys=("step_index",),
        calls=Sum("calls"),
        failed=Sum("failed"),
    )
    return _with_rate(merge([*raw, *rolled], ("step_index",), ("calls", "failed")))


def failure_rate_over_time(
    window: Window, *, parts: WindowParts | None = None
) -> list[dict[str, Any]]:
    """[{tool, bucket, calls, failed, rate}] — per tool and hour/day bucket."""
    parts = parts or window_parts(window)
    raw = (
        raw_settled_calls(parts)
        .annotate(bucket=Trunc("created_at", window.bucket))
        .values("tool", "bucket")
        .annotate(**_failure_counts())
        .order_by()
    )
    rolled = rolled_groups(
        ToolCallHourly,
        parts,
        keys=("tool", "bucket"),
        where=ROLLED_SETTLED,
        bucket=lambda period: Trunc(period, window.bucket),
        # Hourly buckets read the hours; daily ones may read the daily sums.
        hourly=window.bucket == "hour",
        **_rolled_counts(),
    )
    rows = merge([*raw, *rolled], ("bucket", "tool"), ("calls", "failed"))
    return _with_rate({"tool": r["tool"], "bucket": r["bucket"], **r} for r in rows)


def error_heatmap(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{tool, error_class, failed}] — failed tool calls by tool × error class."""
    parts = parts or window_parts(window)
    raw = (
        raw_settled_calls(parts)
        .filter(status__in=FAILED_CALL)
        .values("tool", "error_class")
        .annotate(failed=Count("*"))
        .order_by()
    )
    rolled = rolled_groups(
        ToolCallHourly,
        parts,
        keys=("tool", "error_class"),
        where=Q(status__in=FAILED_CALL) & ROLLED_SETTLED,
        failed=Sum("calls"),
    )
    return merge([*raw, *rolled], ("tool", "error_class"), ("failed",))


def retry_distribution(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{retries, calls, succeeded, success_rate}] — executed calls by how many times they were
    retried (attempts - 1), and how many of those finally succeeded."""
    parts = parts or window_parts(window)
    raw = (
        raw_settled_calls(parts)
        .filter(attempts__gte=1)
        .values("attempts")
        .annotate(calls=Count("*"), succeeded=Count("status", filter=Q(status=S.SUCCEEDED)))
        .order_by()
    )
    rolled = rolled_groups(
        ToolCallHourly,
        parts,
        keys=("attempts",),
        where=Q(attempts__gte=1) & ROLLED_SETTLED,
        calls=Sum("calls"),
        succeeded=Sum("calls", filter=Q(status=S.SUCCEEDED)),
    )
    return [
        {
            "retries": row["attempts"] - 1,
            "calls": row["calls"],
            "succeeded": row["succeeded"],
            "success_rate": ratio(row["succeeded"], row["calls"]),
        }
        for row in merge([*raw, *rolled], ("attempts",), ("calls", "succeeded"))
    ]
