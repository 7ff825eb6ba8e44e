from __future__ import annotations

from django.urls import path

from cases import views

app_name = "cases"

urlpatterns = [
    path("cases/", views.case_list, name="list"),
    path("cases/runs/<uuid:run_id>/", views.case_run_page, name="run"),
    path("cases/<uuid:case_id>/", views.case_detail, name="detail"),
    path("cases/<uuid:case_id>/replay/", views.case_replay, name="replay"),
    path("tasks/<uuid:task_id>/save-case/", views.case_save, name="save"),
    path("tasks/<uuid:task_id>/compare/", views.tasks_compare_page, name="compare"),
]
