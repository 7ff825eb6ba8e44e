"""Review rules: an admin's policy rules and operators' standing rules."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from harness_base.config import ReviewRuleConfig
from review.models.request import ReviewRequest


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
    suggestion: it allows the calls it matches until `until` unless paused or revoked."""

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
    # Every other argument the call must carry exactly as given (review.standing.arguments):
    # all but the one matched by pattern above and a tool's payload (write_file's content);
    # an argument the approved call left out must be left out.
    pinned_arguments = models.JSONField(default=dict, blank=True)
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
    # Revoked: for good (no resume); the rule stays for its track record and audit.
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=300, blank=True, default="")
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        indexes = [models.Index(fields=["kind", "tool"], name="reviewrule_kind_tool")]

    def __str__(self) -> str:
        return f"{self.name} ({self.action})"

    @property
    def standing_state(self) -> str:
        """A standing rule's state: revoked | disabled | ended (past `until`) | paused |
        active."""
        if self.revoked_at is not None:
            return "revoked"
        if not self.enabled:
            return "disabled"
        if self.until is None or self.until <= timezone.now():
            return "ended"
        return "paused" if self.paused else "active"

    def as_config(self) -> ReviewRuleConfig:
        """The same validated shape as a harness.yaml rule; raises pydantic ValidationError."""
        return ReviewRuleConfig.model_validate(
            {
                "name": self.name,
                "tool": self.tool or None,
                "risk": self.risk or None,
                "path_glob": self.path_glob or None,
                "command_regex": self.command_regex or None,
                "url_host": self.url_host or None,
                "action": self.action,
                "reason": self.reason,
                "expires_after": (
                    self.expires_after.total_seconds() if self.expires_after else None
                ),
                "on_expiry": self.on_expiry,
                "approvals_required": self.approvals_required,
                "forbid_creator": self.forbid_creator,
            }
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
