from __future__ import annotations

from django.conf import settings
from django.db import models


class ReviewStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELED = "canceled"


class ReviewRequest(models.Model):
    """A paused tool call waiting for a human. Decisions change it only under
    select_for_update(), so exactly one of several concurrent decisions wins."""

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="reviews")
    tool_call = models.ForeignKey(
        "tasks.ToolCall", on_delete=models.CASCADE, related_name="reviews"
    )
    checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    tool = models.CharField(max_length=100, db_index=True)
    risk = models.CharField(max_length=20, default="read")
    status = models.CharField(
        max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.PENDING
    )
    kind = models.CharField(max_length=30, default="policy")  # policy | unknown_outcome
    matched_rules = models.JSONField(default=list)
    original_arguments = models.JSONField(default=dict)
    edited_arguments = models.JSONField(null=True, blank=True)
    preview = models.TextField(blank=True, default="")
    approvals_required = models.PositiveSmallIntegerField(default=1)
    forbid_creator = models.BooleanField(default=False)
    on_expiry = models.CharField(max_length=20, default="reject")
    requested_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    reason = models.CharField(max_length=200, blank=True, default="")
    comment = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["requested_at"]
        indexes = [
            models.Index(fields=["status", "requested_at"], name="review_status_requested"),
            models.Index(fields=["status", "expires_at"], name="review_status_expires"),
        ]
        permissions = [("decide_review", "Can approve, edit or reject paused tool calls")]

    def __str__(self) -> str:
        return f"review {self.pk} {self.tool} ({self.status})"
