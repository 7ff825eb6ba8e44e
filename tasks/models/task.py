"""The task row and its priority."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models

from tasks.states import TERMINAL, TaskStatus


class Priority(models.TextChoices):
    HIGH = "high"
    DEFAULT = "default"
    LOW = "low"


class Task(models.Model):
    """One agent run. Workers and web requests both write this row: workers only through
    lease-fenced conditional UPDATEs (`lease_epoch`), web requests under select_for_update().

    Over 150 lines: one table's columns, each saying why it is (not) indexed, and its indexes."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=200)
    goal = models.TextField()
    spec = models.JSONField()
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.PENDING)
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.DEFAULT)
    current_step = models.PositiveIntegerField(default=0)

    steps_used = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveBigIntegerField(default=0)
    seconds_used = models.FloatField(default=0.0)
    # Seconds the task has spent paused for a human, kept apart (task_transition writes both):
    # waiting for a review decision, and held (on hold, or stopped until an operator retried or
    # recovered it). Neither counts against the session (`human_wait_s`).
    review_wait_s = models.FloatField(default=0.0)
    held_wait_s = models.FloatField(default=0.0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)

    result = models.TextField(blank=True, default="")
    error_class = models.CharField(max_length=50, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    # error class + normalised message (tasks.errors); failure groups GROUP BY it.
    error_fingerprint = models.CharField(max_length=16, blank=True, default="")
    # Whether a tool call of the task had failed or been retried when it finished (set by
    # task_transition on entering a terminal status): the statistics tell a clean success from
    # one that needed failed calls without probing the ledger for every finished task.
    calls_failed = models.BooleanField(default=False)
    # Calls of the task a person rejected, and approved with edited arguments: counted by the
    # review service in the decision's transaction (`task_review_outcome_count`), so the task's
    # page, its list row, the API and the statistics say "succeeded · 1 call rejected" without
    # a query per task. Not indexed, and never written by the worker.
    calls_rejected = models.PositiveIntegerField(default=0)
    calls_edited = models.PositiveIntegerField(default=0)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Indexed by task_finished_status (leading column).
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=200, blank=True, default="")
    # Fencing token: incremented on every acquisition; every worker write is conditional on it.
    lease_epoch = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=0)
    redispatch_count = models.PositiveIntegerField(default=0)
    retry_count = models.PositiveIntegerField(default=0)
    rollback_count = models.PositiveIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    rq_job_id = models.CharField(max_length=100, blank=True, default="")

    # Multi-agent groups (multiagent/): a child task started by its parent's `delegate` call
    # `parent_call_id`, running the parent's sub-agent `agent_name`.
    # Indexed by the `task_parent_call` constraint (parent first).
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        db_index=False,
    )
    parent_call_id = models.CharField(max_length=100, blank=True, default="")
    agent_name = models.CharField(max_length=100, blank=True, default="")
    # The global checkpoint round (multiagent.models.CheckpointRound) this task must prepare
    # for: a worker that sees it stops at its next step boundary.
    hold_round_id = models.UUIDField(null=True, blank=True)
    # A replay of a saved case (cases.CaseRun): its tools answer from the recording, and it is
    # left out of the failure statistics (tasks.rollups).
    is_replay = models.BooleanField(default=False)
    # A task created with `"mode": "plan"` (agent.runtime.plan): "planning" while its dry run
    # goes (left out of the failure statistics), "executing" once its plan is approved.
    plan_phase = models.CharField(max_length=10, blank=True, default="")
    # A sibling forked from one of this task's checkpoints with edits (checkpoints.fork): it
    # starts from that checkpoint's state and workspace; the original is left as it was.
    fork_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )

    # Not indexed: nothing looks tasks up by their head, and leaving the columns the worker
    # updates on every step (heartbeat, head, usage) out of every index lets PostgreSQL apply
    # that update as a HOT update, touching no index at all. Hence no database constraint
    # and no ORM cascade either: either would look tasks up by head for every deleted
    # checkpoint, a sequential scan of the task table per row (retention thinning a 200-step
    # task scanned it hundreds of times). Nothing deletes a head: retention protects it
    # (checkpoints_protected) and a task's own deletion removes both; a head that is gone
    # anyway is treated as corrupt: loading falls back to the newest valid checkpoint.
    head_checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )

    class Meta:
        ordering = ["-created_at"]
        # `status` and `error_class` are served by the composite indexes below (their leading
        # column); the sweeper's stale-heartbeat scan reads the few running tasks by status.
        indexes = [
            # `id` included: the list's count of a status + tool filter probes the tool-call
            # ledger for each task from the index alone (tasks.web.pagination), never the heap.
            models.Index(
                fields=["status", "-created_at"], name="task_status_created", include=["id"]
            ),
            models.Index(fields=["error_class", "-finished_at"], name="task_error_finished"),
            # The statistics' task outcomes and error-class mix over a window of finished_at,
            # answered from the index alone (index-only scans; no column the worker updates
            # every step, so those updates stay HOT).
            models.Index(
                fields=["finished_at", "status", "error_class"], name="task_finished_status"
            ),
            # The statistics' successes after failed calls over a window (index-only count).
            models.Index(
                fields=["finished_at"],
                condition=models.Q(status="succeeded", calls_failed=True),
                name="task_succeeded_failed_calls",
            ),
            # Failure groups (stats) and the list's `fingerprint` filter.
            models.Index(fields=["error_fingerprint", "-finished_at"], name="task_fprint_finished"),
            # The list's creator filter, newest first.
            models.Index(fields=["created_by", "-created_at"], name="task_creator_created"),
            # The list's sort by title (either direction), pages in a stable order.
            models.Index(fields=["title", "created_at"], name="task_title_created"),
        ]
        constraints = [
            # One child per delegate call: starting children is idempotent.
            models.UniqueConstraint(
                fields=["parent", "parent_call_id"],
                condition=models.Q(parent__isnull=False),
                name="task_parent_call",
            ),
        ]
        permissions = [("operate_task", "Can cancel, retry, resume and roll back tasks")]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"

    @property
    def human_wait_s(self) -> float:
        """Seconds paused for a person (review and held): left out of the session clock."""
        return self.review_wait_s + self.held_wait_s

    @property
    def resume_count(self) -> int:
        """Runs that took the task up again where it paused (after a review, a hold, a
        wait): every run (`attempt`) but the first and those a retry, a redispatch or a
        rollback started."""
        others = self.retry_count + self.redispatch_count + self.rollback_count
        return max(0, self.attempt - 1 - others)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def review_notes(self) -> list[str]:
        """What people changed about the run, as the page and the list say it after the
        status: ["1 call rejected", "2 calls edited"]."""
        notes = []
        for count, what in ((self.calls_rejected, "rejected"), (self.calls_edited, "edited")):
            if count:
                notes.append(f"{count} call{'s' if count != 1 else ''} {what}")
        return notes

    @property
    def workspace_path(self) -> Path:
        return settings.HARNESS_WORKSPACE_ROOT / str(self.id)

    @property
    def plan_workspace_path(self) -> Path:
        """A plan task's dry run works on this copy (agent.runtime.plan), never the original."""
        return settings.HARNESS_WORKSPACE_ROOT / f"{self.id}.plan"
