from __future__ import annotations

from django.urls import path

from dashboard.views import (
    decision_links,
    review_edit,
    review_inbox,
    review_page,
    review_plan_decide,
    review_standing_rules,
    review_triage,
)

app_name = "review"

urlpatterns = [
    path("", review_inbox.inbox, name="inbox"),
    path("pending-count/", review_inbox.reviews_pending_count, name="pending_count"),
    path("<int:review_id>/", review_page.review_detail, name="detail"),
    path("<int:review_id>/decide/", review_page.review_decide, name="decide"),
    # A plan review's one decision: every item's choice with the plan's hash (issue #46).
    path(
        "<int:review_id>/plan-decide/",
        review_plan_decide.review_plan_decide,
        name="plan_decide",
    ),
    # "Preview edit": the effect of the edit form's arguments, before approving (changes nothing).
    path("<int:review_id>/edit-preview/", review_edit.review_edit_preview, name="edit_preview"),
    # A notification email's signed decision link (review.email_links): GET asks, POST decides.
    path(
        "<int:review_id>/email/<str:token>/",
        decision_links.review_email_decision,
        name="email_decision",
    ),
    path("<int:review_id>/claim/", review_triage.review_claim, name="claim"),
    path("<int:review_id>/unclaim/", review_triage.review_unclaim, name="unclaim"),
    path("<int:review_id>/assign/", review_triage.review_assign, name="assign"),
    path("<int:review_id>/comment/", review_triage.review_comment, name="comment"),
    path("bulk/", review_triage.reviews_bulk, name="bulk"),
    path("rules/", review_standing_rules.standing_rules, name="standing_rules"),
    path(
        "rules/<int:rule_id>/",
        review_standing_rules.standing_rule_detail,
        name="standing_rule_detail",
    ),
    path(
        "rules/<int:rule_id>/resume/",
        review_standing_rules.standing_rule_resume,
        name="standing_rule_resume",
    ),
    path(
        "rules/<int:rule_id>/pause/",
        review_standing_rules.standing_rule_pause,
        name="standing_rule_pause",
    ),
    path(
        "rules/<int:rule_id>/revoke/",
        review_standing_rules.standing_rule_revoke,
        name="standing_rule_revoke",
    ),
]
