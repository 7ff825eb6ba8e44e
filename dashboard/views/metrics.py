"""`/metrics`: the Prometheus exposition, for a scraper holding HARNESS_METRICS_TOKEN (or on a
HARNESS_METRICS_ALLOW network); no session, no login page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from dashboard.metrics import metrics_access, registry


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    status, why = metrics_access(request)
    if status:
        response = HttpResponse(why, status=status, content_type="text/plain; charset=utf-8")
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    # The classic text format (0.0.4), which every Prometheus version reads.
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
