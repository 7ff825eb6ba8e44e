"""What the overview, /ops/ and the metrics read across all tasks: the count in each status,
running tasks with a stale heartbeat, the sweep's last run and the MCP servers' state."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Now

from harness_base.config import harness_config
from tasks.events import EventType
from tasks.models import SWEEPER_NAME, SweepRun, Task, TaskEvent, TaskHourly
from tasks.rollups import rolled_span
from tasks.states import TERMINAL, TaskStatus


def mcp_servers_overview() -> list[dict[str, Any]]:
    """The configured MCP servers for /ops/: transport, where they are, how many tools each
    listed last time a task started, and the last connection error a run saw. Each lookup is
    the newest matching event, read backwards along (type, created_at)."""
    rows = []
    for name, config in harness_config().mcp_servers.items():
        listed = (
            TaskEvent.objects.filter(type=EventType.MCP_TOOLS_LISTED, payload__server=name)
            .order_by("-created_at")
            .values("payload", "created_at")
            .first()
        )
        error = (
            TaskEvent.objects.filter(type=EventType.MCP_SERVER_ERROR, payload__server=name)
            .order_by("-created_at")
            .values("payload", "created_at", "task_id")
            .first()
        )
        rows.append(
            {
                "name": name,
                "transport": config.transport,
                "target": config.url or " ".join(config.command or []),
                "network": config.network,
                "tool_count": listed["payload"].get("tool_count") if listed else None,
                # Tools not offered to the model, each with why (tasks only, bad schemas).
                "skipped": (listed["payload"].get("skipped") or []) if listed else [],
                "listed_at": listed["created_at"] if listed else None,
                "last_error": error["payload"].get("message", "") if error else "",
                "last_error_at": error["created_at"] if error else None,
                "last_error_task_id": error["task_id"] if error else None,
            }
        )
    return rows


def sweep_last_run() -> SweepRun | None:
    """The sweep's latest run (when, how long, what it did), or None if it never ran."""
    return SweepRun.objects.filter(name=SWEEPER_NAME).first()


def task_status_counts() -> dict[str, int]:
    """How many tasks are in each status, every status named (0 included), fast at millions of
    tasks: the few unfinished ones counted from `task_status_created` (status leads); finished
    ones from the hourly roll-ups (TaskHourly) plus, from `task_finished_status` (finished_at
    leads), those outside the rolled hours (the last hour or so). An hour whose task was
    reopened counts it under its old outcome too until the sweep rolls that hour again."""
    counts = dict.fromkeys(TaskStatus.values, 0)
    # IN, not NOT IN: an index range per status, never the whole index.
    unfinished = Task.objects.filter(status__in=[s for s in counts if s not in TERMINAL])
    for row in unfinished.values("status").annotate(n=Count("*")).order_by():
        counts[row["status"]] = row["n"]
    finished = Task.objects.filter(status__in=TERMINAL)
    span = rolled_span()
    if span is not None:
        first, end = span
        rolled = TaskHourly.objects.filter(hour__gte=first, hour__lt=end, status__in=TERMINAL)
        for row in rolled.values("status").annotate(n=Sum("tasks")).order_by():
            counts[row["status"]] += row["n"]
        finished = finished.filter(Q(finished_at__lt=first) | Q(finished_at__gte=end))
    for row in finished.values("status").annotate(n=Count("*")).order_by():
        counts[row["status"]] += row["n"]
    return counts


def tasks_heartbeat_stale(*, stale_after_s: float) -> int:
    """Running tasks whose heartbeat is older than `stale_after_s`: the sweep stalls and
    redispatches them on its next pass, so a count that stays up means no sweep is running
    (or it cannot finish). The few running tasks, from `task_status_created`."""
    return Task.objects.filter(
        status=TaskStatus.RUNNING, heartbeat_at__lt=Now() - timedelta(seconds=stale_after_s)
    ).count()
