"""The review API's output schemas: a review as the API shows it (ReviewOut, with its three facts,
approvals and suggested rules; ReviewDetailOut adds notifications and comments) and ErrorOut."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.utils import timezone
from ninja import Schema

from review import selectors, standing
from review.api.plan_schemas import PlanFields
from review.models import ReviewRequest
from tasks.canonical import canonical_hash


class ErrorOut(Schema):
    detail: str
    errors: list[dict[str, str]] | None = None
    # A machine-readable cause where one is defined: `target_changed` (409) when the call's
    # target is no longer what the decider was shown; `review_id` then names the new review.
    reason: str | None = None
    review_id: int | None = None


class ApprovalOut(Schema):
    user: str
    at: datetime
    arguments_hash: str
    comment: str


class SuggestedRuleOut(Schema):
    # Name it in a decision's `remember.suggestion`; the fields are computed from the call.
    id: str
    kind: str
    description: str
    tool: str
    path_glob: str
    command_regex: str
    url_origin: str
    arguments_hash: str
    # Every other argument the call must carry exactly as here (absent: left out).
    pinned_arguments: dict[str, Any]
    # What the rule matches, argument by argument ("network: exactly true", "content: any").
    matches: list[str]
    scopes: list[str]
    # The latest `until` a remember may ask for.
    until_max: datetime


class ProposedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str


class ApprovedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str
    edited: bool
    # Who edited the arguments (the first approver of the edited version) and their comment.
    edited_by: str | None
    comment: str


class ExecutedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str
    started_at: datetime
    status: str


class EditOut(Schema):
    by: str
    comment: str
    at: datetime | None
    # A unified diff of the arguments as indented JSON, proposed -> approved.
    diff: str


class FactsOut(Schema):
    """The three facts of a review: what the model proposed, what was approved (null until
    approved) and what ran (null until the call started, with exactly the approved
    arguments); `edit` says who changed the arguments, if anyone."""

    proposed: ProposedOut
    approved: ApprovedOut | None
    executed: ExecutedOut | None
    edit: EditOut | None


class CommentOut(Schema):
    user: str | None
    at: datetime
    text: str


def suggested_rules(review: ReviewRequest) -> list[dict[str, Any]]:
    """A review's "approve and always allow" suggestions as SuggestedRuleOut."""
    until_max = timezone.now() + timedelta(days=standing.MAX_DAYS)
    return [
        {
            "id": s.id,
            "kind": s.kind,
            "description": s.description,
            "matches": list(s.matches),
            **s.rule_fields(),
            "scopes": ["creator", "everyone"],
            "until_max": until_max,
        }
        for s in standing.review_suggestions(review)
    ]


class ReviewOut(Schema):
    id: int
    task_id: UUID
    task_title: str
    # A sub-agent's review names the parent task that delegated to it.
    parent_task_id: UUID | None
    parent_task_title: str | None
    call_id: str
    tool: str
    risk: str
    kind: str
    status: str
    arguments: dict[str, Any]
    # sha256 hex of the canonical JSON of `arguments`: an approval sends it back.
    arguments_hash: str
    # The state of what the call acts on when the review opened (tasks.fingerprint): an
    # approval is about it as well as the arguments; an approval may send back its `hash`.
    target_fingerprint: dict[str, Any]
    # sha256 of the policy that paused the call (review.policy.policy_hash).
    policy_hash: str
    # A review reopened because an approval no longer held: the one it replaces, what changed.
    reopened_from_id: int | None
    changes: list[str]
    # The code the review was opened under (docs/deploying.md); {} before it was recorded.
    versions: dict[str, Any]
    original_arguments: dict[str, Any]
    edited_arguments: dict[str, Any] | None
    matched_rules: list[dict[str, Any]]
    reason: str
    # The effect of `arguments` (what `arguments_hash` binds; `proposed_preview`: the proposal's)
    preview: str
    proposed_preview: str
    # An approval's edit ({argument, proposed, edited} each), who made it and when.
    edit: list[dict[str, Any]]
    edited_by: str | None
    edited_at: datetime | None
    approvals_required: int
    approvals: list[ApprovalOut]
    forbid_creator: bool
    on_expiry: str
    checkpoint_id: UUID | None
    requested_at: datetime
    expires_at: datetime | None
    time_left_s: float | None
    decided_at: datetime | None
    decided_by: str | None
    decision_reason: str
    comment: str
    url: str
    facts: FactsOut
    # For a LangGraph interrupt: its id, mode, allowed decisions and, once decided, the answer.
    interrupt: dict[str, Any] | None
    # Kind version_drift: what changed under the call (changes with old and new bodies, the
    # pending tool's new `schema`, `touches`, `arguments_valid` and `argument_errors`), and
    # once decided the choice ({"decision": continue | migrate | restart | cancel, ...}).
    drift: dict[str, Any] | None
    choice: dict[str, Any] | None
    # "Approve and always allow…": rules made from this call, narrowest first (review.standing).
    suggested_rules: list[SuggestedRuleOut]
    # The standing rule that allowed this call (kind standing_rule), or that matched it and
    # could not (paused…): its name.
    standing_rule: str | None
    # Triage (review.triage; advisory, never who may decide): who claimed it, since when, and
    # the person or group it is assigned to.
    claimed_by: str | None
    claimed_at: datetime | None
    assigned_to: str | None
    assigned_group: str | None

    @staticmethod
    def resolve_preview(obj: ReviewRequest) -> str:
        return obj.shown_preview

    @staticmethod
    def resolve_proposed_preview(obj: ReviewRequest) -> str:
        return obj.preview

    @staticmethod
    def resolve_edit(obj: ReviewRequest) -> list[dict[str, Any]]:
        return obj.edit_changes

    @staticmethod
    def resolve_edited_by(obj: ReviewRequest) -> str | None:
        return obj.edited_by.get_username() if obj.edited_by_id and obj.edited_by else None

    @staticmethod
    def resolve_claimed_by(obj: ReviewRequest) -> str | None:
        return obj.claimed_by.get_username() if obj.claimed_by_id and obj.claimed_by else None

    @staticmethod
    def resolve_assigned_to(obj: ReviewRequest) -> str | None:
        return obj.assigned_to.get_username() if obj.assigned_to_id and obj.assigned_to else None

    @staticmethod
    def resolve_assigned_group(obj: ReviewRequest) -> str | None:
        return obj.assigned_group.name if obj.assigned_group_id and obj.assigned_group else None

    @staticmethod
    def resolve_suggested_rules(obj: ReviewRequest) -> list[dict[str, Any]]:
        return suggested_rules(obj)

    @staticmethod
    def resolve_standing_rule(obj: ReviewRequest) -> str | None:
        return obj.standing_rule.name if obj.standing_rule_id and obj.standing_rule else None

    @staticmethod
    def resolve_task_title(obj: ReviewRequest) -> str:
        return obj.task.title

    @staticmethod
    def resolve_parent_task_id(obj: ReviewRequest) -> UUID | None:
        return obj.task.parent_id

    @staticmethod
    def resolve_parent_task_title(obj: ReviewRequest) -> str | None:
        return obj.task.parent.title if obj.task.parent_id and obj.task.parent else None

    @staticmethod
    def resolve_call_id(obj: ReviewRequest) -> str:
        return obj.tool_call.call_id

    @staticmethod
    def resolve_arguments_hash(obj: ReviewRequest) -> str:
        return canonical_hash(obj.arguments)

    @staticmethod
    def resolve_approvals(obj: ReviewRequest) -> list[dict[str, Any]]:
        return selectors.review_approvers(review=obj)

    @staticmethod
    def resolve_time_left_s(obj: ReviewRequest) -> float | None:
        if obj.expires_at is None or obj.status != "pending":
            return None
        return max(0.0, (obj.expires_at - timezone.now()).total_seconds())

    @staticmethod
    def resolve_decided_by(obj: ReviewRequest) -> str | None:
        return obj.decided_by.get_username() if obj.decided_by_id and obj.decided_by else None

    @staticmethod
    def resolve_url(obj: ReviewRequest) -> str:
        return selectors.review_url(review_id=obj.id)

    @staticmethod
    def resolve_facts(obj: ReviewRequest) -> dict[str, Any]:
        return selectors.review_facts(review=obj)


class NotificationOut(Schema):
    channel: str
    kind: str
    # review.requested | review.reminder | review.escalated | review.decided | review.expired
    event: str
    # pending (due at next_attempt_at) | sending | sent | failed (gave up) | canceled
    status: str
    attempts: int
    last_error: str
    sent_at: datetime | None
    next_attempt_at: datetime | None


class ReviewDetailOut(ReviewOut, PlanFields):
    # Who was told about this review, and whether it reached them (review.notifications).
    notifications: list[NotificationOut]

    @staticmethod
    def resolve_notifications(obj: ReviewRequest) -> list[dict[str, Any]]:
        return selectors.review_notifications(review=obj)

    # The triage thread (review.triage), oldest first.
    comments: list[CommentOut]

    @staticmethod
    def resolve_comments(obj: ReviewRequest) -> list[dict[str, Any]]:
        return [
            {"user": c.user.get_username() if c.user else None, "at": c.at, "text": c.text}
            for c in selectors.review_comments(review=obj)
        ]
