from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from checkpoints.versions_ref import VersionsField


class Level(models.TextChoices):
    TASK = "task"
    STEP = "step"
    TOOL = "tool"


# How each trigger reads in a checkpoint's label (others: the trigger with spaces).
TRIGGER_WORDS = {
    "after_model": "after the model's turn",
    "after_planning_step": "after planning",
    "before_tool": "before a call",
    "before_write_operation": "before a write",
    "before_external_call": "before an external call",
    "before_review": "before a review",
    "before_delegate": "before delegating",
    "on_retryable_error": "before a retry",
    "manual": "taken by an operator",
    "fork": "forked",
    "group_rollback": "group rollback",
    "global_prepare": "group checkpoint",
    "children_finished": "children finished",
}


class Checkpoint(models.Model):
    """The explicit agent state at one transition boundary. Append-only: rollback and retry
    fork a new checkpoint from an ancestor (`parent`) and mark later ones superseded; nothing
    is rewritten or deleted except by retention.

    `payload` is the zlib-compressed canonical JSON of {"state": AgentState, "snapshot":
    manifest}; `checksum` is the sha256 of the uncompressed canonical bytes and is verified on
    every load."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by the (task, seq) unique constraint; a separate task index would only add a
    # write to every checkpoint insert.
    task = models.ForeignKey(
        "tasks.Task", on_delete=models.CASCADE, related_name="checkpoints", db_index=False
    )
    seq = models.PositiveIntegerField()
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    level = models.CharField(max_length=10, choices=Level.choices)
    trigger = models.CharField(max_length=40)
    step_index = models.PositiveIntegerField(default=0)
    schema_version = models.PositiveSmallIntegerField(default=1)
    payload = models.BinaryField()
    checksum = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField(default=0)
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    # Whether retention has counted this checkpoint's snapshot in BlobRef (checkpoints.retention).
    blobs_counted = models.BooleanField(default=False)
    # The call a tool-level checkpoint precedes, as it reads ("write_file etc/nginx.conf"; set
    # when the run writes it, agent.runtime.run_writes), "" for the others: `label` shows it
    # on list pages without a query per row.
    subject = models.CharField(max_length=200, blank=True, default="")
    # The code the checkpoint was made with (agent.versions): {"harness": {"version", "commit"},
    # "spec", "tools", "mcp", "graph", "agent", "policy"}, each hash naming a VersionBody; a
    # run's stored by reference to a VersionBody of the whole dict (checkpoints.versions_ref).
    versions = VersionsField(default=dict, blank=True)
    # Not a column: the payload of the checkpoint this one is stored as (checkpoints.payload
    # `checkpoint_same_as`), when a list read it ahead (services.checkpoints_with_sources).
    source_payload: bytes | memoryview | None = None

    class Meta:
        ordering = ["task", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["task", "seq"], name="checkpoint_task_seq"),
        ]
        indexes = [
            # The few rows retention has yet to count, never the whole table.
            models.Index(
                fields=["created_at"],
                name="checkpoint_blobs_uncounted",
                condition=models.Q(blobs_counted=False),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        """The checkpoint's identifier-like name (`1ba243de_2_tool_20261206T002903`)."""
        stamp = self.created_at.strftime("%Y%m%dT%H%M%S") if self.created_at else "-"
        return f"{str(self.task_id)[:8]}_{self.step_index}_{self.level}_{stamp}"

    @property
    def label(self) -> str:
        """What the checkpoint is, as calls and steps read: "before write_file etc/nginx.conf
        · step 4", "after the model's turn · step 2", "task start"."""
        step = f"step {self.step_index}"
        if self.subject:
            before = "before review of" if self.trigger == "before_review" else "before"
            return f"{before} {self.subject} · {step}"
        if self.trigger == "task_start":
            return "task start"
        if self.trigger == "after_step":
            # Taken once the step is counted: the step it follows is the one before.
            return f"after step {max(self.step_index - 1, 0)}"
        words = TRIGGER_WORDS.get(self.trigger, self.trigger.replace("_", " "))
        return f"{words} · {step}"


class Blob(models.Model):
    """A content-addressed, compressed file body, stored once across checkpoints and tasks."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveBigIntegerField()
    data = models.BinaryField()
    # Indexed: retention walks the blobs by age, a bounded step at a time.
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"


class VersionBody(models.Model):
    """What a hash in `versions` stands for (a tool's argument schema, an MCP server's tool
    list, a graph's structure, an agent's definition, the policy), stored once by its sha256:
    a drift review shows the old body beside the new one."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.sha256[:12]


# --- LangGraph checkpoints (checkpoints.langgraph.DjangoCheckpointSaver) ----------------------
# LangGraph's own shape, kept apart from the harness's Checkpoint: a graph's checkpoint is keyed
# by (thread_id, checkpoint_ns, checkpoint_id) and its channel values are stored once per
# channel version in GraphBlob. Bodies are LangGraph serializer output (`type` names the
# encoding, e.g. "msgpack"), never pickle: the saver's serializer refuses pickle.


class GraphCheckpoint(models.Model):
    """One LangGraph checkpoint. `checkpoint` holds the serialized Checkpoint minus the channel
    values stored in GraphBlob; `metadata` is LangGraph's CheckpointMetadata as JSON (source,
    step, parents, run_id, ...), filterable by `list(filter=...)`."""

    # Set when the graph runs as a harness task (thread_id is then the task id), so the task
    # page lists its graph checkpoints and deleting the task deletes them.
    task = models.ForeignKey(
        "tasks.Task",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="graph_checkpoints",
    )
    thread_id = models.TextField()
    checkpoint_ns = models.TextField(default="", blank=True)
    checkpoint_id = models.TextField()
    parent_checkpoint_id = models.TextField(default="", blank=True)  # "" = the first one
    type = models.TextField()
    checkpoint = models.BinaryField()
    metadata = models.JSONField(default=dict)
    # The code the graph checkpoint was made with (as Checkpoint.versions, with "graph").
    versions = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            # Also the index of every lookup: latest per (thread, ns) is the last entry of
            # this index, list() walks it backwards.
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "checkpoint_id"],
                name="graphcheckpoint_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.checkpoint_id}"


class GraphBlob(models.Model):
    """One channel value at one version: stored once, shared by every checkpoint of the thread
    whose channel_versions name that version. `blob` is NULL for an emptied channel."""

    thread_id = models.TextField()
    checkpoint_ns = models.TextField(default="", blank=True)
    channel = models.TextField()
    version = models.TextField()
    type = models.TextField()
    blob = models.BinaryField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "channel", "version"],
                name="graphblob_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.channel}@{self.version}"


class GraphWrite(models.Model):
    """A pending write of one LangGraph task (node run) against a checkpoint: what a resumed
    super-step replays instead of running the node again. `idx` is the write's position, or
    LangGraph's negative index for the special channels (error, interrupt, resume)."""

    thread_id = models.TextField()
    checkpoint_ns = models.TextField(default="", blank=True)
    checkpoint_id = models.TextField()
    graph_task_id = models.TextField()
    task_path = models.TextField(default="", blank=True)
    idx = models.IntegerField()
    channel = models.TextField()
    type = models.TextField()
    blob = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "checkpoint_id", "graph_task_id", "idx"],
                name="graphwrite_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint_id}/{self.graph_task_id}/{self.idx}:{self.channel}"


class GraphWorkspace(models.Model):
    """The task's workspace at one of its graph's checkpoints: the snapshot reference
    (`checkpoints.snapshots.snapshot_capture`) the graph runner captured when LangGraph stored
    that checkpoint, before the next super-step's nodes ran. A rollback to the checkpoint
    restores it; the fork it writes gets the same snapshot. Retention keeps its blobs."""

    task = models.ForeignKey(
        "tasks.Task", on_delete=models.CASCADE, related_name="graph_workspaces", db_index=False
    )
    checkpoint_id = models.TextField()
    snapshot = models.JSONField()
    created_at = models.DateTimeField()
    # Whether retention has counted this snapshot in BlobRef (checkpoints.retention).
    blobs_counted = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # Also the index of the lookups (task, checkpoint_id).
            models.UniqueConstraint(fields=["task", "checkpoint_id"], name="graphworkspace_key"),
        ]
        indexes = [
            models.Index(
                fields=["created_at"],
                name="graphworkspace_uncounted",
                condition=models.Q(blobs_counted=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.checkpoint_id}"


class BlobRef(models.Model):
    """How many holders reference a blob, kept by retention (checkpoints.retention) so that
    garbage collection never scans the checkpoints. `key` is "<kind>:<sha256>": a snapshot
    root ("r") counts the checkpoints and graph workspaces that name it, a manifest chunk
    ("c") the live roots that list it, a file body ("f") the live chunks that list it, a
    checkpoint payload's base ("b") the checkpoints compressed against it. A row
    whose count fell to 0 is a candidate for collection from `zero_since` on."""

    key = models.CharField(max_length=66, primary_key=True)
    refs = models.IntegerField(default=0)
    zero_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["zero_since"], name="blobref_zero", condition=models.Q(refs__lte=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key[:14]} ({self.refs})"
