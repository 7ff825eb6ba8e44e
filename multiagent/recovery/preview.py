"""What a group rollback would do, per agent (`group_rollback_preview`), computed from its plan
without changing anything."""

from __future__ import annotations

from typing import Any

from checkpoints.models import Checkpoint
from checkpoints.recovery import RecoveryInvalid
from checkpoints.selectors import (
    calls_compensation,
    calls_undone,
    compensation_dict,
    irreversible_dict,
)
from multiagent.models import GlobalCheckpoint
from multiagent.recovery.plan import group_plan
from multiagent.selectors import group_member_ids
from tasks.models import Task
from tasks.states import TERMINAL


def group_rollback_preview(*, root: Task, global_checkpoint: GlobalCheckpoint) -> dict[str, Any]:
    """What rolling the group back would do, per agent, computed without changing anything."""
    members = list(Task.objects.filter(id__in=group_member_ids(root_id=root.id)).order_by("id"))
    try:
        plan = group_plan(members=members, global_checkpoint=global_checkpoint)
    except RecoveryInvalid as exc:
        return {
            "global_checkpoint_id": global_checkpoint.id,
            "seq": global_checkpoint.seq,
            "allowed": False,
            "blocked": exc.message,
            "participants": [],
            "shared": None,
            "canceled": [],
            "superseded_global_seqs": [],
        }
    return {
        "global_checkpoint_id": global_checkpoint.id,
        "seq": global_checkpoint.seq,
        "allowed": not plan.blocked,
        "blocked": plan.blocked,
        "participants": [
            {
                **_effects(p.task, calls_undone(p.task, p.loaded)),
                "task_id": p.task.id,
                "agent": p.task.agent_name,
                "title": p.task.title,
                "status": p.task.status,
                "status_at_cut": p.status_at_cut,
                "checkpoint_id": p.loaded.checkpoint.id,
                "checkpoint_seq": p.loaded.checkpoint.seq,
                "step_index": p.loaded.checkpoint.step_index,
                "files_restore": p.files.written,
                "files_delete": p.files.deleted,
                "links_delete": p.files.links,
                "folders_delete": p.files.folders,
                "checkpoints_superseded": Checkpoint.objects.filter(
                    task=p.task, seq__gt=p.loaded.checkpoint.seq, superseded=False
                ).count(),
            }
            for p in plan.participants
        ],
        # The shared directory's changes (None: the group has none, or the cut predates it).
        "shared": {
            "files_restore": plan.shared.files.written,
            "files_delete": plan.shared.files.deleted,
            "links_delete": plan.shared.files.links,
            "folders_delete": plan.shared.files.folders,
        }
        if plan.shared
        else None,
        "canceled": [t.id for t in plan.later_tasks if t.status not in TERMINAL],
        "superseded_global_seqs": list(
            GlobalCheckpoint.objects.filter(
                root=root, seq__gt=global_checkpoint.seq, superseded=False
            ).values_list("seq", flat=True)
        ),
    }


def _effects(task: Task, undone: list[Any]) -> dict[str, Any]:
    """An agent's calls undone, the compensations that undo their effects outside its
    workspace (newest first) and the effects that cannot be undone, as its own rollback
    preview lists them (checkpoints.selectors.rollback_plan)."""
    compensations, irreversible = calls_compensation(task=task, undone=undone)
    return {
        "calls_undone": [
            {"call_id": r.call_id, "tool": r.tool, "step_index": r.step_index} for r in undone
        ],
        "compensations": [compensation_dict(item) for item in compensations],
        "irreversible": [irreversible_dict(item) for item in irreversible],
    }
