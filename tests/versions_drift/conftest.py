"""Drift fixtures: the durable fleet (real rqworkers on this test's harness.yaml) and a tool
module a test rewrites between worker generations, as a deploy would."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tasks.tools.registry import registry
from tests.conftest import wait_for
from tests.durable.conftest import (  # noqa: F401  (fixtures)
    Fleet,
    durable_settings,
    fleet,
    queue,
    wait_status,
)

# A user tool as a team would write it: each run appends its arguments to runs.jsonl in the
# workspace, so a test counts executions.
TOOL_V1 = '''
import json
from pydantic import BaseModel, ConfigDict
from tasks.tools import ToolContext, tool

class TicketArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
{extra}

@tool(risk="external", side_effect=True, idempotent=True)
def {name}(ctx: ToolContext, args: TicketArgs) -> dict:
    """File a ticket."""
    with open(ctx.workspace / "runs.jsonl", "a") as fh:
        fh.write(json.dumps(args.model_dump()) + "\\n")
    return {{"filed": args.title}}
'''


class ToolModule:
    """A module `drift_tools_<random>` on a private path, defining one tool, rewritten at
    will; worker processes started after a rewrite import the new text."""

    def __init__(self, root: Path) -> None:
        self.name = f"drift_tools_{uuid.uuid4().hex[:8]}"
        self.tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
        self.root = root
        self.path = root / f"{self.name}.py"

    def write(self, extra: str = "") -> None:
        self.path.write_text(TOOL_V1.format(extra=extra, name=self.tool))
        # A rewrite within the same second and of the same size would pass the compiled
        # module's check (wherever PYTHONPYCACHEPREFIX keeps it): the next import compiles.
        Path(importlib.util.cache_from_source(str(self.path))).unlink(missing_ok=True)

    def deploy_here(self) -> None:
        """This process (the web side) runs the rewritten module too, as after a deploy."""
        registry._tools.pop(self.tool, None)
        importlib.reload(importlib.import_module(self.name))


@pytest.fixture
def tool_module(tmp_path: Path, settings, worker_pool) -> Iterator[ToolModule]:
    root = tmp_path / "toolmods"
    root.mkdir()
    module = ToolModule(root)
    module.write()
    worker_pool.env["HARNESS_TOOL_MODULES"] = module.name
    worker_pool.env["PYTHONPATH"] = os.pathsep.join([str(root), worker_pool.env["PYTHONPATH"]])
    sys.path.insert(0, str(root))
    # This process (the web side, creating the task) knows the tool as first written.
    settings.HARNESS_TOOL_MODULES = [module.name]
    try:
        yield module
    finally:
        sys.path.remove(str(root))


DRIFT_CONFIG = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
review_rules:
  - {name: external, risk: external, action: review}
migrations:
  add-priority: tests.versions_drift.migrations:add_priority
  broken: tests.versions_drift.migrations:broken
"""


@pytest.fixture
def harness_config_text() -> str:
    return DRIFT_CONFIG


def runs(task: Task) -> list[dict]:
    """What the test tool or agent ran: the arguments of each execution, in order."""
    path = task.workspace_path / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pending(task: Task, kind: str) -> ReviewRequest:
    return wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending", kind=kind).first(),
        90,
        message=f"a pending {kind} review",
    )


def restart(workers: Fleet, change: Callable[[], None]) -> None:
    """A deploy: stop every worker, change the code, start new workers."""
    workers.pool.stop()
    workers.pool.processes.clear()
    change()
    workers.worker(1)
