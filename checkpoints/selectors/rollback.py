"""The rollback preview: the plan a rollback to a checkpoint follows, and what the page shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing
from checkpoints.models import Checkpoint
from checkpoints.selectors.calls import calls_undone
from checkpoints.services import CheckpointCorrupted, LoadedCheckpoint, checkpoint_decode
from checkpoints.snapshots import RestoreResult, snapshot_restore_plan
from tasks.models import Task, ToolCall
from tasks.selectors import Irreversible, PlannedCompensation, compensation_for
from tasks.states import TaskStatus


@dataclass
class RollbackPlan:
    """What rolling back to a checkpoint does: the files, links and folders the restore
    writes back and removes, the calls it undoes, the compensating calls that undo their
    effects outside the workspace (newest call first: the reverse of the order they ran in)
    and the effects it cannot undo. The preview shows it and the rollback
    (checkpoints.recovery) acts on it: one computation for both."""

    files: RestoreResult
    # "disk": the workspace as it is on this machine; otherwise there is none here and the
    # restore writes every file of the snapshot.
    workspace_source: str
    calls_undone: list[ToolCall]
    compensations: list[PlannedCompensation]
    irreversible: list[Irreversible]
    superseded_seqs: list[int]


def calls_compensation(
    *, task: Task, undone: list[ToolCall]
) -> tuple[list[PlannedCompensation], list[Irreversible]]:
    """The compensations of the undone calls, newest first, and the calls that cannot be
    undone (oldest first). A call with nothing to undo is in neither list."""
    compensations: list[PlannedCompensation] = []
    irreversible: list[Irreversible] = []
    for row in undone:
        found = compensation_for(row, task=task)
        if isinstance(found, PlannedCompensation):
            compensations.append(found)
        elif isinstance(found, Irreversible):
            irreversible.append(found)
    return compensations[::-1], irreversible


def rollback_plan(*, task: Task, loaded: LoadedCheckpoint) -> RollbackPlan:
    """The plan of a rollback to `loaded` (a decoded checkpoint of the task), computed without
    changing anything. Raises BlobMissing / BlobCorrupted when its snapshot cannot be read."""
    here = task.workspace_path.is_dir()
    files = snapshot_restore_plan(workspace=task.workspace_path, snapshot=loaded.snapshot)
    undone = calls_undone(task, loaded)
    compensations, irreversible = calls_compensation(task=task, undone=undone)
    return RollbackPlan(
        files=files,
        workspace_source="disk" if here else "no workspace on this machine: every file is written",
        calls_undone=undone,
        compensations=compensations,
        irreversible=irreversible,
        superseded_seqs=list(
            Checkpoint.objects.filter(task=task, seq__gt=loaded.checkpoint.seq, superseded=False)
            .order_by("seq")
            .values_list("seq", flat=True)
        ),
    )


@dataclass
class RollbackPreview:
    task: Task
    checkpoint: Checkpoint
    checksum_ok: bool
    blocked: str = ""
    files_restore: list[str] = field(default_factory=list)
    files_delete: list[str] = field(default_factory=list)
    files_mode: list[str] = field(default_factory=list)
    links_delete: list[str] = field(default_factory=list)
    folders_delete: list[str] = field(default_factory=list)
    workspace_source: str = "disk"
    steps_undone: list[dict[str, Any]] = field(default_factory=list)
    calls_undone: list[dict[str, Any]] = field(default_factory=list)
    compensations: list[dict[str, Any]] = field(default_factory=list)
    irreversible: list[dict[str, Any]] = field(default_factory=list)
    superseded_seqs: list[int] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.blocked

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": str(self.task.id),
            "task_status": self.task.status,
            "checkpoint_id": str(self.checkpoint.id),
            "checkpoint_seq": self.checkpoint.seq,
            "checkpoint_name": self.checkpoint.name,
            "checksum_ok": self.checksum_ok,
            "allowed": self.allowed,
            "blocked": self.blocked,
            "files_restore": self.files_restore,
            "files_delete": self.files_delete,
            "files_mode": self.files_mode,
            "links_delete": self.links_delete,
            "folders_delete": self.folders_delete,
            "workspace_source": self.workspace_source,
            "steps_undone": self.steps_undone,
            "calls_undone": self.calls_undone,
            "compensations": self.compensations,
            "irreversible": self.irreversible,
            "superseded_seqs": self.superseded_seqs,
        }


def recovery_blocked(task: Task) -> str:
    """Why no recovery operation may run on the task now ('' when one may)."""
    if task.status == TaskStatus.RUNNING:
        return "the task is running; cancel it or wait until it stops"
    if task.status == TaskStatus.QUEUED:
        return "the task is queued and a worker may take it at any moment"
    if task.status == TaskStatus.PENDING:
        return "the task has not started"
    return ""


def _call_dict(row: ToolCall) -> dict[str, Any]:
    return {
        "call_id": row.call_id,
        "tool": row.tool,
        "arguments": row.arguments,
        "status": row.status,
        "step_index": row.step_index,
    }


def compensation_dict(item: PlannedCompensation) -> dict[str, Any]:
    """A planned compensation as the preview (page and API) shows it: the compensating call
    (`tool`, `arguments`, `review`: whether it will pause for review) of the original call
    `call_id`."""
    return {
        "call_id": item.call_id,
        "tool": item.tool,
        "arguments": item.arguments,
        "review": item.review,
        "outcome_unknown": item.outcome_unknown,
        "unresolved": item.unresolved,
        "original": _call_dict(item.call),
    }


def irreversible_dict(item: Irreversible) -> dict[str, Any]:
    return {**_call_dict(item.call), "why": item.why}


def rollback_preview(*, task: Task, checkpoint: Checkpoint) -> RollbackPreview:
    """What rolling back to `checkpoint` would do (its rollback_plan), computed without
    changing anything."""
    try:
        loaded = checkpoint_decode(checkpoint)
    except CheckpointCorrupted as exc:
        return RollbackPreview(
            task=task,
            checkpoint=checkpoint,
            checksum_ok=False,
            blocked=f"this checkpoint is corrupted ({exc})",
        )
    preview = RollbackPreview(
        task=task, checkpoint=checkpoint, checksum_ok=True, blocked=recovery_blocked(task)
    )
    try:
        plan = rollback_plan(task=task, loaded=loaded)
    except (BlobMissing, BlobCorrupted) as exc:
        preview.blocked = f"the snapshot cannot be read from the blob store ({exc})"
        return preview
    preview.files_restore = plan.files.written
    preview.files_delete = plan.files.deleted
    preview.files_mode = plan.files.modes
    preview.links_delete = plan.files.links
    preview.folders_delete = plan.files.folders
    preview.workspace_source = plan.workspace_source
    preview.calls_undone = [_call_dict(row) for row in plan.calls_undone]
    steps: dict[int, list[str]] = {}
    for row in plan.calls_undone:
        steps.setdefault(row.step_index, []).append(row.tool)
    preview.steps_undone = [{"step_index": s, "tools": tools} for s, tools in sorted(steps.items())]
    preview.compensations = [compensation_dict(item) for item in plan.compensations]
    preview.irreversible = [irreversible_dict(item) for item in plan.irreversible]
    preview.superseded_seqs = plan.superseded_seqs
    return preview
