"""Multi-agent groups: a root task and the child tasks its `delegate` calls started (tasks.Task
`parent`). Their coordination state is recorded in two layers: every task keeps its own local
checkpoints (checkpoints.Checkpoint); a GlobalCheckpoint names one local checkpoint per
participant plus the shared directory's snapshot, written only by a committed two-phase round
(multiagent.coordinator)."""

from __future__ import annotations

import uuid

from django.db import models


class RoundStatus(models.TextChoices):
    PREPARING = "preparing"
    COMMITTED = "committed"
    ABORTED = "aborted"


class RoundTrigger(models.TextChoices):
    # Every child delegated in one turn has ended (the default).
    CHILDREN_FINISHED = "children_finished"
    # An operator asked for one (POST …/global-checkpoints).
    MANUAL = "manual"
    # The group's root is about to run a side-effecting call (optional, harness.yaml).
    BEFORE_SIDE_EFFECTS = "before_side_effects"


class CheckpointRound(models.Model):
    """One two-phase round over a group. `participants` are the task ids asked to prepare;
    a participant prepares with a RoundVote naming its local checkpoint. The round ends
    committed (one GlobalCheckpoint) or aborted (none), never both."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    root = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="+")
    trigger = models.CharField(max_length=30, choices=RoundTrigger.choices)
    status = models.CharField(
        max_length=20, choices=RoundStatus.choices, default=RoundStatus.PREPARING
    )
    participants = models.JSONField(default=list)
    deadline = models.DateTimeField()
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # The sweep's scan for open rounds past their deadline.
        indexes = [models.Index(fields=["status", "deadline"], name="round_status_deadline")]

    def __str__(self) -> str:
        return f"round {self.id} ({self.status})"


class RoundVote(models.Model):
    """A participant prepared: it stopped at a step boundary (or was already stopped) with
    this local checkpoint as its head, and holds until the round ends."""

    round = models.ForeignKey(CheckpointRound, on_delete=models.CASCADE, related_name="votes")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="+")
    checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint", on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "task"], name="vote_round_task"),
        ]

    def __str__(self) -> str:
        return f"vote of {self.task_id} in {self.round_id}"


class GlobalCheckpoint(models.Model):
    """A consistent cut of a group: `participants` is [{task_id, checkpoint_id}], one local
    checkpoint per task; `shared_snapshot` the shared directory's manifest (None: the group
    has no shared directory). Append-only; a group rollback supersedes later ones."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    root = models.ForeignKey(
        "tasks.Task", on_delete=models.CASCADE, related_name="global_checkpoints"
    )
    seq = models.PositiveIntegerField()
    round = models.OneToOneField(
        CheckpointRound, on_delete=models.CASCADE, related_name="global_checkpoint"
    )
    trigger = models.CharField(max_length=30, choices=RoundTrigger.choices)
    participants = models.JSONField(default=list)
    shared_snapshot = models.JSONField(null=True, blank=True)
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["root", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["root", "seq"], name="global_checkpoint_root_seq"),
        ]

    def __str__(self) -> str:
        return f"global checkpoint {self.seq} of {self.root_id}"


class SharedRestorePending(models.Model):
    """A committed group rollback whose shared directory is not back at the cut yet: written
    in the rollback's transaction, deleted once the directory is restored
    (multiagent.recovery.shared_restore_finish). A crash or an I/O error between the commit
    and the restore leaves it, and the next run of a participant, or the sweep, finishes the
    restore."""

    root = models.OneToOneField(
        "tasks.Task", primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    global_checkpoint = models.ForeignKey(
        GlobalCheckpoint, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"shared directory of {self.root_id} back to {self.global_checkpoint_id}"
