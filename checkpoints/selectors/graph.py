"""The LangGraph checkpoints of a graph task (checkpoints.langgraph), and the tool calls its
graph ran after one of them."""

from __future__ import annotations

from typing import Any

from checkpoints.models import GraphCheckpoint
from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.spec import spec_agent_kind


def graph_checkpoints(*, task: Task) -> list[dict[str, Any]]:
    """The task's LangGraph checkpoints (root namespace), newest first, with LangGraph's
    metadata. `superseded`: not on the path from the newest checkpoint back to the first,
    i.e. left behind by a rollback's fork."""
    rows = list(
        GraphCheckpoint.objects.filter(thread_id=str(task.id), checkpoint_ns="")
        .order_by("-checkpoint_id")
        .values("checkpoint_id", "parent_checkpoint_id", "metadata", "versions")
    )
    parents = {row["checkpoint_id"]: row["parent_checkpoint_id"] for row in rows}
    on_path: set[str] = set()
    cursor = rows[0]["checkpoint_id"] if rows else ""
    while cursor and cursor not in on_path:
        on_path.add(cursor)
        cursor = parents.get(cursor, "")
    return [
        {
            "checkpoint_id": row["checkpoint_id"],
            "parent_checkpoint_id": row["parent_checkpoint_id"] or None,
            "step": row["metadata"].get("step"),
            "source": row["metadata"].get("source", ""),
            "parents": row["metadata"].get("parents") or {},
            "run_id": row["metadata"].get("run_id", ""),
            "head": index == 0,
            "superseded": row["checkpoint_id"] not in on_path,
            "versions": row["versions"],
        }
        for index, row in enumerate(rows)
    ]


def graph_task(task: Task) -> bool:
    """A LangGraph task (its state is its LangGraph thread). Other agent kinds (Pydantic AI)
    keep their state in the harness's own checkpoints."""
    return spec_agent_kind(task.spec) == "langgraph"


# A preview lists this many of the calls it leaves in the world (`more` counts the rest).
CALLS_LISTED = 200


def graph_calls_after(*, task: Task, checkpoint_id: str) -> dict[str, Any]:
    """The tool calls the task's graph ran after `checkpoint_id` was written, oldest first,
    on every branch since (a rollback undoes none of what they did outside the workspace; a
    graph's tools declare no compensation): {"calls": [{tool, tool_call_id, status,
    arguments, step_index}], "more": n}. Read from the timeline: each call's result
    (`graph_tool_result`) after the checkpoint's `graph_step`, with the arguments its model
    asked for (`graph_tool_call`). A checkpoint with no `graph_step` event (written before
    the timeline recorded them) counts every call."""
    after = (
        TaskEvent.objects.filter(
            task=task, type=EventType.GRAPH_STEP, payload__checkpoint_id=checkpoint_id
        )
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    ) or 0
    results = TaskEvent.objects.filter(
        task=task, type=EventType.GRAPH_TOOL_RESULT, id__gt=after
    ).order_by("id")
    listed = list(results.values("payload", "step_index")[:CALLS_LISTED])
    # Counted only when the listing is full: otherwise it holds them all.
    more = results.count() - CALLS_LISTED if len(listed) == CALLS_LISTED else 0
    ids = [r["payload"].get("tool_call_id") for r in listed if r["payload"].get("tool_call_id")]
    asked = {
        e["payload"].get("tool_call_id"): e["payload"].get("arguments")
        for e in TaskEvent.objects.filter(
            task=task, type=EventType.GRAPH_TOOL_CALL, payload__tool_call_id__in=ids
        )
        .order_by("id")
        .values("payload")
    }
    calls = [
        {
            "tool": r["payload"].get("tool", ""),
            "tool_call_id": r["payload"].get("tool_call_id", ""),
            "status": r["payload"].get("status", ""),
            "arguments": asked.get(r["payload"].get("tool_call_id")),
            "step_index": r["step_index"],
        }
        for r in listed
    ]
    return {"calls": calls, "more": more}
