"""`/stats/failures/`: where agents fail, computed by SQL aggregation over a window."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import call_charts, charts, review_charts, stats
from dashboard.bulk import BULK_ACTIONS
from dashboard.selectors import user_time_zone
from dashboard.views.common import request_window
from dashboard.windows import WINDOW_CHOICES
from harness_base.http import AuthedRequest
from tasks.selectors import user_can_operate
from tasks.web.access import viewer_required
from tasks.web.csv_export import csv_response

# CSV export: one table of the statistics per file, with its columns in order.
CSV_TABLES: dict[str, tuple[str, ...]] = {
    "by_tool": ("tool", "calls", "failed", "rate"),
    "by_step": ("step_index", "calls", "failed", "rate"),
    "over_time": ("bucket", "tool", "calls", "failed", "rate"),
    "heatmap": ("tool", "error_class", "failed"),
    "retries": ("retries", "calls", "succeeded", "success_rate"),
    "durations": ("tool", "calls", "p50_ms", "p95_ms"),
    "reviews": ("tool", "approved", "edited", "rejected", "expired", "canceled", "pending"),
    "groups": ("fingerprint", "error_class", "message", "tasks", "first_seen", "last_seen"),
    "waits": ("kind", "tasks", "share", "total_s", "mean_s", "p50_s", "p95_s"),
}


@viewer_required
def failure_stats(request: AuthedRequest) -> HttpResponse:
    window = request_window(request, default="24h")
    data = stats.failure_statistics(window)
    for group in data["groups"]:
        group["url"] = charts.task_list_url(
            status="failed",
            fingerprint=group["fingerprint"],
            finished_from=window.since,
            finished_to=window.until,
        )
    return render(
        request,
        "dashboard/stats.html",
        {
            "window": window,
            "windows": WINDOW_CHOICES,
            "stats": data,
            "can_operate": user_can_operate(request.user),
            "retry_available": "retry" in BULK_ACTIONS,
            "csv_tables": CSV_TABLES,
            "figures": {
                "by_tool": charts.failure_rate_by_tool_figure(data["by_tool"]),
                "by_step": call_charts.failure_rate_by_step_figure(data["by_step"]),
                "over_time": _in_zone(request, charts.failure_rate_over_time_figure)(
                    data["over_time"], window
                ),
                "heatmap": charts.error_heatmap_figure(data["heatmap"]),
                "retries": call_charts.retry_distribution_figure(data["retries"]),
                "durations": charts.duration_percentiles_figure(data["durations"]),
                "reviews": charts.review_outcomes_figure(data["reviews"]),
            },
        },
    )


@viewer_required
def failure_stats_csv(request: AuthedRequest, table: str) -> HttpResponse:
    columns = CSV_TABLES.get(table)
    if columns is None:
        raise Http404("unknown table")
    window = request_window(request, default="24h")
    rows = stats.TABLES[table](window)
    return csv_response(
        filename=f"failures-{table}-{window.label}.csv",
        header=columns,
        rows=([row[c] for c in columns] for row in rows),
    )


REVIEW_CSV_TABLES = ("by_rule", "by_tool", "by_operator", "by_via")
REVIEW_CSV_COLUMNS = (
    "key",
    "opened",
    "decided",
    "approved",
    "rejected",
    "expired",
    "edited",
    "notifications_failed",
    "unviewed",
    "breached",
    "first_view_p50_s",
    "first_view_p95_s",
    "decision_p50_s",
    "decision_p95_s",
    "on_page_p50_s",
    "on_page_p95_s",
)


@viewer_required
def review_stats(request: AuthedRequest) -> HttpResponse:
    window = request_window(request, default="24h")
    data = stats.review_sla_statistics(window)
    with timezone.override(user_time_zone(user=request.user) or "UTC"):
        figures = {
            "decision": review_charts.review_decision_time_figure(
                data["series"], window, target_s=data["target_s"]
            ),
            "backlog": review_charts.review_backlog_figure(data["series"], window),
        }
    return render(
        request,
        "dashboard/review_stats.html",
        {
            "window": window,
            "windows": WINDOW_CHOICES,
            "stats": data,
            "figures": figures,
            "csv_tables": REVIEW_CSV_TABLES,
        },
    )


@viewer_required
def review_stats_csv(request: AuthedRequest, table: str) -> HttpResponse:
    if table not in REVIEW_CSV_TABLES:
        raise Http404("unknown table")
    window = request_window(request, default="24h")
    rows = stats.review_sla_statistics(window)[table]
    return csv_response(
        filename=f"reviews-{table}-{window.label}.csv",
        header=REVIEW_CSV_COLUMNS,
        rows=([row[c] for c in REVIEW_CSV_COLUMNS] for row in rows),
    )


def _in_zone(request: AuthedRequest, draw):
    """`draw` under the viewer's chosen zone (plotly_time writes it, axis titles name it)."""

    def drawn(*args, **kwargs):
        with timezone.override(user_time_zone(user=request.user) or "UTC"):
            return draw(*args, **kwargs)

    return drawn
