"""The end of a run: succeeded with the final answer, or stopped (failed or canceled)."""

from __future__ import annotations

from typing import Any

from agent.runtime.group import wake_parent
from agent.runtime.run import Run, StopRun
from tasks import services
from tasks.agent_state import ErrorInfo
from tasks.events import EventType
from tasks.states import LeaseLost, TaskStatus


def finish_success(run: Run) -> None:
    """The final answer's step, its `task_finished` and the transition: one write."""
    run.event(EventType.TASK_FINISHED, {"result": (run.state.final or "")[:2000]})
    run.commit(
        trigger=None,
        then=lambda _checkpoint: services.task_transition(
            task_id=run.task_id,
            to=TaskStatus.SUCCEEDED,
            expect_epoch=run.epoch,
            reason="final answer",
            fields={"result": run.state.final or "", **run.usage_fields()},
        ),
    )
    wake_parent(run)


def finish_stopped(run: Run, stop: StopRun) -> str:
    run.state.last_error = ErrorInfo(
        error_class=stop.error_class,
        message=stop.message[:2000],
        step_index=run.state.step_index,
    )
    run.event(
        EventType.TASK_STOPPED,
        {"error_class": stop.error_class, "message": stop.message[:2000]},
    )
    try:
        trigger = (
            "after_step"
            if stop.error_class in ("timeout", "budget_exceeded", "validation_failed")
            else None
        )
        ended: list[str] = []
        run.commit(
            trigger=trigger,
            then=lambda _checkpoint: ended.append(
                stop_transition(
                    task_id=run.task_id, epoch=run.epoch, stop=stop, usage=run.usage_fields()
                )
            ),
        )
        to = ended[0]
    except LeaseLost:
        return "lease_lost"
    wake_parent(run)
    return str(to)


def stop_transition(*, task_id: Any, epoch: int, stop: StopRun, usage: dict[str, Any]) -> str:
    """Move a stopped run's task to canceled or failed with its error (the loop's and the
    graph runner's last write); -> the status."""
    to = {
        "canceled": TaskStatus.CANCELED,
        # A rollback's compensation failed for good (agent.runtime.compensate).
        "compensation_failed": TaskStatus.COMPENSATION_FAILED,
    }.get(stop.error_class, TaskStatus.FAILED)
    services.task_transition(
        task_id=task_id,
        to=to,
        expect_epoch=epoch,
        reason=stop.message[:500],
        fields={
            "error_class": stop.error_class,
            "error_message": stop.message[:5000],
            **usage,
        },
    )
    return to
