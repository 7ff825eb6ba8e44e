"""The rollback preview: the plan a rollback to a checkpoint follows, and what the page shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing
from checkpoints.models import Checkpoint
from checkpoints.selectors.calls import calls_undone, tool_is_irreversible
from checkpoints.services import CheckpointCorrupted, LoadedCheckpoint, checkpoint_decode
from checkpoints.snapshots import RestoreResult, snapshot_restore_plan
from tasks.models import Task, ToolCall
from tasks.states import TaskStatus


@dataclass
class RollbackPlan:
    """What rolling back to a checkpoint does: the files, links and folders the restore
    writes back and removes, and the calls it undoes. The preview shows it and the rollback
    (checkpoints.recovery) acts on it: one computation for both."""

    files: RestoreResult
    # "disk": the workspace as it is on this machine; otherwise there is none here and the
    # restore writes every file of the snapshot.
    workspace_source: str
    calls_undone: list[ToolCall]
    irreversible: list[ToolCall]
    superseded_seqs: list[int]


def rollback_plan(*, task: Task, loaded: LoadedCheckpoint) -> RollbackPlan:
    """The plan of a rollback to `loaded` (a decoded checkpoint of the task), computed without
    changing anything. Raises BlobMissing / BlobCorrupted when its snapshot cannot be read."""
    here = task.workspace_path.is_dir()
    files = snapshot_restore_plan(workspace=task.workspace_path, snapshot=loaded.snapshot)
    undone = calls_undone(task, loaded)
    return RollbackPlan(
        files=files,
        workspace_source="disk" if here else "no workspace on this machine: every file is written",
        calls_undone=undone,
        irreversible=[row for row in undone if tool_is_irreversible(row.tool, task_id=task.id)],
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
    preview.irreversible = [
        {
            **_call_dict(row),
            "why": "external or non-idempotent: it happened outside the "
            "workspace and a rollback cannot undo it",
        }
        for row in plan.irreversible
    ]
    preview.superseded_seqs = plan.superseded_seqs
    return preview
