from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from harness_site.api import api

urlpatterns = [
    # Browsers ask for /favicon.ico whatever the page links: send them to the static icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("django-rq/", include("django_rq.urls")),
    path("api/v1/", api.urls),
    path("reviews/", include("dashboard.review_urls")),
    path("", include("dashboard.urls")),
    path("", include("checkpoints.urls")),
    path("", include("dashboard.task_urls")),
    path("", include("multiagent.urls")),
]
