"""The state machines of the core: a task's and a tool call's states and the one table of
allowed transitions of each.

Only `tasks.services.task_transition` (and `task_acquire`, queued -> running, through the same
table) changes a task's status; only `tasks.services.toolcall_transition` changes a tool
call's. A review request's machine lives in its own app (`review.states`).
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
    # A rollback's compensation failed for good (agent.runtime.compensate): the effect it was
    # to undo is still in the world (the task's error names it). No worker holds it; an
    # operator retries the compensation, marks it done or skips it
    # (checkpoints.recovery.compensation), and it is queued again.
    COMPENSATION_FAILED = "compensation_failed"
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
            S.COMPENSATION_FAILED,
            # A rollback confirmed with "hold" whose compensations have all run.
            S.HELD,
        }
    ),
    S.WAITING_REVIEW: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.RETRY_WAIT: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.STALLED: frozenset({S.QUEUED, S.FAILED, S.CANCELED, S.HELD}),
    S.HELD: frozenset({S.QUEUED, S.CANCELED}),
    S.WAITING_CHILDREN: frozenset({S.QUEUED, S.CANCELED, S.FAILED, S.HELD}),
    S.PREPARED: frozenset({S.QUEUED, S.CANCELED, S.HELD}),
    S.COMPENSATION_FAILED: frozenset({S.QUEUED, S.CANCELED, S.HELD}),
    # Terminal states are left only by an operator's explicit recovery (retry / rollback).
    S.SUCCEEDED: frozenset({S.QUEUED, S.HELD}),
    S.FAILED: frozenset({S.QUEUED, S.HELD}),
    S.CANCELED: frozenset({S.QUEUED, S.HELD}),
}

TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELED})
ACTIVE = frozenset({S.QUEUED, S.RUNNING, S.RETRY_WAIT, S.STALLED})


def can_transition(frm: str, to: str) -> bool:
    return to in TRANSITIONS.get(frm, frozenset())


class ToolCallStatus(models.TextChoices):
    PROPOSED = "proposed"
    AWAITING_REVIEW = "awaiting_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    DENIED = "denied"
    RUNNING = "running"
    # Failed with a retryable error; runs again (same call_id) when the task's backoff elapses.
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    UNKNOWN_OUTCOME = "unknown_outcome"


C = ToolCallStatus

# A call is created `proposed` (the model's proposal, recorded before anything runs).
TOOLCALL_TRANSITIONS: dict[str, frozenset[str]] = {
    # The gate: refused (failed: invalid call or a failed check), denied by policy, paused for
    # a human, or run.
    # proposed -> rejected: a call matching an item its plan's review rejected (agent.runtime.plan).
    C.PROPOSED: frozenset({C.AWAITING_REVIEW, C.RUNNING, C.FAILED, C.DENIED, C.REJECTED}),
    # Decided by a human; a review canceled by a recovery leaves the call waiting, and the
    # resumed step proposes it again (the gate may then pause, refuse or run it).
    # (An operator's mark_done settles it too, as for an unknown outcome.)
    C.AWAITING_REVIEW: frozenset(
        {C.AWAITING_REVIEW, C.APPROVED, C.REJECTED, C.SUCCEEDED, C.RUNNING, C.FAILED, C.DENIED}
    ),
    # Re-checked just before it runs (review.recheck): an approval that no longer holds
    # reopens it for review, or a policy that now refuses it denies it.
    C.APPROVED: frozenset({C.RUNNING, C.FAILED, C.AWAITING_REVIEW, C.DENIED}),
    C.RETRY_WAIT: frozenset({C.RUNNING, C.FAILED}),
    # running -> running: an idempotent call interrupted by a crash runs again.
    # running -> awaiting_review: a tool that asks for approval itself as it starts (a Pydantic
    # AI tool raising ApprovalRequired before it acts).
    C.RUNNING: frozenset(
        {C.RUNNING, C.SUCCEEDED, C.FAILED, C.TIMED_OUT, C.UNKNOWN_OUTCOME, C.AWAITING_REVIEW}
    ),
    # failed -> succeeded / rejected: an operator marks a rollback's failed compensation done
    # (undone by hand) or skips it (the effect stays); failed -> retry_wait: retries it.
    C.FAILED: frozenset({C.RETRY_WAIT, C.RUNNING, C.SUCCEEDED, C.REJECTED}),
    # timed_out -> approved / succeeded: the unknown-outcome review of a rollback's original
    # call that timed out (re-run: it did not happen; marked done: it did).
    C.TIMED_OUT: frozenset({C.RETRY_WAIT, C.SUCCEEDED, C.REJECTED, C.APPROVED}),
    # A human settles it: marked done, run again, or (its review expired) rejected.
    C.UNKNOWN_OUTCOME: frozenset({C.SUCCEEDED, C.APPROVED, C.REJECTED}),
    # A group rollback reopens the delegate calls whose children go back to the cut.
    C.SUCCEEDED: frozenset({C.RUNNING}),
    C.REJECTED: frozenset(),
    C.DENIED: frozenset(),
}

# A call in one of these has an outcome (its `finished_at` is set when it gets there).
TOOLCALL_SETTLED = frozenset(
    {C.SUCCEEDED, C.FAILED, C.TIMED_OUT, C.DENIED, C.REJECTED, C.UNKNOWN_OUTCOME}
)


def toolcall_can_transition(frm: str, to: str) -> bool:
    return to in TOOLCALL_TRANSITIONS.get(frm, frozenset())


class IllegalTransition(Exception):
    def __init__(self, frm: str, to: str, *, machine: str = "task") -> None:
        super().__init__(f"illegal {machine} transition {frm} -> {to}")
        self.frm = frm
        self.to = to


class TransitionConflict(Exception):
    """The task was changed by someone else between reading and writing it."""


class LeaseLost(Exception):
    """This worker's lease epoch is stale: another worker owns the task now. Stop at once."""
