"""What a task's timeline reads and how much of it is drawn in full: the event types, the
steps drawn in full (TIMELINE_STEPS) and what is kept of the collapsed ones before them."""

from __future__ import annotations

from tasks.models import Task

# The events the timeline reads (the rest of the frame log is in the events tab).
TIMELINE_EVENT_TYPES = frozenset(
    {
        "model_decision",
        "step_finished",
        "model_error",
        "tool_refused",
        "task_stopped",
        "status",
        "graph_node",  # a LangGraph node run (agent.graph_runner)
        # The call a tool-level checkpoint was taken before (see checkpoint_names).
        *("tool_started", "review_requested"),
        *("rollback", "retry", "forward", "retry_scheduled", "redispatched"),
        "task_started",  # a plan task's phases begin with it (its `plan` key)
    }
)

# A long task's timeline draws its last TIMELINE_STEPS steps in full; of the earlier steps
# (collapsed) it keeps what an operator looks for: the calls that failed or were retried,
# errors, review waits and holds, recoveries and rollbacks (TIMELINE_KEPT_EVENTS, plus the
# graph nodes that failed), and the checkpoints that start a task, follow a rollback or an
# operator's hand, or precede a review (COLLAPSED_CHECKPOINT_TRIGGERS). "Show all steps"
# draws everything.
TIMELINE_STEPS = 100
TIMELINE_KEPT_EVENTS = frozenset(
    {
        "model_error",
        "tool_refused",
        "task_stopped",
        "status",
        "review_requested",
        *("rollback", "retry", "forward", "retry_scheduled", "redispatched"),
        "task_started",
    }
)
TIMELINE_KEPT_FAILED_EVENTS = frozenset({"graph_node"})
COLLAPSED_CHECKPOINT_TRIGGERS = frozenset({"task_start", "rollback", "manual", "before_review"})


def timeline_from_step(task: Task, *, all_steps: bool) -> int | None:
    """The first step a task's timeline draws in full: None (every step) for a task of at most
    TIMELINE_STEPS steps or when all are asked for."""
    # Steps are numbered from 0 to the current one.
    if all_steps or task.current_step < TIMELINE_STEPS:
        return None
    return task.current_step + 1 - TIMELINE_STEPS
