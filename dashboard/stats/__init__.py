"""Failure statistics: selectors computed by SQL aggregation over a time window.

Nothing here loads individual rows into Python. Tool-call statistics read the window's whole
hours from the roll-ups the sweep maintains (tasks.rollups: its whole UTC days from the daily
sums, the other hours from the hourly rows) and only the rest of the window from ToolCall,
then merge the GROUP BYs; the duration percentiles are exact
(percentile_cont on PostgreSQL, window functions on SQLite) while no rolled hour is involved,
and merged log-scale histograms otherwise. Task statistics (outcomes, failure groups, error
mix, human waits) read the task roll-ups and Task the same way; the wait percentiles always
come from log-scale histograms (within 4.4%). Tool calls are windowed by `created_at`, tasks by
`finished_at`, reviews by `requested_at`.

The modules, from the bottom: `parts` (a window's rolled hours and raw ranges, WindowParts;
reading the roll-ups and merging them with the raw rows), then the tables: `tool_calls`
(failure rates per tool, MCP server, step and time; heatmap; retries), `durations`
(duration percentiles), `task_tables` (failure groups, task outcomes, error mix, human
waits), `reviews` (review outcomes); `pages` (failure_statistics with TABLES, and
review_sla_statistics: what the pages and the API show). Callers import from this package.
"""

from __future__ import annotations

from dashboard.stats.durations import PercentileCont, duration_percentiles, sqlite_percentiles_sql
from dashboard.stats.pages import TABLES, failure_statistics, review_sla_statistics
from dashboard.stats.parts import WindowParts, window_parts
from dashboard.stats.reviews import review_outcomes
from dashboard.stats.task_tables import (
    FAILURE_GROUPS_LIMIT,
    WAIT_KINDS,
    error_class_mix,
    failure_groups,
    human_waits,
    task_outcomes,
    task_totals,
)
from dashboard.stats.tool_calls import (
    error_heatmap,
    failure_rate_by_mcp_server,
    failure_rate_by_step,
    failure_rate_by_tool,
    failure_rate_over_time,
    retry_distribution,
)

__all__ = [
    "FAILURE_GROUPS_LIMIT",
    "TABLES",
    "WAIT_KINDS",
    "PercentileCont",
    "WindowParts",
    "duration_percentiles",
    "error_class_mix",
    "error_heatmap",
    "failure_groups",
    "failure_rate_by_mcp_server",
    "failure_rate_by_step",
    "failure_rate_by_tool",
    "failure_rate_over_time",
    "failure_statistics",
    "human_waits",
    "retry_distribution",
    "review_outcomes",
    "review_sla_statistics",
    "sqlite_percentiles_sql",
    "task_outcomes",
    "task_totals",
    "window_parts",
]
