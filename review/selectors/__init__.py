"""Read-side queries for reviews, and who may decide them. One module per family of reads:

    inbox           the navigation's live summary, the list, its sorts and filters, j/k order
    task_reviews    a task's reviews, for its page
    page            the review page: link, comments, targets, files, approvers, rules in words
    facts           the three facts of an edited approval: proposed, approved, ran
    standing_rules  standing rules with their track record
    receipts        decision receipts
    notifications   a review's notifications, each channel's health
    rule_labels     matched rules as the metrics' `rule` label, reviews past their target
    assignees       who a review may be assigned to: those who can decide it
    access          who may decide, and the permission-checked lookup of one review

Each imports only modules listed below it. This package re-exports the public names, so
`from review.selectors import access_review` and `selectors.reviews_list` keep working."""

from review.identities import (
    slack_user_id_of,
    user_for_slack_id,
    users_with_verified_email,
)
from review.selectors.access import access_review, user_can_decide, user_exists
from review.selectors.assignees import (
    deciding_groups,
    review_assignees,
    user_may_decide_review,
)
from review.selectors.facts import (
    arguments_diff,
    call_edit,
    review_edit,
    review_edit_changes,
    review_facts,
)
from review.selectors.inbox import (
    NOBODY,
    ORDER_WINDOW,
    REVIEW_SORTS,
    RISK_RANK,
    SUMMARY_NEW_LIMIT,
    review_neighbours,
    review_next_decidable,
    reviews_list,
    reviews_pending_order,
    reviews_rules,
    reviews_summary,
    reviews_tools,
    reviews_unopened,
)
from review.selectors.notifications import notification_channels_health, review_notifications
from review.selectors.page import (
    RuleText,
    duration_text,
    review_approvers,
    review_comments,
    review_file_paths,
    review_mcp_facts,
    review_targets_text,
    review_url,
    rule_text,
)
from review.selectors.plans import plan_for_execution, task_plan
from review.selectors.receipts import receipts_since, review_receipts
from review.selectors.rule_labels import (
    BUILT_IN_RULES,
    review_breached_labels,
    review_rule_labels,
    reviews_past_target,
    reviews_past_target_by_rule,
    reviews_pending_by_rule,
)
from review.selectors.standing_rules import standing_rule_get, standing_rules, standing_rules_from
from review.selectors.task_reviews import (
    task_call_edits,
    task_migrations_chosen,
    task_reviews,
    task_reviews_pending,
)

__all__ = [
    "slack_user_id_of",
    "user_for_slack_id",
    "users_with_verified_email",
    "deciding_groups",
    "review_assignees",
    "user_may_decide_review",
    "BUILT_IN_RULES",
    "NOBODY",
    "ORDER_WINDOW",
    "REVIEW_SORTS",
    "RISK_RANK",
    "RuleText",
    "SUMMARY_NEW_LIMIT",
    "access_review",
    "plan_for_execution",
    "task_plan",
    "arguments_diff",
    "call_edit",
    "duration_text",
    "notification_channels_health",
    "receipts_since",
    "review_approvers",
    "review_comments",
    "review_edit",
    "review_edit_changes",
    "review_facts",
    "review_file_paths",
    "review_mcp_facts",
    "review_neighbours",
    "review_next_decidable",
    "review_notifications",
    "review_receipts",
    "review_breached_labels",
    "review_rule_labels",
    "reviews_past_target",
    "reviews_past_target_by_rule",
    "review_targets_text",
    "review_url",
    "reviews_list",
    "reviews_unopened",
    "reviews_pending_by_rule",
    "reviews_pending_order",
    "reviews_rules",
    "reviews_summary",
    "reviews_tools",
    "rule_text",
    "standing_rule_get",
    "standing_rules",
    "standing_rules_from",
    "task_call_edits",
    "task_migrations_chosen",
    "task_reviews",
    "task_reviews_pending",
    "user_can_decide",
    "user_exists",
]
