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
from review.rollups import review_sla
from tasks.errors import CANCELED_ERROR, error_normalise
from tasks.models import (
    Task,
    TaskHourly,
    TaskWaitHourly,
    ToolCall,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStatus,
    ToolCallStepHourly,
)
from tasks.rollups import (
    CANCELED_CALL,
    DAILY_OF,
    FAILED_CALL,
    SETTLED_CALL,
    TASK_KEYS,
    bucket_value,
    finished_tasks,
    hour_ceil,
    hour_floor,
    in_ranges,
    log_bucket,
    rolled_days_and_hours,
    rolled_span,
    settled_calls,
    task_aggregates,
    wait_histogram,
)
from tasks.states import TaskStatus

S = ToolCallStatus

FAILURE_GROUPS_LIMIT = 50


def _rate(failed: int, total: int) -> float | None:
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


def _settled_calls(parts: WindowParts):
    return settled_calls(ToolCall.objects.filter(in_ranges("created_at", parts.raw)))


# The roll-up rows of calls with a tool outcome (ToolCallHourly keeps canceled calls apart by
# status and error class; the step and duration roll-ups never hold them).
_ROLLED_SETTLED = ~CANCELED_CALL


def _rolled(
    model,
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
    tables = [(model.objects.filter(in_ranges("hour", hours)), "hour")]
    if days is not None:
        daily = DAILY_OF[model].daily.objects.filter(day__gte=days[0], day__lt=days[1])
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


def _failure_counts() -> dict[str, Any]:
    # COUNT(*) / COUNT(status): columns of toolcall_stats, so PostgreSQL answers the window
    # with an index-only scan.
    return {"calls": Count("*"), "failed": Count("status", filter=Q(status__in=FAILED_CALL))}


def _rolled_counts() -> dict[str, Any]:
    return {"calls": Sum("calls"), "failed": Sum("calls", filter=Q(status__in=FAILED_CALL))}


def _sum(a: Any, b: Any) -> Any:
    return (a or 0) + (b or 0)


def _merge(
    rows,
    key: tuple[str, ...],
    fields: tuple[str, ...],
    combine: dict[str, Callable[[Any, Any], Any]] | None = None,
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


def failure_rate_by_step(
    window: Window, *, parts: WindowParts | None = None
) -> list[dict[str, Any]]:
    """[{step_index, calls, failed, rate}] — settled tool calls per step index."""
    parts = parts or window_parts(window)
    raw = _settled_calls(parts).values("step_index").annotate(**_failure_counts()).order_by()
    rolled = _rolled(
        ToolCallStepHourly,
        parts,
        keys=("step_index",),
        calls=Sum("calls"),
        failed=Sum("failed"),
    )
    return _with_rate(_merge([*raw, *rolled], ("step_index",), ("calls", "failed")))


def failure_rate_over_time(
    window: Window, *, parts: WindowParts | None = None
) -> list[dict[str, Any]]:
    """[{tool, bucket, calls, failed, rate}] — per tool and hour/day bucket."""
    parts = parts or window_parts(window)
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
        where=_ROLLED_SETTLED,
        bucket=lambda period: Trunc(period, window.bucket),
        # Hourly buckets read the hours; daily ones may read the daily sums.
        hourly=window.bucket == "hour",
        **_rolled_counts(),
    )
    rows = _merge([*raw, *rolled], ("bucket", "tool"), ("calls", "failed"))
    return _with_rate({"tool": r["tool"], "bucket": r["bucket"], **r} for r in rows)


def error_heatmap(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{tool, error_class, failed}] — failed tool calls by tool × error class."""
    parts = parts or window_parts(window)
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
        where=Q(status__in=FAILED_CALL) & _ROLLED_SETTLED,
        failed=Sum("calls"),
    )
    return _merge([*raw, *rolled], ("tool", "error_class"), ("failed",))


def retry_distribution(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{retries, calls, succeeded, success_rate}] — executed calls by how many times they were
    retried (attempts - 1), and how many of those finally succeeded."""
    parts = parts or window_parts(window)
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
        where=Q(attempts__gte=1) & _ROLLED_SETTLED,
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
      AND status IN ({statuses}) AND NOT (status = %s AND error_class = %s)
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


def _duration_histograms(parts: WindowParts) -> list[dict[str, Any]]:
    raw = (
        _settled_calls(parts)
        .filter(duration_ms__isnull=False)
        .annotate(bucket=log_bucket("duration_ms"))
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


def review_outcomes(window: Window) -> list[dict[str, Any]]:
    """[{tool, approved, edited, rejected, expired, canceled, pending}] — review requests
    opened in the window and put to a person (not the calls a standing rule approved);
    `edited` = approved with edited arguments."""
    R = ReviewStatus
    approved = Q(status=R.APPROVED)
    return list(
        ReviewRequest.objects.filter(requested_at__gte=window.since, requested_at__lt=window.until)
        .exclude(kind="standing_rule")
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


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _greatest(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


# How the task roll-ups' columns combine over hours (SQL) and with the raw rows (Python);
# the others are sums.
_TASK_ROLLED = {
    "first_seen": (Min, _least),
    "last_seen": (Max, _greatest),
    "sample": (Max, _greatest),
}


def _task_groups(
    parts: WindowParts, keys: tuple[str, ...], fields: tuple[str, ...], where: Q | None = None
) -> list[dict[str, Any]]:
    """[{*keys, *fields}]: the window's finished tasks (narrowed by `where`) grouped by `keys`
    (of TASK_KEYS), with `fields` of tasks.rollups.task_aggregates — the rolled hours read
    from TaskHourly, the rest from Task, merged."""
    assert set(keys) <= set(TASK_KEYS), keys
    aggregates = task_aggregates()
    raw = (
        finished_tasks(parts.raw)
        .filter(where or Q())
        .values(*keys)
        .annotate(**{name: aggregates[name] for name in fields})
        .order_by()
    )
    rolled = _rolled(
        TaskHourly,
        parts,
        keys=keys,
        where=where,
        **{name: _TASK_ROLLED.get(name, (Sum, None))[0](name) for name in fields},
    )
    combine = {name: _TASK_ROLLED[name][1] for name in fields if name in _TASK_ROLLED}
    return _merge([*raw, *rolled], keys, fields, combine)


def failure_groups(
    window: Window, *, parts: WindowParts | None = None, limit: int = FAILURE_GROUPS_LIMIT
) -> list[dict[str, Any]]:
    """[{fingerprint, error_class, message, tasks, first_seen, last_seen}] — failed tasks
    grouped by error fingerprint, largest group first."""
    rows = _task_groups(
        parts or window_parts(window),
        ("error_fingerprint", "error_class"),
        ("tasks", "first_seen", "last_seen", "sample"),
        where=Q(status=TaskStatus.FAILED),
    )
    rows.sort(key=lambda row: (-row["tasks"], -row["last_seen"].timestamp()))
    return [
        {
            "fingerprint": row["error_fingerprint"],
            "error_class": row["error_class"],
            "message": error_normalise(row["sample"]),
            "tasks": row["tasks"],
            "first_seen": row["first_seen"],
            "last_seen": row["last_seen"],
        }
        for row in rows[:limit]
    ]


_TOTALS = (
    "tasks",
    "with_rejected",
    "with_edited",
    "waited_review",
    "review_wait_sum",
    "waited_held",
    "held_wait_sum",
)


def task_totals(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{status, calls_failed, tasks, with_*, waited_*, *_wait_sum}] over the tasks that finished in
    the window: what task_outcomes and human_waits sum (pass it to both to read it once)."""
    return _task_groups(parts or window_parts(window), ("status", "calls_failed"), _TOTALS)


def task_outcomes(
    window: Window, *, parts: WindowParts | None = None, totals: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Tasks that reached a terminal state in the window: counts per status, successes split
    into clean ones and those after failed tool calls (and how many had a call a person
    rejected or edited), and the failure rate
    failed / (succeeded + failed) — operator cancels are not agent failures."""
    if totals is None:
        totals = task_totals(window, parts=parts)
    counts: dict[tuple[str, bool], int] = {
        (row["status"], row["calls_failed"]): row["tasks"] for row in totals
    }
    succeeded_rows = [row for row in totals if row["status"] == TaskStatus.SUCCEEDED]

    def count(status: str) -> int:
        return counts.get((status, False), 0) + counts.get((status, True), 0)

    succeeded = count(TaskStatus.SUCCEEDED)
    failed = count(TaskStatus.FAILED)
    rate = _rate(failed, succeeded + failed)
    # A tool call failed (the model saw the error and went on) or an attempt failed and was
    # retried: a success that needed it is not a clean one (`calls_failed`, set as the task
    # finished).
    after_failures = counts.get((TaskStatus.SUCCEEDED, True), 0)
    return {
        "succeeded": succeeded,
        "succeeded_clean": succeeded - after_failures,
        "succeeded_after_failed_calls": after_failures,
        # Successes after a person rejected a call, or approved one with edited arguments.
        "succeeded_with_rejected_calls": sum(row["with_rejected"] for row in succeeded_rows),
        "succeeded_with_edited_calls": sum(row["with_edited"] for row in succeeded_rows),
        "failed": failed,
        "canceled": count(TaskStatus.CANCELED),
        "failure_rate": rate,
        "failure_rate_pct": None if rate is None else round(rate * 100, 1),
    }


def error_class_mix(window: Window, *, parts: WindowParts | None = None) -> list[dict[str, Any]]:
    """[{error_class, tasks}] — failed tasks in the window by error class, largest first."""
    rows = _task_groups(
        parts or window_parts(window),
        ("error_class",),
        ("tasks",),
        where=Q(status=TaskStatus.FAILED),
    )
    return sorted(rows, key=lambda row: (-row["tasks"], row["error_class"]))


# The human waits, by kind: the label the page and the CSV use.
WAIT_KINDS = {"review": "waiting for review", "held": "held by an operator"}


def human_waits(
    window: Window, *, parts: WindowParts | None = None, totals: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """[{kind, label, tasks, share, total_s, mean_s, p50_s, p95_s}] — how long the tasks that
    finished in the window waited for a human, review waits and operator holds apart: how
    many waited (`share` of the finished tasks), in all, on average and the p50 / p95 of
    those that waited (from log-scale histograms, within 4.4%)."""
    parts = parts or window_parts(window)
    if totals is None:
        totals = task_totals(window, parts=parts)
    finished = sum(row["tasks"] for row in totals)
    raw = [
        {**row, "kind": kind, "bucket": int(row["bucket"])}
        for kind in WAIT_KINDS
        for row in wait_histogram(finished_tasks(parts.raw), kind)
    ]
    rolled = _rolled(TaskWaitHourly, parts, keys=("kind", "bucket"), tasks=Sum("tasks"))
    histograms: dict[str, list[tuple[int, int]]] = {kind: [] for kind in WAIT_KINDS}
    for row in _merge([*raw, *rolled], ("kind", "bucket"), ("tasks",)):
        histograms[row["kind"]].append((row["bucket"], row["tasks"]))
    rows = []
    for kind, label in WAIT_KINDS.items():
        waited = sum(row[f"waited_{kind}"] for row in totals)
        total_s = sum(row[f"{kind}_wait_sum"] or 0 for row in totals)
        histogram = histograms[kind]
        rows.append(
            {
                "kind": kind,
                "label": label,
                "tasks": waited,
                "share": _rate(waited, finished),
                "total_s": round(total_s, 3),
                "mean_s": round(total_s / waited, 3) if waited else None,
                "p50_s": round(_histogram_percentile(histogram, 0.5), 3) if histogram else None,
                "p95_s": round(_histogram_percentile(histogram, 0.95), 3) if histogram else None,
            }
        )
    return rows


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


# The tables read from the roll-ups (and the raw rows of the rest): they take the window's parts.
_ROLLED_TABLES = {"by_step", "over_time", "heatmap", "retries", "durations", "groups"}


def failure_statistics(window: Window) -> dict[str, Any]:
    """Everything the statistics page and `GET /api/v1/stats/failures` show."""
    parts = window_parts(window)
    totals = task_totals(window, parts=parts)
    tables = {
        key: table(window, parts=parts) if key in _ROLLED_TABLES else table(window)
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
    return {
        "window": {"since": window.since, "until": window.until, "bucket": window.bucket},
        **{f"by_{dim}": rows for dim, rows in tables.items()},
    }
