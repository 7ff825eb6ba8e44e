from __future__ import annotations

from django.urls import path

from tasks import views

app_name = "tasks"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("tasks/", views.task_list, name="list"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="detail"),
    path("tasks/<uuid:task_id>/cancel/", views.task_cancel, name="cancel"),
]
