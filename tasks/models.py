from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tasks.states import TERMINAL, TaskStatus, ToolCallStatus


class Priority(models.TextChoices):
    HIGH = "high"
    DEFAULT = "default"
    LOW = "low"


class Task(models.Model):
    """One agent run. Workers and web requests both write this row: workers only through
    lease-fenced conditional UPDATEs (`lease_epoch`), web requests under select_for_update()."""

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
            models.Index(fields=["status", "-created_at"], name="task_status_created"),
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
    def workspace_path(self):
        return settings.HARNESS_WORKSPACE_ROOT / str(self.id)


class TaskEvent(models.Model):
    """The immutable frame log. `id` is the global, monotonic sequence; per task, ordering by
    id is the order in which the events happened."""

    # Indexed by `event_task_seq` (task, id); see Checkpoint.task.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events", db_index=False)
    type = models.CharField(max_length=50)
    payload = models.JSONField(default=dict)
    step_index = models.IntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["task", "id"], name="event_task_seq"),
            models.Index(fields=["type", "created_at"], name="event_type_created"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.id} {self.type}"

    @property
    def seq(self) -> int:
        return self.id


class ToolCall(models.Model):
    """The idempotency ledger: one row per (task, call_id), the intent recorded before a side
    effect runs and the outcome after it."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=100, db_index=True)
    arguments = models.JSONField(default=dict)
    # sha256 of the canonical arguments that may execute (set on approval; checked before running).
    arguments_hash = models.CharField(max_length=64, blank=True, default="")
    risk = models.CharField(max_length=20, default="read")
    status = models.CharField(
        max_length=20, choices=ToolCallStatus.choices, default=ToolCallStatus.PROPOSED
    )
    step_index = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error_class = models.CharField(max_length=50, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    # One entry per attempt: {n, started_at, finished_at, status, error_class, error_message}.
    attempt_log = models.JSONField(default=list)
    # When the model proposed the call (the row is built then, and may be written only with
    # its outcome: auto_now_add would stamp the write, after the call had finished).
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "call_id"], name="toolcall_task_callid"),
        ]
        indexes = [
            models.Index(fields=["tool", "status", "created_at"], name="toolcall_tool_status"),
            # The failure statistics: a window of created_at, aggregated from the index alone
            # (index-only scans) rather than from the wide rows.
            models.Index(
                fields=[
                    "created_at",
                    "tool",
                    "status",
                    "error_class",
                    "step_index",
                    "attempts",
                    "duration_ms",
                ],
                name="toolcall_stats",
            ),
            # The task list's tool filter: EXISTS probes answered from the index alone.
            models.Index(fields=["task", "tool"], name="toolcall_task_tool"),
        ]

    def __str__(self) -> str:
        return f"{self.call_id} {self.tool} ({self.status})"


class OutputKind(models.TextChoices):
    TEXT = "text"  # shown escaped, as text
    IMAGE = "image"  # one of tasks.outputs.SAFE_IMAGE_TYPES, shown as <img>
    LINK = "link"  # an http(s) link (`href`), shown as a link; else as text
    BINARY = "binary"  # offered as a download only


# Of each output part, what the pages show (the rest is a download).
PREVIEW_BYTES = 8 * 1024


class ToolOutput(models.Model):
    """One part of what one attempt of a tool call produced (tasks.outputs): a command's stdout
    or stderr, a file tool's diff, an HTTP body, an MCP content block. Stored bounded (the
    first STORED_BYTES, zlib-compressed) and written with the call's outcome; `partial`: the
    tail last seen while the call ran, kept for a call whose worker was lost. Keyed by the
    call's id, not its row: it is inserted in the same statement as a new ledger row."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="tool_outputs")
    call_id = models.CharField(max_length=100)
    attempt = models.PositiveIntegerField()
    position = models.PositiveSmallIntegerField(default=0)
    name = models.CharField(max_length=50)
    kind = models.CharField(max_length=10, choices=OutputKind.choices, default=OutputKind.TEXT)
    media_type = models.CharField(max_length=100, default="text/plain")
    href = models.CharField(max_length=2000, blank=True, default="")
    # Bytes the tool produced, and bytes stored (less when it produced more than is kept).
    size = models.PositiveBigIntegerField(default=0)
    stored = models.PositiveIntegerField(default=0)
    data = models.BinaryField()
    # The first PREVIEW_BYTES as text (a text part), so pages never decompress `data`.
    preview = models.TextField(blank=True, default="")
    partial = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        # The calls tab and the API: a page of calls' outputs by call id.
        indexes = [models.Index(fields=["task", "call_id"], name="tooloutput_task_call")]

    def __str__(self) -> str:
        return f"{self.call_id} attempt {self.attempt} {self.name}"

    @property
    def cut(self) -> bool:
        """Less is stored than the tool produced."""
        return self.stored < self.size

    @property
    def preview_cut(self) -> bool:
        """The page shows less than is stored."""
        return self.stored > PREVIEW_BYTES

    @property
    def link(self) -> str:
        """The link of a resource link, when it is http(s); else nothing to follow."""
        return self.href if self.href.lower().startswith(("http://", "https://")) else ""


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


# --- statistics roll-ups (written only by tasks.rollups, from the sweep) -----------------------
# The failure statistics read whole, rolled-up hours from these tables and only the window's
# ragged edges (less than an hour at the start, the not-yet-rolled hours at the end) from
# ToolCall and Task, so a 30-day window costs about what a 1-hour window does. The *Daily
# tables sum the hours of each UTC day: a window's whole days read those, its other hours the
# hourly rows.


class ToolCallCounts(models.Model):
    """Settled tool calls of a period × tool × status × error class × attempts."""

    tool = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=ToolCallStatus.choices)
    error_class = models.CharField(max_length=50, blank=True, default="")
    attempts = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallHourly(ToolCallCounts):
    """ToolCallCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            # Leading `hour`, covering `calls`: every window read is an index-only scan.
            models.UniqueConstraint(
                fields=["hour", "tool", "status", "error_class", "attempts"],
                include=["calls"],
                name="toolcallhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.tool} {self.status}: {self.calls}"


class ToolCallDaily(ToolCallCounts):
    """ToolCallHourly summed over one UTC day (tasks.rollups keeps it in step with the hours):
    a window of days reads a day's row per key, not 24."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tool", "status", "error_class", "attempts"],
                include=["calls"],
                name="toolcalldaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.tool} {self.status}: {self.calls}"


class ToolCallStepCounts(models.Model):
    """Settled tool calls of a period × step index (the statistics' failure rate per step)."""

    step_index = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallStepHourly(ToolCallStepCounts):
    """ToolCallStepCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "step_index"],
                include=["calls", "failed"],
                name="toolcallstephourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} step {self.step_index}: {self.calls}"


class ToolCallStepDaily(ToolCallStepCounts):
    """ToolCallStepHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "step_index"],
                include=["calls", "failed"],
                name="toolcallstepdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} step {self.step_index}: {self.calls}"


class ToolCallDurationCounts(models.Model):
    """Settled calls with a measured duration of a period × tool × log-scale duration bucket
    (`tasks.rollups.log_bucket`): percentiles of any window merge these histograms."""

    tool = models.CharField(max_length=100)
    bucket = models.IntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallDurationHourly(ToolCallDurationCounts):
    """ToolCallDurationCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "tool", "bucket"],
                include=["calls"],
                name="toolcalldurationhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.tool} bucket {self.bucket}: {self.calls}"


class ToolCallDurationDaily(ToolCallDurationCounts):
    """ToolCallDurationHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tool", "bucket"],
                include=["calls"],
                name="toolcalldurationdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.tool} bucket {self.bucket}: {self.calls}"


class TaskCounts(models.Model):
    """Tasks that finished (terminal status) in a period × status × error class × error
    fingerprint × `calls_failed`: the statistics' task outcomes (with how many had a call
    rejected or edited by a person), failure groups and error mix, and the time those tasks
    waited for a human — for a review and, apart from it, held by an operator
    (`waited_review` / `waited_held`: how many waited at all)."""

    status = models.CharField(max_length=20)
    error_class = models.CharField(max_length=50, blank=True, default="")
    error_fingerprint = models.CharField(max_length=16, blank=True, default="")
    calls_failed = models.BooleanField()
    tasks = models.PositiveIntegerField()
    # min / max finished_at of the group.
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    # max(error_message) of the group: the failure groups' sample message.
    sample = models.TextField(blank=True, default="")
    # How many of the group's tasks had a call a person rejected / approved edited.
    with_rejected = models.PositiveIntegerField(default=0)
    with_edited = models.PositiveIntegerField(default=0)
    waited_review = models.PositiveIntegerField()
    review_wait_sum = models.FloatField()
    waited_held = models.PositiveIntegerField()
    held_wait_sum = models.FloatField()

    class Meta:
        abstract = True


class TaskHourly(TaskCounts):
    """TaskCounts per hour of `finished_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "status", "error_class", "error_fingerprint", "calls_failed"],
                name="taskhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.status} {self.error_class}: {self.tasks}"


class TaskDaily(TaskCounts):
    """TaskHourly over one UTC day (sums; first_seen, last_seen and sample: min / max)."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "status", "error_class", "error_fingerprint", "calls_failed"],
                name="taskdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.status} {self.error_class}: {self.tasks}"


class TaskWaitCounts(models.Model):
    """Finished tasks that waited for a human in a period × kind ("review" or "held") ×
    log-scale bucket of the seconds waited (`tasks.rollups.log_bucket`): the wait percentiles
    of any window merge these histograms."""

    kind = models.CharField(max_length=10)
    bucket = models.IntegerField()
    tasks = models.PositiveIntegerField()

    class Meta:
        abstract = True


class TaskWaitHourly(TaskWaitCounts):
    """TaskWaitCounts per hour of `finished_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "kind", "bucket"], include=["tasks"], name="taskwaithourly_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.kind} bucket {self.bucket}: {self.tasks}"


class TaskWaitDaily(TaskWaitCounts):
    """TaskWaitHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "kind", "bucket"], include=["tasks"], name="taskwaitdaily_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.kind} bucket {self.bucket}: {self.tasks}"


class RolledHour(models.Model):
    """One row per hour the roll-ups cover (empty hours included, so the covered span is
    contiguous): tool calls by `created_at`, tasks by `finished_at`. `unsettled`: calls of that
    hour that had no final outcome when it was rolled; the sweep rolls such an hour again while
    it is young (tasks.rollups.RESETTLE_WITHIN). `stale`: a task that finished in it left its
    terminal status since (an operator's retry or rollback); the sweep rolls it again."""

    hour = models.DateTimeField(unique=True)
    unsettled = models.PositiveIntegerField(default=0)
    stale = models.BooleanField(default=False)
    rolled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} ({self.unsettled} unsettled)"
