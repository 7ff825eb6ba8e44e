"""Operator control of a task's run: cancel, and the recovery operations (DESIGN §5) rollback,
retry, forward, resume and `auto`.

Every operation forks: it picks a base checkpoint, builds the state to continue from, writes a
new checkpoint (trigger `rollback` / `retry` / `forward`, parent = the base) that becomes the
task's head, marks the checkpoints after the base superseded (kept, never deleted), and then
either queues the task (resume) or leaves it `held` until an operator resumes it. The state
carries a RecoveryNote, which the loop turns into a context-alignment message on resume.

Lock contract: an operation locks the task row (select_for_update) first and holds it until
it commits, so operations on one task are serialised. They refuse (RecoveryConflict -> 409)
while the task is running or queued, so of two operations that both resume the task the
second finds it queued and is refused. A worker cannot take the task meanwhile: acquisition
is a conditional UPDATE on status=queued, which waits for the lock and then finds the status
the operation left.

Files after the commit: a rollback restores no file while it holds the lock. Under the lock it
decides (the checkpoint, the files that change) and commits the fork, whose snapshot is the
one to restore; only then are the files restored, and only after that is a resumed task put
on the queue, so no worker runs on a half-restored tree (`restore_after_commit`). A failed
commit changes no file. A crash or an I/O error after the commit leaves the workspace behind
its head, never ahead of a head it does not belong to, and that is repaired: the run syncs the
workspace to its head on start (the head carries a recovery note; a graph fork has no writes
yet), the sweep queues again a queued task whose job was never sent, and retry and forward
take a rollback head's snapshot, not the files on disk, while no run has continued from it.

The package, one module per family of operations: `rollback`, `resume` (retry, forward,
resume), `compensation` (an operator's choice for a rollback's failed compensation),
`cancel`, `strategy` (task_recover, `auto`), `graph` (graph tasks: requeue, rollback
and its preview); what they share: `guards` (actor, lock, reason, base), `state_edits` (branch,
call_ids, last failure), `forking` (the fork, the restore after the commit), `errors`.
"""

from __future__ import annotations

from checkpoints.recovery.cancel import task_cancel
from checkpoints.recovery.compensation import COMPENSATION_DECISIONS, compensation_decide
from checkpoints.recovery.errors import RecoveryConflict, RecoveryInvalid
from checkpoints.recovery.forking import (
    RESTORING_TRIGGERS,
    RecoveryResult,
    fork_checkpoint,
    restore_after_commit,
)
from checkpoints.recovery.graph import graph_rollback_preview
from checkpoints.recovery.guards import lock_for_recovery, newest_valid, reason_required
from checkpoints.recovery.resume import task_forward, task_resume, task_retry
from checkpoints.recovery.rollback import checkpoint_rollback
from checkpoints.recovery.state_edits import calls_rekey, live_call_ids, new_branch
from checkpoints.recovery.strategy import STRATEGIES, task_recover

__all__ = [
    "COMPENSATION_DECISIONS",
    "RESTORING_TRIGGERS",
    "STRATEGIES",
    "RecoveryConflict",
    "RecoveryInvalid",
    "RecoveryResult",
    "calls_rekey",
    "checkpoint_rollback",
    "compensation_decide",
    "fork_checkpoint",
    "graph_rollback_preview",
    "live_call_ids",
    "lock_for_recovery",
    "new_branch",
    "newest_valid",
    "reason_required",
    "restore_after_commit",
    "task_cancel",
    "task_forward",
    "task_recover",
    "task_resume",
    "task_retry",
]
