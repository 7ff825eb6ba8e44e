"""Pydantic AI adapter overhead: steps per second of the same Pydantic AI agent run by Pydantic
AI's own loop and as a harness task (issue 27 §3/§4).

The agent: a zero-latency `FunctionModel` proposing one tool call per turn for N turns, then a
final answer; the tool does nothing (`read`) or writes a new 300-character file into the
workspace (`write`: `notes/<i>.txt`, the usual case, with its workspace snapshot).

Plain: `Agent.run_sync` (Pydantic AI's loop, in memory, nothing stored).
Ours: `agent.pydantic_ai_runner.pydantic_ai_task_run` in-process against PostgreSQL
(acquisition to `succeeded`): Agent.iter node by node, the message history checkpointed after
each model response and each tools node (with a workspace snapshot), a ledger row written
before and after each tool call, events, the lease fence on every write.

DBOS (full size only): the same agent with Pydantic AI's `DBOSDurability` capability, run in a
`@DBOS.workflow` on the same PostgreSQL (bench.common.dbos_ref): each model request a step.

The figure that matters is the per-step overhead, (ours − plain) ÷ steps; the ratio of steps/s
is shown beside it. Stored bytes per step: the task's rows (checkpoints, events, tool calls) and
the blobs its run stored (the history's chunks, checkpoints.history, and the workspace
snapshots), as bench.loop measures the native loop; DBOS: its workflow row and step outputs.

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~2 min.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from bench.common import profile_top, tasks_delete, timed
from bench.common.sdk_figures import sdk_figures
from bench.durable_write import chat_text
from bench.loop import VARIANTS, WRITE_CHARS, ours_stored_bytes

TITLE = "Pydantic AI adapter: overhead per step"
NAME = "bench_pydantic_ai"
SIZES = {
    "smoke": {"steps": (3, 6), "repeat": 2, "dbos": False},
    "full": {"steps": (50, 200), "repeat": 5, "dbos": True},
}
# As the harness runs it: the task's own budget bounds the steps, not the SDK's default limit.
UNLIMITED = UsageLimits(request_limit=None)


def _input(messages: list[ModelMessage]) -> dict[str, Any]:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt" and isinstance(part.content, str):
                    return json.loads(part.content)
    return {}


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    job = _input(messages)
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    if turn >= job["steps"]:
        return ModelResponse(parts=[TextPart("done")])
    if job["variant"] == "read":
        return ModelResponse(parts=[ToolCallPart("noop", {})])
    text = f"{job['run']} {chat_text(turn, WRITE_CHARS - 33)}"
    return ModelResponse(parts=[ToolCallPart("write", {"path": f"notes/{turn}.txt", "text": text})])


def make_agent(capabilities: list[Any] | None = None) -> Agent:
    """The benchmark's agent (registered as NAME for the harness runs)."""
    from agent.pydantic_ai_runner import TaskDeps
    from tasks.paths import file_write

    agent = Agent(
        FunctionModel(_model), deps_type=TaskDeps, name=NAME, capabilities=capabilities or []
    )

    @agent.tool_plain
    def noop() -> str:
        """Do nothing."""
        return "ok"

    @agent.tool
    def write(ctx: RunContext[Any], path: str, text: str) -> str:
        """Write `text` to the workspace file `path`."""
        file_write(ctx.deps.workspace, path, text.encode())
        return f"wrote {path}"

    return agent


def _job(steps: int, variant: str) -> str:
    return json.dumps({"steps": steps, "variant": variant, "run": uuid.uuid4().hex})


def _timed_in_workspace(call: Callable[[str, Any], Any], steps: int, variant: str) -> Any:
    """(seconds, what it returned) of `call(job, deps)` in a workspace of its own."""
    from agent.pydantic_ai_runner import TaskDeps

    workspace = Path(tempfile.mkdtemp(prefix="bench-pai-"))
    job, deps = _job(steps, variant), TaskDeps(workspace=workspace, task_id="bench")
    started = time.perf_counter()
    out = call(job, deps)
    seconds = time.perf_counter() - started
    shutil.rmtree(workspace, ignore_errors=True)
    return seconds, out


# --- plain: Pydantic AI's own loop; DBOS: the same agent under DBOS's integration -------------


def plain_samples(agent: Agent, steps: int, repeat: int, variant: str) -> list[float]:
    def call(job: str, deps: Any) -> Any:
        return agent.run_sync(job, deps=deps, usage_limits=UNLIMITED)

    return [_timed_in_workspace(call, steps, variant)[0] for _ in range(repeat)]


DBOS_WORKFLOW: dict[str, Any] = {}


def dbos_declare() -> None:
    """The DBOS agent and its workflow, declared once (before DBOS launches)."""
    if DBOS_WORKFLOW:
        return
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    from agent.pydantic_ai_runner import TaskDeps

    agent = make_agent([DBOSDurability()])

    @DBOS.workflow(name="bench_pydantic_ai")
    def workflow(job: str, workspace: str) -> str:
        deps = TaskDeps(workspace=Path(workspace), task_id="bench")
        return str(agent.run_sync(job, deps=deps, usage_limits=UNLIMITED).output)

    DBOS_WORKFLOW["run"] = workflow


def dbos_samples(steps: int, variant: str) -> tuple[float, float]:
    """(seconds of one run, stored bytes per step)."""
    from bench.common.dbos_ref import dbos_run, dbos_stored_bytes

    def call(job: str, deps: Any) -> str:
        return dbos_run(DBOS_WORKFLOW["run"], job, str(deps.workspace))

    seconds, workflow_id = _timed_in_workspace(call, steps, variant)
    return seconds, dbos_stored_bytes(workflow_id) / steps


# --- ours: the same agent as a harness task ---------------------------------------------------


def ours_prepare(steps: int, variant: str) -> Any:
    from tasks.services import task_create, task_transition
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": f"bench pydantic-ai {variant} {steps}",
            "goal": "benchmark",
            "agent": {"kind": "pydantic-ai", "name": NAME, "input": _job(steps, variant)},
            # FunctionModel's token estimates of a 200-step history add up past the default
            # max_tokens: the benchmark measures steps, so only max_steps bounds it.
            "budget": {"max_steps": steps + 1, "max_tokens": 10**12},
        }
    )
    task = task_create(spec=spec, user=None, enqueue=False)
    task_transition(task_id=task.id, to="queued", reason="bench")
    return task


def ours_run(task: Any) -> None:
    from agent.pydantic_ai_runner import pydantic_ai_task_run

    outcome = pydantic_ai_task_run(task_id=task.id)
    if outcome != "succeeded":
        task.refresh_from_db()
        raise RuntimeError(
            f"benchmark task {task.id} ended {outcome}: {task.error_class} {task.error_message}"
        )


def ours_cleanup(task: Any) -> None:
    tasks_delete([task.id])
    shutil.rmtree(task.workspace_path, ignore_errors=True)


def ours_samples(steps: int, repeat: int, variant: str) -> tuple[list[float], list[float]]:
    """(seconds per run, stored bytes per step per run)."""
    from django.utils import timezone

    seconds, per_step = [], []
    for _ in range(repeat):
        task = ours_prepare(steps, variant)
        started = timezone.now()
        seconds.append(timed(lambda task=task: ours_run(task)))
        per_step.append(ours_stored_bytes(task.id, started) / steps)
        ours_cleanup(task)
    return seconds, per_step


def _register() -> None:
    """Name the benchmark's agent in the loaded harness.yaml (this process only)."""
    from harness_base.config import harness_config

    harness_config().pydantic_ai_agents[NAME] = "bench.pydantic_ai_adapter:make_agent"


def run(size: str) -> dict[str, Any]:
    from bench.common.dbos_ref import dbos_launch, dbos_stop

    params = SIZES[size]
    small, large = params["steps"]
    repeat = params["repeat"]
    _register()
    agent = make_agent()
    if params["dbos"]:
        dbos_declare()
        dbos_launch()
    seconds: dict[tuple[str, str, int], list[float]] = {}
    stored: dict[tuple[str, str, int], list[float]] = {}
    try:
        for variant in VARIANTS:  # warm every path up (imports, prepared plans)
            ours_samples(2, 1, variant)
            plain_samples(agent, 2, 1, variant)
            if params["dbos"]:
                dbos_samples(2, variant)
        # Alternate the contenders per repetition so a busy moment hits all of them.
        for _ in range(repeat):
            for variant in VARIANTS:
                for steps in (small, large):
                    key = (variant, steps)
                    seconds.setdefault(("plain", *key), []).extend(
                        plain_samples(agent, steps, 1, variant)
                    )
                    t, b = ours_samples(steps, 1, variant)
                    seconds.setdefault(("ours", *key), []).extend(t)
                    stored.setdefault(("ours", *key), []).extend(b)
                    if params["dbos"]:
                        dt, db = dbos_samples(steps, variant)
                        seconds.setdefault(("dbos", *key), []).append(dt)
                        stored.setdefault(("dbos", *key), []).append(db)
    finally:
        dbos_stop()
    task = ours_prepare(large, "write")
    profile = profile_top(lambda: ours_run(task))
    ours_cleanup(task)
    figures = sdk_figures(
        seconds,
        stored,
        steps=(large, small),
        variants={"read": "no-op", "write": "file write"},
        plain="Pydantic AI alone (Agent.run_sync)",
        dbos="the same agent under DBOS (DBOSDurability)",
    )
    return {
        "title": TITLE,
        "figures": figures,
        "profiles": {f"ours: one task of {large} file-write steps": profile},
        "details": {"steps": [small, large], "repeat": repeat},
        "notes": (
            "The same `pydantic_ai.Agent` (a zero-latency FunctionModel, one tool call per "
            "turn, then an answer) run by `Agent.run_sync` (reference: nothing stored) and as "
            "a harness task by `agent.pydantic_ai_runner.pydantic_ai_task_run` in-process "
            "(acquire → succeeded: Agent.iter node by node, the message history and a "
            "workspace snapshot checkpointed after each model response and each tools node, a "
            "ledger row before and after each tool call, events, every write lease-fenced). "
            "Runs alternate between the contenders. A step = one model turn + one tool call. "
            "Stored: `pg_column_size` of the task's rows and of the blobs its run stored "
            "(history chunks, snapshots). DBOS (full size): the agent with `DBOSDurability` in "
            "a `@DBOS.workflow` on the same PostgreSQL; its workflow row and step outputs."
        ),
    }
