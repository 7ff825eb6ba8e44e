"""What a run gives an agent's tools (TaskDeps: an agent's code imports it from
agent.pydantic_ai_runner)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TaskDeps:
    """What an agent's tools get as `ctx.deps` when its `deps_type` is TaskDeps: the task's
    workspace (tools write there, relative paths only: tasks.paths.file_write) and id."""

    workspace: Path
    task_id: str
