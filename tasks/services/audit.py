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
    actor = user if user is not None and user.is_authenticated else None
    return AuditEntry.objects.create(
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
