"""Saved task templates: a task spec kept under a name by the person who saved it, to start
again with changed inputs (the New task page, `/api/v1/templates`)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tasks.models.task import Task


class TaskTemplate(models.Model):
    """A validated TaskSpec (as `Task.spec` stores it) under a name. It belongs to its creator:
    only they list, read and start it (tasks.selectors.access_template). The spec is checked
    again, as a new task's, every time it starts: a tool, graph or endpoint removed since it
    was saved refuses the start, naming the field."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    spec = models.JSONField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_templates"
    )
    # The task it was saved from, if any (kept as a link; the template holds its own copy).
    source_task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at",)
        # A person's templates, newest first (the list, the New task page).
        indexes = [models.Index(fields=["created_by", "-created_at"], name="template_owner_idx")]

    def __str__(self) -> str:
        return self.name
