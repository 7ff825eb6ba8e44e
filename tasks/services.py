"""Task services: the only code that writes tasks, their events and API tokens."""

from __future__ import annotations

import copy
import functools
import hashlib
import random
import secrets
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now
from django.utils import timezone
from pydantic import ValidationError

from harness_base.config import harness_config
from harness_base.metrics import TASKS_FINISHED, TASKS_STARTED, metric_inc
from tasks.agent_state import AgentState
from tasks.errors import NotFound, error_fingerprint
from tasks.events import EventType
from tasks.models import ApiToken, AuditEntry, SweepRun, Task, TaskEvent, ToolCall
from tasks.rollups import calls_failed_q, rollups_task_reopened
from tasks.selectors import access_task
from tasks.spec import (
    ModelEndpointError,
    RetryChanges,
    TaskSpec,
    budget_in_force,
    model_endpoint,
    spec_model_name,
)
from tasks.states import (
    TERMINAL,
    TOOLCALL_SETTLED,
    IllegalTransition,
    LeaseLost,
    TaskStatus,
    ToolCallStatus,
    TransitionConflict,
    can_transition,
    toolcall_can_transition,
)
from tasks.tools.mcp import mcp_server_of
from tasks.tools.registry import UnknownTool, registry
from tasks.tracing import event_traced


class CapacityFull(Exception):
    """`max_concurrent_tasks` tasks are already running; the task stays queued."""


class SpecError(ValueError):
    """A TaskSpec that parses but cannot run; `field` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --- events ---------------------------------------------------------------------------------


def event_build(
    *,
    task_id: Any,
    type: str,
    payload: dict | None = None,
    step_index: int | None = None,
    actor: str = "",
    at: datetime | None = None,
) -> TaskEvent:
    """An unsaved event. `type` is one of EventType (tasks.events; tests/test_architecture.py
    checks every writer passes one)."""
    event = TaskEvent(
        task_id=task_id,
        type=type,
        payload=payload or {},
        step_index=step_index,
        actor=actor,
        created_at=at or timezone.now(),
    )
    event_traced(event)
    return event


def event_record(
    *,
    task_id: Any,
    type: str,
    payload: dict | None = None,
    step_index: int | None = None,
    actor: str = "",
) -> TaskEvent:
    event = event_build(
        task_id=task_id, type=type, payload=payload, step_index=step_index, actor=actor
    )
    event.save(force_insert=True)
    return event


def event_record_while_held(*, task_id: Any, worker_id: str, type: str, payload: dict) -> bool:
    """Record an event from the worker process supervising a task, only while the task is
    running under that worker (-> whether it was recorded). No row lock is taken: the horse
    being reported on may be stuck holding one."""
    held = Task.objects.filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id)
    if not held.exists():
        return False
    event_record(task_id=task_id, type=type, payload=payload)
    return True


def events_record(events: Iterable[TaskEvent]) -> None:
    TaskEvent.objects.bulk_create(list(events))


# --- audit ---------------------------------------------------------------------------------


def audit_record(
    *,
    user: AbstractBaseUser | None,
    action: str,
    task_id: Any = None,
    target: str = "",
    reason: str = "",
    before: Any = None,
    after: Any = None,
    actor_name: str = "",
) -> AuditEntry:
    """Record an operator action; call it inside the transaction that performs the action.
    With no user, `actor_name` names what acted (a standing rule), else "system"."""
    authenticated = user is not None and user.is_authenticated
    return AuditEntry.objects.create(
        at=timezone.now(),
        actor=user if authenticated else None,
        actor_name=user.get_username() if authenticated else (actor_name[:150] or "system"),
        action=action,
        task_id=task_id,
        target=target or (str(task_id) if task_id else ""),
        reason=reason,
        before=before,
        after=after,
    )


# --- the state machine ----------------------------------------------------------------------


def task_lock(*, task_id: Any) -> Task:
    """Inside a transaction: lock and return the task row. Lock contract: services that also
    lock rows of other apps (reviews, checkpoints) take the task row first, the order
    task_transition and the worker's fenced writes use, so they cannot deadlock."""
    return Task.objects.select_for_update().get(id=task_id)


# Time a task spends waiting for a human (a review, a hold, or an operator to recover a stopped
# task) does not count against its session timeout.
_HUMAN_WAIT = frozenset({TaskStatus.WAITING_REVIEW, TaskStatus.HELD, *TERMINAL})


def _seconds_in_status(*, task_id: Any, now: datetime) -> float:
    """Seconds since the task entered its current status (its newest `status` event)."""
    entered = (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.STATUS)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    return max(0.0, (now - entered).total_seconds()) if entered else 0.0


# Fields only the state machine sets, from the status a task moves to (callers may pass the
# error class and message of a failure; the fingerprint always follows from them).
_DERIVED = frozenset(
    {
        "status",
        "error_fingerprint",
        "finished_at",
        "started_at",
        "review_wait_s",
        "held_wait_s",
        "calls_failed",
        "lease_epoch",
    }
)


def task_transition(
    *,
    task_id: Any,
    to: str,
    reason: str = "",
    actor: str = "",
    expect_epoch: int | None = None,
    expect_from: Iterable[str] | None = None,
    fields: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
    stay: bool = False,
    locked: Task | None = None,
) -> Task:
    """The one function that changes a task's status.

    Locks the row, checks the transition table (and, for workers, the lease epoch), applies a
    conditional UPDATE on the status it read and records an immutable `status` event, all in
    one transaction. Raises IllegalTransition, TransitionConflict or LeaseLost.

    The fields derived from the status are set here and nowhere else: `finished_at` and
    `started_at`, the time waited for a human (`review_wait_s`, `held_wait_s`), whether a tool
    call had failed by the time it finished (`calls_failed`), and the error fingerprint of the
    error class and message a caller passes in `fields` (clearing them clears it too).

    `stay=True` with `to` the task's current status changes only `fields` (a recovery that
    leaves a held task held): no status event, the derived fields still follow.

    `locked`: the row as the caller's transaction locked it (task_lock) and has not changed it
    since; the transition is then part of that transaction (no savepoint, no second lock: a
    failure rolls the caller's transaction back)."""
    with transaction.atomic(savepoint=locked is None):
        # Lock contract: the task row is locked first, before any checkpoint/review row.
        task = locked if locked is not None else Task.objects.select_for_update().get(id=task_id)
        frm = task.status
        if expect_epoch is not None and task.lease_epoch != expect_epoch:
            raise LeaseLost(f"task {task_id}: lease epoch {expect_epoch} is stale")
        if expect_from is not None and frm not in set(expect_from):
            raise TransitionConflict(f"task {task_id} is {frm}, expected {sorted(expect_from)}")
        staying = stay and to == frm
        if not staying and not can_transition(frm, to):
            raise IllegalTransition(frm, to)
        derived = _DERIVED.intersection(fields or {})
        if derived:
            raise ValueError(f"task_transition derives {sorted(derived)} itself")
        now = timezone.now()
        updates: dict[str, Any] = {"status": to, "updated_at": now, **(fields or {})}
        if not staying:
            for key, value in _derived_fields(task=task, frm=frm, to=to, now=now).items():
                updates.setdefault(key, value)
        if "error_class" in updates or "error_message" in updates:
            updates["error_fingerprint"] = error_fingerprint(
                updates.get("error_class", task.error_class),
                updates.get("error_message", task.error_message),
            )
        if Task.objects.filter(id=task_id, status=frm).update(**updates) != 1:
            raise TransitionConflict(f"task {task_id} changed while transitioning")
        if frm in TERMINAL and not staying and task.finished_at is not None:
            # The statistics' roll-up of the hour it finished in no longer holds.
            rollups_task_reopened(finished_at=task.finished_at)
        if not staying:
            _count_transition(to=to, first_start=task.started_at is None)
            event_record(
                task_id=task_id,
                type=EventType.STATUS,
                payload={"from": frm, "to": to, "reason": reason, **(payload or {})},
                step_index=task.current_step,
                actor=actor,
            )
        for key, value in updates.items():
            setattr(task, key, value)
        return task


def _count_transition(*, to: str, first_start: bool) -> None:
    """The metrics of a status change (harness_base.metrics), counted once it commits."""
    if to == TaskStatus.RUNNING and first_start:
        transaction.on_commit(lambda: metric_inc(TASKS_STARTED))
    elif to in TERMINAL:
        transaction.on_commit(lambda: metric_inc(TASKS_FINISHED, outcome=to))


def _derived_fields(*, task: Task, frm: str, to: str, now: datetime) -> dict[str, Any]:
    """What entering `to` from `frm` sets besides the status (task_transition only)."""
    updates: dict[str, Any] = {}
    if to in TERMINAL:
        updates["finished_at"] = now
        updates["cancel_requested"] = False
        updates["calls_failed"] = (
            ToolCall.objects.filter(task_id=task.id).filter(calls_failed_q()).exists()
        )
    if to == TaskStatus.RUNNING and task.started_at is None:
        updates["started_at"] = now
    if to == TaskStatus.QUEUED:
        updates["finished_at"] = None
    if frm in _HUMAN_WAIT:
        # Counted when the wait ends, whatever comes next (a review rolled back to a hold
        # still waited for its review); review time and held time kept apart: a task held
        # (or stopped) and resumed never waited for a review.
        wait = "review_wait_s" if frm == TaskStatus.WAITING_REVIEW else "held_wait_s"
        updates[wait] = getattr(task, wait) + _seconds_in_status(task_id=task.id, now=now)
    return updates


def queue_name_for(priority: str) -> str:
    return priority if priority in settings.HARNESS_QUEUES else "default"


# The job by dotted path: enqueueing a task never imports the agent loop, which sits above
# every app (docs/architecture.md).
RUN_TASK_JOB = "agent.jobs.run_task"


def task_enqueue(*, task: Task, delay_s: float | None = None) -> None:
    """Put `run_task` on the task's priority queue once the surrounding transaction commits;
    with `delay_s`, RQ's scheduler (a worker started `--with-scheduler`) enqueues it then.

    A failure to reach Redis is logged, not raised: the task is durable in the database and
    the sweep re-enqueues queued tasks whose job is missing."""
    task_id = str(task.id)
    queue_name = queue_name_for(task.priority)
    # The lease epoch the task had when it was enqueued: the job id is recorded only if no
    # worker has taken the task since (a fenced write, like every other worker write).
    epoch = task.lease_epoch

    def send() -> None:
        queue = django_rq.get_queue(queue_name)
        options = {
            "job_timeout": task_job_timeout_s(task=task),
            "result_ttl": 600,
            "failure_ttl": 7 * 86400,
            "description": f"run_task {task_id}",
        }
        if delay_s:
            # RQ's scheduler keeps whole seconds (truncated): round up, so a job never runs
            # before its time.
            at = timezone.now() + timedelta(seconds=delay_s)
            at += timedelta(microseconds=(1_000_000 - at.microsecond) % 1_000_000)
            job = queue.enqueue_at(at, RUN_TASK_JOB, task_id, **options)
        else:
            job = queue.enqueue(RUN_TASK_JOB, task_id, **options)
        task_job_record(task_id=task_id, epoch=epoch, job_id=job.id)

    transaction.on_commit(send, robust=True)


def task_job_record(*, task_id: Any, epoch: int, job_id: str) -> bool:
    """Remember the RQ job that will run the task, fenced by the lease epoch it was enqueued
    at: False, writing nothing, when a worker took the task since (its epoch moved on)."""
    return Task.objects.filter(id=task_id, lease_epoch=epoch).update(rq_job_id=job_id) == 1


# What a job may run past its session timeout before the queue kills its work horse: a turn
# and a tool call in flight when the session ran out, the final writes, and slack.
JOB_TIMEOUT_SLACK_S = 120


def task_job_timeout_s(*, task: Task) -> int:
    """The hard, queue-level timeout of one `run_task` job: the task's session timeout plus its
    turn and tool timeouts and slack. The loop ends a run at its session timeout by itself;
    this bound holds even when the work horse is stuck where the loop cannot act (RQ's
    supervisor kills the horse; the worker then settles the task, agent/worker.py)."""
    timeouts = harness_config().timeouts
    budget = (task.spec or {}).get("budget") or {}
    total = (
        (budget.get("session_timeout_s") or timeouts.session_s)
        + (budget.get("turn_timeout_s") or timeouts.turn_s)
        + (budget.get("tool_timeout_s") or timeouts.tool_s)
    )
    return int(total) + JOB_TIMEOUT_SLACK_S


def task_supervisor_heartbeat(*, task_id: Any, worker_id: str) -> bool:
    """Heartbeat a running task from the worker process supervising its work horse (another
    interpreter: it beats even while the horse is stuck). -> whether a cancel is pending.

    A row someone holds locked is skipped, not waited for: the holder is acting on the task
    right now, and a waiting heartbeat would queue ahead of the horse's own writes."""
    with transaction.atomic():
        row = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id)
            .values_list("cancel_requested", flat=True)
            .first()
        )
        if row is None:
            return False
        Task.objects.filter(id=task_id).update(heartbeat_at=Now())
        return bool(row)


def task_release_lost_connection(*, task_id: Any, epoch: int, error: str) -> bool:
    """A worker whose database connection broke mid-run (a restart, a failover, a network cut
    that healed) gives its task back once the database answers again: queued under its own
    lease (a lease that moved on meanwhile is left alone) and its job enqueued, so a worker
    carries it on from its newest checkpoint, as after a redispatch, instead of leaving it
    `running` until a sweeper notices the silence. -> released."""
    with transaction.atomic():
        try:
            task = task_transition(
                task_id=task_id,
                to=TaskStatus.QUEUED,
                expect_epoch=epoch,
                expect_from=[TaskStatus.RUNNING],
                reason="database connection lost; carried on from the newest checkpoint",
                fields={"worker_id": ""},
            )
        except (LeaseLost, TransitionConflict):
            return False
        event_record(
            task_id=task_id,
            type=EventType.REQUEUED,
            payload={"status": TaskStatus.RUNNING, "cause": "connection_lost", "error": error},
            step_index=task.current_step,
        )
        task_enqueue(task=task)
    return True


def task_settle_killed_horse(*, task_id: Any, worker_id: str, timed_out_s: float | None) -> None:
    """The work horse running the task was killed by its supervisor or died. A pending cancel
    ends the task canceled; a horse killed at the job's hard timeout (`timed_out_s`) fails it
    with error class `timeout` (layer: job). A horse that died otherwise (a crash) is left to
    the sweep, which redispatches the task."""
    task = Task.objects.filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id).first()
    if task is None:
        return
    if task.cancel_requested:
        to, error_class = TaskStatus.CANCELED, "canceled"
        message = "canceled; the work horse did not stop by itself and was killed"
    elif timed_out_s is not None:
        to, error_class = TaskStatus.FAILED, "timeout"
        message = (
            f"the job exceeded its hard timeout of {timed_out_s:g}s and was killed (layer: job)"
        )
    else:
        return
    try:
        task_transition(
            task_id=task_id,
            to=to,
            expect_epoch=task.lease_epoch,
            expect_from=[TaskStatus.RUNNING],
            reason=message,
            fields={"error_class": error_class, "error_message": message},
        )
    except (LeaseLost, TransitionConflict, IllegalTransition):
        pass


def task_wake(*, task_id: Any) -> bool:
    """retry_wait -> queued once the backoff has elapsed (the scheduled job then runs it).
    False when the task is not waiting for a retry (canceled meanwhile, or already woken)."""
    try:
        task_transition(
            task_id=task_id,
            to=TaskStatus.QUEUED,
            expect_from=[TaskStatus.RETRY_WAIT],
            reason="backoff elapsed",
            fields={"retry_at": None},
        )
    except (TransitionConflict, Task.DoesNotExist):
        return False
    return True


def task_defer(*, task_id: Any) -> None:
    """Put a queued task that found no free capacity back on its queue after a short, jittered
    delay, instead of a worker waiting for a slot."""
    task = Task.objects.filter(id=task_id, status=TaskStatus.QUEUED).first()
    if task is not None:
        delay = settings.HARNESS_CAPACITY_RETRY_S * (1 + random.random())
        task_enqueue(task=task, delay_s=delay)


# --- creating and controlling tasks ----------------------------------------------------------


def task_spec_check(spec: TaskSpec, *, user: AbstractBaseUser | None) -> None:
    """Checks that need the registry, the config or the creating user, beyond the pydantic
    schema."""
    _tools_check(spec.tools, spec.model, prefix="")
    if spec.agent is not None:
        _agent_spec_check(spec, user=user)
    for name, agent in (spec.agents or {}).items():
        _tools_check(agent.tools, agent.model, prefix=f"agents.{name}.")
        _model_spec_check(agent.model, user=user, field=f"agents.{name}.model")
    _model_spec_check(spec.model, user=user, field="model")
    _timeouts_check(spec)


def _tools_check(tools: list[str], model: Any, *, prefix: str) -> None:
    for index, name in enumerate(tools):
        if mcp_server_of(name) is not None:
            # An MCP server's tool: the server says which exist when the task starts.
            continue
        try:
            registry.get(name)
        except UnknownTool:
            known = ", ".join(registry.names())
            raise SpecError(
                f"{prefix}tools.{index}", f"unknown tool {name!r}; known: {known}"
            ) from None
    if model is not None and model.kind == "scripted":
        allowed = set(tools)
        for t_index, turn in enumerate(model.script):
            names = [turn.call] if turn.call else [c.call for c in turn.calls or []]
            for name in names:
                if name and name not in allowed and mcp_server_of(name) is None:
                    # A scripted model may deliberately call a tool it was not given (to test
                    # the harness's refusal), but never one that does not exist at all.
                    try:
                        registry.get(name)
                    except UnknownTool:
                        raise SpecError(
                            f"{prefix}model.script.{t_index}", f"unknown tool {name!r}"
                        ) from None


def _timeouts_check(spec: TaskSpec) -> None:
    """Session > turn > tool, each from the spec's budget or harness.yaml's `timeouts`; the
    error names the field the spec set (or should set) to fix the order."""
    defaults = harness_config().timeouts
    budget = spec.budget
    tool_s = budget.tool_timeout_s or defaults.tool_s
    turn_s = budget.turn_timeout_s or defaults.turn_s
    session_s = budget.session_timeout_s or defaults.session_s
    got = f"(got tool={tool_s:g}s, turn={turn_s:g}s, session={session_s:g}s)"
    if not tool_s < turn_s:
        field = "tool_timeout_s" if budget.tool_timeout_s else "turn_timeout_s"
        raise SpecError(
            f"budget.{field}", f"the tool timeout must be shorter than the turn timeout {got}"
        )
    if not turn_s < session_s:
        field = "turn_timeout_s" if budget.turn_timeout_s else "session_timeout_s"
        raise SpecError(
            f"budget.{field}", f"the turn timeout must be shorter than the session timeout {got}"
        )


def _agent_spec_check(spec: TaskSpec, *, user: AbstractBaseUser | None) -> None:
    if spec.agent.kind in ("pydantic-ai", "openai-agents"):
        key, what = {
            "pydantic-ai": ("pydantic_ai_agents", "Pydantic AI agent"),
            "openai-agents": ("openai_agents", "OpenAI Agents SDK agent"),
        }[spec.agent.kind]
        agents = getattr(harness_config(), key)
        if spec.agent.name not in agents:
            known = ", ".join(sorted(agents)) or f"none (harness.yaml {key})"
            raise SpecError(
                "agent.name", f"unknown {what} {spec.agent.name!r}; registered: {known}"
            )
        _model_spec_check(spec.agent.model, user=user, field="agent.model")
        return
    graphs = harness_config().langgraph_graphs
    if spec.agent.graph not in graphs:
        known = ", ".join(sorted(graphs)) or "none (harness.yaml langgraph_graphs)"
        raise SpecError("agent.graph", f"unknown graph {spec.agent.graph!r}; registered: {known}")


def _model_spec_check(model: Any, *, user: AbstractBaseUser | None, field: str) -> None:
    if model is None:
        return
    if model.kind == "openai":
        try:
            model_endpoint(model)
        except ModelEndpointError as exc:
            raise SpecError(field, str(exc)) from None
    elif model.kind == "replay":
        _replay_source_check(task_id=model.task_id, user=user, field=f"{field}.task_id")


def _replay_source_check(*, task_id: str, user: AbstractBaseUser | None, field: str) -> None:
    """A replay answers with another task's recorded model decisions (its calls' arguments,
    its texts): only from a task the creating user may read. No user (a creator since
    deleted) reads nothing. One message for a task that does not exist and one the user may
    not read, so the answer does not tell which ids exist."""
    try:
        source = access_task(user, task_id) if user is not None else None
    except NotFound:
        source = None
    if source is None:
        raise SpecError(field, f"no task {task_id} that you may read")
    if not TaskEvent.objects.filter(task=source, type=EventType.MODEL_DECISION).exists():
        raise SpecError(field, f"task {task_id} has no recorded model decisions to replay")


def task_create(
    *,
    spec: TaskSpec,
    user: AbstractBaseUser | None,
    enqueue: bool = True,
    parent: Task | None = None,
    parent_call_id: str = "",
    agent_name: str = "",
    is_replay: bool = False,
    fork_of: Task | None = None,
) -> Task:
    """Validate, store and (after commit) enqueue a task. Durable before acknowledged. A child
    task names its parent, the parent's delegate call and the sub-agent it runs; a replay of
    a saved case says so (`is_replay`)."""
    task_spec_check(spec, user=user)
    with transaction.atomic():
        task = Task.objects.create(
            title=spec.title,
            goal=spec.goal,
            spec=spec.model_dump(mode="json", exclude_none=True),
            priority=spec.priority,
            created_by=user if user is not None and user.is_authenticated else None,
            parent=parent,
            parent_call_id=parent_call_id,
            agent_name=agent_name,
            is_replay=is_replay,
            fork_of=fork_of,
        )
        actor = user.get_username() if user is not None and user.is_authenticated else ""
        payload: dict[str, Any] = {"title": spec.title}
        if parent is not None:
            payload.update(parent_id=str(parent.id), agent=agent_name, call_id=parent_call_id)
        event_record(task_id=task.id, type=EventType.CREATED, payload=payload, actor=actor)
        if enqueue:
            task = task_transition(
                task_id=task.id, to=TaskStatus.QUEUED, reason="created", actor=actor
            )
            task_enqueue(task=task)
    return task


# --- worker leases --------------------------------------------------------------------------


# Any constant works: every acquisition under a concurrency limit takes this one lock.
_CAPACITY_LOCK_KEY = 0x6861726E657373  # "harness"


def _lock_capacity() -> None:
    """Serialise acquisitions while a global limit applies, for the rest of the transaction.
    PostgreSQL: a transaction-scoped advisory lock (held by whichever worker, on any machine,
    is acquiring). SQLite: transactions are IMMEDIATE, so writers are serialised already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CAPACITY_LOCK_KEY])


def task_acquire(*, task_id: Any, worker_id: str) -> Task | None:
    """queued -> running for this worker: the state machine's one transition a worker takes
    without a row lock — a conditional UPDATE on `queued` (the table's own check) that bumps
    the lease epoch (the fencing token), with its `status` event in the same transaction.
    Returns None when the task is not queued (a duplicate job, or already taken); raises
    CapacityFull, changing nothing, when `max_concurrent_tasks` are already running."""
    limit = harness_config().max_concurrent_tasks
    now = timezone.now()
    frm, to = TaskStatus.QUEUED, TaskStatus.RUNNING
    assert can_transition(frm, to)
    with transaction.atomic():
        if limit is not None:
            _lock_capacity()
        # A task held by a global checkpoint round (multiagent.coordinator) is not taken: the
        # round enqueues it again when it ends.
        updated = Task.objects.filter(id=task_id, status=frm, hold_round_id__isnull=True).update(
            status=to,
            lease_epoch=F("lease_epoch") + 1,
            attempt=F("attempt") + 1,
            worker_id=worker_id,
            # Database time: the sweep compares heartbeats with the database clock, so the
            # clocks of the worker machines do not matter.
            heartbeat_at=Now(),
            # _derived_fields' rule for running, without reading the row first.
            started_at=Coalesce(F("started_at"), Now()),
            updated_at=now,
        )
        if updated != 1:
            return None
        # Counted after the update (so it includes this task) and under the lock: rolling
        # back undoes the update, leaving the task queued.
        if limit is not None and Task.objects.filter(status=TaskStatus.RUNNING).count() > limit:
            raise CapacityFull(f"{limit} tasks are already running")
        task = Task.objects.get(id=task_id)
        # Coalesce kept an earlier start: this is the task's first when it set the
        # transaction's time, which the heartbeat got too.
        _count_transition(to=to, first_start=task.started_at == task.heartbeat_at)
        event_record(
            task_id=task_id,
            type=EventType.STATUS,
            payload={
                "from": frm,
                "to": to,
                "reason": "acquired",
                "worker": worker_id,
                "epoch": task.lease_epoch,
            },
            step_index=task.current_step,
        )
    return task


# --- the tool call state machine -------------------------------------------------------------


class ToolCallConflict(TransitionConflict):
    """The call's row changed between reading and writing it."""


def toolcall_transition(
    *,
    call: ToolCall,
    to: str,
    fields: dict[str, Any] | None = None,
    now: datetime | None = None,
    event: TaskEvent | None = None,
    epoch: int | None = None,
    write: bool = True,
    task_locked: bool = False,
) -> ToolCall:
    """The one function that changes a tool call's status (tasks.states.TOOLCALL_TRANSITIONS).

    Checks the table, sets the status and the fields derived from it on `call` — `finished_at`
    when the call gets an outcome (unless `fields` names it), `started_at` when it starts
    running — with `fields` (its result, error, attempts…), then writes it:

    - `write=True` (reviews, the sweep, recovery): in one transaction, lock the task row (lock
      contract) — or, with `epoch`, prove the worker still holds the lease (LeaseLost) — then
      a conditional UPDATE of the changed fields on the status read (ToolCallConflict if the
      row moved meanwhile) and `event`, if given. A new (unsaved) row is inserted.
    - `write=False` (the worker's own ledger): the row is written by the worker's next
      lease-fenced write (`task_fenced_write`), in the same statement as the step's events.
      While a task runs, only its lease holder writes its calls.

    `task_locked`: the caller's transaction holds the task row's lock already (task_lock); the
    write is part of that transaction (no savepoint, no second lock).

    Raises IllegalTransition (machine "tool call")."""
    frm = call.status
    if not toolcall_can_transition(frm, to):
        raise IllegalTransition(frm, to, machine="tool call")
    now = now or timezone.now()
    updates: dict[str, Any] = {"status": to}
    if to in TOOLCALL_SETTLED:
        updates["finished_at"] = now
    elif to == ToolCallStatus.RUNNING:
        updates["started_at"] = now
    updates.update(fields or {})
    for key, value in updates.items():
        setattr(call, key, value)
    if not write:
        return call
    with transaction.atomic(savepoint=not task_locked):
        if epoch is not None:
            task_fence(task_id=call.task_id, epoch=epoch)
        elif not task_locked:
            task_lock(task_id=call.task_id)
        if call._state.adding:
            call.save(force_insert=True)
        elif ToolCall.objects.filter(pk=call.pk, status=frm).update(**updates) != 1:
            raise ToolCallConflict(f"tool call {call.call_id} changed while transitioning")
        if event is not None:
            event.save(force_insert=True)
    return call


def task_fenced_write(
    *,
    task_id: Any,
    epoch: int,
    inserts: Sequence[models.Model] = (),
    updates: Sequence[tuple[models.Model, Sequence[str]]] = (),
    inserts_if_absent: Sequence[models.Model] = (),
    **fields: Any,
) -> bool:
    """One durable write of a worker: prove it still holds the lease, update the task row
    (heartbeat + `fields`), insert the unsaved `inserts`, the `inserts_if_absent` whose
    primary key is not taken yet (immutable, content-addressed rows such as blobs) and save
    the `(row, update_fields)` pairs of `updates` — all or nothing. Returns the task's
    `cancel_requested` as of this write, so the loop needs no query of its own to notice a
    cancel. Raises LeaseLost, having written nothing.

    On PostgreSQL this is one statement: the fenced UPDATE is a data-modifying CTE and every
    INSERT/UPDATE is conditional on it, so the write costs one round trip and one implicit
    transaction (one WAL flush) instead of BEGIN + n statements + COMMIT. The row lock and
    the all-or-nothing outcome are those of the transaction it replaces."""
    if connection.vendor != "postgresql":
        with transaction.atomic():
            task_fence(task_id=task_id, epoch=epoch, **fields)
            for model, rows in _by_model(inserts_if_absent).items():
                model.objects.bulk_create(rows, ignore_conflicts=True)
            for row in inserts:
                row.save(force_insert=True)
            for row, update_fields in updates:
                row.save(update_fields=update_fields)
            return Task.objects.filter(id=task_id).values_list("cancel_requested", flat=True).get()
    now = timezone.now()
    db = connections[DEFAULT_DB_ALIAS]
    sql, params, inserted = _fenced_statement(
        db=db,
        task_id=task_id,
        epoch=epoch,
        fields={"heartbeat_at": Now(), "updated_at": now, **fields},
        inserts=inserts,
        updates=updates,
        inserts_if_absent=inserts_if_absent,
    )
    with _raw_cursor(db) as cursor:
        cursor.execute(_numbered(sql), params)
        fenced, cancel_requested, *new_ids = cursor.fetchone()
    if not fenced:
        raise LeaseLost(f"task {task_id}: lease epoch {epoch} lost")
    for batch, ids in zip(inserted, new_ids, strict=True):
        for row, pk in zip(batch, ids or (), strict=False):
            row.pk = pk
    for row in inserts:
        row._state.adding = False
        row._state.db = db.alias
    return bool(cancel_requested)


def _raw_cursor(db: Any) -> Any:
    """A cursor on Django's PostgreSQL connection that sends parameters apart from the SQL
    (binary bytea, no escaping) and takes the statement's `$n` placeholders as they are: the
    fenced statement is long and its text changes with its rows, which psycopg would otherwise
    parse for `%s` on every write (beyond its cache's statement length)."""
    import psycopg

    db.ensure_connection()
    cursor = psycopg.RawCursor(db.connection)
    return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)


@functools.cache
def _placeholder(n: int) -> str:
    return f"${n}"


def _numbered(sql: str) -> str:
    """`%s` placeholders (the statement has no other `%`) as PostgreSQL's `$1`, `$2`, ..."""
    parts = sql.split("%s")
    out = [parts[0]]
    for n, part in enumerate(parts[1:], start=1):
        out.append(_placeholder(n))
        out.append(part)
    return "".join(out)


@functools.cache
def _insert_shape(model: type[models.Model]) -> tuple[list[Any], str, str, str | None]:
    """(columns, "table (col, …)", NULL placeholders by column, returned pk column) of an
    INSERT of `model`: the auto primary key is left to the database and returned."""
    qn = connection.ops.quote_name
    pk = model._meta.pk
    auto_pk = isinstance(pk, models.AutoField)  # BigAutoField too (AutoFieldMeta)
    columns = [f for f in model._meta.concrete_fields if not (f.primary_key and auto_pk)]
    # A bare NULL in VALUES would be typed text; name the column's type.
    nulls = [f"NULL::{f.db_type(connection)}" for f in columns]
    target = f"{qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in columns)})"
    return columns, target, nulls, qn(pk.column) if auto_pk else None


def _fenced_statement(
    *,
    db: Any,
    task_id: Any,
    epoch: int,
    fields: dict[str, Any],
    inserts: Sequence[models.Model],
    updates: Sequence[tuple[models.Model, Sequence[str]]],
    inserts_if_absent: Sequence[models.Model] = (),
) -> tuple[str, list[Any], list[list[models.Model]]]:
    """-> (sql, params, the batches of inserted rows whose auto primary keys the statement
    returns, in the order of its result columns). `db` is the connection itself, not the
    `django.db.connection` proxy, which costs a context-local lookup per attribute."""
    qn = db.ops.quote_name
    meta = Task._meta
    task_fields = [meta.get_field(name) for name in fields]
    # Now() is the database's clock (heartbeats: see task_acquire).
    params: list[Any] = [
        f.get_db_prep_save(value, db)
        for f, value in zip(task_fields, fields.values(), strict=True)
        if not isinstance(value, Now)
    ]
    params += [meta.pk.get_db_prep_value(task_id, db), epoch, TaskStatus.RUNNING]
    ctes = [
        f"fence AS (UPDATE {qn(meta.db_table)} SET "
        + ", ".join(
            f"{qn(f.column)} = " + ("STATEMENT_TIMESTAMP()" if isinstance(value, Now) else "%s")
            for f, value in zip(task_fields, fields.values(), strict=True)
        )
        + f" WHERE {qn(meta.pk.column)} = %s AND {qn('lease_epoch')} = %s AND "
        f"{qn('status')} = %s RETURNING {qn('cancel_requested')})"
    ]
    for row, update_fields in updates:
        opts = row._meta
        changed = [opts.get_field(name) for name in update_fields]
        ctes.append(
            f"w{len(ctes)} AS (UPDATE {qn(opts.db_table)} SET "
            + ", ".join(f"{qn(f.column)} = %s" for f in changed)
            + f" WHERE {qn(opts.pk.column)} = %s AND EXISTS (SELECT 1 FROM fence))"
        )
        params += [f.get_db_prep_save(f.pre_save(row, False), db) for f in changed]
        params.append(opts.pk.get_db_prep_value(row.pk, db))
    batches = [(model, batch, False) for model, batch in _by_model(inserts).items()]
    batches += [(model, batch, True) for model, batch in _by_model(inserts_if_absent).items()]
    returned: list[str] = []
    inserted: list[list[models.Model]] = []
    for model, batch, if_absent in batches:
        columns, target, nulls, returning = _insert_shape(model)
        values = []
        for row in batch:
            placeholders = []
            for f, null in zip(columns, nulls, strict=True):
                value = f.get_db_prep_save(f.pre_save(row, True), db)
                if value is None:
                    placeholders.append(null)
                else:
                    placeholders.append("%s")
                    params.append(value)
            values.append(f"({', '.join(placeholders)})")
        name = f"w{len(ctes)}"
        ctes.append(
            f"{name} AS (INSERT INTO {target} SELECT * FROM (VALUES {', '.join(values)})"
            " AS v WHERE EXISTS (SELECT 1 FROM fence)"
            + (" ON CONFLICT DO NOTHING" if if_absent else "")
            + (f" RETURNING {returning})" if returning else ")")
        )
        if returning:
            returned.append(f"(SELECT array_agg({returning}) FROM {name})")
            inserted.append(batch)
    select = ", ".join(
        ["EXISTS (SELECT 1 FROM fence)", "(SELECT bool_or(cancel_requested) FROM fence)", *returned]
    )
    return f"WITH {', '.join(ctes)} SELECT {select}", params, inserted


def _by_model(rows: Iterable[models.Model]) -> dict[type[models.Model], list[models.Model]]:
    batches: dict[type[models.Model], list[models.Model]] = {}
    for row in rows:
        batches.setdefault(type(row), []).append(row)
    return batches


def task_fence(*, task_id: Any, epoch: int, **fields: Any) -> None:
    """Inside a transaction: prove this worker still holds the lease (and lock the row),
    updating heartbeat and any given fields. Raises LeaseLost so the transaction rolls back."""
    updated = Task.objects.filter(id=task_id, lease_epoch=epoch, status=TaskStatus.RUNNING).update(
        heartbeat_at=Now(), updated_at=timezone.now(), **fields
    )
    if updated != 1:
        raise LeaseLost(f"task {task_id}: lease epoch {epoch} lost")


# --- API tokens -----------------------------------------------------------------------------


def api_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser, name: str = "") -> str:
    token = "hk_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(
        user=user, name=name, token_hash=api_token_hash(token), prefix=token[:10]
    )
    return token


# --- writes for the apps above ---------------------------------------------------------------
# Each app writes only its own models (docs/architecture.md, tests/test_architecture.py): what
# recovery, retention, the multi-agent coordinator, the worker's watchdog, the sweep and the
# API's authentication set on a core row goes through one of these. None writes a status or a
# field derived from it (the transition functions above do); each runs inside its caller's
# transaction, under the caller's locks and fences.


def event_insert(event: TaskEvent) -> TaskEvent:
    """Insert an event built by `event_build`, in the caller's transaction."""
    event.save(force_insert=True)
    return event


def _recovery_reset(*, task: Task, rollback: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {"cancel_requested": False, "retry_at": None}
    if rollback:
        fields["rollback_count"] = task.rollback_count + 1
    return {**fields, "updated_at": timezone.now()}


def task_fork_head(*, task: Task, checkpoint_id: Any, state: AgentState, rollback: bool) -> None:
    """A recovery forked the task: the new checkpoint `checkpoint_id`, holding `state`, is its
    head, its step and usage go back to the state's, a pending cancel and a retry time are
    dropped and a rollback (`rollback`) is counted. The recovery's transaction holds the task
    row; its status moves next, by task_transition."""
    Task.objects.filter(id=task.id).update(
        head_checkpoint_id=checkpoint_id,
        current_step=state.step_index,
        steps_used=state.budget.steps,
        tokens_used=state.budget.tokens,
        **_recovery_reset(task=task, rollback=rollback),
    )


def task_recovery_reset(*, task: Task, rollback: bool = False, step: int | None = None) -> None:
    """A graph task's recovery: drop a pending cancel and a retry time; a rollback is counted
    and goes back to `step`. The recovery's transaction holds the task row."""
    fields = {} if step is None else {"current_step": step}
    Task.objects.filter(id=task.id).update(
        **fields, **_recovery_reset(task=task, rollback=rollback)
    )


def task_review_outcome_count(*, task_id: Any, rejected: bool, edited: bool) -> None:
    """A person rejected one of the task's calls, or approved it with edited arguments
    (review.services, in the decision's transaction, the task row locked): count it on the
    task (`calls_rejected`, `calls_edited`)."""
    fields = {}
    if rejected:
        fields["calls_rejected"] = F("calls_rejected") + 1
    if edited:
        fields["calls_edited"] = F("calls_edited") + 1
    if fields:
        Task.objects.filter(id=task_id).update(**fields)


@dataclass(frozen=True)
class SpecRevision:
    """What a retry changed of a task's spec: {field: value in force} before and after
    (`budget.max_steps`, `model`), for the audit log and the retry's event."""

    before: dict[str, Any]
    after: dict[str, Any]


def _spec_parse(spec: dict[str, Any]) -> TaskSpec:
    try:
        return TaskSpec.model_validate(spec)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "spec"
        raise SpecError(field, error["msg"]) from None


def task_spec_revise(*, task: Task, changes: RetryChanges) -> SpecRevision | None:
    """Change what an operator may change of a stopped task's spec before it runs again (a
    retry): budget fields and an OpenAI-compatible model's name. Only the values that differ
    from those in force are written; None when none does. The new spec is checked as a new
    task's would be (TaskSpec, then task_spec_check as its creator): SpecError naming the field,
    and nothing written. The caller holds the task row (the recovery's transaction)."""
    old = task.spec or {}
    merged = copy.deepcopy(old)
    if changes.budget:
        merged["budget"] = {**(merged.get("budget") or {}), **changes.budget}
    before_model = spec_model_name(old)
    if changes.model is not None:
        if before_model is None:
            kind = (old.get("model") or {}).get("kind") or "a graph"
            raise SpecError(
                "model", f"only an OpenAI-compatible model's name can change; this task runs {kind}"
            )
        merged["model"] = {**merged["model"], "model": changes.model}
    # Parsed as given, then compared by the values in force: a value equal to the one in force
    # (a timeout harness.yaml sets) changes nothing and is not written into the spec.
    wanted = budget_in_force(_spec_parse(merged).model_dump(mode="json"))
    in_force = budget_in_force(old)
    revised = copy.deepcopy(old)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key in changes.budget:
        if wanted[key] != in_force[key]:
            revised.setdefault("budget", {})[key] = wanted[key]
            before[f"budget.{key}"], after[f"budget.{key}"] = in_force[key], wanted[key]
    if changes.model is not None and changes.model != before_model:
        revised["model"] = merged["model"]
        before["model"], after["model"] = before_model, changes.model
    if not after:
        return None
    spec = _spec_parse(revised)
    task_spec_check(spec, user=task.created_by)
    Task.objects.filter(id=task.id).update(
        spec=spec.model_dump(mode="json", exclude_none=True), updated_at=timezone.now()
    )
    return SpecRevision(before=before, after=after)


def task_cancel_request(*, task_id: Any) -> None:
    """Ask the worker running the task to stop at its next boundary (the caller holds the row
    and records the event)."""
    Task.objects.filter(id=task_id).update(cancel_requested=True)


def task_heartbeat(*, task_id: Any, epoch: int) -> bool:
    """The running worker's heartbeat (database time), fenced by its lease epoch: False,
    writing nothing, once the lease is lost."""
    return (
        Task.objects.filter(id=task_id, lease_epoch=epoch, status=TaskStatus.RUNNING).update(
            heartbeat_at=Now()
        )
        == 1
    )


def tasks_hold(*, task_ids: Iterable[Any], round_id: Any) -> None:
    """Hold the tasks for a global checkpoint round: no worker acquires a held task."""
    Task.objects.filter(id__in=list(task_ids)).update(hold_round_id=round_id)


def tasks_release(*, round_id: Any) -> None:
    """Clear the hold of the round's tasks."""
    Task.objects.filter(hold_round_id=round_id).update(hold_round_id=None)


def sweep_run_record(
    *, name: str, started_at: datetime, duration_ms: float, counts: dict[str, Any]
) -> None:
    """Overwrite the sweeper's row with this run (one UPDATE; the row is created on the first
    run)."""
    values = {
        "started_at": started_at,
        "finished_at": timezone.now(),
        "duration_ms": duration_ms,
        "counts": counts,
        "host": socket.gethostname(),
    }
    if not SweepRun.objects.filter(name=name).update(runs=F("runs") + 1, **values):
        SweepRun.objects.get_or_create(name=name, defaults={**values, "runs": 1})


def sweep_run_ensure(*, name: str, now: datetime) -> None:
    """Create the job's row if it has none yet (it is then locked by `sweep_run_lock`)."""
    SweepRun.objects.get_or_create(name=name, defaults={"started_at": now, "finished_at": now})


def sweep_run_lock(*, name: str) -> SweepRun | None:
    """Inside a transaction: the job's row, locked; None while another sweeper holds it."""
    return SweepRun.objects.select_for_update(skip_locked=True).filter(name=name).first()


def sweep_run_save(
    *, run: SweepRun, started_at: datetime, duration_ms: float, counts: dict[str, Any]
) -> None:
    """Record a run of the job on its locked row (`sweep_run_lock`)."""
    run.counts = counts
    run.started_at = started_at
    run.finished_at = timezone.now()
    run.duration_ms = duration_ms
    run.runs += 1
    run.host = socket.gethostname()
    run.save(update_fields=["counts", "started_at", "finished_at", "duration_ms", "runs", "host"])


def api_token_used(*, token: ApiToken) -> None:
    """Remember when the token was last used, at most once a minute (one UPDATE then)."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
