from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from harness_site.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("django-rq/", include("django_rq.urls")),
    path("api/v1/", api.urls),
    path("reviews/", include("review.urls")),
    path("", include("dashboard.urls")),
    path("", include("checkpoints.urls")),
    path("", include("tasks.urls")),
]
