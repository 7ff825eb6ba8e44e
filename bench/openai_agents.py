"""OpenAI Agents SDK adapter overhead: steps per second of the same agent, with and without the
harness (issue 27 §4).

The agent: one function tool `noop` (returns "ok"), a scripted model (the SDK's `Model`
interface, examples.openai_agents_agent.ScriptedTurns: zero latency, no network) calling it
once per turn for `steps` turns, then answering.

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
full ~5 min.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import profile_top, sample_interleaved, tasks_delete
from bench.common.sdk_figures import sdk_figures
from bench.loop import ours_stored_bytes

TITLE = "OpenAI Agents SDK adapter: steps/s with and without the harness"
SIZES = {
    "smoke": {"steps": (3, 6), "n": 2, "warmup": 1, "profile": False, "dbos": False},
    "full": {"steps": (50, 200), "n": 5, "warmup": 1, "profile": True, "dbos": True},
}
NAME = "bench_openai_agents"
# The number of tool turns the registered factory's agents take (set by `run`).
STEPS = {"n": 3}


def bench_agent() -> Any:
    """The registered factory: a fresh agent whose scripted model calls `noop` STEPS times."""
    from agents import Agent, function_tool

    from examples.openai_agents_agent import ScriptedTurns

    @function_tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    script: list[Any] = [[("noop", {})] for _ in range(STEPS["n"])] + ["done"]
    return Agent(name="bench", instructions="benchmark", tools=[noop], model=ScriptedTurns(script))


def _config_with_agent(directory: Path) -> Path:
    from django.conf import settings

    source = Path(settings.HARNESS_CONFIG_FILE)
    raw = (yaml.safe_load(source.read_text()) or {}) if source.exists() else {}
    raw.setdefault("openai_agents", {})[NAME] = "bench.openai_agents:bench_agent"
    path = directory / "harness.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _sdk_run(steps: int) -> None:
    from agents import RunConfig, Runner

    STEPS["n"] = steps
    result = Runner.run_sync(
        bench_agent(),
        "benchmark",
        max_turns=steps + 5,
        run_config=RunConfig(tracing_disabled=True),
    )
    if result.final_output != "done":
        raise RuntimeError(f"the SDK run ended with {result.final_output!r}")


def _harness_run(steps: int, created: list[Any], stored: list[float]) -> None:
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
    STEPS["n"] = steps
    outcome = openai_agents_task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")
    stored.append(ours_stored_bytes(task.id, started) / steps)


DBOS_WORKFLOW: dict[str, Any] = {}


def _dbos_declare() -> None:
    """The DBOS workflow running the agent by DBOSRunner, declared once (before launch)."""
    if DBOS_WORKFLOW:
        return
    from agents import RunConfig
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner

    @DBOS.workflow(name="bench_openai_agents")
    async def workflow(steps: int) -> str:
        STEPS["n"] = steps
        config = RunConfig(tracing_disabled=True)
        result = await DBOSRunner.run(
            bench_agent(), "benchmark", max_turns=steps + 5, run_config=config
        )
        return str(result.final_output)

    DBOS_WORKFLOW["run"] = workflow


def _dbos_run(steps: int, stored: list[float]) -> None:
    from bench.common.dbos_ref import dbos_run, dbos_stored_bytes

    workflow_id = dbos_run(lambda: asyncio.run(DBOS_WORKFLOW["run"](steps)))
    stored.append(dbos_stored_bytes(workflow_id) / steps)


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
            for steps in params["steps"]:
                ours = stored.setdefault(("ours", "read", steps), [])
                theirs = stored.setdefault(("dbos", "read", steps), [])
                contenders = {
                    "plain": lambda steps=steps: _sdk_run(steps),
                    "ours": lambda steps=steps, ours=ours: _harness_run(steps, created, ours),
                }
                if params["dbos"]:
                    contenders["dbos"] = lambda steps=steps, theirs=theirs: _dbos_run(steps, theirs)
                samples = sample_interleaved(contenders, n=params["n"], warmup=params["warmup"])
                seconds |= {(name, "read", steps): v for name, v in samples.items()}
            large = max(params["steps"])
            if params["profile"]:
                profiles[f"ours: one task of {large} steps"] = profile_top(
                    lambda: _harness_run(large, created, [])
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
        variants={"read": "no-op"},
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
            "`agent.openai_agents_runner` on PostgreSQL: per step the approval gate (our "
            "policy), the RunState checkpoint (its lists as shared history chunks) with a "
            "workspace snapshot, and the ledger row written before and after the call. DBOS "
            "(full size): `DBOSRunner.run` in a `@DBOS.workflow` on the same PostgreSQL. "
            "Stored: `pg_column_size` of the task's rows and of the blobs its run stored; "
            "DBOS: its workflow row and step outputs."
        ),
        "details": {"steps": list(params["steps"])},
    }
