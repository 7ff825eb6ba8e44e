"""OpenAI Agents SDK agents for the adapter's tests (agent/openai_agents_runner/), with the
scripted model of the bundled example (examples.openai_agents_agent.ScriptedTurns: the SDK's
`Model` interface, no network). Tools record every execution in
HARNESS_LEDGER_DIR/<task id>.agents.log (outside the workspace, so a rollback does not undo
it): the tests count executions there. The model records each answer it gives in the same
directory (`<task id>.model.log`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    HostedMCPTool,
    ModelResponse,
    RunContextWrapper,
    Usage,
    WebSearchTool,
    function_tool,
    handoff,
    input_guardrail,
)
from agents.testing import assistant_message
from django.conf import settings
from openai.types.responses.response_function_web_search import (
    ActionSearch,
    ActionSearchSource,
    ResponseFunctionWebSearch,
)
from openai.types.responses.response_output_item import McpApprovalRequest

from examples.openai_agents_agent import ScriptedTurns, last_output, workspace


def log_path(task_id: Any, kind: str = "agents") -> Path:
    return Path(settings.HARNESS_LEDGER_DIR) / f"{task_id}.{kind}.log"


def executions(task_id: Any, kind: str = "agents") -> list[str]:
    path = log_path(task_id, kind)
    return path.read_text().splitlines() if path.exists() else []


def _record(context: RunContextWrapper[Any], line: str, kind: str = "agents") -> None:
    path = log_path(context.context["harness_task_id"], kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(line + "\n")


@function_tool
def write_file(context: RunContextWrapper[Any], path: str, text: str) -> str:
    """Write a file in the workspace."""
    _record(context, f"write_file {path}")
    target = workspace(context) / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return f"wrote {path}"


@function_tool
def record(context: RunContextWrapper[Any], key: str) -> str:
    """An external side effect (not in the workspace)."""
    _record(context, f"record {key}")
    return f"recorded {key}"


@function_tool(needs_approval=True)
def publish(context: RunContextWrapper[Any], version: str) -> str:
    """Publish a release (always asks a person)."""
    _record(context, f"publish {version}")
    return f"published {version}"


def _answer(items: list[Any]) -> str:
    return f"done: {last_output(items)}"


class CountingModel(ScriptedTurns):
    """Records every answer it gives (the turn) in the task's model log; on `slow_turn` it
    marks the start and sleeps `slow_s` (a test kills the worker meanwhile)."""

    def __init__(self, script: list[Any], *, slow_turn: int = -1, slow_s: float = 0) -> None:
        super().__init__(script)
        self.slow_turn = slow_turn
        self.slow_s = slow_s

    def before_turn(self, turn: int, items: list[Any]) -> None:
        task_id = _task_id_of(items)
        path = log_path(task_id, "model")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(f"turn {turn}\n")
        if turn == self.slow_turn:
            time.sleep(self.slow_s)


def _task_id_of(items: list[Any]) -> str:
    """The task id, from the first user message ("task <id>: ...")."""
    first = items[0] if items else {}
    content = first.get("content") if isinstance(first, dict) else ""
    text = content if isinstance(content, str) else ""
    return text.split(":", 1)[0].removeprefix("task ").strip() or "unknown"


class FlakyModel(CountingModel):
    """Turn 1 fails the first time it is asked (the endpoint is down), then answers."""

    def before_turn(self, turn: int, items: list[Any]) -> None:
        super().before_turn(turn, items)
        flag = log_path(_task_id_of(items), "flaky")
        if turn == 1 and not flag.exists():
            flag.write_text("failed once\n")
            raise ConnectionError("model endpoint down")


def flaky_writer() -> Agent:
    return Agent(
        name="flaky_writer",
        instructions="Record twice.",
        tools=[record],
        model=FlakyModel([[("record", {"key": "one"})], [("record", {"key": "two"})], _answer]),
    )


WRITER_SCRIPT = [
    [("write_file", {"path": "a.txt", "text": "one\n"})],
    [("write_file", {"path": "b.txt", "text": "two\n"}), ("record", {"key": "b"})],
    [("publish", {"version": "1.0"})],
    _answer,
]

writer = Agent(
    name="writer",
    instructions="Write the files, then publish.",
    tools=[write_file, record, publish],
    model=CountingModel(WRITER_SCRIPT),
)


def slow_writer() -> Agent:
    """A factory: turn 1 records `one`, turn 2 is a slow model call (a test kills the worker
    during it), turn 3 records `two`, then the answer."""
    return Agent(
        name="slow_writer",
        instructions="Record, think, record.",
        tools=[record],
        model=CountingModel(
            [[("record", {"key": "one"})], [("record", {"key": "two"})], _answer],
            slow_turn=1,
            slow_s=3,
        ),
    )


@input_guardrail
async def no_secrets(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
    text = input if isinstance(input, str) else str(input)
    return GuardrailFunctionOutput(
        output_info={"matched": "password"}, tripwire_triggered="password" in text
    )


guarded = Agent(
    name="guarded",
    instructions="Answer.",
    input_guardrails=[no_secrets],
    model=CountingModel(["fine"]),
)

# Triage hands off to the writer (handoff is a call of the scripted model).
_shared = CountingModel(
    [
        [("transfer_to_writer", {})],
        [("write_file", {"path": "a.txt", "text": "one\n"})],
        _answer,
    ]
)
_writer_after_triage = Agent(
    name="writer", instructions="Write.", tools=[write_file], model=_shared
)
triage = Agent(
    name="triage",
    instructions="Hand off.",
    handoffs=[handoff(_writer_after_triage)],
    model=_shared,
)


def _mcp_answer(items: list[Any]) -> str:
    for item in items:
        get = item.get if isinstance(item, dict) else lambda k, i=item: getattr(i, k, None)
        if get("type") == "mcp_approval_response":
            return f"approve={get('approve')}"
    return "no answer"


# A hosted MCP tool whose server asks for approval of `delete_repo`: the model's response holds
# the provider's approval request (the call runs at the provider once approved).
hosted = Agent(
    name="hosted",
    instructions="Use the hosted server.",
    tools=[
        HostedMCPTool(
            tool_config={
                "type": "mcp",
                "server_label": "gh",
                "server_url": "https://mcp.example.invalid/mcp",
                "require_approval": "always",
            }
        )
    ],
    model=CountingModel(
        [
            [
                McpApprovalRequest(
                    id="call_t0_0",
                    type="mcp_approval_request",
                    name="delete_repo",
                    server_label="gh",
                    arguments='{"repo": "old"}',
                )
            ],
            _mcp_answer,
        ]
    ),
)


def notes_agent() -> Agent:
    """A factory: an agent using the harness's demo MCP server (examples.mcp_notes, stdio) for
    the notes of the task's workspace (the server runs in the task's sandbox; harness.yaml's
    entry mounts `{harness}/examples` for it): lists them (read-only), then deletes one
    (destructive: the harness's `destructive` rule reviews it)."""
    from agents.mcp import MCPServerStdio

    server = MCPServerStdio(
        params={
            "command": sys.executable,
            "args": ["-m", "examples.mcp_notes"],
            "env": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        },
        name="notes",
    )
    return Agent(
        name="notes_keeper",
        instructions="Tidy the notes.",
        mcp_servers=[server],
        model=CountingModel(
            [[("list_notes", {})], [("delete_note", {"name": "old.txt"})], _answer]
        ),
    )


# --- modelless: the harness binds the model (tests/security/test_openai_agents_model_keys.py) --


@function_tool
def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


modelless = Agent(name="modelless", instructions="Say hi.", tools=[echo])


# --- shipper: an approval bound to its arguments (tests/security/test_openai_agents_review_binding)


@function_tool(needs_approval=True)
def ship(context: RunContextWrapper[Any], path: str) -> str:
    """Ship a file of the workspace (always asks a person)."""
    _record(context, f"ship {path}")
    return f"shipped {path}"


shipper = Agent(
    name="shipper",
    instructions="Ship the notes.",
    tools=[ship],
    model=CountingModel([[("ship", {"path": "notes/release.md"})], _answer]),
)


@function_tool(failure_error_function=None)
def fetch(context: RunContextWrapper[Any], url: str) -> str:
    """A tool whose errors reach the run (no failure_error_function): the endpoint is down."""
    raise ConnectionError(f"{url}: connection refused")


# Writes a file, then calls a tool that raises: the run (and the task) fails.
breaks = Agent(
    name="breaks",
    instructions="Write, then fetch.",
    tools=[write_file, fetch],
    model=CountingModel(
        [[("write_file", {"path": "a.txt", "text": "one\n"})], [("fetch", {"url": "x"})]]
    ),
)


# --- searcher: a hosted tool (agent.openai_agents_runner.hosted) ------------------------------


class SearchingModel(CountingModel):
    """Searches the web when the request offers it the hosted `web_search` tool: its answer
    holds the provider's `web_search_call` item (query and sources) and the text citing it;
    offered no web search, it answers without. It logs the hosted tools each turn was offered
    (`offered web_search`) in the task's model log."""

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        offered = sorted(t.name for t in tools if isinstance(t, WebSearchTool))
        path = log_path(_task_id_of(items), "model")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(f"offered {' '.join(offered) or 'nothing'}\n")
        if not offered:
            output = [assistant_message("answered without searching", item_id="msg_t0")]
        else:
            search = ResponseFunctionWebSearch(
                id="ws_t0_0",
                type="web_search_call",
                status="completed",
                action=ActionSearch(
                    type="search",
                    query="durable agent harness",
                    sources=[ActionSearchSource(type="url", url="https://example.org/harness")],
                ),
            )
            output = [search, assistant_message("found example.org/harness", item_id="msg_t0")]
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=10, output_tokens=4, total_tokens=14),
            response_id=None,
        )


searcher = Agent(
    name="searcher",
    instructions="Search the web, then answer.",
    tools=[WebSearchTool()],
    model=SearchingModel([]),
)
