"""A task's family of forks (issue #31 item 5), for the task page: the task it was forked from,
its siblings and its own forks, listed together — one query, whatever the page shows."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from tasks.models import Task
from tasks.states import TaskStatus

# Members listed on a task page (the oldest first); the API's compare lists every sibling.
FAMILY_LIMIT = 50


@dataclass(frozen=True)
class Family:
    members: list[Task]
    # More members exist than are listed.
    truncated: bool
    # The task the page's task was forked from (None: it is not a fork).
    original: Task | None

    @property
    def rows(self) -> list[tuple[Task, bool]]:
        """Each member with whether it can be adopted: a finished fork whose original is listed
        here ("Adopt this branch" rolls that original forward to it)."""
        listed = {m.id for m in self.members}
        return [
            (m, m.fork_of_id in listed and m.status == TaskStatus.SUCCEEDED) for m in self.members
        ]


def task_family(*, task: Task) -> Family | None:
    """The task's original (if it is a fork), the original's other forks and the task's own
    forks, oldest first; None when the task is neither a fork nor forked."""
    ids = [task.id] if task.fork_of_id is None else [task.id, task.fork_of_id]
    members = list(
        Task.objects.filter(Q(id__in=ids) | Q(fork_of_id__in=ids))
        .only("id", "title", "status", "created_at", "fork_of_id")
        .order_by("created_at", "id")[: FAMILY_LIMIT + 1]
    )
    if len(members) < 2:
        return None
    original = next((m for m in members if m.id == task.fork_of_id), None)
    return Family(
        members=members[:FAMILY_LIMIT], truncated=len(members) > FAMILY_LIMIT, original=original
    )
