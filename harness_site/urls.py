from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView

from harness_site import health
from harness_site.api import api

urlpatterns = [
    # Probes for load balancers and service managers: no login (harness_site/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Browsers ask for /favicon.ico whatever the page links: send them to the static icon,
    # under its hashed name (looked up per request: importing the URLs needs no manifest;
    # temporary: the name changes with the icon).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("favicon.svg"))),
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("django-rq/", include("django_rq.urls")),
    path("api/v1/", api.urls),
    path("reviews/", include("dashboard.review_urls")),
    path("", include("dashboard.urls")),
    path("", include("checkpoints.urls")),
    path("", include("dashboard.task_urls")),
    path("", include("multiagent.urls")),
    path("", include("cases.urls")),
    path("", include("accounts.people_urls")),
]
