"""A task's group (a root task and the sub-agents it delegated to): its root, and where the
group's shared directory lives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from tasks.models import Task

# Delegation is one level deep today (sub-agents cannot delegate); the walk allows a few more.
GROUP_MAX_DEPTH = 8


def group_root(task: Task) -> Task:
    """The task at the top of the task's group (itself when it has no parent)."""
    for _ in range(GROUP_MAX_DEPTH):
        if task.parent_id is None:
            return task
        task = Task.objects.get(id=task.parent_id)
    return task


def shared_path(*, root_id: Any) -> Path:
    """Where the shared directory of the group rooted at `root_id` lives (made or not)."""
    return settings.HARNESS_WORKSPACE_ROOT / "shared" / str(root_id)


def group_has_shared(root: Task) -> bool:
    return bool((root.spec or {}).get("shared"))


def group_shared_path(task: Task) -> Path | None:
    """The shared directory of the task's group (multiagent/shared.py), made or not; None when
    the group's root did not ask for one."""
    root = group_root(task)
    return shared_path(root_id=root.id) if group_has_shared(root) else None
