"""OpenAI Agents SDK adapter overhead: steps per second of the same agent, with and without the
harness (issue 27 §4).

The agent: two function tools, `noop` (returns "ok") and `write` (a new 300-character file
`notes/<i>.txt` in the run's workspace, the usual case), and a scripted model (the SDK's
`Model` interface, examples.openai_agents_agent.ScriptedTurns: zero latency, no network)
calling one of them once per turn for `steps` turns, then answering.

- Reference: the SDK's own loop, `Runner.run_sync(agent, ...)` in this process, nothing
  persisted (what the SDK does on its own).
- Ours: the same agent registered in harness.yaml `openai_agents` and run as a task by
  `agent.openai_agents_runner` in-process against PostgreSQL (acquisition to `succeeded`): each
  turn stops at the harness's approval gate, its RunState is checkpointed with a workspace
  snapshot, the call gets a ledger row written before and after it runs, then the SDK resumes.

- DBOS (full size only): the same agent run by `dbos-openai-agents`' `DBOSRunner` in a
  `@DBOS.workflow` on the same PostgreSQL (bench.common.dbos_ref): each model call a step.

Figures at two run lengths: steps/s against the SDK alone, the overhead per step and the bytes
stored per step (ours: the task's rows and the blobs its run stored, history chunks included;
DBOS: its workflow row and step outputs). Expected run time (quiet 2-CPU machine): smoke ~10 s;
full ~8 min.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import yaml
from agents import RunContextWrapper  # resolved by function_tool: not a string import

from bench.common import profile_top, sample_interleaved, tasks_delete
from bench.common.sdk_figures import sdk_figures
from bench.durable_write import chat_text
from bench.loop import ours_stored_bytes
from bench.loop.ours import WRITE_CHARS

TITLE = "OpenAI Agents SDK adapter: steps/s with and without the harness"
SIZES = {
    "smoke": {"steps": (3, 6), "n": 2, "warmup": 1, "profile": False, "dbos": False},
    "full": {"steps": (50, 200), "n": 5, "warmup": 1, "profile": True, "dbos": True},
}
NAME = "bench_openai_agents"
VARIANTS = {"read": "no-op", "write": "file write"}
# The tool turns the registered factory's agents take and their tool (set before each run).
STEPS: dict[str, Any] = {"n": 3, "variant": "read"}


def _turn(turn: int, variant: str, run: str) -> list[tuple[str, dict[str, Any]]]:
    if variant == "read":
        return [("noop", {})]
    text = f"{run} {chat_text(turn, WRITE_CHARS - 33)}"
    return [("write", {"path": f"notes/{turn}.txt", "text": text})]


def bench_agent() -> Any:
    """The registered factory: a fresh agent whose scripted model calls `noop` or `write`
    STEPS times."""
    from agents import Agent, function_tool

    from examples.openai_agents_agent import ScriptedTurns
    from tasks.paths import file_write

    @function_tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    @function_tool
    def write(ctx: RunContextWrapper[Any], path: str, text: str) -> str:
        """Write `text` to the workspace file `path`."""
        file_write(Path(ctx.context["harness_workspace"]), path, text.encode())
        return f"wrote {path}"

    run = uuid.uuid4().hex
    script: list[Any] = [_turn(i, STEPS["variant"], run) for i in range(STEPS["n"])] + ["done"]
    return Agent(
        name="bench", instructions="benchmark", tools=[noop, write], model=ScriptedTurns(script)
    )


def _in_workspace(call: Any) -> Any:
    """`call(context)` with a workspace of its own, as the harness gives its runs."""
    workspace = tempfile.mkdtemp(prefix="bench-oa-")
    try:
        return call({"harness_workspace": workspace})
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def _config_with_agent(directory: Path) -> Path:
    from django.conf import settings

    source = Path(settings.HARNESS_CONFIG_FILE)
    raw = (yaml.safe_load(source.read_text()) or {}) if source.exists() else {}
    raw.setdefault("openai_agents", {})[NAME] = "bench.openai_agents:bench_agent"
    path = directory / "harness.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _sdk_run(steps: int, variant: str) -> None:
    from agents import RunConfig, Runner

    STEPS.update(n=steps, variant=variant)
    result = _in_workspace(
        lambda context: Runner.run_sync(
            bench_agent(),
            "benchmark",
            context=context,
            max_turns=steps + 5,
            run_config=RunConfig(tracing_disabled=True),
        )
    )
    if result.final_output != "done":
        raise RuntimeError(f"the SDK run ended with {result.final_output!r}")


def _harness_run(steps: int, variant: str, created: list[Any], stored: list[float]) -> None:
    from django.utils import timezone

    from agent.openai_agents_runner import openai_agents_task_run
    from tasks.services import task_create, task_transition
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": "bench",
            "goal": "benchmark",
            "agent": {"kind": "openai-agents", "name": NAME},
            "budget": {"max_steps": steps + 5},
        }
    )
    task = task_create(spec=spec, user=None, enqueue=False)
    created.append(task.id)
    task_transition(task_id=task.id, to="queued", reason="bench")
    started = timezone.now()
    STEPS.update(n=steps, variant=variant)
    outcome = openai_agents_task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")
    stored.append(ours_stored_bytes(task.id, started) / steps)
    shutil.rmtree(task.workspace_path, ignore_errors=True)


DBOS_WORKFLOW: dict[str, Any] = {}


def _dbos_declare() -> None:
    """The DBOS workflow running the agent by DBOSRunner, declared once (before launch)."""
    if DBOS_WORKFLOW:
        return
    from agents import RunConfig
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner

    @DBOS.workflow(name="bench_openai_agents")
    async def workflow(steps: int, variant: str, workspace: str) -> str:
        STEPS.update(n=steps, variant=variant)
        config = RunConfig(tracing_disabled=True)
        context = {"harness_workspace": workspace}
        result = await DBOSRunner.run(
            bench_agent(), "benchmark", context=context, max_turns=steps + 5, run_config=config
        )
        return str(result.final_output)

    DBOS_WORKFLOW["run"] = workflow


def _dbos_run(steps: int, variant: str, stored: list[float]) -> None:
    from bench.common.dbos_ref import dbos_run, dbos_stored_bytes

    workflow_id = _in_workspace(
        lambda context: dbos_run(
            lambda: asyncio.run(DBOS_WORKFLOW["run"](steps, variant, context["harness_workspace"]))
        )
    )
    stored.append(dbos_stored_bytes(workflow_id) / steps)


def _contenders(
    params: dict[str, Any],
    steps: int,
    variant: str,
    created: list[Any],
    stored: dict[tuple[str, str, int], list[float]],
) -> dict[str, Any]:
    """The SDK alone, ours and (full size) DBOS, each running `steps` turns of `variant`."""
    ours = stored.setdefault(("ours", variant, steps), [])
    theirs = stored.setdefault(("dbos", variant, steps), [])
    contenders = {
        "plain": lambda: _sdk_run(steps, variant),
        "ours": lambda: _harness_run(steps, variant, created, ours),
    }
    if params["dbos"]:
        contenders["dbos"] = lambda: _dbos_run(steps, variant, theirs)
    return contenders


def run(size: str) -> dict[str, Any]:
    from django.conf import settings

    from bench.common.dbos_ref import dbos_launch, dbos_stop
    from harness_base.config import harness_config

    params = SIZES[size]
    created: list[Any] = []
    seconds: dict[tuple[str, str, int], list[float]] = {}
    stored: dict[tuple[str, str, int], list[float]] = {}
    profiles = {}
    previous = settings.HARNESS_CONFIG_FILE
    if params["dbos"]:
        _dbos_declare()
        dbos_launch()
    with tempfile.TemporaryDirectory() as directory:
        settings.HARNESS_CONFIG_FILE = _config_with_agent(Path(directory))
        harness_config.cache_clear()
        try:
            for variant in VARIANTS:
                for steps in params["steps"]:
                    samples = sample_interleaved(
                        _contenders(params, steps, variant, created, stored),
                        n=params["n"],
                        warmup=params["warmup"],
                    )
                    seconds |= {(name, variant, steps): v for name, v in samples.items()}
            large = max(params["steps"])
            if params["profile"]:
                for variant, tool in VARIANTS.items():
                    profiles[f"ours: one task of {large} steps, {tool}"] = profile_top(
                        lambda variant=variant: _harness_run(large, variant, created, [])
                    )
        finally:
            dbos_stop()
            tasks_delete(created)
            settings.HARNESS_CONFIG_FILE = previous
            harness_config.cache_clear()
    figures = sdk_figures(
        seconds,
        stored,
        steps=sorted(params["steps"], reverse=True),
        variants=VARIANTS,
        plain="the SDK's own Runner.run (nothing persisted)",
        dbos="the same agent under DBOS (DBOSRunner)",
    )
    return {
        "title": TITLE,
        "figures": figures,
        "profiles": profiles,
        "notes": (
            "Same agent, same scripted model (the SDK's `Model` interface, zero latency), "
            "interleaved round-robin. Reference: `Runner.run_sync` in-process, nothing "
            "persisted. Ours: the agent as a harness task run in-process by "
            "`agent.openai_agents_runner` on PostgreSQL, the tool doing nothing or writing a "
            "new 300-character file: per step the approval gate (our "
            "policy), the RunState checkpoint (its lists as shared history chunks) with a "
            "workspace snapshot, and the ledger row written before and after the call. DBOS "
            "(full size): `DBOSRunner.run` in a `@DBOS.workflow` on the same PostgreSQL. "
            "Stored: `pg_column_size` of the task's rows and of the blobs its run stored; "
            "DBOS: its workflow row and step outputs."
        ),
        "details": {"steps": list(params["steps"])},
    }
