from __future__ import annotations

import uuid

from django.db import models


class Level(models.TextChoices):
    TASK = "task"
    STEP = "step"
    TOOL = "tool"


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

    class Meta:
        ordering = ["task", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["task", "seq"], name="checkpoint_task_seq"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        stamp = self.created_at.strftime("%Y%m%dT%H%M%S") if self.created_at else "-"
        return f"{str(self.task_id)[:8]}_{self.step_index}_{self.level}_{stamp}"


class Blob(models.Model):
    """A content-addressed, compressed file body, stored once across checkpoints and tasks."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveBigIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"
