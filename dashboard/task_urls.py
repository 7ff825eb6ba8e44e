from __future__ import annotations

from django.urls import path

from dashboard.views import tasks as views

app_name = "tasks"

urlpatterns = [
    path("tasks/", views.task_list, name="list"),
    path("tasks/bulk/", views.task_bulk, name="bulk"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="detail"),
    path("tasks/<uuid:task_id>/live/", views.task_live, name="live"),
    path("tasks/<uuid:task_id>/live-output/", views.task_live_output, name="live_output"),
    path("tasks/<uuid:task_id>/outputs/<int:output_id>/", views.task_output, name="output"),
    path("tasks/<uuid:task_id>/events.json", views.task_events_download, name="events_json"),
    path("tasks/<uuid:task_id>/cancel/", views.task_cancel, name="cancel"),
]
