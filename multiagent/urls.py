from __future__ import annotations

from django.urls import path

from multiagent import views

app_name = "multiagent"

urlpatterns = [
    path("tasks/<uuid:task_id>/group/", views.group_panel, name="group"),
    path("tasks/<uuid:task_id>/group-rollback/", views.group_rollback_page, name="group_rollback"),
]
