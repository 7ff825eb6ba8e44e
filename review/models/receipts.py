"""The decision receipts' hash chain."""

from __future__ import annotations

from django.db import models


class ReceiptVia(models.TextChoices):
    """Where a decision was made."""

    PAGE = "page"  # the review page's buttons
    API = "api"  # POST /api/v1/reviews/{id}/decision
    SWEEP = "sweep"  # the periodic sweep expired the review
    RECOVERY = "recovery"  # a cancel, retry or rollback closed the review undecided
    # The check before an approval found the call's targets changed: the review was closed
    # undecided and reopened as a new one (review.services.review_reopen).
    RECHECK = "recheck"
    # A standing rule approved the call in the worker, no human (review.standing); the actor
    # is "rule:NAME".
    STANDING_RULE = "standing_rule"
    SLACK = "slack"  # a Slack message's button (review.slack)
    EMAIL = "email"  # a signed decision link in a notification email (review.email_links)
    ADMIN = "admin"  # an admin action (a standing rule paused or resumed in /admin/)


class DecisionReceipt(models.Model):
    """An append-only record of one decision on a review, in a hash chain per deployment
    (review.receipts). Ids are plain values, not foreign keys: a receipt outlives the task,
    review and user it names (task deletion, retention), and its hash covers them."""

    seq = models.PositiveBigIntegerField(unique=True)
    at = models.DateTimeField()
    # Empty for a receipt of a standing rule's kill switch (pause, resume, revoke): its
    # subject names the rule.
    review_id = models.BigIntegerField(db_index=True, null=True, blank=True)
    task_id = models.UUIDField(null=True, blank=True)
    # approve | approve_partial | reject | respond | mark_done | rerun | rerun_partial |
    # fail_task | expire | cancel | rule_pause | rule_resume | rule_revoke
    # (review.receipts.RECEIPT_DECISIONS)
    decision = models.CharField(max_length=30)
    via = models.CharField(max_length=20, choices=ReceiptVia.choices)
    # Who: the deciding user's id and username, or a label for the system ("system:sweep").
    actor = models.CharField(max_length=150)
    actor_user_id = models.BigIntegerField(null=True, blank=True)
    # What was decided: tool, call id, arguments hashes, target fingerprint, policy hash...
    subject = models.JSONField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]
        indexes = [models.Index(fields=["at"], name="receipt_at")]

    def __str__(self) -> str:
        return f"receipt {self.seq}: {self.decision} review {self.review_id}"


class ReceiptChainHead(models.Model):
    """The one row holding the chain's newest receipt (seq and hash). Appending locks it, so
    concurrent decisions queue for the next seq; verification compares the chain's end with
    it, so a deleted newest receipt shows too."""

    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="")

    def __str__(self) -> str:
        return f"receipt chain head at {self.seq}"
