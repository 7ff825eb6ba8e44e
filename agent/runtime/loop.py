"""The loop: sequences the units of a run until the task succeeds, pauses or stops."""

from __future__ import annotations

import logging
from typing import Any

from agent.runtime.calls import call_next
from agent.runtime.compensate import compensation_next
from agent.runtime.drain import drain_release, drain_requested
from agent.runtime.finish import finish_stopped, finish_success
from agent.runtime.group import prepare_for_round
from agent.runtime.plan import plan_finish
from agent.runtime.run import (
    Paused,
    Run,
    StopRun,
    connection_lost,
    job_timed_out,
    with_lease,
    worker_identity,
)
from agent.runtime.start import start_or_resume
from agent.runtime.step import step_finish
from agent.runtime.turn import model_turn
from tasks.states import LeaseLost

log = logging.getLogger(__name__)


def task_run(*, task_id: Any) -> str:
    """Run a queued task (or one whose retry backoff has elapsed) until it finishes, pauses or
    fails. A duplicate job exits untouched; with no free capacity the task is put back on its
    queue after a short delay."""
    worker_id = worker_identity()
    return with_lease(
        task_id=task_id, worker_id=worker_id, execute=lambda task: run_execute(Run(task, worker_id))
    )


def run_execute(run: Run) -> str:
    run.watchdog.start()
    try:
        start_or_resume(run)
        if run.task.plan_phase == "rejected":
            raise StopRun("canceled", "the plan was rejected by a reviewer")
        while True:
            boundary_checks(run)
            if run.state.compensation_open() is not None:
                # A rollback's compensations run before the agent goes on.
                compensation_next(run)
                continue
            if run.state.phase == "model" and drain_requested():
                # Between steps: the last one's outcomes are durable, resuming elsewhere exact.
                return drain_release(run)
            if run.state.phase == "model":
                model_turn(run)
            elif run.state.phase == "tools":
                while run.state.next_call < len(run.state.pending):
                    call_next(run)
                    _between_calls_checks(run)
                step_finish(run)
            if run.state.phase == "done" and run.planning:
                plan_finish(run)  # the plan's review opens; the task waits (Paused)
            if run.state.phase == "done":
                finish_success(run)
                return "succeeded"
    except Paused:
        return "paused"
    except LeaseLost as exc:
        log.warning("task %s: %s; stopping without further writes", run.task_id, exc)
        return "lease_lost"
    except StopRun as stop:
        return finish_stopped(run, stop)
    except Exception as exc:  # a bug or an infrastructure failure: fail loudly, keep state
        if connection_lost(exc):
            raise  # not the task's failure: with_lease gives the task back
        if job_timed_out(exc):
            raise  # the job's hard timeout: agent.jobs.run_task settles the task
        log.exception("task %s crashed", run.task_id)
        return finish_stopped(run, StopRun("internal_error", f"{type(exc).__name__}: {exc}"))
    finally:
        run.watchdog.finish()
        run.live.close()
        run.mcp.close()


def boundary_checks(run: Run) -> None:
    """Between model turns: the lease, a global checkpoint round to prepare for, a cancel,
    the session timeout and the budgets."""
    if run.watchdog.lease_lost.is_set():
        raise LeaseLost("heartbeat found the lease taken")
    if run.watchdog.hold_round_id is not None:
        prepare_for_round(run, run.watchdog.hold_round_id)
    # cancel_seen is the task row's flag as of the last durable write, never further back
    # than the previous step; the heartbeat's flag is read every heartbeat.
    if run.watchdog.cancel_requested.is_set() or run.cancel_seen:
        raise StopRun("canceled", "canceled by operator")
    if (elapsed := run.session_elapsed()) > run.session_s:
        run.timeout_event(layer="session", limit_s=run.session_s, elapsed_s=round(elapsed, 3))
        raise StopRun("timeout", f"session timeout: {run.session_s:g}s exceeded (layer: session)")
    budget = run.spec.budget
    if run.state.phase == "model" and run.state.budget.steps >= budget.max_steps:
        raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
    if run.state.budget.tokens > budget.max_tokens:
        raise StopRun(
            "budget_exceeded",
            f"max_tokens={budget.max_tokens} exceeded ({run.state.budget.tokens})",
        )


def _between_calls_checks(run: Run) -> None:
    if run.watchdog.lease_lost.is_set():
        raise LeaseLost("heartbeat found the lease taken")
    if run.watchdog.cancel_requested.is_set():
        raise StopRun("canceled", "canceled by operator")
