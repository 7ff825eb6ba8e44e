"""Run's pauses (RunPauses, part of Run: agent.runtime.run): the job ends with the task left
waiting (a review, children, a retry through the scheduler), in the same write as the rest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from django.utils import timezone

from agent.runtime.ends import Paused
from agent.runtime.run_writes import RunWrites
from tasks import services
from tasks.agent_state import ErrorInfo
from tasks.events import EventType
from tasks.states import TaskStatus

log = logging.getLogger(__name__)


class RunPauses(RunWrites):
    """Run's pauses: pause, schedule_retry."""

    def pause(
        self,
        *,
        to: str,
        trigger: str | None,
        reason: str,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], object] | None = None,
    ) -> NoReturn:
        """End the job leaving the task in `to` (waiting_review, waiting_children or
        retry_wait): checkpoint, rows, events, `then(checkpoint)` and the transition commit
        together."""

        def transition(checkpoint: Any) -> None:
            if then is not None:
                then(checkpoint)
            services.task_transition(
                task_id=self.task_id,
                to=to,
                expect_epoch=self.epoch,
                reason=reason,
                fields={"worker_id": "", **(fields or {})},
            )

        self.commit(trigger=trigger, extra=extra, then=transition)
        raise Paused()

    def schedule_retry(
        self, *, attempt: int, delay_s: float, error: ErrorInfo, extra: list[Any] | None = None
    ) -> NoReturn:
        """Back off through RQ's scheduler, never by sleeping: the task waits in retry_wait
        and the job ends; the scheduled job wakes it and resumes from the checkpoint."""
        retry_at = timezone.now() + timedelta(seconds=delay_s)
        self.state.last_error = error
        log.info(
            "task %s: %s error, retry %d in %.1fs",
            self.task_id,
            error.error_class,
            attempt,
            delay_s,
        )
        self.event(
            EventType.RETRY_SCHEDULED,
            {
                # A model retry has no call: no `"call_id": null` (the pages read it as a call).
                **({"call_id": error.call_id} if error.call_id else {}),
                "attempt": attempt,
                "error_class": error.error_class,
                "message": error.message[:500],
                "delay_s": round(delay_s, 3),
                "retry_at": retry_at.isoformat(),
            },
        )
        self.pause(
            to=TaskStatus.RETRY_WAIT,
            trigger="on_retryable_error",
            reason=f"retry in {delay_s:.1f}s after {error.error_class} error",
            extra=extra,
            fields={"retry_at": retry_at, "retry_count": self.task.retry_count + 1},
            then=lambda _checkpoint: services.task_enqueue(task=self.task, delay_s=delay_s),
        )
