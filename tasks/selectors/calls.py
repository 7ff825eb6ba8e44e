"""A task's tool calls: the ledger in order, a call's page in the calls tab, its attempts and
their output parts, the calls the timeline draws, and a tool as the task knows it (registered,
or an MCP server's as listed when the task started)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast, Left

from tasks.errors import NotFound
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCall, ToolCallStatus, ToolOutput
from tasks.selectors.event_fields import as_text
from tasks.tools.mcp import mcp_server_of, recorded_tool
from tasks.tools.registry import ToolSpec, UnknownTool, registry


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


# What an SDK's attempt settles a call to (a call run again is `running` with its last
# attempt's `duration_ms` still set: that attempt is not the one running).
_SETTLED = frozenset({ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT})


def attempts_logged(
    *,
    log: Any,
    attempts: int,
    status: str,
    started: Any,
    settled: Any,
    duration_ms: float | None,
    error_class: str = "",
    error_message: str = "",
) -> list[dict[str, Any]]:
    """A call's attempt log (its entries as agent.runtime.call_execute writes them). A call of
    an SDK agent (OpenAI Agents SDK, Pydantic AI) keeps its last attempt on its row instead:
    its start, when it settled, its status and error, and `duration_ms`, which only a finished
    attempt sets. With no log, that attempt, once settled, as the entry the pages read.
    `started` and `settled`: datetimes, or ISO text as the timeline's query returns them."""
    entries = [entry for entry in log or [] if isinstance(entry, dict)]
    if entries or duration_ms is None or not started or status not in _SETTLED:
        return entries
    return [
        {
            "n": max(attempts, 1),
            "started_at": _iso(started),
            "finished_at": _iso(settled or started),
            "status": status,
            "error_class": error_class,
            "error_message": (error_message or "")[:500],
        }
    ]


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def call_attempts(*, call: ToolCall, outputs: dict[int, list[ToolOutput]]) -> list[dict[str, Any]]:
    """Each attempt of a call as the pages show it: its attempt-log entry (status, times, the
    error, the facts of its result) with its output parts. The running attempt, and one whose
    worker was lost (only what was last seen of it), have outputs and no log entry yet."""
    log = attempts_logged(
        log=call.attempt_log,
        attempts=call.attempts,
        status=call.status,
        started=call.started_at,
        settled=call.finished_at,
        duration_ms=call.duration_ms,
        error_class=call.error_class,
        error_message=call.error_message,
    )
    logged = {entry.get("n"): entry for entry in log}
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


# The characters of a call's arguments (as JSON text) the timeline's hover summarises.
ARGUMENTS_TEXT_CHARS = 400


def task_tool_call_attempts(*, task: Task, from_step: int | None = None) -> list[dict[str, Any]]:
    """The task's tool calls (oldest first) with their attempt logs (attempts_logged: an SDK
    agent's call, its attempt on its row) and the start of their arguments as JSON text
    (`arguments_text`, cut in SQL: a call that wrote a large file costs the page a few
    hundred characters), without results; `started` is the current attempt's
    start as ISO text, `number` the call's place among the task's calls (1 for its first).

    With `from_step`: the calls of the steps from `from_step` on, and the earlier ones that did
    not succeed at their first attempt (what a collapsed timeline still shows)."""
    calls = ToolCall.objects.filter(task=task)
    if from_step is not None:
        calls = calls.filter(
            Q(step_index__gte=from_step) | ~Q(status=ToolCallStatus.SUCCEEDED) | Q(attempts__gt=1)
        )
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in calls.order_by("id").values(
            "id",
            "call_id",
            "tool",
            "status",
            "step_index",
            "attempts",
            "attempt_log",
            "duration_ms",
            "error_class",
            started=as_text("started_at"),
            settled=as_text("finished_at"),
            proposed=as_text("created_at"),
            arguments_text=Left(Cast("arguments", output_field=TextField()), ARGUMENTS_TEXT_CHARS),
            error_text=Left("error_message", 500),
        )
    ]
    for row in rows:
        row["attempt_log"] = attempts_logged(
            log=row["attempt_log"],
            attempts=row["attempts"],
            status=row["status"],
            started=row["started"],
            settled=row["settled"],
            duration_ms=row.pop("duration_ms"),
            error_class=row.pop("error_class"),
            error_message=row.pop("error_text") or "",
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
