"""Review models, one module per family, each importing only the modules listed below it:

    identities     a person's notification identities (ReviewerProfile: their Slack user id)
    rollups        the SLA statistics: first views (ReviewView) and the roll-up tables
    notifications  messages about a review (Notification), email decision links used
    rules          policy and standing rules (ReviewRule) and their choices
    receipts       the decision receipts' hash chain (DecisionReceipt, ReceiptChainHead)
    request        the review (ReviewRequest), its state machine (ReviewStatus,
                   REVIEW_TRANSITIONS), its triage comments and its approvals

This package re-exports every model (Django finds them here) and the names callers import
from `review.models`; code inside the package imports the module that holds a name."""

from __future__ import annotations

from review.models.identities import SLACK_USER_ID, ReviewerProfile
from review.models.notifications import (
    DecisionLinkUse,
    Notification,
    NotificationEvent,
    NotificationStatus,
)
from review.models.receipts import DecisionReceipt, ReceiptChainHead, ReceiptVia
from review.models.request import (
    REVIEW_TRANSITIONS,
    STANDING_RULE,
    TARGET_ARGUMENTS,
    ReviewApproval,
    ReviewComment,
    ReviewRequest,
    ReviewStatus,
    edit_lines,
)
from review.models.rollups import (
    ReviewCounts,
    ReviewDaily,
    ReviewHourly,
    ReviewRolledHour,
    ReviewTimeDaily,
    ReviewTimeHourly,
    ReviewView,
)
from review.models.rules import (
    OnExpiry,
    ReviewRule,
    RuleAction,
    RuleKind,
    RuleRisk,
    RuleScope,
)

__all__ = [
    "edit_lines",
    "REVIEW_TRANSITIONS",
    "SLACK_USER_ID",
    "ReviewerProfile",
    "STANDING_RULE",
    "TARGET_ARGUMENTS",
    "DecisionLinkUse",
    "DecisionReceipt",
    "Notification",
    "NotificationEvent",
    "NotificationStatus",
    "OnExpiry",
    "ReceiptChainHead",
    "ReceiptVia",
    "ReviewApproval",
    "ReviewComment",
    "ReviewCounts",
    "ReviewDaily",
    "ReviewHourly",
    "ReviewRequest",
    "ReviewRolledHour",
    "ReviewRule",
    "ReviewStatus",
    "ReviewTimeDaily",
    "ReviewTimeHourly",
    "ReviewView",
    "RuleAction",
    "RuleKind",
    "RuleRisk",
    "RuleScope",
]
