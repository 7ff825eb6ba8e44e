"""Read-side queries for checkpoints: lookups, what the timeline plots, the rollback preview,
the recovery plan that `auto` follows, and the diff of two checkpoints. Nothing here writes.
One module per family, each importing only the modules listed below it:

    graph      the LangGraph checkpoints of a graph task; whether a task is one
    diff       the diff of two checkpoints (checkpoint_diff) and of files (file_changes)
    recovery   the plan `auto` follows (recovery_plan) and the failed call it looks at
    rollback   the rollback's plan (rollback_plan: files, calls undone, their compensations
               and what cannot be undone) and its preview (rollback_preview)
    lookups    one checkpoint, a task's checkpoints and marks, the messages at a checkpoint
    agent_messages  an SDK agent's or a graph's history as the harness's messages
    calls      the calls a rollback undoes

This package re-exports the public names, so `from checkpoints.selectors import
checkpoint_get` keeps working; code inside the package imports the module that holds a name."""

from __future__ import annotations

from checkpoints.selectors.agent_messages import graph_messages, sdk_messages
from checkpoints.selectors.calls import (
    EXECUTED,
    RETRYABLE,
    calls_undone,
    tool_or_none,
)
from checkpoints.selectors.diff import (
    TEXT_DIFF_MAX_BYTES,
    CheckpointDiff,
    FileDiff,
    checkpoint_diff,
    entry_dict,
    file_changes,
)
from checkpoints.selectors.graph import graph_calls_after, graph_checkpoints, graph_task
from checkpoints.selectors.lookups import (
    checkpoint_get,
    checkpoint_recent_messages,
    checkpoint_supersession_marks,
    task_checkpoint_marks,
    task_checkpoints,
)
from checkpoints.selectors.recovery import (
    RecoveryPlan,
    failed_call,
    recovery_plan,
    step_checkpoint,
    step_start_checkpoint,
)
from checkpoints.selectors.rollback import (
    RollbackPlan,
    RollbackPreview,
    calls_compensation,
    compensation_dict,
    irreversible_dict,
    recovery_blocked,
    rollback_plan,
    rollback_preview,
)

__all__ = [
    "EXECUTED",
    "RETRYABLE",
    "TEXT_DIFF_MAX_BYTES",
    "CheckpointDiff",
    "FileDiff",
    "RecoveryPlan",
    "RollbackPlan",
    "RollbackPreview",
    "calls_compensation",
    "calls_undone",
    "checkpoint_diff",
    "checkpoint_get",
    "checkpoint_recent_messages",
    "graph_messages",
    "sdk_messages",
    "compensation_dict",
    "checkpoint_supersession_marks",
    "entry_dict",
    "failed_call",
    "file_changes",
    "graph_calls_after",
    "graph_checkpoints",
    "graph_task",
    "irreversible_dict",
    "recovery_blocked",
    "recovery_plan",
    "rollback_plan",
    "rollback_preview",
    "step_checkpoint",
    "step_start_checkpoint",
    "task_checkpoint_marks",
    "task_checkpoints",
    "tool_or_none",
]
