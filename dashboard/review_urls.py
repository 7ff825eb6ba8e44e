from __future__ import annotations

from django.urls import path

from dashboard.views import decision_links
from dashboard.views import reviews as views

app_name = "review"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("pending-count/", views.reviews_pending_count, name="pending_count"),
    path("<int:review_id>/", views.review_detail, name="detail"),
    path("<int:review_id>/decide/", views.review_decide, name="decide"),
    # A notification email's signed decision link (review.email_links): GET asks, POST decides.
    path(
        "<int:review_id>/email/<str:token>/",
        decision_links.review_email_decision,
        name="email_decision",
    ),
    path("<int:review_id>/claim/", views.review_claim, name="claim"),
    path("<int:review_id>/unclaim/", views.review_unclaim, name="unclaim"),
    path("<int:review_id>/assign/", views.review_assign, name="assign"),
    path("<int:review_id>/comment/", views.review_comment, name="comment"),
    path("bulk/", views.reviews_bulk, name="bulk"),
    path("rules/", views.standing_rules, name="standing_rules"),
    path("rules/<int:rule_id>/resume/", views.standing_rule_resume, name="standing_rule_resume"),
]
