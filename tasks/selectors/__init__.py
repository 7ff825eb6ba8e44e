"""Read-side queries for tasks. Permission-checked lookups live here.

One module per family of reads: access (roles, access_task), groups (a task's group and its
shared directory), compensation (how a rollback undoes a call outside the
workspace), task_lists (sorts and filters), event_fields (payload keys in SQL, ISO
times), event_log (a task's events as its pages read them), calls (tool calls, attempts,
outputs, a tool as the task knows it), usage (model calls, tokens, cost), lanes (where a task's
job is), workers (the RQ workers), ops (counts across all tasks, the sweep, the MCP servers)
and templates (the task templates a person saved).
Every public name is re-exported here."""

from tasks.selectors.access import (
    CREATE_GROUPS,
    READ_GROUPS,
    READ_PERMISSIONS,
    access_task,
    user_can_create,
    user_can_operate,
    user_can_view,
    user_in_group,
)
from tasks.selectors.calls import (
    ARGUMENTS_TEXT_CHARS,
    attempts_logged,
    call_attempts,
    task_call_outputs,
    task_call_page,
    task_tool,
    task_tool_call_attempts,
    task_tool_calls,
    tool_output_get,
)
from tasks.selectors.compensation import (
    UNKNOWN,
    Irreversible,
    PlannedCompensation,
    compensation_for,
    effects_outside,
)
from tasks.selectors.event_fields import (
    PayloadText,
    as_text,
    iso_datetime,
    payload_keys,
)
from tasks.selectors.event_log import (
    model_decisions_by_turn,
    task_change_token,
    task_event_summaries,
    task_events,
    task_events_compact,
    task_timeline_events,
    task_wait_times,
)
from tasks.selectors.groups import (
    GROUP_MAX_DEPTH,
    group_has_shared,
    group_root,
    group_shared_path,
    shared_path,
)
from tasks.selectors.lanes import LanePlace, task_lane_place
from tasks.selectors.ops import (
    mcp_servers_overview,
    sweep_last_run,
    task_status_counts,
    tasks_heartbeat_stale,
)
from tasks.selectors.task_lists import (
    TASK_SORT_DEFAULT,
    TASK_SORTS,
    day_start,
    tasks_list,
)
from tasks.selectors.templates import access_template, templates_of
from tasks.selectors.usage import (
    USAGE_EVENTS,
    task_model_usage,
    task_model_usage_before,
)
from tasks.selectors.workers import (
    WorkerInfo,
    job_task_id,
    rq_workers,
    worker_dead,
    worker_name,
    workers_overview,
)

__all__ = [
    "UNKNOWN",
    "ARGUMENTS_TEXT_CHARS",
    "CREATE_GROUPS",
    "GROUP_MAX_DEPTH",
    "READ_GROUPS",
    "READ_PERMISSIONS",
    "TASK_SORTS",
    "TASK_SORT_DEFAULT",
    "USAGE_EVENTS",
    "Irreversible",
    "LanePlace",
    "PayloadText",
    "PlannedCompensation",
    "WorkerInfo",
    "access_task",
    "access_template",
    "as_text",
    "attempts_logged",
    "call_attempts",
    "compensation_for",
    "day_start",
    "effects_outside",
    "group_has_shared",
    "group_root",
    "group_shared_path",
    "iso_datetime",
    "job_task_id",
    "mcp_servers_overview",
    "model_decisions_by_turn",
    "payload_keys",
    "rq_workers",
    "shared_path",
    "sweep_last_run",
    "task_call_outputs",
    "task_call_page",
    "task_change_token",
    "task_event_summaries",
    "task_events",
    "task_events_compact",
    "task_lane_place",
    "task_model_usage",
    "task_model_usage_before",
    "task_status_counts",
    "task_timeline_events",
    "task_tool",
    "task_tool_call_attempts",
    "task_tool_calls",
    "task_wait_times",
    "tasks_heartbeat_stale",
    "tasks_list",
    "templates_of",
    "tool_output_get",
    "user_can_create",
    "user_can_operate",
    "user_can_view",
    "user_in_group",
    "worker_dead",
    "worker_name",
    "workers_overview",
]
