from __future__ import annotations

from django.urls import path

from dashboard.views import task_actions, task_list, task_new, task_page

app_name = "tasks"

urlpatterns = [
    path("tasks/", task_list.task_list, name="list"),
    path("tasks/bulk/", task_list.task_bulk, name="bulk"),
    path("tasks/new/", task_new.task_new, name="new"),
    path("tasks/<uuid:task_id>/save-template/", task_new.task_save_template, name="save_template"),
    path("tasks/<uuid:task_id>/", task_page.task_detail, name="detail"),
    path("tasks/<uuid:task_id>/live/", task_page.task_live, name="live"),
    path("tasks/<uuid:task_id>/live-output/", task_page.task_live_output, name="live_output"),
    path("tasks/<uuid:task_id>/outputs/<int:output_id>/", task_actions.task_output, name="output"),
    path("tasks/<uuid:task_id>/events.json", task_actions.task_events_download, name="events_json"),
    path("tasks/<uuid:task_id>/cancel/", task_actions.task_cancel, name="cancel"),
    path("tasks/<uuid:task_id>/priority/", task_actions.task_priority, name="priority"),
]
