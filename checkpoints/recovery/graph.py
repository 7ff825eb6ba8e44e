"""Recovery of graph tasks (LangGraph checkpoints, see checkpoints.langgraph): the requeue
behind their retry, forward and resume, and their rollback with its preview.

A graph task's state is its LangGraph thread. Retry, forward and resume queue it and the graph
runner continues from the latest LangGraph checkpoint; rollback forks: a copy of an earlier
checkpoint (source "fork", parent = that checkpoint) becomes the latest, so the super-steps
after it run again, and the checkpoints after it are left behind (superseded), not deleted.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6

from checkpoints.langgraph import DjangoCheckpointSaver
from checkpoints.models import GraphWorkspace
from checkpoints.recovery.errors import RecoveryConflict, RecoveryInvalid
from checkpoints.recovery.forking import OUTCOME_CLEARED, revision_audit, revision_fields
from checkpoints.recovery.guards import actor_of
from checkpoints.selectors import graph_calls_after, graph_checkpoints, recovery_blocked
from checkpoints.snapshots import restore_blocked, snapshot_restore_plan
from checkpoints.versions import graph_checkpoint_versions
from tasks import services
from tasks.events import EventType
from tasks.models import Task
from tasks.signals import history_superseded
from tasks.states import TaskStatus


def graph_requeue(
    *,
    task: Task,
    user: User | None,
    kind: str,
    reason: str,
    revision: services.SpecRevision | None = None,
) -> Task:
    """Queue a stopped graph task to continue from its latest LangGraph checkpoint. Runs inside
    the caller's transaction with the task row locked."""
    actor = actor_of(user)
    before = {"status": task.status}
    services.task_recovery_reset(task=task)
    services.event_record(
        task_id=task.id,
        type=kind,
        actor=actor,
        step_index=task.current_step,
        payload={"reason": reason, "resume": True, "graph": True, **revision_fields(revision)},
    )
    task = services.task_transition(
        task_id=task.id,
        to=TaskStatus.QUEUED,
        actor=actor,
        reason=f"{kind}: {reason}"[:500],
        fields=OUTCOME_CLEARED,
    )
    services.task_enqueue(task=task, decided=True)
    services.audit_record(
        user=user,
        action=kind,
        task_id=task.id,
        reason=reason,
        before={**before, **revision_audit(revision, "before")},
        after={"status": task.status, **revision_audit(revision, "after")},
    )
    return task


def graph_rollback_preview(
    *, task: Task, checkpoint_id: str, workspace: bool = True
) -> dict[str, Any]:
    """What a rollback to this LangGraph checkpoint would do: the state it goes back to, the
    nodes that run next, the checkpoints it leaves behind and (with `workspace`) the files
    it writes back and deletes to restore the workspace snapshot stored with it, and the tool
    calls the graph ran since, whose effects outside the workspace stay (`calls_not_undone`:
    {"calls": [...], "more": n}, checkpoints.selectors.graph_calls_after)."""
    listed = graph_checkpoints(task=task)
    chosen = next((c for c in listed if c["checkpoint_id"] == checkpoint_id), None)
    if chosen is None:
        raise RecoveryInvalid("checkpoint_id", "not a checkpoint of this task's graph")
    saver = DjangoCheckpointSaver(task_id=task.id)
    loaded = saver.get_tuple(_graph_config(task, checkpoint_id))
    values = {
        key: _short_json(value)
        for key, value in (loaded.checkpoint["channel_values"] if loaded else {}).items()
        if not key.startswith("branch:") and not key.startswith("__")
    }
    later = [c for c in listed if c["checkpoint_id"] > checkpoint_id and not c["superseded"]]
    preview = {
        "task_id": task.id,
        "task_status": task.status,
        "checkpoint_id": checkpoint_id,
        "step": chosen["step"],
        "source": chosen["source"],
        "allowed": not recovery_blocked(task),
        "blocked": recovery_blocked(task),
        "values": values,
        "superseded": [{"checkpoint_id": c["checkpoint_id"], "step": c["step"]} for c in later],
    }
    if workspace:
        snapshot = _graph_workspace_snapshot(task, checkpoint_id)
        files: dict[str, Any] = {"snapshot": snapshot is not None}
        if snapshot is not None:
            # The same plan the rollback's restore follows (snapshot_restore_plan).
            plan = snapshot_restore_plan(workspace=task.workspace_path, snapshot=snapshot)
            files |= {
                "files": snapshot["files"],
                "files_restored": plan.written[:200],
                "files_deleted": plan.deleted[:200],
                "links_deleted": plan.links[:200],
                "folders_deleted": plan.folders[:200],
                "folders_made": plan.made[:200],
                "modes_restored": plan.modes[:200],
            }
        preview["workspace"] = files
        preview["calls_not_undone"] = graph_calls_after(task=task, checkpoint_id=checkpoint_id)
    return preview


def _graph_workspace_snapshot(task: Task, checkpoint_id: str) -> dict[str, Any] | None:
    """The workspace snapshot the graph runner stored with this checkpoint (None for one
    written before snapshots were taken, or by a graph run outside the harness)."""
    return (
        GraphWorkspace.objects.filter(task=task, checkpoint_id=checkpoint_id)
        .values_list("snapshot", flat=True)
        .first()
    )


def graph_rollback(
    *,
    task: Task,
    checkpoint_id: str,
    user: User | None,
    reason: str,
    resume: bool,
) -> tuple[Task, dict[str, Any] | None]:
    """Fork the task's graph from an earlier checkpoint (LangGraph's checkpoint_id semantics:
    the copy's parent is that checkpoint, so the run continues from there). Inside the
    caller's transaction, task row locked. -> the task and the workspace snapshot the caller
    restores once this has committed (None: the checkpoint has none)."""
    preview = graph_rollback_preview(task=task, checkpoint_id=checkpoint_id, workspace=False)
    # The fork's state is its base's, made under the code the base names.
    saver = DjangoCheckpointSaver(
        task_id=task.id,
        versions=graph_checkpoint_versions(task_id=task.id, checkpoint_id=checkpoint_id),
    )
    base = saver.get_tuple(_graph_config(task, checkpoint_id))
    if base is None:  # the preview found it, in this transaction
        raise RecoveryInvalid("checkpoint_id", "not a checkpoint of this task's graph")
    step = int(base.metadata.get("step", 0))
    fork: Checkpoint = {
        **base.checkpoint,
        "id": str(uuid6(clock_seq=step)),
        "ts": timezone.now().isoformat(),
    }
    metadata: CheckpointMetadata = {**base.metadata, "source": "fork", "step": step}
    # No new channel versions: the fork names the very blobs its base names.
    forked = saver.put(_graph_config(task, checkpoint_id), fork, metadata, {})
    # The workspace goes back with the graph: the snapshot stored with the checkpoint becomes
    # the fork's (the later ones are left behind with their checkpoints) and is restored once
    # this commits; the graph runner syncs a fork nothing has written against yet.
    snapshot = _graph_workspace_snapshot(task, checkpoint_id)
    restored = None
    if snapshot is not None:
        blocked = restore_blocked(task.workspace_path)
        if blocked:
            raise RecoveryConflict(f"the workspace cannot be restored ({blocked})")
        restored = snapshot_restore_plan(workspace=task.workspace_path, snapshot=snapshot)
        GraphWorkspace.objects.create(
            task=task,
            checkpoint_id=forked["configurable"]["checkpoint_id"],
            snapshot=snapshot,
            created_at=timezone.now(),
        )
    actor = actor_of(user)
    services.task_recovery_reset(task=task, rollback=True, step=max(step, 0))
    history_superseded.send(
        sender=None, task_id=task.id, comment=f"superseded by rollback ({actor})"
    )
    services.event_record(
        task_id=task.id,
        type=EventType.ROLLBACK,
        actor=actor,
        step_index=max(step, 0),
        payload={
            "reason": reason,
            "resume": resume,
            "graph": True,
            "from_checkpoint": checkpoint_id,
            "from_step": step,
            "checkpoint_id": forked["configurable"]["checkpoint_id"],
            "superseded": len(preview["superseded"]),
            "workspace_restored": restored is not None,
            "files_restored": len(restored.written) if restored else 0,
            "files_deleted": len(restored.deleted) if restored else 0,
        },
    )
    target = TaskStatus.QUEUED if resume else TaskStatus.HELD
    before = {"status": task.status}
    task = services.task_transition(
        task_id=task.id,
        to=target,
        stay=True,
        actor=actor,
        reason=f"rollback: {reason}"[:500],
        fields=OUTCOME_CLEARED,
    )
    services.audit_record(
        user=user,
        action="rollback",
        task_id=task.id,
        reason=reason,
        target=f"{task.id} graph checkpoint {checkpoint_id}",
        before=before,
        after={"status": task.status, "graph_checkpoint": forked["configurable"]["checkpoint_id"]},
    )
    return task, snapshot


def _graph_config(task: Task, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": str(task.id),
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _short_json(value: Any, limit: int = 2000) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return json.loads(text) if len(text) <= limit else text[:limit] + "…"
