from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from harness_base.config import ReviewRuleConfig


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


class ReviewRequest(models.Model):
    """A paused tool call waiting for a human. Decisions change it only under
    select_for_update(), so exactly one of several concurrent decisions wins."""

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
    # policy | unknown_outcome | langgraph | standing_rule (allowed by `standing_rule`)
    kind = models.CharField(max_length=30, default="policy")
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
    def arguments(self) -> dict[str, Any]:
        """The arguments an approval would run: the latest operator edit, else the proposal."""
        return (
            self.edited_arguments if self.edited_arguments is not None else self.original_arguments
        )

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


class RuleAction(models.TextChoices):
    ALLOW = "allow"
    REVIEW = "review"
    DENY = "deny"


class RuleRisk(models.TextChoices):
    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    EXTERNAL = "external"
    DESTRUCTIVE = "destructive"


class OnExpiry(models.TextChoices):
    REJECT = "reject"
    FAIL_TASK = "fail_task"


class RuleKind(models.TextChoices):
    # An admin's policy rule (review.policy), evaluated before harness.yaml's.
    POLICY = "policy"
    # An operator's "approve and always allow" (review.standing): an allow that stands in for
    # its creator's approval of a call the policy sends to review; never part of the policy.
    STANDING = "standing"


class RuleScope(models.TextChoices):
    # The calls of tasks created by `scope_user` (the origin task's creator).
    CREATOR = "creator"
    EVERYONE = "everyone"


class ReviewRule(models.Model):
    """A risk-policy rule edited in the admin (kind `policy`): enabled rules are evaluated (by
    position) before the rules in harness.yaml; empty match fields match anything. See
    review.policy. Or a standing rule (kind `standing`, review.standing), made from a review's
    suggestion: it allows the calls it matches until `until` unless paused."""

    name = models.CharField(max_length=100, unique=True)
    position = models.PositiveIntegerField(default=100, help_text="lower runs first")
    enabled = models.BooleanField(default=True)
    tool = models.CharField(max_length=100, blank=True, default="")
    risk = models.CharField(max_length=20, choices=RuleRisk.choices, blank=True, default="")
    path_glob = models.CharField(
        max_length=300, blank=True, default="", help_text='e.g. "**/*.conf"'
    )
    command_regex = models.CharField(
        max_length=300,
        blank=True,
        default="",
        help_text="a regular expression for run_command's command",
    )
    url_host = models.CharField(
        max_length=300,
        blank=True,
        default="",
        help_text='a host glob for http_request, e.g. "*.example.com"',
    )
    action = models.CharField(max_length=10, choices=RuleAction.choices)
    reason = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="shown to operators and, for deny, to the model",
    )
    expires_after = models.DurationField(
        null=True, blank=True, help_text="how long a review may wait, e.g. 04:00:00"
    )
    on_expiry = models.CharField(max_length=20, choices=OnExpiry.choices, default=OnExpiry.REJECT)
    approvals_required = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(5)]
    )
    forbid_creator = models.BooleanField(
        default=False, help_text="the task's creator may not approve its calls"
    )
    kind = models.CharField(max_length=10, choices=RuleKind.choices, default=RuleKind.POLICY)
    # Standing rules only: what they match beyond tool and path_glob / command_regex.
    url_origin = models.CharField(
        max_length=300, blank=True, default="", help_text='e.g. "https://api.example.com"'
    )
    arguments_hash = models.CharField(
        max_length=64, blank=True, default="", help_text="exactly these arguments"
    )
    origin_review = models.ForeignKey(
        ReviewRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    scope = models.CharField(max_length=10, choices=RuleScope.choices, blank=True, default="")
    scope_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    until = models.DateTimeField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=300, blank=True, default="")
    paused_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        indexes = [models.Index(fields=["kind", "tool"], name="reviewrule_kind_tool")]

    def __str__(self) -> str:
        return f"{self.name} ({self.action})"

    @property
    def standing_state(self) -> str:
        """A standing rule's state: active | paused | ended (past `until`) | disabled."""
        if not self.enabled:
            return "disabled"
        if self.until is None or self.until <= timezone.now():
            return "ended"
        return "paused" if self.paused else "active"

    def as_config(self) -> ReviewRuleConfig:
        """The same validated shape as a harness.yaml rule; raises pydantic ValidationError."""
        return ReviewRuleConfig(
            name=self.name,
            tool=self.tool or None,
            risk=self.risk or None,
            path_glob=self.path_glob or None,
            command_regex=self.command_regex or None,
            url_host=self.url_host or None,
            action=self.action,
            reason=self.reason,
            expires_after=self.expires_after.total_seconds() if self.expires_after else None,
            on_expiry=self.on_expiry,
            approvals_required=self.approvals_required,
            forbid_creator=self.forbid_creator,
        )

    def clean(self) -> None:
        try:
            self.as_config()
        except PydanticValidationError as exc:
            raise ValidationError(
                {
                    str(item["loc"][0]) if item["loc"] else "__all__": item["msg"]
                    for item in exc.errors()
                }
            ) from None


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


class DecisionReceipt(models.Model):
    """An append-only record of one decision on a review, in a hash chain per deployment
    (review.receipts). Ids are plain values, not foreign keys: a receipt outlives the task,
    review and user it names (task deletion, retention), and its hash covers them."""

    seq = models.PositiveBigIntegerField(unique=True)
    at = models.DateTimeField()
    review_id = models.BigIntegerField(db_index=True)
    task_id = models.UUIDField()
    # approve | approve_partial | reject | respond | mark_done | rerun | rerun_partial |
    # fail_task | expire | cancel (review.receipts.RECEIPT_DECISIONS)
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


class NotificationEvent(models.TextChoices):
    REQUESTED = "review.requested"
    # `remind_before_s` before the review expires, if it is still pending.
    REMINDER = "review.reminder"
    # `escalate_after_s` after it opened, still pending: to the route's `escalate_to`.
    ESCALATED = "review.escalated"
    DECIDED = "review.decided"
    EXPIRED = "review.expired"


class NotificationStatus(models.TextChoices):
    # Due at `next_attempt_at` (a reminder's time, or the next retry).
    PENDING = "pending"
    # Claimed by a send job until `next_attempt_at`; past it, the sweep makes it pending again.
    SENDING = "sending"
    SENT = "sent"
    # Gave up after HARNESS_NOTIFY_MAX_ATTEMPTS.
    FAILED = "failed"
    # The review closed before it was due (a reminder or an escalation).
    CANCELED = "canceled"


class Notification(models.Model):
    """One message about one review to one channel (review/notifications/). At most one per
    (review, channel, event): a reminder or an escalation is sent once, however often workers
    restart or the sweep looks. Sending never touches the review."""

    review = models.ForeignKey(
        ReviewRequest, on_delete=models.CASCADE, related_name="notifications"
    )
    # The channel's name in harness.yaml and its kind (email | webhook | slack).
    channel = models.CharField(max_length=64)
    kind = models.CharField(max_length=20)
    event = models.CharField(max_length=30, choices=NotificationEvent.choices)
    status = models.CharField(
        max_length=20, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["review", "channel", "event"], name="notification_review_channel_event"
            ),
        ]
        indexes = [
            # The sweep's due rows.
            models.Index(fields=["status", "next_attempt_at"], name="notification_due"),
            # /ops/: each channel's latest attempts.
            models.Index(fields=["channel", "-last_attempt_at"], name="notification_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.event} of review {self.review_id} to {self.channel} ({self.status})"


class DecisionLinkUse(models.Model):
    """A signed email decision link that was used (review.email_links): the approve and reject
    links one mail gives one person share a nonce, so one of them decides once, ever."""

    nonce = models.CharField(max_length=64, unique=True)
    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="link_uses")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    decision = models.CharField(max_length=20)
    used_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"link {self.decision} of review {self.review_id} used by {self.user_id}"


class ReviewView(models.Model):
    """When a user who may decide first opened a review's page (review.rollups.review_viewed):
    the review SLA statistics' time to first view, and whether (and how long before) the
    decider looked at the page, which always shows the diff or command, before deciding."""

    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="views")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    first_viewed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="reviewview_review_user")
        ]

    def __str__(self) -> str:
        return f"review {self.review_id} first viewed by {self.user_id} at {self.first_viewed_at}"


class ReviewRolledHour(models.Model):
    """One row per hour of `requested_at` the review roll-ups cover (empty hours included).
    `stale`: a review of that hour was decided, viewed or had a notification fail since it was
    rolled; `pending`: reviews still open when it was rolled (rolled again while young)."""

    hour = models.DateTimeField(unique=True)
    pending = models.PositiveIntegerField(default=0)
    stale = models.BooleanField(default=False)
    rolled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"reviews of {self.hour:%Y-%m-%d %H:00} ({self.pending} pending)"


class ReviewCounts(models.Model):
    """Review SLA counts of the reviews opened in a period, by `dim` (rule, tool, operator —
    who decided, "" for nobody — or via, where the decision was made) and its `key`."""

    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    opened = models.PositiveIntegerField(default=0)
    # Approved, rejected or answered by a person.
    decided = models.PositiveIntegerField(default=0)
    approved = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    expired = models.PositiveIntegerField(default=0)
    edited = models.PositiveIntegerField(default=0)
    notifications_failed = models.PositiveIntegerField(default=0)
    unviewed = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class ReviewHourly(ReviewCounts):
    """ReviewCounts of the reviews opened in one hour."""

    hour = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["hour", "dim"], name="reviewhourly_hour_dim")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.dim}={self.key}: {self.opened} opened"


class ReviewTimeHourly(models.Model):
    """Log-scale histograms (tasks.rollups.bucket_value) of the seconds to first view, to
    decision and on the page before deciding, of the reviews opened in one hour."""

    hour = models.DateTimeField()
    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    kind = models.CharField(max_length=12)
    bucket = models.IntegerField()
    reviews = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["hour", "dim"], name="reviewtimehourly_hour_dim")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.dim}={self.key} {self.kind}[{self.bucket}]"


class ReviewDaily(ReviewCounts):
    """ReviewHourly summed over one UTC day (review.rollups keeps it in step with the hours):
    a window of days reads 30 rows per key, not 720."""

    day = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["day", "dim"], name="reviewdaily_day_dim")]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.dim}={self.key}: {self.opened} opened"


class ReviewTimeDaily(models.Model):
    """ReviewTimeHourly summed over one UTC day, one row per (dim, key, kind) holding its whole
    histogram ({bucket: reviews}): a day fills a few thousand buckets, and a window of 30 days
    would otherwise sum ~100,000 rows."""

    day = models.DateTimeField()
    dim = models.CharField(max_length=10)
    key = models.CharField(max_length=150)
    kind = models.CharField(max_length=12)
    histogram = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["day", "dim"], name="reviewtimedaily_day_dim")]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.dim}={self.key} {self.kind}"
