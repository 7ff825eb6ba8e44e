"""`/`: what needs an operator now, and how the last window went."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import charts, selectors, stats
from dashboard.selectors import user_time_zone
from dashboard.stats.parts import WindowParts
from dashboard.views.common import request_window
from dashboard.windows import WINDOW_CHOICES, Window
from harness_base.http import AuthedRequest
from tasks.selectors import tasks_list
from tasks.web.access import viewer_required
from tasks.web.htmx import is_htmx


@viewer_required
def overview(request: AuthedRequest) -> HttpResponse:
    window = request_window(request, default="24h")
    context = {"status": selectors.status_counts(), "window": window}
    if is_htmx(request):
        return render(request, "dashboard/_status_counts.html", context)
    parts = stats.window_parts(window)
    mix = stats.error_class_mix(window, parts=parts)
    finished = {"finished_from": window.since, "finished_to": window.until}
    for row in mix:
        row["url"] = charts.task_list_url(
            status="failed", error_class=row["error_class"], **finished
        )
    context.update(
        {
            "windows": WINDOW_CHOICES,
            "outcomes": stats.task_outcomes(window, parts=parts),
            "links": {
                status: charts.task_list_url(status=status, **finished)
                for status in ("failed", "succeeded", "canceled")
            },
            "error_mix": mix,
            "over_time_figure": _over_time_figure(request, window, parts),
            "mix_figure": charts.error_class_mix_figure(mix, window),
            "recent": tasks_list()[:10],
        }
    )
    return render(request, "dashboard/overview.html", context)


def _over_time_figure(request: AuthedRequest, window: Window, parts: WindowParts) -> dict:
    """Drawn in the viewer's chosen zone, which its axis title names."""
    rows = stats.failure_rate_over_time(window, parts=parts)
    with timezone.override(user_time_zone(user=request.user) or "UTC"):
        return charts.failure_rate_over_time_figure(rows, window)
