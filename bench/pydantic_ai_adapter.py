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

The figure that matters is the per-step overhead, (ours − plain) ÷ steps; the ratio of steps/s
is shown beside it. Stored bytes per step: checkpoints + events + tool calls of the task (the
message history is re-stored whole in each checkpoint, so this grows with the run).

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~2 min.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from bench.common import figure, profile_top, rate_stats, stats, tasks_delete, timed
from bench.durable_write import chat_text
from bench.loop import VARIANTS, WRITE_CHARS

TITLE = "Pydantic AI adapter: overhead per step"
NAME = "bench_pydantic_ai"
SIZES = {"smoke": {"steps": (3, 6), "repeat": 2}, "full": {"steps": (50, 200), "repeat": 5}}
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


def make_agent() -> Agent:
    """The benchmark's agent (registered as NAME for the harness runs)."""
    from agent.pydantic_ai_runner import TaskDeps
    from tasks.paths import file_write

    agent = Agent(FunctionModel(_model), deps_type=TaskDeps)

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


# --- plain: Pydantic AI's own loop ------------------------------------------------------------


def plain_samples(agent: Agent, steps: int, repeat: int, variant: str) -> list[float]:
    from agent.pydantic_ai_runner import TaskDeps

    seconds = []
    for _ in range(repeat):
        workspace = Path(tempfile.mkdtemp(prefix="bench-pai-"))
        deps = TaskDeps(workspace=workspace, task_id="bench")
        job = _job(steps, variant)
        seconds.append(
            timed(lambda job=job, deps=deps: agent.run_sync(job, deps=deps, usage_limits=UNLIMITED))
        )
        shutil.rmtree(workspace, ignore_errors=True)
    return seconds


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


def ours_stored_bytes(task_id: Any) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints_checkpoint c"
            "        WHERE c.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM tasks_taskevent e"
            "        WHERE e.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(k.*)), 0) FROM tasks_toolcall k"
            "        WHERE k.task_id = %(t)s)",
            {"t": task_id},
        )
        return int(cursor.fetchone()[0])


def ours_cleanup(task: Any) -> None:
    tasks_delete([task.id])
    shutil.rmtree(task.workspace_path, ignore_errors=True)


def ours_samples(steps: int, repeat: int, variant: str) -> tuple[list[float], list[float]]:
    """(seconds per run, stored bytes per step per run)."""
    seconds, per_step = [], []
    for _ in range(repeat):
        task = ours_prepare(steps, variant)
        seconds.append(timed(lambda task=task: ours_run(task)))
        per_step.append(ours_stored_bytes(task.id) / steps)
        ours_cleanup(task)
    return seconds, per_step


def _register() -> None:
    """Name the benchmark's agent in the loaded harness.yaml (this process only)."""
    from harness_base.config import harness_config

    harness_config().pydantic_ai_agents[NAME] = "bench.pydantic_ai_adapter:make_agent"


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    small, large = params["steps"]
    repeat = params["repeat"]
    _register()
    agent = make_agent()
    seconds: dict[tuple[str, str, int], list[float]] = {}
    stored: dict[tuple[str, int], list[float]] = {}
    for variant in VARIANTS:  # warm both paths up (imports, prepared plans)
        ours_samples(2, 1, variant)
        plain_samples(agent, 2, 1, variant)
    # Alternate plain / ours per repetition so a busy moment hits both.
    for _ in range(repeat):
        for variant in VARIANTS:
            for steps in (small, large):
                seconds.setdefault(("plain", variant, steps), []).extend(
                    plain_samples(agent, steps, 1, variant)
                )
                t, b = ours_samples(steps, 1, variant)
                seconds.setdefault(("ours", variant, steps), []).extend(t)
                stored.setdefault((variant, steps), []).extend(b)
    task = ours_prepare(large, "write")
    profile = profile_top(lambda: ours_run(task))
    ours_cleanup(task)

    rate = {key: rate_stats(values, count=key[2]) for key, values in seconds.items()}
    figures = []
    for variant in VARIANTS:
        tool = "no-op" if variant == "read" else "file write"
        for steps in (large, small):
            ours_s, plain_s = seconds[("ours", variant, steps)], seconds[("plain", variant, steps)]
            overhead = [
                max(o - p, 1e-9) / steps
                for o, p in zip(sorted(ours_s), sorted(plain_s), strict=True)
            ]
            figures += [
                figure(
                    figure=f"{tool}: steps/s at {steps} steps",
                    unit="steps/s",
                    ours=rate[("ours", variant, steps)],
                    reference=rate[("plain", variant, steps)],
                    reference_label="Pydantic AI alone (Agent.run_sync)",
                    target="(info) the adapter's cost",
                ),
                figure(
                    figure=f"{tool}: overhead per step at {steps} steps",
                    unit="ms",
                    ours=stats(overhead, scale=1000),
                    target="(info) (ours − plain) ÷ steps",
                ),
                figure(
                    figure=f"{tool}: stored per step at {steps} steps",
                    unit="KB",
                    ours=stats(stored[(variant, steps)], scale=1 / 1000),
                    target="(info) the history is re-stored in each checkpoint",
                ),
            ]
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
            "Runs alternate between the two. A step = one model turn + one tool call. Stored "
            "bytes are `pg_column_size` of the task's checkpoints, events and tool calls."
        ),
    }
