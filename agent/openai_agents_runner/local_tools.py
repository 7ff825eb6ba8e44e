"""Tools of an OpenAI Agents SDK agent that the SDK runs in the worker's own process on what
the model asks: a local shell (`LocalShellTool`, a `ShellTool` with a local environment), a
computer (`ComputerTool`), a patch editor (`ApplyPatchTool`), a free-form custom tool
(`CustomTool`). None passes through the harness's wrapper, so none would run in the task's
sandbox or leave a ledger row, and a rollback could not see it (THREATS.md: a model's call is
hostile input). An agent that carries one (itself, or any agent it can hand off to) is refused
before the model is asked: the task fails `local_tool_refused`, naming the tool and the agent.
The same operation given to the agent as a function tool runs through the gate and the ledger.
Hosted tools (web search, file search, code interpreter, a hosted container shell) run at the
provider and are gated and recorded (agent.openai_agents_runner.hosted)."""

from __future__ import annotations

from typing import Any

from agents import ApplyPatchTool, ComputerTool, CustomTool, LocalShellTool, ShellTool

from agent.runtime.run import StopRun

REFUSED = "local_tool_refused"
_LOCAL = (LocalShellTool, ComputerTool, ApplyPatchTool, CustomTool)


def runs_locally(tool: Any) -> bool:
    """Whether the SDK runs `tool` in this process (a shell's environment: local unless it
    names a hosted container)."""
    if isinstance(tool, _LOCAL):
        return True
    if isinstance(tool, ShellTool):
        environment: dict[str, Any] = dict(tool.environment or {})
        return str(environment.get("type") or "local") == "local"
    return False


def local_tools_refuse(tools: list[Any], *, agent_name: str) -> None:
    """StopRun `local_tool_refused` for the first of `tools` the SDK would run locally."""
    for tool in tools:
        if runs_locally(tool):
            kind = type(tool).__name__
            name = getattr(tool, "name", None) or kind
            raise StopRun(
                REFUSED,
                f"tool {name!r} ({kind}) of agent {agent_name!r} was refused: the SDK runs it "
                "in the worker's own process, outside the task's sandbox, review gate and "
                "ledger; give the agent a function tool for the operation instead",
            )
