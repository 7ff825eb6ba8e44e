"""A group rollback's plan (GroupPlan), computed before anything changes: every participant's
local checkpoint decoded and verified with the blobs its snapshot needs, the shared directory's
snapshot checked, the tasks started after the cut, and what blocks the rollback now."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.recovery import RecoveryInvalid
from checkpoints.services import CheckpointCorrupted, LoadedCheckpoint, checkpoint_decode
from checkpoints.snapshots import (
    RestoreResult,
    snapshot_blob_keys,
    snapshot_manifest,
    snapshot_restore_plan,
)
from multiagent.models import GlobalCheckpoint
from multiagent.shared import shared_path
from tasks.models import Task
from tasks.states import TaskStatus

_BLOCKING: dict[str, str] = {
    TaskStatus.RUNNING: "is running",
    TaskStatus.QUEUED: "is queued and a worker may take it at any moment",
    TaskStatus.PREPARED: "is held by a global checkpoint round",
    TaskStatus.PENDING: "has not started",
}


@dataclass
class Participant:
    task: Task
    loaded: LoadedCheckpoint
    status_at_cut: str
    # What restoring its workspace writes back and removes (the restore after the commit
    # follows the same computation: checkpoints.snapshots.snapshot_restore_plan).
    files: RestoreResult


@dataclass
class SharedRestore:
    """The group's shared directory going back to the cut."""

    path: Path
    snapshot: dict[str, Any]
    files: RestoreResult


@dataclass
class GroupPlan:
    global_checkpoint: GlobalCheckpoint
    participants: list[Participant]
    # Tasks of the group started after the cut: canceled by the rollback.
    later_tasks: list[Task]
    blocked: str
    shared: SharedRestore | None = None

    def restores(self, *, shared: bool = True) -> list[tuple[str, Path, dict[str, Any] | None]]:
        """(what, directory, snapshot) for every directory the rollback restores (without the
        shared directory: `shared=False`)."""
        out: list[tuple[str, Path, dict[str, Any] | None]] = (
            [("the shared directory", self.shared.path, self.shared.snapshot)]
            if self.shared and shared
            else []
        )
        return out + [
            (f"the workspace of task {p.task.id}", p.task.workspace_path, p.loaded.snapshot)
            for p in self.participants
        ]


def _shared_plan(global_checkpoint: GlobalCheckpoint) -> SharedRestore | None:
    """Verify the cut's shared directory snapshot; RecoveryInvalid when it cannot be restored."""
    snapshot = global_checkpoint.shared_snapshot
    if snapshot is None:
        return None
    try:
        missing = blob_store().missing(snapshot_blob_keys(snapshot))
        snapshot_manifest(snapshot)  # readable, every chunk verified
    except (BlobMissing, BlobCorrupted, KeyError, ValueError) as exc:
        raise RecoveryInvalid(
            "global_checkpoint_id", f"the shared directory cannot be restored: {exc}"
        ) from None
    if missing:
        raise RecoveryInvalid(
            "global_checkpoint_id",
            f"the shared directory cannot be restored: {len(missing)} snapshot blob(s) are missing",
        )
    path = shared_path(root_id=global_checkpoint.root_id)
    return SharedRestore(
        path=path, snapshot=snapshot, files=snapshot_restore_plan(workspace=path, snapshot=snapshot)
    )


def group_blocked(members: list[Task]) -> str:
    for task in members:
        if task.hold_round_id is not None:
            return f"task {task.id} is held by a global checkpoint round in progress"
        if task.status in _BLOCKING:
            return f"task {task.id} ({task.agent_name or task.title}) {_BLOCKING[task.status]}"
    return ""


def group_plan(*, members: list[Task], global_checkpoint: GlobalCheckpoint) -> GroupPlan:
    """Load and verify every participant's local checkpoint and the blobs its snapshot needs.
    Raises RecoveryInvalid naming the participant that cannot be restored."""
    by_id = {str(t.id): t for t in members}
    store = blob_store()
    participants = []
    for entry in global_checkpoint.participants:
        task = by_id.get(entry["task_id"])
        checkpoint = Checkpoint.objects.filter(
            id=entry["checkpoint_id"], task_id=entry["task_id"]
        ).first()
        if task is None or checkpoint is None:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {entry['task_id']} cannot be restored: its checkpoint is gone",
            )
        try:
            loaded = checkpoint_decode(checkpoint)
            missing = store.missing(snapshot_blob_keys(loaded.snapshot))
        except (CheckpointCorrupted, KeyError, ValueError) as exc:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {task.id} ({task.agent_name or task.title}) cannot be restored: "
                f"{exc}",
            ) from None
        if missing:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {task.id} cannot be restored: {len(missing)} snapshot blob(s) "
                "are missing",
            )
        participants.append(
            Participant(
                task=task,
                loaded=loaded,
                status_at_cut=entry.get("status", ""),
                files=snapshot_restore_plan(
                    workspace=task.workspace_path, snapshot=loaded.snapshot
                ),
            )
        )
    in_cut = {p.task.id for p in participants}
    later = [
        t for t in members if t.id not in in_cut and t.created_at > global_checkpoint.created_at
    ]
    return GroupPlan(
        global_checkpoint=global_checkpoint,
        participants=participants,
        later_tasks=later,
        blocked=group_blocked(members),
        shared=_shared_plan(global_checkpoint),
    )
