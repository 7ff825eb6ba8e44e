"""Read-side queries for tasks. Permission-checked lookups live here."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import (
    CharField,
    Count,
    Exists,
    FloatField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Sum,
    TextField,
)
from django.db.models.fields.json import KeyTextTransform, compile_json_path
from django.db.models.functions import Cast, Left, Now
from django.utils import timezone

from harness_base.config import harness_config
from tasks.errors import NotFound
from tasks.events import EventType
from tasks.models import (
    SWEEPER_NAME,
    SweepRun,
    Task,
    TaskEvent,
    TaskHourly,
    ToolCall,
    ToolCallStatus,
    ToolOutput,
)
from tasks.rollups import rolled_span
from tasks.states import TERMINAL, TaskStatus
from tasks.tools.mcp import mcp_server_of, recorded_tool
from tasks.tools.registry import ToolSpec, UnknownTool, registry

# The role groups (harness_base/roles.py grants their permissions). Membership alone counts
# too, so a group created by hand in the admin works before `roles_ensure` ran.
READ_GROUPS = ("viewers", "creators", "operators")
CREATE_GROUPS = ("creators", "operators")
# Holding any of these lets a user read (deciding a review means reading it first).
READ_PERMISSIONS = (
    "tasks.view_task",
    "tasks.add_task",
    "tasks.operate_task",
    "review.decide_review",
)


def _active(user: AbstractBaseUser | None) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def user_in_group(user: AbstractBaseUser, names: tuple[str, ...]) -> bool:
    """Whether the user belongs to one of the groups. The user's group names are read once
    per user object (one request), as Django caches its permissions on it: a request checks
    access several times."""
    groups = getattr(user, "_harness_group_names", None)
    if groups is None:
        groups = frozenset(user.groups.values_list("name", flat=True))
        user._harness_group_names = groups
    return not groups.isdisjoint(names)


def user_can_view(user: AbstractBaseUser | None) -> bool:
    """Viewers, creators, operators and superusers read; a logged-in user in no group sees
    nothing."""
    if not _active(user):
        return False
    # Groups first: one query a request settles it for the usual roles, where the permissions
    # take two (a user's own and its groups').
    if user.is_superuser or user_in_group(user, READ_GROUPS):
        return True
    return any(user.has_perm(perm) for perm in READ_PERMISSIONS)


def user_can_create(user: AbstractBaseUser | None) -> bool:
    """Creating a task runs code on the workers: operators and `creators` only."""
    if not user_can_view(user):
        return False
    if user.is_superuser or user.has_perm("tasks.add_task"):
        return True
    return user_in_group(user, CREATE_GROUPS)


def user_can_operate(user: AbstractBaseUser | None) -> bool:
    """Operators act (cancel, retry, roll back, decide); viewers only read."""
    if not user_can_view(user):
        return False
    if user.is_superuser or user.has_perm("tasks.operate_task"):
        return True
    return user_in_group(user, ("operators",))


def task_tool(*, task_id: Any, name: str) -> ToolSpec | None:
    """A tool as this task knows it: a registered one, or an MCP server's tool as listed when
    the task started (its `mcp_tools_listed` events), described but not callable here."""
    if mcp_server_of(name) is None:
        try:
            return registry.get(name)
        except UnknownTool:
            return None
    server = name.partition("__")[0]
    for payload in TaskEvent.objects.filter(
        task_id=task_id, type=EventType.MCP_TOOLS_LISTED, payload__server=server
    ).values_list("payload", flat=True):
        spec = recorded_tool(payload.get("tools") or [], name)
        if spec is not None:
            return spec
    return None


# Delegation is one level deep today (sub-agents cannot delegate); the walk allows a few more.
GROUP_MAX_DEPTH = 8


def group_root(task: Task) -> Task:
    """The task at the top of the task's group (itself when it has no parent)."""
    for _ in range(GROUP_MAX_DEPTH):
        if task.parent_id is None:
            return task
        task = Task.objects.get(id=task.parent_id)
    return task


def shared_path(*, root_id: Any) -> Path:
    """Where the shared directory of the group rooted at `root_id` lives (made or not)."""
    return settings.HARNESS_WORKSPACE_ROOT / "shared" / str(root_id)


def group_has_shared(root: Task) -> bool:
    return bool((root.spec or {}).get("shared"))


def group_shared_path(task: Task) -> Path | None:
    """The shared directory of the task's group (multiagent/shared.py), made or not; None when
    the group's root did not ask for one."""
    root = group_root(task)
    return shared_path(root_id=root.id) if group_has_shared(root) else None


def access_task(user: AbstractBaseUser, task_id: Any, *, lock: bool = False) -> Task:
    """The task `user` may read. Raises `NotFound` for an unknown or malformed id, and for a
    user without a role (who may not learn whether a task exists either)."""
    if not user_can_view(user):
        raise NotFound("task not found")
    qs = Task.objects.all()
    if lock:
        qs = qs.select_for_update()
    try:
        return qs.get(id=task_id)
    except (Task.DoesNotExist, ValueError, TypeError):
        raise NotFound("task not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("task not found") from None
        raise


def day_start(day: date) -> datetime:
    """Midnight at the start of `day` in the current time zone (date-range filters)."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


# The task list's sorts (`sort=`), each an order one index serves forwards or backwards:
# created -> created_at, status -> task_status_created, title -> task_title_created.
TASK_SORTS: dict[str, tuple[str, ...]] = {
    "-created": ("-created_at",),
    "created": ("created_at",),
    "status": ("status", "-created_at"),
    "-status": ("-status", "created_at"),
    "title": ("title", "created_at"),
    "-title": ("-title", "-created_at"),
}
TASK_SORT_DEFAULT = "-created"


def tasks_list(
    *,
    sort: str = TASK_SORT_DEFAULT,
    status: str | Iterable[str] | None = None,
    q: str | None = None,
    tool: str | None = None,
    error_class: str | None = None,
    fingerprint: str | None = None,
    creator: str | None = None,
    created_from: date | None = None,
    created_to: date | None = None,
    finished_from: datetime | None = None,
    finished_to: datetime | None = None,
    with_children: bool = False,
) -> QuerySet[Task]:
    """Tasks in `sort` order (TASK_SORTS; newest first by default), narrowed by the task
    list's filters (all optional, ANDed);
    `with_children` fetches every listed task's child ids in one more query (the API's
    `children`), not one per task.

    Indexes: status -> task_status_created, error_class -> task_error_finished, fingerprint ->
    task_fprint_finished, creator -> task_creator_created, dates -> created_at / finished_at,
    tool -> the (task, call_id) unique index of the tool-call ledger."""
    qs = Task.objects.select_related("created_by").order_by(*TASK_SORTS[sort])
    if with_children:
        qs = qs.prefetch_related(
            Prefetch(
                "children",
                queryset=Task.objects.only("id", "parent_id", "created_at").order_by("created_at"),
            )
        )
    if status:
        statuses = status.split(",") if isinstance(status, str) else list(status)
        qs = qs.filter(status__in=[s for s in statuses if s])
    if q:
        text = Q(title__icontains=q) | Q(goal__icontains=q)
        try:
            text |= Q(id=uuid.UUID(q.strip()))
        except ValueError:
            pass
        qs = qs.filter(text)
    if tool:
        qs = qs.filter(Exists(ToolCall.objects.filter(task=OuterRef("pk"), tool=tool)))
    if error_class:
        qs = qs.filter(error_class=error_class)
    if fingerprint:
        qs = qs.filter(error_fingerprint=fingerprint)
    if creator:
        qs = qs.filter(created_by__username=creator)
    if created_from:
        qs = qs.filter(created_at__gte=day_start(created_from))
    if created_to:
        qs = qs.filter(created_at__lt=day_start(created_to) + timedelta(days=1))
    if finished_from:
        qs = qs.filter(finished_at__gte=finished_from)
    if finished_to:
        qs = qs.filter(finished_at__lt=finished_to)
    return qs


def task_events(*, task: Task, after: int | None = None) -> QuerySet[TaskEvent]:
    qs = TaskEvent.objects.filter(task=task).order_by("id")
    if after is not None:
        qs = qs.filter(id__gt=after)
    return qs


def task_tool_calls(*, task: Task) -> QuerySet[ToolCall]:
    return ToolCall.objects.filter(task=task).order_by("id")


def task_call_page(*, task: Task, call_id: str, page_size: int) -> int | None:
    """The page of the calls tab that holds `call_id` (None: no such call)."""
    pk = ToolCall.objects.filter(task=task, call_id=call_id).values_list("id", flat=True).first()
    if pk is None:
        return None
    return ToolCall.objects.filter(task=task, id__lt=pk).count() // page_size + 1


def task_call_outputs(
    *, task: Task, call_ids: Iterable[str]
) -> dict[str, dict[int, list[ToolOutput]]]:
    """call_id -> attempt -> its output parts in order, without their stored bytes."""
    found: dict[str, dict[int, list[ToolOutput]]] = {}
    rows = (
        ToolOutput.objects.filter(task=task, call_id__in=list(call_ids))
        .defer("data")
        .order_by("attempt", "position", "id")
    )
    for row in rows:
        found.setdefault(row.call_id, {}).setdefault(row.attempt, []).append(row)
    return found


def call_attempts(*, call: ToolCall, outputs: dict[int, list[ToolOutput]]) -> list[dict[str, Any]]:
    """Each attempt of a call as the pages show it: its attempt-log entry (status, times, the
    error, the facts of its result) with its output parts. The running attempt, and one whose
    worker was lost (only what was last seen of it), have outputs and no log entry yet."""
    logged = {entry.get("n"): entry for entry in call.attempt_log if isinstance(entry, dict)}
    numbers = sorted(n for n in set(logged) | set(outputs) if isinstance(n, int))
    return [
        {**logged.get(n, {"n": n, "status": call.status}), "outputs": outputs.get(n, [])}
        for n in numbers
    ]


def tool_output_get(*, task: Task, output_id: Any) -> ToolOutput:
    """One output part of the task (with its bytes); NotFound for another task's."""
    try:
        pk = int(output_id)
        if not 0 < pk < 2**63:
            raise ValueError(pk)
        return ToolOutput.objects.get(task=task, id=pk)
    except (ToolOutput.DoesNotExist, ValueError, TypeError):
        raise NotFound("output not found") from None


# Payload keys the timeline and the compact event view read. Extracted in SQL (->>) so a
# 1,000-step task's page never decodes its model transcripts.
_EVENT_KEYS = (
    "call_id",
    "tool",
    "status",
    "attempt",
    "error_class",
    "duration_ms",
    "from",
    "to",
    "reason",
    "decision",
    "step",
    "turn",
    "from_seq",
    "seq",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "node",
)


class PayloadText(KeyTextTransform):
    """A top-level payload key as text, a JSON null as SQL NULL on every backend. (Django's
    key transform gives SQLite the text 'null' for a JSON null: a model retry's
    `"call_id": null` became a tool call named "null".)"""

    def __init__(self, key: str) -> None:
        super().__init__(key, "payload")

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, tuple]:
        sql, params = super().as_sqlite(compiler, connection)
        lhs, lhs_params, keys = self.preprocess_lhs(compiler, connection)
        path = compile_json_path(keys)
        return (
            f"(CASE WHEN JSON_TYPE({lhs}, %s) = 'null' THEN NULL ELSE {sql} END)",
            (*lhs_params, path, *params),
        )


def _payload_keys() -> dict[str, PayloadText]:
    return {key: PayloadText(key) for key in _EVENT_KEYS}


def as_text(field: str) -> Cast:
    """A timestamp column as ISO text, for datetime.fromisoformat: a page that plots
    thousands of timestamps skips the driver's per-value time-zone conversion."""
    return Cast(field, output_field=CharField())


def task_event_summaries(*, task: Task) -> QuerySet:
    """The task's events, oldest first, as dicts {id, type, step_index, actor, created_at,
    <each of _EVENT_KEYS from the payload, or None>} — never the whole payload. Served by
    event_task_seq."""
    return (
        TaskEvent.objects.filter(task=task)
        .order_by("id")
        .values("id", "type", "step_index", "actor", "created_at", **_payload_keys())
    )


def task_timeline_events(
    *,
    task: Task,
    types: Iterable[str],
    from_step: int | None = None,
    kept: Iterable[str] = (),
    kept_failed: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The task's events of `types` as for task_event_summaries, with the time as ISO text
    in `at`. With `from_step`: those of the steps from `from_step` on and of no step, and
    from every step those of the `kept` types and those of the `kept_failed` types that carry
    an error class."""
    events = (
        TaskEvent.objects.filter(task=task, type__in=list(types))
        .order_by("id")
        .values("id", "type", "step_index", "actor", at=as_text("created_at"), **_payload_keys())
    )
    if from_step is not None:
        events = events.filter(
            Q(step_index__gte=from_step)
            | Q(step_index__isnull=True)
            | Q(type__in=list(kept))
            | Q(type__in=list(kept_failed), error_class__isnull=False)
        )
    return list(events)


# The characters of a call's arguments (as JSON text) the timeline's hover summarises.
ARGUMENTS_TEXT_CHARS = 400


def task_tool_call_attempts(*, task: Task, from_step: int | None = None) -> list[dict[str, Any]]:
    """The task's tool calls (oldest first) with their attempt logs and the start of their
    arguments as JSON text (`arguments_text`, cut in SQL: a call that wrote a large file costs
    the page a few hundred characters), without results; `started` is the current attempt's
    start as ISO text, `number` the call's place among the task's calls (1 for its first).

    With `from_step`: the calls of the steps from `from_step` on, and the earlier ones that did
    not succeed at their first attempt (what a collapsed timeline still shows)."""
    calls = ToolCall.objects.filter(task=task)
    if from_step is not None:
        calls = calls.filter(
            Q(step_index__gte=from_step) | ~Q(status=ToolCallStatus.SUCCEEDED) | Q(attempts__gt=1)
        )
    rows = list(
        calls.order_by("id").values(
            "id",
            "call_id",
            "tool",
            "status",
            "step_index",
            "attempts",
            "attempt_log",
            started=as_text("started_at"),
            arguments_text=Left(Cast("arguments", output_field=TextField()), ARGUMENTS_TEXT_CHARS),
        )
    )
    if from_step is None:
        numbers = {row["id"]: n for n, row in enumerate(rows, 1)}
    else:
        # The ids alone (one narrow index scan): the numbers count the calls left out too.
        ids = ToolCall.objects.filter(task=task).order_by("id").values_list("id", flat=True)
        numbers = {id_: n for n, id_ in enumerate(ids, 1)}
    for row in rows:
        row["number"] = numbers[row["id"]]
    return rows


# How a call's lifecycle events read in the compact view; others show their type.
_CALL_STAGES = {
    "review_requested": "awaiting review",
    "tool_started": "running",
    "tool_replayed": "replayed",
    "tool_rerun_idempotent": "re-run (idempotent)",
}


def _call_stage(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "tool_started":
        attempt = event.get("attempt")
        return "running" if str(attempt or "1") == "1" else f"running (attempt {attempt})"
    if kind == "tool_finished":
        return str(event.get("status") or "finished")
    if kind == "tool_refused":
        return f"refused: {event.get('error_class') or ''}".rstrip(": ")
    return _CALL_STAGES.get(kind) or str(event.get("decision") or kind.replace("_", " "))


def task_events_compact(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event summaries with each tool call's lifecycle (proposed → awaiting review →
    approved → running → succeeded) folded into one row, placed where the call first
    appeared. Rows: {"call": True, call_id, tool, stages, ...} or the event itself."""
    rows: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        call_id = event.get("call_id")
        if not call_id:
            rows.append({"call": False, **event})
            continue
        row = calls.get(call_id)
        if row is None:
            row = calls[call_id] = {
                "call": True,
                "call_id": call_id,
                "tool": event.get("tool") or "",
                "step_index": event["step_index"],
                "created_at": event["created_at"],
                "id": event["id"],
                "stages": ["proposed"],
                "error_class": "",
                "last_at": event["created_at"],
                "duration_ms": None,
            }
            rows.append(row)
        row["stages"].append(_call_stage(event))
        row["last_at"] = event["created_at"]
        row["error_class"] = event.get("error_class") or row["error_class"]
        if event.get("duration_ms") is not None:
            row["duration_ms"] = event["duration_ms"]
    return rows


# Events whose payload carries one model call's usage (prompt_tokens, completion_tokens,
# cost_usd): the turns, the context summaries and the final-answer reviews.
USAGE_EVENTS = frozenset({"model_decision", "context_folded", "final_checked"})


def task_model_usage(
    events: list[dict[str, Any]], *, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Model calls, tokens and cost per step (oldest first) and in total, from the event
    summaries (`task_event_summaries`). `earlier`: the totals of the steps before those events
    (task_model_usage_before), when only the later steps' events were read; `steps_before`
    says how many steps they were."""
    steps: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["type"] not in USAGE_EVENTS or event.get("prompt_tokens") is None:
            continue
        step = event["step_index"] or 0
        row = steps.setdefault(
            step,
            {"step": step, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
        )
        row["calls"] += 1
        row["prompt_tokens"] += int(event["prompt_tokens"])
        row["completion_tokens"] += int(event.get("completion_tokens") or 0)
        row["cost_usd"] += float(event.get("cost_usd") or 0)
    rows = list(steps.values())
    earlier = earlier or {"steps": 0, "calls": 0, "cost_usd": 0.0}
    return {
        "steps": rows,
        "steps_in_all": len(rows) + earlier["steps"],
        "calls": sum(r["calls"] for r in rows) + earlier["calls"],
        "cost_usd": sum(r["cost_usd"] for r in rows) + earlier["cost_usd"],
    }


def task_model_usage_before(*, task: Task, step: int) -> dict[str, Any]:
    """{steps, calls, cost_usd}: the model usage of the task's steps before `step`, summed by
    the database (what task_model_usage adds when the page reads only the later steps)."""
    totals = (
        TaskEvent.objects.filter(task=task, type__in=list(USAGE_EVENTS), step_index__lt=step)
        .annotate(prompt_tokens=PayloadText("prompt_tokens"))
        .filter(prompt_tokens__isnull=False)
        .aggregate(
            steps=Count("step_index", distinct=True),
            calls=Count("*"),
            cost_usd=Sum(Cast(PayloadText("cost_usd"), output_field=FloatField())),
        )
    )
    return {**totals, "cost_usd": totals["cost_usd"] or 0.0}


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


def task_change_token(*, task: Task) -> str:
    """Changes whenever anything the task page shows about the task changes: its row (status,
    step, usage, head checkpoint; `updated_at` moves on every write) or its frame log (the
    newest event id, from event_task_seq). The live page's ETags are built on it."""
    last_event = (
        TaskEvent.objects.filter(task=task).order_by("-id").values_list("id", flat=True).first()
    )
    return f"{task.status}:{task.updated_at.isoformat()}:{task.head_checkpoint_id}:{last_event}"


# The statuses in which a task waits for a person, each with the word the pages use for it.
_WAITS = {"waiting_review": "review", "held": "held"}


def task_wait_times(events: Iterable[dict[str, Any]], *, now: datetime) -> dict[str, float]:
    """Seconds spent waiting for a review and on hold, kept apart (a held task never waited
    for a review), from the task's `status` events (dicts with `at` as ISO text, `to`)."""
    totals = dict.fromkeys(_WAITS.values(), 0.0)
    waiting: str | None = None
    since: datetime | None = None
    for event in events:
        if event["type"] != "status":
            continue
        at = iso_datetime(event["at"])
        if waiting is not None and since is not None and at is not None:
            totals[waiting] += max(0.0, (at - since).total_seconds())
        waiting, since = _WAITS.get(event["to"]), at
    if waiting is not None and since is not None:
        totals[waiting] += max(0.0, (now - since).total_seconds())
    return totals


def iso_datetime(value: Any) -> datetime | None:
    """A datetime from ISO text, as events and attempt logs store it (SQLite's has no offset:
    it is UTC); None for what is not one."""
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


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


def model_decisions_by_turn(*, task_id: Any) -> dict[int, dict[str, Any]]:
    """{turn number (1-based): model_decision payload} for a task; after a rollback the newest
    decision of a turn wins (the one the task went on with)."""
    turns: dict[int, dict[str, Any]] = {}
    for payload in (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.MODEL_DECISION)
        .order_by("id")
        .values_list("payload", flat=True)
    ):
        turn = payload.get("turn")
        if isinstance(turn, int):
            turns[turn] = payload
    return turns
