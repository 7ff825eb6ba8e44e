"""A LangGraph task's recording (issue #47): its ToolNode calls are not on the ledger, so each
call's outcome is read from the task's events (`graph_calls`, on `graph_answered`), the
answers it was resumed with from its `graph_resumed` events (`graph_resumes`), its workspace
from the snapshots taken with its LangGraph checkpoints (`graph_snapshots`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from checkpoints.models import GraphWorkspace
from review.models import ReviewRequest
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCallStatus


@dataclass(frozen=True)
class GraphCallOutcome:
    """A graph's ToolNode call as its events left it (read like a ledger row's): the
    arguments it ran with (as a review may have edited them) and its answer."""

    status: str
    result: dict[str, Any]
    error_class: str
    error_message: str
    arguments: Any = None
    duration_ms: float | None = None


def graph_answered(task_id: Any) -> list[tuple[dict[str, Any], Any]]:
    """Each `graph_tool_result` of a graph task, in event order, with the arguments its call
    ran with: those of the last `graph_tool_call` of its tool call id before it, or of a
    breakpoint's edit (which rewrote the call before it ran)."""
    ran: dict[Any, Any] = {}
    answered = []
    for type_, payload in (
        TaskEvent.objects.filter(
            task_id=task_id,
            type__in=(
                EventType.GRAPH_TOOL_CALL,
                EventType.GRAPH_TOOL_RESULT,
                EventType.GRAPH_RESUMED,
            ),
        )
        .order_by("id")
        .values_list("type", "payload")
    ):
        if type_ == EventType.GRAPH_TOOL_CALL:
            ran[payload.get("tool_call_id")] = payload.get("arguments")
        elif type_ == EventType.GRAPH_RESUMED:
            ran.update(payload.get("edits") or {})
        else:
            answered.append((payload, ran.get(payload.get("tool_call_id"))))
    return answered


def graph_calls(
    task_id: Any, decisions: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, GraphCallOutcome], list[str]]:
    """The decisions with a call id on each call (`<turn>:<tool call id>`), {call id: its
    outcome}, and the nodes that answered them. A call's outcome is the first answer of its
    tool call id not taken yet, in event order (a scripted model may reuse an id from one
    turn to the next), with the arguments it ran with (`graph_answered`)."""
    answered = graph_answered(task_id)
    waiting: dict[Any, deque[tuple[dict[str, Any], Any]]] = {}
    for result, arguments in answered:
        waiting.setdefault(result.get("tool_call_id"), deque()).append((result, arguments))
    rows: dict[str, GraphCallOutcome] = {}
    named = []
    for decision in decisions:
        calls = []
        for call in decision.get("calls") or []:
            key = call.get("tool_call_id")
            call_id = f"{decision['turn']}:{key or ''}"
            calls.append({**call, "call_id": call_id})
            if not waiting.get(key):
                continue
            result, arguments = waiting[key].popleft()
            answer = result.get("content_full") or result.get("content") or ""
            failed = result.get("status") == "error"
            rows[call_id] = GraphCallOutcome(
                status=ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
                result={"observation": answer} if failed else {"output": answer},
                error_class="tool_error" if failed else "",
                error_message=answer if failed else "",
                arguments=arguments,
            )
        named.append({**decision, "calls": calls})
    nodes = {str(result["node"]) for result, _args in answered if result.get("node")}
    return named, rows, sorted(nodes)


def graph_resumes(task_id: Any) -> list[dict[str, Any]]:
    """How the graph was resumed after each of its pauses for review, in order: the answers
    to its interrupts (in the order it asked them), or what a breakpoint's reviews decided."""
    resumes = []
    for payload in (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.GRAPH_RESUMED)
        .order_by("id")
        .values_list("payload", flat=True)
    ):
        if payload.get("breakpoint"):
            names = ("approved", "edited", "rejected", "answered")
            decided = ("edits", "rejections", "responses")
            resumes.append(
                {
                    "breakpoint": True,
                    **{k: payload.get(k) or [] for k in names},
                    **{k: payload.get(k) or {} for k in decided},
                }
            )
        else:
            # By interrupt id as the run resumed it; in order as a replay resumed it.
            answers = payload.get("answers") or {}
            resumes.append(
                {"answers": list(answers.values() if isinstance(answers, dict) else answers)}
            )
    return resumes


def graph_snapshots(task: Task) -> Any:
    """A graph task's workspace snapshots, one per LangGraph checkpoint, oldest first."""
    return (
        GraphWorkspace.objects.filter(task=task)
        .order_by("created_at", "id")
        .values_list("snapshot", flat=True)
    )


# A breakpoint's calls named in its graph_resumed event, and what was decided of them, whole.
_DECIDED = (("edited", "edits"), ("rejected", "rejections"), ("answered", "responses"))


def graph_unreplayable(task: Task) -> str:
    """Why a graph task's pauses for review cannot be replayed ("" when they can): a replay
    resumes each with the recorded answers, so each must have been answered, and a
    breakpoint's edits, rejections and answers are not recorded whole."""
    paused_at = {
        (interrupt or {}).get("checkpoint_id")
        for interrupt in ReviewRequest.objects.filter(task=task, kind="langgraph").values_list(
            "interrupt", flat=True
        )
    }
    paused_at.discard(None)
    resumes = graph_resumes(task.id)
    if len(paused_at) > len(resumes):
        return (
            "This LangGraph task's run ended at a review (rejected, or the task stopped while "
            "it waited): a replay could not answer it. A graph task whose reviews were all "
            "answered can be saved."
        )
    if any(
        len(r.get(names) or []) > len(r.get(decided) or {})
        for r in resumes
        for names, decided in (
            ("edited", "edits"),
            ("rejected", "rejections"),
            ("answered", "responses"),
        )
    ):
        return (
            "This LangGraph task's breakpoint review edited, rejected or answered a call before "
            "the harness recorded such decisions whole, so a replay cannot give them back."
        )
    return ""
