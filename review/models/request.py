"""A review request, its state machine, and its triage thread and approvals."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models

# The kind of a review a standing rule decided (no human): review.services.standing_rules.
STANDING_RULE = "standing_rule"


class ReviewStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    # A human answered a LangGraph interrupt instead of approving or rejecting it.
    RESPONDED = "responded"
    EXPIRED = "expired"
    CANCELED = "canceled"


R = ReviewStatus

# The review state machine: a review is opened pending and decided once. Only
# review.services.transitions.review_transition changes a review's status, and it consults
# this table.
REVIEW_TRANSITIONS: dict[str, frozenset[str]] = {
    R.PENDING: frozenset({R.APPROVED, R.REJECTED, R.RESPONDED, R.EXPIRED, R.CANCELED}),
    R.APPROVED: frozenset(),
    R.REJECTED: frozenset(),
    R.RESPONDED: frozenset(),
    R.EXPIRED: frozenset(),
    R.CANCELED: frozenset(),
}


# The argument names that say what a call acts on, most telling first.
TARGET_ARGUMENTS = ("path", "command", "url", "key", "agent")
# How much of one argument's value an edit line shows (proposed and edited each).
EDIT_VALUE_MAX_CHARS = 300


def edit_lines(changes: Any) -> list[str]:
    """An edit (ReviewRequest.edit_changes) as text, one "argument: proposed → edited" per
    changed argument, each value as JSON cut at EDIT_VALUE_MAX_CHARS ("(absent)": none)."""

    def shown(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False) if value is not None else "(absent)"
        return text if len(text) <= EDIT_VALUE_MAX_CHARS else text[:EDIT_VALUE_MAX_CHARS] + "…"

    return [
        f"{change['argument']}: {shown(change['proposed'])} → {shown(change['edited'])}"
        for change in changes
    ]


class EditedCall:
    """What ReviewRequest derives from an approval's edit (a mixin: the model's own lines stay
    its fields and their rules)."""

    preview: str
    edited_preview: str
    original_arguments: Any
    edited_arguments: Any

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments an approval would run: the latest operator edit, else the proposal."""
        arguments: dict[str, Any] = (
            self.edited_arguments if self.edited_arguments is not None else self.original_arguments
        )
        return arguments

    @property
    def shown_preview(self) -> str:
        """The preview of `arguments`: the edited call's effect once an approval edited them,
        else the proposal's."""
        return self.edited_preview if self.edited_arguments is not None else self.preview

    @property
    def edit_changes(self) -> list[dict[str, Any]]:
        """The edit, argument by argument (proposed -> edited; `None` stands for absent), in
        the proposal's order then the new arguments'; empty when nobody edited."""
        edited = self.edited_arguments
        original = self.original_arguments
        if not isinstance(edited, dict) or not isinstance(original, dict):
            return []
        names = [*original, *(name for name in edited if name not in original)]
        return [
            {"argument": name, "proposed": original.get(name), "edited": edited.get(name)}
            for name in names
            if original.get(name) != edited.get(name) or (name in original) != (name in edited)
        ]

    @property
    def edit_lines(self) -> list[str]:
        return edit_lines(self.edit_changes)


class ReviewRequest(EditedCall, models.Model):
    """A paused call awaiting a human; decided under select_for_update(): one decision wins."""

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="reviews")
    tool_call = models.ForeignKey(
        "tasks.ToolCall", on_delete=models.CASCADE, related_name="reviews"
    )
    checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    tool = models.CharField(max_length=100, db_index=True)
    risk = models.CharField(max_length=20, default="read")
    status = models.CharField(
        max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.PENDING
    )
    # policy | unknown_outcome | langgraph | standing_rule (allowed by `standing_rule`) |
    # version_drift (the code changed under a paused call: review.services.version_drift)
    kind = models.CharField(max_length=30, default="policy")
    matched_rules = models.JSONField(default=list)
    original_arguments = models.JSONField(default=dict)
    edited_arguments = models.JSONField(null=True, blank=True)
    # What the call would do with the arguments the model proposed, computed when the review
    # opened; never rewritten.
    preview = models.TextField(blank=True, default="")
    # The same preview recomputed for `edited_arguments` when an approval edited them (the
    # same preview function, against the same targets), with who edited and when: every page
    # and message that offers a decision shows `shown_preview`, the effect of exactly the
    # arguments whose hash its action binds.
    edited_preview = models.TextField(blank=True, default="")
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    edited_at = models.DateTimeField(null=True, blank=True)
    approvals_required = models.PositiveSmallIntegerField(default=1)
    forbid_creator = models.BooleanField(default=False)
    on_expiry = models.CharField(max_length=20, default="reject")
    requested_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Why the policy paused the call ("why was this paused?").
    reason = models.CharField(max_length=200, blank=True, default="")
    # The operator's reason for a rejection (sent back to the model with the comment).
    decision_reason = models.CharField(max_length=200, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    # A call a standing rule allowed (kind `standing_rule`, decided by the rule, no human), or
    # a call one matched that went to a human instead (the rule was paused or could not stand
    # in for this review): the rule's track record (review.selectors.standing_rule_record).
    standing_rule = models.ForeignKey(
        "review.ReviewRule",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reviews",
    )
    # When a rollback undid the call a standing rule allowed.
    rolled_back_at = models.DateTimeField(null=True, blank=True)
    # A LangGraph interrupt under review (kind `langgraph`): {"id", "mode": plain | batched |
    # per_call, "index" (the action within a batched request), "allowed": the decisions the
    # graph accepts, "value" (plain)}; once decided also "decision", the exact answer the graph
    # is resumed with (agent.graph_runner).
    interrupt = models.JSONField(null=True, blank=True)
    # What the approval is about besides the arguments (review.fingerprint): the state of every
    # target the call acts on when the review opened ({"kind", "sha256", ...}); re-checked just
    # before the approved call runs.
    target_fingerprint = models.JSONField(default=dict, blank=True)
    # The policy that paused the call: sha256 of the matched rules' content and the harness.yaml
    # rules (review.policy.policy_hash); a changed policy is re-evaluated before the call runs.
    policy_hash = models.CharField(max_length=64, blank=True, default="")
    # A review reopened because the world moved after an approval: the review it replaces and
    # what changed ("service.conf changed since you approved", ...).
    reopened_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reopened_as"
    )
    changes = models.JSONField(default=list, blank=True)
    # The code the review was opened under (agent.versions; the shape of Checkpoint.versions).
    versions = models.JSONField(default=dict, blank=True)
    # Kind `version_drift`: what changed under the call (tasks.drift.Drift.as_json) and, once
    # decided, the choice ({"decision": continue | migrate | restart | cancel, ...}).
    drift = models.JSONField(null=True, blank=True)
    choice = models.JSONField(null=True, blank=True)
    plan = models.JSONField(null=True, blank=True)  # kind `plan`: review.services.plans
    # Triage (review.triage; advisory: who works on it, never who may decide it). The operator
    # who claimed it, and a person or a group it is assigned to.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    assigned_group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["requested_at"]
        indexes = [
            models.Index(fields=["status", "requested_at"], name="review_status_requested"),
            models.Index(fields=["status", "expires_at"], name="review_status_expires"),
        ]
        permissions = [("decide_review", "Can approve, edit or reject paused tool calls")]

    def __str__(self) -> str:
        return f"review {self.pk} {self.tool} ({self.status})"

    @property
    def target(self) -> str:
        """What the call acts on, for lists: its path, command, URL or key argument."""
        arguments = self.arguments if isinstance(self.arguments, dict) else {}
        for key in TARGET_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, str | int | float) and str(value):
                return str(value)
            if isinstance(value, list) and value:  # run_command's argv form
                return " ".join(str(part) for part in value)
        return ""

    @property
    def rule_names(self) -> list[str]:
        return [str(rule.get("name", "?")) for rule in self.matched_rules if isinstance(rule, dict)]


class ReviewComment(models.Model):
    """One note in a review's triage thread ("asked the DBA"); plain text, shown escaped."""

    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="comments")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"comment {self.pk} on review {self.review_id}"


class ReviewApproval(models.Model):
    """One operator's approval of one version of the arguments (by hash). A review needs
    `approvals_required` approvals of the same arguments from distinct operators."""

    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="approvals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    arguments_hash = models.CharField(max_length=64)
    comment = models.TextField(blank=True, default="")
    at = models.DateTimeField()

    class Meta:
        ordering = ["at"]
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="reviewapproval_review_user"),
        ]

    def __str__(self) -> str:
        return f"approval of review {self.review_id} by {self.user_id}"
