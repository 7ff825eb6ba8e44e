"""Group recovery: roll a whole group back to a global checkpoint, all or nothing.

Every participant of the cut gets its workspace and AgentState back from its local checkpoint
(a new `group_rollback` checkpoint, parent = that local checkpoint, becomes its head; its later
checkpoints are superseded); later global checkpoints are superseded; tasks started after the
cut are canceled. Delegations open at the cut stay bound to the same children (they are rolled
back too), so the parent waits for them again instead of starting new ones.

The group's shared directory (multiagent/shared.py) goes back to the snapshot the cut recorded
(GlobalCheckpoint.shared_snapshot), with the workspaces. Its restore is recorded as pending in
the rollback's transaction (SharedRestorePending) and the record dropped once it is done: a
crash or an I/O error after the commit leaves it pending, and the next run of a participant
finishes it before its first step, or the sweep does (shared_restore_finish).

All or nothing: every local checkpoint is decoded and verified and every blob its snapshot (and
the shared directory's) needs is looked up before anything changes; the database changes are
one transaction, and no file changes before it commits. Then, with no row lock held, the
shared directory and the workspaces are restored, and only then are the resumed participants'
jobs sent (checkpoints.recovery.restore_after_commit). A failed commit changes no file; a crash
or an I/O error after it leaves a workspace behind its head (a `group_rollback` fork), which
the participant's run syncs on start.

Lock contract: the group's task rows in id order (multiagent.selectors.group_lock), then
checkpoint rows. Refused (409) while any participant runs, is queued, or a round is open.

The modules, from the bottom: `plan` (GroupPlan and its parts, group_plan, group_blocked),
`preview` (group_rollback_preview), `shared_restore` (shared_restore_finish,
shared_restores_finish_pending), `rollback` (group_rollback). RecoveryConflict and
RecoveryInvalid (checkpoints.recovery) are re-exported for the callers that catch them.
"""

from __future__ import annotations

from checkpoints.recovery import RecoveryConflict, RecoveryInvalid
from multiagent.recovery.preview import group_rollback_preview
from multiagent.recovery.rollback import group_rollback
from multiagent.recovery.shared_restore import (
    shared_restore_finish,
    shared_restores_finish_pending,
)

__all__ = [
    "RecoveryConflict",
    "RecoveryInvalid",
    "group_rollback",
    "group_rollback_preview",
    "shared_restore_finish",
    "shared_restores_finish_pending",
]
