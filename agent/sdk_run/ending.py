"""ForeignRun (on RunBase): the transitions a foreign run segment ends with (`wait_for_review`
inside a pause's write, `succeed`, `finish_stopped`) and the one ladder that turns how the
segment ended into the task's outcome (`execute`): a pause, a lost lease, a stop, the SDK's
own ends (`ended_by`), code that is not registered, a lost database connection (raised: the
lease gives the task back), and anything else, the agent's own error."""

from __future__ import annotations

import logging

from agent.runtime.finish import stop_transition
from agent.runtime.run import Paused, StopRun, connection_lost, job_timed_out
from agent.sdk_run.base import RunBase
from tasks import services
from tasks.events import EventType
from tasks.states import LeaseLost, TaskStatus

log = logging.getLogger(__name__)


class ForeignRun(RunBase):
    """One run segment of a foreign agent: from the lease to the job's end."""

    def wait_for_review(self, reason: str) -> None:
        """The task waits for people (inside the pause's write)."""
        services.task_transition(
            task_id=self.task_id,
            to=TaskStatus.WAITING_REVIEW,
            expect_epoch=self.epoch,
            reason=reason[:500],
            fields={"worker_id": ""},
        )

    def succeed(self, result: str, reason: str) -> None:
        """The task succeeded with `result` (inside the last write)."""
        services.task_transition(
            task_id=self.task_id,
            to=TaskStatus.SUCCEEDED,
            expect_epoch=self.epoch,
            reason=reason,
            fields={"result": result, **self.usage()},
        )

    def finish_stopped(self, stop: StopRun) -> str:
        """The task canceled or failed with the stop's error: its last write."""
        self.stopping(stop)
        self.event(
            EventType.TASK_STOPPED,
            {
                "error_class": stop.error_class,
                "message": stop.message[:2000],
                **getattr(stop, "payload", {}),
            },
        )
        ended: list[str] = []
        try:
            self.write_then(
                lambda: ended.append(
                    stop_transition(
                        task_id=self.task_id, epoch=self.epoch, stop=stop, usage=self.usage()
                    )
                )
            )
        except LeaseLost:
            return "lease_lost"
        return str(ended[0])

    def execute(self) -> str:
        """The segment, and the one ladder from how it ended to the task's outcome."""
        self.watchdog.start()
        try:
            return self.segment()
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except Exception as exc:  # the agent's own error: the task fails, its state is kept
            if job_timed_out(exc):
                raise  # the job's hard timeout: agent.jobs.run_task settles the task
            ended = self.ended_by(exc)
            if isinstance(ended, str):
                return ended
            if ended is not None:
                return self.finish_stopped(ended)
            if isinstance(exc, self.NOT_REGISTERED) and self.loaded is None:
                return self.finish_stopped(StopRun(f"{self.NOUN}_not_registered", str(exc)))
            if connection_lost(exc):
                raise  # not the task's failure: with_lease gives the task back
            log.exception("task %s: %s failed", self.task_id, self.NOUN)
            return self.finish_stopped(
                StopRun(f"{self.NOUN}_error", f"{type(exc).__name__}: {exc}")
            )
        finally:
            self.watchdog.finish()
            self.closed()
