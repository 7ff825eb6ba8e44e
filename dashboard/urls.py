from __future__ import annotations

from django.urls import path

from dashboard.views import (
    audit,
    integrations,
    metrics,
    ops,
    overview,
    preferences,
    search,
    stats,
)

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("stats/failures/", stats.failure_stats, name="stats"),
    path("stats/failures/<slug:table>.csv", stats.failure_stats_csv, name="stats_csv"),
    path("stats/reviews/", stats.review_stats, name="review_stats"),
    path("stats/reviews/<slug:table>.csv", stats.review_stats_csv, name="review_stats_csv"),
    path("ops/", ops.operations, name="ops"),
    # Prometheus (README "Metrics and alerts"): a bearer token, not a session.
    path("metrics", metrics.metrics, name="metrics"),
    path("ops/jobs/<slug:queue_name>/<str:job_id>/requeue/", ops.job_requeue, name="requeue"),
    path("audit/", audit.audit_log, name="audit"),
    path("search/", search.search, name="search"),
    path("preferences/", preferences.preferences, name="preferences"),
    # Slack app's "Interactivity" request URL (README "Slack").
    path("integrations/slack/actions/", integrations.slack_actions, name="slack_actions"),
]
