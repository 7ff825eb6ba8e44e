"""Every saved case replayed as a suite, for CI (`./harness replay`, issue #31): each replay
runs here, in this process, through the same loop a worker runs (no worker needed), against the
current code, tools schema and policy; the result is one row per case."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from agent.jobs import agent_runner
from agent.runtime import task_run
from cases.models import Case
from cases.selectors import case_run_report, cases_list
from cases.services import case_replay_start
from tasks.services import SpecError, task_transition
from tasks.spec import spec_agent_kind
from tasks.states import TaskStatus


@dataclass(frozen=True)
class SuiteRow:
    case: str
    passed: bool
    first_divergence: str
    cost_usd: float
    report: dict[str, Any]


def candidate_model(case: Case, model: str | None) -> dict[str, Any] | None:
    """`--model`: a model spec as JSON, or a model name for a case recorded with an
    OpenAI-compatible model (its endpoint kept); None: the recorded decisions."""
    if not model:
        return None
    if model.lstrip().startswith("{"):
        return json.loads(model)
    recorded = dict(case.spec.get("model") or {})
    if recorded.get("kind") != "openai":
        raise SpecError(
            "model", f"case {case.name} was not recorded with an OpenAI-compatible model"
        )
    return {**recorded, "model": model}


def replay_one(*, case: Case, model: str | None, on_divergence: str, user: User | None) -> SuiteRow:
    try:
        run = case_replay_start(
            case=case,
            user=user,
            model=candidate_model(case, model),
            on_divergence=on_divergence,
            enqueue=False,
        )
    except (SpecError, ValueError) as exc:
        message = f"{exc.field}: {exc.message}" if isinstance(exc, SpecError) else str(exc)
        return SuiteRow(case.name, False, f"not started ({message})", 0.0, {})
    task_transition(task_id=run.task_id, to=TaskStatus.QUEUED, reason="replay suite")
    # The harness's own loop, or the runner of the case's agent kind (a Pydantic AI agent).
    kind = spec_agent_kind(run.task.spec)
    (task_run if kind is None else agent_runner(kind))(task_id=run.task_id)
    run.task.refresh_from_db()
    report = case_run_report(case_run=run)
    divergence = report["divergence"]
    first = ""
    if report["first_divergent_step"] is not None:
        first = f"step {report['first_divergent_step']}"
        if divergence:
            first += f" {divergence.get('tool')}: {divergence.get('reason')}"
    elif report["failures"]:
        first = report["failures"][0]
    return SuiteRow(
        case=case.name,
        passed=report["passed"],
        first_divergence=first,
        cost_usd=float(report["totals"]["replay"]["cost_usd"] or 0),
        report=report,
    )


def replay_suite(
    *,
    tag: str | None = None,
    model: str | None = None,
    on_divergence: str = "stop",
    user: User | None = None,
) -> list[SuiteRow]:
    return [
        replay_one(case=case, model=model, on_divergence=on_divergence, user=user)
        for case in cases_list(tag=tag)
    ]
