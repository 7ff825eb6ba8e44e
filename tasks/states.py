"""The task state machine: the states and the one table of allowed transitions.

Only `tasks.services.task_transition` changes a task's status, and it consults this table.
"""

from __future__ import annotations

from django.db import models


class TaskStatus(models.TextChoices):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_REVIEW = "waiting_review"
    RETRY_WAIT = "retry_wait"
    STALLED = "stalled"
    # Put on hold by an operator's recovery (rollback / retry / forward with resume=false):
    # nothing runs until the operator resumes it.
    HELD = "held"
    # A parent whose `delegate` calls started child tasks: no worker holds it; it is queued
    # again once every child it waits for has ended (multiagent.delegation).
    WAITING_CHILDREN = "waiting_children"
    # Stopped at a step boundary with a local checkpoint for a global checkpoint round (two-phase
    # commit, multiagent.coordinator): no worker holds it; the coordinator queues it again when
    # the round commits or aborts.
    PREPARED = "prepared"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


S = TaskStatus

TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.QUEUED, S.CANCELED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELED, S.FAILED, S.HELD}),
    S.RUNNING: frozenset(
        {
            S.SUCCEEDED,
            S.FAILED,
            S.CANCELED,
            S.WAITING_REVIEW,
            S.RETRY_WAIT,
            S.STALLED,
            S.QUEUED,
            S.WAITING_CHILDREN,
            S.PREPARED,
        }
    ),
    S.WAITING_REVIEW: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.RETRY_WAIT: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.STALLED: frozenset({S.QUEUED, S.FAILED, S.CANCELED, S.HELD}),
    S.HELD: frozenset({S.QUEUED, S.CANCELED}),
    S.WAITING_CHILDREN: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.PREPARED: frozenset({S.QUEUED, S.CANCELED, S.HELD}),
    # Terminal states are left only by an operator's explicit recovery (retry / rollback).
    S.SUCCEEDED: frozenset({S.QUEUED, S.HELD}),
    S.FAILED: frozenset({S.QUEUED, S.HELD}),
    S.CANCELED: frozenset({S.QUEUED, S.HELD}),
}

TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELED})
ACTIVE = frozenset({S.QUEUED, S.RUNNING, S.RETRY_WAIT, S.STALLED})


def can_transition(frm: str, to: str) -> bool:
    return to in TRANSITIONS.get(frm, frozenset())


class IllegalTransition(Exception):
    def __init__(self, frm: str, to: str) -> None:
        super().__init__(f"illegal task transition {frm} -> {to}")
        self.frm = frm
        self.to = to


class TransitionConflict(Exception):
    """The task was changed by someone else between reading and writing it."""


class LeaseLost(Exception):
    """This worker's lease epoch is stale: another worker owns the task now. Stop at once."""
