from __future__ import annotations

from django.urls import path

from dashboard.views import reviews as views

app_name = "review"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<int:review_id>/", views.review_detail, name="detail"),
    path("<int:review_id>/decide/", views.review_decide, name="decide"),
    path("rules/", views.standing_rules, name="standing_rules"),
    path("rules/<int:rule_id>/resume/", views.standing_rule_resume, name="standing_rule_resume"),
]
