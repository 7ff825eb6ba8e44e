"""Operations: the sweeper's last run, the API's tokens and the operators' audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tasks.models.task import Task

# The one sweeper's row (several processes may sweep at once; they share it).
SWEEPER_NAME = "default"


class SweepRun(models.Model):
    """When `harness_sweep` last ran and what it did: one row per sweeper name, overwritten on
    every run (the /ops page shows it; a stale `finished_at` means no sweeper is running)."""

    name = models.CharField(max_length=50, unique=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    duration_ms = models.FloatField(default=0.0)
    # {"stalled": n, "redispatched": n, "failed": n, "requeued": n, "reviews_expired": n,
    #  "hours_rolled": n, ...}
    counts = models.JSONField(default=dict)
    runs = models.PositiveBigIntegerField(default=0)
    host = models.CharField(max_length=200, blank=True, default="")

    def __str__(self) -> str:
        return f"sweep {self.name} at {self.finished_at:%Y-%m-%d %H:%M:%S}"


class ApiToken(models.Model):
    """A bearer token for the REST API. Only its sha256 is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, default="")
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class AuditEntry(models.Model):
    """Every operator action (decide, edit, cancel, retry, rollback, resume, requeue), with
    actor, reason and before/after. Append-only."""

    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=50, db_index=True)
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    target = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["action", "-at"], name="audit_action_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target}"
