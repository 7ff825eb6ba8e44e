"""Who may do what: the roles (viewers, creators, operators, as groups or permissions) and the
permission-checked lookup of a task (access_task)."""

from __future__ import annotations

from typing import Any, TypeGuard

from django.contrib.auth.models import AnonymousUser, User

from tasks.errors import NotFound
from tasks.models import Task

# The role groups (harness_base/roles.py grants their permissions). Membership alone counts
# too, so a group created by hand in the admin works before `roles_ensure` ran.
READ_GROUPS = ("viewers", "creators", "operators")
CREATE_GROUPS = ("creators", "operators")
# Holding any of these lets a user read (deciding a review means reading it first).
READ_PERMISSIONS = (
    "tasks.view_task",
    "tasks.add_task",
    "tasks.operate_task",
    "review.decide_review",
)


# Where a user object keeps its group names for the request (see user_in_group).
_GROUP_NAMES = "_harness_group_names"


def _active(user: User | AnonymousUser | None) -> TypeGuard[User]:
    return bool(user and user.is_authenticated and user.is_active)


def user_in_group(user: User, names: tuple[str, ...]) -> bool:
    """Whether the user belongs to one of the groups. The user's group names are read once
    per user object (one request), as Django caches its permissions on it: a request checks
    access several times."""
    groups: frozenset[str] | None = getattr(user, _GROUP_NAMES, None)
    if groups is None:
        groups = frozenset(user.groups.values_list("name", flat=True))
        setattr(user, _GROUP_NAMES, groups)
    return not groups.isdisjoint(names)


def user_can_view(user: User | AnonymousUser | None) -> TypeGuard[User]:
    """Viewers, creators, operators and superusers read; a logged-in user in no group sees
    nothing."""
    if not _active(user):
        return False
    # Groups first: one query a request settles it for the usual roles, where the permissions
    # take two (a user's own and its groups').
    if user.is_superuser or user_in_group(user, READ_GROUPS):
        return True
    return any(user.has_perm(perm) for perm in READ_PERMISSIONS)


def user_can_create(user: User | AnonymousUser | None) -> bool:
    """Creating a task runs code on the workers: operators and `creators` only."""
    if not user_can_view(user):
        return False
    # Groups first, as user_can_view: the group names are read already, where the permissions
    # take two more queries (a quarter of the server's time on `POST /api/v1/tasks`).
    if user.is_superuser or user_in_group(user, CREATE_GROUPS):
        return True
    return user.has_perm("tasks.add_task")


def user_can_operate(user: User | AnonymousUser | None) -> bool:
    """Operators act (cancel, retry, roll back, decide); viewers only read."""
    if not user_can_view(user):
        return False
    if user.is_superuser or user_in_group(user, ("operators",)):
        return True
    return user.has_perm("tasks.operate_task")


def access_task(user: User, task_id: Any, *, lock: bool = False) -> Task:
    """The task `user` may read. Raises `NotFound` for an unknown or malformed id, and for a
    user without a role (who may not learn whether a task exists either)."""
    if not user_can_view(user):
        raise NotFound("task not found")
    qs = Task.objects.all()
    if lock:
        qs = qs.select_for_update()
    try:
        return qs.get(id=task_id)
    except (Task.DoesNotExist, ValueError, TypeError):
        raise NotFound("task not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("task not found") from None
        raise
