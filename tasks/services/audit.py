"""The audit log: one row per operator action (or a standing rule's), with its reason and the
state before and after."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from tasks.models import AuditEntry


def audit_record(
    *,
    user: User | None,
    action: str,
    task_id: Any = None,
    target: str = "",
    reason: str = "",
    before: Any = None,
    after: Any = None,
    actor_name: str = "",
) -> AuditEntry:
    """Record an operator action; call it inside the transaction that performs the action.
    With no user, `actor_name` names what acted (a standing rule), else "system"."""
    entry = audit_build(
        user=user,
        action=action,
        task_id=task_id,
        target=target,
        reason=reason,
        before=before,
        after=after,
        actor_name=actor_name,
    )
    entry.save(force_insert=True)
    return entry


def audit_build(
    *,
    user: User | None,
    action: str,
    task_id: Any = None,
    target: str = "",
    reason: str = "",
    before: Any = None,
    after: Any = None,
    actor_name: str = "",
) -> AuditEntry:
    """The unsaved entry audit_record inserts, for a caller that writes it with other rows in
    one statement (tasks.services.locked_write)."""
    actor = user if user is not None and user.is_authenticated else None
    return AuditEntry(
        at=timezone.now(),
        actor=actor,
        actor_name=actor.get_username() if actor is not None else (actor_name[:150] or "system"),
        action=action,
        task_id=task_id,
        target=target or (str(task_id) if task_id else ""),
        reason=reason,
        before=before,
        after=after,
    )
