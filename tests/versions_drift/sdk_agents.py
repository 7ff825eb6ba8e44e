"""SDK agents a test redeploys (issue #43): a module `drift_agents_<random>` on a private path
defining a Pydantic AI agent (`pai`, a FunctionModel) and an OpenAI Agents SDK agent (`oa`,
the example's ScriptedTurns), each calling `file_ticket(title="API down")` once, a tool that
asks for approval; rewritten with other instructions or another argument list between worker
generations, as a deploy would. Each run of the tool appends its arguments to runs.jsonl in
the workspace, so a test counts executions."""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

AGENTS = '''
import json
from pathlib import Path
from typing import Any

from agents import Agent as OAAgent, RunContextWrapper, function_tool
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from agent.pydantic_ai_runner import TaskDeps
from examples.openai_agents_agent import ScriptedTurns


def _record(workspace, args):
    with open(Path(workspace) / "runs.jsonl", "a") as fh:
        fh.write(json.dumps(args) + "\\n")


def _model(messages, info):
    if not any(isinstance(m, ModelResponse) for m in messages):
        return ModelResponse(parts=[ToolCallPart("file_ticket", {{"title": "API down"}})])
    return ModelResponse(parts=[TextPart("filed")])


pai = Agent(FunctionModel(_model), deps_type=TaskDeps, instructions={instructions!r})


@pai.tool(requires_approval=True)
def file_ticket(ctx: RunContext[TaskDeps], title: str{params}) -> str:
    """File a ticket."""
    args = {{k: v for k, v in locals().items() if k != "ctx"}}
    _record(ctx.deps.workspace, args)
    return "filed " + title


@function_tool(name_override="file_ticket", needs_approval=True)
def oa_file_ticket(context: RunContextWrapper[Any], title: str{params}) -> str:
    """File a ticket."""
    args = {{k: v for k, v in locals().items() if k != "context"}}
    _record(context.context["harness_workspace"], args)
    return "filed " + title


oa = OAAgent(
    name="ticketer",
    instructions={instructions!r},
    tools=[oa_file_ticket],
    model=ScriptedTurns([[("file_ticket", {{"title": "API down"}})], "filed"]),
)
'''

INSTRUCTIONS = "File the ticket the user describes."


class AgentModule:
    def __init__(self, root: Path) -> None:
        self.name = f"drift_agents_{uuid.uuid4().hex[:8]}"
        self.root = root
        self.path = root / f"{self.name}.py"

    def write(self, *, instructions: str = INSTRUCTIONS, params: str = "") -> None:
        """`params`: more parameters of file_ticket (", priority: int")."""
        self.path.write_text(AGENTS.format(instructions=instructions, params=params))
        # A rewrite within the same second and of the same size would pass the compiled
        # module's check (wherever PYTHONPYCACHEPREFIX keeps it): the next import compiles.
        Path(importlib.util.cache_from_source(str(self.path))).unlink(missing_ok=True)

    def config(self, base: str) -> str:
        """harness.yaml: `base` with both agents registered as `ticketer`."""
        return (
            base
            + f'pydantic_ai_agents:\n  ticketer: "{self.name}:pai"\n'
            + f'openai_agents:\n  ticketer: "{self.name}:oa"\n'
        )


@pytest.fixture
def agent_module(tmp_path: Path, worker_pool) -> Iterator[AgentModule]:
    """The module, first written; worker processes import it from its private path."""
    root = tmp_path / "agentmods"
    root.mkdir()
    module = AgentModule(root)
    module.write()
    worker_pool.env["PYTHONPATH"] = os.pathsep.join([str(root), worker_pool.env["PYTHONPATH"]])
    sys.path.insert(0, str(root))
    try:
        yield module
    finally:
        sys.path.remove(str(root))


def sdk_spec(kind: str) -> dict:
    return {
        "title": f"{kind} ticket",
        "goal": "file the ticket: API down",
        "agent": {"kind": kind, "name": "ticketer", "input": "API down"},
    }
