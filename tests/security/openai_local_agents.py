"""OpenAI Agents SDK agents carrying tools the SDK runs in the worker's own process
(tests/security/test_openai_agent_local_tools.py), on a scripted model. `shell` asks for a
local shell command at once; the executor only records that it ran (EXECUTED)."""

from __future__ import annotations

from typing import Any

from agents import Agent, ApplyPatchTool, ComputerTool, CustomTool, LocalShellTool, ShellTool
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter

from examples.openai_agents_agent import ScriptedTurns

# The commands a local shell tool of these agents was given (this process runs the task).
EXECUTED: list[Any] = []


def _executor(request: Any) -> str:
    EXECUTED.append(request)
    return "ran"


SHELL_CALL = TypeAdapter(ResponseOutputItem).validate_python(
    {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "call_lsh_1",
        "status": "completed",
        "action": {"type": "exec", "command": ["touch", "/tmp/pwned"], "env": {}},
    }
)


def _agent(name: str, tools: list[Any], *, handoff: bool = False) -> Agent:
    """Its model asks for the local shell command first (the SDK would run it), then ends."""
    script = ScriptedTurns([[SHELL_CALL], "done"])
    if handoff:
        inner = Agent(name=f"{name}-inner", instructions="Act.", tools=tools, model=script)
        return Agent(name=name, instructions="Hand off.", handoffs=[inner], model=script)
    return Agent(name=name, instructions="Act.", tools=tools, model=script)


def shell() -> Agent:
    return _agent("shell", [LocalShellTool(executor=_executor)])


def shell_in_handoff() -> Agent:
    return _agent("shell_in_handoff", [LocalShellTool(executor=_executor)], handoff=True)


def local_shell() -> Agent:
    return _agent("local_shell", [ShellTool(executor=_executor)])


def computer() -> Agent:
    return _agent("computer", [ComputerTool(computer=object())])  # type: ignore[arg-type]


def patcher() -> Agent:
    return _agent("patcher", [ApplyPatchTool(editor=object())])  # type: ignore[arg-type]


def custom() -> Agent:
    async def invoke(context: Any, text: str) -> str:
        EXECUTED.append(text)
        return "ran"

    return _agent("custom", [CustomTool(name="free_text", description="x", on_invoke_tool=invoke)])
