"""Closing a step: the validation funnel's retry bound, the context policy and the
`after_step` checkpoint (written now after a side effect, else with the next write)."""

from __future__ import annotations

import time
from typing import Any

from agent.context import context_apply
from agent.runtime.run import Run, StopRun
from harness_base.metrics import STEP_SECONDS, metric_observe
from tasks import beacon
from tasks.events import EventType


def step_finish(run: Run) -> None:
    """Close a step: the retry bound of the validation funnel, the context policy, the
    `after_step` checkpoint."""
    state = run.state
    checks = state.checks
    checks.failed_steps = checks.failed_steps + 1 if checks.failures_this_step else 0
    checks.failures_this_step = 0
    state.step_index += 1
    state.budget.steps += 1
    state.pending = []
    state.next_call = 0
    state.phase = "model"
    if checks.failed_steps > run.limits.max_retries:
        raise StopRun(
            "validation_failed",
            f"{checks.failed_steps} steps in a row failed validation "
            f"(max_retries={run.limits.max_retries}); last: {checks.last_failure}",
        )
    _apply_context(run)
    run.event(EventType.STEP_FINISHED, {"step": state.step_index})
    now = time.monotonic()
    metric_observe(STEP_SECONDS, now - run.step_started)
    run.step_started = now
    if run.turn_unwritten or run.effect_unwritten:
        # A step that ran no tool, or ran a side effect: its outcome is durable now.
        run.commit(trigger="after_step")
    else:
        # A read-only step wrote once, before its first tool ran; its end rides with the next
        # write (the next step's, or the run's last).
        run.stage(trigger="after_step")


def _apply_context(run: Run) -> None:
    beacon.expect("turn", run.turn_s)  # folding may ask the model for a summary
    report = context_apply(
        state=run.state, policy=run.context, model=run.model, timeout_s=run.turn_s
    )
    beacon.progress()
    if report is None:
        return
    payload: dict[str, Any] = {
        "folded_messages": report.folded_messages,
        "kept_messages": report.kept_messages,
        "method": report.method,
        "new_facts": report.new_facts,
        "summary_chars": report.summary_chars,
    }
    if report.usage is not None:
        payload.update(run.charge(report.usage))
    if report.model_error:
        payload["model_error"] = report.model_error
    run.event(EventType.CONTEXT_FOLDED, payload)
