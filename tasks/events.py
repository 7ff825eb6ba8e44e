"""Every type of TaskEvent, in one enumeration (docs/architecture.md lists them).

A writer passes `EventType.X` (a str), so the frame log's `type` column stays plain text and
an unknown type is a NameError in review, not a silent new string.
"""

from __future__ import annotations

from django.db import models


class EventType(models.TextChoices):
    # The state machine (tasks.services.task_transition, task_acquire).
    CREATED = "created"
    STATUS = "status"
    # The loop (agent.runtime) and the graph runner (agent.graph_runner).
    TASK_STARTED = "task_started"
    RESUMED = "resumed"
    CHECKPOINT_FALLBACK = "checkpoint_fallback"
    WORKSPACE_MATERIALISED = "workspace_materialised"
    CONTEXT_ALIGNED = "context_aligned"
    MCP_TOOLS_LISTED = "mcp_tools_listed"
    MCP_SERVER_ERROR = "mcp_server_error"
    MODEL_DECISION = "model_decision"
    MODEL_ERROR = "model_error"
    FINAL_CHECKED = "final_checked"
    CONTEXT_FOLDED = "context_folded"
    STEP_FINISHED = "step_finished"
    RETRY_SCHEDULED = "retry_scheduled"
    TIMEOUT = "timeout"
    TOOL_STARTED = "tool_started"
    TOOL_FINISHED = "tool_finished"
    TOOL_REFUSED = "tool_refused"
    TOOL_REPLAYED = "tool_replayed"
    TOOL_RERUN_IDEMPOTENT = "tool_rerun_idempotent"
    TOOL_UNKNOWN_OUTCOME = "tool_unknown_outcome"
    TASK_FINISHED = "task_finished"
    TASK_STOPPED = "task_stopped"
    GRAPH_RESUMED = "graph_resumed"
    GRAPH_STEP = "graph_step"
    GRAPH_NODE = "graph_node"
    GRAPH_TOOL_CALL = "graph_tool_call"
    GRAPH_TOOL_RESULT = "graph_tool_result"
    GRAPH_BREAKPOINT = "graph_breakpoint"
    # OpenAI Agents SDK agents (agent/openai_agents_runner/).
    AGENT_HANDOFF = "agent_handoff"
    GUARDRAIL_TRIPPED = "guardrail_tripped"
    # Reviews (the loop asks; review.services decides, expires).
    REVIEW_REQUESTED = "review_requested"
    REVIEW_APPROVAL = "review_approval"
    REVIEW_DECIDED = "review_decided"
    REVIEW_EXPIRED = "review_expired"
    # Checkpoints and recovery (checkpoints.services, checkpoints.recovery).
    CHECKPOINT_CORRUPTED = "checkpoint_corrupted"
    ROLLBACK = "rollback"
    RETRY = "retry"
    FORWARD = "forward"
    # The code changed under a paused task (issue #43; agent.runtime.drift_check): what changed
    # since its head checkpoint, found when a worker picked it up (`version_drift`); a
    # registered migration applied to its state by a version_drift review's `migrate`
    # (`version_migrated`).
    VERSION_DRIFT = "version_drift"
    VERSION_MIGRATED = "version_migrated"
    # A plan task (agent.runtime.plan): a dry run's intended effect recorded as a plan item
    # (`plan_item`), and an execution run's call held to the approved plan (`plan_matched`:
    # run as approved by the plan's decision, or answered with the item's rejection).
    PLAN_ITEM = "plan_item"
    PLAN_MATCHED = "plan_matched"
    CANCEL_REQUESTED = "cancel_requested"
    # A rollback's compensations (agent.runtime.compensate): the list the run starts on, each
    # one's end (compensated, skipped, marked done), one that failed for good (the task stops
    # in compensation_failed), an operator's choice there (checkpoints.recovery.compensation)
    # and the end of them all.
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    COMPENSATION_DECIDED = "compensation_decided"
    COMPENSATIONS_DONE = "compensations_done"
    # The sweep (agent.sweep) and the worker supervising a horse (agent.worker).
    REDISPATCHED = "redispatched"
    HORSE_UNRESPONSIVE = "horse_unresponsive"
    WORKER_LOST = "worker_lost"
    DRAINED = "drained"
    REQUEUED = "requeued"
    # A worker older than the harness that wrote the task's head handed it back (agent.jobs).
    VERSION_HANDED_BACK = "version_handed_back"
    # Multi-agent groups (agent.runtime, multiagent.*).
    DELEGATED = "delegated"
    DELEGATION_FINISHED = "delegation_finished"
    GLOBAL_PREPARE = "global_prepare"
    GLOBAL_ROUND_STARTED = "global_round_started"
    GLOBAL_ROUND_ABORTED = "global_round_aborted"
    GLOBAL_CHECKPOINT = "global_checkpoint"
    GLOBAL_CHECKPOINT_SKIPPED = "global_checkpoint_skipped"
    GROUP_ROLLBACK = "group_rollback"
    # A replay of a saved case (cases, agent.runtime.oracle): the first call the recording
    # does not answer, or answers otherwise; the replay stops there unless told to run it.
    REPLAY_DIVERGED = "replay_diverged"
    # A sibling task forked from another's checkpoint with edits (checkpoints.fork).
    FORK = "fork"
    # The task rolled forward to its finished fork's head ("adopt this branch").
    ADOPT = "adopt"
