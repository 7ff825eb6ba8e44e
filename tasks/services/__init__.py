"""Task services: the only code that writes tasks, their tool calls, events, audit entries, API
tokens and sweep runs. One module per state machine and per family of operations; this package
re-exports their public names, so `from tasks.services import task_transition` and
`services.task_transition` are the callers' way in.

The modules import one way (lint-imports, acyclic_siblings): events and audit at the bottom,
then the task's state machine, enqueueing, leases, priority, and above them the fenced write,
the tool call's state machine, creation and spec revision. A name called inside the package is
looked up in the module that defines it: a test that replaces one patches that module."""

from __future__ import annotations

from tasks.services.acquire import task_acquire
from tasks.services.api_tokens import (
    api_token_create,
    api_token_hash,
    api_token_used,
    api_tokens_revoke,
)
from tasks.services.audit import audit_build, audit_record
from tasks.services.creation import SpecError, task_create, task_spec_check
from tasks.services.enqueue import (
    JOB_TIMEOUT_SLACK_S,
    RUN_TASK_JOB,
    queue_name_for,
    task_defer,
    task_enqueue,
    task_job_id_new,
    task_job_record,
    task_job_timeout_s,
    task_wake,
)
from tasks.services.events import (
    event_build,
    event_insert,
    event_record,
    event_record_while_held,
    events_record,
)
from tasks.services.fenced_write import task_fenced_write
from tasks.services.leases import (
    task_fence,
    task_heartbeat,
    task_release_drained,
    task_release_lost_connection,
    task_settle_killed_horse,
    task_supervisor_heartbeat,
)
from tasks.services.priority import PriorityRefused, job_move, task_priority_set
from tasks.services.spec_revision import SpecRevision, task_spec_revise
from tasks.services.sweep_runs import (
    sweep_run_claim,
    sweep_run_ensure,
    sweep_run_lock,
    sweep_run_record,
    sweep_run_save,
)
from tasks.services.task_fields import (
    task_cancel_request,
    task_fork_head,
    task_plan_phase_set,
    task_recovery_reset,
    task_review_outcome_count,
    task_review_outcomes_set,
    tasks_hold,
    tasks_release,
)
from tasks.services.task_transitions import CapacityFull, task_lock, task_transition
from tasks.services.templates import spec_changed, template_create, template_start
from tasks.services.toolcall_transitions import ToolCallConflict, toolcall_transition
from tasks.services.workers import workers_dead_forget

__all__ = [
    "JOB_TIMEOUT_SLACK_S",
    "RUN_TASK_JOB",
    "CapacityFull",
    "PriorityRefused",
    "SpecError",
    "SpecRevision",
    "ToolCallConflict",
    "api_token_create",
    "api_token_hash",
    "api_token_used",
    "api_tokens_revoke",
    "audit_build",
    "audit_record",
    "event_build",
    "event_insert",
    "event_record",
    "event_record_while_held",
    "job_move",
    "events_record",
    "queue_name_for",
    "spec_changed",
    "sweep_run_claim",
    "sweep_run_ensure",
    "sweep_run_lock",
    "sweep_run_record",
    "sweep_run_save",
    "task_acquire",
    "template_create",
    "template_start",
    "task_cancel_request",
    "task_create",
    "task_defer",
    "task_enqueue",
    "task_fence",
    "task_fenced_write",
    "task_fork_head",
    "task_heartbeat",
    "task_job_id_new",
    "task_job_record",
    "task_job_timeout_s",
    "task_priority_set",
    "task_lock",
    "task_recovery_reset",
    "task_release_drained",
    "task_release_lost_connection",
    "task_plan_phase_set",
    "task_review_outcome_count",
    "task_review_outcomes_set",
    "task_settle_killed_horse",
    "task_spec_check",
    "task_spec_revise",
    "task_supervisor_heartbeat",
    "task_transition",
    "task_wake",
    "tasks_hold",
    "tasks_release",
    "toolcall_transition",
    "workers_dead_forget",
]
