"""`/api/v1/tasks/{id}/…` of a graph task: its LangGraph checkpoints and a rollback's preview."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ninja import Router, Schema, Status

from checkpoints import recovery, selectors
from checkpoints.api.calls import run, task_get
from harness_base.http import AuthedRequest
from tasks.selectors import access_task

router = Router()


class GraphCheckpointOut(Schema):
    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str
    parents: dict[str, str]
    run_id: str
    head: bool
    superseded: bool
    # The code the graph checkpoint was made with (docs/deploying.md).
    versions: dict[str, Any]


class GraphPreviewOut(Schema):
    task_id: UUID
    task_status: str
    checkpoint_id: str
    step: int | None
    source: str
    allowed: bool
    blocked: str
    values: dict[str, Any]
    superseded: list[dict[str, Any]]
    # {"snapshot": bool, "files", "files_restored", "files_deleted", "links_deleted",
    #  "folders_deleted", "modes_restored"}
    workspace: dict[str, Any] = {}
    # The tool calls the graph ran since this checkpoint, on every branch: a rollback leaves
    # what they did outside the workspace. {"calls": [{"tool", "tool_call_id", "status",
    # "arguments", "step_index"}], "more": n (not listed)}
    calls_not_undone: dict[str, Any] = {}


@task_get(router, "graph-checkpoints", "graph_checkpoints", list[GraphCheckpointOut])
def graph_checkpoints(request: AuthedRequest, task_id: str) -> Status[Any]:
    """A graph task's LangGraph checkpoints, newest first, with LangGraph's metadata (source,
    step, parents); `superseded` ones were left behind by a rollback. POST …/rollback with one
    of these ids as `checkpoint_id` forks the graph from it."""
    task = access_task(request.user, task_id)
    return Status(200, selectors.graph_checkpoints(task=task))


@task_get(router, "graph-rollback/preview", "graph_rollback_preview", GraphPreviewOut)
def graph_rollback_preview(
    request: AuthedRequest, task_id: str, checkpoint_id: UUID
) -> Status[Any]:
    """What rolling a graph task back to this LangGraph checkpoint would do."""
    task = access_task(request.user, task_id)
    return run(recovery.graph_rollback_preview, task=task, checkpoint_id=str(checkpoint_id))
