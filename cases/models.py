"""Saved cases (a finished task kept as a regression test) and their replays (issue #31).

A case holds its own copy of everything a replay needs — the spec, the first checkpoint's
workspace, the recorded model decisions and tool results, the pass criteria — so it outlives
the task it was saved from (retention, deletion). A replay is a task of its own
(`Task.is_replay`), linked to its case by a CaseRun."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Case(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    tags = models.JSONField(default=list)
    # Not a foreign key: the case outlives the task it was saved from.
    source_task_id = models.UUIDField(null=True, blank=True)
    # The TaskSpec as the source task ran it (its model is the replay's default candidate).
    spec = models.JSONField()
    # {relative path: text} of the source task's first checkpoint: a replay starts from it.
    workspace = models.JSONField(default=dict)
    # The recording (cases.selectors.task_recording): decisions, calls, steps, final, usage,
    # final files {path: content hash}.
    recording = models.JSONField()
    # What counts as passing (cases.criteria.CaseCriteria).
    criteria = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "created_at"]
        constraints = [models.UniqueConstraint(fields=["name"], name="case_name_unique")]

    def __str__(self) -> str:
        return self.name


class OnDivergence(models.TextChoices):
    # A call the recording does not answer stops the replay there (nothing runs live).
    STOP = "stop"
    # ...or runs, if it is a workspace tool or run_command, in the replay's own workspace and
    # the sandbox with the network off; anything else still stops.
    SANDBOX = "sandbox"


class CaseRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="runs")
    task = models.OneToOneField("tasks.Task", on_delete=models.CASCADE, related_name="+")
    # "recorded": the case's own decisions; otherwise the candidate model's label.
    model = models.CharField(max_length=200, default="recorded")
    on_divergence = models.CharField(
        max_length=10, choices=OnDivergence.choices, default=OnDivergence.STOP
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["case", "-created_at"], name="caserun_case_created")]

    def __str__(self) -> str:
        return f"replay of {self.case_id} ({self.model})"
