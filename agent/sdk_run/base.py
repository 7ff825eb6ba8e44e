"""RunBase, the state every foreign runner (a LangGraph graph, an OpenAI Agents SDK agent, a
Pydantic AI agent run as a task) starts from: the lease's job entry (`job`), the operator's
code (`load`), the run segment's clocks, budget and watchdog, its events and usage, the checks
between steps (`boundary_checks`); and harness_cause, the harness's own exception found
inside what an SDK wrapped it in. How a segment ends is agent.sdk_run.ending's ForeignRun.

A runner supplies its SDK's part: `segment` (load, start or resume, drive, settle), `write_then`
(its fenced write, then a transition in the same transaction) and, where its SDK has its own
ways to end, `ended_by` (an SDK exception -> a StopRun, or an outcome it handled itself)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

from django.conf import settings

from agent.runtime.run import Paused, SessionClock, StopRun, with_lease_loaded
from agent.runtime.watchdog import Watchdog
from harness_base import telemetry
from harness_base.config import harness_config
from tasks import services
from tasks.events import EventType
from tasks.models import Task
from tasks.spec import TaskSpec
from tasks.states import LeaseLost

# The harness's own exceptions: raised from inside an SDK's loop (a tool, a hook), they decide
# how the segment ends whatever the SDK wrapped them in.
HARNESS_EXCEPTIONS: tuple[type[BaseException], ...] = (Paused, LeaseLost, StopRun)


def harness_cause(
    exc: BaseException, ours: tuple[type[BaseException], ...] = HARNESS_EXCEPTIONS
) -> BaseException:
    """The first of `ours` inside `exc` (its exception groups' leaves and their causes and
    contexts), else its first leaf: an SDK may wrap what the harness raised in a tool call (a
    cancel seen, a lost lease, a pause) in its own error or in a task group's."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    first: BaseException | None = None
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            todo[:0] = list(current.exceptions)
            continue
        if isinstance(current, ours):
            return current
        first = first or current
        todo.append(current.__cause__ or current.__context__)
    return first or exc


class RunBase:
    """A foreign run segment's state and bookkeeping (ForeignRun adds how it ends)."""

    # Error classes `<NOUN>_error` and `<NOUN>_not_registered`; the spec's key naming the code.
    NOUN: ClassVar[str] = "agent"
    NAME_KEY: ClassVar[str] = "name"
    # What loading the operator's code raises when it is not there (or not importable): with
    # nothing loaded, the task fails as `<NOUN>_not_registered`; raised by the code once
    # loaded, they are its own error.
    NOT_REGISTERED: ClassVar[tuple[type[BaseException], ...]] = (ImportError, AttributeError)
    # Whether the runner counts model tokens (usage and the max_tokens budget).
    COUNTS_TOKENS: ClassVar[bool] = True

    # The runner's counters, as attributes or properties of its own state.
    step_index: int
    steps_used: int
    tokens_used: int

    def __init__(self, task: Task, worker_id: str, *, loaded: Any = None) -> None:
        # The operator's code (graph or agent) as loaded before the lease was taken; None: not
        # loaded yet, or its loading failed (`load` tries again and names the reason).
        self.loaded = loaded
        self.task = task
        self.task_id = task.id
        self.epoch = task.lease_epoch
        self.worker_id = worker_id
        self.spec = TaskSpec.model_validate(task.spec)
        timeouts = harness_config().timeouts
        budget = self.spec.budget
        self.session_s = budget.session_timeout_s or timeouts.session_s
        self.turn_s = budget.turn_timeout_s or timeouts.turn_s
        self.tool_s = budget.tool_timeout_s or timeouts.tool_s
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.cancel_seen = task.cancel_requested
        self.workspace = task.workspace_path
        self.pending_events: list[Any] = []
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # The run segment's `invoke_agent` span: the parent of the spans made in the SDK's
        # event loop (another thread).
        self.trace_parent = telemetry.current_parent()

    # -- the job ---------------------------------------------------------------------------

    @staticmethod
    def load_code(name: str) -> Any:
        raise NotImplementedError

    @classmethod
    def job(cls, *, task_id: Any) -> str:
        """The RQ job: the operator's code imported, the lease taken, the segment run."""
        return with_lease_loaded(
            task_id=task_id,
            load=cls.load_code,
            name_key=cls.NAME_KEY,
            run=lambda task, worker_id, loaded: cls(task, worker_id, loaded=loaded).execute(),
        )

    def load(self) -> Any:
        """The operator's code: as loaded before the lease, else loaded now."""
        if self.loaded is None:
            self.loaded = self.load_code(getattr(self.spec.agent, self.NAME_KEY))
        return self.loaded

    # -- what the runner supplies ------------------------------------------------------------

    def segment(self) -> str:
        """Load, start or resume, drive the SDK, settle: -> the outcome (or raise)."""
        raise NotImplementedError

    def execute(self) -> str:
        """The segment run to its outcome (agent.sdk_run.ending.ForeignRun)."""
        raise NotImplementedError

    def write_then(self, then: Callable[[], Any]) -> None:
        """The runner's fenced write of what is pending, then `then()` in its transaction."""
        raise NotImplementedError

    def ended_by(self, exc: Exception) -> StopRun | str | None:
        """How the SDK's own exception ends the segment: a stop, an outcome the runner
        handled itself, or None (the agent's error)."""
        return None

    def stopping(self, stop: StopRun) -> None:
        """Before a stop's last write (settle what the stop leaves open)."""

    def closed(self) -> None:
        """After the segment, however it ended (close what it opened)."""

    # -- the shared part ---------------------------------------------------------------------

    def event(self, type: str, payload: dict[str, Any], *, at: datetime | None = None) -> None:
        """An event for the next fenced write (`at`: when it happened, if not now)."""
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id, type=type, payload=payload, step_index=self.step_index, at=at
            )
        )

    def usage(self) -> dict[str, Any]:
        return {
            "current_step": self.step_index,
            "steps_used": self.steps_used,
            **({"tokens_used": self.tokens_used} if self.COUNTS_TOKENS else {}),
            "seconds_used": self.seconds_before + (time.monotonic() - self.run_started),
        }

    def boundary_checks(self, *, model_next: bool = True) -> None:
        """Between steps: the lease, a cancel, the session timeout, the budget (steps only
        before a model turn: the tools of the last one still run)."""
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        if self.session.elapsed_s() - self.human_wait_s > self.session_s:
            self.event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        budget = self.spec.budget
        if model_next and self.steps_used >= budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
        if self.COUNTS_TOKENS and self.tokens_used > budget.max_tokens:
            raise StopRun(
                "budget_exceeded", f"max_tokens={budget.max_tokens} exceeded ({self.tokens_used})"
            )
