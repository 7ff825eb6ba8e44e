"""A task's recording: what a case keeps (decisions, calls, outcomes, final files), and the
files a replay starts from."""

from __future__ import annotations

from typing import Any

from cases.selectors.graph import (
    GraphCallOutcome,
    graph_calls,
    graph_resumes,
    graph_snapshots,
    graph_unreplayable,
)
from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.files import FilesUnreadable, workspace_at
from checkpoints.models import Checkpoint
from checkpoints.snapshots import snapshot_manifest
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.selectors import model_decisions_by_turn
from tasks.spec import spec_agent_kind

# What a recorded failure tells the model, as the ledger keeps it (agent.runtime.calls).
_OBSERVATION_CHARS = 4000


class CaseUnsavable(Exception):
    """A task that cannot become a case (still running, nothing recorded, unreadable files)."""


def case_unsavable_reason(*, task: Task) -> str:
    """Why the kind of run `task` made cannot become a case ("" when it can), before its
    recording is read: the task page says so instead of offering the form."""
    if spec_agent_kind(task.spec) == "langgraph":
        return graph_unreplayable(task)
    return ""


def _decisions(task_id: Any) -> list[dict[str, Any]]:
    """The model decisions the task went on with, in turn order."""
    turns = model_decisions_by_turn(task_id=task_id)
    return [turns[t] for t in sorted(turns)]


def ran(proposed: dict[str, Any], rows: dict[str, Any]) -> dict[str, Any]:
    """A proposed call with the arguments it ran with: a graph's, as edited in its review
    (the ledger's own rows keep the call as proposed)."""
    row = rows.get(proposed.get("call_id", ""))
    if isinstance(row, GraphCallOutcome) and row.arguments is not None:
        return {**proposed, "args": row.arguments}
    return proposed


def _call_entry(
    turn: int, proposed: dict[str, Any], row: ToolCall | GraphCallOutcome | None, reviewed: bool
):
    args = proposed.get("args") or {}
    entry: dict[str, Any] = {
        "turn": turn,
        "call_id": proposed.get("call_id", ""),
        "tool": proposed.get("tool", ""),
        "args": args,
        "args_hash": canonical_hash(args),
        "status": row.status if row is not None else "not_run",
        "error_class": row.error_class if row is not None else "",
        "error_message": (row.error_message if row is not None else "")[:2000],
        "reviewed": reviewed,
        "duration_ms": row.duration_ms if row is not None else None,
    }
    if row is not None and row.status == ToolCallStatus.SUCCEEDED:
        entry["result"] = row.result
    elif row is not None and isinstance(row.result, dict):
        entry["observation"] = str(row.result.get("observation") or "")[:_OBSERVATION_CHARS]
    return entry


def _step(decision: dict[str, Any], step_calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "turn": decision["turn"],
        "text": (decision.get("text") or "")[:2000],
        "final": decision.get("final"),
        "calls": [
            {k: c[k] for k in ("tool", "args", "args_hash", "status", "error_class")}
            for c in step_calls
        ],
        "duration_ms": round(
            (decision.get("duration_ms") or 0) + sum(c["duration_ms"] or 0 for c in step_calls),
            3,
        ),
        "cost_usd": decision.get("cost_usd") or 0,
        "tokens": (decision.get("prompt_tokens") or 0) + (decision.get("completion_tokens") or 0),
    }


def ledger_step(*, task: Task, decision: dict[str, Any]) -> dict[str, Any]:
    """Another task's model decision (a fork's original's, whose calls were pending when it
    was forked) as `task` ran its calls: each with the arguments and outcome `task`'s ledger
    holds under the same call id (the arguments as perhaps edited in the fork)."""
    ids = [c.get("call_id", "") for c in decision.get("calls") or []]
    rows = {row.call_id: row for row in ToolCall.objects.filter(task_id=task.id, call_id__in=ids)}
    step_calls = []
    for proposed in decision.get("calls") or []:
        row = rows.get(proposed.get("call_id", ""))
        ran = {**proposed, "args": row.arguments} if row is not None else proposed
        step_calls.append(_call_entry(decision["turn"], ran, row, False))
    step = _step(decision, step_calls)
    # The model's time and cost of the decision were the original's.
    step["duration_ms"] = round(sum(c["duration_ms"] or 0 for c in step_calls), 3)
    step["cost_usd"], step["tokens"] = 0, 0
    return step


def task_recording(*, task: Task) -> dict[str, Any]:
    """What the task did, step by step: each model decision, each call with its outcome as
    the ledger holds it, and the final answer, usage and final files. The same shape for a
    recorded task and for a replay, so the two compare field by field."""
    decisions = _decisions(task.id)
    graph: dict[str, Any] = {}
    rows: dict[str, ToolCall | GraphCallOutcome]
    if spec_agent_kind(task.spec) == "langgraph":
        decisions, outcomes, tool_nodes = graph_calls(task.id, decisions)
        rows = dict(outcomes)
        graph = {"graph_tool_nodes": tool_nodes, "graph_resumes": graph_resumes(task.id)}
    else:
        rows = {row.call_id: row for row in ToolCall.objects.filter(task_id=task.id)}
    reviewed = set(
        ReviewRequest.objects.filter(tool_call__task_id=task.id).values_list(
            "tool_call__call_id", flat=True
        )
    )
    calls: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    for d in decisions:
        step_calls = [
            _call_entry(d["turn"], ran(c, rows), rows.get(c["call_id"]), c["call_id"] in reviewed)
            for c in d.get("calls") or []
        ]
        calls += step_calls
        steps.append(_step(d, step_calls))
    return {
        "decisions": decisions,
        "calls": calls,
        "steps": steps,
        "status": task.status,
        "final": task.result,
        "steps_used": task.steps_used,
        "cost_usd": float(task.cost_usd),
        "seconds": round(task.seconds_used, 3),
        "files": _final_files(task),
        **graph,
    }


def _final_files(task: Task) -> dict[str, str]:
    """{path: sha256 of the content} at the task's head checkpoint (a graph's: the snapshot
    taken with its last LangGraph checkpoint)."""
    if spec_agent_kind(task.spec) == "langgraph":
        snapshot = graph_snapshots(task).last()
        return {p: e.hash for p, e in snapshot_manifest(snapshot).items()} if snapshot else {}
    try:
        at = workspace_at(task=task)
    except FilesUnreadable:
        return {}
    return {path: entry.hash for path, entry in at.manifest.items()}


def first_checkpoint_files(*, task: Task) -> dict[str, str]:
    """{path: text} of the task's workspace at its first checkpoint (where a replay starts; a
    graph's: the snapshot taken with its first LangGraph checkpoint)."""
    if spec_agent_kind(task.spec) == "langgraph":
        snapshot = graph_snapshots(task).first()
        if snapshot is None:
            raise CaseUnsavable("the task has no checkpoint")
        manifest = snapshot_manifest(snapshot)
    else:
        first = Checkpoint.objects.filter(task=task).order_by("seq").first()
        if first is None:
            raise CaseUnsavable("the task has no checkpoint")
        try:
            manifest = workspace_at(task=task, checkpoint_id=first.id).manifest
        except FilesUnreadable as exc:
            raise CaseUnsavable(str(exc)) from None
    files: dict[str, str] = {}
    store = blob_store()
    for path, entry in sorted(manifest.items()):
        try:
            body = store.get(entry.hash)
        except (BlobMissing, BlobCorrupted) as exc:
            raise CaseUnsavable(f"{path}: {exc}") from None
        try:
            files[path] = body.decode("utf-8")
        except UnicodeDecodeError:
            raise CaseUnsavable(
                f"{path}: binary files in the first checkpoint's workspace cannot be saved "
                "in a case yet"
            ) from None
    return files
