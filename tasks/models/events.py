"""The task's immutable event log."""

from __future__ import annotations

from django.db import models

from tasks.models.task import Task


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
