"""The tool-call ledger and what each attempt of a call produced."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from tasks.models.task import Task
from tasks.states import ToolCallStatus


class ToolCall(models.Model):
    """The idempotency ledger: one row per (task, call_id), the intent recorded before a side
    effect runs and the outcome after it."""

    # Neither the task nor the tool has an index of its own: the ledger's indexes that lead with
    # them serve those lookups (toolcall_task_callid, toolcall_task_tool; toolcall_tool_status),
    # and every index more is maintained by each call's intent and outcome writes.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="tool_calls", db_index=False
    )
    call_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=100)
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
    # A plan task's call (agent.runtime.plan): `planned` (made by the dry run; never a tool's
    # outcome, left out of the statistics), or in the execution run `in_plan`, `outside_plan`
    # or `departed` (from the item `plan_item`, which its review names).
    plan_mark = models.CharField(max_length=12, blank=True, default="")
    plan_item = models.CharField(max_length=20, blank=True, default="")

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
    # zlib-compressed; empty when `preview` holds the whole part (tasks.outputs.output_content).
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
