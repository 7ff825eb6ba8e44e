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

The ratio is the adapter's cost per step (ours ÷ reference is < 1: the harness is slower by
what durability costs). Expected run time (quiet 2-CPU machine): smoke ~10 s; full ~2 min.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import figure, profile_top, rate_stats, sample_interleaved, tasks_delete

TITLE = "OpenAI Agents SDK adapter: steps/s with and without the harness"
SIZES = {
    "smoke": {"steps": 3, "n": 2, "warmup": 1, "profile": False},
    "full": {"steps": 50, "n": 15, "warmup": 2, "profile": True},
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

    result = Runner.run_sync(
        bench_agent(),
        "benchmark",
        max_turns=steps + 5,
        run_config=RunConfig(tracing_disabled=True),
    )
    if result.final_output != "done":
        raise RuntimeError(f"the SDK run ended with {result.final_output!r}")


def _harness_run(steps: int, created: list[Any]) -> None:
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
    outcome = openai_agents_task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")


def run(size: str) -> dict[str, Any]:
    from django.conf import settings

    from harness_base.config import harness_config

    params = SIZES[size]
    steps = params["steps"]
    STEPS["n"] = steps
    created: list[Any] = []
    previous = settings.HARNESS_CONFIG_FILE
    with tempfile.TemporaryDirectory() as directory:
        settings.HARNESS_CONFIG_FILE = _config_with_agent(Path(directory))
        harness_config.cache_clear()
        try:
            samples = sample_interleaved(
                {
                    "sdk": lambda: _sdk_run(steps),
                    "harness": lambda: _harness_run(steps, created),
                },
                n=params["n"],
                warmup=params["warmup"],
            )
            profiles = (
                {
                    f"ours: one task of {steps} steps": profile_top(
                        lambda: _harness_run(steps, created)
                    )
                }
                if params["profile"]
                else {}
            )
        finally:
            tasks_delete(created)
            settings.HARNESS_CONFIG_FILE = previous
            harness_config.cache_clear()
    ours = rate_stats(samples["harness"], count=steps)
    reference = rate_stats(samples["sdk"], count=steps)
    per_step_ms = (1000 / ours["median"]) - (1000 / reference["median"])
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"steps/s, {steps} tool steps (noop)",
                unit="steps/s",
                ours=ours,
                reference=reference,
                reference_label="the SDK's own Runner.run (nothing persisted)",
                target="(info) the adapter's overhead per step",
                met=None,
                note=f"adapter overhead ≈ {per_step_ms:.2f} ms per step (median)",
            )
        ],
        "profiles": profiles,
        "notes": (
            "Same agent, same scripted model (the SDK's `Model` interface, zero latency), "
            "interleaved round-robin. Reference: `Runner.run_sync` in-process, nothing "
            "persisted. Ours: the agent as a harness task run in-process by "
            "`agent.openai_agents_runner` on PostgreSQL: per step the approval gate (our "
            "policy), the RunState checkpoint with a workspace snapshot, and the ledger row "
            "written before and after the call."
        ),
        "details": {"steps": steps, "overhead_ms_per_step": round(per_step_ms, 3)},
    }
