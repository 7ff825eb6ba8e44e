"""Reads of multi-agent groups: the root, the members, the global checkpoints."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from multiagent.models import CheckpointRound, GlobalCheckpoint
from tasks.models import Task
from tasks.selectors import GROUP_MAX_DEPTH, group_root


def group_member_ids(*, root_id: Any) -> list[Any]:
    """The root and every descendant, ordered by id (the lock order of the group)."""
    ids = [root_id]
    frontier = [root_id]
    for _ in range(GROUP_MAX_DEPTH):
        frontier = list(Task.objects.filter(parent_id__in=frontier).values_list("id", flat=True))
        if not frontier:
            break
        ids.extend(frontier)
    return sorted(ids, key=str)


def group_lock(*, root_id: Any) -> list[Task]:
    """Inside a transaction: lock every task of the group, in id order. Lock contract: group
    operations (wake, rounds, group rollback) lock member rows in this order and only then
    any round or checkpoint row, so they cannot deadlock with each other; a worker's fenced
    write locks one task row only. NO KEY UPDATE: rows referencing a member (a new child, a
    round, a vote) take KEY SHARE locks on it and must not wait for the group's lock."""
    ids = group_member_ids(root_id=root_id)
    return list(Task.objects.select_for_update(no_key=True).filter(id__in=ids).order_by("id"))


def global_checkpoints(*, root: Task) -> QuerySet[GlobalCheckpoint]:
    return GlobalCheckpoint.objects.filter(root=root).order_by("seq")


def global_checkpoint_get(*, root: Task, global_checkpoint_id: Any) -> GlobalCheckpoint | None:
    try:
        return GlobalCheckpoint.objects.filter(root=root, id=global_checkpoint_id).first()
    except (ValueError, TypeError):
        return None


def group_members(*, root: Task) -> list[Task]:
    """The root first, then its descendants in the order they were created."""
    ids = group_member_ids(root_id=root.id)
    others = Task.objects.filter(id__in=ids).exclude(id=root.id).order_by("created_at")
    return [root, *others]


def round_get(*, root: Task, round_id: Any) -> CheckpointRound | None:
    return (
        CheckpointRound.objects.select_related("global_checkpoint")
        .filter(root=root, id=round_id)
        .first()
    )


def shared_snapshot_roots() -> set[str]:
    """The snapshot roots of every shared directory a global checkpoint recorded (kept by the
    blob garbage collection, checkpoints.retention)."""
    return {
        snapshot["root"]
        for snapshot in GlobalCheckpoint.objects.filter(shared_snapshot__isnull=False)
        .values_list("shared_snapshot", flat=True)
        .iterator(chunk_size=500)
        if isinstance(snapshot, dict) and snapshot.get("root")
    }


def global_checkpoint_targets(*, task_id: Any) -> set[str]:
    """Ids of the task's checkpoints that a global checkpoint of its group not yet superseded
    names: a group rollback may still go back to them (kept by checkpoints.retention)."""
    task = Task.objects.filter(id=task_id).only("id", "parent_id").first()
    if task is None:
        return set()
    root_id = group_root(task).id
    return {
        entry["checkpoint_id"]
        for participants in GlobalCheckpoint.objects.filter(
            root_id=root_id, superseded=False
        ).values_list("participants", flat=True)
        for entry in participants
        if entry.get("task_id") == str(task_id) and entry.get("checkpoint_id")
    }
