from __future__ import annotations

from django.urls import path

from checkpoints import views

app_name = "checkpoints"

urlpatterns = [
    path(
        "tasks/<uuid:task_id>/checkpoints/<uuid:checkpoint_id>/rollback/",
        views.rollback_page,
        name="rollback",
    ),
    path(
        "tasks/<uuid:task_id>/graph-checkpoints/<uuid:checkpoint_id>/rollback/",
        views.graph_rollback_page,
        name="graph_rollback",
    ),
    path("tasks/<uuid:task_id>/checkpoints/diff/", views.diff_page, name="diff"),
    path("tasks/<uuid:task_id>/recover/", views.recover_action, name="recover"),
]
