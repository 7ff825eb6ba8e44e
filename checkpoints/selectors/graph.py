"""The LangGraph checkpoints of a graph task (checkpoints.langgraph)."""

from __future__ import annotations

from typing import Any

from checkpoints.models import GraphCheckpoint
from tasks.models import Task
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
