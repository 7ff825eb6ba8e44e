"""A replay's verdict against its case's criteria."""

from __future__ import annotations

from typing import Any

from cases.criteria import CaseCriteria
from cases.models import Case
from tasks.models import Task
from tasks.states import TERMINAL


def replay_verdict(
    *,
    case: Case,
    task: Task,
    replay: dict[str, Any],
    divergence: dict[str, Any] | None,
    first_divergent_step: int | None,
) -> dict[str, Any]:
    """{state: running | passed | failed, failures: [why, ...]}: a replay passes when it did
    what the recording did, step by step, and meets the case's criteria."""
    if task.status not in TERMINAL:
        return {"state": "running", "failures": []}
    criteria = CaseCriteria.model_validate(case.criteria)
    failures: list[str] = []
    if divergence is not None:
        failures.append(f"diverged at step {divergence.get('turn')}: {divergence.get('reason')}")
    elif first_divergent_step is not None:
        failures.append(f"differs from the recording from step {first_divergent_step}")
    if task.status != "succeeded":
        failures.append(f"ended {task.status} ({task.error_class}: {task.error_message[:300]})")
    final = task.result
    if criteria.final.equals is not None and final != criteria.final.equals:
        failures.append(f"final answer {final[:200]!r} != {criteria.final.equals[:200]!r}")
    for needle in criteria.final.contains:
        if needle not in final:
            failures.append(f"final answer lacks {needle[:200]!r}")
    files = replay["files"]
    for path in criteria.files_exist:
        if path not in files:
            failures.append(f"file {path} is missing")
    for path, digest in criteria.files_match.items():
        if files.get(path) != digest:
            failures.append(f"file {path} " + ("differs" if path in files else "is missing"))
    called = {c["tool"] for c in replay["calls"] if c["status"] == "succeeded"}
    proposed = {c["tool"] for c in replay["calls"]}
    for name in criteria.tools_called:
        if name not in called:
            failures.append(f"tool {name} was not called")
    for name in criteria.tools_not_called:
        if name in proposed:
            failures.append(f"tool {name} was called")
    if criteria.max_steps is not None and task.steps_used > criteria.max_steps:
        failures.append(f"{task.steps_used} steps > {criteria.max_steps}")
    if criteria.max_cost_usd is not None and float(task.cost_usd) > criteria.max_cost_usd + 1e-9:
        failures.append(f"cost ${float(task.cost_usd):.6f} > ${criteria.max_cost_usd:.6f}")
    return {"state": "failed" if failures else "passed", "failures": failures}
