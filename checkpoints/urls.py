from __future__ import annotations

from django.urls import path

from checkpoints import file_views, fork_views, views

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
    path(
        "tasks/<uuid:task_id>/checkpoints/<uuid:checkpoint_id>/fork/",
        fork_views.fork_page,
        name="fork",
    ),
    path("tasks/<uuid:task_id>/adopt/", fork_views.adopt_action, name="adopt"),
    path("tasks/<uuid:task_id>/checkpoints/diff/", views.diff_page, name="diff"),
    path("tasks/<uuid:task_id>/recover/", views.recover_action, name="recover"),
    # The workspace at a checkpoint (?path=, ?checkpoint=; the tree is the task page's tab).
    path("tasks/<uuid:task_id>/files/view/", file_views.file_page, name="file"),
    path("tasks/<uuid:task_id>/files/download/", file_views.file_download, name="file_download"),
    path("tasks/<uuid:task_id>/files/archive/", file_views.archive_download, name="archive"),
    path("tasks/<uuid:task_id>/files/diff/", file_views.file_diff_page, name="file_diff"),
]
